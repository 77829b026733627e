//! Which members a run takes, and under which names: the MEMBER operands and `-T`
//! (select.rs), `--exclude` (exclude.rs), `-N`'s dates (dates.rs), `--transform`
//! (transform.rs) and `-w` (confirm.rs), each name or pattern a `Given` (given.rs).

pub mod confirm;
pub mod dates;
pub mod exclude;
pub mod given;
pub mod plan;
pub mod select;
pub mod transform;
