//! fastuntar: extract .tar and .tar.zst archives as fast as the disk allows, and safely.
//!
//! The pipeline (docs/DESIGN.md): input → `decode` → `archive` members → `safety` paths →
//! `plan` ops → `write` backend, with file data in `pool` buffers that return to the pool
//! once written.

pub mod acl;
pub mod admit;
pub mod archive;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod confirm;
pub mod dates;
pub mod decode;
pub mod exclude;
pub mod exit_codes;
pub mod extract;
pub mod incremental;
pub mod lend;
pub mod list;
pub mod operands;
pub mod owner;
pub mod plan;
pub mod pool;
pub mod progress;
pub mod quoting;
pub mod report;
pub mod resources;
pub mod resume;
pub mod safety;
pub mod select;
pub mod to_stdout;
pub mod totals;
pub mod transform;
pub mod write;
pub mod xattrs;
