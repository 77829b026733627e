//! A run's options as typed values, and the plans made of them: the layer the library's
//! `Restore` (api/) and the command line (cli/) both fill, below them both (issue 43: "the CLI
//! is a thin layer that fills the same options").
//!
//! `Options` holds what a run needs as values: sizes in bytes, counts, enums, paths,
//! patterns; no flag and no text to be read again. `Options::plans` makes the plan of each
//! stage (`command::Plans`) from them and from what `Machine` read of the process's
//! surroundings: the decoder threads and the memory budget (`input.rs`), what may land
//! (`member.rs`), the writers (`writer.rs`, with `--spread`'s roots in `placement.rs`), how the
//! archive is read, the resume points (`resume.rs`). `Options::prepare` adds the writers'
//! layout on DIR's filesystem for an extraction; `command::extract::run` then runs it, for a
//! program and for the command line alike.
//!
//! What turns flags into these values (sizes such as `50M`, GNU tar's option semantics, `-C`,
//! `$TAPE`, MEMBER operands in command-line order, conflicts between flags and their words)
//! is the command line's (cli/resolve.rs). What only the command line shows (the listing's
//! quoting, checkpoints, `--json`, `--totals`) it makes into the report and listing plans
//! itself, and they pass through here untouched (`Shown`); a library run keeps them quiet.

mod input;
mod member;
mod placement;
mod resume;
#[cfg(test)]
pub(crate) mod tests;
mod writer;

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::archive::Timestamp;
use crate::command::listing::ListingPlan;
use crate::command::{Command, Plans};
use crate::decode::plan::Handed;
use crate::metadata::xattrs::XattrFilter;
use crate::policy::admit::Limits;
use crate::policy::conflict::OldFiles;
use crate::reading::ReadPlan;
use crate::report::plan::ReportPlan;
use crate::resume::Flag;
use crate::selection::given::Given;
use crate::selection::plan::SelectionPlan;
use crate::write::backup::Backup;
use crate::write::plan::{Backend, DestFs, DirectIo, RingProbe};

use input::default_threads;
pub use writer::writer_layout;

/// What the plans need of the process's surroundings, read once (`Machine::read`) and passed
/// in as values, so that making the plans is a function of its inputs.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The effective user is root: RLIMIT_NPROC does not hold it.
    pub root: bool,
    /// CPUs this process may run on (`available_parallelism`).
    pub cpus: usize,
    /// `ulimit -v` is set (resources.rs `address_space_limited`).
    pub address_space_limited: bool,
    /// The soft RLIMIT_NPROC, when there is one.
    pub nproc_limit: Option<u64>,
    /// Bytes of memory this process may use (budget.rs `usable_memory`).
    pub usable_memory: u64,
    /// The run's start, from which relative dates (`-N yesterday`) count.
    pub now: Timestamp,
}

impl Machine {
    /// Reads the surroundings, once; `started`: when the run started (`Reporter::started_at`).
    pub fn read(started: std::time::SystemTime) -> Result<Machine> {
        let since = started.duration_since(std::time::UNIX_EPOCH)?;
        Ok(Machine {
            // Safety: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            address_space_limited: crate::resources::address_space_limited(),
            nproc_limit: crate::resources::soft_limit(libc::RLIMIT_NPROC),
            usable_memory: crate::budget::usable_memory(),
            now: Timestamp { secs: since.as_secs() as i64, nanos: since.subsec_nanos() },
        })
    }
}

/// A URL's download: used when the archive is an `http://`, `https://` or `s3://` URL.
#[derive(Debug, Clone)]
pub struct Download {
    /// Other sources of the same archive, in order.
    pub mirrors: Vec<String>,
    /// Bytes a second, all connections together.
    pub limit_rate: Option<u64>,
    /// Connections per source, at most.
    pub connections: usize,
    /// How long a connection may deliver less than `min_rate` before it is replaced.
    pub stall: std::time::Duration,
    /// Bytes a second a connection must keep over `stall` (0: no floor).
    pub min_rate: u64,
    pub retries: u32,
    pub cacert: Option<PathBuf>,
    /// Where to keep a copy of the archive's bytes.
    pub keep: Option<PathBuf>,
    /// The archive's SHA-256, checked at its end.
    pub checksum: Option<[u8; 32]>,
    /// An `s3://` object is asked for without credentials.
    pub no_sign_request: bool,
}

