//! Placement by the program: the [`Route`] its routing callback answers for each member
//! ([`Restore::route`](crate::Restore::route)), and the callback as the router below calls it
//! (policy/route.rs `Rule`, whose `Answer` this maps onto one to one).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::MemberKind;
use crate::policy::route::{Answer, Rule};

/// Where a member goes, as a routing callback answers it
/// ([`Restore::route`](crate::Restore::route)).
///
/// Roots are numbered: 0 is the destination, then 1 and up the directories of
/// [`Restore::roots`](crate::Restore::roots) in the order given. A path is relative to its
/// root and is taken only as it is: plain names (`.` components are dropped), no `..`, not
/// absolute, no NUL; any other path skips the member ([`SkipReason::Unsafe`](crate::SkipReason::Unsafe)).
/// Every root is confined as the destination is: the writers open paths beneath it without
/// following any symlink (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), whether the archive made it
/// or it was there before, so no answer can put a file outside its root.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route {
    /// Into root `root`, at `path` beneath it. Directories missing on the way are made, as
    /// GNU tar makes them (mode 0777 less the umask). The path of a non-directory may not be
    /// empty; an empty path for a directory gives the root itself the member's mode and time.
    To {
        /// The root: 0 the destination, then those of `Restore::roots`.
        root: usize,
        /// Where, beneath the root.
        path: PathBuf,
    },
    /// A directory made in each of `roots` at `path`, each with the member's mode, owner and
    /// times (as `Restore::spread` makes a directory under its prefix in every root), so that
    /// the files beneath it may go to any of them. Only for directories.
    Each {
        /// The roots (at least one; in any order, repeats ignored).
        roots: Vec<usize>,
        /// Where, beneath each.
        path: PathBuf,
    },
    /// Not restored, by the program's choice: told to
    /// [`Observer::skipped`](crate::Observer::skipped) as
    /// [`SkipReason::Routed`](crate::SkipReason::Routed), not counted as a failure.
    Skip,
    /// Not restored: told to [`Observer::skipped`](crate::Observer::skipped) as
    /// [`SkipReason::Refused`](crate::SkipReason::Refused) with these words, and counted in
    /// [`Summary::skipped`](crate::Summary::skipped). The run goes on; to stop it at such a
    /// member (as Agave's unpacker stops at an entry it does not expect), cancel its
    /// [`Cancel`](crate::Cancel) token from the callback.
    Refuse(String),
}

impl Route {
    /// Into root `root` at `path`.
    pub fn to(root: usize, path: impl Into<PathBuf>) -> Route {
        Route::To { root, path: path.into() }
    }
}

/// The program's callback as the router calls it.
pub(super) fn rule<F>(callback: F) -> Arc<Rule>
where
    F: Fn(&Path, MemberKind) -> Route + Send + Sync + 'static,
{
    Arc::new(move |path: &Path, kind: MemberKind| match callback(path, kind) {
        Route::To { root, path } => Answer::To { root, path },
        Route::Each { roots, path } => Answer::Each { roots, path },
        Route::Skip => Answer::Skip,
        Route::Refuse(why) => Answer::Refuse(why),
    })
}
