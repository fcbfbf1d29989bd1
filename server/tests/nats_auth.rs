//! NATS security with deploy/nats/accounts.conf on a real nats-server: the publisher's user publishes, the edge's
//! user reads (its books equal the simulator's) but cannot publish a line, delete or purge the stream, delete a
//! message, or put or delete a snapshot in the object store (it can fetch one), and a client without credentials
//! is refused, so an edge without them serves no block.

#[allow(clippy::duplicate_mod)]
mod procs;

use std::path::Path;
use std::time::Duration;

use procs::nats::NatsServer;
use procs::{HLBOOK, Proc, counter, get_bytes, wait_health};

const PUB_PASS: &str = "pub-secret-1";
const EDGE_PASS: &str = "edge-secret-2";

fn nats_config(dir: &Path, user: &str, pass: &str) -> std::path::PathBuf {
    let (pw, conf) = (dir.join(format!("{user}.pw")), dir.join(format!("{user}.toml")));
    std::fs::write(&pw, format!("{pass}\n")).unwrap();
    std::fs::write(&conf, format!("[nats]\nuser = \"{user}\"\npassword_file = \"{}\"\n", pw.display())).unwrap();
    conf
}

#[test]
fn edges_read_but_cannot_publish_or_delete_and_strangers_get_nothing() {
    if !procs::nats::available() {
        procs::skip("nats-server is not installed (make setup installs it)");
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let accounts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats/accounts.conf");
    let env = [("HLBOOK_PUBLISHER_PASSWORD", PUB_PASS), ("HLBOOK_EDGE_PASSWORD", EDGE_PASS)];
    // nats-server includes relative to the config file: the shipped accounts go beside the generated one.
    let dir = logs.path().join("nats");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(accounts, dir.join("accounts.conf")).unwrap();
    let nats = NatsServer::start_env(&dir, "include ./accounts.conf", &env);
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "30"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let last = 1_000_000_000 + 29;

    let pub_conf = nats_config(logs.path(), "publisher", PUB_PASS);
    let pub_snaps = logs.path().join("publisher-snapshots");
    #[rustfmt::skip]
    let args = [
        "relay", "--nats", &nats.url(), "--config", pub_conf.to_str().unwrap(), "--node-dir",
        data.path().to_str().unwrap(), "--info-url", &info, "--snapshot-dir", pub_snaps.to_str().unwrap(),
    ];
    let publisher = Proc::start(HLBOOK, &args, &log("pub.log"));
    publisher.wait_line("relay publishing to nats stream", Duration::from_secs(30));

    let source = format!("{}/HL", nats.url());
    let edge = |name: &str, conf: Option<&Path>| {
        let snaps = logs.path().join(format!("snaps-{name}"));
        std::fs::create_dir_all(&snaps).unwrap();
        let mut extra = vec!["--source", &source, "--validate-interval", "0"];
        if let Some(c) = conf {
            extra.extend(["--config", c.to_str().unwrap()]);
        }
        let p = procs::start_serve(Path::new("/nonexistent"), &info, &snaps, &extra, &log(&format!("{name}.log")));
        let base = format!("http://{}", p.wait_line("hlbook listening on", Duration::from_secs(20)));
        let admin = procs::admin_base(&p);
        (p, base, admin)
    };
    let edge_conf = nats_config(logs.path(), "edge", EDGE_PASS);
    let (mut good, base, admin) = edge("edge", Some(&edge_conf));
    let h = wait_health(&base, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    assert_eq!(counter(&h, "gaps"), 0, "{h}");
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));

    // Without credentials: refused at connect, and an edge without them says why and applies nothing from NATS.
    let (mut stranger, base2, _) = edge("stranger", None);
    let h = wait_health(&base2, Duration::from_secs(60), |h| {
        h["sources"][0]["missing"].as_str().is_some_and(|m| m.to_lowercase().contains("authorization"))
    });
    assert_eq!(counter(&h, "source_connects"), 0, "{h}");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        assert!(async_nats::connect(nats.url()).await.is_err(), "no credentials, no connection");
        let edge = async_nats::ConnectOptions::with_user_and_password("edge".into(), EDGE_PASS.into())
            .connect(nats.url())
            .await
            .expect("the edge user connects");
        let js = async_nats::jetstream::new(edge);
        let mut stream = js.get_stream("HL").await.expect("edges read stream info");
        let before = stream.info().await.unwrap().state.clone();
        let published = async {
            js.publish("hl.by-block.fills", "{}".into())
                .await
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())
        };
        assert!(published.await.is_err(), "an edge cannot publish a line");
        assert!(js.delete_stream("HL").await.is_err(), "an edge cannot delete the stream");
        assert!(stream.delete_message(before.first_sequence).await.is_err(), "an edge cannot delete a message");
        assert!(stream.purge().await.is_err(), "an edge cannot purge the stream");
        let after = stream.info().await.unwrap().state.clone();
        assert_eq!((after.messages, after.last_sequence), (before.messages, before.last_sequence));
        snapshots_are_read_only(&js).await;
    });
    assert!(good.stop().success() && stranger.stop().success());
}