impl Default for Download {
    fn default() -> Download {
        use crate::decode::url;
        Download {
            mirrors: Vec::new(),
            limit_rate: None,
            connections: url::DEFAULT_CONNECTIONS,
            stall: url::DEFAULT_STALL,
            min_rate: url::DEFAULT_MIN_RATE,
            retries: url::retry::DEFAULT_RETRIES,
            cacert: None,
            keep: None,
            checksum: None,
            no_sign_request: false,
        }
    }
}

/// Members under `prefix` spread across `roots`, the prefix taken off (policy/route.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spreading {
    /// Plain components, `/`-separated (`accounts/`).
    pub prefix: String,
    pub roots: Vec<PathBuf>,
}

/// A program's own placement (`Restore::roots` + `Restore::route`): its roots, numbered from
/// 1, and the callback asked for every member (policy/route.rs `Rule`).
#[derive(Clone)]
pub struct Routing {
    pub roots: Vec<PathBuf>,
    pub rule: Arc<crate::policy::route::Rule>,
}

impl std::fmt::Debug for Routing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routing").field("roots", &self.roots).finish_non_exhaustive()
    }
}

/// What is said, and how `-t` and `-v` lines look: the command line's (cli/resolve.rs makes
/// them of its flags); a library run's are quiet (`Shown::quiet`).
#[derive(Debug, Clone)]
pub struct Shown {
    pub report: ReportPlan,
    pub listing: ListingPlan,
    /// `-R`: block numbers in the reader's messages.
    pub block_numbers: bool,
    /// `--show-omitted-dirs`.
    pub show_omitted_dirs: bool,
}

impl Shown {
    /// Nothing said but warnings, through the caller's observer: no listing, no resume
    /// line, no download retries.
    pub fn quiet() -> Shown {
        Shown {
            report: ReportPlan {
                verbose: 0,
                quiet: true,
                json: false,
                totals: false,
                record_size: 20 * 512,
                index_file: None,
                warnings: crate::report::Warnings::default(),
                checkpoint: None,
            },
            listing: ListingPlan {
                block_past: None,
                numeric_owner: false,
                label_given: false,
                show_transformed: false,
                strip_components: 0,
                one_top_level: None,
                quoting: crate::report::quoting::Quoting::default(),
                times: crate::report::time::TimeStyle::default(),
                xattrs: None,
                acls: false,
            },
            block_numbers: false,
            show_omitted_dirs: false,
        }
    }
}

/// A run's options, as typed values. `Options::new` gives `fastuntar -x`'s defaults for a
/// program's run.
#[derive(Debug, Clone)]
pub struct Options {
    /// What runs: `Extract` for a program; `-t`, `-O`, `--to-command` from the command line.
    pub command: Command,

    // The input.
    /// The archive file or URL; None: `reader`, else standard input.
    pub archive: Option<PathBuf>,
    /// A reader handed over by a program, read instead of an archive file.
    pub reader: Option<Handed>,
    /// A decompressing program's argv (`-I`): its output is read as the archive.
    pub filter: Option<Vec<String>>,
    /// How a URL archive is downloaded.
    pub download: Download,
    /// The largest zstd window a frame may ask for, as a power of two.
    pub max_window_log: u32,
    /// Bytes the run's buffers may take (None: by what the process may use).
    pub memory: Option<u64>,
    /// zstd decoder threads (None: by the CPUs).
    pub threads: Option<usize>,

    // Which members, under which names.
    pub members: Vec<Given>,
    pub exclude: Vec<Given>,
    /// Directories selected bring what they hold.
    pub recursion: bool,
    /// Members before the first of this name are skipped (`-K`).
    pub starting_file: Option<Vec<u8>>,
    /// Which occurrence of a named member is extracted (0: every one).
    pub occurrence: u64,
    /// Only members newer than this (`-N`).
    pub newer: Option<Timestamp>,
    /// `sed` expressions applied to names (`--transform`), as given.
    pub transform: Vec<String>,
    /// Ask before each member (`-w`).
    pub interactive: bool,
    /// A name or pattern list was read from standard input (`-T -`).
    pub stdin_read: bool,

