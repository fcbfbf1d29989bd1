//! Reading what the node writes and turning it into whole blocks for the books.

pub mod assemble;
pub mod health;
pub mod live;
pub mod replay;
pub mod tail;

pub use assemble::{Assembled, Assembler};
