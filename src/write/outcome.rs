//! What became of a member the writers did not land whole, as a typed value: `Dest`'s
//! operations on a member return `Result<_, MemberError>`, and the run's decision ("report it
//! and go on", "stop the run", or "kept, not a failure": `judge`) and GNU tar's words for it
//! (`MemberError::words`) come from matching on its variants. Nothing is carried inside an
//! `io::Error` and looked for again later.

use std::io;

use crate::policy::admit::TooManyFiles;
use crate::report::voice::Skip;

/// Why a member's write stopped short of landing it whole.
#[derive(Debug)]
pub enum MemberError {
    /// `--skip-old-files` or `--keep-newer-files` kept what was at its path: not a failure.
    Kept(KeptExisting),
    /// The system's refusal.
    Io(io::Error),
    /// The member was made, but its mode or time (through its fd) could not be set.
    Metadata(io::Error),
    /// A chown the kernel refused, named as GNU tar names it ("Cannot change ownership to uid
    /// 4242, gid 4242: Operation not permitted"): its words say all.
    OwnerRefused { uid: u32, gid: u32, source: io::Error },
    /// Its path runs through a symlink (which fastuntar never follows, unless
    /// `--keep-directory-symlink`): the ENOTDIR or ELOOP of the walk, the symlink named
    /// (`Dest::explain`).
    ThroughSymlink { link: String, source: io::Error },
    /// `--overwrite -h`: the file the symlink at its path leads to, resolved inside DIR, could
    /// not be opened (it leads out of DIR, to a directory DIR does not have, ...): the
    /// system's words, then why a user may not have expected it.
    BeyondLink { link: String, source: io::Error },
    /// Our own refusal of this member (what is at its path is not what it should be).
    Refused(&'static str),
    /// `--max-files` refused a directory the writer was to make on its way: the run stops.
    TooManyFiles(String),
}

/// `--skip-old-files` or `--keep-newer-files` kept what was at a member's path. Not a
/// failure: `write::member_failed` says what it is told to (nothing, `skipping existing file`,
/// or `Current 'PATH' is newer or same age`), and the exit status stays as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptExisting {
    /// `--skip-old-files`.
    Skipped,
    /// `--keep-newer-files`: what is at `path` (the path as extracted, as GNU tar names it) is
    /// as new as the member or newer.
    Newer { path: String },
}

/// What the run does with a member that did not land whole (`judge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// What was there stays: said as a skip, the exit status as it was.
    Kept(&'a KeptExisting),
    /// This member only: reported, the run goes on (and exits 2).
    Report,
    /// The run stops.
    Stop,
}

impl From<io::Error> for MemberError {
    fn from(e: io::Error) -> MemberError {
        MemberError::Io(e)
    }
}

impl From<TooManyFiles> for MemberError {
    fn from(e: TooManyFiles) -> MemberError {
        MemberError::TooManyFiles(e.0)
    }
}

impl MemberError {
    /// A chown the kernel refused.
    pub fn owner_refused(uid: u32, gid: u32, source: io::Error) -> MemberError {
        MemberError::OwnerRefused { uid, gid, source }
    }

    /// `--overwrite -h`'s open through the symlink at `link` failed: where the system's words
    /// alone would puzzle (ENOENT, ENOTDIR, EXDEV, ELOOP: the link resolved inside DIR), they
    /// say why; anything else is the system's refusal as it is.
    pub fn beyond_link(link: String, source: io::Error) -> MemberError {
        match source.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::EXDEV | libc::ELOOP) => {
                MemberError::BeyondLink { link, source }
            }
            _ => MemberError::Io(source),
        }
    }

    /// The error of a member made whose metadata failed: a system refusal becomes `Metadata`
    /// ("cannot set metadata: ..."); a refused chown says all already.
    pub fn of_metadata(self) -> MemberError {
        match self {
            MemberError::Io(e) => MemberError::Metadata(e),
            other => other,
        }
    }

    /// The system's error this one carries, if any.
    pub fn cause(&self) -> Option<&io::Error> {
        match self {
            MemberError::Io(e)
            | MemberError::Metadata(e)
            | MemberError::OwnerRefused { source: e, .. }
            | MemberError::ThroughSymlink { source: e, .. }
            | MemberError::BeyondLink { source: e, .. } => Some(e),
            MemberError::Kept(_) | MemberError::Refused(_) | MemberError::TooManyFiles(_) => None,
        }
    }

    /// The errno of the system's error it carries.
    pub fn errno(&self) -> Option<i32> {
        self.cause().and_then(io::Error::raw_os_error)
    }

    /// The system's error it carries, given up (None: it carries none, and is handed back).
    pub fn into_cause(self) -> Result<io::Error, MemberError> {
        match self {
            MemberError::Io(e)
            | MemberError::Metadata(e)
            | MemberError::OwnerRefused { source: e, .. }
            | MemberError::ThroughSymlink { source: e, .. }
            | MemberError::BeyondLink { source: e, .. } => Ok(e),
            other => Err(other),
        }
    }

    /// GNU tar's words for the member (after its name): `what` (the operation that failed,
    /// "Cannot open", "Cannot mkdir", ...) and the system's words without " (os error N)";
    /// a member made whose metadata failed is "cannot set metadata: ..." whatever `what` was,
    /// and a refused chown is its own words alone.
    pub fn words(&self, what: &str) -> String {
        match self {
            MemberError::Io(e) => format!("{what}: {}", crate::report::strerror(e)),
            MemberError::OwnerRefused { .. } => self.to_string(),
            MemberError::Metadata(_) => format!("cannot set metadata: {self}"),
            _ => format!("{what}: {self}"),
        }
    }
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let strerror = crate::report::strerror;
        match self {
            MemberError::Kept(k) => k.fmt(f),
            MemberError::Io(e) => e.fmt(f),
            MemberError::Metadata(e) => f.write_str(&strerror(e)),
            MemberError::OwnerRefused { uid, gid, source } => {
                write!(f, "Cannot change ownership to uid {uid}, gid {gid}: {}", strerror(source))
            }
            MemberError::ThroughSymlink { link, .. } => write!(
                f,
                "'{link}' is a symlink; fastuntar does not extract through one \
                 (--keep-directory-symlink follows those inside DIR)"
            ),
            MemberError::BeyondLink { link, source } => write!(
                f,
                "{} (-h follows the symlink '{link}' only inside DIR, as if DIR were /)",
                strerror(source)
            ),
            MemberError::Refused(why) => f.write_str(why),
            MemberError::TooManyFiles(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for MemberError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MemberError::Io(e) => e.source(),
            MemberError::Metadata(e)
            | MemberError::OwnerRefused { source: e, .. }
            | MemberError::ThroughSymlink { source: e, .. }
            | MemberError::BeyondLink { source: e, .. } => Some(e),
            MemberError::Kept(_) | MemberError::Refused(_) | MemberError::TooManyFiles(_) => None,
        }
    }
}

