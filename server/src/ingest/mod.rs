//! Reading what the node writes and turning it into whole blocks for the books.

pub mod assemble;
pub mod data_dir;
pub mod file_source;
pub mod info_client;
pub mod input;
pub mod limits;
pub mod line_source;
pub mod live;
pub mod live_config;
pub mod nats;
pub mod open_source;
pub mod race;
pub mod replay;
pub mod side;

pub mod steps;
pub mod tail;
pub mod validate;
pub mod wake;

pub use assemble::{Assembled, Assembler};
