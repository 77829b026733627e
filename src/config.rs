//! Resolved settings: sizes parsed, paths decided, modes chosen. The rest of the program reads
//! only this.

use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::archive::Timestamp;
use crate::cli::operands::{self, Given, Selection};
use crate::cli::{Args, IoBackend, Ordered};
use crate::policy::admit::{Limits, SNAPSHOT_MAX_BYTES, SNAPSHOT_MAX_FILES};
use crate::pool::BUF_ALIGN;
use crate::resources::{address_space_limited, soft_limit};

/// Size of one pool buffer and so of the largest single write. 1 MiB: large enough that a
/// direct write reaches the disk's streaming rate (`dd bs=1M oflag=direct` writes 1.5 GB/s
/// here, the device's ceiling), small enough that a 64 MiB pool keeps 64 writes in flight.
pub const CHUNK_SIZE: usize = 1 << 20;

/// Fewest buffers the pool may have: one being filled, some in flight.
pub const MIN_BUFFERS: usize = 4;

/// File data in flight by default: 64 writes of CHUNK_SIZE.
pub const DEFAULT_MEMORY: u64 = 64 << 20;

/// Decoded frames each decoder worker may hold by default: one of Agave's frames (32 MiB of
/// tar stream each, `ZSTD_FRAME_SIZE` of agave-snapshots), which a worker decodes in place
/// only when its share of the frame pool holds it whole (decode/parallel.rs `run_for`). Until
/// frames had a pool of their own they shared the default 64 MiB with file data: with 3
/// workers (`--threads 4`) each one's share was 10 buffers, every frame was streamed and
/// copied, and together they held at most one frame ahead.
pub const FRAME_BYTES: u64 = 32 << 20;

/// Of an explicit `--memory`, file data keeps what is left after one frame and the reader's
/// extra buffer, at least this (or half, when that is less) and at most DEFAULT_MEMORY, and
/// the frames get the rest up to FRAME_BYTES per worker: `--memory 64M` with one worker keeps
/// one whole frame ahead and 31 MiB of file data, as the one shared pool did; `--memory 1G`
/// with 63 workers 64 MiB of file data and 960 MiB of frames. The default gives file data all
/// of DEFAULT_MEMORY: on the agave archive to RAM-backed ext4 with `--threads 2`, 64 MiB of
/// file data in flight extracted in 2.42 s against 2.63 s with 31 MiB (medians of 9
/// interleaved rounds, docs/PERFORMANCE.md).
pub const FILE_DATA_MIN: u64 = DEFAULT_MEMORY - FRAME_BYTES - CHUNK_SIZE as u64;

/// When extracting with decoder workers, the frames' pool gets one more frame, taken from file
/// data: the tar stage hands the workers' buffers to the writer as file data (lend.rs), so a
/// frame the writer still holds would otherwise keep the next frame from being decoded in
/// place (a worker needs its run of adjacent buffers free: `--threads 2` of the 1.8 GB agave
/// archive had 9 to 15 of its 26 worker frames in place with 64 + 33 MiB, all 26 with 32 +
/// 65 MiB). File data then carries only the reader's own frames, the small files and the
/// copied edges: 32 MiB. The total is what it was.
pub const LENT_FRAME_BYTES: u64 = FRAME_BYTES;

/// Fewest buffers of a frame pool: one frame buffer ahead and the reader's extra one
/// (parallel.rs HEAD_EXTRA). Below this and MIN_BUFFERS for file data, one thread decodes.
const MIN_FRAME_BUFFERS: usize = 2;

/// The default `--memory` is at most this fraction of the memory the process may use
/// (physical memory, a cgroup memory limit, RLIMIT_AS), beyond the DEFAULT_MEMORY of file data
/// and one worker's frames: 64 decoder threads would otherwise ask for 2 GiB on a machine that
/// may have 4. Where the fraction is less than one worker's frames (RLIMIT_AS under 264 MiB)
/// the frames get only the fraction.
const AUTO_MEMORY_FRACTION: u64 = 8;

