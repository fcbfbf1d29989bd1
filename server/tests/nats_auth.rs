//! NATS security with deploy/nats/accounts.conf on a real nats-server: the publisher's user publishes, the edge's
//! user reads (its books equal the simulator's) but cannot publish a line, delete or purge the stream, delete a
//! message, or put or delete a snapshot in the object store (it can fetch one), and a client without credentials
//! is refused, so an edge without them serves no block. An edge refused the live subscription says so (WARN and
//! `nats_permission_denied`) and reads from the stream.

#[allow(clippy::duplicate_mod)]
mod procs;

use std::path::Path;
use std::time::Duration;

use procs::nats::{EDGE_PASSWORD, NatsServer, PUBLISHER_PASSWORD, connect_as_edge, relay, user_config};
use procs::{counter, get_bytes, wait_health};

#[test]
fn edges_read_but_cannot_publish_or_delete_and_strangers_get_nothing() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let nats = NatsServer::start_with_accounts(&logs.path().join("nats"));
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "30"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let last = 1_000_000_000 + 29;

    let pub_conf = user_config(logs.path(), "publisher", PUBLISHER_PASSWORD, "");
    let pub_snaps = logs.path().join("publisher-snapshots");
    let extra = ["--info-url", &info, "--snapshot-dir", pub_snaps.to_str().unwrap()];
    let _publisher = relay(&nats.url(), data.path(), &pub_conf, &extra, &log("pub.log"), Duration::from_secs(30));

    let source = nats.source();
    let edge = |name: &str, conf: Option<&Path>| {
        let mut extra = vec!["--source", &source, "--validate-interval", "0"];
        if let Some(c) = conf {
            extra.extend(["--config", c.to_str().unwrap()]);
        }
        let snaps = logs.path().join(format!("snaps-{name}"));
        procs::start_info_edge(&info, &snaps, &extra, &log(&format!("{name}.log")))
    };
    let edge_conf = user_config(logs.path(), "edge", EDGE_PASSWORD, "");
    let (mut good, _, admin) = edge("edge", Some(&edge_conf));
    let h = wait_health(&admin, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    assert_eq!(counter(&h, "gaps"), 0, "{h}");
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));

    // Without credentials: refused at connect, and an edge without them says why and applies nothing from NATS.
    let (mut stranger, _, admin2) = edge("stranger", None);
    let h = wait_health(&admin2, Duration::from_secs(60), |h| {
        h["sources"][0]["missing"].as_str().is_some_and(|m| m.to_lowercase().contains("authorization"))
    });
    assert_eq!(counter(&h, "source_connects"), 0, "{h}");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        assert!(async_nats::connect(nats.url()).await.is_err(), "no credentials, no connection");
        let edge = connect_as_edge(&nats.url()).await;
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
    if !procs::nats::available_or_skip() {
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
    let _publisher = relay(&nats.url(), data.path(), &conf, &[], &log("pub.log"), Duration::from_secs(30));
    let source = nats.source();
    let extra = ["--source", &source, "--validate-interval", "0", "--config", conf.to_str().unwrap()];
    let (mut edge, base, admin) = procs::start_info_edge(&info, &logs.path().join("snaps"), &extra, &log("edge.log"));
    wait_health(&base, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // This test process links rustls with two providers (ring, aws-lc-rs), so it names one, as hlbook does.
    let _ = async_nats::rustls::crypto::ring::default_provider().install_default();
    let untrusting = rt.block_on(async_nats::ConnectOptions::new().require_tls(true).connect(nats.url()));
    assert!(untrusting.is_err(), "a client without our CA cannot connect");
    assert!(edge.stop().success());
}

/// An edge whose user may not subscribe to the line subjects (here: permissions written for another prefix) is
/// refused the live path: it says so in a WARN and counts it (`nats_permission_denied`), takes no line from the
/// subject, and still ends with the simulator's books from the stream, never a silent fallback.
#[test]
fn a_refused_live_subscription_is_a_warning_and_a_count_not_a_silent_fallback() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let nats_dir = logs.path().join("nats");
    let nats = NatsServer::start_with_accounts(&nats_dir);
    let env = [("PASSWORD", EDGE_PASSWORD), ("STREAMS", "HL:hx"), ("NATS_RELOAD", "true")];
    let out = procs::nats::edge_sh(&nats_dir, &["add", "narrow"], &env);
    assert!(out.status.success(), "edge.sh add narrow: {}", String::from_utf8_lossy(&out.stderr));
    let _ = std::process::Command::new("kill").arg("-HUP").arg(nats.pid().to_string()).status();
    wait_log_count(&nats_dir.join("nats-0.log"), "Reloaded server configuration", 1);
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "300"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let last = 1_000_000_000 + 299;
    let pub_conf = user_config(logs.path(), "publisher", PUBLISHER_PASSWORD, "");
    let _publisher =
        relay(&nats.url(), data.path(), &pub_conf, &["--info-url", ""], &log("pub.log"), Duration::from_secs(30));
    let snapshot = log("start.json");
    let start = procs::sim_snapshot(&info, &snapshot).height();
    assert!(start < last, "the simulator finished before the edge started");

    let conf = user_config(logs.path(), "narrow", EDGE_PASSWORD, "");
    let source = nats.source();
    #[rustfmt::skip]
    let args = [
        "serve", "--source", &source, "--config", conf.to_str().unwrap(), "--mode", "by-block",
        "--snapshot-file", snapshot.to_str().unwrap(), "--info-url", "", "--listen", "127.0.0.1:0",
        "--admin-listen", "127.0.0.1:0", "--validate-interval", "0",
    ];
    let mut edge = procs::Proc::start(procs::HLBOOK, &args, &log("edge.log"));
    edge.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = procs::admin_base(&edge);
    let h = wait_health(&admin, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    assert!(counter(&h, "nats_permission_denied") >= 1, "{h}");
    assert_eq!(counter(&h, "nats_live_lines"), 0, "{h}");
    assert_eq!(counter(&h, "gaps"), 0, "{h}");
    let text = std::fs::read_to_string(log("edge.log")).unwrap();
    let warned = text.lines().any(|l| l.contains("WARN") && l.to_lowercase().contains("permissions violation"));
    assert!(warned, "no WARN naming the refusal in the edge's log:\n{text}");
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));
    assert!(edge.stop().success());
}

/// Waits (bounded) until `log` says `needle` at least `n` times.
fn wait_log_count(log: &Path, needle: &str, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(log).unwrap_or_default().matches(needle).count() < n {
        assert!(std::time::Instant::now() < deadline, "{} never said {needle:?} {n} times", log.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}
