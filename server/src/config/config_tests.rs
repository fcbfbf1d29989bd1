use super::*;

fn parse(text: &str) -> Result<Config, String> {
    let c: Config = toml::from_str(text).map_err(|e| e.to_string())?;
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

#[test]
fn set_overrides_any_key_and_is_checked() {
    let set = |v: &[&str]| Config::load(None, &v.iter().map(std::string::ToString::to_string).collect::<Vec<_>>());
    let c = set(&["server.max_connections=5", "server.token=s3cret", "ingest.mode=\"streaming\""]).unwrap();
    assert_eq!((c.server.max_connections, c.server.token.as_str(), c.ingest.mode), (5, "s3cret", Mode::Streaming));
    assert!(set(&["server.nope=1"]).unwrap_err().to_string().contains("nope"));
    assert!(set(&["server.max_connections=lots"]).is_err());
    assert!(set(&["nodot=1"]).is_err());
}

#[test]
fn defaults_are_valid_and_files_override_them() {
    Config::default().validate().unwrap();
    let c = parse("[ingest]\nmode = \"streaming\"\nsource = \"file:/srv/node2\"\n").unwrap();
    assert_eq!(c.ingest.mode, Mode::Streaming);
    assert_eq!(c.source().unwrap(), Source::Files("/srv/node2".into()));
    let c = parse("[ingest]\nsource = \"nats://a:4222,b:4222/HL2\"\n").unwrap();
    let servers = "nats://a:4222,nats://b:4222".to_string();
    let target = NatsTarget { servers, stream: "HL2".into(), cfg: NatsConfig::default() };
    assert_eq!(c.source().unwrap(), Source::Nats(Box::new(target)));
    assert_eq!(c.server, ServerConfig::default());
}

#[test]
fn an_edge_without_an_info_server_takes_snapshots_over_nats() {
    let c = parse("[ingest]\ninfo_url = \"\"\nsource = \"nats://a:4222\"\n").unwrap();
    assert!(c.nats_snapshots());
    assert_eq!(c.validate_interval(), Some(Duration::from_secs(60)), "and validates from them");
    assert!(!Config::default().nats_snapshots(), "a node's info server comes first");
    let e = parse("[ingest]\ninfo_url = \"\"\nsource = \"file\"\n").unwrap_err();
    assert!(e.contains("ingest.info_url"), "no node and no NATS: nothing to bootstrap from: {e}");
}

#[test]
fn the_shipped_config_lists_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/hlbook.toml");
    let shipped = Config::from_file(&path).unwrap();
    shipped.validate().unwrap();
    // The deliberate differences: system paths for snapshots and the store instead of the temp dir.
    let defaults = Config {
        ingest: IngestConfig { snapshot_dir: "/var/lib/hlbook/snapshots".into(), ..IngestConfig::default() },
        store: StoreConfig { dir: "/var/lib/hlbook/store".into(), ..StoreConfig::default() },
        ..Config::default()
    };
    assert_eq!(shipped, defaults);
}

#[test]
fn bad_settings_name_their_key() {
    for (text, key) in [
        ("[ingest]\nnode_dri = \"/x\"\n", "node_dri"),
        ("[ingest]\nsource = \"udp://x:1\"\n", "ingest.source"),
        ("[ingest]\nsource = \"tcp://10.0.0.1:8100\"\n", "ingest.source"),
        ("[ingest]\nsource = \"nats://a:4222/\"\n", "ingest.source"),
        ("[nats]\nchunk_bytes = 10\n", "nats"),
        ("[nats]\nsnapshots_kept = 0\n", "nats.snapshots_kept"),
        ("[ingest]\nmode = \"fast\"\n", "mode"),
        ("[ingest]\nstale_after_secs = -1\n", "ingest.stale_after_secs"),
        ("[ingest]\ninfo_url = \"\"\n", "ingest.info_url"),
        ("[server]\nlisten = [\"localhost\"]\n", "server.listen"),
        ("[server]\nadmin_listen = [\"x\"]\n", "server.admin_listen"),
        ("[server]\ninfo_types = [\"meta\", \"fileSnapshot\"]\n", "server.info_types"),
        ("[server]\ninfo_max_in_flight = 0\n", "server.info_max_in_flight"),
        ("[server]\nupstream_info_url = \"api.hyperliquid.xyz\"\n", "server.upstream_info_url"),
        ("[server]\nupstream_info_url = \"https://x/info\"\nupstream_weight_per_minute = 0\n", "upstream_weight"),
        ("[log]\nformat = \"xml\"\n", "log.format"),
        ("[store]\nfills_retention_days = 0\n", "store.fills_retention_days"),
        ("[store]\nseed_url = \"ftp://x\"\n", "store.seed_url"),
        ("[store]\nfills_users = \"some\"\n", "fills_users"),
        ("[store]\nfills_follow = [\"0x12\"]\n", "store.fills_follow"),
        ("[store]\nfills_follow_max = 0\n", "store.fills_follow_max"),
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.contains(key), "{text:?}: {e}");
    }
}

#[test]
fn a_tcp_source_points_to_the_migration_note() {
    let e = parse("[ingest]\nsources = [\"file\", \"tcp://10.0.0.7:8100\"]\n").unwrap_err();
    assert!(e.contains("ingest.sources") && e.contains("retired") && e.contains("docs/operations.md"), "{e}");
}

#[test]
fn the_store_lives_beside_the_snapshots_unless_told() {
    let c = StoreConfig::default();
    assert_eq!(c.dir_beside(Path::new("/tmp/t/snaps")), PathBuf::from("/tmp/t/hlbook-store"));
    let c = StoreConfig { dir: "/data/h".into(), ..StoreConfig::default() };
    assert_eq!(c.dir_beside(Path::new("/tmp/t/snaps")), PathBuf::from("/data/h"));
}

#[test]
fn followed_users_parse_from_the_file() {
    let u = "0x5EAAC7C475B1FAD85701F02C4E9E796A53F94BD5";
    let c = parse(&format!("[store]\nfills_users = \"followed\"\nfills_follow = [\"{u}\"]\n")).unwrap();
    assert_eq!(c.store.fills_users, FillsUsers::Followed);
    assert_eq!(c.store.follow_users(), [crate::node::Address::parse(&u.to_lowercase()).unwrap()]);
    assert_eq!(StoreConfig::default().fills_users, FillsUsers::All, "every user's, as before");
}

#[test]
fn a_source_listed_twice_is_refused_once_resolved() {
    // `file` is `ingest.node_dir`, and a stream left out is `[nats]`'s: each pair below is one source twice.
    let twice = |a: &str, b: &str| {
        parse(&format!("[ingest]\nnode_dir = \"/srv/hl\"\nsources = [\"{a}\", \"{b}\"]\n")).unwrap_err()
    };
    assert!(twice("file", "file:/srv/hl").contains("file:/srv/hl is listed twice"));
    assert!(twice("nats://a:4222", "nats://a:4222/HL").contains("nats://a:4222/HL is listed twice"));
    assert!(parse("[ingest]\nsources = [\"nats://a:4222/A\", \"nats://a:4222/B\"]\n").is_ok());
}