#[derive(Debug, Clone)]
pub struct Config {
    /// None for standard input.
    pub archive: Option<PathBuf>,
    /// `PROG -d` (split at spaces) to pipe the archive through first (`-I PROG`, `--lzip`, ...).
    pub filter: Option<Vec<String>>,
    /// MEMBER operands and `--files-from` names, in command-line order (operands.rs,
    /// select.rs).
    pub members: Vec<Given>,
    /// `--transform` expressions, compiled (list.rs `Reading` applies them).
    pub transforms: std::sync::Arc<crate::selection::transform::Transforms>,
    /// `--show-transformed-names`: -t and -v show names as extracted.
    pub show_transformed: bool,
    /// `-w`: ask before extracting each member (confirm.rs).
    pub interactive: bool,
    /// Standard input is the archive's or a `-T -`/`-X -` list's (`-w` asks on /dev/tty).
    pub stdin_taken: bool,
    /// `--pax-option delete=PATTERN`s: PAX keywords the reader skips.
    pub pax_delete: Vec<std::ffi::CString>,
    /// `--quoting-style`, `--quote-chars`: how listings write names (quoting.rs).
    pub quoting: crate::report::quoting::Quoting,
    /// `-R`: block numbers in the listing (list.rs).
    pub block_number: bool,
    /// `--index-file FILE`: the listing goes there (report.rs).
    pub index_file: Option<PathBuf>,
    /// `--no-recursion` last: with `--occurrence` a member under a selected directory counts
    /// as another occurrence of its name (select.rs).
    pub recursion: bool,
    /// `-K NAME`: the members before the first one NAME selects are skipped (select.rs).
    pub starting_file: Option<Vec<u8>>,
    /// `--occurrence=N`: only the Nth member each MEMBER selects (0: all of them).
    pub occurrence: u64,
    /// `-N/--newer/--after-date`, `--newer-mtime`: members older than this are not wanted.
    pub newer: Option<Timestamp>,
    /// `--show-omitted-dirs`: each directory member not wanted is named ("Omitting").
    pub show_omitted_dirs: bool,
    /// `--keep-directory-symlink`, or `-h` (write/dest.rs, write/tree.rs).
    pub keep_directory_symlink: bool,
    /// `--delay-directory-restore` (the last of it and `--no-delay-directory-restore`):
    /// directory metadata is applied at the end of the run (write/delayed.rs).
    pub delay_directory_restore: bool,
    /// `-h`, `--dereference`: a directory member kept as a symlink to a directory gives the
    /// directory it leads to its mode and time (GNU tar's `deref_stat` in `extract_dir`).
    pub dereference: bool,
    /// `--recursive-unlink`: an existing directory in a member's way goes with its contents.
    pub recursive_unlink: bool,
    /// `--backup`, `--suffix` (write/backup.rs); None: what a member replaces is removed.
    pub backup: Option<std::sync::Arc<crate::write::backup::Backup>>,
    /// `-i`: read past zero blocks (archive/reader.rs `ignore_zeros`).
    pub ignore_zeros: bool,
    pub dest: PathBuf,
    /// List members instead of extracting.
    pub list: bool,
    /// `-O`: write the files' data to stdout instead of extracting.
    pub to_stdout: bool,
    /// `--to-command`: each file's data piped into `sh -c COMMAND` (to_stdout.rs).
    pub to_command: Option<String>,
    /// `--ignore-command-error`.
    pub ignore_command_error: bool,
    /// `--exclude` and `--exclude-from` patterns (operands.rs, exclude.rs).
    pub exclude: Vec<Given>,
    pub verbose: u8,
    /// What to do where a member's path exists already (`-k`, `--skip-old-files`).
    pub old_files: OldFiles,
    /// `--one-top-level`: the directory (relative, plain components) every member is
    /// extracted under (safety.rs).
    pub one_top_level: Option<PathBuf>,
    /// `--totals`: "Total bytes read" at the end (totals.rs).
    pub totals: bool,
    /// `--checkpoint`, `--checkpoint-action` (checkpoint.rs); None when off.
    pub checkpoint: Option<crate::report::checkpoint::Checkpoints>,
    /// Bytes of a tar record (`-b N` × 512, `--record-size`; 10240 by default): `--totals`
    /// counts whole records, as GNU tar reads them.
    pub record_size: u64,
    /// `-m`: modification times are not restored.
    pub touch: bool,
    /// `-V PATTERN`: the archive's volume label must match (list.rs `Reading`).
    pub label: Option<String>,
    /// `-G`, `-g FILE`: directories of an incremental archive are purged (incremental.rs).
    pub incremental: bool,
    /// `--one-file-system`: `-G` removes nothing on another filesystem than DIR's.
    pub one_file_system: bool,
    /// `--xattrs`: which extended attributes are restored (None: none, the default).
    pub xattrs: Option<crate::metadata::xattrs::XattrFilter>,
    /// `--acls`: POSIX ACLs are restored (acl.rs).
    pub acls: bool,
    pub strip_components: usize,
    pub same_owner: bool,
    /// `--numeric-owner`: owners are the archive's numbers, never its names (`owner.rs`).
    pub numeric_owner: bool,
    /// `--full-time`, `--utc`: how times are shown (list.rs `tartime`).
    pub times: crate::report::listing::TimeStyle,
    /// Modes exactly as archived, set-id bits included: `-p`, or root without
    /// `--no-same-permissions`.
    pub preserve_permissions: bool,
    /// `--direct-io[=WHEN]`, `--no-direct-io` (auto when neither is given).
    pub direct_io: crate::cli::DirectIo,
    /// `--direct-io-threshold`: the smallest file written direct.
    pub direct_io_threshold: u64,
    /// `--memory` in bytes; None for the default (see `Config::pools`).
    pub memory: Option<u64>,
    pub io: IoBackend,
    pub quiet: bool,
    pub sync: bool,
    pub json: bool,
    pub snapshot: bool,
    pub limits: Limits,
    /// log2 of the largest zstd window accepted.
    pub max_window_log: u32,
    /// zstd decoder threads (frames of a multi-frame archive decode in parallel).
    pub threads: usize,
    /// Writer threads (`write/multi.rs` when more than 1).
    pub writer_threads: usize,
    /// Whether the user asked for that count (`--writer-threads` or its variable): a count cut
    /// down to fit the open-file limit is then worth a warning.
    pub writer_threads_given: bool,
    /// `--writeback-every`: bytes written between syncfs calls while extracting (None: off).
    pub writeback: Option<u64>,
    /// The archive is read from this URL (decode/url/), with these settings.
    pub url: Option<crate::decode::url::Plan>,
    /// `--resume`, `--no-resume`, or neither (src/resume/).
    pub resume: crate::resume::Flag,
    /// The digest of the options that change what lands (resume/options.rs).
    pub resume_options: [u8; 32],
    /// The hidden `--debug-kill-at EVENT:N` of the kill tests (resume/hook.rs).
    pub debug_kill: Option<String>,
    /// The hidden `--debug-uring`: how the writer learns whether io_uring is there.
    pub ring_probe: crate::write::RingProbe,
}

