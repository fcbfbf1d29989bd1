//! A region as docs/scale-out.md lays it out: the hub (the node's host, JetStream domain `hub`, the shipped accounts)
//! and a leaf node (domain `tokyo`, the same accounts for its edges) joined by a leaf connection; the region's
//! mirrors of the stream and the snapshot store made with `hlbook relay --mirror-from hub`; two edges on the leaf
//! reading only the mirrors, with no route to the hub's JetStream (edge2 through its domain's API, `nats.domain`,
//! with the permissions `DOMAIN=tokyo edge.sh add` writes). Both end with the simulator's books through a
//! publisher restart, and the messages the hub sends the leaf grow with the lines, not with the edges (counted
//! on the hub's `/leafz`). The leaf's user on the hub (`edge.sh add-leaf`) carries what the mirrors and the
//! region's edges need and nothing else: no stream deleted across it, no client login with it.

#[allow(clippy::duplicate_mod)]
mod procs;

use std::path::Path;
use std::time::Duration;

use procs::nats::{EDGE_PASSWORD, NatsServer, PUBLISHER_PASSWORD, edge_sh, relay, user_config, wait_log};
use procs::{HLBOOK, Proc, counter, get_bytes, get_json, wait_health};

/// Messages and bytes the hub sent its leaf so far (`/leafz`).
fn hub_to_leaf(monitor: &str) -> (u64, u64) {
    let l = get_json(&format!("{monitor}/leafz")).expect("/leafz");
    let leaf = &l["leafs"][0];
    (leaf["out_msgs"].as_u64().unwrap_or(0), leaf["out_bytes"].as_u64().unwrap_or(0))
}

/// Stream `HL`'s last sequence at the hub (a client of the hub as the publisher).
fn hub_lines(rt: &tokio::runtime::Runtime, url: &str) -> u64 {
    rt.block_on(async {
        let c = async_nats::ConnectOptions::with_user_and_password("publisher".into(), PUBLISHER_PASSWORD.into())
            .custom_inbox_prefix("_INBOX_publisher")
            .connect(url)
            .await
            .unwrap();
        let js = async_nats::jetstream::new(c);
        js.get_stream("HL").await.unwrap().info().await.unwrap().state.last_sequence
    })
}

