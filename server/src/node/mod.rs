//! What the node writes: line formats of the three streams, the L4 snapshot file, the data-dir layout, and the
//! exact numbers and timestamps inside them. Everything downstream works on the typed events defined here.

pub mod block;
pub mod decimal;
pub mod event;
mod fast;
pub mod fills_light;
pub mod intern;
pub mod line;
pub mod matches;
pub mod misc;
pub mod paths;
pub mod snapshot;
mod status_split;
pub mod time;
pub mod twap;
pub mod user_events;
pub mod user_watch;
mod wire;

pub use block::Block;
pub use decimal::{Fixed, FixedSum};
pub use event::{Address, Cloid, Coin, Diff, DiffKind, Fill, OrderFlavor, OrderInfo, OrderStatus, Side, TxHash};
pub use line::{Events, Line, LineError, LineMeta, Mode, NodeParser, Stream};
pub use time::UnixNanos;
pub use user_events::{UserEvents, is_liquidation};
pub use user_watch::Watched;
