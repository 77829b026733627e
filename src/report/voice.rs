//! Where a run's words go when a program, not a terminal, runs it (the library's `Restore`,
//! src/api/): the run's `Reporter` hands every diagnostic, skipped member, started member and
//! landed file to a `Voice` instead of writing to stderr or stdout. Without one (the command
//! line) the reporter writes as GNU tar does. The run's stop token (`Cancel`) and the typed
//! faults a run can end with (`Fault`) live here too: the reporter is the one value every
//! stage of a run already holds. Part of the library's API (`Cancel`, `MemberKind`, `Skip`
//! are re-exported by src/api/), hence documented throughout.

#![deny(missing_docs)]

use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A member's type, as a program is told it (the archive's `Kind`, mapped by the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberKind {
    /// A regular file (also a contiguous file or an unknown type, extracted as one).
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A hard link to an earlier member.
    Hardlink,
    /// A FIFO.
    Fifo,
    /// A character or block device.
    Device,
    /// Anything else (a volume label, a multi-volume continuation).
    Other,
}

/// Why a member was not restored (or only in part); the run goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Skip {
    /// Its name or link target is unsafe (absolute, `..`, through a symlink) or empty.
    Unsafe,
    /// The destination refused it (a permission, a name too long, a node that needs root):
    /// the writer's error for this member only.
    NotRestored,
    /// A multi-volume continuation, which a single volume cannot restore.
    Continuation,
    /// An existing file was kept (`OldFiles::Skip`).
    Existing,
    /// An existing file as new as the member or newer was kept (`OldFiles::KeepNewer`).
    KeptNewer,
    /// Placement across several roots refused it (a hard link whose target lies in another
    /// root: a link cannot cross filesystems), or the routing callback did
    /// (`Route::Refuse`, with its words).
    Refused,
    /// The routing callback answered `Route::Skip`: left out by the program's choice, which
    /// is no failure (not counted in `Summary::skipped`).
    Routed,
}

/// What a run says, when a program listens.
pub trait Voice: Send + Sync {
    /// A member is about to be restored: its name as archived, its kind, its size.
    fn started(&self, name: &[u8], kind: MemberKind, size: u64);
    /// A regular file's data and metadata landed at `path` (relative to root `root`: 0 the
    /// destination, then the `--spread` roots in order), of
    /// `size` bytes; `fd` is its open descriptor, still open for writing. (With a routing
    /// callback, the roots are 0 the destination, then those of `Restore::roots`.)
    fn landed(&self, at: (usize, &Path), size: u64, fd: BorrowedFd<'_>);
    /// A member was not restored: `why`, and the message GNU tar would print.
    fn skipped(&self, member: &str, why: Skip, message: &str);
    /// Something failed that the run went on after (a member selected nothing, a removal of
    /// `-G` failed).
    fn failed(&self, name: &str, message: &str);
    /// A warning, in the words the command line would print after `fastuntar: `.
    fn warning(&self, message: &str);
    /// Counters, at most every PROGRESS_EVERY: members read, bytes of file data landed.
    fn progress(&self, members: u64, written: u64);
}

/// How often `Voice::progress` is called at most: often enough for a bar, rare enough that
/// the member loop's clock read is the only cost per member.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A run's stop token: clonable, shared with whoever may stop the run. The member loop looks
/// at it before each member and each buffer of file data (at most 1 MiB, a few ms of I/O).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token not yet cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Stops the run(s) holding this token.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What ended a run, attached as context to the error it ended with where it arose, so that
/// the library's `Error` can say which kind of failure it was without reading its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The archive file (or program) could not be opened or read.
    Input { name: String },
    /// The URL could not be fetched.
    Network { url: String },
    /// The archive is damaged or not what the options require, at `offset` of the decoded
    /// stream, in member `member` (when known).
    Archive { offset: u64, member: Option<String> },
    /// The destination failed (not one member's error).
    Destination { path: std::path::PathBuf },
    /// A limit (`--max-files`, `--max-bytes`, the snapshot limits) was reached.
    Limit,
    /// The run was cancelled (`Cancel`).
    Cancelled,
    /// A library caller's own setting failed the run once it had started: its routing
    /// callback answered a root that does not exist, or `Each` for a non-directory.
    Options,
}

/// An error with the `Fault` it is: says exactly what the error inside says (the command
/// line's words are unchanged), and lets the library find the fault in the error's chain.
#[derive(Debug)]
pub struct Tagged {
    pub fault: Fault,
    pub inner: anyhow::Error,
}

/// Shows the inner error's own message; its causes follow as this error's sources, so that
/// a walk of the chain (`report::chain`'s strerror words, `{:#}`) sees every one of them once.
impl std::fmt::Display for Tagged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.inner)
    }
}

impl std::error::Error for Tagged {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

/// The causes of `e`, a tag seen through: where the chain holds a `Tagged`, the error it
/// carries stands in its place (so that a type test, `is::<NotTar>()` or an `io::Error`'s
/// errno, finds the error as it arose).
pub fn causes(e: &anyhow::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    e.chain().map(|c| match c.downcast_ref::<Tagged>() {
        Some(t) => t.inner.chain().next().unwrap_or(c),
        None => c,
    })
}

/// `e` as a `fault`, unless it was tagged already where it arose (the first tag is the truer).
pub fn tag(e: anyhow::Error, fault: Fault) -> anyhow::Error {
    if e.chain().any(|c| c.is::<Tagged>()) {
        return e;
    }
    anyhow::Error::new(Tagged { fault, inner: e })
}

/// The fault `e` was tagged with, and the error inside it.
pub fn fault_of(e: &anyhow::Error) -> Option<&Tagged> {
    e.chain().find_map(|c| c.downcast_ref::<Tagged>())
}

/// The error a cancelled run ends with.
pub fn cancelled() -> anyhow::Error {
    tag(anyhow::anyhow!("cancelled"), Fault::Cancelled)
}
