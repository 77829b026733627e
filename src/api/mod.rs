//! The library's face: [`Restore`] extracts an archive into a directory in-process, as the
//! command line does, with typed options, an [`Observer`] told what happens member by member,
//! a [`Cancel`] token, and one [`Error`] type.
//!
//! A run fills the typed options (src/options/) that the command line fills from its flags,
//! starting from the defaults of `fastuntar -x` with nothing else given, makes the same plans
//! of them (`Options::prepare`) and runs the same pipeline (src/command/extract.rs): a
//! program and the command line restore the same tree.
//! What only a terminal needs stays above this layer (src/main.rs): nothing here writes to
//! stdout or stderr, changes the umask or a resource limit, installs a signal handler or
//! exits the process.

#![deny(missing_docs)]

mod error;
mod observe;
mod route;

pub use crate::report::voice::{Cancel, MemberKind, Skip as SkipReason};
pub use error::Error;
pub use observe::{Landed, Observer, Progress, Skipped, Started};
pub use route::Route;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::options::{Options, Spreading};
use crate::report::Reporter;
use crate::selection::given::Given;

/// Where the archive comes from.
pub enum Source {
    /// An archive file (plain, zstd, gzip, bzip2, xz or LZ4: the format comes from its data).
    /// A regular file is read with O_DIRECT where that is faster, and a rerun can resume.
    Path(PathBuf),
    /// Any reader: the archive's bytes as they come (a pipe, a socket, a decrypting reader).
    /// It is read once, by the first run; a run from a reader cannot resume.
    Reader(Box<dyn Read + Send>),
    /// An `http://`, `https://` or `s3://` URL, fetched over several connections and
    /// extracted as it arrives.
    Url(String),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Path(p) => f.debug_tuple("Path").field(p).finish(),
            Source::Reader(_) => f.write_str("Reader"),
            Source::Url(u) => f.debug_tuple("Url").field(u).finish(),
        }
    }
}

impl From<&Path> for Source {
    fn from(p: &Path) -> Source {
        Source::Path(p.to_path_buf())
    }
}

impl From<PathBuf> for Source {
    fn from(p: PathBuf) -> Source {
        Source::Path(p)
    }
}

/// When files are written with O_DIRECT, past the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DirectIo {
    /// Where it was measured to be faster: by the filesystem, the archive's size and each
    /// file's (the default).
    Auto,
    /// Every file of at least the threshold, wherever the filesystem takes O_DIRECT.
    Always,
    /// No file.
    Never,
}

/// What a member does with something already at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Overwrite {
    /// Replace it (an existing directory is kept and gets the member's metadata): GNU tar's
    /// default.
    Replace,
    /// Unlink it before extracting the member (GNU tar's `-U`).
    UnlinkFirst,
    /// Keep it; the member is reported skipped ([`SkipReason::NotRestored`]).
    KeepOld,
    /// Keep it silently ([`SkipReason::Existing`]).
    SkipOld,
    /// Keep it when it is as new as the member or newer ([`SkipReason::KeptNewer`]).
    KeepNewer,
}

/// Whether a run resumes an interrupted run into the same destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resume {
    /// Resume when the destination holds the state of an interrupted run of the same archive
    /// with the same options, else start from the beginning; record resume points (the
    /// default).
    Auto,
    /// Resume, or fail when there is nothing to resume.
    Require,
    /// Neither resume nor record resume points.
    Off,
}

/// One extraction, built from a source and a destination, then [`run`](Restore::run).
///
/// ```no_run
/// use fastuntar::{Restore, Source};
///
/// let summary = Restore::new(Source::Path("snapshot.tar.zst".into()), "/ledger")
///     .snapshot(true)
///     .run()?;
/// println!("{} files, {} bytes", summary.files, summary.bytes);
/// # Ok::<(), fastuntar::Error>(())
/// ```
///
/// Members under a prefix can be spread across several roots (separate disks), as Agave lays
/// account files over its account paths: [`Restore::spread`]; or a callback of the program's
/// places every member: [`Restore::route`] over [`Restore::roots`].
pub struct Restore {
    opts: Options,
    observer: Option<Arc<dyn Observer>>,
    cancel: Option<Cancel>,
    /// The first option refused while building, said by `run`.
    refused: Option<String>,
    /// `roots` and `route`: the routing callback's roots and the callback.
    routing: (Vec<PathBuf>, Option<Arc<crate::policy::route::Rule>>),
}