/// What to do with a member whose path exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldFiles {
    /// Replace it: unlink what is there (an empty directory too) and create the member (GNU
    /// tar's default). An existing directory is kept and gets the member's metadata.
    Replace,
    /// `-k`: keep it and report the member (exit 1). An existing directory is kept silently,
    /// its metadata untouched (GNU tar 1.34; it exits 2 for the files).
    Keep,
    /// `--skip-old-files`: keep it without a word and without changing the exit status; with
    /// -v, "MEMBER: skipping existing file" (directories too), as GNU tar 1.34.
    Skip,
    /// `--keep-newer-files`: keep a non-directory whose mtime is the same as or later than the
    /// member's ("Current 'PATH' is newer or same age", exit status unchanged), replace an
    /// older one. A directory is never newer: a directory member removes an empty one and
    /// makes it anew, keeps a non-empty one as it is (no metadata), as GNU tar 1.34.
    KeepNewer,
    /// `--no-overwrite-dir`: as Replace, but a directory that exists (before the run or made
    /// earlier in it) keeps its mode and owner; it still gets the member's mtime (GNU tar 1.34
    /// sets it).
    NoOverwriteDir,
    /// `-U`: as Replace, but an existing directory in a directory member's way is removed too
    /// (when empty; a non-empty one stays, reported) and made anew, as GNU tar 1.34.
    UnlinkFirst,
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

