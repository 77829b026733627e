//! The resolve step: the low arguments clap parsed (`Args`) become one narrow plan per stage
//! (`command::Plans`), as ripgrep's `LowArgs` become `HiArgs`. Every choice the options imply
//! is made here, by pure functions of the arguments and of what the edge read once from the
//! environment (`Edge`: `$TAPE`, whether stdin is a terminal, the CPUs, the memory and the
//! limits the process may use); the stages never see a flag.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use crate::archive::Timestamp;
use crate::budget::{Budget, tight_memory, url_window};
use crate::cli::operands::{self, Selection};
use crate::cli::{Args, Ordered};
use crate::command::listing::ListingPlan;
use crate::command::{Command, Plans};
use crate::decode::plan::InputPlan;
use crate::policy::admit::{Limits, SNAPSHOT_MAX_BYTES, SNAPSHOT_MAX_FILES};
use crate::policy::conflict::OldFiles;
use crate::policy::plan::MemberPlan;
use crate::reading::ReadPlan;
use crate::report::Warnings;
use crate::report::checkpoint::CheckpointPlan;
use crate::report::plan::ReportPlan;
use crate::resume::{Flag, ResumePlan};
use crate::selection::plan::SelectionPlan;
use crate::write::plan::{Backend, DestFs, DirectIo, Layout, RingProbe, WriterPlan};

/// What the resolve step needs of the process's surroundings, read once at the edge
/// (`Edge::read`, in main) and passed in as values, so that `resolve` is a pure function of
/// its inputs.
#[derive(Debug, Clone)]
pub struct Edge {
    /// `$TAPE`, when set and not empty: the archive without `-f`.
    pub tape: Option<PathBuf>,
    /// Standard input is a terminal (never read an archive from one).
    pub stdin_tty: bool,
    /// The effective user is root: owners and modes are restored by default.
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
    /// `$VERSION_CONTROL`: the kind of backups `--backup` without CONTROL makes.
    pub version_control: Option<String>,
    /// `$SIMPLE_BACKUP_SUFFIX`: the backups' suffix without `--suffix`.
    pub backup_suffix: Option<String>,
}

impl Edge {
    /// Reads the surroundings, once; `started`: when the run started (`Reporter::started_at`).
    pub fn read(started: std::time::SystemTime) -> Result<Edge> {
        use std::io::IsTerminal;
        let since = started.duration_since(std::time::UNIX_EPOCH)?;
        Ok(Edge {
            tape: std::env::var_os("TAPE").filter(|t| !t.is_empty()).map(PathBuf::from),
            stdin_tty: std::io::stdin().is_terminal(),
            // Safety: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            address_space_limited: crate::resources::address_space_limited(),
            nproc_limit: crate::resources::soft_limit(libc::RLIMIT_NPROC),
            usable_memory: crate::budget::usable_memory(),
            now: Timestamp { secs: since.as_secs() as i64, nanos: since.subsec_nanos() },
            version_control: std::env::var("VERSION_CONTROL").ok(),
            backup_suffix: std::env::var("SIMPLE_BACKUP_SUFFIX").ok(),
        })
    }
}

/// The archive, the `-f` option's, else the first operand, else `$TAPE` (as GNU tar, which
/// would take the operand for a MEMBER); None for standard input (`-` or nothing), but never a
/// terminal.
fn archive_source(args: &Args, edge: &Edge) -> Result<Option<PathBuf>> {
    let first_operand = args.ordered.iter().find_map(|o| match o {
        Ordered::Operand(text) if args.file.is_none() => Some(PathBuf::from(text)),
        _ => None,
    });
    match args.file.clone().or(first_operand).or(edge.tape.clone()) {
        Some(p) if p.as_os_str() != "-" => Ok(Some(p)),
        _ if edge.stdin_tty => {
            bail!("refusing to read the archive from a terminal (missing -f option?)")
        }
        _ => Ok(None),
    }
}

/// The plans for a run. `notes`: warnings to say (in order) whether or not the run goes on
/// (`--level` without `-g`, `-N`'s date as read with `-v`).
pub fn resolve(args: Args, edge: &Edge, notes: &mut Vec<String>) -> Result<Plans> {
    refuse_unsupported(&args)?;
    let chars: Vec<(bool, &[u8])> =
        args.quote_chars_ordered.iter().map(|(on, s)| (*on, s.as_bytes())).collect();
    let quoting = crate::report::quoting::Quoting::new(args.quoting_style.as_deref(), &chars)
        .context("--quoting-style")?;
    let record_size = record_size(&args)?;
    let totals = match args.totals.as_deref() {
        None => false,
        Some("") => true,
        Some(sig) => bail!(
            "--totals={sig} is not supported: fastuntar prints the totals at the end only \
             (use --totals)"
        ),
    };
    let filter = filter(&args)?;
    let archive = archive_source(&args, edge)?;
    // GNU tar looks at the first record of an archive file named without -I or a
    // compression flag, to learn its compression (checkpoint.rs).
    let sniffs = archive.is_some() && filter.is_none() && args.compression_flag == 0;
    let checkpoint = crate::report::checkpoint::Checkpoints::new(&args.checkpoints, sniffs)?;
    let one_top_level = match args.one_top_level.as_deref() {
        Some(dir) => top_level(dir.as_ref(), archive.as_deref())?,
        None => None,
    };
    let warnings = Warnings::parse(&args.warning)?;
    let selection = selection_plan(&args, archive.is_none(), edge, notes)?;
    refuse_json(&args)?;
    let input = input_plan(&args, archive, filter, edge)?;
    let policy = member_plan(&args, one_top_level, edge)?;
    let writer = writer_plan(&args, edge, warnings)?;
    let command = command(&args);
    let tar_env = tar_env(input.archive.as_deref(), record_size);
    let checkpoint = checkpoint.map(|spec| CheckpointPlan {
        spec,
        record: record_size,
        plain_file: input.archive.clone().filter(|_| input.filter.is_none()),
        ignore_zeros: args.ignore_zeros,
        dots_to_stderr: args.to_stdout,
        env: tar_env.clone(),
        subcommand: if args.list { "-t" } else { "-x" },
    });
    let read = read_plan(&args, &selection, &policy, &command, checkpoint.clone(), warnings)?;
    let report = ReportPlan {
        verbose: args.verbose,
        quiet: args.quiet,
        json: args.json,
        totals,
        record_size,
        index_file: args.index_file.clone(),
        warnings,
        checkpoint,
    };
    let listing = listing_plan(&args, quoting, &policy);
    let resume = resume_plan(&args, &input, &selection, &policy, &writer, &read)?;
    Ok(Plans { command, input, resume, read, selection, policy, writer, report, listing, tar_env })
}

