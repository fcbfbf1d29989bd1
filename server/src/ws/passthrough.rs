//! The way to the node's info server, for the info types clients need from it and we cannot answer ourselves.
//!
//! The node's info server is the node's own: a client must never make it write (`fileSnapshot` writes hundreds of
//! MB to any path it is given) nor crowd out the requests the node and hlbook need. So only the configured
//! read-only types pass (`server.info_types`), at most `info_max_in_flight` at once (and one client only through
//! its places at the `InfoGate`), each within a timeout and a response size cap. Identical requests share one
//! answer for `info_cache_ms`: a thousand bots starting at once ask the node for `meta` once, the others wait for
//! that answer. What is forwarded and cached is the request's canonical form (`canonical`: its known fields, of
//! the right kinds, in one order), so a changing extra field neither defeats the cache nor reaches the node; and
//! the global places are shared fairly among client IPs (`FairSlots`).
//! hlbook's own snapshot requests (`ingest::info_client`) do not come this way.
//!
//! The same way, with its own cache time and a weight budget of its own (`server.upstream_weight_per_minute`,
//! all clients together), leads to `server.upstream_info_url` for the types neither hlbook nor the node answers:
//! the public API limits this server's IP as it limits any, so a thousand clients must cost it one request.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde_json::Value;
use tokio::sync::OnceCell;

use super::fair_slots::FairSlots;
use super::info_gate::{Answer, InfoGate};
use crate::config::ServerConfig;

/// Cached answers kept at most; past this, expired ones are swept, and a request that still finds no room is
/// forwarded uncached.
const MAX_CACHED: usize = 4096;

#[derive(Debug)]
pub struct Passthrough {
    client: reqwest::Client,
    url: String,
    /// Who answers, for refusals: "the node's info server" or "the upstream info server".
    who: &'static str,
    /// The types passed; `None`: every read type (the upstream).
    types: Option<Vec<String>>,
    /// The upstream's own budget of weight a minute, all clients together.
    budget: Option<governor::DefaultDirectRateLimiter>,
    global: Arc<FairSlots>,
    timeout: Duration,
    max_bytes: usize,
    cache_for: Duration,
    cache: Mutex<FxHashMap<String, Arc<Cached>>>,
}

#[derive(Debug)]
struct Cached {
    born: Instant,
    answer: OnceCell<Answer>,
}

impl Passthrough {
    /// The way to the node's info server at `url`, for `server.info_types`.
    pub fn new(url: &str, c: &ServerConfig) -> Passthrough {
        Passthrough {
            client: reqwest::Client::new(),
            url: url.to_string(),
            who: "the node's info server",
            types: Some(c.info_types.clone()),
            budget: None,
            global: FairSlots::new(c.info_max_in_flight),
            timeout: Duration::from_millis(c.info_timeout_ms),
            max_bytes: c.info_max_response_bytes,
            cache_for: Duration::from_millis(c.info_cache_ms),
            cache: Mutex::new(FxHashMap::default()),
        }
    }

    /// The way to `server.upstream_info_url` (set), for every read type.
    pub fn upstream(c: &ServerConfig) -> Passthrough {
        let per_minute = std::num::NonZeroU32::new(c.upstream_weight_per_minute.max(1)).expect("at least 1");
        Passthrough {
            who: "the upstream info server",
            types: None,
            budget: Some(governor::RateLimiter::direct(governor::Quota::per_minute(per_minute))),
            cache_for: Duration::from_millis(c.upstream_cache_ms),
            ..Passthrough::new(&c.upstream_info_url, c)
        }
    }

    /// Whether requests of this type may be passed on.
    pub fn allows(&self, kind: &str) -> bool {
        !crate::config::WRITE_INFO_TYPES.contains(&kind)
            && self.types.as_ref().is_none_or(|types| types.iter().any(|t| t == kind))
    }

