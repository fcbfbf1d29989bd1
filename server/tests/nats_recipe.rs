//! The one-host NATS recipe of docs/scale-out.md, with the shipped files and the documented commands, paths moved
//! under a test directory (systemd does not run here, so each unit's own command line is started as systemd
//! would): `deploy/install.sh --relay` staged, the docs' openssl commands for TLS, nats-server started with the
//! drop-in's `ExecStart` and `EnvironmentFile`, the relay with its unit's command line and the shipped relay.toml,
//! and two edges added with `hlbook-nats-edge add` (deploy/nats/edge.sh) and configured as the docs show.
//!
//! Checks: both edges end with the simulator's books and took lines from the subjects (the live path works under
//! the shipped permissions, with nothing refused); the relay's `/metrics` shows its height and ack latency; one
//! edge's credentials cannot read the other's inbox, delete its consumer, or create consumers past the account's
//! limit; and a revoked edge is refused while the other goes on to the last block.

#[allow(clippy::duplicate_mod)]
mod procs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use procs::nats::{NATS_SERVER, logged_port, wait_log};
use procs::{HLBOOK, Proc, counter, get_bytes, wait_health};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A TOML file's quoted absolute paths of an installed host moved under `stage`.
fn staged(text: &str, stage: &Path) -> String {
    let s = stage.display();
    text.replace("\"/etc/", &format!("\"{s}/etc/")).replace("\"/var/lib/", &format!("\"{s}/var/lib/"))
}

/// The fenced block of `lang` that follows `marker` in `doc`.
fn block_after<'a>(doc: &'a str, marker: &str, lang: &str) -> &'a str {
    let at = doc.find(marker).unwrap_or_else(|| panic!("the docs lost {marker:?}"));
    let fence = format!("```{lang}\n");
    let start = at + doc[at..].find(&fence).unwrap() + fence.len();
    &doc[start..start + doc[start..].find("```").unwrap()]
}

/// The docs' TLS commands, run in `pki` with `/etc/` under `stage` (and no `-g nats`: the test's files are its own).
fn make_tls(doc: &str, stage: &Path, pki: &Path) -> bool {
    if Command::new("openssl").arg("version").output().is_err() {
        return false;
    }
    std::fs::create_dir_all(pki).unwrap();
    let commands = block_after(doc, "### TLS", "sh");
    for line in commands.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.replace(" /etc/", &format!(" {}/etc/", stage.display())).replace(" -g nats", "");
        let out = Command::new("sh").arg("-c").arg(&line).current_dir(pki).output().unwrap();
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    }
    true
}

/// nats-server as the drop-in starts it: its `ExecStart` and `EnvironmentFile`, on the staged config with the
/// client and monitoring ports the server picks (monitoring on loopback, as shipped). Returns it, its client port
/// and its monitoring port.
fn start_nats(stage: &Path, log: &Path) -> (Proc, u16, u16) {
    let dropin = read(&stage.join("etc/systemd/system/nats-server.service.d/hlbook.conf"));
    let exec = dropin.lines().filter_map(|l| l.strip_prefix("ExecStart=")).find(|l| !l.is_empty()).unwrap();
    let env_file = dropin.lines().find_map(|l| l.strip_prefix("EnvironmentFile=")).unwrap();
    assert!(dropin.lines().any(|l| l == "StateDirectory=nats"), "the drop-in creates /var/lib/nats");
    std::fs::create_dir_all(stage.join("var/lib/nats")).unwrap();
    let conf_path = stage.join("etc/nats/nats-server.conf");
    let conf = read(&conf_path);
    for shipped in ["listen: 0.0.0.0:4222", "http: 127.0.0.1:8222", "store_dir: /var/lib/nats/jetstream"] {
        assert!(conf.lines().any(|l| l.trim() == shipped), "nats-server.conf lost {shipped:?}");
    }
    let s = stage.display();
    let conf = conf
        .replace("listen: 0.0.0.0:4222", "listen: 127.0.0.1:-1")
        .replace("http: 127.0.0.1:8222", "http: 127.0.0.1:-1")
        .replace(" /var/lib/", &format!(" {s}/var/lib/"))
        .replace(" /etc/", &format!(" {s}/etc/"));
    std::fs::write(&conf_path, conf).unwrap();
    let env: Vec<(String, String)> = read(&stage.join(&env_file[1..]))
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let words: Vec<String> = exec.split_whitespace().map(|w| w.replace("/etc/", &format!("{s}/etc/"))).collect();
    assert_eq!(words[0], "/usr/sbin/nats-server", "the drop-in runs Debian's nats-server");
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let p = Proc::start_env(NATS_SERVER, &args, &env, log);
    wait_log(log, "Server is ready", Duration::from_secs(30));
    let text = wait_log(log, "Starting http monitor on 127.0.0.1:", Duration::from_secs(1));
    let at = text.find("Starting http monitor on 127.0.0.1:").unwrap();
    let monitor = text[at..].lines().next().unwrap().rsplit(':').next().unwrap().trim().parse().unwrap();
    (p, logged_port(log, "client"), monitor)
}