/// The operations and options of GNU tar that fastuntar does not have: one line each.
fn refuse_unsupported(args: &Args) -> Result<()> {
    let operations = [
        (args.create, "-c (--create)"),
        (args.append, "-r (--append)"),
        (args.update, "-u (--update)"),
        (args.catenate, "-A (--catenate)"),
        (args.delete, "--delete"),
        (args.diff, "-d (--diff, --compare)"),
        (args.test_label, "--test-label"),
    ];
    if let Some((_, op)) = operations.iter().find(|(given, _)| *given) {
        bail!(
            "{op} is not supported: fastuntar extracts (-x) and lists (-t) archives; use tar \
             to create, change or compare them"
        );
    }
    if args.verify {
        bail!("-W (--verify) is not supported: fastuntar does not write archives");
    }
    let volumes = [
        (args.multi_volume, "-M (--multi-volume)"),
        (args.tape_length.is_some(), "-L (--tape-length)"),
        (args.info_script.is_some(), "-F (--info-script)"),
    ];
    if let Some((_, op)) = volumes.iter().find(|(given, _)| *given) {
        bail!("{op} is not supported: fastuntar reads single-volume archives");
    }
    if args.absolute_names {
        bail!(
            "-P (--absolute-names) is not supported: members are always extracted inside the \
             destination (a leading '/' is removed, a '..' component refused)"
        );
    }
    Ok(())
}

/// `--json` prints its object on stdout, which `-O` and `--to-command` cannot share.
fn refuse_json(args: &Args) -> Result<()> {
    if args.to_command.is_some() && args.json {
        bail!("--json cannot be used with --to-command");
    }
    if args.to_stdout && args.json {
        bail!("--json cannot be used with -O/--to-stdout: standard output carries the files' data");
    }
    Ok(())
}

fn command(args: &Args) -> Command {
    match (&args.to_command, args.list, args.to_stdout) {
        (_, true, _) => Command::List,
        (Some(command), false, _) => Command::ToCommand {
            command: command.clone(),
            ignore_errors: args.ignore_command_error,
        },
        (None, false, true) => Command::ToStdout,
        (None, false, false) => Command::Extract,
    }
}

/// The TAR_* variables GNU tar gives every program it runs (`--to-command`, a checkpoint's
/// `exec`) that describe the run: TAR_VERSION (fastuntar's), TAR_ARCHIVE (`-` for standard
/// input) and TAR_BLOCKING_FACTOR. Each caller adds TAR_FORMAT and its own.
fn tar_env(archive: Option<&Path>, record_size: u64) -> [(&'static str, OsString); 3] {
    let archive = archive.map_or_else(|| "-".into(), |p| p.as_os_str().to_os_string());
    [
        ("TAR_VERSION", env!("CARGO_PKG_VERSION").into()),
        ("TAR_ARCHIVE", archive),
        ("TAR_BLOCKING_FACTOR", (record_size / 512).to_string().into()),
    ]
}

/// How `-t` and `-v` lines look.
fn listing_plan(
    args: &Args,
    quoting: crate::report::quoting::Quoting,
    policy: &MemberPlan,
) -> ListingPlan {
    ListingPlan {
        block_past: args.block_number.then_some(u64::from(!args.list)),
        numeric_owner: args.numeric_owner,
        label_given: args.label.is_some(),
        show_transformed: args.show_transformed_names > 0,
        strip_components: args.strip_components,
        one_top_level: policy.one_top_level.clone(),
        quoting,
        times: crate::report::time::TimeStyle { full: args.full_time, utc: args.utc },
        xattrs: policy.xattrs.clone(),
        acls: args.acls_on,
    }
}

/// Which members, under which names.
fn selection_plan(
    args: &Args,
    stdin_archive: bool,
    edge: &Edge,
    notes: &mut Vec<String>,
) -> Result<SelectionPlan> {
    let transforms =
        crate::selection::transform::Transforms::parse(&args.transform).context("--transform")?;
    let Selection { members, exclude, recursion, read_stdin } =
        operands::resolve(&args.ordered, args.file.is_none(), stdin_archive, notes)?;
    let occurrence = match args.occurrence {
        None => 0,
        Some(n) if n > 0 && members.is_empty() => {
            bail!("--occurrence is meaningless without a file list (MEMBER operands or -T)")
        }
        // GNU tar: 0 is "every occurrence", as without the option.
        Some(n) => n,
    };
    let newer = newer_than(args, edge.now, notes)?;
    if let Some(level) = &args.level {
        let level = incremental_level(level).context("Invalid incremental level value")?;
        // GNU tar's "no level" is -1; any other without -g is warned about.
        if args.listed_incremental.is_none() && level != -1 {
            notes.push("--level is meaningless without --listed-incremental".into());
        }
    }
    Ok(SelectionPlan {
        members,
        exclude,
        recursion,
        starting_file: args.starting_file.last().map(|n| n.as_bytes().to_vec()),
        occurrence,
        newer,
        transforms: Arc::new(transforms),
        interactive: args.interactive,
        stdin_taken: stdin_archive || read_stdin,
    })
}

/// `-N/--newer/--after-date DATE` or `--newer-mtime DATE` (dates.rs), relative dates counted
/// from the run's start (`now`). With `-v` a DATE given as text is said back as read, as GNU
/// tar does ("Option --after-date: Treating date 'yesterday' as 2026-11-23 10:00:00.5"),
/// unless it reads the same.
fn newer_than(args: &Args, now: Timestamp, notes: &mut Vec<String>) -> Result<Option<Timestamp>> {
    use crate::selection::dates;
    let (option, text) = match (&args.newer, &args.newer_mtime) {
        (Some(text), _) => ("--after-date", text),
        (None, Some(text)) => ("--newer-mtime", text),
        (None, None) => return Ok(None),
    };
    let at = dates::date_or_file(text, now).with_context(|| option.to_string())?;
    let style = crate::report::time::TimeStyle { full: false, utc: args.utc };
    let said = crate::report::time::tartime(at.secs, at.nanos, true, style);
    if args.verbose > 0 && !dates::names_a_file(text) && said != *text {
        notes.push(format!("Option {option}: Treating date '{text}' as {said}"));
    }
    Ok(Some(at))
}

/// Where the archive comes from, how it is decoded, and the memory for it.
fn input_plan(
    args: &Args,
    archive: Option<PathBuf>,
    filter: Option<Vec<String>>,
    edge: &Edge,
) -> Result<InputPlan> {
    let memory = args.memory.as_deref().map(parse_size).transpose().context("--memory")?;
    if let Some(m) = memory {
        crate::budget::pool_shape(m)?;
    }
    let max_window_log = window_log(parse_size(&args.max_window).context("--max-window")?)?;
    let budget_memory = memory.or_else(|| tight_memory(edge.usable_memory));
    let url = url_plan(args, archive.as_deref(), filter.is_some(), budget_memory)?;
    let threads = match args.threads {
        Some(0) => bail!("--threads: must be at least 1"),
        Some(n) => n.min(MAX_THREADS),
        None => default_threads(args.list || args.to_stdout || args.to_command.is_some(), edge),
    };
    let budget = Budget {
        memory: budget_memory,
        explicit: memory.is_some(),
        usable: edge.usable_memory,
        window: url.as_ref().map_or(0, |u| u.window),
        reads_only: args.list || args.to_stdout || args.to_command.is_some(),
    };
    Ok(InputPlan { archive, filter, url, max_window_log, threads, budget })
}

/// What may land and how.
fn member_plan(args: &Args, one_top_level: Option<PathBuf>, edge: &Edge) -> Result<MemberPlan> {
    let opt_size = |s: &Option<String>, flag: &str| -> Result<Option<u64>> {
        s.as_deref().map(parse_size).transpose().with_context(|| flag.to_string())
    };
    let mut limits = Limits {
        max_files: args.max_files,
        max_bytes: opt_size(&args.max_bytes, "--max-bytes")?,
        max_member_size: opt_size(&args.max_member_size, "--max-member-size")?,
    };
    if args.snapshot {
        limits.max_files = limits.max_files.or(Some(SNAPSHOT_MAX_FILES));
        limits.max_bytes = limits.max_bytes.or(Some(SNAPSHOT_MAX_BYTES));
    }
    if args.xattrs_on && args.snapshot {
        bail!(
            "--xattrs cannot be used with --snapshot: the snapshot layout holds only files \
             and directories with fixed modes"
        );
    }
    let xattrs = args
        .xattrs_on
        .then(|| {
            crate::metadata::xattrs::XattrFilter::new(&args.xattrs_include, &args.xattrs_exclude)
        })
        .transpose()?;
    Ok(MemberPlan {
        strip_components: args.strip_components,
        one_top_level,
        snapshot: args.snapshot,
        limits,
        // As GNU tar: restored by default for root (`--no-same-owner` says not), by request
        // for everyone else.
        same_owner: args.same_owner || (!args.no_same_owner && edge.root),
        numeric_owner: args.numeric_owner,
        touch: args.touch,
        xattrs,
        acls: args.acls_on,
        incremental: args.incremental || args.listed_incremental.is_some(),
    })
}

/// `--backup[=CONTROL]` and `--suffix=SUFFIX` with what GNU tar reads of the environment for
/// them: the CONTROL (`$VERSION_CONTROL` for `--backup` without one; empty: the default) and
/// SUFFIX (`$SIMPLE_BACKUP_SUFFIX` without `--suffix`, else `~`) the backups take, or None
/// without either option. `--suffix` alone turns backups on, as in GNU tar.
fn backup_wanted<'a>(args: &'a Args, edge: &'a Edge) -> Option<(&'a str, &'a str)> {
    let control = match (args.backup.as_deref(), args.suffix.as_deref()) {
        (None, None) => return None,
        (Some(""), _) | (None, Some(_)) => edge.version_control.as_deref().unwrap_or(""),
        (Some(control), _) => control,
    };
    let suffix = args.suffix.as_deref().or(edge.backup_suffix.as_deref()).unwrap_or("~");
    Some((control, suffix))
}

