//! Which members a run takes, and under which names: the MEMBER operands and `-T`
//! (select.rs), `--exclude` (exclude.rs), `-N`'s dates (dates.rs), `--transform`
//! (transform.rs) and `-w` (confirm.rs).

pub mod confirm;
pub mod dates;
pub mod exclude;
pub mod plan;
pub mod select;
pub mod transform;
