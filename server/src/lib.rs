//! hlbook: a self-hosted Hyperliquid order-book server.
//!
//! The data path reads in module order: `node` (what the node writes) → `ingest` (reading it, assembling blocks)
//! → `book` (exact L4 books and their L2 views) → `publish` (frames, serialized once) → `ws` (serving them);
//! `store` keeps candle and fills history across restarts (fed by `publish`, read by `publish` and `ws`);
//! `audit` times every stage, `config` holds the settings and `sim` the node simulator that stands in for hl-node
//! in tests, demos and benchmarks.

pub mod audit;
pub mod book;
pub mod cli;
pub mod config;
pub mod ingest;
pub mod node;
pub mod publish;
pub mod sim;
pub mod state;
pub mod store;
pub mod ws;
