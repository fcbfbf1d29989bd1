//! The two info servers over HTTP: the node answers exactly its documented list and refuses the rest as a real
//! node does; the exchange stand-in answers the public API's extras; account answers agree with the fills lines
//! the simulator wrote.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{NODE_INFO_TYPES, Role, router};
use crate::book::snapshot::load_books;
use crate::node::paths::hour_files;
use crate::node::{Mode, Stream};
use crate::sim::tests::small_args;
use crate::sim::{Sim, SimShared, ctxs};

/// The node's `--serve-info` list as its README gives it (../shared/docs/hl-node-info-server.md), written out here
/// so a change to `NODE_INFO_TYPES` has to be a deliberate change to this test too.
const DOCUMENTED: [&str; 29] = [
    "meta",
    "spotMeta",
    "clearinghouseState",
    "spotClearinghouseState",
    "openOrders",
    "exchangeStatus",
    "frontendOpenOrders",
    "liquidatable",
    "activeAssetData",
    "maxMarketOrderNtls",
    "vaultSummaries",
    "userVaultEquities",
    "leadingVaults",
    "extraAgents",
    "subAccounts",
    "userFees",
    "userRateLimit",
    "spotDeployState",
    "perpDeployAuctionStatus",
    "delegations",
    "delegatorSummary",
    "maxBuilderFee",
    "userToMultiSigSigners",
    "userRole",
    "perpsAtOpenInterestCap",
    "validatorL1Votes",
    "marginTable",
    "perpDexs",
    "webData2",
];

#[test]
fn node_types_are_the_documented_list() {
    assert_eq!(NODE_INFO_TYPES, DOCUMENTED);
}

fn sim(out: &Path, blocks: usize) -> Sim {
    let mut args = small_args(out, Mode::ByBlock);
    args.users = 20;
    let mut sim = Sim::new(&args).unwrap();
    for _ in 0..blocks {
        sim.step().unwrap();
    }
    sim
}

/// Serves `role` over `shared` on a free port; returns its `/info` URL.
async fn serve(shared: Arc<SimShared>, role: Role) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/info", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(shared, role)).await });
    url
}

/// (status, content type, body) of one request.
async fn ask(client: &reqwest::Client, url: &str, body: &Value) -> (u16, String, String) {
    let r = client.post(url).json(body).send().await.unwrap();
    let ct = r.headers().get("content-type").map(|h| h.to_str().unwrap().to_string()).unwrap_or_default();
    (r.status().as_u16(), ct, r.text().await.unwrap())
}