fn edge(source: &str, conf: &Path, dir: &Path, name: &str) -> (Proc, String, String) {
    let snaps = dir.join(format!("snaps-{name}"));
    #[rustfmt::skip]
    let args = [
        "serve", "--source", source, "--config", conf.to_str().unwrap(), "--mode", "by-block", "--info-url", "",
        "--snapshot-dir", snaps.to_str().unwrap(), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
        "--validate-interval", "0",
    ];
    let p = Proc::start(HLBOOK, &args, &dir.join(format!("{name}.log")));
    let base = format!("http://{}", p.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = procs::admin_base(&p);
    (p, base, admin)
}

/// The password of the hub's user for the leaf connection (`edge.sh add-leaf leaf-tokyo`).
const LEAF_PASSWORD: &str = "leaf-secret-3";
/// The password of the leaf's all-permissions user `probe`.
const PROBE: &str = "probe-secret-4";

/// What the leaf's user lets through, tried from the leaf by `probe` (every permission in the leaf's account): a
/// snapshot request reaches the publisher and its answer comes back (the region's edges need both), but asking
/// the hub's JetStream to delete the stream gets no answer, and the stream is still there; the hub refuses the
/// leaf's credentials to a client.
fn leaf_user_is_narrow(rt: &tokio::runtime::Runtime, hub_url: &str, leaf_url: &str) {
    rt.block_on(async {
        let probe = async_nats::ConnectOptions::with_user_and_password("probe".into(), PROBE.into())
            .custom_inbox_prefix("_INBOX_probe")
            .connect(leaf_url)
            .await
            .expect("probe connects to the leaf");
        let ask = |subject: &'static str, body: &'static str| {
            let req = async_nats::Request::new().payload(body.into()).timeout(Some(Duration::from_secs(30)));
            probe.send_request(subject, req)
        };
        let answer =
            ask("hl.snapshot.request", r#"{"min_height":1}"#).await.expect("a snapshot answer across the leaf");
        assert!(String::from_utf8_lossy(&answer.payload).contains("stored"), "{answer:?}");
        let deleted = ask("$JS.hub.API.STREAM.DELETE.HL", "").await;
        assert!(deleted.is_err(), "the leaf's user let a stream delete through: {deleted:?}");
        let leaf_login = async_nats::ConnectOptions::with_user_and_password("leaf-tokyo".into(), LEAF_PASSWORD.into())
            .connect(hub_url)
            .await;
        assert!(leaf_login.is_err(), "the leaf's credentials logged in as a client");
    });
    assert!(hub_lines(rt, hub_url) > 0, "the hub's stream is gone");
}

#[test]
fn edges_behind_a_leaf_read_the_regional_mirror_and_each_line_crosses_once() {
    region(true);
}

/// With `nats.live_subjects = false` the region's edges read only the leaf's mirror: one copy of each line
/// crosses the WAN, at the cost of the mirror's delay on the edges' lines.
#[test]
fn edges_without_the_live_path_take_one_copy_per_line_over_the_leaf() {
    region(false);
}

/// Two edges on a leaf read the region's mirror (live path on or off) through a publisher restart, end with the
/// simulator's books, and the hub→leaf link carries a bounded number of copies per line whatever the edges.
fn region(live: bool) {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = logs.path();

    let hub_extra = "leafnodes {\n  listen: 127.0.0.1:-1\n}\nhttp: 127.0.0.1:-1\n";
    let hub = NatsServer::start_accounts_in(&w.join("hub"), &[], "hub", hub_extra);
    let out = edge_sh(
        &w.join("hub"),
        &["add-leaf", "leaf-tokyo"],
        &[("PASSWORD", LEAF_PASSWORD), ("NATS_RELOAD", &format!("kill -HUP {}", hub.pid()))],
    );
    assert!(out.status.success(), "edge.sh add-leaf: {}", String::from_utf8_lossy(&out.stderr));
    let hub_log = w.join("hub/nats-0.log");
    wait_log(&hub_log, "Reloaded server configuration", Duration::from_secs(10));
    let text = wait_log(&hub_log, "Starting http monitor on 127.0.0.1:", Duration::from_secs(5));
    let at = text.find("Starting http monitor on ").unwrap() + "Starting http monitor on ".len();
    let monitor = format!("http://{}", text[at..].lines().next().unwrap().trim());
    let leaf_port = hub.listening("leafnode");
    let remote = format!(
        "leafnodes {{\n  remotes: [{{ urls: [\"nats-leaf://leaf-tokyo:{LEAF_PASSWORD}@127.0.0.1:{leaf_port}\"], account: HLBOOK }}]\n}}\n"
    );
    let leaf = NatsServer::start_accounts_in(&w.join("leaf"), &["edge1"], "tokyo", &remote);
    let leaf_log = w.join("leaf/nats-0.log");
    wait_log(&leaf_log, "Leafnode connection created", Duration::from_secs(30));
    // A user of the leaf's account with every permission, to try the leaf connection with; then edge2, which
    // reads through its domain's API (`nats.domain`), with the permissions `DOMAIN=tokyo` writes.
    std::fs::write(w.join("leaf/edges/probe.conf"), format!("  {{ user: \"probe\", password: \"{PROBE}\" }}\n"))
        .unwrap();
    let hup = format!("kill -HUP {}", leaf.pid());
    let env = [("PASSWORD", EDGE_PASSWORD), ("DOMAIN", "tokyo"), ("NATS_RELOAD", hup.as_str())];
    let out = edge_sh(&w.join("leaf"), &["add", "edge2"], &env);
    assert!(out.status.success(), "edge.sh add edge2: {}", String::from_utf8_lossy(&out.stderr));
    wait_log(&leaf_log, "Reloaded server configuration", Duration::from_secs(10));

    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "700"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &w.join("sim.log"));
    let last = 1_000_000_000 + 699;
    let pub_conf = user_config(w, "publisher", PUBLISHER_PASSWORD, "");
    let snaps = w.join("relay-snaps");
    let extra = ["--info-url", &info, "--snapshot-dir", snaps.to_str().unwrap()];
    let mut publisher =
        relay(&hub.url(), data.path(), &pub_conf, &extra, &w.join("relay1.log"), Duration::from_secs(30));

    // The region's mirrors, made on the leaf with its own publisher user.
    let mirror = Proc::start(
        HLBOOK,
        &["relay", "--nats", &leaf.url(), "--config", pub_conf.to_str().unwrap(), "--mirror-from", "hub"],
        &w.join("mirror.log"),
    );
    mirror.wait_line("mirror OBJ_HL_SNAPSHOTS of domain hub ready", Duration::from_secs(30));

    let source = leaf.source();
    let live_conf = if live { "" } else { "live_subjects = false\n" };
    let (e1_conf, e2_conf) = (live_conf.to_string(), format!("domain = \"tokyo\"\n{live_conf}"));
    let (mut e1, _, a1) = edge(&source, &user_config(w, "edge1", EDGE_PASSWORD, &e1_conf), w, "edge1");
    let (mut e2, _, a2) = edge(&source, &user_config(w, "edge2", EDGE_PASSWORD, &e2_conf), w, "edge2");
    for a in [&a1, &a2] {
        if live {
            wait_health(a, Duration::from_secs(120), |h| counter(h, "nats_live_lines") > 0);
        } else {
            wait_health(a, Duration::from_secs(120), |h| h["state"] == "live");
        }
    }
    // An edge's credentials reach no JetStream of the hub from the leaf.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = procs::nats::connect_as(&leaf.url(), "edge1").await;
        let hub_js = async_nats::jetstream::with_domain(c, "hub");
        assert!(hub_js.get_stream("HL").await.is_err(), "an edge on the leaf read the hub's stream");
    });
    leaf_user_is_narrow(&rt, &hub.url(), &leaf.url());

    // The publisher restarts; then the hub→leaf traffic is counted while both edges read live.
    assert!(publisher.stop().success());
    let _publisher = relay(&hub.url(), data.path(), &pub_conf, &extra, &w.join("relay2.log"), Duration::from_secs(30));
    let (msgs0, bytes0, lines0) = (hub_to_leaf(&monitor).0, hub_to_leaf(&monitor).1, hub_lines(&rt, &hub.url()));
    let mut books = Vec::new();
    for a in [&a1, &a2] {
        let h = wait_health(a, Duration::from_secs(240), |h| h["height"].as_u64() == Some(last));
        for zero in ["gaps", "broken_blocks", "inconsistencies", "nats_permission_denied"] {
            assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
        }
        books.push(procs::books_from_snapshot(&get_bytes(&format!("{a}/l4snapshot")).expect("snapshot")));
    }
    let (msgs1, bytes1) = hub_to_leaf(&monitor);
    let lines = hub_lines(&rt, &hub.url()) - lines0;
    let (sent, bytes) = (msgs1 - msgs0, bytes1 - bytes0);
    eprintln!("hub→leaf while {lines} lines were published: {sent} messages, {bytes} bytes, two edges on the leaf");
    assert!(lines > 300, "too few lines to count: {lines}");
    if live {
        // Each line crosses at most twice (the mirror's copy, and the live copy the leaf shares among its edges);
        // a copy per edge would be three or more per line.
        assert!(sent < lines * 5 / 2, "{sent} messages for {lines} lines: more than two per line");
    } else {
        // Only the mirror's copy: once per line (flow control and acks are the rest), never once per edge.
        assert!(sent < lines * 3 / 2, "{sent} messages for {lines} lines: more than one per line");
        for a in [&a1, &a2] {
            let h = get_json(&format!("{a}/health")).expect("/health");
            assert_eq!(counter(&h, "nats_live_lines"), 0, "the live path was off: {h}");
        }
    }
    let theirs = procs::sim_books_at(&info, w, last);
    for b in &books {
        procs::assert_same_books(b, &theirs);
    }
    assert!(e1.stop().success() && e2.stop().success());
}
