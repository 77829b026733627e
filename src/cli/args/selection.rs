//! Which members (GNU tar's "Local file selection" and "File name matching options"): MEMBER
//! operands, `-T`, `--exclude` and the switches that apply to the names and patterns after
//! them, `-K`, `-N`, `--occurrence`; and `-C`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ArgAction;

use crate::cli::Ordered;

#[derive(clap::Args, Debug)]
pub struct Selection {
    /// The archive, when -f is not given ('-' for standard input), then MEMBERs: extract or
    /// list only these members and what is under them, as `tar -xf ARCHIVE MEMBER...` does
    /// (names as stored in the archive; a name that selects nothing is reported and the run
    /// exits 2). With -f every operand is a MEMBER.
    #[arg(value_name = "ARCHIVE|MEMBER")]
    pub operands: Vec<OsString>,

    /// A MEMBER named NAME, also one that starts with `-` (as GNU tar's --add-file); never
    /// the archive.
    #[arg(long = "add-file", value_name = "NAME", allow_hyphen_values = true)]
    pub add_file: Vec<OsString>,

    /// Read MEMBER names from FILE, one per line (empty lines are skipped; '-' for standard
    /// input when the archive is not read from it). A line starting with '-' is refused
    /// (GNU tar reads it as an option) unless --null or --verbatim-files-from.
    #[arg(short = 'T', long = "files-from", value_name = "FILE")]
    pub files_from: Vec<PathBuf>,

    // The switches below apply to the names, files and patterns after them on the command
    // line, as in GNU tar (`cli::parse` puts everything in `ordered`): each is Append with no
    // value, so that clap keeps the place of every occurrence.
    /// --files-from FILEs after this hold names ending with NUL, not newline (`find -print0`).
    #[arg(long = "null", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub null: Vec<bool>,

    /// Undoes --null for the --files-from FILEs after it.
    #[arg(long = "no-null", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_null: Vec<bool>,

    /// MEMBERs after this are shell patterns (`*`, `?`, `[...]`; they match `/` too), matched
    /// from the start of the member name; so are the --exclude patterns (their default).
    #[arg(long = "wildcards", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub wildcards: Vec<bool>,

    /// MEMBERs (the default) and --exclude patterns after this are literal strings.
    #[arg(long = "no-wildcards", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_wildcards: Vec<bool>,

    /// MEMBER names after this have C escapes (`\\`, `\n`, `\t`, `\141`...) decoded: the
    /// default, as in GNU tar.
    #[arg(long = "unquote", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub unquote: Vec<bool>,

    /// MEMBER names after this are taken as they are, backslashes included.
    #[arg(long = "no-unquote", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_unquote: Vec<bool>,

