//! hlbook: a self-hosted Hyperliquid order-book server.
//!
//! The data path reads in module order: `node` (what the node writes) → `ingest` (reading it, assembling blocks)
//! → `book` (exact L4 books and their L2 views) → `publish` (frames, serialized once) → `ws` (serving them);
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
pub mod ws;
