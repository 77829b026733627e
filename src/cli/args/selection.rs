//! Which members (GNU tar's "Local file selection" and "File name matching options"): MEMBER
//! operands, `-T`, `--exclude` and the switches that apply to the names and patterns after
//! them, `-K`, `-N`, `--occurrence`; and `-C`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ArgAction;

use crate::cli::Ordered;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Selection of members")]
pub struct Selection {
    /// The archive when -f is not given ('-': standard input), then MEMBERs to extract or list.
    ///
    /// The archive comes first unless -f names it (see -f). Then MEMBERs (with -f, every operand):
    /// extract or list only these members and what is under them, as `tar -xf ARCHIVE MEMBER...`
    /// does; names as stored in the archive, with C escapes (`\n`, `\141`) decoded as GNU tar does
    /// (see --no-unquote). A member counts for the first name, in command-line order, that selects
    /// it; a name that selects nothing is reported ("Not found in archive") and the run exits 2.
    // Under clap's "Arguments" heading, first, not after this group's options.
    #[arg(value_name = "ARCHIVE|MEMBER", help_heading = None::<&str>)]
    pub operands: Vec<OsString>,

    /// A MEMBER named NAME, also one that starts with `-`; never the archive.
    #[arg(long = "add-file", value_name = "NAME", allow_hyphen_values = true)]
    pub add_file: Vec<OsString>,

    /// Read MEMBER names from FILE, one per line ('-': standard input).
    ///
    /// Empty lines are skipped; `-` reads standard input when the archive is not read from it; with
    /// --null the names end with NUL. A line starting with `-` is refused (GNU tar reads it as an
    /// option) unless --null or --verbatim-files-from.
    #[arg(short = 'T', long = "files-from", value_name = "FILE")]
    pub files_from: Vec<PathBuf>,

    // The switches below apply to the names, files and patterns after them on the command
    // line, as in GNU tar (`cli::parse` puts everything in `ordered`): each is Append with no
    // value, so that clap keeps the place of every occurrence.
    /// -T FILEs after this hold NUL-terminated names (`find -print0`).
    #[arg(long = "null", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub null: Vec<bool>,

    /// Undoes --null for the --files-from FILEs after it.
    #[arg(long = "no-null", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_null: Vec<bool>,

    /// MEMBERs and --exclude patterns after this are shell patterns (--exclude's default).
    ///
    /// MEMBERs after this are shell patterns (`*`, `?`, `[...]`; they match `/` too), matched from
    /// the start of the member name; so are the --exclude patterns (their default). As in GNU tar,
    /// this switch and its --no- form, --null, --unquote, --verbatim-files-from, --anchored,
    /// --ignore-case, --wildcards-match-slash and --recursion apply to the names, files and
    /// patterns that follow them on the command line.
    #[arg(long = "wildcards", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub wildcards: Vec<bool>,

    /// MEMBERs (the default) and --exclude patterns after this are literal strings.
    #[arg(long = "no-wildcards", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_wildcards: Vec<bool>,

    /// MEMBER names after this have C escapes decoded (the default).
    ///
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

    /// Patterns after this match from the start of the name (the default for MEMBERs).
    ///
    /// MEMBERs and --exclude patterns after this match from the start of a member name only:
    /// MEMBERs are anchored by default, --exclude patterns are not.
    #[arg(long = "anchored", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub anchored: Vec<bool>,

    /// Patterns after this match after any `/` too (the default for --exclude).
    ///
    /// MEMBERs and --exclude patterns after this match at the start of the name or after any `/` in
    /// it.
    #[arg(long = "no-anchored", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_anchored: Vec<bool>,

    /// MEMBERs and --exclude patterns after this ignore case (ASCII letters).
    #[arg(long = "ignore-case", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub ignore_case: Vec<bool>,

    /// MEMBERs and --exclude patterns after this are case sensitive (the default).
    #[arg(long = "no-ignore-case", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_ignore_case: Vec<bool>,

    /// In patterns after this, `*`, `?` and `[...]` match `/` too (the default).
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

    /// A pattern after this that matches a directory matches what is under it (the default).
    #[arg(long = "recursion", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub recursion: Vec<bool>,

    /// A pattern after this that matches a directory matches it alone.
    ///
    /// A MEMBER or --exclude pattern after this matches only the names it matches, not what is
    /// under a matched directory (`fastuntar -xf A --no-recursion dir` makes `dir` alone).
    #[arg(long = "no-recursion", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub no_recursion: Vec<bool>,

    /// Exclude version control files and directories (.git, .svn, ...) and what is under them.
    ///
    /// CVS, RCS, SCCS, .git, .gitignore, .gitattributes, .gitmodules, .svn, .hg, .hgignore,
    /// .hgtags, .bzr, .bzrignore, .bzrtags, _darcs, {arch}, .arch-ids, =RELEASE-ID, =meta-update,
    /// =update, .cvsignore, wherever they are, and what is under them, as bsdtar does (GNU tar 1.34
    /// extracting leaves out only the entries themselves).
    #[arg(long = "exclude-vcs", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub exclude_vcs: Vec<bool>,

