//! The three commands, each a loop over the archive's members: `-x` (extract.rs), `-t`
//! (list.rs) and `-O` (to_stdout.rs), over the member loop they share (src/reading.rs);
//! listing.rs makes the lines `-t` and `-v` print.

pub mod extract;
pub mod list;
pub mod listing;
pub mod member;
pub mod to_stdout;

use crate::decode::plan::InputPlan;
use crate::policy::plan::MemberPlan;
use crate::report::plan::ReportPlan;
use crate::resume::ResumePlan;
use crate::selection::plan::SelectionPlan;
use crate::write::plan::WriterPlan;

/// What a run's options ask for, made into one narrow plan per stage (options/mod.rs):
/// the command takes them all and hands each stage its own.
#[derive(Debug, Clone)]
pub struct Plans {
    pub command: Command,
    /// Where the archive comes from and how it is decoded (decode/).
    pub input: InputPlan,
    /// Resume points: whether, where, and against which options (resume/; with the input).
    pub resume: ResumePlan,
    /// How the archive is read (src/reading.rs).
    pub read: crate::reading::ReadPlan,
    /// Which members, under which names (selection/).
    pub selection: SelectionPlan,
    /// What may land and how (policy/).
    pub policy: MemberPlan,
    /// How members land in DIR (write/).
    pub writer: WriterPlan,
    /// What is said and where (report/).
    pub report: ReportPlan,
    /// How `-t` and `-v` lines look (listing.rs).
    pub listing: listing::ListingPlan,
    /// The TAR_* variables every program the run starts gets (`--to-command`, a checkpoint's
    /// `exec`): TAR_VERSION, TAR_ARCHIVE (`-` for standard input), TAR_BLOCKING_FACTOR.
    pub tar_env: [(&'static str, std::ffi::OsString); 3],
}

/// Which command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `-x`: extract into DIR.
    Extract,
    /// `-t`: list the members.
    List,
    /// `-O`: the files' data to stdout.
    ToStdout,
    /// `--to-command`: each file's data piped into `sh -c COMMAND` (to_stdout.rs).
    ToCommand { command: String, ignore_errors: bool },
}

impl Command {
    /// Whether the run only reads the archive (`-t`, `-O`): no file-data pool, no writers,
    /// nothing created.
    pub fn reads_only(&self) -> bool {
        *self != Command::Extract
    }
}
