//! Serving: HTTP endpoints (and, with the publish stage, the WebSocket API) over the shared books.

pub mod deflate;
pub mod http;