/// How members land in DIR.
fn writer_plan(args: &Args, edge: &Edge, warnings: Warnings) -> Result<WriterPlan> {
    let direct_threshold = match &args.direct_io_threshold {
        Some(t) => parse_size(t).context("--direct-io-threshold")?,
        None => crate::write::direct_policy::DEFAULT_THRESHOLD,
    };
    let (threads, threads_given) = writer_threads(args.writer_threads, edge)?;
    let backup = match backup_wanted(args, edge) {
        Some((control, suffix)) => crate::write::backup::Backup::new(control, suffix)?,
        None => None,
    };
    Ok(WriterPlan {
        dest: destination(args)?,
        backend: match args.io {
            crate::cli::IoBackend::Auto => Backend::Auto,
            crate::cli::IoBackend::Uring => Backend::Uring,
            crate::cli::IoBackend::Portable => Backend::Portable,
        },
        threads,
        threads_given,
        direct: direct_io(args.direct_io, args.no_direct_io),
        direct_threshold,
        old_files: old_files(args),
        // Modes exactly as archived with -p, and as root unless --no-same-permissions (GNU
        // tar's default); otherwise the archive's modes less the umask, like tar without -p.
        exact_modes: args.preserve_permissions || (!args.no_same_permissions && edge.root),
        keep_directory_symlink: args.keep_directory_symlink || args.dereference,
        dereference: args.dereference,
        delay_restore: args.delay_directory_restore,
        recursive_unlink: args.recursive_unlink,
        backup: backup.map(Arc::new),
        one_file_system: args.one_file_system,
        verbose: args.verbose > 0,
        warnings,
        ring_probe: match args.debug_uring {
            None => RingProbe::Kernel,
            Some(crate::cli::DebugUring::Refused) => RingProbe::Refused,
            Some(crate::cli::DebugUring::NoOpenat) => RingProbe::NoOpenat,
        },
        sync: args.sync,
        layout: None,
    })
}

/// What to do where a member's path exists already. clap keeps these apart
/// (`conflicts_with`): GNU tar's last one wins, which would drop one of two options given
/// without a word.
fn old_files(args: &Args) -> OldFiles {
    match () {
        _ if args.keep_old_files => OldFiles::Keep,
        _ if args.skip_old_files => OldFiles::Skip,
        _ if args.keep_newer_files => OldFiles::KeepNewer,
        _ if args.no_overwrite_dir => OldFiles::NoOverwriteDir,
        _ if args.unlink_first => OldFiles::UnlinkFirst,
        _ => OldFiles::Replace,
    }
}

/// `--direct-io[=WHEN]` and `--no-direct-io`: clap keeps the last of them
/// (`overrides_with`); auto when neither is given.
fn direct_io(when: Option<crate::cli::DirectIo>, never: bool) -> DirectIo {
    use crate::cli::DirectIo as Flag;
    match (when, never) {
        (_, true) | (Some(Flag::Never), false) => DirectIo::Never,
        (Some(Flag::Always), false) => DirectIo::Always,
        (Some(Flag::Auto) | None, false) => DirectIo::Auto,
    }
}

