//! The selection plan: which members a run takes and under which names, as the resolve step
//! (cli/resolve.rs) fixed it from the MEMBER operands, `-T`, `--exclude`, `-N`, `-K`,
//! `--occurrence`, `--transform` and `-w`.

use std::sync::Arc;

use crate::archive::Timestamp;

#[derive(Debug, Clone)]
pub struct SelectionPlan {
    /// MEMBER operands and `--files-from` names, in command-line order (select.rs).
    pub members: Vec<Given>,
    /// `--exclude` and `--exclude-from` patterns (exclude.rs).
    pub exclude: Vec<Given>,
    /// `--no-recursion` last: with `--occurrence` a member under a selected directory counts
    /// as another occurrence of its name (select.rs).
    pub recursion: bool,
    /// `-K NAME`: the members before the first one NAME selects are skipped (select.rs).
    pub starting_file: Option<Vec<u8>>,
    /// `--occurrence=N`: only the Nth member each MEMBER selects (0: all of them).
    pub occurrence: u64,
    /// `-N/--newer/--after-date`, `--newer-mtime`: members older than this are not wanted.
    pub newer: Option<Timestamp>,
    /// `--transform` expressions, compiled (command/reading.rs applies them).
    pub transforms: Arc<super::transform::Transforms>,
    /// `-w`: ask before extracting each member (confirm.rs).
    pub interactive: bool,
    /// Standard input is the archive's or a `-T -`/`-X -` list's (`-w` asks on /dev/tty).
    pub stdin_taken: bool,
}

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
