//! Real `nats-server` processes for the NATS tests: a generated config, a port the server picks (read back from
//! its log) or the one it had before a restart, JetStream stored under the test's temporary folder. Also the
//! set-up those tests share around it: the shipped accounts and their passwords, `[nats]` config files for the
//! publisher and the edges, `hlbook relay --nats`, and a client connected as the edge user.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Proc;

pub const NATS_SERVER: &str = "nats-server";

/// Whether `nats-server` can run here; when not, the caller skips (`make setup` installs it).
pub fn available() -> bool {
    std::process::Command::new(NATS_SERVER).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// `available()`, and when not, the calling test says it skips (`procs::skip`): it returns at once on false.
pub fn available_or_skip() -> bool {
    let ok = available();
    if !ok {
        super::skip("nats-server is not installed (make setup installs it)");
    }
    ok
}

/// The passwords deploy/nats/accounts.conf reads from the environment, as the tests set them.
pub const PUBLISHER_PASSWORD: &str = "pub-secret-1";
pub const EDGE_PASSWORD: &str = "edge-secret-2";

#[derive(Debug)]
pub struct NatsServer {
    pub proc: Proc,
    pub port: u16,
    dir: PathBuf,
    extra: String,
    env: Vec<(String, String)>,
    starts: u32,
    /// JetStream on (off only while a cluster's nodes learn each other's route ports).
    js: bool,
    /// Its JetStream domain ("" for none).
    domain: String,
}

impl NatsServer {
    /// Starts a JetStream server storing under `dir`, with `extra` config lines (accounts, TLS, cluster).
    pub fn start(dir: &Path, extra: &str) -> NatsServer {
        NatsServer::start_env(dir, extra, &[])
    }

    /// `start` with environment variables (the passwords deploy/nats/accounts.conf reads).
    pub fn start_env(dir: &Path, extra: &str, env: &[(&str, &str)]) -> NatsServer {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        NatsServer::launch(dir, extra, env, true)
    }

    fn launch(dir: &Path, extra: &str, env: Vec<(String, String)>, js: bool) -> NatsServer {
        NatsServer::launch_in(dir, extra, env, js, "")
    }

    fn launch_in(dir: &Path, extra: &str, env: Vec<(String, String)>, js: bool, domain: &str) -> NatsServer {
        let proc = spawn(dir, 0, extra, &env, (js, domain), 0);
        let (dir, extra, domain) = (dir.to_path_buf(), extra.to_string(), domain.to_string());
        let mut s = NatsServer { proc, port: 0, dir, extra, env, starts: 1, js, domain };
        s.port = s.wait_ready();
        s
    }

    /// A server with the shipped accounts (deploy/nats/accounts.conf and publisher.conf: the `publisher` user with
    /// `PUBLISHER_PASSWORD`) and one edge user `edge` with `EDGE_PASSWORD`, added by the documented command
    /// (`deploy/nats/edge.sh add edge`). nats-server includes relative to the config file, so the files are
    /// copied beside the generated one in `dir`.
    pub fn start_with_accounts(dir: &Path) -> NatsServer {
        NatsServer::start_accounts_in(dir, &["edge"], "", "")
    }

    /// A server with the shipped accounts, an edge user per name in `edges` (password `EDGE_PASSWORD`), the
    /// JetStream domain `domain` and `extra` config lines.
    pub fn start_accounts_in(dir: &Path, edges: &[&str], domain: &str, extra: &str) -> NatsServer {
        std::fs::create_dir_all(dir).unwrap();
        for f in ["accounts.conf", "publisher.conf"] {
            std::fs::copy(deploy_nats().join(f), dir.join(f)).unwrap();
        }
        let out = edge_sh(dir, &["rebuild"], &[("NATS_RELOAD", "true")]);
        assert!(out.status.success(), "edge.sh rebuild: {}", String::from_utf8_lossy(&out.stderr));
        for e in edges {
            let out = edge_sh(dir, &["add", e], &[("PASSWORD", EDGE_PASSWORD), ("NATS_RELOAD", "true")]);
            assert!(out.status.success(), "edge.sh add {e}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let env = vec![("HLBOOK_PUBLISHER_PASSWORD".to_string(), PUBLISHER_PASSWORD.to_string())];
        NatsServer::launch_in(dir, &format!("include ./accounts.conf\n{extra}"), env, true, domain)
    }

    /// The port its log says it listens on for `what` ("leafnode", "route").
    pub fn listening(&self, what: &str) -> u16 {
        logged_port(&self.log(), what)
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    /// The server's process id (for `kill -HUP`, a config reload).
    pub fn pid(&self) -> u32 {
        self.proc.pid().expect("nats-server running")
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The `nats://` source of the stream the tests publish (`[nats]`'s default, `HL`) on this server.
    pub fn source(&self) -> String {
        format!("{}/HL", self.url())
    }

    /// SIGKILL: a crash.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Starts again on the same port with the same store.
    pub fn restart(&mut self) {
        self.proc.kill();
        self.proc = spawn(&self.dir, self.port, &self.extra, &self.env, (self.js, &self.domain), self.starts);
        self.starts += 1;
        self.wait_ready();
    }

    fn log(&self) -> PathBuf {
        self.dir.join(format!("nats-{}.log", self.starts - 1))
    }

    /// Waits for the log to say the server is ready; returns its client port.
    fn wait_ready(&self) -> u16 {
        wait_log(&self.log(), "Server is ready", Duration::from_secs(30));
        logged_port(&self.log(), "client")
    }
}

/// The repository's deploy/nats.
pub fn deploy_nats() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats")
}

/// `deploy/nats/edge.sh ARGS` on the config in `dir` (`NATS_DIR`), with `env`; its output.
pub fn edge_sh(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new("bash")
        .arg(deploy_nats().join("edge.sh"))
        .args(args)
        .env("NATS_DIR", dir)
        .envs(env.iter().copied())
        .output()
        .expect("running edge.sh")
}

fn spawn(dir: &Path, port: u16, extra: &str, env: &[(String, String)], (js, domain): (bool, &str), n: u32) -> Proc {
    std::fs::create_dir_all(dir).unwrap();
    let port = if port == 0 { "-1".to_string() } else { port.to_string() };
    let conf = dir.join(format!("nats-{n}.conf"));
    let store = dir.join("js");
    // The shipped account reserves up to 200 GB of file storage, which must fit the server's own limit.
    let js = if js {
        let domain = if domain.is_empty() { String::new() } else { format!("  domain: {domain}\n") };
        format!("jetstream {{\n  store_dir: \"{}\"\n  max_file_store: 200GB\n{domain}}}\n", store.display())
    } else {
        String::new()
    };
    let text = format!("host: 127.0.0.1\nport: {port}\n{js}{extra}\n");
    std::fs::write(&conf, text).unwrap();
    let log = dir.join(format!("nats-{n}.log"));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Proc::start_env(NATS_SERVER, &["-c", conf.to_str().unwrap()], &env, &log)
}

/// The log's text once it contains `needle` (checked as the file grows, bounded by `timeout`).
pub fn wait_log(log: &Path, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < deadline, "{} never said {needle:?}:\n{text}", log.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The port a server's log says it listens on for `what` ("client", "route").
pub fn logged_port(log: &Path, what: &str) -> u16 {
    let needle = format!("Listening for {what} connections on");
    let text = wait_log(log, &needle, Duration::from_secs(30));
    let at = text.find(&needle).unwrap();
    text[at..].lines().next().unwrap().rsplit(':').next().unwrap().trim().parse().expect("a port")
}

/// Three JetStream servers clustered on loopback. A JetStream cluster needs every node's routes in its config,
/// so the nodes first start without JetStream on ports they pick, then restart on those ports with JetStream
/// and the full route list.
pub fn start_cluster(dir: &Path) -> Vec<NatsServer> {
    let cluster = |i: usize, port: &str, routes: &str| {
        format!(
            "server_name: n{i}\ncluster {{\n  name: hlbook\n  host: 127.0.0.1\n  port: {port}\n  routes: [{routes}]\n}}"
        )
    };
    let mut nodes: Vec<NatsServer> = (1..=3)
        .map(|i| NatsServer::launch(&dir.join(format!("n{i}")), &cluster(i, "-1", ""), Vec::new(), false))
        .collect();
    let ports: Vec<u16> = nodes.iter().map(|n| logged_port(&n.log(), "route")).collect();
    let routes = ports.iter().map(|p| format!("\"nats-route://127.0.0.1:{p}\"")).collect::<Vec<_>>().join(", ");
    for (i, n) in nodes.iter_mut().enumerate() {
        n.extra = cluster(i + 1, &ports[i].to_string(), &routes);
        n.js = true;
        n.restart();
    }
    // JetStream answers once the three agree on a metadata leader.
    for n in &nodes {
        // The leader says "Self is new JetStream cluster metadata leader", the others name it.
        wait_log(&n.log(), "metadata leader", Duration::from_secs(60));
    }
    nodes
}

/// The servers' client URLs, comma-separated (as `--nats` and `nats://` sources take them).
pub fn urls(nodes: &[NatsServer]) -> String {
    nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect::<Vec<_>>().join(",")
}

/// `hlbook relay --nats` publishing `dir`'s node files in `mode`, with `config`'s `[nats]`; returns once it
/// publishes.
pub fn publisher(url: &str, dir: &Path, mode: &str, config: &Path, log: &Path) -> Proc {
    relay(url, dir, config, &["--mode", mode], log, Duration::from_secs(30))
}

/// A JetStream server under `logs/nats` and `hlbook relay --nats` on it publishing `dir`'s node files in `mode`,
/// with `[nats]` and `keys` in `logs/relay.toml` (returned, for a publisher started again), its log `logs/LOG`.
pub fn publishing(logs: &Path, dir: &Path, mode: &str, keys: &str, log: &str) -> (NatsServer, Proc, PathBuf) {
    let nats = NatsServer::start(&logs.join("nats"), "");
    let config = relay_config(logs, keys);
    let publisher = publisher(&nats.url(), dir, mode, &config, &logs.join(log));
    (nats, publisher, config)
}

/// `hlbook relay --nats URL --config CONFIG --node-dir DIR` with `extra` flags after those; returns once it says
/// it publishes, which must be within `ready`.
pub fn relay(url: &str, dir: &Path, config: &Path, extra: &[&str], log: &Path, ready: Duration) -> Proc {
    let (dir, config) = (dir.to_str().unwrap(), config.to_str().unwrap());
    let args = [&["relay", "--nats", url, "--config", config, "--node-dir", dir][..], extra].concat();
    let p = Proc::start(super::HLBOOK, &args, log);
    p.wait_line("relay publishing to nats stream", ready);
    p
}

/// `DIR/relay.toml`: `[nats]` with `keys` (TOML lines, each ending in a newline), for a publisher.
pub fn relay_config(dir: &Path, keys: &str) -> PathBuf {
    let config = dir.join("relay.toml");
    std::fs::write(&config, format!("[nats]\n{keys}")).unwrap();
    config
}

/// `DIR/USER.toml`: `[nats]` with the credentials of `user` (its password in `DIR/USER.pw`, its name the user's,
/// as the shipped permissions want) and the `extra` keys.
pub fn user_config(dir: &Path, user: &str, pass: &str, extra: &str) -> PathBuf {
    let (pw, conf) = (dir.join(format!("{user}.pw")), dir.join(format!("{user}.toml")));
    std::fs::write(&pw, format!("{pass}\n")).unwrap();
    let text = format!("[nats]\nuser = \"{user}\"\nname = \"{user}\"\npassword_file = \"{}\"\n{extra}", pw.display());
    std::fs::write(&conf, text).unwrap();
    conf
}

/// A client of the server at `url` logged in as the edge user `edge` (its own inbox, as its permissions want).
pub async fn connect_as_edge(url: &str) -> async_nats::Client {
    connect_as(url, "edge").await
}

/// A client of the server at `url` logged in as edge user `name` (password `EDGE_PASSWORD`, its own inbox).
pub async fn connect_as(url: &str, name: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(name.into(), EDGE_PASSWORD.into())
        .custom_inbox_prefix(format!("_INBOX_{name}"))
        .connect(url)
        .await
        .expect("the edge user connects")
}