    /// Exclude backup and lock files (`*~`, `#*#`, `.#*`) wherever they are.
    ///
    /// As GNU tar's --exclude-backups (patterns like --exclude's): the entries themselves, so the
    /// files in a directory `old~/` are still extracted.
    #[arg(long = "exclude-backups", action = ArgAction::Append, num_args = 0, default_missing_value = "true")]
    pub exclude_backups: Vec<bool>,

    /// Begin at the member named NAME, skipping the members before it.
    ///
    /// The members before the first one NAME selects (NAME itself or a member under it, named as
    /// stored) are skipped. As GNU tar 1.34's -K, NAME then stays the first MEMBER operand: alone,
    /// only NAME and what is under it are extracted (`-K src/b` on `src/a src/b src/c`: `src/b`);
    /// with other MEMBERs, also their later members. NAME is a literal taken as given (no
    /// --wildcards, --ignore-case, --no-anchored, no unquoting; `-K dir/` matches nothing); given
    /// twice, the last counts. Never matched: "Not found in archive", exit 2.
    // `--sta`: GNU tar's abbreviation, which --stall-timeout would make ambiguous here.
    #[arg(
        short = 'K',
        long = "starting-file",
        value_name = "NAME",
        allow_hyphen_values = true,
        aliases = ["sta"]
    )]
    pub starting_file: Vec<std::ffi::OsString>,

    /// Only the Nth occurrence of each MEMBER in the archive (default 1).
    ///
    /// With MEMBER operands: extract (or list) only the Nth member each name selects (1 without N),
    /// and stop reading once every name was found that often. A name found fewer times is reported
    /// ("Required occurrence not found in archive", exit 2).
    #[arg(long = "occurrence", value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub occurrence: Option<u64>,

    /// Only members modified at DATE or later (a date, or a file's mtime).
    ///
    /// Older members are skipped when extracting and listing (the member's whole seconds count, as
    /// in GNU tar); older directories are still made as the members under them need them. DATE
    /// starting with `/` or `.` is a file whose mtime counts; else the forms of GNU's date reader
    /// that scripts write: `2022-06-01`, `20220601`, `2022-06-01 12:00[:00[.5]]`,
    /// `2022-06-01T12:00:00Z`, a zone (`UTC`, `+02:00`, `-0500`), `1 Jun 2022`, `June 1, 2022
    /// 12:00`, `@SECONDS`, `now`, `yesterday`, `3 days ago`, `2022-06-01 +1 week`; local time (TZ)
    /// without a zone. Another form is refused.
    ///
    /// With -v the date is said back as read (`Option --after-date: Treating date '3 days ago' as
    /// 2026-11-21 10:00:00.5`).
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

    /// Extract into DIR (created if missing).
    ///
    /// The default is the current directory. Given again, as in GNU tar, a relative DIR is taken
    /// from the one before (`-C /srv -C app` is /srv/app); several -C with one after a MEMBER name
    /// are refused (one -C after the names extracts them all into DIR).
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

    /// With -G, remove nothing that is on another filesystem than DIR's.
    ///
    /// With -G, what is mounted inside DIR is kept. Without -G it is accepted and ignored (GNU
    /// tar's option for creating archives, where it means staying on one filesystem).
    #[arg(long = "one-file-system")]
    pub one_file_system: bool,

    /// Extract through a symlink to a directory where a directory member lands (inside DIR).
    ///
    /// As GNU tar's -h when extracting: a symlink to a directory where a directory member lands
    /// stays, what is under it is extracted through it (inside DIR only, as with
    /// --keep-directory-symlink), and the directory it leads to gets the member's mode and
    /// time. One writer thread by default.
    #[arg(short = 'h', long = "dereference")]
    pub dereference: bool,

    /// Skip members matching PATTERN (repeatable).
    ///
    /// GNU tar's rules: shell wildcards that match `/`, unanchored (matched after any `/`), and a
    /// matching directory excludes its contents; see --wildcards and the switches after it for
    /// other rules. May be repeated.
    #[arg(long = "exclude", value_name = "PATTERN")]
    pub exclude: Vec<String>,

    /// Refused: members are always extracted inside DIR (a leading '/' is removed, a '..'
    /// component refused).
    #[arg(short = 'P', long = "absolute-names", hide = true)]
    pub absolute_names: bool,

    /// Read --exclude patterns from FILE, one per line.
    ///
    /// Trailing blanks are removed and blank lines skipped, as GNU tar reads them.
    #[arg(short = 'X', long = "exclude-from", value_name = "FILE")]
    pub exclude_from: Vec<PathBuf>,
}
