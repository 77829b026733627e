//! The three commands, each a loop over the archive's members: `-x` (extract.rs), `-t`
//! (list.rs) and `-O` (to_stdout.rs); reading.rs is the member loop they share.

pub mod extract;
pub mod list;
pub mod reading;
pub mod to_stdout;