/// The relay with its unit's command line, relay.env's settings pointed at the simulator and NATS, and the staged
/// relay.toml asking the simulator's info server. Returns it and its admin base.
fn start_relay(stage: &Path, data: &Path, ports: (u16, u16), info: &str, log: &Path) -> (Proc, String) {
    let toml_path = stage.join("etc/hlbook/relay.toml");
    let toml = staged(&read(&toml_path), stage).replace("http://127.0.0.1:3001/info", info);
    std::fs::write(&toml_path, toml).unwrap();
    let env: Vec<(String, String)> = read(&stage.join("etc/hlbook/relay.env"))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            let v = match k {
                "NODE_DIR" => data.display().to_string(),
                "NATS_URL" => v.replace(":4222", &format!(":{}", ports.0)),
                "NATS_MONITOR" => v.replace(":8222", &format!(":{}", ports.1)),
                "ADMIN_LISTEN" => "127.0.0.1:0".into(),
                _ => v.to_string(),
            };
            (k.to_string(), v)
        })
        .collect();
    let unit = read(&stage.join("etc/systemd/system/hlbook-relay.service"));
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let words: Vec<String> = exec
        .split_whitespace()
        .map(|w| if w.starts_with('/') { format!("{}{w}", stage.display()) } else { w.to_string() })
        .map(|w| env.iter().fold(w, |w, (k, v)| w.replace(&format!("${{{k}}}"), v)))
        .collect();
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let p = Proc::start(&words[0], &args, log);
    let admin = p.wait_line("relay admin listening on", Duration::from_secs(30));
    let said = std::panic::catch_unwind(|| p.wait_line("relay publishing to nats stream HL", Duration::from_secs(60)));
    assert!(said.is_ok(), "the relay did not publish:\n{}", read(log));
    (p, format!("http://{admin}"))
}

/// The installed `hlbook-nats-edge ARGS` on the staged config, nats-server reloaded as systemd's `ExecReload`
/// does (SIGHUP).
fn nats_edge(stage: &Path, args: &[&str], nats_pid: u32) -> std::process::Output {
    Command::new(stage.join("usr/local/sbin/hlbook-nats-edge"))
        .args(args)
        .env("NATS_DIR", stage.join("etc/nats"))
        .env("NATS_RELOAD", format!("kill -HUP {nats_pid}"))
        .output()
        .unwrap()
}

/// `hlbook-nats-edge add NAME`; the password it printed.
fn add_edge(stage: &Path, name: &str, nats_pid: u32) -> String {
    let out = nats_edge(stage, &["add", name], nats_pid);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "edge.sh add {name}: {text}{}", String::from_utf8_lossy(&out.stderr));
    text.lines().find(|l| !l.starts_with('#') && !l.is_empty()).expect("a password line").to_string()
}