async fn ok(client: &reqwest::Client, url: &str, body: &Value) -> Value {
    let (status, ct, text) = ask(client, url, body).await;
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{body}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn refused(answer: &(u16, String, String), what: &str) {
    let (status, ct, text) = answer;
    assert_eq!(*status, 422, "{what}: {text}");
    assert!(ct.starts_with("text/plain"), "{what}: {ct}");
    assert!(text.starts_with("Failed to deserialize the JSON body into the target type"), "{what}: {text}");
}

/// A request of each node type, with the fields it needs.
fn request(kind: &str, user: &str) -> Value {
    let mut r = json!({"type": kind, "user": user});
    match kind {
        "activeAssetData" => r["coin"] = json!("BTC"),
        "maxBuilderFee" => r["builder"] = json!("0x0000000000000000000000000000000000000001"),
        "marginTable" => r["id"] = json!(40),
        _ => {}
    }
    r
}

#[test]
fn node_answers_exactly_its_list_and_the_exchange_its_extras() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = sim(&tmp.path().join("data"), 5);
    let shared = sim.shared();
    let user = shared.state.lock().market.users[0].clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let node = serve(shared.clone(), Role::Node).await;
        let exchange = serve(shared.clone(), Role::Exchange).await;
        let client = reqwest::Client::new();
        for kind in NODE_INFO_TYPES {
            ok(&client, &node, &request(kind, &user)).await;
            ok(&client, &exchange, &request(kind, &user)).await;
        }
        let candles = json!({"type": "candleSnapshot", "req": {"coin": "BTC", "interval": "1h", "startTime": 0}});
        let not_the_nodes = [
            json!({"type": "l2Book", "coin": "BTC"}),
            json!({"type": "metaAndAssetCtxs"}),
            json!({"type": "spotMetaAndAssetCtxs"}),
            candles.clone(),
            json!({"type": "allMids"}),
            json!({"type": "userFills", "user": user}),
            json!({"type": "fundingHistory", "coin": "BTC", "startTime": 0}),
            json!({"type": "noSuchType"}),
            json!({"coin": "BTC"}),
        ];
        for body in &not_the_nodes {
            refused(&ask(&client, &node, body).await, &body.to_string());
        }
        // Per-user types need a user address.
        refused(&ask(&client, &node, &json!({"type": "clearinghouseState"})).await, "no user");
        refused(&ask(&client, &node, &json!({"type": "openOrders", "user": "0x12"})).await, "bad user");

        let both = ok(&client, &exchange, &json!({"type": "metaAndAssetCtxs"})).await;
        let meta = ok(&client, &node, &json!({"type": "meta"})).await;
        assert_eq!(both[0], meta);
        let tops = ctxs::tops(&shared);
        assert_eq!(both[1][0], ctxs::perp_ctx(&shared.coins[0], &tops[0]));
        let spot = ok(&client, &exchange, &json!({"type": "spotMetaAndAssetCtxs"})).await;
        assert_eq!(spot[1][0]["coin"], "@107");
        assert_eq!(ok(&client, &exchange, &candles).await.as_array().unwrap().len(), 100);
        let book = ok(&client, &exchange, &json!({"type": "l2Book", "coin": "BTC"})).await;
        assert_eq!(book["levels"][0].as_array().unwrap().len(), 20);
        let mids = ok(&client, &exchange, &json!({"type": "allMids"})).await;
        assert!(mids["BTC"].is_string() && mids["@107"].is_string() && mids.get("xyz:GOLD").is_none(), "{mids}");
        let w = ok(&client, &exchange, &request("webData2", &user)).await;
        assert!(w["assetCtxs"].is_array());
        assert!(ok(&client, &node, &request("webData2", &user)).await.get("assetCtxs").is_none());
        // The exchange writes no files on its host.
        let snap = json!({"type": "fileSnapshot", "request": {"type": "l4Snapshots"}, "outPath": "/tmp/x.json"});
        refused(&ask(&client, &exchange, &snap).await, "fileSnapshot on the exchange");
    });
}

#[test]
fn node_market_answers_and_file_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = sim(&tmp.path().join("data"), 3);
    let shared = sim.shared();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let url = serve(shared.clone(), Role::Node).await;
        let client = reqwest::Client::new();
        let meta = ok(&client, &url, &json!({"type": "meta"})).await;
        let names: Vec<&str> =
            meta["universe"].as_array().unwrap().iter().map(|u| u["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["BTC", "ETH", "SOL", "HYPE", "DOGE", "kPEPE"]);
        assert_eq!(meta["universe"][0]["szDecimals"], 5);
        let xyz = ok(&client, &url, &json!({"type": "meta", "dex": "xyz"})).await;
        assert_eq!(xyz["universe"][0]["name"], "xyz:GOLD");
        let spot = ok(&client, &url, &json!({"type": "spotMeta"})).await;
        assert_eq!((&spot["universe"][0]["name"], &spot["universe"][0]["index"]), (&json!("@107"), &json!(107)));
        let dexes = ok(&client, &url, &json!({"type": "perpDexs"})).await;
        assert_eq!((&dexes[0], &dexes[1]["name"]), (&Value::Null, &json!("xyz")));
        let status = ok(&client, &url, &json!({"type": "exchangeStatus"})).await;
        assert_eq!(status["time"], shared.state.lock().market.time_ms());
        let table = ok(&client, &url, &json!({"type": "marginTable", "id": 40})).await;
        assert_eq!(table["marginTiers"][0]["maxLeverage"], 40);

        let path = tmp.path().join("snap.json");
        let req = json!({"type": "fileSnapshot", "request": {"type": "l4Snapshots", "includeUsers": true,
            "includeTriggerOrders": false}, "outPath": path, "includeHeightInOutput": true});
        assert_eq!(ok(&client, &url, &req).await, Value::Null);
        let books = load_books(&path).unwrap();
        assert_eq!(books.height(), 1_000_000_002);
        assert_eq!(books.order_count(), shared.state.lock().market.order_count());
        assert_eq!(books.trigger_count(), 0, "trigger orders are left out when not asked for");

        // Asked for, the waiting trigger orders are listed too, marked `isTrigger`, none resting.
        let mut req = req.clone();
        req["request"]["includeTriggerOrders"] = json!(true);
        assert_eq!(ok(&client, &url, &req).await, Value::Null);
        let text = std::fs::read_to_string(&path).unwrap();
        let books = load_books(&path).unwrap();
        let waiting = shared.state.lock().market.waiting.len();
        assert!(waiting > 0, "three blocks placed no trigger order");
        assert_eq!(text.matches("\"isTrigger\":true").count(), waiting);
        assert_eq!((books.trigger_count(), books.order_count()), (waiting, shared.state.lock().market.order_count()));

        let r = client.post(&url).body("{not json").send().await.unwrap();
        assert_eq!(r.status(), 400);
        let rel = json!({"type": "fileSnapshot", "outPath": "relative.json", "request": {"type": "l4Snapshots"}});
        assert_eq!(ask(&client, &url, &rel).await.0, 400);
    });
}

