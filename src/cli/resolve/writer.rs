//! The writer plan: DIR, what to do with what is there (`-k`, `--backup`, ...), direct IO,
//! the backend and the writer threads, and their layout on DIR's filesystem.

use super::*;

/// How members land in DIR.
pub(super) fn writer_plan(args: &Args, edge: &Edge, warnings: Warnings) -> Result<WriterPlan> {
    let direct_threshold = match &args.performance.direct_io_threshold {
        Some(t) => parse_size(t).context("--direct-io-threshold")?,
        None => crate::write::direct_policy::DEFAULT_THRESHOLD,
    };
    let (threads, threads_given) = writer_threads(args.performance.writer_threads, edge)?;
    let backup = match backup_wanted(args, edge) {
        Some((control, suffix)) => crate::write::backup::Backup::new(control, suffix)?,
        None => None,
    };
    let dest = destination(args)?;
    let incremental = args.operation.incremental || args.operation.listed_incremental.is_some();
    if incremental && !args.performance.spread.is_empty() {
        bail!("--spread cannot be used with -G (--incremental): its removals are DIR's");
    }
    let placement = super::placement::placement(&args.performance.spread, &dest)?;
    Ok(WriterPlan {
        dest,
        placement,
        backend: match args.performance.io {
            crate::cli::IoBackend::Auto => Backend::Auto,
            crate::cli::IoBackend::Uring => Backend::Uring,
            crate::cli::IoBackend::Portable => Backend::Portable,
        },
        threads,
        threads_given,
        direct: direct_io(args.performance.direct_io, args.performance.no_direct_io),
        direct_threshold,
        tight_memory: tight_memory(edge.usable_memory).is_some(),
        direct_after: match &args.performance.debug_direct_after {
            Some(t) => Some(parse_size(t).context("--debug-direct-after")?),
            None => None,
        },
        old_files: old_files(args),
        // Modes exactly as archived with -p, and as root unless --no-same-permissions (GNU
        // tar's default); otherwise the archive's modes less the umask, like tar without -p.
        exact_modes: args.attributes.preserve_permissions
            || (!args.attributes.no_same_permissions && edge.root),
        keep_directory_symlink: args.overwrite.keep_directory_symlink || args.selection.dereference,
        dereference: args.selection.dereference,
        delay_restore: args.attributes.delay_directory_restore,
        recursive_unlink: args.overwrite.recursive_unlink,
        backup: backup.map(Arc::new),
        one_file_system: args.selection.one_file_system,
        verbose: args.informative.verbose > 0,
        warnings,
        ring_probe: match args.performance.debug_uring {
            None => RingProbe::Kernel,
            Some(crate::cli::DebugUring::Refused) => RingProbe::Refused,
            Some(crate::cli::DebugUring::NoOpenat) => RingProbe::NoOpenat,
        },
        sync: args.performance.sync,
        layout: None,
    })
}

/// DIR from the `-C`s, as GNU tar changes directory for each (a relative one from the one
/// before; `.` without any). GNU tar also lets a `-C` between MEMBER names (or after `-T`)
/// put the names after it elsewhere; one destination per run cannot, so several `-C`s with
/// one after a name are refused. A single `-C` is DIR wherever it stands (GNU tar would
/// extract the names before it into the current directory: README, "How it differs").
pub(super) fn destination(args: &Args) -> Result<PathBuf> {
    let mut dest: Option<PathBuf> = None;
    // Without -f the first operand is the archive, not a name.
    let mut archive_operand = args.input.file.is_none();
    let mut names = false;
    for o in &args.selection.ordered {
        match o {
            Ordered::Operand(_) if std::mem::take(&mut archive_operand) => {}
            Ordered::Operand(_) | Ordered::AddFile(_) | Ordered::FilesFrom(_) => names = true,
            Ordered::Directory(dir) if names && args.selection.directory.len() > 1 => bail!(
                "-C {}: several -C with one after MEMBER names (or -T) would put names in \
                 different directories, which fastuntar does not do: give one -C, or all \
                 before the names",
                dir.display()
            ),
            Ordered::Directory(dir) => {
                dest = Some(match dest {
                    Some(before) => before.join(dir),
                    None => dir.clone(),
                })
            }
            _ => {}
        }
    }
    Ok(dest.unwrap_or_else(|| PathBuf::from(".")))
}

/// `--backup[=CONTROL]` and `--suffix=SUFFIX` with what GNU tar reads of the environment for
/// them: the CONTROL (`$VERSION_CONTROL` for `--backup` without one; empty: the default) and
/// SUFFIX (`$SIMPLE_BACKUP_SUFFIX` without `--suffix`, else `~`) the backups take, or None
/// without either option. `--suffix` alone turns backups on, as in GNU tar.
pub(super) fn backup_wanted<'a>(args: &'a Args, edge: &'a Edge) -> Option<(&'a str, &'a str)> {
    let control = match (args.overwrite.backup.as_deref(), args.overwrite.suffix.as_deref()) {
        (None, None) => return None,
        (Some(""), _) | (None, Some(_)) => edge.version_control.as_deref().unwrap_or(""),
        (Some(control), _) => control,
    };
    let suffix = args.overwrite.suffix.as_deref().or(edge.backup_suffix.as_deref()).unwrap_or("~");
    Some((control, suffix))
}