impl std::fmt::Debug for Restore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restore").finish_non_exhaustive()
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Members read from the archive (selected or not).
    pub members: u64,
    /// Regular files created.
    pub files: u64,
    /// Of those, files written with O_DIRECT.
    pub files_direct: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symbolic and hard links created.
    pub links: u64,
    /// Bytes of file data written.
    pub bytes: u64,
    /// Members not restored (each told to [`Observer::skipped`]).
    pub skipped: u64,
    /// Failures the run went on after (each told to [`Observer::warning`]).
    pub failed: u64,
    /// From the start to the last file closed and directory stamped.
    pub elapsed: Duration,
    /// Whether the run resumed an interrupted one.
    pub resumed: bool,
}

impl Restore {
    /// A restore of `source` into `dest` (created if missing, as `mkdir -p`), with the
    /// defaults of `fastuntar -x`: modes minus the process umask, owners not restored.
    pub fn new(source: Source, dest: impl AsRef<Path>) -> Restore {
        // What the command line says besides warnings (a resumed run's line, a URL's retries)
        // is not said to a program (`Options::new`): `Summary::resumed` tells the one.
        let mut opts = Options::new(dest.as_ref().to_path_buf());
        match source {
            Source::Path(p) => opts.archive = Some(p),
            Source::Url(u) => opts.archive = Some(u.into()),
            Source::Reader(r) => opts.reader = Some(crate::decode::plan::Handed::new(r)),
        }
        let routing = (Vec::new(), None);
        Restore { opts, observer: None, cancel: None, refused: None, routing }
    }

    /// Snapshot policy: only the layout of a ledger snapshot (`version`, `snapshots/…`,
    /// `accounts/…`, regular files and directories with fixed modes) is admitted, within the
    /// snapshot limits (5,000,000 members, 4 TiB) unless set lower with the `max_*` options.
    pub fn snapshot(mut self, on: bool) -> Restore {
        self.opts.snapshot = on;
        self
    }

    /// At most `n` members and directories created ([`Error::Limit`] past it).
    pub fn max_files(mut self, n: u64) -> Restore {
        self.opts.limits.max_files = Some(n);
        self
    }

    /// At most `n` bytes of file data in all ([`Error::Limit`] past it).
    pub fn max_bytes(mut self, n: u64) -> Restore {
        self.opts.limits.max_bytes = Some(n);
        self
    }

    /// No member larger than `n` bytes ([`Error::Limit`]).
    pub fn max_member_size(mut self, n: u64) -> Restore {
        self.opts.limits.max_member_size = Some(n);
        self
    }

    /// When files are written with O_DIRECT.
    pub fn direct_io(mut self, mode: DirectIo) -> Restore {
        use crate::write::plan::DirectIo as Plan;
        self.opts.direct = match mode {
            DirectIo::Auto => Plan::Auto,
            DirectIo::Always => Plan::Always,
            DirectIo::Never => Plan::Never,
        };
        self
    }

    /// Threads decoding a multi-frame zstd archive (default: by the CPUs).
    pub fn threads(mut self, n: usize) -> Restore {
        match n {
            0 => self.refuse("threads: must be at least 1"),
            n => self.opts.threads = Some(n),
        }
        self
    }

    /// Writer threads (default: by the destination's filesystem).
    pub fn writer_threads(mut self, n: usize) -> Restore {
        match n {
            0 => self.refuse("writer_threads: must be at least 1"),
            n => self.opts.writer_threads = Some(n),
        }
        self
    }

    /// The memory the run's buffers may take, in bytes (default: by what the process may
    /// use).
    pub fn memory(mut self, bytes: u64) -> Restore {
        match bytes {
            n if n < crate::budget::MIN_MEMORY => {
                let min = crate::budget::MIN_MEMORY;
                self.refuse(&format!("memory: must be at least {min} bytes"));
            }
            n => self.opts.memory = Some(n),
        }
        self
    }

    /// Removes `n` leading components from every member's name; members with no more are
    /// not extracted.
    pub fn strip_components(mut self, n: usize) -> Restore {
        self.opts.strip_components = n;
        self
    }

    /// Leaves out the members matching `pattern` (GNU tar's `--exclude`: shell wildcards,
    /// matched against any trailing part of the name).
    pub fn exclude(mut self, pattern: &str) -> Restore {
        // A shell pattern, unanchored, as `--exclude` makes it.
        self.opts.exclude.push(Given::new(pattern.as_bytes(), true, false));
        self
    }

