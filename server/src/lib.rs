//! hlbook: a self-hosted Hyperliquid order-book server.
//!
//! The data path: the node's files → `node` (parse) → `ingest` (whole blocks, in order) → `book` (exact L4 books, in
//! `state`) → `publish` (frames, serialized once) → `ws` (clients).
//!
//! The dependency order: `node` → `config` → `book` → `state` → `store` → `ingest` → `audit` → `publish` → `ws` →
//! `cli`, with `sim` beside them. Each module may use only those before it (`tests/layering.rs` checks it,
//! docs/architecture.md explains it):
//!
//! | module | owns |
//! | --- | --- |
//! | `node` | the node's formats: lines, events, snapshots, times; imports nothing of ours |
//! | `config` | the settings, from the file and the flags, and the sources they name (`config::Source`, resolved) |
//! | `book` | exact L4 books and their L2 views |
//! | `state` | what ingest shares with everyone: the books behind their lock, the kept blocks and steps, each line's stage times, the change signal, the service's health and counters, the per-source board |
//! | `store` | candle and fills history on disk (redb), fed from the state |
//! | `ingest` | reading the node's lines (files, NATS), assembling and applying blocks, snapshots, validation |
//! | `audit` | per-stage latency and its exports (`/status`, `/metrics`) |
//! | `publish` | frames built from the state, serialized once, and the backlog connections read |
//! | `ws` | serving: WebSocket, info requests, health, the admin endpoints |
//! | `cli` | the commands: `serve`, `relay`, `replay` |
//! | `sim` | the node simulator (`hlsim`): beside the server, never imported by it |

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
