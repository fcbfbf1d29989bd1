//! Reading what the node writes and turning it into whole blocks for the books.

pub mod assemble;
pub mod info_client;
pub mod input;
pub mod limits;
pub mod live;
pub mod live_config;
pub mod nats;
pub mod race;
pub mod replay;
pub mod source;
pub mod sources;
pub mod steps;
pub mod tail;
pub mod validate;
pub mod wake;

pub use assemble::{Assembled, Assembler};