/// The fills events of every fills line the sim wrote: (user, fill).
fn written_fills(out: &Path) -> Vec<(String, Value)> {
    let mut fills = Vec::new();
    for f in hour_files(out, Mode::ByBlock, Stream::Fills).unwrap() {
        for line in std::fs::read_to_string(&f.path).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            for e in v["events"].as_array().unwrap() {
                fills.push((e[0].as_str().unwrap().to_string(), e[1].clone()));
            }
        }
    }
    fills
}

/// Exact decimal string → integer units of `dec` decimals.
fn units(s: &str, dec: u32) -> i64 {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<width$}", width = dec as usize);
    let v = int.parse::<i64>().unwrap() * 10i64.pow(dec) + frac.parse::<i64>().unwrap_or(0);
    if neg { -v } else { v }
}

#[test]
fn positions_are_the_sum_of_the_users_written_fills() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("data");
    let sim = sim(&out, 60);
    let shared = sim.shared();
    let fills = written_fills(&out);
    let st = shared.state.lock();
    let m = &st.market;
    let mut checked = 0;
    for user in m.users.iter() {
        let idx = m.users.iter().position(|u| u == user).map(|i| i as u32);
        let state = super::accounts::clearinghouse_state(m, idx, "");
        for c in m.coins.iter().filter(|c| crate::sim::coins::on_perp_dex(c, None)) {
            let mine: Vec<&Value> =
                fills.iter().filter(|(u, f)| u == user && f["coin"] == c.name).map(|f| &f.1).collect();
            let sum: i64 = mine
                .iter()
                .map(|f| units(f["sz"].as_str().unwrap(), c.sz_dec) * if f["side"] == "B" { 1 } else { -1 })
                .sum();
            // Each fill starts where the one before it ended.
            let mut at = 0;
            for f in &mine {
                assert_eq!(units(f["startPosition"].as_str().unwrap(), c.sz_dec), at, "{user} {}: {f}", c.name);
                at += units(f["sz"].as_str().unwrap(), c.sz_dec) * if f["side"] == "B" { 1 } else { -1 };
            }
            let pos = state["assetPositions"].as_array().unwrap().iter().find(|p| p["position"]["coin"] == c.name);
            let szi = pos.map_or(0, |p| units(p["position"]["szi"].as_str().unwrap(), c.sz_dec));
            assert_eq!(szi, sum, "{user} {}: clearinghouseState against {} fills", c.name, mine.len());
            checked += usize::from(!mine.is_empty());
        }
        // The main dex's USDC is the deposit moved by each fill's closed pnl and fee.
        let main = |f: &Value| m.coins.iter().any(|c| c.name == f["coin"] && crate::sim::coins::on_perp_dex(c, None));
        let moved: i64 = fills
            .iter()
            .filter(|(u, f)| u == user && main(f))
            .map(|(_, f)| units(f["closedPnl"].as_str().unwrap(), 6) - units(f["fee"].as_str().unwrap(), 6))
            .sum();
        let upnl: i64 = state["assetPositions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| units(p["position"]["unrealizedPnl"].as_str().unwrap(), 6))
            .sum();
        let value = units(state["marginSummary"]["accountValue"].as_str().unwrap(), 6);
        assert_eq!(value - upnl, crate::sim::accounts::DEPOSIT + moved, "{user}: USDC against the fills");
    }
    assert!(checked > 10, "only {checked} (user, coin) pairs traded");
}