/// The edge user reads the publisher's snapshot (the one it takes on start) but cannot put or delete one.
async fn snapshots_are_read_only(js: &async_nats::jetstream::Context) {
    use futures_util::StreamExt;
    let store = js.get_object_store("HL_SNAPSHOTS").await.expect("edges read the snapshot store");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let name = loop {
        if let Some(info) = store.list().await.unwrap().next().await {
            break info.unwrap().name;
        }
        assert!(std::time::Instant::now() < deadline, "the publisher stored no snapshot");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut object = store.get(&name).await.expect("edges fetch a snapshot");
    let mut bytes = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut object, &mut bytes).await.unwrap();
    let json = zstd::decode_all(&bytes[..]).expect("a zstd-compressed snapshot");
    assert!(json.starts_with(b"["), "a node snapshot, not {} bytes of something else", json.len());
    assert!(store.put("snapshot-1.json", &mut &b"[1,[]]"[..]).await.is_err(), "an edge cannot put a snapshot");
    assert!(store.delete(&name).await.is_err(), "an edge cannot delete a snapshot");
    assert!(store.get(&name).await.is_ok(), "the snapshot is still there");
    assert!(store.info("snapshot-1.json").await.is_err(), "and nothing was put");
}

/// A self-signed CA and a server certificate for 127.0.0.1 that it signed, made with `openssl` in `dir`; false
/// when openssl is missing.
fn make_ca(dir: &Path) -> bool {
    let run = |args: &[&str]| {
        let Ok(out) = std::process::Command::new("openssl").args(args).current_dir(dir).output() else { return false };
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        true
    };
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    let key = ["-newkey", "rsa:2048", "-nodes"];
    run(&[
        &["req", "-x509"][..],
        &key,
        &["-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hlbook test CA"],
    ]
    .concat())
        && run(&[&["req"][..], &key, &["-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=127.0.0.1"]]
            .concat())
        && run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ])
}

/// TLS with a self-signed CA: publisher and edge given the CA (`nats.tls_ca_file`) carry lines end to end and the
/// edge's books equal the simulator's; a client that does not trust the CA cannot connect.
#[test]
fn lines_cross_tls_signed_by_our_own_ca() {
    if !procs::nats::available() {
        procs::skip("nats-server is not installed (make setup installs it)");
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let pki = logs.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    if !make_ca(&pki) {
        procs::skip("openssl is not installed");
        return;
    }
    let p = |f: &str| pki.join(f).display().to_string();
    let tls = format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n}}",
        p("server.pem"),
        p("server-key.pem"),
        p("ca.pem")
    );
    let nats = NatsServer::start(&logs.path().join("nats"), &tls);
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "20"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let last = 1_000_000_000 + 19;
    let conf = log("tls.toml");
    std::fs::write(&conf, format!("[nats]\ntls_ca_file = \"{}\"\n", p("ca.pem"))).unwrap();
    let args = ["relay", "--nats", &nats.url(), "--config", conf.to_str().unwrap(), "--node-dir"];
    let publisher = Proc::start(HLBOOK, &[&args[..], &[data.path().to_str().unwrap()]].concat(), &log("pub.log"));
    publisher.wait_line("relay publishing to nats stream", Duration::from_secs(30));
    let source = format!("{}/HL", nats.url());
    let extra = ["--source", &source, "--validate-interval", "0", "--config", conf.to_str().unwrap()];
    let snaps = logs.path().join("snaps");
    std::fs::create_dir_all(&snaps).unwrap();
    let mut edge = procs::start_serve(Path::new("/nonexistent"), &info, &snaps, &extra, &log("edge.log"));
    let base = format!("http://{}", edge.wait_line("hlbook listening on", Duration::from_secs(20)));
    let admin = procs::admin_base(&edge);
    wait_health(&base, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let untrusting = rt.block_on(async_nats::ConnectOptions::new().require_tls(true).connect(nats.url()));
    assert!(untrusting.is_err(), "a client without our CA cannot connect");
    assert!(edge.stop().success());
}
