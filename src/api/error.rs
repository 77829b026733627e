//! The one error a restore ends with: which kind of failure, with what it names, and the
//! run's own error (its words as the command line says them) as the source.

use std::path::PathBuf;

use crate::report::voice::{Fault, fault_of};

/// The run's own error, the source of an [`Error`].
type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A run's error as a source: its words are the whole line the command line prints
/// (`MEMBER: what: the system's error`), so it has no source of its own.
#[derive(Debug)]
struct Cause(anyhow::Error);

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Cause {}

/// Why a restore failed. Each kind carries what it names; [`source`](std::error::Error::source)
/// gives the run's own error, in the words of the line the command line prints.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The options do not go together, or one is out of range; nothing was read or written.
    /// Also a routing callback's answer that no member can have (a root
    /// [`Restore::roots`](crate::Restore::roots) did not declare, [`Route::Each`](crate::Route::Each)
    /// for a non-directory): the run stops at that member, named in `message`, and what landed
    /// before it stays.
    Options {
        /// What is wrong.
        message: String,
    },
    /// The archive could not be opened or read.
    Input {
        /// The file (or `-` for a reader).
        name: String,
        /// What failed.
        source: Source,
    },
    /// The archive's URL could not be fetched.
    Network {
        /// The URL, without credentials.
        url: String,
        /// What failed.
        source: Source,
    },
    /// The archive is damaged, or the snapshot policy refuses it.
    Archive {
        /// Bytes of the decoded tar stream read when it failed.
        offset: u64,
        /// The member it failed in, when it failed inside one.
        member: Option<String>,
        /// What failed.
        source: Source,
    },
    /// The destination failed in a way that is not one member's (no space, a read-only
    /// filesystem, an I/O error).
    Destination {
        /// The destination directory.
        path: PathBuf,
        /// The system's error number, when a system call failed.
        errno: Option<i32>,
        /// What failed.
        source: Source,
    },
    /// A limit was reached (`max_files`, `max_bytes`, `max_member_size`, the snapshot
    /// limits), or the snapshot policy stopped at a member outside its layout.
    Limit {
        /// Which, and where.
        source: Source,
    },
    /// The run was cancelled ([`Cancel`](crate::Cancel)). What landed stays, and a rerun with
    /// the same options resumes.
    Cancelled,
    /// Anything else the run stopped for (the resume state, a thread that could not start).
    Other {
        /// What failed.
        source: Source,
    },
}

impl Error {
    pub(super) fn options(e: anyhow::Error) -> Error {
        Error::Options { message: format!("{e:#}") }
    }

    /// The kind of a run's error, from the fault it was tagged with where it arose.
    pub(super) fn from_run(e: anyhow::Error) -> Error {
        let Some(tagged) = fault_of(&e) else { return Error::Other { source: Box::new(Cause(e)) } };
        let errno = tagged
            .inner
            .chain()
            .find_map(|c| c.downcast_ref::<std::io::Error>().and_then(|io| io.raw_os_error()));
        let fault = tagged.fault.clone();
        // The words of a bad option are its message, as for those refused before the run.
        let message = format!("{:#}", tagged.inner);
        let source: Source = Box::new(Cause(e));
        match fault {
            Fault::Input { name } => Error::Input { name, source },
            Fault::Network { url } => Error::Network { url, source },
            Fault::Archive { offset, member } => Error::Archive { offset, member, source },
            Fault::Destination { path } => Error::Destination { path, errno, source },
            Fault::Limit => Error::Limit { source },
            Fault::Cancelled => Error::Cancelled,
            Fault::Options => Error::Options { message },
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Options { message } => write!(f, "bad options: {message}"),
            Error::Input { name, .. } => write!(f, "cannot read the archive {name}"),
            Error::Network { url, .. } => write!(f, "cannot fetch {url}"),
            Error::Archive { offset, member: Some(m), .. } => {
                write!(f, "the archive fails at byte {offset}, in member {m}")
            }
            Error::Archive { offset, member: None, .. } => {
                write!(f, "the archive fails at byte {offset}")
            }
            Error::Destination { path, .. } => write!(f, "cannot write to {}", path.display()),
            Error::Limit { .. } => f.write_str("a limit was reached"),
            Error::Cancelled => f.write_str("cancelled"),
            Error::Other { .. } => f.write_str("the restore failed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Input { source, .. }
            | Error::Network { source, .. }
            | Error::Archive { source, .. }
            | Error::Destination { source, .. }
            | Error::Limit { source }
            | Error::Other { source } => Some(&**source),
            Error::Options { .. } | Error::Cancelled => None,
        }
    }
}
