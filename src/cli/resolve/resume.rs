//! The resume plan: `--resume`, `--no-resume`, `--writeback-every`, and the option that
//! keeps a run from resuming at a member boundary.

use super::*;

/// Resume points: the flag, the options that refuse them, and the digest of the options that
/// change what lands (resume/options.rs).
pub(super) fn resume_plan(
    args: &Args,
    input: &InputPlan,
    selection: &SelectionPlan,
    policy: &MemberPlan,
    writer: &WriterPlan,
    read: &ReadPlan,
) -> Result<ResumePlan> {
    let writeback = parse_size(&args.resume.writeback_every).context("--writeback-every")?;
    Ok(ResumePlan {
        flag: match (args.resume.resume, args.resume.no_resume) {
            (_, true) => Flag::Off,
            (true, false) => Flag::Resume,
            (false, false) => Flag::Auto,
        },
        dest: writer.dest.clone(),
        roots: writer.placement.roots().cloned().collect(),
        refused: refused_option(input, selection, policy, writer),
        options: crate::resume::options::digest(
            input,
            selection,
            policy,
            writer,
            read,
            &args.names.transform,
        ),
        debug_kill: args.resume.debug_kill_at.clone(),
        writeback: Some(writeback).filter(|&n| n > 0),
        quiet: args.informative.quiet,
        reads_only: args.operation.list
            || args.operation.to_stdout
            || args.operation.to_command.is_some(),
    })
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