/// An edge configured as the docs show, under `dir`; returns it with its public and admin bases.
fn start_edge(doc: &str, dir: &Path, stage: &Path, name: &str, pass: &str, port: u16, log: &Path) -> Edge {
    let conf = block_after(doc, "Each edge's `/etc/hlbook/hlbook.toml`", "toml");
    let pw = dir.join(format!("{name}.pw"));
    std::fs::write(&pw, format!("{pass}\n")).unwrap();
    let conf = conf
        .replace("NODE_HOST:4222", &format!("127.0.0.1:{port}"))
        .replace("tokyo-1", name)
        .replace("/etc/hlbook/nats-edge.pw", pw.to_str().unwrap())
        .replace("\"/etc/", &format!("\"{}/etc/", stage.display()));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, conf).unwrap();
    let snaps = dir.join(format!("snaps-{name}"));
    #[rustfmt::skip]
    let args = [
        "serve", "--config", path.to_str().unwrap(), "--mode", "by-block", "--snapshot-dir", snaps.to_str().unwrap(),
        "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--validate-interval", "0",
    ];
    let p = Proc::start(HLBOOK, &args, log);
    let base = format!("http://{}", p.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = procs::admin_base(&p);
    Edge { proc: p, base, admin, pw, name: name.to_string() }
}

struct Edge {
    proc: Proc,
    base: String,
    admin: String,
    pw: PathBuf,
    name: String,
}

/// The value of an unlabelled or labelled sample in a Prometheus text page.
fn sample(text: &str, name: &str) -> f64 {
    let line = text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '));
    line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[test]
fn the_documented_one_host_recipe_serves_two_edges_live_under_the_shipped_permissions() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let log = |n: &str| w.join(n);
    let stage = w.join("stage");
    let out = Command::new("bash")
        .arg(repo().join("deploy/install.sh"))
        .args(["--relay", "--binary", HLBOOK])
        .env("DESTDIR", &stage)
        .output()
        .unwrap();
    assert!(out.status.success(), "install.sh --relay: {}", String::from_utf8_lossy(&out.stderr));
    let doc = read(&repo().join("docs/scale-out.md"));
    if !make_tls(&doc, &stage, &w.join("pki")) {
        procs::skip("openssl is not installed");
        return;
    }
    let (mut nats, port, monitor) = start_nats(&stage, &log("nats.log"));
    let data = w.join("data");
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "600"]].concat();
    let (_sim, info) = procs::start_sim(&data, &market, &log("sim.log"));
    let last = 1_000_000_000 + 599;
    let (_relay, relay_admin) = start_relay(&stage, &data, (port, monitor), &info, &log("relay.log"));

    let nats_pid = nats.pid().expect("nats-server runs");
    let (p1, p2) = (add_edge(&stage, "edge1", nats_pid), add_edge(&stage, "edge2", nats_pid));
    let deadline = Instant::now() + Duration::from_secs(10);
    while read(&log("nats.log")).matches("Reloaded server configuration").count() < 2 {
        assert!(Instant::now() < deadline, "nats-server did not reload twice:\n{}", read(&log("nats.log")));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut e1 = start_edge(&doc, w, &stage, "edge1", &p1, port, &log("edge1.log"));
    let mut e2 = start_edge(&doc, w, &stage, "edge2", &p2, port, &log("edge2.log"));
    for e in [&e1, &e2] {
        let h = wait_health(&e.admin, Duration::from_secs(120), |h| counter(h, "nats_live_lines") > 0);
        assert_eq!(counter(&h, "nats_permission_denied"), 0, "{}: {h}", e.name);
    }

    let metrics = String::from_utf8(get_bytes(&format!("{relay_admin}/metrics")).expect("relay /metrics")).unwrap();
    assert!(sample(&metrics, "hlbook_relay_height{stream=\"diffs\"}") > 1e9, "{metrics}");
    assert!(sample(&metrics, "hlbook_relay_ack_seconds_count") > 0.0, "{metrics}");
    assert_eq!(sample(&metrics, "hlbook_relay_connected"), 1.0);
    assert_eq!(sample(&metrics, "hlbook_nats_server_up"), 1.0, "nats-server's figures through the relay");
    assert!(sample(&metrics, "hlbook_nats_server_connections") >= 4.0, "relay, keeper and two edges: {metrics}");
    alerts_use_what_the_relay_exports(&metrics);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(edges_are_kept_apart(&format!("127.0.0.1:{port}"), &stage, &e1, &e2));

    // Revoked: edge2 is refused at once, and edge1 goes on to the last block with the simulator's books.
    let out = nats_edge(&stage, &["revoke", "edge2"], nats_pid);
    assert!(out.status.success(), "edge.sh revoke: {}", String::from_utf8_lossy(&out.stderr));
    wait_health(&e2.admin, Duration::from_secs(60), |h| {
        h["sources"][0]["missing"].as_str().is_some_and(|m| m.to_lowercase().contains("authorization"))
    });
    let h = wait_health(&e1.admin, Duration::from_secs(180), |h| h["height"].as_u64() == Some(last));
    for zero in ["gaps", "broken_blocks", "inconsistencies", "nats_permission_denied"] {
        assert_eq!(counter(&h, zero), 0, "edge1 {zero}: {h}");
    }
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{}/l4snapshot", e1.admin)).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, w, last));
    let e2h = procs::get_json(&format!("{}/health", e2.base)).unwrap();
    eprintln!("edge1 live lines {}, edge2 stopped at {}", counter(&h, "nats_live_lines"), e2h["height"]);
    assert!(e1.proc.stop().success() && e2.proc.stop().success());
    nats.stop();
}

