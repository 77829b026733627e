//! What a program is told while its restore runs: the [`Observer`] it passes, and the bridge
//! from the run's reporter (report/voice.rs `Voice`) to it.

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;

use super::{MemberKind, SkipReason};
use crate::report::voice::{Skip, Voice};

/// A member about to be restored.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Started<'a> {
    /// Its name as the archive spells it (bytes: tar names need not be UTF-8).
    pub name: &'a [u8],
    /// Its type.
    pub kind: MemberKind,
    /// Its size in bytes (0 for all but regular files).
    pub size: u64,
}

/// A regular file whose data and metadata have landed.
#[derive(Debug)]
#[non_exhaustive]
pub struct Landed<'a> {
    /// Where it is, relative to its root (after `strip_components`).
    pub path: &'a Path,
    /// Which root it landed under: 0 the destination, then the roots of each
    /// [`Restore::spread`](crate::Restore::spread) in the order given, or those of
    /// [`Restore::roots`](crate::Restore::roots) (as a routing callback numbers them).
    pub root: usize,
    /// Its size in bytes.
    pub size: u64,
    /// The file itself, open for reading and writing (a duplicate of the writer's
    /// descriptor), when [`Observer::wants_files`] says so; None otherwise.
    pub file: Option<File>,
}

/// A member that was not restored; the run goes on.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Skipped<'a> {
    /// Its name (lossy UTF-8, escaped as the command line shows it).
    pub member: &'a str,
    /// Why.
    pub reason: SkipReason,
    /// The words the command line says for it.
    pub message: &'a str,
}

/// How far the run has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Members read from the archive so far.
    pub members: u64,
    /// Bytes of file data landed so far.
    pub written: u64,
}

/// Told what a restore does. Every method has an empty default: implement those you need.
/// Calls come from the run's threads (the decoder's and the writers'), never at once for one
/// file, and should return quickly: the writer waits for them.
///
/// ```
/// use std::sync::Mutex;
/// use std::sync::Arc;
/// use fastuntar::{Landed, Observer, Restore, Source};
///
/// /// Each file's path and size, as an index builder would take them.
/// #[derive(Default)]
/// struct Index(Mutex<Vec<(std::path::PathBuf, u64)>>);
///
/// impl Observer for Index {
///     fn landed(&self, file: Landed<'_>) {
///         self.0.lock().unwrap().push((file.path.to_path_buf(), file.size));
///     }
/// }
///
/// let dest = std::env::temp_dir().join(format!("fastuntar-doc-{}", std::process::id()));
/// let index = Arc::new(Index::default());
/// let summary = Restore::new(Source::Path("fixtures/sample.tar.zst".into()), &dest)
///     .observer(index.clone())
///     .run()?;
/// let files = index.0.lock().unwrap();
/// assert_eq!(files.len() as u64, summary.files);
/// assert!(files.iter().all(|(path, size)| dest.join(path).metadata().unwrap().len() == *size));
/// # std::fs::remove_dir_all(&dest).unwrap();
/// # Ok::<(), fastuntar::Error>(())
/// ```
pub trait Observer: Send + Sync {
    /// A member is about to be restored (only members the selection takes).
    fn started(&self, member: &Started<'_>) {
        let _ = member;
    }

    /// A regular file landed. Told once per file, after its data and metadata are written
    /// and before it is closed; a file that failed is told to `skipped` instead.
    fn landed(&self, file: Landed<'_>) {
        let _ = file;
    }

    /// A member was not restored.
    fn skipped(&self, member: &Skipped<'_>) {
        let _ = member;
    }

    /// A warning (the command line's words, without its `fastuntar: ` prefix), and failures
    /// the run went on after.
    fn warning(&self, message: &str) {
        let _ = message;
    }

    /// The run's counters, at most every 100 ms while members are read, and once at the
    /// end.
    fn progress(&self, progress: Progress) {
        let _ = progress;
    }

    /// Whether [`Landed::file`] should carry the open file (as Agave's file creator hands
    /// each file to the accounts index). Costs a `dup` per file. Default: no.
    fn wants_files(&self) -> bool {
        false
    }
}

/// The run's voice, told on to the program's observer (or to no one).
pub(super) struct Bridge {
    observer: Option<Arc<dyn Observer>>,
    wants_files: bool,
}

impl Bridge {
    pub(super) fn new(observer: Option<Arc<dyn Observer>>) -> Bridge {
        let wants_files = observer.as_ref().is_some_and(|o| o.wants_files());
        Bridge { observer, wants_files }
    }
}

impl Voice for Bridge {
    fn started(&self, name: &[u8], kind: MemberKind, size: u64) {
        if let Some(o) = &self.observer {
            o.started(&Started { name, kind, size });
        }
    }

    fn landed(&self, (root, path): (usize, &Path), size: u64, fd: BorrowedFd<'_>) {
        let Some(o) = &self.observer else { return };
        // A failed dup (out of descriptors) hands no file; the event is told all the same.
        let file = match self.wants_files {
            true => fd.try_clone_to_owned().ok().map(File::from),
            false => None,
        };
        o.landed(Landed { path, root, size, file });
    }

    fn skipped(&self, member: &str, why: Skip, message: &str) {
        if let Some(o) = &self.observer {
            o.skipped(&Skipped { member, reason: why, message });
        }
    }

    fn failed(&self, name: &str, message: &str) {
        if let Some(o) = &self.observer {
            o.warning(&format!("{name}: {message}"));
        }
    }

    fn warning(&self, message: &str) {
        if let Some(o) = &self.observer {
            o.warning(message);
        }
    }

    fn progress(&self, members: u64, written: u64) {
        if let Some(o) = &self.observer {
            o.progress(Progress { members, written });
        }
    }
}
