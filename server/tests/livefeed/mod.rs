//! The one rig for end-to-end client tests, a live market: `hlsim` writes a small market without end, `hlbook serve` follows it
//! with a `[server]` section given by the test, and both are stopped when the `LiveRig` is dropped.

#![allow(dead_code)]

use std::time::Duration;

use crate::procs::{Proc, admin_base, start_serve, start_sim_exchange, wait_health};

#[derive(Debug)]
pub struct LiveRig {
    pub server: Proc,
    pub sim: Proc,
    /// `HOST:PORT` of the server.
    pub addr: String,
    /// `http://HOST:PORT`: the public endpoints.
    pub base: String,
    /// `http://HOST:PORT` of the admin endpoints (`/status`, `/metrics`, `/l4snapshot`, the status page).
    pub admin: String,
    /// `http://HOST:PORT/info` of the simulator (the node's info server: only what a real node answers).
    pub sim_info: String,
    /// `http://HOST:PORT/info` of the simulator's stand-in for the public API (`--exchange-listen`), for a
    /// server's `upstream_info_url`.
    pub sim_exchange: String,
    pub dir: tempfile::TempDir,
}

impl LiveRig {
    /// Starts the simulator and the server, whose config file holds `[server]` followed by `server_toml`, and waits
    /// until the server's books are live.
    pub fn start(server_toml: &str) -> LiveRig {
        LiveRig::start_with(&[], server_toml)
    }

    /// `start` with simulator flags: each `(flag, value)` replaces the default's value or is added.
    pub fn start_with(sim_flags: &[(&str, &str)], server_toml: &str) -> LiveRig {
        LiveRig::start_full(sim_flags, &[], &[], server_toml)
    }

    /// `start` with the server also listening on each of `also_listen` (fixed addresses a client insists on).
    pub fn start_also_on(also_listen: &[&str], server_toml: &str) -> LiveRig {
        LiveRig::start_full(&[], also_listen, &[], server_toml)
    }

    /// `start_with`, and `serve_flags` added to the server's command line.
    pub fn start_serving(sim_flags: &[(&str, &str)], serve_flags: &[&str], server_toml: &str) -> LiveRig {
        LiveRig::start_full(sim_flags, &[], serve_flags, server_toml)
    }

    fn start_full(
        sim_flags: &[(&str, &str)],
        also_listen: &[&str],
        serve_flags: &[&str],
        server_toml: &str,
    ) -> LiveRig {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut flags: Vec<(&str, &str)> = vec![
            ("--coins", "4"),
            ("--btc-orders", "2000"),
            ("--orders-per-coin", "200"),
            ("--block-ms", "100"),
            ("--rate", "0.3"),
            ("--reject-ratio", "2"),
        ];
        for &(flag, value) in sim_flags {
            match flags.iter_mut().find(|f| f.0 == flag) {
                Some(f) => f.1 = value,
                None => flags.push((flag, value)),
            }
        }
        // A flag with an empty value is a switch (`--write-liquidations`).
        let args: Vec<&str> = flags.iter().flat_map(|&(f, v)| [f, v]).filter(|a| !a.is_empty()).collect();
        let (sim, info_url, exchange_url) = start_sim_exchange(&data, &args, &dir.path().join("sim.log"));
        let config = dir.path().join("hlbook.toml");
        // As an operator would run it beside a real node for ccxt (README): the types no node answers go to the
        // simulator's stand-in for the public API, unless the test sets the upstream itself.
        let upstream = if server_toml.contains("upstream_info_url") {
            String::new()
        } else {
            format!("upstream_info_url = \"{exchange_url}\"\n")
        };
        std::fs::write(&config, format!("[server]\n{upstream}{server_toml}\n")).unwrap();
        let snaps = dir.path().join("snapshots");
        let mut extra = vec!["--config", config.to_str().unwrap()];
        for &a in also_listen {
            extra.extend(["--listen", a]);
        }
        extra.extend_from_slice(serve_flags);
        let server = start_serve(&data, &info_url, &snaps, &extra, &dir.path().join("serve.log"));
        // One line per address, in the order given: the first is the one tests use.
        let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
        for _ in also_listen {
            server.wait_line("hlbook listening on", Duration::from_secs(60));
        }
        let base = format!("http://{addr}");
        let admin = admin_base(&server);
        wait_health(&base, Duration::from_secs(120), |h| h["state"] == "live");
        LiveRig { server, sim, addr, base, admin, sim_info: info_url, sim_exchange: exchange_url, dir }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// `ws://ADDR/ws` with a query (`"batch=1"`), or none when empty.
    pub fn ws(&self, query: &str) -> String {
        if query.is_empty() { self.ws_url() } else { format!("{}?{query}", self.ws_url()) }
    }

    /// The server's log so far, for failure messages.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }
}
