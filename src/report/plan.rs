//! The reporting plan: what a run says and where, as the resolve step (cli/resolve.rs) fixed
//! it: verbosity, `--json`, `--totals`, `--index-file`, `--warning`'s classes and
//! `--checkpoint`'s actions (checkpoint.rs).

use std::ffi::OsString;
use std::path::PathBuf;

use super::Warnings;

#[derive(Debug, Clone)]
pub struct ReportPlan {
    pub verbose: u8,
    /// `-q`: no warnings, no progress, no summary line.
    pub quiet: bool,
    /// `--json`: the summary as one object on stdout.
    pub json: bool,
    /// `--totals`: "Total bytes read" at the end (totals.rs).
    pub totals: bool,
    /// Bytes of a tar record (`-b N` × 512, `--record-size`): `--totals` counts whole records.
    pub record_size: u64,
    /// `--index-file FILE`: the listing goes there.
    pub index_file: Option<PathBuf>,
    /// The warning classes `--warning` turned off.
    pub warnings: Warnings,
    /// `--checkpoint`, `--checkpoint-action`; None when off.
    pub checkpoint: Option<CheckpointPlan>,
}

/// `--checkpoint`'s spec and what it needs to know of the run (checkpoint.rs `start`).
#[derive(Debug, Clone)]
pub struct CheckpointPlan {
    pub spec: super::checkpoint::Checkpoints,
    /// Bytes of a tar record.
    pub record: u64,
    /// The archive file read as it is (no `-I`), whose data GNU tar would seek over when it
    /// is a regular file; None for standard input, a URL or a filter.
    pub plain_file: Option<PathBuf>,
    /// `-i`: zero blocks are read past.
    pub ignore_zeros: bool,
    /// Dots go to stderr (`-O`: stdout carries data).
    pub dots_to_stderr: bool,
    /// For `exec`: the run's TAR_* variables, and `-x` or `-t`.
    pub env: [(&'static str, OsString); 3],
    pub subcommand: &'static str,
}
