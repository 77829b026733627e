//! fastuntar: extract .tar and .tar.zst archives as fast as the disk allows, and safely.
//!
//! The pipeline (docs/DESIGN.md): `cli` arguments → a `command` (extract, list, to stdout)
//! reads its input through `decode` into `archive` members, which `selection` chooses and
//! `policy` makes safe, as `plan` ops for the `write` backend, with file data in `pool`
//! buffers that return to the pool once written; `report` says what happened.

mod api;
pub use api::{
    Cancel, DirectIo, Error, Landed, MemberKind, Observer, Overwrite, Progress, Restore, Resume,
    SkipReason, Skipped, Source, Started, Summary,
};

pub mod archive;
pub mod budget;
pub mod cli;
pub mod command;
pub mod decode;
pub mod exit_codes;
pub mod lend;
pub mod mark;
pub mod metadata;
pub mod plan;
pub mod policy;
pub mod pool;
pub mod reading;
pub mod report;
pub mod resources;
pub mod resume;
pub mod selection;
pub mod write;