    /// Extracts only the members named `name` (and, for a directory, what it holds); called
    /// again, those named either way. Without it, every member.
    pub fn select(mut self, name: impl AsRef<Path>) -> Restore {
        // The name as it is (no C escapes read), matched literally from the start.
        use std::os::unix::ffi::OsStrExt;
        self.opts.members.push(Given::new(name.as_ref().as_os_str().as_bytes(), false, true));
        self
    }

    /// What a member does with something already at its path.
    pub fn overwrite(mut self, how: Overwrite) -> Restore {
        use crate::policy::conflict::OldFiles;
        self.opts.old_files = match how {
            Overwrite::Replace => OldFiles::Replace,
            Overwrite::UnlinkFirst => OldFiles::UnlinkFirst,
            Overwrite::KeepOld => OldFiles::Keep,
            Overwrite::SkipOld => OldFiles::Skip,
            Overwrite::KeepNewer => OldFiles::KeepNewer,
        };
        self
    }

    /// Whether to resume an interrupted run.
    pub fn resume(mut self, how: Resume) -> Restore {
        use crate::resume::Flag;
        self.opts.resume = match how {
            Resume::Auto => Flag::Auto,
            Resume::Require => Flag::Resume,
            Resume::Off => Flag::Off,
        };
        self
    }

    /// Bytes of archive data between two resume points (default 256 MiB): what a rerun after
    /// a kill or a cancel extracts again at most.
    pub fn resume_every(mut self, bytes: u64) -> Restore {
        match bytes {
            0 => self.refuse("resume_every: must be at least 1 byte"),
            n => self.opts.writeback = n,
        }
        self
    }

    /// Makes the destination's filesystem durable (syncfs) before `run` returns.
    pub fn sync(mut self, on: bool) -> Restore {
        self.opts.sync = on;
        self
    }

    /// Restores the archive's permission bits exactly, set-id bits too, ignoring the umask
    /// (GNU tar's `-p`).
    pub fn exact_modes(mut self, on: bool) -> Restore {
        self.opts.exact_modes = on;
        self
    }

    /// Spreads the members under `prefix` (e.g. `accounts/`) across `roots`, with the prefix
    /// taken off their paths: each file goes to the root given the fewest bytes so far (a
    /// deterministic choice, so a resumed run places every member as before), each directory
    /// under the prefix is made in every root, and a hard link across roots is refused
    /// ([`SkipReason::Refused`]). Each root is confined as the destination is, has writers of
    /// its own, and counts towards the limits; [`Landed::root`] says where a file went (1 and
    /// up, in the order given). Called again, another prefix.
    pub fn spread<P: AsRef<Path>>(mut self, prefix: &str, roots: &[P]) -> Restore {
        let roots = roots.iter().map(|r| r.as_ref().to_path_buf()).collect();
        self.opts.spread.push(Spreading { prefix: prefix.to_string(), roots });
        self
    }

    /// Declares the roots a routing callback ([`Restore::route`]) may send members to,
    /// numbered from 1 in the order given (0 is the destination). Each is made if missing (as
    /// the destination is), confined as the destination is, has writers of its own (so
    /// several disks work at once), and counts towards the limits; a resume point covers
    /// them all (their filesystems are synced with the destination's). A root may lie inside
    /// the destination (a member the callback sends to the destination there is refused), not
    /// hold it or another root. Called again, replaces the list.
    pub fn roots<P: AsRef<Path>>(mut self, roots: &[P]) -> Restore {
        self.routing.0 = roots.iter().map(|r| r.as_ref().to_path_buf()).collect();
        self
    }