    /// The node's answer to `body` (of an allowed type) for a client at `ip`. Only a request that goes to the node
    /// takes a place at the gate; one that shares a cached or in-flight answer costs nothing to wait.
    pub async fn ask(&self, gate: &Arc<InfoGate>, ip: IpAddr, body: &Value) -> Answer {
        let key = match canonical(body) {
            Ok(k) => k,
            Err(refused) => return refused,
        };
        let Some(entry) = self.cached(&key) else { return self.ask_limited(gate, ip, &key).await };
        let answer = entry.answer.get_or_init(|| self.ask_limited(gate, ip, &key)).await.clone();
        if answer.status != 200 {
            // Failures are not kept: the next request tries the node again.
            let mut cache = self.cache.lock();
            if cache.get(&key).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
                cache.remove(&key);
            }
        }
        answer
    }

    /// The fresh (or in-flight) cache entry for `key`, made if needed; None when caching is off or full.
    fn cached(&self, key: &str) -> Option<Arc<Cached>> {
        if self.cache_for.is_zero() {
            return None;
        }
        let mut cache = self.cache.lock();
        // An answer is fresh for the cache time; a request in flight for the timeout, after which it has failed or
        // its only waiter hung up mid-way (its `OnceCell` left empty), and a newer request takes its place.
        let fresh = |e: &Cached| match e.answer.get() {
            Some(_) => e.born.elapsed() < self.cache_for,
            None => e.born.elapsed() < self.timeout,
        };
        if let Some(e) = cache.get(key).filter(|e| fresh(e)) {
            return Some(e.clone());
        }
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, e| fresh(e));
            if cache.len() >= MAX_CACHED {
                return None;
            }
        }
        let e = Arc::new(Cached { born: Instant::now(), answer: OnceCell::new() });
        cache.insert(key.to_string(), e.clone());
        Some(e)
    }

    /// Waits for a place (this IP's, then a global one) and asks the node, all within the timeout.
    async fn ask_limited(&self, gate: &Arc<InfoGate>, ip: IpAddr, body: &str) -> Answer {
        if let Some(refused) = self.over_budget(body) {
            return refused;
        }
        let started = Instant::now();
        let place = match gate.enter(ip).await {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        let left = self.timeout.saturating_sub(started.elapsed());
        let asked = tokio::time::timeout(left, async {
            let _global = self.global.acquire(ip).await;
            self.forward(body).await
        })
        .await;
        drop(place);
        asked.unwrap_or_else(|_| {
            Answer::text(504, &format!("{} did not answer within {} ms", self.who, self.timeout.as_millis()))
        })
    }

    /// The 429 for a request the upstream budget cannot pay for now (the type's base weight, as the exchange
    /// charges this server's IP).
    fn over_budget(&self, body: &str) -> Option<Answer> {
        let budget = self.budget.as_ref()?;
        let kind = serde_json::from_str::<Value>(body).ok()?.get("type")?.as_str()?.to_string();
        let w = std::num::NonZeroU32::new(super::info_weight::base_weight(&kind))?;
        match budget.check_n(w) {
            Ok(Ok(())) => None,
            _ => Some(Answer::text(
                429,
                &format!(
                    "hlbook's budget for the upstream info server is spent (server.upstream_weight_per_minute); \
                     {kind} was not asked, try again later"
                ),
            )),
        }
    }

    /// One POST to the node, its body read up to the size cap.
    async fn forward(&self, body: &str) -> Answer {
        let sent = self.client.post(&self.url).header("content-type", "application/json").body(body.to_string());
        let mut resp = match sent.send().await {
            Ok(r) => r,
            Err(e) => return Answer::text(502, &format!("{} is unreachable: {e}", self.who)),
        };
        let status = resp.status().as_u16();
        if resp.content_length().is_some_and(|n| n > self.max_bytes as u64) {
            return self.too_large();
        }
        let mut bytes = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() > self.max_bytes => return self.too_large(),
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return Answer::text(502, &format!("{}: {e}", self.who)),
            }
        }
        // A JSON answer passes as it came; a refusal (the node's 422 text) keeps its status and text.
        if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() {
            Answer::json_with(status, Bytes::from(bytes))
        } else if status == 200 {
            Answer::text(502, &format!("{} answered 200 with a body that is not JSON", self.who))
        } else {
            Answer::text(status, &String::from_utf8_lossy(&bytes))
        }
    }

    fn too_large(&self) -> Answer {
        Answer::text(
            502,
            &format!("the answer of {} is larger than server.info_max_response_bytes ({})", self.who, self.max_bytes),
        )
    }
}

/// A field the info API knows, and the kind of value it takes.
enum Kind {
    /// A string of at most this many bytes.
    Text(usize),
    Int,
    /// An order id: an integer, or a client order id string.
    IntOrText(usize),
    Bool,
    /// An object of known fields (candleSnapshot's `req`), canonical in turn.
    Object,
}

/// Every field forwarded, whatever the type (a type without one of them ignores it); any other is dropped. The
/// union of the official read types' request fields.
const FIELDS: &[(&str, Kind)] = &[
    ("aggregateByTime", Kind::Bool),
    ("builder", Kind::Text(66)),
    ("coin", Kind::Text(64)),
    ("dex", Kind::Text(64)),
    ("endTime", Kind::Int),
    ("id", Kind::Int),
    ("interval", Kind::Text(8)),
    ("mantissa", Kind::Int),
    ("nSigFigs", Kind::Int),
    ("oid", Kind::IntOrText(66)),
    ("req", Kind::Object),
    ("startTime", Kind::Int),
    ("token", Kind::IntOrText(66)),
    ("tokenId", Kind::Text(66)),
    ("user", Kind::Text(66)),
    ("vaultAddress", Kind::Text(66)),
];

