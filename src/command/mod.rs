//! The three commands, each a loop over the archive's members: `-x` (extract.rs), `-t`
//! (list.rs) and `-O` (to_stdout.rs), over the member loop they share (src/reading.rs);
//! listing.rs makes the lines `-t` and `-v` print.

pub mod extract;
pub mod list;
pub mod listing;
pub mod to_stdout;