/// Every relay and nats-server metric the shipped alert rules and dashboard read is one the running relay exports.
fn alerts_use_what_the_relay_exports(metrics: &str) {
    let rules =
        read(&repo().join("deploy/prometheus/hlbook-alerts.yml")) + &read(&repo().join("deploy/grafana/hlbook.json"));
    let mut names: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("hlbook_relay_") || w.starts_with("hlbook_nats_server_"))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() >= 5, "{names:?}");
    for n in names {
        let base = n.trim_end_matches("_bucket");
        assert!(
            metrics.contains(&format!("# TYPE {base} ")),
            "the alert rules read {n}, which the relay does not export"
        );
    }
}

/// edge1's credentials, as its hlbook connects: another edge's inbox is refused (counted, as on an edge), its
/// consumer cannot be deleted, and consumers past the account's limit are refused.
async fn edges_are_kept_apart(url: &str, stage: &Path, e1: &Edge, e2: &Edge) {
    use hlbook::ingest::nats::{NatsConfig, Watch, connect};
    let cfg = |e: &Edge| NatsConfig {
        user: e.name.clone(),
        name: e.name.clone(),
        password_file: Some(e.pw.clone()),
        tls_ca_file: Some(stage.join("etc/hlbook/nats-ca.pem")),
        ..NatsConfig::default()
    };
    let denied = Arc::new(AtomicU64::new(0));
    let watch = Watch { denied: Some(denied.clone()), ..Watch::default() };
    let one = connect(url, &cfg(e1), "test as edge1", watch).await.expect("edge1 connects");
    let _sub = one.subscribe("_INBOX_edge2.>").await.unwrap();
    one.flush().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while denied.load(Relaxed) == 0 {
        assert!(Instant::now() < deadline, "subscribing to edge2's inbox was not refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let js = async_nats::jetstream::new(one);
    assert!(js.delete_consumer_from_stream("edge2", "HL").await.is_err(), "edge1 deleted edge2's consumer");
    let two = connect(url, &cfg(e2), "test as edge2", Watch::default()).await.expect("edge2 connects");
    let two = async_nats::jetstream::new(two);
    let hl = two.get_stream("HL").await.unwrap();
    assert!(hl.consumer_info("edge2").await.is_ok(), "edge2's consumer is still there");

    // The only consumers an edge may name freely are the short-lived ones that read a snapshot: the account's
    // max_consumers stops them (they go by themselves after a second without use).
    let snaps = js.get_stream("OBJ_HL_SNAPSHOTS").await.unwrap();
    let mut made = 0;
    let refused = loop {
        let c = async_nats::jetstream::consumer::pull::Config {
            inactive_threshold: Duration::from_secs(1),
            ..Default::default()
        };
        match snaps.create_consumer(c).await {
            Ok(_) => made += 1,
            Err(e) => break e.to_string(),
        }
        assert!(made <= 500, "500 consumers made and no limit met");
    };
    assert!(refused.contains("maximum consumers"), "refused for another reason after {made}: {refused}");
}