impl Config {
    pub fn from_args(args: Args) -> Result<Config> {
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
                "-P (--absolute-names) is not supported: members are always extracted inside \
                 the destination (a leading '/' is removed, a '..' component refused)"
            );
        }
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
        let first_operand = args.ordered.iter().find_map(|o| match o {
            Ordered::Operand(text) if args.file.is_none() => Some(PathBuf::from(text)),
            _ => None,
        });
        // As GNU tar: without -f, $TAPE, else standard input (`zstd -dc A | fastuntar -x`),
        // but never a terminal. (A first operand names the archive here, where GNU tar would
        // take it for a MEMBER.)
        let tape = std::env::var_os("TAPE").filter(|t| !t.is_empty()).map(PathBuf::from);
        let archive = match args.file.clone().or(first_operand).or(tape) {
            Some(p) if p.as_os_str() != "-" => Some(p),
            _ if std::io::stdin().is_terminal() => {
                bail!("refusing to read the archive from a terminal (missing -f option?)")
            }
            _ => None,
        };
        // GNU tar looks at the first record of an archive file named without -I or a
        // compression flag, to learn its compression (checkpoint.rs).
        let sniffs = archive.is_some() && filter.is_none() && args.compression_flag == 0;
        let checkpoint = crate::report::checkpoint::Checkpoints::new(&args.checkpoints, sniffs)?;
        let one_top_level = args
            .one_top_level
            .as_deref()
            .map(|d| top_level(d.as_ref(), archive.as_deref()))
            .transpose()?;
        crate::report::apply_warning_keywords(&args.warning)?;
        let transforms = crate::selection::transform::Transforms::parse(&args.transform)
            .context("--transform")?
            .into();
        let Selection { members, exclude, recursion, read_stdin } =
            operands::resolve(&args.ordered, args.file.is_none(), archive.is_none())?;
        let occurrence = match args.occurrence {
            None => 0,
            Some(n) if n > 0 && members.is_empty() => {
                bail!("--occurrence is meaningless without a file list (MEMBER operands or -T)")
            }
            // GNU tar: 0 is "every occurrence", as without the option.
            Some(n) => n,
        };
        let newer = newer_than(&args)?;
        if let Some(level) = &args.level {
            let level = incremental_level(level).context("Invalid incremental level value")?;
            // GNU tar's "no level" is -1; any other without -g is warned about.
            if args.listed_incremental.is_none() && level != -1 {
                crate::report::warn("--level is meaningless without --listed-incremental");
            }
        }
        if args.to_command.is_some() && args.json {
            bail!("--json cannot be used with --to-command");
        }
        if args.to_stdout && args.json {
            bail!(
                "--json cannot be used with -O/--to-stdout: standard output carries the files' data"
            );
        }
        let memory = args.memory.as_deref().map(parse_size).transpose().context("--memory")?;
        if let Some(m) = memory {
            pool_shape(m)?;
        }
        let direct_io_threshold = match &args.direct_io_threshold {
            Some(t) => parse_size(t).context("--direct-io-threshold")?,
            None => crate::write::direct_policy::DEFAULT_THRESHOLD,
        };
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
                crate::metadata::xattrs::XattrFilter::new(
                    &args.xattrs_include,
                    &args.xattrs_exclude,
                )
            })
            .transpose()?;
        let max_window_log = window_log(parse_size(&args.max_window).context("--max-window")?)?;
        let (writer_threads, writer_threads_given) = writer_threads(args.writer_threads)?;
        let stdin_taken = archive.is_none() || read_stdin;
        let url = url_plan(&args, archive.as_deref(), filter.is_some(), memory)?;
        let mut cfg = Config {
            archive,
            filter,
            members,
            transforms,
            show_transformed: args.show_transformed_names > 0,
            index_file: args.index_file.clone(),
            recursion,
            block_number: args.block_number,
            pax_delete: pax_delete(&args.pax_option)?,
            quoting,
            interactive: args.interactive,
            stdin_taken,
            starting_file: args.starting_file.last().map(|n| n.as_bytes().to_vec()),
            occurrence,
            newer,
            show_omitted_dirs: args.show_omitted_dirs,
            keep_directory_symlink: args.keep_directory_symlink || args.dereference,
            dereference: args.dereference,
            delay_directory_restore: args.delay_directory_restore,
            recursive_unlink: args.recursive_unlink,
            backup: crate::write::backup::Backup::new(
                args.backup.as_deref(),
                args.suffix.as_deref(),
            )?
            .map(std::sync::Arc::new),
            ignore_zeros: args.ignore_zeros,
            dest: destination(&args)?,
            list: args.list,
            exclude,
            to_stdout: args.to_stdout,
            ignore_command_error: args.ignore_command_error,
            to_command: args.to_command.clone(),
            verbose: args.verbose,
            // clap keeps these apart (`conflicts_with`): GNU tar's last one wins, which would
            // drop one of two options given without a word.
            old_files: match () {
                _ if args.keep_old_files => OldFiles::Keep,
                _ if args.skip_old_files => OldFiles::Skip,
                _ if args.keep_newer_files => OldFiles::KeepNewer,
                _ if args.no_overwrite_dir => OldFiles::NoOverwriteDir,
                _ if args.unlink_first => OldFiles::UnlinkFirst,
                _ => OldFiles::Replace,
            },
            one_top_level: one_top_level.flatten(),
            totals,
            checkpoint,
            record_size,
            touch: args.touch,
            incremental: args.incremental || args.listed_incremental.is_some(),
            label: args.label.clone(),
            one_file_system: args.one_file_system,
            xattrs,
            acls: args.acls_on,
            strip_components: args.strip_components,
            // As GNU tar: restored by default for root (`--no-same-owner` says not), by request
            // for everyone else.
            // Safety: geteuid has no preconditions.
            same_owner: args.same_owner || (!args.no_same_owner && unsafe { libc::geteuid() } == 0),
            numeric_owner: args.numeric_owner,
            times: crate::report::listing::TimeStyle { full: args.full_time, utc: args.utc },
            // Safety: geteuid has no preconditions.
            preserve_permissions: args.preserve_permissions
                || (!args.no_same_permissions && unsafe { libc::geteuid() } == 0),
            // clap keeps the last of --direct-io[=WHEN] and --no-direct-io (`overrides_with`).
            direct_io: match (args.direct_io, args.no_direct_io) {
                (_, true) => crate::cli::DirectIo::Never,
                (Some(when), false) => when,
                (None, false) => crate::cli::DirectIo::Auto,
            },
            direct_io_threshold,
            memory,
            io: args.io,
            quiet: args.quiet,
            sync: args.sync,
            json: args.json,
            snapshot: args.snapshot,
            limits,
            max_window_log,
            threads: match args.threads {
                Some(0) => bail!("--threads: must be at least 1"),
                Some(n) => n.min(MAX_THREADS),
                None => default_threads(args.list || args.to_stdout || args.to_command.is_some()),
            },
            writer_threads,
            writer_threads_given,
            writeback: Some(parse_size(&args.writeback_every).context("--writeback-every")?)
                .filter(|&n| n > 0),
            url,
            resume: match (args.resume, args.no_resume) {
                (_, true) => crate::resume::Flag::Off,
                (true, false) => crate::resume::Flag::Resume,
                (false, false) => crate::resume::Flag::Auto,
            },
            resume_options: [0; 32],
            debug_kill: args.debug_kill_at.clone(),
            ring_probe: match args.debug_uring {
                None => crate::write::RingProbe::Kernel,
                Some(crate::cli::DebugUring::Refused) => crate::write::RingProbe::Refused,
                Some(crate::cli::DebugUring::NoOpenat) => crate::write::RingProbe::NoOpenat,
            },
        };
        cfg.resume_options = crate::resume::options::digest(&cfg, &args.transform);
        Ok(cfg)
    }

    /// The buffer pools for a run whose zstd frames `workers` threads decode besides the
    /// reader (0: one thread decodes, or the format is not zstd): see `divide`.
    pub fn pools(&self, workers: usize) -> Result<Pools> {
        let usable = usable_memory();
        let memory = self.memory.or_else(|| tight_memory(usable));
        let cap = match memory {
            Some(_) => u64::MAX,
            None => usable / AUTO_MEMORY_FRACTION,
        };
        let window = self.url.as_ref().map_or(0, |u| u.window);
        divide(memory, workers, self.reads_only(), cap, window)
    }

    /// Whether the run only reads the archive (`-t`, `-O`): no file-data pool, no writers,
    /// nothing created.
    /// The TAR_* variables GNU tar gives every program it runs (`--to-command`, a
    /// checkpoint's `exec`) that describe the run: TAR_VERSION (fastuntar's), TAR_ARCHIVE (`-`
    /// for standard input) and TAR_BLOCKING_FACTOR. Each caller adds TAR_FORMAT and its own.
    pub fn tar_env(&self) -> [(&'static str, std::ffi::OsString); 3] {
        let archive = self.archive.as_ref().map_or_else(|| "-".into(), |p| p.clone().into());
        [
            ("TAR_VERSION", env!("CARGO_PKG_VERSION").into()),
            ("TAR_ARCHIVE", archive),
            ("TAR_BLOCKING_FACTOR", (self.record_size / 512).to_string().into()),
        ]
    }

    pub fn reads_only(&self) -> bool {
        self.list || self.to_stdout || self.to_command.is_some()
    }
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
        // signature, which may hold '/') and the fragment are not part of it.
        let url_path = archive
            .filter(|a| crate::decode::url::is_url(a.as_os_str()))
            .map(|a| PathBuf::from(a.to_string_lossy().split(['?', '#']).next().unwrap_or("")));
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

/// `-N/--newer/--after-date DATE` or `--newer-mtime DATE` (dates.rs), relative dates counted
/// from the run's start. With `-v` a DATE given as text is said back as read, as GNU tar
/// does ("Option --after-date: Treating date 'yesterday' as 2026-11-23 10:00:00.5"), unless
/// it reads the same.
fn newer_than(args: &Args) -> Result<Option<Timestamp>> {
    let (option, text) = match (&args.newer, &args.newer_mtime) {
        (Some(text), _) => ("--after-date", text),
        (None, Some(text)) => ("--newer-mtime", text),
        (None, None) => return Ok(None),
    };
    let since = crate::report::totals::started_at().duration_since(std::time::UNIX_EPOCH)?;
    let now = Timestamp { secs: since.as_secs() as i64, nanos: since.subsec_nanos() };
    let at =
        crate::selection::dates::date_or_file(text, now).with_context(|| option.to_string())?;
    let style = crate::report::listing::TimeStyle { full: false, utc: args.utc };
    let said = crate::report::listing::tartime(at, true, style);
    if args.verbose > 0 && !crate::selection::dates::names_a_file(text) && said != *text {
        crate::report::warn(format!("Option {option}: Treating date '{text}' as {said}"));
    }
    Ok(Some(at))
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

/// How the buffer memory is divided between the two pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pools {
    /// Bytes of every buffer, in both pools.
    pub buf_size: usize,
    /// Buffers of file data in flight to the writer (0 when listing).
    pub files: usize,
    /// Buffers where frames decoded ahead wait for the reader (0: one thread decodes).
    pub frames: usize,
}

/// Divides the buffer memory between file data and the frames of `workers` decoder threads
/// besides the reader. By default (`memory` None) file data gets DEFAULT_MEMORY and the frames
/// FRAME_BYTES per worker and the reader's extra buffer, as far as `cap` (a fraction of the
/// machine's memory) allows beyond DEFAULT_MEMORY, and at least the first worker's where `cap`
/// holds that: 64 MiB with one decoder thread, 97 MiB with two, ~1.1 GiB with 32; when
/// extracting, file data gives LENT_FRAME_BYTES of its share to the frames. An explicit
/// `memory` is never exceeded: the frames get up to as much, leaving file data what
/// FILE_DATA_MIN says. When listing (or with `-O`) there is no file data and the
/// frames get everything (by default at least DEFAULT_MEMORY). An extraction budget too small
/// for both pools (under 32 KiB) gets no frame pool, and one thread decodes: more threads than
/// the memory allows means fewer frames in flight, never more memory.
///
/// `window` (a URL's reorder window, `url_window`) is taken from the budget first: from the
/// file data's DEFAULT_MEMORY by default, from `memory` when given.
fn divide(
    memory: Option<u64>,
    workers: usize,
    listing: bool,
    cap: u64,
    window: u64,
) -> Result<Pools> {
    let w = workers as u64;
    let one_frame = FRAME_BYTES + CHUNK_SIZE as u64;
    let want = w.saturating_mul(FRAME_BYTES).saturating_add(CHUNK_SIZE as u64);
    let memory = memory.map(|m| m.min(1 << 40).saturating_sub(window));
    let default_files = DEFAULT_MEMORY - window.min(DEFAULT_MEMORY / 2);
    let (files, frames) = match memory {
        _ if workers == 0 => (memory.unwrap_or(default_files), 0),
        None if listing => (0, want.max(DEFAULT_MEMORY).min(cap.max(DEFAULT_MEMORY))),
        None => {
            let room = cap.saturating_sub(DEFAULT_MEMORY).max(one_frame.min(cap));
            let frames = want.min(room);
            // The writer's frame (see LENT_FRAME_BYTES), from file data.
            let lent =
                match frames >= one_frame && default_files >= FILE_DATA_MIN + LENT_FRAME_BYTES {
                    true => LENT_FRAME_BYTES,
                    false => 0,
                };
            (default_files - lent, frames + lent)
        }
        Some(m) if listing => (0, m),
        Some(m) => {
            // File data keeps what is left after one frame, between FILE_DATA_MIN (or half,
            // when that is less) and DEFAULT_MEMORY; the frames get the rest they want.
            let keep = m
                .saturating_sub(FRAME_BYTES + CHUNK_SIZE as u64)
                .clamp((m / 2).min(FILE_DATA_MIN), DEFAULT_MEMORY);
            let frames = want.min(m - keep);
            (m - frames, frames)
        }
    };
    if frames > 0 {
        let per_file_buf = if listing { u64::MAX } else { files / MIN_BUFFERS as u64 };
        let size = (frames / MIN_FRAME_BUFFERS as u64).min(per_file_buf).min(CHUNK_SIZE as u64)
            as usize
            / BUF_ALIGN
            * BUF_ALIGN;
        if size > 0 {
            let count = |bytes: u64| usize::try_from(bytes / size as u64).unwrap_or(usize::MAX);
            return Ok(Pools { buf_size: size, files: count(files), frames: count(frames) });
        }
    }
    if listing {
        return Ok(Pools { buf_size: CHUNK_SIZE, files: 0, frames: 0 });
    }
    let (buf_size, files) = pool_shape(files + frames)?;
    Ok(Pools { buf_size, files, frames: 0 })
}

/// A URL's reorder window by default (`url_window`): 16 MiB of the 64 MiB of file data, so a
/// restore from a URL stays within the default budget (peak RSS under 100 MiB). On 127.0.0.1
/// with 8 connections at 50 MB/s each it keeps them all busy (docs/PERFORMANCE.md).
pub const URL_WINDOW: u64 = 16 << 20;

/// The reorder window of a download for `memory` (`--memory`, None for the default): a
/// quarter of an explicit budget, between 1 MiB and 64 MiB, in whole 256 KiB blocks.
pub fn url_window(memory: Option<u64>) -> u64 {
    use crate::decode::url::ranges::BLOCK;
    match memory {
        None => URL_WINDOW,
        Some(m) => (m / 4).clamp(1 << 20, 64 << 20) / BLOCK * BLOCK,
    }
}

/// The download settings when the archive is a URL (`decode::url::is_url`); the URL-only
/// flags are refused for a file, the tuning ones (`--connections`, `--stall-timeout`,
/// `--retries`, `--cacert`) are let be, as TAR_OPTIONS may set them for every run.
fn url_plan(
    args: &Args,
    archive: Option<&std::path::Path>,
    filter: bool,
    memory: Option<u64>,
) -> Result<Option<crate::decode::url::Plan>> {
    use crate::decode::url;
    let Some(a) = archive.filter(|a| url::is_url(a.as_os_str())) else {
        if args.keep_archive.is_some() || args.checksum.is_some() {
            bail!("--keep-archive and --checksum apply to an archive read from an http(s):// URL");
        }
        return Ok(None);
    };
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
    Ok(Some(url::Plan {
        url: a.to_string_lossy().into_owned(),
        connections,
        stall,
        retries: args.retries.unwrap_or(url::retry::DEFAULT_RETRIES),
        cacert: args.cacert.clone(),
        keep: args.keep_archive.clone(),
        checksum,
        window: url_window(memory.or_else(|| tight_memory(usable_memory()))),
        verbose: args.verbose > 0,
        quiet: args.quiet,
    }))
}

/// Where the process may use less than this many times DEFAULT_MEMORY (a container or a
/// systemd unit with `MemoryMax` under 256 MiB, `ulimit -v` under 256 MiB), the default budget
/// is this fraction of what it may use, as if `--memory` had said so. In a cgroup v1 memory
/// limit of 64 MiB the default 64 MiB pool was killed by the OOM killer (peak RSS 77 MB on a
/// tarball of /usr/share; GNU tar's is 5 MB); with a 16 MiB budget the peak is 28 MB.
const TIGHT_MEMORY_FRACTION: u64 = 4;

/// The smallest default budget (TIGHT_MEMORY_FRACTION of a smaller limit would be refused as
/// too small for the pool; a process limited to so little fails at its first allocations
/// anyway).
const TIGHT_MEMORY_MIN: u64 = 4 << 20;

/// The default budget where the memory the process may use is tight (TIGHT_MEMORY_FRACTION),
/// None where DEFAULT_MEMORY fits.
fn tight_memory(usable: u64) -> Option<u64> {
    let share = usable / TIGHT_MEMORY_FRACTION;
    (share < DEFAULT_MEMORY).then(|| share.max(TIGHT_MEMORY_MIN))
}

/// Bytes of memory this process may use: the least of physical memory, its cgroup's memory
/// limit (a container's; `cgroup_memory_max`) and RLIMIT_AS. Anything unreadable counts as no
/// limit.
fn usable_memory() -> u64 {
    // Safety: sysconf has no preconditions.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let mut least = match (u64::try_from(pages), u64::try_from(page)) {
        (Ok(n), Ok(p)) if n > 0 && p > 0 => n.saturating_mul(p),
        _ => u64::MAX,
    };
    for limit in [soft_limit(libc::RLIMIT_AS), cgroup_memory_max()].into_iter().flatten() {
        least = least.min(limit);
    }
    least
}

