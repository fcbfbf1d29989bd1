//! Reading what the node writes and turning it into whole blocks for the books.

pub mod assemble;
pub mod replay;

pub use assemble::{Assembled, Assembler};
