//! The member policy plan: what may land and how, as the run's options fixed it
//! (options/member.rs): safe paths (`--strip-components`, `--one-top-level`), admission (`--snapshot`, the
//! limits), ownership, times and attributes, `-G`. (What to do with a path that exists
//! already is the writer plan's, decided by conflict.rs.)

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
