//! The member policy plan: what may land and how, as the resolve step (cli/resolve.rs) fixed
//! it: safe paths (`--strip-components`, `--one-top-level`), admission (`--snapshot`, the
//! limits), ownership, modes, times and attributes, `-G`, and what to do with a path that
//! exists already (`OldFiles`, carried out by write/).

use std::path::PathBuf;

use super::admit::Limits;

#[derive(Debug, Clone)]
pub struct MemberPlan {
    pub strip_components: usize,
    /// `--one-top-level`: the directory (relative, plain components) every member is
    /// extracted under (safety.rs).
    pub one_top_level: Option<PathBuf>,
    /// `--snapshot`: the ledger snapshot layout only (admit.rs).
    pub snapshot: bool,
    /// `--max-files`, `--max-bytes`, `--max-member-size` (the snapshot's by default with
    /// `--snapshot`).
    pub limits: Limits,
    /// Owners restored: `--same-owner`, or root without `--no-same-owner`.
    pub same_owner: bool,
    /// `--numeric-owner`: owners are the archive's numbers, never its names (owner.rs).
    pub numeric_owner: bool,
    /// `-m`: modification times are not restored.
    pub touch: bool,
    /// `--xattrs`: which extended attributes are restored (None: none, the default).
    pub xattrs: Option<crate::metadata::xattrs::XattrFilter>,
    /// `--acls`: POSIX ACLs are restored (acl.rs).
    pub acls: bool,
    /// `-G`, `-g FILE`: directories of an incremental archive are purged (incremental.rs).
    pub incremental: bool,
}

impl MemberPlan {
    /// Whether paths differ from the members' names by more than a leading `/`
    /// (`--strip-components`, `--one-top-level`): messages then name the path.
    pub fn renames(&self) -> bool {
        self.strip_components != 0 || self.one_top_level.is_some()
    }
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
