//! The reporting plan: what a run says and where, as the resolve step (cli/resolve.rs) fixed
//! it: verbosity, `--json`, `--totals`, `--index-file`, `--warning`'s classes and
//! `--checkpoint`'s actions (checkpoint.rs).

use std::path::PathBuf;

use super::Warnings;
use super::checkpoint::CheckpointPlan;

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
