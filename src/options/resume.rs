//! The resume plan: whether to resume, how often to record a point, and the option that
//! keeps a run from resuming at a member boundary.

use super::Options;
use crate::decode::plan::InputPlan;
use crate::policy::conflict::OldFiles;
use crate::policy::plan::MemberPlan;
use crate::reading::ReadPlan;
use crate::resume::ResumePlan;
use crate::selection::plan::SelectionPlan;
use crate::write::plan::WriterPlan;

/// Resume points: the flag, the options that refuse them, and the digest of the options that
/// change what lands (resume/options.rs).
pub(super) fn resume_plan(
    opts: &Options,
    input: &InputPlan,
    selection: &SelectionPlan,
    policy: &MemberPlan,
    writer: &WriterPlan,
    read: &ReadPlan,
) -> ResumePlan {
    ResumePlan {
        flag: opts.resume,
        dest: writer.dest.clone(),
        roots: writer.placement.roots().cloned().collect(),
        refused: refused_option(input, selection, policy, writer),
        options: crate::resume::options::digest(
            input,
            selection,
            policy,
            writer,
            read,
            &opts.transform,
        ),
        debug_kill: opts.debug_kill.clone(),
        writeback: Some(opts.writeback).filter(|&n| n > 0),
        quiet: opts.shown.report.quiet,
        reads_only: opts.reads_only(),
    }
}

/// The options that make a run unable to resume from a member boundary: with them the killed
/// run's half-written files after the point would count as existing files (kept, backed up,
/// their directories' modes kept), or purges and answers cannot be done again, or what the run
/// reads cannot be had again.
fn refused_option(
    input: &InputPlan,
    selection: &SelectionPlan,
    policy: &MemberPlan,
    writer: &WriterPlan,
) -> Option<&'static str> {
    let url = input.url.as_ref();
    match writer.old_files {
        OldFiles::Keep => return Some("-k (--keep-old-files)"),
        OldFiles::Skip => return Some("--skip-old-files"),
        OldFiles::KeepNewer => return Some("--keep-newer-files"),
        OldFiles::NoOverwriteDir => return Some("--no-overwrite-dir"),
        OldFiles::Replace | OldFiles::UnlinkFirst => {}
    }
    match () {
        _ if writer.backup.is_some() => Some("--backup"),
        _ if policy.incremental => Some("-G (--incremental)"),
        _ if selection.interactive => Some("-w (--interactive)"),
        _ if selection.newer.is_some() => Some("-N (--newer)"),
        _ if input.filter.is_some() => Some("-I (--use-compress-program)"),
        _ if url.is_some_and(|u| u.checksum.is_some()) => Some("--checksum"),
        _ if url.is_some_and(|u| u.keep.is_some()) => Some("--keep-archive"),
        _ => None,
    }
}