/// What to do where a member's path exists already. clap keeps these apart
/// (`conflicts_with`): GNU tar's last one wins, which would drop one of two options given
/// without a word.
pub(super) fn old_files(args: &Args) -> OldFiles {
    match () {
        _ if args.overwrite.keep_old_files => OldFiles::Keep,
        _ if args.overwrite.skip_old_files => OldFiles::Skip,
        _ if args.overwrite.keep_newer_files => OldFiles::KeepNewer,
        _ if args.overwrite.no_overwrite_dir => OldFiles::NoOverwriteDir,
        _ if args.overwrite.unlink_first => OldFiles::UnlinkFirst,
        _ => OldFiles::Replace,
    }
}

/// `--direct-io[=WHEN]` and `--no-direct-io`: clap keeps the last of them
/// (`overrides_with`); auto when neither is given.
pub(super) fn direct_io(when: Option<crate::cli::DirectIo>, never: bool) -> DirectIo {
    use crate::cli::DirectIo as Flag;
    match (when, never) {
        (_, true) | (Some(Flag::Never), false) => DirectIo::Never,
        (Some(Flag::Always), false) => DirectIo::Always,
        (Some(Flag::Auto) | None, false) => DirectIo::Auto,
    }
}

/// Most writer threads by default. On 2 CPUs, 2 writers created the 100,000-file tree in 0.75x
/// (disk) to 0.81x (RAM-backed ext4) of one writer's time
/// (docs/PERFORMANCE.md, "The model for larger machines"); ext4's journal and the
/// directory locks are shared, so past 8 more threads mostly add contention.
pub(super) const DEFAULT_MAX_WRITERS: usize = 8;

/// Below this RLIMIT_NPROC (`ulimit -u`, which counts every thread of the user), the default
/// is one writer: each more writer is a thread, and with io_uring its io-wq workers are more.
/// Distributions give users thousands; a limit this low is set on purpose.
const NPROC_FOR_WRITERS: u64 = 256;

/// `--writer-threads`, else the CPUs we may run on, at most DEFAULT_MAX_WRITERS (one where
/// RLIMIT_NPROC is below NPROC_FOR_WRITERS and applies: root is not held to it); and whether
/// the count was asked for.
pub(super) fn writer_threads(flag: Option<usize>, edge: &Edge) -> Result<(usize, bool)> {
    let few_threads_allowed = !edge.root && edge.nproc_limit.is_some_and(|n| n < NPROC_FOR_WRITERS);
    let n = match flag {
        Some(n) => n,
        None if few_threads_allowed => 1,
        None => default_threads(true, edge).min(DEFAULT_MAX_WRITERS),
    };
    if n == 0 {
        bail!("--writer-threads: must be at least 1");
    }
    Ok((n.min(crate::write::multi::MAX_WRITERS), flag.is_some()))
}

/// The writer threads for DIR (once its filesystem is probed, `DestFs::probe`), from six
/// conditions: the count and whether it was asked for, names compared without case (one
/// portable writer), an ext4 without a journal (one writer unless asked), `-U` and
/// `--recursive-unlink` (they remove directories that other writers' caches may hold: always
/// one), and `--keep-directory-symlink` (it gives one file two names, `lib/x` and
/// `usr/lib/x`, which the writers' ordering by name cannot see: always one; with 4 writers
/// asked for, 1 to 177 of 400 files written as `usr/lib/fN`, then as `lib/fN` through
/// `lib -> usr/lib`, kept the first content).
pub fn writer_layout(plan: &WriterPlan, fs: &DestFs) -> Layout {
    let n = plan.threads;
    let mut notes = Vec::new();
    if let Some(fstype) = fs.caseless.as_ref().filter(|_| plan.verbose) {
        notes.push(format!(
            "{}: names are compared without case here ({fstype}): one writer thread, no io_uring",
            plan.dest.display()
        ));
    }
    // Said by --json's writer counts only: -v lists names, as GNU tar's does, and many
    // virtual machines' disks have no journal.
    let serial = fs.caseless.is_some() || plan.keep_directory_symlink;
    let unlinks = plan.recursive_unlink || plan.old_files == OldFiles::UnlinkFirst;
    if plan.keep_directory_symlink && !unlinks && n > 1 && plan.threads_given {
        notes.push(format!(
            "--keep-directory-symlink: one writer thread, not {n} (through a kept symlink one \
             file may have two names)"
        ));
    }
    let one = serial || fs.journal_less.is_some();
    let single = unlinks || plan.keep_directory_symlink || (one && !plan.threads_given);
    Layout {
        threads: if single { 1 } else { n },
        serial,
        journal_less: fs.journal_less.is_some(),
        notes,
    }
}
