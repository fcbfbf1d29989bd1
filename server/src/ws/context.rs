//! What every connection shares: the hub, the settings, the ways to the node and the upstream, and the per-IP and
//! global guards. Built once by `new` from the settings; the ws modules reach each part through a method, so the
//! state is reached one way (through the hub) and what is held can change behind the methods.

use std::sync::Arc;

use tokio::sync::watch;

use super::WsCounters;
use super::budget::Budgets;
use super::info_gate::InfoGate;
use super::info_weight::InfoWeight;
use super::ip_quota::IpQuota;
use super::limits::ConnLimits;
use super::passthrough::Passthrough;
use super::user_cap::UserCap;
use crate::config::ServerConfig;
use crate::publish::Hub;
use crate::state::Shared;

#[derive(Debug)]
pub struct WsContext {
    hub: Arc<Hub>,
    cfg: ServerConfig,
    /// The way to the node's info server, for `server.info_types`.
    passthrough: Option<Passthrough>,
    /// The way to `server.upstream_info_url`, for the read types nobody here answers.
    upstream: Option<Passthrough>,
    /// Each client IP's info request weight a minute, as the exchange counts it.
    info_weight: InfoWeight,
    /// Per-client places for info requests of every type.
    info_gate: Arc<InfoGate>,
    limits: Arc<ConnLimits>,
    counters: WsCounters,
    /// Turns true when the server shuts down: every connection closes with 1001.
    closing: watch::Receiver<bool>,
    /// Distinct users followed per client IP.
    user_cap: UserCap,
    /// Subscriptions and messages a minute per client IP, across its connections.
    ip_quota: IpQuota,
    /// Bytes held for clients, per connection and in all.
    budgets: Arc<Budgets>,
}

impl WsContext {
    /// Everything from the settings; `node_info_url` is the node's info server (empty: none, so no passthrough).
    pub fn new(cfg: &ServerConfig, node_info_url: &str, hub: Arc<Hub>, closing: watch::Receiver<bool>) -> WsContext {
        let passthrough =
            (cfg.info_passthrough && !node_info_url.is_empty()).then(|| Passthrough::new(node_info_url, cfg));
        let upstream = (!cfg.upstream_info_url.is_empty()).then(|| Passthrough::upstream(cfg));
        WsContext {
            hub,
            cfg: cfg.clone(),
            passthrough,
            upstream,
            info_weight: InfoWeight::new(cfg.info_weight_per_minute),
            info_gate: InfoGate::new(cfg),
            limits: Arc::new(ConnLimits::new(cfg)),
            counters: WsCounters::default(),
            closing,
            user_cap: UserCap::default(),
            ip_quota: IpQuota::from_config(cfg),
            budgets: Budgets::new(cfg.conn_budget_bytes, cfg.global_budget_bytes),
        }
    }

    /// The books and the state beside them (info answers read them; subscriptions check their coins).
    pub fn shared(&self) -> &Arc<Shared> {
        self.hub.shared()
    }

    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    pub fn cfg(&self) -> &ServerConfig {
        &self.cfg
    }

    pub fn passthrough(&self) -> Option<&Passthrough> {
        self.passthrough.as_ref()
    }

    pub fn upstream(&self) -> Option<&Passthrough> {
        self.upstream.as_ref()
    }

    pub fn info_weight(&self) -> &InfoWeight {
        &self.info_weight
    }

    pub fn info_gate(&self) -> &Arc<InfoGate> {
        &self.info_gate
    }

    pub fn limits(&self) -> &Arc<ConnLimits> {
        &self.limits
    }

    pub fn counters(&self) -> &WsCounters {
        &self.counters
    }

    /// Whether the server is shutting down, and a way to wait for it.
    pub fn closing(&self) -> &watch::Receiver<bool> {
        &self.closing
    }

    pub fn user_cap(&self) -> &UserCap {
        &self.user_cap
    }

    pub fn ip_quota(&self) -> &IpQuota {
        &self.ip_quota
    }

    pub fn budgets(&self) -> &Arc<Budgets> {
        &self.budgets
    }
}

/// What the exporters (`/metrics`, `/status`) read.
impl crate::audit::Exposed for WsContext {
    fn health(&self) -> &crate::state::health::Health {
        self.shared().health()
    }
    fn stages(&self) -> &crate::audit::Stages {
        self.hub.stages()
    }
    fn publish_counters(&self) -> Vec<crate::state::counter::Named> {
        self.hub.counter_list()
    }
    fn feed_bytes(&self) -> u64 {
        self.hub.feed_bytes()
    }
    fn ws_counters(&self) -> Vec<crate::state::counter::Named> {
        let mut list = self.counters.to_list();
        list.extend(self.info_gate.counters.to_list());
        list
    }
    fn connections(&self) -> usize {
        self.limits.open()
    }
    fn subscriptions(&self) -> Vec<(&'static str, i64)> {
        self.counters.subscriptions().to_vec()
    }
    fn newest_l2(&self) -> Vec<(String, i64)> {
        self.hub.newest_l2()
    }
    fn store_metrics(&self) -> Vec<(&'static str, &'static str, bool, u64)> {
        self.hub.store().map(|s| s.metrics()).unwrap_or_default()
    }
}