/// The request as forwarded and cached: `type` first, then the known fields it has, in `FIELDS` order; an
/// unknown field is dropped, a known one of the wrong kind refused (422), so no client can make two keys of one
/// request or send the node anything but these.
fn canonical(body: &Value) -> Result<String, Answer> {
    let kind = body.get("type").and_then(Value::as_str).filter(|t| t.len() <= 64);
    let kind = kind.ok_or_else(|| bad("type", "a string of at most 64 bytes"))?;
    let mut out = serde_json::Map::new();
    out.insert("type".into(), Value::String(kind.into()));
    known_fields(body, &mut out, true)?;
    // A type whose fields are known keeps only those: `{"type":"meta","startTime":N}` is `meta`, one cache entry.
    if let Some(reads) = fields_read(kind) {
        out.retain(|k, _| k == "type" || reads.contains(&k.as_str()));
    }
    Ok(Value::Object(out).to_string())
}

/// The fields a type reads, for the official read types whose requests are documented; `None`: a type not
/// listed here keeps every known field (it goes upstream, which knows it).
fn fields_read(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "spotMeta"
        | "exchangeStatus"
        | "liquidatable"
        | "maxMarketOrderNtls"
        | "vaultSummaries"
        | "perpDeployAuctionStatus"
        | "validatorL1Votes"
        | "perpDexs"
        | "spotMetaAndAssetCtxs"
        | "predictedFundings"
        | "spotPairDeployAuctionStatus" => &[],
        "meta" | "metaAndAssetCtxs" | "perpsAtOpenInterestCap" | "perpDexLimits" | "allMids" => &["dex"],
        "clearinghouseState" | "openOrders" | "frontendOpenOrders" => &["user", "dex"],
        "spotClearinghouseState"
        | "userVaultEquities"
        | "leadingVaults"
        | "extraAgents"
        | "subAccounts"
        | "userFees"
        | "userRateLimit"
        | "spotDeployState"
        | "delegations"
        | "delegatorSummary"
        | "userToMultiSigSigners"
        | "userRole"
        | "webData2"
        | "historicalOrders"
        | "portfolio"
        | "referral"
        | "delegatorHistory"
        | "delegatorRewards"
        | "twapHistory"
        | "userTwapSliceFills" => &["user"],
        "activeAssetData" => &["user", "coin"],
        "maxBuilderFee" => &["user", "builder"],
        "marginTable" => &["id"],
        "tokenDetails" => &["tokenId"],
        "vaultDetails" => &["vaultAddress", "user"],
        "orderStatus" => &["user", "oid"],
        "recentTrades" => &["coin"],
        "l2Book" => &["coin", "nSigFigs", "mantissa"],
        "candleSnapshot" => &["req"],
        "fundingHistory" => &["coin", "startTime", "endTime"],
        "userFunding" | "userNonFundingLedgerUpdates" => &["user", "startTime", "endTime"],
        "userFills" => &["user", "aggregateByTime"],
        "userFillsByTime" | "userTwapSliceFillsByTime" => &["user", "startTime", "endTime", "aggregateByTime"],
        _ => return None,
    })
}

fn bad(field: &str, want: &str) -> Answer {
    Answer::text(422, &format!("Failed to deserialize the JSON body into the target type: `{field}` must be {want}"))
}