/// How the archive is read: the reader's options and what it keeps.
fn read_plan(
    args: &Args,
    selection: &SelectionPlan,
    policy: &MemberPlan,
    command: &Command,
    checkpoint: Option<CheckpointPlan>,
    warnings: Warnings,
) -> Result<ReadPlan> {
    let reads_only = command.reads_only();
    // Kept when extracting with --xattrs or --acls, and for -tv's mark with either.
    let marks = args.list && args.verbose > 0;
    let asked = policy.xattrs.is_some() || policy.acls;
    Ok(ReadPlan {
        ignore_zeros: args.ignore_zeros,
        block_numbers: args.block_number,
        pax_delete: pax_delete(&args.pax_option)?,
        xattrs: asked && (marks || !reads_only),
        // -G: the directories' lists, to purge by, or to show (-t -vv, as GNU tar's -tvvv:
        // its -t counts as one -v).
        dumpdirs: policy.incremental && (!reads_only || args.list && args.verbose > 1),
        show_omitted_dirs: args.show_omitted_dirs,
        transforms: selection.transforms.clone(),
        label: args.label.clone(),
        checkpoint,
        warnings,
    })
}

/// Resume points: the flag, the options that refuse them, and the digest of the options that
/// change what lands (resume/options.rs).
fn resume_plan(
    args: &Args,
    input: &InputPlan,
    selection: &SelectionPlan,
    policy: &MemberPlan,
    writer: &WriterPlan,
    read: &ReadPlan,
) -> Result<ResumePlan> {
    let writeback = parse_size(&args.writeback_every).context("--writeback-every")?;
    Ok(ResumePlan {
        flag: match (args.resume, args.no_resume) {
            (_, true) => Flag::Off,
            (true, false) => Flag::Resume,
            (false, false) => Flag::Auto,
        },
        dest: writer.dest.clone(),
        refused: refused_option(input, selection, policy, writer),
        options: crate::resume::options::digest(
            input,
            selection,
            policy,
            writer,
            read,
            &args.transform,
        ),
        debug_kill: args.debug_kill_at.clone(),
        writeback: Some(writeback).filter(|&n| n > 0),
        quiet: args.quiet,
        reads_only: args.list || args.to_stdout || args.to_command.is_some(),
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

/// zstd decoder threads by default: the CPUs this process may run on (sched_getaffinity, and a
/// cgroup's CPU quota, through `available_parallelism`) when listing or with `-O`; one fewer when
/// extracting to disk, because the writer needs a CPU of its own. Measured on 2 CPUs (4 GB in 119
/// frames): `-t` took 0.57x the time with 2 threads, but extraction none less, to tmpfs, to
/// RAM-backed ext4 or to the disk: the writer's system time (2.4 s of copying into the page cache,
/// or the loop device's worker) already filled the second CPU, and a second decoder only added its
/// copying (docs/PERFORMANCE.md). One under `ulimit -v`.
fn default_threads(listing: bool, edge: &Edge) -> usize {
    // Under `ulimit -v` one: every thread adds its zstd window, stack and read-ahead, and
    // `--threads 8` under `ulimit -v 196608` failed (in a different allocation each run).
    if edge.address_space_limited {
        return 1;
    }
    let spare = if listing { edge.cpus } else { edge.cpus.saturating_sub(1) };
    spare.clamp(1, MAX_THREADS)
}

/// `--writer-threads`, else the CPUs we may run on, at most DEFAULT_MAX_WRITERS (one where
/// RLIMIT_NPROC is below NPROC_FOR_WRITERS and applies: root is not held to it); and whether
/// the count was asked for.
fn writer_threads(flag: Option<usize>, edge: &Edge) -> Result<(usize, bool)> {
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

/// GNU tar 1.34's `--level=NUMBER` (for creating with -g; checked and ignored when reading):
/// strtoul(3)'s number (leading blanks, a sign, decimal digits; the empty string is 0, a
/// number past the range is ULONG_MAX, a `-` negates it modulo 2^64) kept in an int, as GNU
/// tar keeps it (so `-1`, `-01` and 4294967295 are all -1). None where GNU tar says "Invalid
/// incremental level value".
fn incremental_level(text: &str) -> Option<i32> {
    if text.is_empty() {
        return Some(0);
    }
    let rest = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value =
        digits.bytes().try_fold(0u64, |n, b| n.checked_mul(10)?.checked_add(u64::from(b - b'0')));
    let value = match (value, negative) {
        (None, _) => u64::MAX,
        (Some(v), true) => v.wrapping_neg(),
        (Some(v), false) => v,
    };
    Some(value as u32 as i32)
}

/// Suffixes GNU tar 1.34 strips from the archive's base name to name `--one-top-level`'s
/// directory (suffix.c `compression_suffixes`), and `lz4`, which 1.34 does not know: after
/// one that does not start with `t`, a `.tar` before it goes too (`a.tar.gz` → `a`, `a.gz` →
/// `a`, `a.tgz.tar` → `a.tgz`). Case matters (`a.TAR` is not deduced).
const TOP_LEVEL_SUFFIXES: &[&str] = &[
    "tar", "gz", "tgz", "taz", "Z", "taZ", "bz2", "tbz", "tbz2", "tz2", "lz", "lzma", "tlz", "lzo",
    "xz", "txz", "zst", "tzst", "lz4",
];

/// `--one-top-level[=DIR]`: DIR as plain components (None: `.`, nothing to add), or without
/// DIR the archive's base name less its suffix (GNU tar's `strip_compression_suffix`); standard
/// input, or a name without a known suffix, is GNU tar's usage error. A DIR that would leave the
/// destination (absolute, `..`) is refused, whether given or deduced.
fn top_level(dir: &std::path::Path, archive: Option<&std::path::Path>) -> Result<Option<PathBuf>> {
    use std::path::Component;
    let deduced;
    let dir = if dir.as_os_str().is_empty() {
        let cannot = || {
            anyhow::anyhow!(
                "Cannot deduce top-level directory name; please set it explicitly with \
                 --one-top-level=DIR"
            )
        };
        // A URL's name is its path's last segment: the query string (a presigned URL's
        // signature, which may hold '/') and the fragment are not part of it; an s3:// key is
        // taken as it is ('?' and '#' are characters of it).
        let url_path = archive.filter(|a| crate::decode::url::is_url(a.as_os_str())).map(|a| {
            let text = a.to_string_lossy();
            match crate::decode::url::s3::is_s3(&text) {
                true => PathBuf::from(text.as_ref()),
                false => PathBuf::from(text.split(['?', '#']).next().unwrap_or("")),
            }
        });
        let archive = url_path.as_deref().or(archive);
        let base = archive.and_then(|a| a.file_name()).ok_or_else(cannot)?.as_bytes();
        let dot = base.iter().rposition(|&b| b == b'.').ok_or_else(cannot)?;
        let suffix = &base[dot + 1..];
        if !TOP_LEVEL_SUFFIXES.iter().any(|s| s.as_bytes() == suffix) {
            return Err(cannot());
        }
        let mut len = dot;
        if len > 4 && &base[len - 4..len] == b".tar" && suffix[0] != b't' {
            len -= 4;
        }
        if len == 0 {
            return Err(cannot());
        }
        deduced = PathBuf::from(std::ffi::OsStr::from_bytes(&base[..len]));
        &deduced
    } else {
        dir
    };
    let mut out = PathBuf::new();
    for c in dir.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => bail!(
                "--one-top-level: {}: the directory must lie inside the destination (no leading \
                 '/', no '..')",
                dir.display()
            ),
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// GNU tar's PAX keywords that `--pax-option delete=` may not name (xheader.c's protected
/// ones: without them sparse files, incremental and multi-volume archives would be misread).
const PROTECTED_PAX_KEYWORDS: &[&str] = &[
    "GNU.sparse.name",
    "GNU.sparse.major",
    "GNU.sparse.minor",
    "GNU.sparse.realsize",
    "GNU.sparse.numblocks",
    "GNU.sparse.size",
    "GNU.sparse.numbytes",
    "GNU.sparse.offset",
    "GNU.sparse.map",
    "GNU.dumpdir",
    "GNU.volume.label",
    "GNU.volume.filename",
    "GNU.volume.size",
    "GNU.volume.offset",
];

/// `--pax-option LIST`s as GNU tar 1.34 reads them (xheader.c `xheader_set_option` and
/// `xheader_set_keyword_equal`): comma-separated `KEYWORD=VALUE`s or `KEYWORD:=VALUE`s, the
/// keyword taken as written up to the `=` (less the `:`), the value from its first non-blank.
/// `delete` gives a pattern of keywords to skip in `x` headers (one matching a protected
/// keyword is refused); `exthdr.name`, `globexthdr.name`, `exthdr.mtime`, `globexthdr.mtime`
/// are for making archives. Any other keyword is an override, which GNU tar applies to what it
/// reads: refused for the keywords that would change what is extracted (`uname=bob`), and
/// for a protected keyword as GNU tar refuses it; accepted for the others, which change
/// nothing there either.
fn pax_delete(options: &[String]) -> Result<Vec<std::ffi::CString>> {
    /// The keywords an override of would change what GNU tar extracts or lists.
    const APPLIED: &[&str] =
        &["path", "linkpath", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"];
    let mut patterns = Vec::new();
    for token in options.iter().flat_map(|o| o.split(',')).filter(|t| !t.is_empty()) {
        let Some((keyword, value)) = token.split_once('=') else {
            bail!("--pax-option: Keyword {token} is unknown or not yet implemented");
        };
        let keyword = keyword.strip_suffix(':').unwrap_or(keyword);
        let value = value.trim_start_matches(|c: char| c.is_ascii_whitespace());
        match keyword {
            "delete" => {
                let pattern = std::ffi::CString::new(value)
                    .map_err(|_| anyhow::anyhow!("--pax-option: a NUL in {value:?}"))?;
                if PROTECTED_PAX_KEYWORDS.iter().any(|k| crate::archive::pax_deleted(&pattern, k)) {
                    bail!("--pax-option: Pattern '{value}' cannot be used");
                }
                patterns.push(pattern);
            }
            "exthdr.name" | "globexthdr.name" | "exthdr.mtime" | "globexthdr.mtime" => {}
            k if PROTECTED_PAX_KEYWORDS.contains(&k) => {
                bail!("--pax-option: Keyword {k} cannot be overridden")
            }
            k if APPLIED.contains(&k)
                || k.starts_with("SCHILY.")
                || k.starts_with("LIBARCHIVE.") =>
            {
                bail!(
                    "--pax-option {k}={value}: overriding a keyword's value is not supported \
                     (fastuntar reads the archive's values; delete={k} ignores them)"
                )
            }
            _ => {}
        }
    }
    Ok(patterns)
}

/// DIR from the `-C`s, as GNU tar changes directory for each (a relative one from the one
/// before; `.` without any). GNU tar also lets a `-C` between MEMBER names (or after `-T`)
/// put the names after it elsewhere; one destination per run cannot, so several `-C`s with
/// one after a name are refused. A single `-C` is DIR wherever it stands (GNU tar would
/// extract the names before it into the current directory: README, "How it differs").
fn destination(args: &Args) -> Result<PathBuf> {
    let mut dest: Option<PathBuf> = None;
    // Without -f the first operand is the archive, not a name.
    let mut archive_operand = args.file.is_none();
    let mut names = false;
    for o in &args.ordered {
        match o {
            Ordered::Operand(_) if std::mem::take(&mut archive_operand) => {}
            Ordered::Operand(_) | Ordered::AddFile(_) | Ordered::FilesFrom(_) => names = true,
            Ordered::Directory(dir) if names && args.directory.len() > 1 => bail!(
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

/// Bytes of a tar record: `-b N` blocks of 512 or `--record-size` bytes (a multiple of 512),
/// else GNU tar's default of 20 blocks.
fn record_size(args: &Args) -> Result<u64> {
    if let Some(b) = &args.blocking {
        return match b.parse::<u64>() {
            Ok(n) if n > 0 && n <= 1 << 21 => Ok(n * 512),
            // Accepted as before (the value was not read) when it is a word: only --totals
            // needs it.
            _ if args.totals.is_none() && b.bytes().all(|c| c.is_ascii_alphanumeric()) => {
                Ok(20 * 512)
            }
            _ => bail!("--blocking-factor: invalid number {b:?}"),
        };
    }
    if let Some(r) = &args.record_size {
        let n = parse_size(r).context("--record-size")?;
        if n == 0 || n % 512 != 0 {
            bail!("--record-size: {r}: not a multiple of 512");
        }
        return Ok(n);
    }
    Ok(20 * 512)
}

/// The decompressing program the flags ask for, as `PROG -d` split at spaces: GNU tar's
/// `-I PROG` and the flags that name one. The rest of the pipeline sees its output as the
/// archive.
fn filter(args: &Args) -> Result<Option<Vec<String>>> {
    let program = match () {
        _ if args.lzip => "lzip",
        _ if args.lzma => "lzma",
        _ if args.lzop => "lzop",
        _ if args.uncompress => "gzip",
        _ => match args.compress_program.as_deref() {
            Some(p) => p,
            None => return Ok(None),
        },
    };
    let mut words: Vec<String> = program.split_ascii_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        bail!("-I: no program given");
    }
    words.push("-d".to_string());
    Ok(Some(words))
}

/// Most decoder threads: past the 64 cores of the biggest validators, more threads only add
/// frames in flight that the pool and the writer cannot use.
const MAX_THREADS: usize = 256;

/// Most writer threads by default. On 2 CPUs, 2 writers created the 100,000-file tree in 0.75x
/// (disk) to 0.81x (RAM-backed ext4) of one writer's time
/// (docs/PERFORMANCE.md, "The model for larger machines"); ext4's journal and the
/// directory locks are shared, so past 8 more threads mostly add contention.
const DEFAULT_MAX_WRITERS: usize = 8;

/// Below this RLIMIT_NPROC (`ulimit -u`, which counts every thread of the user), the default
/// is one writer: each more writer is a thread, and with io_uring its io-wq workers are more.
/// Distributions give users thousands; a limit this low is set on purpose.
const NPROC_FOR_WRITERS: u64 = 256;

/// The zstd window log for a --max-window size: 2^10 (zstd's minimum) to 2^31 (its maximum),
/// rounded down to a power of two.
fn window_log(size: u64) -> Result<u32> {
    if !(1 << 10..=1 << 31).contains(&size) {
        bail!("--max-window must be between 1K and 2G");
    }
    Ok(63 - size.leading_zeros())
}

/// `123`, `64K`, `64KiB`, `1M`, `2G` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().with_context(|| format!("invalid size '{s}'"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => bail!("invalid size '{s}' (use a number with an optional K, M, G or T)"),
    };
    n.checked_mul(1 << shift).with_context(|| format!("size '{s}' is too large"))
}

/// curl's rate: bytes a second, `50M`, `1.5G`, `500k` (K, M, G, T: 1024-based).
pub fn parse_rate(text: &str) -> Result<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: f64 = num.parse().map_err(|_| anyhow::anyhow!("not a rate (50M, 1G, 500K)"))?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => bail!("not a rate (50M, 1G, 500K: K, M, G, T are 1024-based)"),
    };
    let bytes = n * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        bail!("too large");
    }
    Ok(bytes as u64)
}

/// The download settings when the archive is a URL (`decode::url::is_url`); the URL-only
/// flags are refused for a file, the tuning ones (`--connections`, `--stall-timeout`,
/// `--retries`, `--cacert`) are let be, as TAR_OPTIONS may set them for every run.
fn url_plan(
    args: &Args,
    archive: Option<&std::path::Path>,
    filter: bool,
    // The budget: `--memory`, or the default where memory is tight (`tight_memory`).
    memory: Option<u64>,
) -> Result<Option<crate::decode::url::Plan>> {
    use crate::decode::url;
    let Some(a) = archive.filter(|a| url::is_url(a.as_os_str())) else {
        if args.keep_archive.is_some() || args.checksum.is_some() {
            bail!("--keep-archive and --checksum apply to an archive read from a URL");
        }
        if args.no_sign_request {
            bail!("--no-sign-request applies to an archive read from an s3:// URL");
        }
        if !args.mirror.is_empty() || args.mirrors.is_some() {
            bail!("--mirror and --mirrors apply to an archive read from a URL");
        }
        return Ok(None);
    };
    if args.no_sign_request && !url::s3::is_s3(&a.to_string_lossy()) {
        bail!("--no-sign-request applies to an archive read from an s3:// URL");
    }
    if filter {
        bail!("-I/--use-compress-program cannot read a URL: fastuntar decodes its formats itself");
    }
    let connections = match args.connections {
        Some(0) => bail!("--connections: must be at least 1"),
        Some(n) if n > url::MAX_CONNECTIONS => {
            bail!("--connections: at most {}", url::MAX_CONNECTIONS)
        }
        Some(n) => n,
        None => url::DEFAULT_CONNECTIONS,
    };
    let stall = match args.stall_timeout {
        Some(0) => bail!("--stall-timeout: must be at least 1 second"),
        Some(s) => std::time::Duration::from_secs(s),
        None => url::DEFAULT_STALL,
    };
    let checksum =
        args.checksum.as_deref().map(url::parse_checksum).transpose().context("--checksum")?;
    let mut mirrors = Vec::new();
    for m in &args.mirror {
        if !url::is_url(m.as_ref()) {
            bail!("--mirror {m}: not an http://, https:// or s3:// URL");
        }
        mirrors.push(m.clone());
    }
    if let Some(file) = &args.mirrors {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--mirrors {}: cannot read", file.display()))?;
        let listed = url::sources::parse_list(&text)
            .map_err(|e| anyhow::anyhow!("--mirrors {}: {e}", file.display()))?;
        mirrors.extend(listed);
    }
    let limit_rate = match args.limit_rate.as_deref() {
        None => None,
        Some(r) => match parse_rate(r).with_context(|| format!("--limit-rate {r}"))? {
            0 => bail!("--limit-rate {r}: must be more than 0"),
            n => Some(n),
        },
    };
    Ok(Some(url::Plan {
        url: a.to_string_lossy().into_owned(),
        mirrors,
        limit_rate,
        connections,
        stall,
        retries: args.retries.unwrap_or(url::retry::DEFAULT_RETRIES),
        cacert: args.cacert.clone(),
        keep: args.keep_archive.clone(),
        checksum,
        window: url_window(memory, url::ranges::BLOCK),
        verbose: args.verbose > 0,
        quiet: args.quiet,
        no_sign_request: args.no_sign_request,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A machine with 4 CPUs, 16 GiB, no limits, stdin not a terminal, not root.
    pub(crate) fn edge() -> Edge {
        Edge {
            tape: None,
            stdin_tty: false,
            root: false,
            cpus: 4,
            address_space_limited: false,
            nproc_limit: None,
            usable_memory: 16 << 30,
            now: Timestamp { secs: 1_800_000_000, nanos: 0 },
            version_control: None,
            backup_suffix: None,
        }
    }

    /// `--backup` and `--suffix` against `$VERSION_CONTROL` and `$SIMPLE_BACKUP_SUFFIX`: the
    /// options win, the environment fills in what they leave out.
    #[test]
    fn backups_from_options_and_environment() {
        let env = Edge {
            version_control: Some("numbered".into()),
            backup_suffix: Some(".bak".into()),
            ..edge()
        };
        for (argv, edge, want) in [
            (&["-x"][..], edge(), None),
            (&["-x"], env.clone(), None),
            (&["-x", "--backup"], edge(), Some(("", "~"))),
            (&["-x", "--backup"], env.clone(), Some(("numbered", ".bak"))),
            (&["-x", "--backup=simple"], env.clone(), Some(("simple", ".bak"))),
            (&["-x", "--suffix=.old"], edge(), Some(("", ".old"))),
            (&["-x", "--suffix=.old"], env.clone(), Some(("numbered", ".old"))),
            (&["-x", "--backup=off", "--suffix=.old"], env.clone(), Some(("off", ".old"))),
        ] {
            let args = args(argv);
            assert_eq!(super::backup_wanted(&args, &edge), want, "{argv:?}");
        }
    }

    fn args(extra: &[&str]) -> Args {
        let mut argv: Vec<OsString> = ["fastuntar"].map(Into::into).into();
        argv.extend(extra.iter().map(Into::into));
        crate::cli::parse(argv)
    }

    fn plans_of(extra: &[&str], edge: &Edge) -> Result<Plans> {
        resolve(args(extra), edge, &mut Vec::new())
    }

    /// `-f`, else the first operand, else $TAPE; `-` and nothing are standard input, never a
    /// terminal.
    #[test]
    fn where_the_archive_comes_from() {
        let tape = Edge { tape: Some("/dev/st0".into()), ..edge() };
        let tty = Edge { stdin_tty: true, ..edge() };
        let p = |s: &str| Some(PathBuf::from(s));
        for (argv, edge, want) in [
            (&["-x", "-f", "a.tar"][..], edge(), Some(p("a.tar"))),
            (&["-x", "a.tar", "b"], edge(), Some(p("a.tar"))),
            (&["-x", "-f", "a.tar"], tape.clone(), Some(p("a.tar"))),
            (&["-x"], tape.clone(), Some(p("/dev/st0"))),
            (&["-x", "-f", "-"], tape, Some(None)),
            (&["-x"], edge(), Some(None)),
            (&["-x", "-f", "-"], tty.clone(), None),
            (&["-x"], tty.clone(), None),
            (&["-x", "-f", "a.tar"], tty, Some(p("a.tar"))),
        ] {
            let got = archive_source(&args(argv), &edge).ok();
            assert_eq!(got, want, "{argv:?} tape {:?} tty {}", edge.tape, edge.stdin_tty);
        }
    }

    #[test]
    fn which_command_runs() {
        for (argv, want) in [
            (&["-x", "-f", "a"][..], Command::Extract),
            (&["-t", "-f", "a"], Command::List),
            (&["-x", "-O", "-f", "a"], Command::ToStdout),
            (
                &["-x", "--to-command", "wc", "--ignore-command-error", "-f", "a"],
                Command::ToCommand { command: "wc".into(), ignore_errors: true },
            ),
        ] {
            assert_eq!(command(&args(argv)), want, "{argv:?}");
        }
    }

    /// Decoder threads: all CPUs when only reading, one fewer when writing, one under
    /// `ulimit -v`; writer threads: the CPUs up to 8, one under a low RLIMIT_NPROC (not for
    /// root), a given count kept (at most MAX_WRITERS).
    #[test]
    fn thread_counts() {
        let e = |cpus, limited, nproc, root| Edge {
            cpus,
            address_space_limited: limited,
            nproc_limit: nproc,
            root,
            ..edge()
        };
        for (edge, listing, want) in [
            (e(4, false, None, false), true, 4),
            (e(4, false, None, false), false, 3),
            (e(1, false, None, false), false, 1),
            (e(4, true, None, false), true, 1),
            (e(1000, false, None, false), true, MAX_THREADS),
        ] {
            assert_eq!(default_threads(listing, &edge), want, "{edge:?} {listing}");
        }
        for (flag, edge, want) in [
            (None, e(4, false, None, false), Some((4, false))),
            (None, e(32, false, None, false), Some((DEFAULT_MAX_WRITERS, false))),
            (None, e(4, false, Some(100), false), Some((1, false))),
            (None, e(4, false, Some(100), true), Some((4, false))),
            (None, e(4, false, Some(4096), false), Some((4, false))),
            (None, e(4, true, None, false), Some((1, false))),
            (Some(2), e(1, false, Some(100), false), Some((2, true))),
            (
                Some(100_000),
                e(4, false, None, false),
                Some((crate::write::multi::MAX_WRITERS, true)),
            ),
            (Some(0), e(4, false, None, false), None),
        ] {
            assert_eq!(writer_threads(flag, &edge).ok(), want, "{flag:?} {edge:?}");
        }
    }

    #[test]
    fn old_files_and_direct_io() {
        for (argv, want) in [
            (&[][..], OldFiles::Replace),
            (&["-k"], OldFiles::Keep),
            (&["--skip-old-files"], OldFiles::Skip),
            (&["--keep-newer-files"], OldFiles::KeepNewer),
            (&["--no-overwrite-dir"], OldFiles::NoOverwriteDir),
            (&["-U"], OldFiles::UnlinkFirst),
        ] {
            let argv: Vec<&str> = ["-x", "-f", "a"].iter().chain(argv).copied().collect();
            assert_eq!(old_files(&args(&argv)), want, "{argv:?}");
        }
        use crate::cli::DirectIo as Flag;
        for (when, never, want) in [
            (None, false, DirectIo::Auto),
            (Some(Flag::Auto), false, DirectIo::Auto),
            (Some(Flag::Always), false, DirectIo::Always),
            (Some(Flag::Never), false, DirectIo::Never),
            (Some(Flag::Always), true, DirectIo::Never),
            (None, true, DirectIo::Never),
        ] {
            assert_eq!(direct_io(when, never), want, "{when:?} {never}");
        }
    }

    /// The options that leave a run without resume points, first one named.
    #[test]
    fn options_that_refuse_resume_points() {
        for (argv, want) in [
            (&[][..], None),
            (&["-U"], None),
            (&["--recursive-unlink"], None),
            (&["-k"], Some("-k (--keep-old-files)")),
            (&["--skip-old-files"], Some("--skip-old-files")),
            (&["--keep-newer-files"], Some("--keep-newer-files")),
            (&["--no-overwrite-dir"], Some("--no-overwrite-dir")),
            (&["--backup"], Some("--backup")),
            (&["-G"], Some("-G (--incremental)")),
            (&["-w"], Some("-w (--interactive)")),
            (&["-N", "@0"], Some("-N (--newer)")),
            (&["-I", "zstd"], Some("-I (--use-compress-program)")),
            (&["--backup", "-w"], Some("--backup")),
        ] {
            let argv: Vec<&str> = ["-x", "-f", "a.tar"].iter().chain(argv).copied().collect();
            let plans = plans_of(&argv, &edge()).unwrap();
            assert_eq!(plans.resume.refused, want, "{argv:?}");
        }
        let sum = format!("sha256:{}", "0".repeat(64));
        let url = ["-x", "-f", "https://h/a.tar", "--checksum", &sum];
        assert_eq!(plans_of(&url, &edge()).unwrap().resume.refused, Some("--checksum"));
    }

    /// Root restores owners and exact modes by default; others only when asked.
    #[test]
    fn root_restores_owners_and_modes() {
        let root = Edge { root: true, ..edge() };
        for (argv, edge, owner, exact) in [
            (&[][..], edge(), false, false),
            (&[], root.clone(), true, true),
            (&["--no-same-owner", "--no-same-permissions"], root, false, false),
            (&["--same-owner", "-p"], edge(), true, true),
        ] {
            let argv: Vec<&str> = ["-x", "-f", "a"].iter().chain(argv).copied().collect();
            let plans = plans_of(&argv, &edge).unwrap();
            assert_eq!((plans.policy.same_owner, plans.writer.exact_modes), (owner, exact));
        }
    }

    /// create_n's six conditions: a given count, `-U`/`--recursive-unlink`,
    /// `--keep-directory-symlink`, names without case, an ext4 without a journal.
    #[test]
    fn writer_layouts() {
        let caseless = DestFs { caseless: Some("vfat".into()), journal_less: None };
        let no_journal = DestFs { caseless: None, journal_less: Some("ext4".into()) };
        let plain = DestFs::default();
        let layout = |argv: &[&str], fs: &DestFs, verbose| {
            let mut argv: Vec<&str> =
                ["-x", "-f", "a", "-C", "/d"].iter().chain(argv).copied().collect();
            if verbose {
                argv.push("-v");
            }
            let plans = plans_of(&argv, &edge()).unwrap();
            writer_layout(&plans.writer, fs)
        };
        // (extra args, filesystem, -v) -> (threads, serial, journal-less, notes)
        for (argv, fs, verbose, want) in [
            (&[][..], &plain, false, (4, false, false, 0)),
            (&["--writer-threads", "2"], &plain, false, (2, false, false, 0)),
            (&[], &caseless, false, (1, true, false, 0)),
            (&[], &caseless, true, (1, true, false, 1)),
            (&["--writer-threads", "2"], &caseless, false, (2, true, false, 0)),
            (&[], &no_journal, false, (1, false, true, 0)),
            (&["--writer-threads", "3"], &no_journal, false, (3, false, true, 0)),
            (&["-U", "--writer-threads", "3"], &plain, false, (1, false, false, 0)),
            (&["--recursive-unlink"], &plain, false, (1, false, false, 0)),
            (&["--keep-directory-symlink"], &plain, false, (1, true, false, 0)),
            (&["-h", "--writer-threads", "4"], &plain, false, (1, true, false, 1)),
            (&["-h", "-U", "--writer-threads", "4"], &plain, false, (1, true, false, 0)),
        ] {
            let l = layout(argv, fs, verbose);
            let got = (l.threads, l.serial, l.journal_less, l.notes.len());
            assert_eq!(got, want, "{argv:?} {fs:?} -v {verbose}: {:?}", l.notes);
        }
        let note = &layout(&[], &caseless, true).notes[0];
        assert!(note.starts_with("/d: names are compared without case here (vfat)"), "{note}");
    }

    /// Warnings the resolve step leaves to the caller, in order.
    #[test]
    fn notes_in_order() {
        let mut notes = Vec::new();
        let argv = ["-x", "-f", "a", "-v", "--level", "1", "-N", "@1800000000"];
        resolve(args(&argv), &edge(), &mut notes).unwrap();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("Option --after-date: Treating date '@1800000000' as"));
        assert_eq!(notes[1], "--level is meaningless without --listed-incremental");
    }

    #[test]
    fn one_top_level_of_a_url() {
        let url = "https://h/p/snapshot-1-abc.tar.zst?X-Amz-Credential=AK%2F2026/us/s3&Sig=x/y";
        let got = top_level(std::path::Path::new(""), Some(std::path::Path::new(url))).unwrap();
        assert_eq!(got, Some(PathBuf::from("snapshot-1-abc")));
        let s3 = "s3://b/dir/snap?1.tar.zst";
        let got = top_level(std::path::Path::new(""), Some(std::path::Path::new(s3))).unwrap();
        assert_eq!(got, Some(PathBuf::from("snap?1")));
    }

    /// `--no-sign-request` is for an s3:// archive only.
    #[test]
    fn no_sign_request_needs_s3() {
        let mut notes = Vec::new();
        for a in ["x.tar", "https://h/x.tar"] {
            let e = resolve(args(&["-x", "--no-sign-request", "-f", a]), &edge(), &mut notes);
            assert!(format!("{:#}", e.unwrap_err()).contains("--no-sign-request applies"), "{a}");
        }
        let ok =
            resolve(args(&["-x", "--no-sign-request", "-f", "s3://b/k.tar"]), &edge(), &mut notes);
        assert!(ok.is_ok());
    }
    #[test]
    fn incremental_levels_as_gnu_tar_reads_them() {
        for (text, level) in [
            ("0", Some(0)),
            ("", Some(0)),
            (" 1", Some(1)),
            ("+2", Some(2)),
            ("-1", Some(-1)),
            ("-01", Some(-1)),
            ("4294967295", Some(-1)),
            ("99999999999999999999999", Some(-1)),
            ("x", None),
            ("1x", None),
            ("-", None),
            ("  ", None),
        ] {
            assert_eq!(incremental_level(text), level, "{text:?}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn window_logs() {
        assert_eq!(window_log(2 << 30).unwrap(), 31);
        assert_eq!(window_log(128 << 20).unwrap(), 27);
        assert_eq!(window_log(100 << 20).unwrap(), 26);
        assert!(window_log(4 << 30).is_err());
        assert!(window_log(10).is_err());
    }
}
