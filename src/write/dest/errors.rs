//! A member's failure, told better: the symlink its path met on the way named
//! (`Dest::explain`), and whether it concerns that member only (`Dest::is_member_error`, by
//! `write::outcome::judge`).

use std::ffi::CString;

use super::*;
use crate::policy::safety::SafePath;
use crate::write::outcome::{self, MemberError, Verdict};

impl Dest {
    /// `e`, a member's failure to be made at `path`, with the symlink named when the walk to
    /// it met one: ENOTDIR or ELOOP alone does not tell a user why `link/f` could not be made
    /// where GNU tar would have followed `link`. Only on the error path: one fstatat per
    /// directory of the path, from DIR, each without following (a component is looked at only
    /// after those above it were found to be directories).
    pub fn explain(&self, path: &SafePath, e: MemberError) -> MemberError {
        if self.tree.follows() || !matches!(e.errno(), Some(libc::ENOTDIR | libc::ELOOP)) {
            return e;
        }
        let mut prefix = Vec::new();
        for c in path.parent_components() {
            if !prefix.is_empty() {
                prefix.push(b'/');
            }
            prefix.extend_from_slice(c);
            let Ok(p) = CString::new(prefix.as_slice()) else { return e };
            let Ok(st) = fstatat_nofollow(self.root_fd(), &p) else { return e };
            let mode = st.st_mode & libc::S_IFMT;
            if mode == libc::S_IFLNK {
                let link = String::from_utf8_lossy(&prefix).into_owned();
                return match e.into_cause() {
                    Ok(source) => MemberError::ThroughSymlink { link, source },
                    Err(e) => e,
                };
            }
            if mode != libc::S_IFDIR {
                // A file in the way: "Not a directory" says it.
                return e;
            }
        }
        e
    }

    /// Whether DIR itself is writable (`outcome::errno_is_members`).
    pub fn dir_writable(&self) -> bool {
        self.dir_writable
    }

    /// An error that concerns one member only: report it and go on. Anything else is fatal.
    pub fn is_member_error(&self, e: &MemberError) -> bool {
        outcome::judge(e, self.dir_writable) == Verdict::Report
    }
}