/// Copies `body`'s known fields into `out`, in `FIELDS` order; `nest` allows one level of object.
fn known_fields(body: &Value, out: &mut serde_json::Map<String, Value>, nest: bool) -> Result<(), Answer> {
    for (name, k) in FIELDS {
        let Some(v) = body.get(*name).filter(|v| !v.is_null()) else { continue };
        if matches!(k, Kind::Object) && !nest {
            continue;
        }
        let ok = match (k, v) {
            (Kind::Text(max) | Kind::IntOrText(max), Value::String(t)) => t.len() <= *max,
            (Kind::Int | Kind::IntOrText(_), Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Kind::Bool, Value::Bool(_)) => true,
            (Kind::Object, Value::Object(_)) => {
                let mut inner = serde_json::Map::new();
                known_fields(v, &mut inner, false)?;
                out.insert((*name).into(), Value::Object(inner));
                continue;
            }
            _ => false,
        };
        if !ok {
            let want = match k {
                Kind::Text(max) => format!("a string of at most {max} bytes"),
                Kind::Int => "an integer".to_string(),
                Kind::IntOrText(max) => format!("an integer or a string of at most {max} bytes"),
                Kind::Bool => "a boolean".to_string(),
                Kind::Object => "an object of known fields".to_string(),
            };
            return Err(bad(name, &want));
        }
        out.insert((*name).into(), v.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ServerConfig {
        ServerConfig::default()
    }

    fn rand_nonce() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[test]
    fn only_listed_read_only_types_pass() {
        let mut c = cfg();
        let p = Passthrough::new("http://127.0.0.1:9/info", &c);
        assert!(p.allows("meta") && p.allows("perpDexs") && p.allows("clearinghouseState"));
        assert!(!p.allows("fileSnapshot") && !p.allows("metaAndAssetCtxs") && !p.allows(""));
        c.info_types.push("fileSnapshot".into());
        assert!(!Passthrough::new("http://127.0.0.1:9/info", &c).allows("fileSnapshot"));
        let up = Passthrough::upstream(&ServerConfig { upstream_info_url: "http://127.0.0.1:9/info".into(), ..cfg() });
        assert!(up.allows("metaAndAssetCtxs") && up.allows("fundingHistory") && !up.allows("fileSnapshot"));
    }

    #[test]
    fn the_canonical_form_keeps_known_fields_in_one_order_and_nests_once() {
        let a = serde_json::json!({"user": "0xab", "type": "userFillsByTime", "startTime": 5, "junk": [1, 2],
            "aggregateByTime": true});
        assert_eq!(
            canonical(&a).unwrap(),
            r#"{"type":"userFillsByTime","aggregateByTime":true,"startTime":5,"user":"0xab"}"#
        );
        let c = serde_json::json!({"type": "candleSnapshot", "req": {"interval": "1m", "coin": "BTC", "x": 1,
            "startTime": 0, "req": {}}});
        assert_eq!(
            canonical(&c).unwrap(),
            r#"{"type":"candleSnapshot","req":{"coin":"BTC","interval":"1m","startTime":0}}"#,
            "a nested req is not taken a second time"
        );
        // A type keeps only the fields it reads: a changing extra field makes no new cache entry.
        let meta = serde_json::json!({"type": "meta", "startTime": 5, "user": "0xab", "dex": "xyz"});
        assert_eq!(canonical(&meta).unwrap(), r#"{"type":"meta","dex":"xyz"}"#);
        let fee = serde_json::json!({"type": "maxBuilderFee", "user": "0xab", "builder": "0xcd", "coin": "BTC"});
        assert_eq!(canonical(&fee).unwrap(), r#"{"type":"maxBuilderFee","builder":"0xcd","user":"0xab"}"#);
        let wrong = canonical(&serde_json::json!({"type": "marginTable", "id": "x"})).unwrap_err();
        assert!(wrong.status == 422 && wrong.text && wrong.message().contains("`id`"), "{wrong:?}");
    }

    #[tokio::test]
    async fn the_upstream_budget_refuses_past_its_weight_and_says_which_setting() {
        let (url, count) = node(Duration::ZERO, 0).await;
        let c = ServerConfig { upstream_info_url: url, upstream_weight_per_minute: 40, upstream_cache_ms: 0, ..cfg() };
        let up = Passthrough::upstream(&c);
        let gate = InfoGate::new(&cfg());
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let ask = |t: &str| serde_json::json!({"type": t});
        assert_eq!(up.ask(&gate, ip, &ask("metaAndAssetCtxs")).await.status, 200);
        assert_eq!(up.ask(&gate, ip, &ask("fundingHistory")).await.status, 200);
        let spent = up.ask(&gate, ip, &ask("metaAndAssetCtxs")).await;
        assert_eq!(spent.status, 429);
        assert!(spent.message().contains("server.upstream_weight_per_minute"), "{spent:?}");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2, "the refused request was not sent");
    }

    /// A stand-in info server answering `{"n":N}` (N counts requests) after `delay`, or `size` bytes of JSON.
    async fn node(delay: Duration, size: usize) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let app = axum::Router::new().route(
            "/info",
            axum::routing::post(move || {
                let c = c.clone();
                async move {
                    let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::time::sleep(delay).await;
                    if size > 0 { format!("\"{}\"", "x".repeat(size)) } else { format!("{{\"n\":{n}}}") }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/info", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, count)
    }

    #[test]
    fn the_canonical_request_keeps_known_fields_in_one_order() {
        let a = canonical(&serde_json::json!({"dex": "xyz", "type": "meta", "junk": "x".repeat(4096)})).unwrap();
        let b = canonical(&serde_json::json!({"type": "meta", "dex": "xyz", "other": 1})).unwrap();
        assert_eq!(a, r#"{"type":"meta","dex":"xyz"}"#);
        assert_eq!(a, b, "extra fields make no new key");
        assert_eq!(canonical(&serde_json::json!({"type": "meta", "dex": null})).unwrap(), r#"{"type":"meta"}"#);
        assert_eq!(canonical(&serde_json::json!({"type": "meta", "dex": {"a": 1}})).unwrap_err().status, 422);
        assert_eq!(canonical(&serde_json::json!({"type": "x", "startTime": 1.5})).unwrap_err().status, 422);
        assert_eq!(canonical(&serde_json::json!({"kind": "meta"})).unwrap_err().status, 422);
    }

    #[tokio::test]
    async fn identical_requests_share_one_answer_and_failures_and_timeouts_are_answers() {
        let (url, count) = node(Duration::from_millis(50), 0).await;
        let p = Arc::new(Passthrough::new(&url, &cfg()));
        let gate = InfoGate::new(&cfg());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let asks = (0..50).map(|_| {
            let (p, gate) = (p.clone(), gate.clone());
            // Each with its own extra field: one request all the same.
            let body = serde_json::json!({"type": "meta", "nonce": rand_nonce()});
            tokio::spawn(async move { p.ask(&gate, ip, &body).await })
        });
        for a in futures_util::future::join_all(asks).await {
            assert_eq!(a.unwrap(), Answer::json(Bytes::from_static(br#"{"n":1}"#)));
        }
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1, "one request reached the node");
        assert_eq!(gate.ips_tracked(), 0);

        let slow = Passthrough::new(&url, &ServerConfig { info_timeout_ms: 10, ..cfg() });
        assert_eq!(slow.ask(&gate, ip, &serde_json::json!({"type": "meta"})).await.status, 504);
        let (big, _) = node(Duration::ZERO, 2_000).await;
        let capped = Passthrough::new(&big, &ServerConfig { info_max_response_bytes: 1_000, ..cfg() });
        assert_eq!(capped.ask(&gate, ip, &serde_json::json!({"type": "meta"})).await.status, 502);
        assert!(capped.cache.lock().is_empty(), "failures are not kept");
    }

    #[tokio::test]
    async fn an_abandoned_request_leaves_no_ip_behind() {
        let (url, _) = node(Duration::from_secs(5), 0).await;
        let p = Passthrough::new(&url, &ServerConfig { info_cache_ms: 0, ..cfg() });
        let gate = InfoGate::new(&cfg());
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        let meta = serde_json::json!({"type": "meta"});
        let gave_up = tokio::time::timeout(Duration::from_millis(50), p.ask(&gate, ip, &meta));
        assert!(gave_up.await.is_err());
        assert_eq!(gate.ips_tracked(), 0);
    }

    #[test]
    fn an_abandoned_request_in_flight_expires_after_the_timeout() {
        // An entry whose only waiter hung up mid-way stays empty; once older than the timeout it is not fresh, so
        // the next request makes a new one (and a full cache sweeps it) instead of waiting on it for ever.
        let p = Passthrough::new("http://127.0.0.1:9/info", &ServerConfig { info_timeout_ms: 1_000, ..cfg() });
        let old = Instant::now().checked_sub(Duration::from_millis(1_001)).unwrap();
        let abandoned = Arc::new(Cached { born: old, answer: OnceCell::new() });
        p.cache.lock().insert("k".into(), abandoned.clone());
        let next = p.cached("k").unwrap();
        assert!(!Arc::ptr_eq(&next, &abandoned), "the abandoned entry was taken as fresh");
        let young = Arc::new(Cached { born: Instant::now(), answer: OnceCell::new() });
        p.cache.lock().insert("j".into(), young.clone());
        assert!(Arc::ptr_eq(&p.cached("j").unwrap(), &young), "a request in flight is shared");
    }

    #[tokio::test]
    async fn an_unreachable_node_is_a_502_that_is_not_cached_and_leaves_no_ip_behind() {
        // Port 9 (discard) is closed on loopback here: the connection is refused at once.
        let p = Passthrough::new("http://127.0.0.1:9/info", &cfg());
        let gate = InfoGate::new(&cfg());
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let a = p.ask(&gate, ip, &serde_json::json!({"type": "meta"})).await;
        assert_eq!(a.status, 502, "{a:?}");
        assert!(p.cache.lock().is_empty());
        assert_eq!(gate.ips_tracked(), 0);
    }
}
