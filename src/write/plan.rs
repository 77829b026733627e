//! The writer plan: how members land in DIR, as the run's options fixed it (options/writer.rs):
//! the backend, the writer threads, the direct-IO policy's inputs, the options for a path that
//! exists already, and how modes and directories are restored. write/ reads only this.

use std::path::PathBuf;
use std::sync::Arc;

use crate::policy::conflict::OldFiles;

#[derive(Debug, Clone)]
pub struct WriterPlan {
    /// DIR, from the `-C`s.
    pub dest: PathBuf,
    /// `--spread`: the members under a prefix go to other roots (policy/route.rs), each with
    /// a writer of its own (write/roots.rs).
    pub placement: crate::policy::route::Placement,
    pub backend: Backend,
    /// Writer threads asked for (`--writer-threads`) or the default for this machine; the
    /// run's count is `Layout::threads`.
    pub threads: usize,
    /// Whether the user asked for that count: a count cut down is then worth a warning, and
    /// DIR's filesystem does not lower it.
    pub threads_given: bool,
    /// `--direct-io[=WHEN]`, `--no-direct-io` (direct_policy.rs).
    pub direct: DirectIo,
    /// `--direct-io-threshold`: the smallest file written direct.
    pub direct_threshold: u64,
    /// The process may use little memory (budget.rs `tight_memory`: a small cgroup limit or
    /// `ulimit -v`): a direct-IO plan that starts buffered keeps the portable writer.
    pub tight_memory: bool,
    /// The hidden `--debug-direct-after`: the tree from which auto writes direct, instead of
    /// direct_policy::AUTO_MIN_TREE (the test suite's archives are small).
    pub direct_after: Option<u64>,
    /// What to do where a member's path exists already (`-k`, `--skip-old-files`, ...).
    pub old_files: OldFiles,
    /// Modes exactly as archived, set-id bits included: `-p`, or root without
    /// `--no-same-permissions`; otherwise less the umask.
    pub exact_modes: bool,
    /// `--keep-directory-symlink`, or `-h` (dest.rs, tree.rs).
    pub keep_directory_symlink: bool,
    /// `-h`: a directory member kept as a symlink to a directory gives the directory it leads
    /// to its mode and time (GNU tar's `deref_stat` in `extract_dir`).
    pub dereference: bool,
    /// `--overwrite -h`: a symlink at a file member's path is written through, inside DIR
    /// (`conflict::writes_through`).
    pub write_through: bool,
    /// `--delay-directory-restore`: directory metadata is applied at the end (delayed.rs).
    pub delay_restore: bool,
    /// `--recursive-unlink`: an existing directory in a member's way goes with its contents.
    pub recursive_unlink: bool,
    /// `--backup`, `--suffix` (backup.rs); None: what a member replaces is removed.
    pub backup: Option<Arc<super::backup::Backup>>,
    /// `--one-file-system`: `-G` removes nothing on another filesystem than DIR's.
    pub one_file_system: bool,
    /// `-v`: the writer's lines (`Renaming`, the io_uring fallback).
    pub verbose: bool,
    /// The warning classes `--warning` left on, for what the writers warn of (events.rs).
    pub warnings: crate::report::Warnings,
    /// The hidden `--debug-uring`: how the writer learns whether io_uring is there.
    pub ring_probe: RingProbe,
    /// `--sync`: DIR's filesystem is synced at the end.
    pub sync: bool,
    /// The writer threads and backend rule for DIR's filesystem (options/writer.rs
    /// `writer_layout`, from `DestFs::probe`); None until decided, for a run that writes.
    pub layout: Option<Layout>,
}

/// Writer backend (`--io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// io_uring with one writer thread or when large files go direct; plain system calls when
    /// several writer threads write every file buffered.
    Auto,
    /// io_uring (falls back to portable, with a warning, where the kernel refuses it).
    Uring,
    /// Plain pwrite/openat system calls.
    Portable,
}

/// When files are written with O_DIRECT (direct_policy.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectIo {
    /// Where it was measured to be faster (the filesystem, the tree's and the file's size).
    Auto,
    /// Every file of at least the threshold, wherever O_DIRECT is accepted.
    Always,
    /// No file.
    Never,
}

/// How the writer learns whether io_uring is there: from the kernel, or (the test suite's
/// hidden `--debug-uring`) as a kernel that refuses it or lacks an operation would answer, so
/// the fallback to the portable writer is tested on any kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RingProbe {
    /// Ask the kernel.
    #[default]
    Kernel,
    /// As kernel.io_uring_disabled=2: the ring's set-up fails with EPERM.
    Refused,
    /// As a 5.5 kernel: the ring is set up, its probe lacks IORING_OP_OPENAT.
    NoOpenat,
}

/// What DIR's filesystem says about writing in parallel, probed once before the writers are
/// made (nothing is asked that the plan makes moot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestFs {
    /// Names are compared without case there (casefold.rs): its type, or "casefold".
    pub caseless: Option<String>,
    /// An ext2/3/4 without a journal (journal.rs): its type.
    pub journal_less: Option<String>,
}

impl DestFs {
    /// Probes DIR (or the directory above it where it will be made) for what `plan` leaves
    /// open: case folding unless the user chose the writer threads and the backend, the
    /// journal unless the user chose the writer threads.
    pub fn probe(plan: &WriterPlan) -> DestFs {
        let chosen = plan.threads_given && plan.backend != Backend::Auto;
        DestFs {
            caseless: (!chosen).then(|| super::casefold::caseless(&plan.dest)).flatten(),
            journal_less: (!plan.threads_given)
                .then(|| super::journal::journal_less(&plan.dest))
                .flatten(),
        }
    }
}

/// How many writer threads a run has, decided from the plan and DIR's filesystem before
/// the file descriptors are counted (`write::create_n` may lower it to fit them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub threads: usize,
    /// One portable writer is wanted by DIR's filesystem or `--keep-directory-symlink` (`--io
    /// auto` then writes without io_uring).
    pub serial: bool,
    /// DIR is an ext2/3/4 without a journal: io_uring only for files written direct, with
    /// buffered files opened on the writer thread.
    pub journal_less: bool,
    /// Warnings the writers say as they are made (in this order).
    pub notes: Vec<String>,
}
