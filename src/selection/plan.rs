//! The selection plan: which members a run takes and under which names, as the resolve step
//! (cli/resolve.rs) fixed it from the MEMBER operands, `-T`, `--exclude`, `-N`, `-K`,
//! `--occurrence`, `--transform` and `-w`.

use std::sync::Arc;

use super::given::Given;
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