    /// A routing callback: asked once for every member the selection takes (after
    /// [`strip_components`](Restore::strip_components) and the path checks, so the path is
    /// relative with no `..`), with its kind, it answers where the member goes: a [`Route`]
    /// into a root of [`Restore::roots`] (or the destination), or to skip or refuse it. A
    /// hard link is asked for as [`MemberKind::Hardlink`], and its target's path again as a
    /// [`MemberKind::File`]: both must be in one root, or the link is refused (a link cannot
    /// cross filesystems). [`Landed::root`] says where each file went.
    ///
    /// The callback runs on the decoder thread, between members: it should be quick. It must
    /// answer by the path and kind only, the same on every call and on a rerun: a run resumed
    /// after a cancel or a kill asks again for the members after its resume point and the
    /// directories before it, and the resume state records the roots, not the rule (a rerun
    /// with other roots, without the callback or with [`spread`](Restore::spread) starts
    /// over; one whose rule changed needs [`Resume::Off`]). A root the callback names that
    /// `roots` did not declare, or [`Route::Each`] for a non-directory, stops the run with
    /// [`Error::Options`] naming the member. Not with `spread` (the callback places every
    /// member: spread by a rule of its own).
    ///
    /// ```
    /// use std::path::Path;
    /// use fastuntar::{MemberKind, Restore, Route, Source};
    ///
    /// let tmp = std::env::temp_dir().join(format!("fastuntar-route-doc-{}", std::process::id()));
    /// let (ledger, nvme1, nvme2) = (tmp.join("ledger"), tmp.join("nvme1"), tmp.join("nvme2"));
    /// // `accounts/<slot>.<id>` by the id's parity over two disks, the accounts/ prefix taken
    /// // off; everything else into the ledger directory as archived.
    /// let by_id = |path: &Path, kind: MemberKind| {
    ///     let Ok(file) = path.strip_prefix("accounts") else { return Route::to(0, path) };
    ///     if kind == MemberKind::Dir {
    ///         return Route::Each { roots: vec![1, 2], path: file.into() };
    ///     }
    ///     let id = file.to_str().and_then(|f| f.rsplit('.').next()?.parse::<usize>().ok());
    ///     match id {
    ///         Some(id) => Route::to(1 + id % 2, file),
    ///         None => Route::Refuse("not an account file".into()),
    ///     }
    /// };
    /// let summary = Restore::new(Source::Path("fixtures/sample.tar.zst".into()), &ledger)
    ///     .roots(&[&nvme1, &nvme2])
    ///     .route(by_id)
    ///     .run()?;
    /// assert_eq!(summary.skipped, 0);
    /// assert!(ledger.join("version").is_file() && !ledger.join("accounts").exists());
    /// assert!(nvme1.join("123456784.1012").is_file()); // an even id
    /// assert!(nvme2.join("123456783.1013").is_file()); // an odd one
    /// # std::fs::remove_dir_all(&tmp).unwrap();
    /// # Ok::<(), fastuntar::Error>(())
    /// ```
    pub fn route<F>(mut self, callback: F) -> Restore
    where
        F: Fn(&Path, MemberKind) -> Route + Send + Sync + 'static,
    {
        self.routing.1 = Some(route::rule(callback));
        self
    }

    /// Who is told what happens, member by member.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Restore {
        self.observer = Some(observer);
        self
    }

    /// A token that stops the run: `run` returns [`Error::Cancelled`] soon after it is
    /// cancelled, leaving what a kill leaves, so that a rerun resumes.
    pub fn cancel(mut self, token: Cancel) -> Restore {
        self.cancel = Some(token);
        self
    }

    /// Keeps the first option refused while building, for `run` to say (in the builder's
    /// words, not a flag's).
    fn refuse(&mut self, why: &str) {
        self.refused.get_or_insert_with(|| why.to_string());
    }

    /// Extracts. Blocks until the archive is extracted, a member stops the run, or the run is
    /// cancelled.
    pub fn run(self) -> Result<Summary, Error> {
        let Restore { mut opts, observer, cancel, refused, routing } = self;
        if let Some(r) = refused {
            return Err(Error::Options { message: r });
        }
        if routing.1.is_none() && !routing.0.is_empty() {
            let message = "roots without route: nothing would be sent to them".to_string();
            return Err(Error::Options { message });
        }
        let voice: Arc<dyn crate::report::voice::Voice> = Arc::new(observe::Bridge::new(observer));
        let reporter = Arc::new(Reporter::with_voice(voice, cancel));
        if let (roots, Some(rule)) = routing {
            opts.routing = Some(crate::options::Routing { roots, rule });
        }
        let machine =
            crate::options::Machine::read(reporter.started_at()).map_err(Error::options)?;
        let plans = opts.prepare(&machine).map_err(Error::options)?;
        let summary = crate::command::extract::run(&plans, &reporter).map_err(Error::from_run)?;
        reporter.progress_at_end();
        let s = &summary.stats;
        Ok(Summary {
            members: summary.members,
            files: s.files,
            files_direct: s.files_direct,
            dirs: s.dirs,
            links: s.links,
            bytes: s.bytes,
            skipped: reporter.skipped_count(),
            failed: reporter.failed_count(),
            elapsed: summary.elapsed,
            resumed: summary.resume.resumed.is_some(),
        })
    }
}