/// The least memory limit of this process's cgroup and its ancestors, when one sets a limit:
/// `memory.max` under cgroup v2 (the "0::/path" line of /proc/self/cgroup), else
/// `memory.limit_in_bytes` of the v1 memory controller (the "N:memory:/path" line; containers
/// on older hosts).
fn cgroup_memory_max() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let limit = |root: &str, path: &str, file: &str| {
        let root = std::path::Path::new(root);
        let dir = root.join(path.trim_start_matches('/'));
        dir.ancestors()
            .take_while(|d| d.starts_with(root))
            .filter_map(|d| std::fs::read_to_string(d.join(file)).ok()?.trim().parse().ok())
            .min()
    };
    let v2 = cgroups.lines().find_map(|l| l.strip_prefix("0::"));
    let v1 = cgroups.lines().find_map(|l| {
        let (controllers, path) = l.split_once(':')?.1.split_once(':')?;
        controllers.split(',').any(|c| c == "memory").then_some(path)
    });
    let v2 = v2.and_then(|p| limit("/sys/fs/cgroup", p, "memory.max"));
    let v1 = v1.and_then(|p| limit("/sys/fs/cgroup/memory", p, "memory.limit_in_bytes"));
    v2.into_iter().chain(v1).min()
}

/// Most decoder threads: past the 64 cores of the biggest validators, more threads only add
/// frames in flight that the pool and the writer cannot use.
const MAX_THREADS: usize = 256;

