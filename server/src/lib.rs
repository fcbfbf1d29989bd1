//! hlbook: a self-hosted Hyperliquid order-book server.
//!
//! The data path reads in module order: `node` (what the node writes) → `ingest` (reading it, assembling blocks)
//! → `book` (exact L4 books and their L2 views).

pub mod book;
pub mod cli;
pub mod ingest;
pub mod node;
pub mod sim;