impl std::fmt::Display for KeptExisting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeptExisting::Skipped => f.write_str("skipping existing file"),
            KeptExisting::Newer { path } => write!(f, "Current '{path}' is newer or same age"),
        }
    }
}

impl KeptExisting {
    /// Why, as the library's observer is told it (`SkipReason`).
    pub fn reason(&self) -> Skip {
        match self {
            KeptExisting::Skipped => Skip::Existing,
            KeptExisting::Newer { .. } => Skip::KeptNewer,
        }
    }

    /// The member as the observer is told it: `name` (the member's name) when skipped, the
    /// path as GNU tar names it when kept as newer.
    pub fn shown<'a>(&'a self, name: &'a str) -> &'a str {
        match self {
            KeptExisting::Skipped => name,
            KeptExisting::Newer { path } => path,
        }
    }

    /// The observer's message.
    pub fn summary(&self) -> &'static str {
        match self {
            KeptExisting::Skipped => "existing file kept",
            KeptExisting::Newer { .. } => "newer file kept",
        }
    }
}

/// Whether the run reports `e` and goes on (`Report`), stops (`Stop`), or was told to keep
/// what is there (`Kept`). `dir_writable`: DIR itself is writable (`errno_is_members`).
pub fn judge(e: &MemberError, dir_writable: bool) -> Verdict<'_> {
    match e {
        MemberError::Kept(kept) => Verdict::Kept(kept),
        MemberError::Refused(_) => Verdict::Report,
        MemberError::TooManyFiles(_) => Verdict::Stop,
        MemberError::Io(source)
        | MemberError::Metadata(source)
        | MemberError::OwnerRefused { source, .. }
        | MemberError::ThroughSymlink { source, .. }
        | MemberError::BeyondLink { source, .. } => match errno_is_members(source, dir_writable) {
            true => Verdict::Report,
            false => Verdict::Stop,
        },
    }
}

/// Whether the system's error `e` concerns one member only (report it and go on); anything
/// else is fatal. EACCES concerns one member when DIR itself is writable (`dir_writable`,
/// found by `Dest::open`): a directory inside DIR that the user may not write to (an earlier
/// extraction's 0555 directory, someone else's), reported as GNU tar reports it while the rest
/// is extracted. Where DIR is not, every member would fail the same way, and the first one
/// ends the run. (Until 2026-11-24 EACCES always ended it, with the members already in flight.)
pub fn errno_is_members(e: &io::Error, dir_writable: bool) -> bool {
    let Some(errno) = e.raw_os_error() else {
        // No errno: a refusal of ours in io's clothes (none is made today; `Refused` is).
        return e.kind() == io::ErrorKind::InvalidInput;
    };
    if errno == libc::EACCES {
        return dir_writable;
    }
    matches!(
        errno,
        libc::ENOTDIR
            | libc::ELOOP
            | libc::EEXIST
            | libc::ENOTEMPTY
            | libc::EISDIR
            | libc::ENAMETOOLONG
            | libc::EXDEV
            | libc::ENOENT
            | libc::EMLINK
            | libc::EINVAL
            | libc::EPERM
            // What the filesystem cannot do (FUSE: ENOSYS for an operation the daemon
            // lacks, EOPNOTSUPP; FAT through FUSE has no symlinks, no chmod).
            | libc::ENOSYS
            | libc::EOPNOTSUPP
            // A name the filesystem cannot store (invalid UTF-8 on exFAT, NTFS).
            | libc::EILSEQ
    )
}

#[cfg(test)]
mod tests;
