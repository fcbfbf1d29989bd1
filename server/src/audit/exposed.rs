//! What `/metrics` and `/status` read, as one narrow trait the serving side implements. The exporters see health,
//! stage timings and named numbers, never the server's structures, so `audit` imports nothing above the state
//! (the socket layer hands itself over as an `Exposed`).

use super::Stages;
use crate::state::counter::Named;
use crate::state::health::Health;

pub trait Exposed: Send + Sync + std::fmt::Debug {
    fn health(&self) -> &Health;
    /// Per-line stage timings of the published blocks.
    fn stages(&self) -> &Stages;
    /// Publisher counters, by name (exported as `hlbook_publish_<name>`).
    fn publish_counters(&self) -> Vec<Named>;
    /// Bytes of trades/l4Book frames kept for slow connections.
    fn feed_bytes(&self) -> u64;
    /// Socket counters, by name (exported as `hlbook_ws_<name>`).
    fn ws_counters(&self) -> Vec<Named>;
    /// Open WebSocket connections.
    fn connections(&self) -> usize;
    /// Subscriptions by channel.
    fn subscriptions(&self) -> Vec<(&'static str, i64)>;
    /// Each subscribed coin with the block time (Unix ns) of its newest L2 frame.
    fn newest_l2(&self) -> Vec<(String, i64)>;
    /// The history store's series: (name, help, is a counter, value), exported as `hlbook_store_<name>`; none
    /// without a store.
    fn store_metrics(&self) -> Vec<(&'static str, &'static str, bool, u64)> {
        Vec::new()
    }
}