    // What may land and how.
    pub strip_components: usize,
    /// A directory every member lands under, as plain components.
    pub one_top_level: Option<PathBuf>,
    /// The ledger snapshot layout and its limits (policy/admit.rs).
    pub snapshot: bool,
    /// The limits asked for; `snapshot` fills those not given.
    pub limits: Limits,
    /// Restore the archive's owners.
    pub same_owner: bool,
    pub numeric_owner: bool,
    /// Files get the time they are extracted (`-m`).
    pub touch: bool,
    /// Extended attributes restored, and which.
    pub xattrs: Option<XattrFilter>,
    pub acls: bool,
    /// `-G`: the archive is incremental.
    pub incremental: bool,

    // How members land.
    /// DIR.
    pub dest: PathBuf,
    pub spread: Vec<Spreading>,
    /// A program's routing callback (not with `spread`).
    pub routing: Option<Routing>,
    pub backend: Backend,
    /// Writer threads (None: by the CPUs and DIR's filesystem).
    pub writer_threads: Option<usize>,
    pub direct: DirectIo,
    /// Files of at least this many bytes may be written with O_DIRECT (None: the default).
    pub direct_threshold: Option<u64>,
    /// Testing: direct IO after this many bytes of a file.
    pub direct_after: Option<u64>,
    pub old_files: OldFiles,
    /// `--overwrite`: write through what is there (policy/conflict.rs `writes_through`).
    pub overwrite: bool,
    /// Modes exactly as archived, set-id bits too, ignoring the umask.
    pub exact_modes: bool,
    pub keep_directory_symlink: bool,
    pub dereference: bool,
    pub delay_restore: bool,
    pub recursive_unlink: bool,
    pub backup: Option<Arc<Backup>>,
    pub one_file_system: bool,
    pub ring_probe: RingProbe,
    /// syncfs before the run ends.
    pub sync: bool,

    // How the archive is read.
    pub ignore_zeros: bool,
    /// PAX keywords to ignore (`--pax-option delete=`), as patterns.
    pub pax_delete: Vec<CString>,
    /// The volume label the archive must have (`-V`), a pattern.
    pub label: Option<String>,

    // Resume.
    pub resume: Flag,
    /// Bytes of archive data between two resume points (0: none recorded).
    pub writeback: u64,
    /// Testing: where the run kills itself (`--debug-kill-at`).
    pub debug_kill: Option<String>,

    /// What is said (the command line's).
    pub shown: Shown,
}

impl Options {
    /// The options of `fastuntar -x -C dest` for a program's run: everything that would be
    /// said but warnings kept quiet, owners and exact modes not restored whoever runs it (a
    /// program that runs as root gets the archive's files as its own, with modes minus its
    /// umask, as the `tar` crate and Agave's unpacker make them).
    pub fn new(dest: PathBuf) -> Options {
        Options {
            command: Command::Extract,
            archive: None,
            reader: None,
            filter: None,
            download: Download::default(),
            // 128M, as zstd's CLI (cli/args/limits.rs `--max-window`).
            max_window_log: 27,
            memory: None,
            threads: None,
            members: Vec::new(),
            exclude: Vec::new(),
            recursion: true,
            starting_file: None,
            occurrence: 0,
            newer: None,
            transform: Vec::new(),
            interactive: false,
            stdin_read: false,
            strip_components: 0,
            one_top_level: None,
            snapshot: false,
            limits: Limits::default(),
            same_owner: false,
            numeric_owner: false,
            touch: false,
            xattrs: None,
            acls: false,
            incremental: false,
            dest,
            spread: Vec::new(),
            routing: None,
            backend: Backend::Auto,
            writer_threads: None,
            direct: DirectIo::Auto,
            direct_threshold: None,
            direct_after: None,
            old_files: OldFiles::Replace,
            overwrite: false,
            exact_modes: false,
            keep_directory_symlink: false,
            dereference: false,
            delay_restore: false,
            recursive_unlink: false,
            backup: None,
            one_file_system: false,
            ring_probe: RingProbe::Kernel,
            sync: false,
            ignore_zeros: false,
            pax_delete: Vec::new(),
            label: None,
            resume: Flag::Auto,
            // 256M (cli/args/resume.rs `--writeback-every`).
            writeback: 256 << 20,
            debug_kill: None,
            shown: Shown::quiet(),
        }
    }