/// zstd decoder threads by default: the CPUs this process may run on (sched_getaffinity, and a
/// cgroup's CPU quota, through `available_parallelism`) when listing or with `-O`; one fewer when
/// extracting to disk, because the writer needs a CPU of its own. Measured on 2 CPUs (4 GB in 119
/// frames): `-t` took 0.57x the time with 2 threads, but extraction none less, to tmpfs, to
/// RAM-backed ext4 or to the disk: the writer's system time (2.4 s of copying into the page cache,
/// or the loop device's worker) already filled the second CPU, and a second decoder only added its
/// copying (docs/PERFORMANCE.md). One under `ulimit -v`.
fn default_threads(listing: bool) -> usize {
    // Under `ulimit -v` one: every thread adds its zstd window, stack and read-ahead, and
    // `--threads 8` under `ulimit -v 196608` failed (in a different allocation each run).
    if address_space_limited() {
        return 1;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spare = if listing { cpus } else { cpus - 1 };
    spare.clamp(1, MAX_THREADS)
}

/// Most writer threads by default. On 2 CPUs, 2 writers created the 100,000-file tree in 0.75x
/// (disk) to 0.81x (RAM-backed ext4) of one writer's time
/// (docs/PERFORMANCE.md, "The model for larger machines"); ext4's journal and the
/// directory locks are shared, so past 8 more threads mostly add contention.
const DEFAULT_MAX_WRITERS: usize = 8;

/// `--writer-threads`, else the CPUs we may run on, at most DEFAULT_MAX_WRITERS; and whether
/// the count was asked for.
fn writer_threads(flag: Option<usize>) -> Result<(usize, bool)> {
    let n = match flag {
        Some(n) => n,
        None if few_threads_allowed() => 1,
        None => default_threads(true).min(DEFAULT_MAX_WRITERS),
    };
    if n == 0 {
        bail!("--writer-threads: must be at least 1");
    }
    Ok((n.min(crate::write::multi::MAX_WRITERS), flag.is_some()))
}

/// Below this RLIMIT_NPROC (`ulimit -u`, which counts every thread of the user), the default
/// is one writer: each more writer is a thread, and with io_uring its io-wq workers are more.
/// Distributions give users thousands; a limit this low is set on purpose.
const NPROC_FOR_WRITERS: u64 = 256;

/// Whether RLIMIT_NPROC applies to us and is below NPROC_FOR_WRITERS (root is not held to it).
fn few_threads_allowed() -> bool {
    // Safety: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    !root && soft_limit(libc::RLIMIT_NPROC).is_some_and(|n| n < NPROC_FOR_WRITERS)
}

/// Splits the memory budget into buffers: CHUNK_SIZE each while that leaves MIN_BUFFERS,
/// smaller (still BUF_ALIGN multiples) below that.
fn pool_shape(memory: u64) -> Result<(usize, usize)> {
    let min = (MIN_BUFFERS * BUF_ALIGN) as u64;
    if memory < min {
        bail!("--memory must be at least {min} bytes");
    }
    let memory = usize::try_from(memory.min(1 << 40)).unwrap_or(usize::MAX);
    let size = (memory / MIN_BUFFERS).min(CHUNK_SIZE) / BUF_ALIGN * BUF_ALIGN;
    Ok((size, memory / size))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL's reorder window comes out of the same budget: from the default file data, or
    /// from an explicit --memory, never on top of it.
    #[test]
    fn one_top_level_of_a_url() {
        let url = "https://h/p/snapshot-1-abc.tar.zst?X-Amz-Credential=AK%2F2026/us/s3&Sig=x/y";
        let got = top_level(std::path::Path::new(""), Some(std::path::Path::new(url))).unwrap();
        assert_eq!(got, Some(PathBuf::from("snapshot-1-abc")));
    }

    #[test]
    fn the_url_window_is_part_of_the_budget() {
        let mib = |p: Pools| (p.files * p.buf_size) as u64 >> 20;
        let big = 1 << 40;
        assert_eq!(url_window(None), 16 << 20);
        assert_eq!(mib(divide(None, 0, false, big, url_window(None)).unwrap()), 48);
        let m = 64 << 20;
        assert_eq!(mib(divide(Some(m), 0, false, big, url_window(Some(m))).unwrap()), 48);
        assert_eq!(url_window(Some(4 << 20)), 1 << 20);
        assert_eq!(url_window(Some(1 << 32)), 64 << 20);
        assert_eq!(url_window(Some(10 << 20)) % (256 << 10), 0);
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

    const MIB: u64 = 1 << 20;

    /// Bytes of file data and of frames.
    fn bytes(p: Pools) -> (u64, u64) {
        let b = p.buf_size as u64;
        (p.files as u64 * b, p.frames as u64 * b)
    }

    fn mib(p: Pools) -> (u64, u64) {
        let (f, d) = bytes(p);
        (f / MIB, d / MIB)
    }

    #[test]
    fn default_memory_grows_with_workers() {
        let big = 1 << 40;
        // One thread decodes: 64 MiB of file data, as always.
        assert_eq!(mib(divide(None, 0, false, big, 0).unwrap()), (64, 0));
        // One worker: one frame and the reader's extra buffer besides, and the frame the
        // writer holds, from file data.
        assert_eq!(mib(divide(None, 1, false, big, 0).unwrap()), (32, 65));
        // Three workers: a frame each.
        assert_eq!(mib(divide(None, 3, false, big, 0).unwrap()), (32, 129));
        // 31 workers: ~1 GiB, unless a fraction of the machine's memory is less.
        assert_eq!(mib(divide(None, 31, false, big, 0).unwrap()), (32, 1025));
        assert_eq!(mib(divide(None, 31, false, 256 * MIB, 0).unwrap()), (32, 224));
        // One worker's where an eighth of the memory holds it, whatever the rest; less where
        // it does not (`ulimit -v 196608`: 24 MiB, frames streamed, not decoded in place, and
        // file data keeps its share).
        assert_eq!(mib(divide(None, 31, false, 64 * MIB, 0).unwrap()), (32, 65));
        assert_eq!(mib(divide(None, 31, false, 24 * MIB, 0).unwrap()), (64, 24));
        // A URL's window leaves file data too little to give a frame.
        assert_eq!(mib(divide(None, 1, false, big, URL_WINDOW).unwrap()), (48, 33));
        // Listing: the frames only, at least 64 MiB.
        assert_eq!(mib(divide(None, 1, true, big, 0).unwrap()), (0, 64));
        assert_eq!(mib(divide(None, 3, true, big, 0).unwrap()), (0, 97));
        assert_eq!(mib(divide(None, 3, true, 8 * MIB, 0).unwrap()), (0, 64));
        assert_eq!(divide(None, 0, true, big, 0).unwrap().frames, 0);
        // Where less than 256 MiB may be used, a quarter of it, at least 4 MiB.
        assert_eq!(tight_memory(24 << 30), None);
        assert_eq!(tight_memory(256 * MIB), None);
        assert_eq!(tight_memory(64 * MIB), Some(16 * MIB));
        assert_eq!(tight_memory(8 * MIB), Some(4 * MIB));
        assert_eq!(mib(divide(tight_memory(64 * MIB), 1, false, 0, 0).unwrap()), (8, 8));
    }

    #[test]
    fn explicit_memory_is_never_exceeded() {
        for m in [24 << 10, 64 << 10, MIB, 16 * MIB, 64 * MIB, 100 * MIB, 1 << 30] {
            for workers in [0, 1, 3, 63] {
                for listing in [false, true] {
                    let p = divide(Some(m), workers, listing, 0, 0).unwrap();
                    let (f, d) = bytes(p);
                    assert!(f + d <= m, "{m} {workers} {listing}: {p:?}");
                    assert!(p.buf_size.is_multiple_of(BUF_ALIGN) && p.buf_size > 0);
                    if !listing {
                        assert!(p.files >= MIN_BUFFERS, "{m} {workers}: {p:?}");
                    }
                    if workers > 0 && m >= 32 << 10 {
                        assert!(p.frames >= MIN_FRAME_BUFFERS, "{m} {workers} {listing}: {p:?}");
                    }
                }
            }
        }
        // 64M with one worker keeps one whole frame ahead, as the shared pool did.
        assert_eq!(mib(divide(Some(64 * MIB), 1, false, 0, 0).unwrap()), (31, 33));
        // 1G with 3 workers: a frame each, the rest for file data; with 63 workers the frames
        // get all but 64 MiB.
        assert_eq!(mib(divide(Some(1 << 30), 3, false, 0, 0).unwrap()), (927, 97));
        assert_eq!(mib(divide(Some(1 << 30), 63, false, 0, 0).unwrap()), (64, 960));
        // 100M with 3 workers: 64 MiB of file data, the rest (not a frame each) for frames.
        assert_eq!(mib(divide(Some(100 * MIB), 3, false, 0, 0).unwrap()), (64, 36));
        // Too little for two pools: one thread decodes, in all of it.
        let p = divide(Some(28 << 10), 3, false, 0, 0).unwrap();
        assert_eq!((p.buf_size, p.files, p.frames), (4096, 7, 0));
        // The least that has both: 4 buffers of file data, 4 of frames.
        let p = divide(Some(32 << 10), 3, false, 0, 0).unwrap();
        assert_eq!((p.buf_size, p.files, p.frames), (4096, 4, 4));
    }

    #[test]
    fn pool_shapes() {
        assert_eq!(pool_shape(64 << 20).unwrap(), (1 << 20, 64));
        assert_eq!(pool_shape(1 << 20).unwrap(), (256 << 10, 4));
        assert!(pool_shape(100).is_err());
    }
}
