//! What may land on disk and how: names made safe under DIR (safety.rs), the limits a member
//! must keep (admit.rs), and `-G`'s directory lists (incremental.rs).

pub mod admit;
pub mod incremental;
pub mod plan;
pub mod safety;
