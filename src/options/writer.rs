//! The writer plan: DIR and the roots, what to do with what is there, direct IO, the backend
//! and the writer threads, and their layout on DIR's filesystem.

use anyhow::{Result, bail};

use super::{Machine, Options, default_threads};
use crate::budget::tight_memory;
use crate::policy::conflict::OldFiles;
use crate::write::plan::{DestFs, Layout, WriterPlan};

/// How members land in DIR.
pub(super) fn writer_plan(opts: &Options, machine: &Machine) -> Result<WriterPlan> {
    let direct_threshold =
        opts.direct_threshold.unwrap_or(crate::write::direct_policy::DEFAULT_THRESHOLD);
    let (threads, threads_given) = writer_threads(opts.writer_threads, machine)?;
    let placement = super::placement::placement(&opts.spread, &opts.dest)?;
    Ok(WriterPlan {
        dest: opts.dest.clone(),
        placement,
        backend: opts.backend,
        threads,
        threads_given,
        direct: opts.direct,
        direct_threshold,
        tight_memory: tight_memory(machine.usable_memory).is_some(),
        direct_after: opts.direct_after,
        old_files: opts.old_files,
        exact_modes: opts.exact_modes,
        keep_directory_symlink: opts.keep_directory_symlink,
        dereference: opts.dereference,
        write_through: crate::policy::conflict::writes_through(
            opts.old_files,
            opts.overwrite,
            opts.dereference,
        ),
        delay_restore: opts.delay_restore,
        recursive_unlink: opts.recursive_unlink,
        backup: opts.backup.clone(),
        one_file_system: opts.one_file_system,
        verbose: opts.shown.report.verbose > 0,
        warnings: opts.shown.report.warnings,
        ring_probe: opts.ring_probe,
        sync: opts.sync,
        layout: None,
    })
}

/// Most writer threads by default. On 2 CPUs, 2 writers created the 100,000-file tree in 0.75x
/// (disk) to 0.81x (RAM-backed ext4) of one writer's time
/// (docs/PERFORMANCE.md, "The model for larger machines"); ext4's journal and the
/// directory locks are shared, so past 8 more threads mostly add contention.
pub const DEFAULT_MAX_WRITERS: usize = 8;

/// Below this RLIMIT_NPROC (`ulimit -u`, which counts every thread of the user), the default
/// is one writer: each more writer is a thread, and with io_uring its io-wq workers are more.
/// Distributions give users thousands; a limit this low is set on purpose.
const NPROC_FOR_WRITERS: u64 = 256;

/// `--writer-threads`, else the CPUs we may run on, at most DEFAULT_MAX_WRITERS (one where
/// RLIMIT_NPROC is below NPROC_FOR_WRITERS and applies: root is not held to it); and whether
/// the count was asked for.
pub fn writer_threads(flag: Option<usize>, machine: &Machine) -> Result<(usize, bool)> {
    let few_threads_allowed =
        !machine.root && machine.nproc_limit.is_some_and(|n| n < NPROC_FOR_WRITERS);
    let n = match flag {
        Some(n) => n,
        None if few_threads_allowed => 1,
        None => default_threads(true, machine).min(DEFAULT_MAX_WRITERS),
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