    /// Lines of --files-from FILEs after this that start with '-' are names.
    #[arg(
        long = "verbatim-files-from",
        action = ArgAction::Append,
        num_args = 0,
        default_missing_value = "true"
    )]
    pub verbatim_files_from: Vec<bool>,

    /// Undoes --verbatim-files-from for the FILEs after it.
    #[arg(
        long = "no-verbatim-files-from",
        action = ArgAction::Append,
        num_args = 0,
        default_missing_value = "true"
    )]
    pub no_verbatim_files_from: Vec<bool>,

    /// MEMBERs and --exclude patterns after this match from the start of a member name only
    /// (the default for MEMBERs).
    #[arg(long = "anchored", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub anchored: Vec<bool>,

    /// MEMBERs and --exclude patterns after this match at the start of the name or after any
    /// `/` in it (the default for --exclude).
    #[arg(long = "no-anchored", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_anchored: Vec<bool>,

    /// MEMBERs and --exclude patterns after this ignore case (ASCII letters).
    #[arg(long = "ignore-case", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub ignore_case: Vec<bool>,

    /// MEMBERs and --exclude patterns after this are case sensitive (the default).
    #[arg(long = "no-ignore-case", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_ignore_case: Vec<bool>,

    /// In MEMBER and --exclude patterns after this, `*`, `?` and `[...]` match `/` too (the
    /// default).
    #[arg(
        long = "wildcards-match-slash",
        action = ArgAction::Append,
        num_args = 0,
        default_missing_value = "true"
    )]
    pub wildcards_match_slash: Vec<bool>,

    /// In MEMBER and --exclude patterns after this, wildcards do not match `/`.
    #[arg(
        long = "no-wildcards-match-slash",
        action = ArgAction::Append,
        num_args = 0,
        default_missing_value = "true"
    )]
    pub no_wildcards_match_slash: Vec<bool>,

    /// A MEMBER or --exclude pattern after this that matches a directory also selects (or
    /// excludes) what is under it: the default.
    #[arg(long = "recursion", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub recursion: Vec<bool>,

    /// A MEMBER or --exclude pattern after this matches only the names it matches, not what
    /// is under a matched directory (`fastuntar -xf A --no-recursion dir` makes `dir` alone).
    #[arg(long = "no-recursion", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_recursion: Vec<bool>,

    /// Exclude the files of version control systems (CVS, RCS, SCCS, .git, .gitignore,
    /// .gitattributes, .gitmodules, .svn, .hg, .hgignore, .hgtags, .bzr, .bzrignore, .bzrtags,
    /// _darcs, {arch}, .arch-ids, ...) and what is under them, wherever they are, as bsdtar
    /// does (GNU tar 1.34 extracting leaves out only the entries themselves).
    #[arg(long = "exclude-vcs", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub exclude_vcs: Vec<bool>,

    /// Exclude backup and lock files (`*~`, `#*#`, `.#*`) wherever they are, as GNU tar's
    /// --exclude-backups (patterns like --exclude's).
    #[arg(long = "exclude-backups", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub exclude_backups: Vec<bool>,

    /// Begin at the member named NAME: the members before the first one it selects (NAME
    /// itself or a member under it, named as stored) are skipped. As GNU tar 1.34's -K,
    /// NAME then stays a MEMBER operand, the first one: without other operands only NAME and
    /// what is under it are extracted; with them, also the later members they select. NAME is
    /// a literal (no --wildcards, --ignore-case, --no-anchored, no unquoting); given twice,
    /// the last counts. Never matched: "Not found in archive", exit 2.
    // `--sta`: GNU tar's abbreviation, which --stall-timeout would make ambiguous here.
    #[arg(
        short = 'K',
        long = "starting-file",
        value_name = "NAME",
        allow_hyphen_values = true,
        aliases = ["sta"]
    )]
    pub starting_file: Vec<std::ffi::OsString>,

    /// With MEMBER operands: extract (or list) only the Nth occurrence in the archive of each
    /// name (1 without N), and stop reading once every name was found so often. A name found
    /// fewer times is reported ("Required occurrence not found in archive", exit 2).
    #[arg(long = "occurrence", value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub occurrence: Option<u64>,

    /// Only members whose modification time is DATE or later (older ones are skipped, as GNU
    /// tar's -N when extracting or listing). DATE is a file whose mtime counts when it starts
    /// with `/` or `.`, else a date: `2022-06-01`, `2022-06-01 12:00[:00[.5]] [UTC|+02:00]`,
    /// `@SECONDS`, `Jun 1 2022`, `3 days ago`, `yesterday` (local time without a zone).
    #[arg(
        short = 'N',
        long = "newer",
        visible_alias = "after-date",
        value_name = "DATE",
        allow_hyphen_values = true
    )]
    pub newer: Option<String>,

    /// The same as -N (GNU tar's -N also compares the change time, but only when creating).
    #[arg(
        long = "newer-mtime",
        value_name = "DATE",
        allow_hyphen_values = true,
        conflicts_with = "newer"
    )]
    pub newer_mtime: Option<String>,

    /// Everything above whose place matters, in command-line order (filled by `parse`).
    #[arg(skip)]
    pub ordered: Vec<Ordered>,

    /// Extract into DIR (created if missing). Given again, as in GNU tar, a relative DIR is
    /// taken from the one before (`-C /srv -C app` is /srv/app); several -C must all come
    /// before the MEMBER names.
    // `--dir`, `--dire`, `--direc`: GNU tar's abbreviations, which --direct-io would make
    // ambiguous here.
    #[arg(
        short = 'C',
        long = "directory",
        value_name = "DIR",
        action = ArgAction::Append,
        aliases = ["dir", "dire", "direc"]
    )]
    pub directory: Vec<PathBuf>,

    /// With -G, remove nothing that is on another filesystem than DIR's (GNU tar's option
    /// for creating archives, where it means staying on one filesystem).
    #[arg(long = "one-file-system")]
    pub one_file_system: bool,

    /// As GNU tar's -h when extracting: a symlink to a directory where a directory member lands
    /// stays, what is under it is extracted through it (inside DIR only, as with
    /// --keep-directory-symlink), and the directory it leads to gets the member's mode and
    /// time. One writer thread by default.
    #[arg(short = 'h', long = "dereference")]
    pub dereference: bool,

    /// Skip members matching PATTERN (shell wildcards, matched after any '/'; a matching
    /// directory excludes its contents). May be repeated.
    #[arg(long = "exclude", value_name = "PATTERN")]
    pub exclude: Vec<String>,

    /// Refused: members are always extracted inside DIR (a leading '/' is removed, a '..'
    /// component refused).
    #[arg(short = 'P', long = "absolute-names", hide = true)]
    pub absolute_names: bool,

    /// Read --exclude patterns from FILE, one per line (trailing blanks removed, blank lines
    /// skipped, as GNU tar reads them).
    #[arg(short = 'X', long = "exclude-from", value_name = "FILE")]
    pub exclude_from: Vec<PathBuf>,
}