    /// The plans for a run, one per stage.
    pub fn plans(self, machine: &Machine) -> Result<Plans> {
        let input = input::input_plan(&self, machine)?;
        let policy = member::member_plan(&self);
        let writer = writer::writer_plan(&self, machine)?;
        let selection = self.selection_plan()?;
        let read = self.read_plan(&selection, &policy);
        let resume = resume::resume_plan(&self, &input, &selection, &policy, &writer, &read);
        let tar_env = tar_env(input.archive.as_deref(), self.shown.report.record_size);
        let Shown { report, listing, .. } = self.shown;
        let mut plans = Plans {
            command: self.command,
            input,
            resume,
            read,
            selection,
            policy,
            writer,
            report,
            listing,
            tar_env,
        };
        // A program's routing callback: its roots checked, the writers' placement, the roots
        // the resume points sync and the digest.
        if let Some(Routing { roots, rule }) = self.routing {
            placement::route(&mut plans, &roots, rule)?;
        }
        Ok(plans)
    }

    /// The plans, and for an extraction the writers' layout on DIR's filesystem (probed
    /// here): what `command::extract::run` takes.
    pub fn prepare(self, machine: &Machine) -> Result<Plans> {
        let mut plans = self.plans(machine)?;
        if !plans.command.reads_only() {
            let fs = DestFs::probe(&plans.writer);
            plans.writer.layout = Some(writer_layout(&plans.writer, &fs));
        }
        Ok(plans)
    }

    fn reads_only(&self) -> bool {
        self.command.reads_only()
    }

    /// Which members, under which names.
    fn selection_plan(&self) -> Result<SelectionPlan> {
        let transforms = crate::selection::transform::Transforms::parse(&self.transform)
            .context("--transform")?;
        Ok(SelectionPlan {
            members: self.members.clone(),
            exclude: self.exclude.clone(),
            recursion: self.recursion,
            starting_file: self.starting_file.clone(),
            occurrence: self.occurrence,
            newer: self.newer,
            transforms: Arc::new(transforms),
            interactive: self.interactive,
            stdin_taken: self.archive.is_none() || self.stdin_read,
        })
    }

    /// How the archive is read: the reader's options and what it keeps.
    fn read_plan(
        &self,
        selection: &SelectionPlan,
        policy: &crate::policy::plan::MemberPlan,
    ) -> ReadPlan {
        let list = self.command == Command::List;
        let verbose = self.shown.report.verbose;
        // Kept when extracting with --xattrs or --acls, and for -tv's mark with either.
        let marks = list && verbose > 0;
        let asked = policy.xattrs.is_some() || policy.acls;
        ReadPlan {
            ignore_zeros: self.ignore_zeros,
            block_numbers: self.shown.block_numbers,
            pax_delete: self.pax_delete.clone(),
            xattrs: asked && (marks || !self.reads_only()),
            // -G: the directories' lists, to purge by, or to show (-t -vv, as GNU tar's -tvvv:
            // its -t counts as one -v).
            dumpdirs: policy.incremental && (!self.reads_only() || list && verbose > 1),
            show_omitted_dirs: self.shown.show_omitted_dirs,
            transforms: selection.transforms.clone(),
            label: self.label.clone(),
            checkpoint: self.shown.report.checkpoint.clone(),
            warnings: self.shown.report.warnings,
        }
    }
}

/// The TAR_* variables GNU tar gives every program it runs (`--to-command`, a checkpoint's
/// `exec`) that describe the run: TAR_VERSION (fastuntar's), TAR_ARCHIVE (`-` for standard
/// input) and TAR_BLOCKING_FACTOR. Each caller adds TAR_FORMAT and its own.
pub fn tar_env(archive: Option<&Path>, record_size: u64) -> [(&'static str, OsString); 3] {
    let archive = archive.map_or_else(|| "-".into(), |p| p.as_os_str().to_os_string());
    [
        ("TAR_VERSION", env!("CARGO_PKG_VERSION").into()),
        ("TAR_ARCHIVE", archive),
        ("TAR_BLOCKING_FACTOR", (record_size / 512).to_string().into()),
    ]
}
