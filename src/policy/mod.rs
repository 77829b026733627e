//! What may land on disk and how: names made safe under DIR (safety.rs), the limits a member
//! must keep (admit.rs), where a member lands and with which owner, mode, attributes and time
//! warnings (member.rs), `-G`'s directory lists (incremental.rs), and what a member does with
//! what is already at its path (conflict.rs), which root a member lands in (route.rs,
//! `--spread`).

pub mod admit;
pub mod conflict;
pub mod incremental;
pub mod member;
pub mod plan;
pub mod route;
pub mod safety;
