//! A MEMBER name or an `--exclude` pattern as the command line gives it (cli/operands.rs
//! reads them), with the matching switches that stood where it was given.

/// A MEMBER name or an exclude pattern, whether it is matched as a shell pattern, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    pub text: Vec<u8>,
    pub wildcards: bool,
    pub flags: Flags,
}

/// How a name or pattern is matched: the switches GNU tar folds into its fnmatch options
/// (tar.c's MAKE_INCL_OPTIONS and MAKE_EXCL_OPTIONS), each as it stood where the name or
/// pattern was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags {
    /// Matched at the start of a member name only (EXCLUDE_ANCHORED); otherwise also after
    /// any `/` in it. MEMBERs are anchored unless `--no-anchored`, patterns only after
    /// `--anchored`.
    pub anchored: bool,
    /// `--ignore-case` (FNM_CASEFOLD).
    pub ignore_case: bool,
    /// `*`, `?` and brackets match `/` (no FNM_FILE_NAME): the default.
    pub slash: bool,
    /// A match of a leading directory counts (FNM_LEADING_DIR): the default, undone by
    /// `--no-recursion`.
    pub recursion: bool,
}

impl Flags {
    /// GNU tar's defaults for a MEMBER name (`anchored`) or an exclude pattern.
    pub const fn default_for(anchored: bool) -> Flags {
        Flags { anchored, ignore_case: false, slash: true, recursion: true }
    }

    /// Whether these are the defaults matched by the fast paths (select.rs's name lookup,
    /// exclude.rs's glob runs), for the given anchoring.
    pub fn is_default(&self, anchored: bool) -> bool {
        *self == Flags::default_for(anchored)
    }
}

impl Given {
    /// A name or pattern with GNU tar's default matching (`anchored`: a MEMBER).
    pub fn new(text: &[u8], wildcards: bool, anchored: bool) -> Given {
        Given { text: text.to_vec(), wildcards, flags: Flags::default_for(anchored) }
    }
}
