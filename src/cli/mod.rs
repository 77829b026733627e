//! Raw command-line flags (clap derive). Resolution into settings happens in `config.rs`.

pub mod operands;
pub mod resolve;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Parser, ValueEnum};

/// Parses the command line (after `traditional`), exiting as clap does on an error.
pub fn parse(argv: Vec<OsString>) -> Args {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Args::command().try_get_matches_from(argv).unwrap_or_else(|e| {
        if !e.use_stderr() {
            e.exit();
        }
        let _ = e.print();
        std::process::exit(usage_status(&e));
    });
    let mut args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // GNU tar: --xattrs, --xattrs-include and --xattrs-exclude turn restoring on, --no-xattrs
    // off; the last one given wins.
    let last = |id: &str| places(&matches, id).into_iter().max();
    let on = ["xattrs", "xattrs_include", "xattrs_exclude"].into_iter().filter_map(last).max();
    args.xattrs_on = on > last("no_xattrs");
    args.acls_on = last("acls") > last("no_acls");
    args.ordered = ordered(&matches, &args);
    args.checkpoints = checkpoints(&matches, &args);
    args.quote_chars_ordered = quote_chars(&matches, &args);
    args
}

/// GNU tar's exit status for a command line it cannot read: 64 (argp's EX_USAGE) for an
/// unknown or ambiguous option or one missing its value, as argp refuses them before tar sees
/// anything; 2 for a value tar itself refuses (`-H bogus`) or options that do not go together.
pub fn usage_status(e: &clap::Error) -> i32 {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let missing_value = e.kind() == ErrorKind::InvalidValue
        && matches!(e.get(ContextKind::InvalidValue), Some(ContextValue::String(v)) if v.is_empty());
    if e.kind() == ErrorKind::UnknownArgument || missing_value { 64 } else { 2 }
}

/// A command line (or TAR_OPTIONS) refused before anything is read, with its exit status.
#[derive(Debug)]
pub struct UsageError {
    pub message: String,
    pub status: i32,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for UsageError {
    /// A refusal of fastuntar's own: exit 2.
    fn from(message: String) -> UsageError {
        UsageError { message, status: 2 }
    }
}

/// An option whose place on the command line matters: GNU tar reads its options in order
/// (argp's ARGP_IN_ORDER), so a switch applies to the names, files and patterns after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ordered {
    /// An operand: the archive (the first, without -f) or a MEMBER.
    Operand(OsString),
    /// `--add-file NAME`: a MEMBER, even one starting with `-`, never the archive.
    AddFile(OsString),
    FilesFrom(PathBuf),
    Exclude(String),
    ExcludeFrom(PathBuf),
    Wildcards(bool),
    Null(bool),
    Unquote(bool),
    Verbatim(bool),
    Anchored(bool),
    IgnoreCase(bool),
    WildcardsMatchSlash(bool),
    Recursion(bool),
    ExcludeVcs,
    ExcludeBackups,
    /// `-C DIR`: GNU tar changes to it for what follows (a relative DIR from the one before).
    Directory(PathBuf),
}

/// Where the argument `id` stands on the command line, each time it is given (none when it is
/// not: an absent argument has its default's place).
fn places(matches: &clap::ArgMatches, id: &str) -> Vec<usize> {
    if matches.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
        return Vec::new();
    }
    matches.indices_of(id).map(Iterator::collect).unwrap_or_default()
}

/// `--checkpoint` and `--checkpoint-action`, in command-line order: GNU tar runs the actions
/// in the order given, a `--checkpoint=.N` among them (its dot action).
fn checkpoints(matches: &clap::ArgMatches, args: &Args) -> Vec<crate::report::checkpoint::Arg> {
    use crate::report::checkpoint::Arg;
    by_place(
        matches,
        [
            ("checkpoint", args.checkpoint.iter().cloned().map(Arg::Every).collect()),
            (
                "checkpoint_action",
                args.checkpoint_action.iter().cloned().map(Arg::Action).collect(),
            ),
        ],
    )
}

/// `--quote-chars` and `--no-quote-chars` in command-line order (GNU tar sets and clears the
/// characters as it reads them).
fn quote_chars(matches: &clap::ArgMatches, args: &Args) -> Vec<(bool, OsString)> {
    let tagged = |on: bool, v: &[OsString]| v.iter().map(|s| (on, s.clone())).collect();
    by_place(
        matches,
        [
            ("quote_chars", tagged(true, &args.quote_chars)),
            ("no_quote_chars", tagged(false, &args.no_quote_chars)),
        ],
    )
}

/// The values of several arguments (each id with its values, in the order clap kept them),
/// merged in the order they stand on the command line.
fn by_place<T, const N: usize>(matches: &clap::ArgMatches, lists: [(&str, Vec<T>); N]) -> Vec<T> {
    let mut all: Vec<(usize, T)> = lists
        .into_iter()
        .flat_map(|(id, values)| places(matches, id).into_iter().zip(values))
        .collect();
    all.sort_by_key(|(place, _)| *place);
    all.into_iter().map(|(_, v)| v).collect()
}

/// The options of `Ordered`, sorted by their place on the command line.
fn ordered(matches: &clap::ArgMatches, args: &Args) -> Vec<Ordered> {
    let at = |id: &str| places(matches, id);
    let mut all: Vec<(usize, Ordered)> = Vec::new();
    let mut values = |id: &str, make: &dyn Fn(usize) -> Ordered| {
        all.extend(at(id).into_iter().enumerate().map(|(i, place)| (place, make(i))));
    };
    values("operands", &|i| Ordered::Operand(args.operands[i].clone()));
    values("add_file", &|i| Ordered::AddFile(args.add_file[i].clone()));
    values("files_from", &|i| Ordered::FilesFrom(args.files_from[i].clone()));
    values("exclude", &|i| Ordered::Exclude(args.exclude[i].clone()));
    values("exclude_from", &|i| Ordered::ExcludeFrom(args.exclude_from[i].clone()));
    values("wildcards", &|_| Ordered::Wildcards(true));
    values("no_wildcards", &|_| Ordered::Wildcards(false));
    values("null", &|_| Ordered::Null(true));
    values("no_null", &|_| Ordered::Null(false));
    values("unquote", &|_| Ordered::Unquote(true));
    values("no_unquote", &|_| Ordered::Unquote(false));
    values("verbatim_files_from", &|_| Ordered::Verbatim(true));
    values("no_verbatim_files_from", &|_| Ordered::Verbatim(false));
    values("anchored", &|_| Ordered::Anchored(true));
    values("no_anchored", &|_| Ordered::Anchored(false));
    values("ignore_case", &|_| Ordered::IgnoreCase(true));
    values("no_ignore_case", &|_| Ordered::IgnoreCase(false));
    values("wildcards_match_slash", &|_| Ordered::WildcardsMatchSlash(true));
    values("no_wildcards_match_slash", &|_| Ordered::WildcardsMatchSlash(false));
    values("recursion", &|_| Ordered::Recursion(true));
    values("no_recursion", &|_| Ordered::Recursion(false));
    values("exclude_vcs", &|_| Ordered::ExcludeVcs);
    values("exclude_backups", &|_| Ordered::ExcludeBackups);
    values("directory", &|i| Ordered::Directory(args.directory[i].clone()));
    all.sort_by_key(|(place, _)| *place);
    all.into_iter().map(|(_, o)| o).collect()
}

#[derive(Parser, Debug)]
#[command(
    name = "fastuntar",
    version,
    // `-V` is GNU tar's --label; --version stays (below). `-h` is GNU tar's --dereference;
    // help is --help and -? (below), as in GNU tar.
    disable_version_flag = true,
    disable_help_flag = true,
    about = "Extract tar archives (plain, zstd, gzip, bzip2, xz, lz4) as fast as the disk allows, and safely.",
    after_help = "Examples:\n  \
        fastuntar -x snapshot.tar.zst -C /ledger --snapshot               restore a ledger snapshot\n  \
        fastuntar -xvf backup.tar.gz -C restore/                          like tar -xvf\n  \
        zstd -dc a.tar.zst | fastuntar -x - -C out                       read standard input\n  \
        fastuntar -tvf archive.tar.zst                                    list like tar -tvf\n  \
        fastuntar -xOf logs.tar.gz | grep ERROR                           the files' data on stdout\n\n\
        Exit status, as GNU tar: 0 success; 2 a member could not be extracted (each reported; the \
        run goes on) or a fatal error; 64 an unknown option.\n\n\
        Open files: fastuntar raises its soft open-file limit (ulimit -n) to the hard limit at start-up \
        and keeps its directory cache and files in flight within it; it works down to 64.",
    // As GNU tar (argp): a long option may be shortened to any prefix that names one option
    // (`--strip=1`, `--numeric`); an ambiguous one is refused. No long option GNU tar 1.34 has
    // and fastuntar lacks is the prefix of one of fastuntar's (checked against `tar --help`).
    infer_long_args = true,
    // As GNU tar: an option given again is no error; the last value wins (`-p -p`, a wrapper's
    // `--strip-components 1` and the user's `--strip-components 2`). Lists (`--exclude`, names)
    // still collect every value.
    args_override_self = true
)]
pub struct Args {
    /// Extract the archive (the default action).
    #[arg(short = 'x', long = "extract", alias = "get")]
    pub extract: bool,

    /// List the members instead of extracting (with -v, like `tar -tvf`).
    #[arg(short = 't', long = "list", conflicts_with = "extract")]
    pub list: bool,

    /// Extract files to standard output: the data of every member that would be extracted as
    /// a regular file, in archive order, and nothing else (nothing is created, -C is not used,
    /// -v names go to standard error). Like `tar -xO`.
    #[arg(short = 'O', long = "to-stdout", conflicts_with = "list")]
    pub to_stdout: bool,

    /// Pipe the data of every member that would be extracted as a regular file into its own
    /// run of `/bin/sh -c COMMAND`, as GNU tar's --to-command, with the member described in
    /// the environment: TAR_FILENAME, TAR_REALNAME, TAR_SIZE, TAR_MODE, TAR_MTIME, TAR_UID,
    /// TAR_GID, TAR_UNAME, TAR_GNAME, TAR_FILETYPE, TAR_FORMAT, TAR_ARCHIVE, TAR_VOLUME,
    /// TAR_BLOCKING_FACTOR, TAR_VERSION, TAR_ATIME, TAR_CTIME. A command that exits non-zero is
    /// reported ("PID: Child returned status N") and the run exits 2 at the end; one that
    /// stops reading gets no more of that member. Nothing is created on disk.
    #[arg(long = "to-command", value_name = "COMMAND", conflicts_with_all = ["list", "to_stdout"])]
    pub to_command: Option<String>,

    /// With --to-command, a command's non-zero exit status is not an error.
    #[arg(long = "ignore-command-error", overrides_with = "no_ignore_command_error")]
    pub ignore_command_error: bool,

    /// With --to-command, a command's non-zero exit status is an error (the default).
    #[arg(long = "no-ignore-command-error", overrides_with = "ignore_command_error")]
    pub no_ignore_command_error: bool,

    /// The archive to read ('-' for standard input; an http:// or https:// URL is downloaded
    /// and extracted as it arrives).
    #[arg(short = 'f', long = "file", value_name = "ARCHIVE")]
    pub file: Option<PathBuf>,

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

    /// Ask before extracting each member (`extract 'NAME'?`, answered on standard input, or
    /// on /dev/tty when standard input is the archive): `y` extracts it, anything else skips
    /// it, as GNU tar's -w.
    #[arg(short = 'w', long = "interactive", visible_alias = "confirmation")]
    pub interactive: bool,

    /// Show each listed member's block in the archive (`block 7: NAME`), and the zero blocks
    /// and end of input met (`block 9: ** Block of NULs **`), as GNU tar's -R.
    #[arg(short = 'R', long = "block-number")]
    pub block_number: bool,

    /// Write the listing (-t, -v names, `Renaming`/`Deleting` lines, checkpoint dots) to FILE
    /// instead of stdout, as GNU tar's --index-file: FILE is created (or emptied) first; a
    /// symlink as FILE is refused (but /dev/stdout, /dev/stderr, /dev/fd/N).
    #[arg(long = "index-file", value_name = "FILE")]
    pub index_file: Option<PathBuf>,

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

    /// Keep a symlink to a directory where the archive has that directory (`lib -> usr/lib`
    /// and a member `lib/`), and extract what is under it through the symlink, as GNU tar's
    /// --keep-directory-symlink. Followed only inside DIR: an absolute or `..` target is taken
    /// as if DIR were `/`.
    #[arg(long = "keep-directory-symlink")]
    pub keep_directory_symlink: bool,

    /// Say "DIR: Omitting" for each directory member that is not extracted or listed (not
    /// selected, excluded or older than -N's DATE).
    #[arg(long = "show-omitted-dirs")]
    pub show_omitted_dirs: bool,

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

    /// Print each member name as it is extracted, and the end-of-run summary on standard
    /// error (said without -v only on a terminal).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,

    /// Refuse to replace existing files (report them, "File exists", go on, and exit 2, as
    /// GNU tar). An existing directory is kept as it is, its metadata too.
    #[arg(short = 'k', long = "keep-old-files", conflicts_with = "skip_old_files")]
    pub keep_old_files: bool,

    /// Like -k, without a word: members whose path exists are skipped silently (with -v, each
    /// is named) and the exit status stays 0.
    #[arg(long = "skip-old-files")]
    pub skip_old_files: bool,

    /// Keep an existing file, symlink or other non-directory whose modification time is the
    /// same as or later than its archive copy's ("Current 'NAME' is newer or same age", exit
    /// status unchanged) and replace the older ones. The time is the existing entry's own
    /// (a symlink is not followed), read when the member is created. An existing directory is
    /// never newer: a directory member removes it when empty (and creates it anew), otherwise
    /// leaves it as it is, metadata too; a file member replaces an empty one. As GNU tar 1.34.
    #[arg(
        long = "keep-newer-files",
        conflicts_with_all = ["keep_old_files", "skip_old_files", "overwrite", "no_overwrite_dir"]
    )]
    pub keep_newer_files: bool,

    /// Keep the mode and owner of directories that exist already, made before the run or
    /// earlier in it (the member's modification time is still set, unless -m), instead of
    /// the member's.
    #[arg(
        long = "no-overwrite-dir",
        conflicts_with_all = ["keep_old_files", "skip_old_files", "overwrite"],
        overrides_with = "overwrite_dir"
    )]
    pub no_overwrite_dir: bool,

    /// Remove what is at a member's path before extracting it, as GNU tar's -U: the same as
    /// the default for files, links and FIFOs (fastuntar never writes into an existing file);
    /// a directory member removes an existing empty directory and makes it anew, and leaves a
    /// non-empty one as it is, metadata too (reported: "Directory not empty", exit 2).
    #[arg(
        short = 'U',
        long = "unlink-first",
        conflicts_with_all = ["keep_old_files", "skip_old_files", "keep_newer_files", "no_overwrite_dir", "overwrite"]
    )]
    pub unlink_first: bool,

    /// An existing directory in a member's way is removed with everything in it (symlinks in
    /// it are removed, never followed), as GNU tar's --recursive-unlink: a directory member
    /// empties what was there, a file member replaces a whole tree. DIR itself is never
    /// removed.
    #[arg(long = "recursive-unlink")]
    pub recursive_unlink: bool,

    /// Rename what a member would replace instead of removing it, as GNU tar: CONTROL
    /// `simple`/`never` (NAME~), `numbered`/`t` (NAME.~N~), `existing`/`nil` (numbered where
    /// numbered backups exist, else simple; the default, or $VERSION_CONTROL), `none`/`off`.
    /// Directories are not backed up. With -v each is said: "Renaming 'a' to 'a~'".
    #[arg(long = "backup", value_name = "CONTROL", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub backup: Option<String>,

    /// The suffix of simple backups (default $SIMPLE_BACKUP_SUFFIX, else `~`); turns
    /// --backup on.
    #[arg(long = "suffix", value_name = "SUFFIX")]
    pub suffix: Option<String>,

    /// Give existing directories the member's mode, owner and time (the default).
    #[arg(long = "overwrite-dir", overrides_with = "no_overwrite_dir")]
    pub overwrite_dir: bool,

    /// Extract everything under DIR (relative to -C), or without DIR under a directory named
    /// after the archive without its .tar or compression suffix (.tar, .tar.gz, .tgz, .tar.zst,
    /// .tzst, .tar.xz, .txz, .tar.bz2, .tbz2, .tar.lz4, ...). Members already under DIR
    /// (the name DIR itself or starting with DIR/, after --strip-components) are not prefixed
    /// twice; hard-link targets likewise. Names shown by -v and -t are the archive's.
    #[arg(
        long = "one-top-level",
        value_name = "DIR",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub one_top_level: Option<OsString>,

    /// At the end, print "Total bytes read: N (SIZE, RATE/s)" on standard error, as GNU tar:
    /// N is the archive's bytes as tar reads them (its decompressed stream, in whole records
    /// of --blocking-factor, up to the one holding the end marker), then the summary line.
    /// --totals=SIGNAL is refused.
    #[arg(
        long = "totals",
        value_name = "SIGNAL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub totals: Option<String>,

    /// Rename members as they are extracted with a sed expression, `s/REGEX/REPLACEMENT/FLAGS`
    /// (POSIX basic regexes; flags g, i, x for extended, a number N for the Nth match, r/R,
    /// s/S, h/H to apply to member names, symlink targets, hard link targets; `\1`..`\9`, `&`,
    /// `\U` `\L` `\u` `\l` `\E`), several separated by `;`, as GNU tar's --transform (also
    /// --xform). MEMBERs and --exclude match the names as stored; -t and -v show them unless
    /// --show-transformed-names. May be repeated: each applies to the result of the last.
    #[arg(long = "transform", visible_alias = "xform", value_name = "EXPRESSION")]
    pub transform: Vec<String>,

    /// With --transform, -t and -v show the names as extracted, not as stored. GNU tar 1.34's
    /// --show-stored-names (meant for creating archives) does the same when reading, and is
    /// accepted as another spelling.
    #[arg(long = "show-transformed-names", alias = "show-stored-names", action = ArgAction::Count)]
    pub show_transformed_names: u8,

    /// Turn a class of warnings off (`no-KEYWORD`) or on, as GNU tar's --warning: timestamp
    /// (files dated in the future or before 1970), ignore-newer (--keep-newer-files),
    /// existing-file (--skip-old-files -v), unknown-cast (unknown member types),
    /// contiguous-cast (type 7 files), all, none. GNU tar's other keywords are accepted and
    /// change nothing here. May be repeated.
    #[arg(long = "warning", value_name = "KEYWORD")]
    pub warning: Vec<String>,

    /// Run the --checkpoint-action ACTIONs (by default "Read checkpoint N" on standard error)
    /// at every Nth record read (default 10), as GNU tar: a record is --blocking-factor blocks
    /// of the tar stream (decompressed), 10240 bytes by default. --checkpoint=.N adds the dot
    /// action. Printed with -q too; no progress bar is drawn over them.
    #[arg(
        long = "checkpoint",
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "10",
        action = ArgAction::Append
    )]
    pub checkpoint: Vec<String>,

    /// At each checkpoint (every 10 records without --checkpoint): '.' or 'dot' (a dot on
    /// standard output, on standard error with -O), 'bell' (to /dev/tty), 'echo' or
    /// 'echo=STRING' (on standard error), 'ttyout=STRING' (to /dev/tty), 'sleep=SECONDS',
    /// 'exec=COMMAND' (/bin/sh -c COMMAND, with $TAR_CHECKPOINT, $TAR_ARCHIVE, ...),
    /// 'totals'. STRING may hold %u (the number), %s ("read"), %d (seconds), %T, %t, %*, %c,
    /// as in GNU tar. Repeat for several actions, run in order.
    #[arg(long = "checkpoint-action", value_name = "ACTION", action = ArgAction::Append)]
    pub checkpoint_action: Vec<String>,

    /// `--checkpoint` and `--checkpoint-action` in command-line order (filled by `parse`).
    #[arg(skip)]
    pub checkpoints: Vec<crate::report::checkpoint::Arg>,

    /// Do not restore modification times: everything extracted keeps the time it was
    /// created (and no time is set, which saves a system call per member).
    #[arg(short = 'm', long = "touch")]
    pub touch: bool,

    /// Restore a GNU incremental archive (made with `tar -g SNAPSHOT`): before each directory,
    /// rename the directories its list says were renamed and remove what the directory holds
    /// that its list does not name (recursively; named with -v), so that extracting the
    /// levels in order gives the tree of the last one. With -t -vv, each directory's list is
    /// shown.
    #[arg(short = 'G', long = "incremental")]
    pub incremental: bool,

    /// As -G (GNU tar's snapshot FILE is not read when extracting or listing: /dev/null does).
    #[arg(
        short = 'g',
        long = "listed-incremental",
        value_name = "FILE",
        conflicts_with_all = ["newer", "newer_mtime"]
    )]
    pub listed_incremental: Option<PathBuf>,

    /// Print the version.
    #[arg(long = "version", action = ArgAction::Version)]
    pub version: Option<bool>,

    /// Read the archive only if its volume label (`tar -V LABEL -c`: a GNU volume header, or
    /// a POSIX archive's GNU.volume.label) matches PATTERN (shell wildcards, as fnmatch(3)
    /// without flags); otherwise stop before the first member: "Archive not labeled to match
    /// 'PATTERN'" or "Volume 'LABEL' does not match 'PATTERN'" (exit 2), as GNU tar.
    #[arg(short = 'V', long = "label", value_name = "PATTERN")]
    pub label: Option<String>,

    /// GNU tar's `--level=NUMBER` (the dump level when creating with -g): checked and
    /// ignored, as GNU tar does when reading.
    #[arg(long = "level", value_name = "NUMBER", allow_hyphen_values = true, hide = true)]
    pub level: Option<String>,

    /// With -G, remove nothing that is on another filesystem than DIR's (GNU tar's option
    /// for creating archives, where it means staying on one filesystem).
    #[arg(long = "one-file-system")]
    pub one_file_system: bool,

    /// Restore extended attributes from the archive's PAX records (SCHILY.xattr, and bsdtar's
    /// LIBARCHIVE.xattr): without --xattrs-include only the user.* namespace, as GNU tar.
    /// Set on each file through its own descriptor after its data and owner. The last of
    /// --xattrs, --no-xattrs and --xattrs-include/--xattrs-exclude decides.
    #[arg(long = "xattrs", action = ArgAction::Count)]
    pub xattrs: u8,

    /// Do not restore extended attributes (the default).
    #[arg(long = "no-xattrs", action = ArgAction::Count)]
    pub no_xattrs: u8,

    /// Do not restore SELinux contexts: what fastuntar always does (GNU tar's default too;
    /// accepted for scripts that say so).
    #[arg(long = "no-selinux", hide = true)]
    pub no_selinux: bool,

    /// GNU tar's options for creating an archive that have no meaning when reading one: GNU
    /// tar accepts them with -x and -t and ignores them, and so does fastuntar, so that a
    /// TAR_OPTIONS or a wrapper's options written for both work (`--sort=name --owner=0
    /// --mtime=@0` for reproducible archives). These take no value.
    #[arg(
        long = "check-device",
        aliases = [ "no-check-device", "check-links",
            "hard-dereference", "exclude-caches", "exclude-caches-all",
            "exclude-caches-under", "exclude-vcs-ignores", "ignore-failed-read", "old-archive",
            "portability", "posix", "remove-files", "restrict",
        ],
        // GNU tar's -l is --check-links.
        short_alias = 'l',
        action = ArgAction::Count,
        hide = true
    )]
    pub creation_switches: u8,

    /// As GNU tar's -h when extracting: a symlink to a directory where a directory member lands
    /// stays, what is under it is extracted through it (inside DIR only, as with
    /// --keep-directory-symlink), and the directory it leads to gets the member's mode and
    /// time. One writer thread by default.
    #[arg(short = 'h', long = "dereference")]
    pub dereference: bool,

    /// The archive format, for creating one (v7, oldgnu, ustar, gnu, posix, pax).
    /// When reading, as in GNU tar, a known FORMAT changes nothing (each header says its own)
    /// and an unknown one is refused.
    #[arg(
        short = 'H',
        long = "format",
        value_name = "FORMAT",
        value_parser = ["v7", "oldgnu", "ustar", "gnu", "posix", "pax"]
    )]
    pub format: Option<String>,

    /// Print help (-h is --dereference, as in GNU tar).
    #[arg(short = '?', long = "help", action = ArgAction::Help)]
    pub help: Option<bool>,

    /// GNU tar's -W (--verify, for writing): refused with one line, as GNU tar refuses it
    /// with -x.
    #[arg(short = 'W', long = "verify", hide = true)]
    pub verify: bool,

    /// GNU tar's multi-volume options (-M, -L, -F): refused with one line saying so.
    #[arg(short = 'M', long = "multi-volume", hide = true)]
    pub multi_volume: bool,
    #[arg(short = 'L', long = "tape-length", value_name = "N", hide = true)]
    pub tape_length: Option<String>,
    #[arg(
        short = 'F',
        long = "info-script",
        alias = "new-volume-script",
        value_name = "COMMAND",
        hide = true
    )]
    pub info_script: Option<String>,

    /// GNU tar's `--mtime=DATE` (for creating), ignored as above (the date is not read).
    #[arg(long = "mtime", value_name = "DATE", hide = true)]
    pub mtime: Option<String>,

    /// GNU tar's `--clamp-mtime` (for creating), ignored as above; as GNU tar, only with
    /// --mtime.
    #[arg(long = "clamp-mtime", requires = "mtime", hide = true)]
    pub clamp_mtime: bool,

    /// GNU tar's `--atime-preserve[=METHOD]` (for creating), ignored as above.
    #[arg(
        long = "atime-preserve",
        value_name = "METHOD",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "replace",
        hide = true
    )]
    pub atime_preserve: Option<String>,

    /// GNU tar's options for creating an archive that take a value, ignored as above.
    #[arg(
        long = "owner",
        aliases = [
            "group", "mode", "owner-map", "group-map", "sort",
            "hole-detection", "sparse-version", "exclude-tag", "exclude-tag-all",
            "exclude-tag-under", "exclude-ignore", "exclude-ignore-recursive", "rsh-command",
            "rmt-command",
        ],
        value_name = "VALUE",
        action = ArgAction::Append,
        hide = true
    )]
    pub creation_values: Vec<String>,

    /// Restore only the attributes whose name matches PATTERN (fnmatch wildcards over the
    /// whole name, e.g. 'security.capability' or 'user.*'); implies --xattrs. May be
    /// repeated: an attribute matching any of them is restored.
    #[arg(long = "xattrs-include", value_name = "PATTERN")]
    pub xattrs_include: Vec<String>,

    /// Do not restore the attributes whose name matches PATTERN (as --xattrs-include; wins
    /// over it); implies --xattrs. May be repeated.
    #[arg(long = "xattrs-exclude", value_name = "PATTERN")]
    pub xattrs_exclude: Vec<String>,

    /// Whether the last of the xattr flags turns restoring on (set by `parse`, from where
    /// each flag stands on the command line).
    #[arg(skip)]
    pub xattrs_on: bool,

    /// Restore POSIX ACLs from the archive's PAX records (SCHILY.acl.access, and
    /// SCHILY.acl.default for directories), as GNU tar's --acls: names are looked up here, as
    /// setfacl does. -tv marks members with ACLs `+`. The last of --acls and --no-acls decides.
    #[arg(long = "acls", action = ArgAction::Count)]
    pub acls: u8,

    /// Do not restore ACLs (the default).
    #[arg(long = "no-acls", action = ArgAction::Count)]
    pub no_acls: u8,

    /// Whether the last of --acls and --no-acls is --acls (set by `parse`).
    #[arg(skip)]
    pub acls_on: bool,

    /// Skip members matching PATTERN (shell wildcards, matched after any '/'; a matching
    /// directory excludes its contents). May be repeated.
    #[arg(long = "exclude", value_name = "PATTERN")]
    pub exclude: Vec<String>,

    /// Replace existing files (the default): an existing file is removed and created anew,
    /// never written through in place or through a link (GNU tar's --overwrite writes into
    /// it).
    #[arg(long = "overwrite", conflicts_with_all = ["keep_old_files", "skip_old_files"])]
    pub overwrite: bool,

    /// GNU tar's operations that write or compare archives (-c, -r, -u, -A, --delete, -d,
    /// --test-label): refused with one line saying so, not clap's "unexpected argument".
    #[arg(short = 'c', long = "create", hide = true)]
    pub create: bool,
    #[arg(short = 'r', long = "append", hide = true)]
    pub append: bool,
    #[arg(short = 'u', long = "update", hide = true)]
    pub update: bool,
    #[arg(short = 'A', long = "catenate", alias = "concatenate", hide = true)]
    pub catenate: bool,
    #[arg(long = "delete", hide = true)]
    pub delete: bool,
    #[arg(short = 'd', long = "diff", alias = "compare", hide = true)]
    pub diff: bool,
    #[arg(long = "test-label", hide = true)]
    pub test_label: bool,

    /// Refused: members are always extracted inside DIR (a leading '/' is removed, a '..'
    /// component refused).
    #[arg(short = 'P', long = "absolute-names", hide = true)]
    pub absolute_names: bool,

    /// Accepted and without effect when reading, as in GNU tar: -s/--same-order,
    /// -B/--read-full-records, -b/--blocking-factor N, --record-size N, --force-local (the
    /// record size counts only for --totals), -S/--sparse (sparse members are always made
    /// sparse), -n/--seek, --no-seek, --no-auto-compress (the data decides the format).
    #[arg(
        short = 's',
        long = "same-order",
        short_aliases = ['B', 'S', 'n'],
        aliases = [
            "preserve-order",
            "read-full-records",
            "force-local",
            "sparse",
            "seek",
            "no-seek",
            "no-auto-compress",
        ],
        action = ArgAction::Count
    )]
    pub no_effect: u8,

    /// Give directories their mode and time at the end of the run, as GNU tar's option: a
    /// member under a directory the archive made read-only earlier still extracts, and a
    /// directory whose members come after others (`a a/b a/c a/b/f`) keeps its archived
    /// time. By default a directory gets them once the archive has left it, as in GNU tar; a
    /// directory of an incremental archive (`tar -g`) turns this on, as there.
    #[arg(long = "delay-directory-restore", overrides_with = "no_delay_directory_restore")]
    pub delay_directory_restore: bool,

    /// A directory gets its mode and time once the archive has left it (the default).
    #[arg(long = "no-delay-directory-restore", overrides_with = "delay_directory_restore")]
    pub no_delay_directory_restore: bool,

    #[arg(short = 'b', long = "blocking-factor", value_name = "N", hide = true)]
    pub blocking: Option<String>,

    #[arg(long = "record-size", value_name = "SIZE", hide = true, conflicts_with = "blocking")]
    pub record_size: Option<String>,

    /// Read on past zero blocks, to the end of the input: for archives concatenated with
    /// `cat a.tar b.tar` (whose first end marker would otherwise end the archive).
    #[arg(short = 'i', long = "ignore-zeros")]
    pub ignore_zeros: bool,

    /// Read --exclude patterns from FILE, one per line (trailing blanks removed, blank lines
    /// skipped, as GNU tar reads them).
    #[arg(short = 'X', long = "exclude-from", value_name = "FILE")]
    pub exclude_from: Vec<PathBuf>,

    /// Strip N leading components from member names.
    #[arg(long = "strip-components", value_name = "N", default_value_t = 0)]
    pub strip_components: usize,

    /// Restore owner and group from the archive (the default as root): the member's user and
    /// group names where they exist on this system, else its numeric ids (as GNU tar).
    #[arg(long = "same-owner", overrides_with = "no_same_owner")]
    pub same_owner: bool,

    /// Use the archive's numeric user and group ids, never its names: for --same-owner, and
    /// for the owner column of -tv.
    #[arg(long = "numeric-owner")]
    pub numeric_owner: bool,

    /// In -tv listings, times with seconds (and nanoseconds where the archive has them), as
    /// GNU tar's --full-time.
    #[arg(long = "full-time")]
    pub full_time: bool,

    /// Times in -tv listings and in warnings in UTC, not local time.
    #[arg(long = "utc")]
    pub utc: bool,

    /// Do not restore ownership (the default for users other than root): files belong to
    /// the extracting user.
    #[arg(short = 'o', long = "no-same-owner", overrides_with = "same_owner")]
    pub no_same_owner: bool,

    /// Restore permission bits exactly, set-id bits included (the default as root; otherwise
    /// the umask applies and set-id bits are dropped, as in tar).
    #[arg(
        short = 'p',
        long = "preserve-permissions",
        alias = "same-permissions",
        overrides_with = "no_same_permissions"
    )]
    pub preserve_permissions: bool,

    /// Apply the umask and drop set-id bits, also as root.
    #[arg(long = "no-same-permissions", overrides_with = "preserve_permissions")]
    pub no_same_permissions: bool,

    /// Accepted for tar's habits, as are -z, -j, -J, --gzip, --bzip2, --xz, --zstd and --lz4:
    /// the format is always found from the archive's first bytes, whatever these say.
    #[arg(
        short = 'a',
        long = "auto-compress",
        short_aliases = ['z', 'j', 'J'],
        aliases = ["gzip", "gunzip", "ungzip", "bzip2", "xz", "zstd", "lz4"],
        action = ArgAction::Count
    )]
    pub compression_flag: u8,

    /// Decompress with PROG first: the archive is piped through `PROG -d` (PROG may carry
    /// arguments, split at spaces), for formats fastuntar does not read itself.
    #[arg(short = 'I', long = "use-compress-program", value_name = "PROG")]
    pub compress_program: Option<String>,

    /// Short for -I lzip (also --lzma: -I lzma, --lzop: -I lzop, -Z/--uncompress: -I gzip,
    /// which reads compress's .Z).
    #[arg(long = "lzip", conflicts_with = "compress_program")]
    pub lzip: bool,

    #[arg(long = "lzma", hide = true, conflicts_with_all = ["compress_program", "lzip"])]
    pub lzma: bool,

    #[arg(long = "lzop", hide = true, conflicts_with_all = ["compress_program", "lzip", "lzma"])]
    pub lzop: bool,

    #[arg(
        short = 'Z',
        long = "uncompress",
        alias = "compress",
        hide = true,
        conflicts_with_all = ["compress_program", "lzip", "lzma", "lzop"]
    )]
    pub uncompress: bool,

    /// Write files of at least --direct-io-threshold bytes with O_DIRECT: `always` (also
    /// `--direct-io` alone), `never` (also `--no-direct-io`), or `auto` (the default): direct
    /// where it was measured to be faster, that is on ext4, XFS, btrfs without data checksums
    /// and FUSE when the archive is at least 1 GiB or of unknown size (a pipe); buffered on
    /// tmpfs, ramfs, btrfs with checksums and other filesystems. `-v` and `--json` say what was
    /// chosen.
    #[arg(
        long = "direct-io",
        value_name = "WHEN",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always",
        overrides_with = "no_direct_io"
    )]
    pub direct_io: Option<DirectIo>,

    /// Write every file through the page cache (`--direct-io=never`).
    #[arg(long = "no-direct-io", overrides_with = "direct_io")]
    pub no_direct_io: bool,

    /// Smallest file written with O_DIRECT (default 64K).
    #[arg(long = "direct-io-threshold", value_name = "SIZE")]
    pub direct_io_threshold: Option<String>,

    /// Memory for buffers: file data in flight and, when a zstd archive meets more than one
    /// decoder thread, decoded frames waiting to be read (default: 64M of file data, plus 32M
    /// of frames per decoder thread past the first, what the third and later add kept within
    /// an eighth of the machine's memory; when listing or with -O, the frames' only, at least 64M). A SIZE
    /// given is the total, divided between the two.
    #[arg(long = "memory", value_name = "SIZE")]
    pub memory: Option<String>,

    /// Threads that decode a multi-frame zstd archive (default: the CPUs this process may run
    /// on, one fewer when extracting to disk, for the writer); 1 keeps to one streaming decoder. The
    /// blocks of a multi-block xz stream (`xz -T`) too, when the decoded frames' memory is at
    /// least 128M. Other formats, single-frame zstd and single-block xz decode on one.
    #[arg(long = "threads", value_name = "N")]
    pub threads: Option<usize>,

    /// Threads that create files (default: the CPUs this process may run on, at most 8).
    /// Files of different directories are created in parallel;
    /// 1 writes everything from one thread.
    #[arg(long = "writer-threads", value_name = "N")]
    pub writer_threads: Option<usize>,

    /// Start writing the extracted data back to the disk each time SIZE more has been
    /// written (syncfs from a thread of its own), so the data is durable sooner and a final
    /// sync finds little left to do; 0 turns it off.
    // 256M: extract+sync of 100,000 small files, medians of 3 interleaved runs, 3.29 -> 2.95 s
    // on the virtio disk and 3.97 -> 3.43 s on the RAM-backed ext4 (64M: 3.09 / 3.66 s); the
    // 4 GB snapshot written buffered 4.70 -> 4.02 s, with --direct-io 2.59 / 2.69 s (no gain,
    // within noise). Extraction alone takes longer (2.2 -> 2.8 s on the disk): it ends once
    // the last syncfs has.
    #[arg(long = "writeback-every", value_name = "SIZE", default_value = "256M")]
    pub writeback_every: String,

    /// Writer backend.
    #[arg(long = "io", value_enum, default_value_t = IoBackend::Auto)]
    pub io: IoBackend,

    /// Accept only the ledger snapshot layout (version, snapshots/, accounts/): regular files
    /// and directories, files 0644, directories 0755; anything else stops the run.
    #[arg(long = "snapshot")]
    pub snapshot: bool,

    /// Stop before the member that would exceed N members (snapshot mode: 5000000).
    #[arg(long = "max-files", value_name = "N")]
    pub max_files: Option<u64>,

    /// Stop before the member that would take the total of file sizes over SIZE (snapshot
    /// mode: 4T).
    #[arg(long = "max-bytes", value_name = "SIZE")]
    pub max_bytes: Option<String>,

    /// Stop at a file member larger than SIZE.
    #[arg(long = "max-member-size", value_name = "SIZE")]
    pub max_member_size: Option<String>,

    /// Largest zstd window to accept (memory the decoder may need): a power of two up to 2G.
    /// The default is `zstd -d`'s own; archives made with `zstd --long=31` need 2G.
    // 128M, as zstd's CLI (it refuses larger windows without --long=31 or --memory): a 75 KB
    // frame declaring 2 GiB drove RSS to 2 GiB under the old 2G default. Agave's frames
    // declare 512 KiB (level 1) to 2 MiB (level 3).
    #[arg(long = "max-window", value_name = "SIZE", default_value = "128M")]
    pub max_window: String,

    /// When extraction ends, make everything durable (syncfs) and report how long that took.
    #[arg(long = "sync")]
    pub sync: bool,

    /// Resume an interrupted extraction into DIR from its last resume point (the default when
    /// DIR holds one that matches the archive and options); without one, start from the
    /// beginning. A run that cannot write resume points (standard input, -k, --backup, ...)
    /// is refused.
    #[arg(long = "resume", overrides_with = "no_resume")]
    pub resume: bool,

    /// Remove any resume point in DIR and write none: extract from the beginning.
    #[arg(long = "no-resume", overrides_with = "resume")]
    pub no_resume: bool,

    /// For the test suite: SIGKILL this process at the N-th EVENT (member, published,
    /// written, synced, renamed, stamp, final-stamp, end).
    #[arg(long = "debug-kill-at", value_name = "EVENT:N", hide = true)]
    pub debug_kill_at: Option<String>,

    /// For the test suite: act as a kernel whose io_uring is refused (`refused`: as
    /// kernel.io_uring_disabled=2) or lacks IORING_OP_OPENAT (`no-openat`: a 5.5 kernel).
    #[arg(long = "debug-uring", value_enum, value_name = "KERNEL", hide = true)]
    pub debug_uring: Option<DebugUring>,

    /// Print the end-of-run summary as one JSON object on standard output.
    #[arg(long = "json")]
    pub json: bool,

    /// Print nothing but errors (no progress, no summary).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// For an archive read from a URL: the most connections fetching its pieces in parallel
    /// from each source, when it answers ranges and gives a length and an ETag or
    /// Last-Modified (default 8, at most 16; otherwise one). Each source starts with one and
    /// is given more while they raise the rate.
    #[arg(long = "connections", value_name = "N")]
    pub connections: Option<usize>,

    /// For a URL: another source of the same archive (repeatable). Pieces are fetched from
    /// every source at once; a source that serves another archive, or fails, is dropped.
    #[arg(long = "mirror", value_name = "URL")]
    pub mirror: Vec<String>,

    /// For a URL: more sources of the same archive, one URL a line (`#` starts a comment).
    #[arg(long = "mirrors", value_name = "FILE")]
    pub mirrors: Option<PathBuf>,

    /// For a URL: download at most RATE bytes a second, all connections together (curl's
    /// spelling: 500K, 50M, 1G, 1024-based).
    #[arg(long = "limit-rate", value_name = "RATE")]
    pub limit_rate: Option<String>,

    /// For a URL: a connection that brings no byte for SECONDS is retried (default 30).
    #[arg(long = "stall-timeout", value_name = "SECONDS")]
    pub stall_timeout: Option<u64>,

    /// For a URL: failures in a row, without a byte between them, before a connection gives up
    /// (default 64, about an hour of waits: at once, then 1, 2, 4 ... 60 s).
    #[arg(long = "retries", value_name = "N")]
    pub retries: Option<u32>,

    /// For an https URL: also trust the CA certificates (PEM) in FILE, besides the system's.
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// For a URL: keep a copy of the downloaded archive in FILE (written as FILE.incomplete,
    /// renamed to FILE once the run ended well and the copy is complete).
    #[arg(long = "keep-archive", value_name = "FILE")]
    pub keep_archive: Option<PathBuf>,

    /// For a URL: the SHA-256 the downloaded bytes must have (sha256:HEX); a mismatch is found
    /// at the end, when the tree has been extracted, and exits 2.
    #[arg(long = "checksum", value_name = "sha256:HEX")]
    pub checksum: Option<String>,

    /// For an s3:// archive: ask for it without credentials (a public bucket), as aws-cli's
    /// --no-sign-request; no credential is looked for.
    #[arg(long = "no-sign-request")]
    pub no_sign_request: bool,

    /// Print shell completions for SHELL (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long = "completions", value_name = "SHELL", hide = true)]
    pub completions: Option<clap_complete::Shell>,

    /// Print the man page (roff) and exit.
    #[arg(long = "man", hide = true)]
    pub man: bool,

    /// Print the defaults of the options GNU tar's --show-defaults names that fastuntar
    /// takes (`-f- -b20 --quoting-style=escape`) and exit.
    #[arg(long = "show-defaults")]
    pub show_defaults: bool,

    /// Print a short usage message and exit.
    #[arg(long = "usage")]
    pub usage: bool,

    /// GNU tar's --pax-option: `delete=PATTERN` reads the archive as if the keywords of its
    /// members' PAX headers matching PATTERN (fnmatch: `delete=mtime`, `delete=SCHILY.*`) were
    /// not there; the keywords for making archives (`exthdr.name`, `globexthdr.name`,
    /// `exthdr.mtime`, `globexthdr.mtime`) are accepted. Comma-separated, or given again.
    #[arg(long = "pax-option", value_name = "LIST", action = ArgAction::Append)]
    pub pax_option: Vec<String>,

    /// How names are written in listings (-t, -v), as GNU tar: literal, shell, shell-always,
    /// shell-escape, shell-escape-always, c, c-maybe, escape (the default: C escapes for
    /// control characters and `\`, octal for bytes not printable), locale, clocale. Messages
    /// keep the escape style.
    #[arg(long = "quoting-style", value_name = "STYLE")]
    pub quoting_style: Option<String>,

    /// Also quote (backslash-escape) the characters of STRING in listings.
    #[arg(long = "quote-chars", value_name = "STRING", action = ArgAction::Append)]
    pub quote_chars: Vec<OsString>,

    /// Do not quote the characters of STRING that --quote-chars added.
    #[arg(long = "no-quote-chars", value_name = "STRING", action = ArgAction::Append)]
    pub no_quote_chars: Vec<OsString>,

    /// --quote-chars and --no-quote-chars in command-line order (`true`: quote).
    #[arg(skip)]
    pub quote_chars_ordered: Vec<(bool, OsString)>,
}

/// When files are written with O_DIRECT (write/direct_policy.rs).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectIo {
    /// Where it was measured to be faster (the filesystem, the archive's and the file's size).
    Auto,
    /// Every file of at least --direct-io-threshold bytes, wherever O_DIRECT is accepted.
    Always,
    /// No file.
    Never,
}

/// The hidden `--debug-uring`'s kernels (write::RingProbe).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugUring {
    /// io_uring refused, as kernel.io_uring_disabled=2.
    Refused,
    /// A ring without IORING_OP_OPENAT, as Linux 5.5's.
    NoOpenat,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring with one writer thread or when large files go direct (--direct-io, or the
    /// default policy); plain system calls when several writer threads write every file
    /// buffered (io_uring measured no faster there, and slower for small files).
    Auto,
    /// io_uring (falls back to portable, with a warning, where the kernel refuses it).
    Uring,
    /// Plain pwrite/openat system calls.
    Portable,
}

/// Letters of tar's traditional bundled options (`tar xzvf A -C DIR`) that fastuntar knows.
const BUNDLE_LETTERS: &[u8] = b"xtfCvkpoazjJIZTXOmiqsBbPSnNUGgVchHlMLF";

/// Letters among them that take a value: in a bundle, the arguments after it, in order.
const BUNDLE_VALUES: &[u8] = b"fCITXbNgVHLF";

/// Rewrites tar's traditional form, a first argument of option letters without a dash
/// (`fastuntar xzvf A.tgz -C out`, `tar xfC A.tar out`), into dashed options, as GNU tar reads
/// it: each letter becomes its option and each letter that takes a value takes the next
/// argument after the bundle. A first argument is such a bundle only when it is made of these
/// letters, says `x` or `t`, and names no file here (so `fastuntar xf` still reads an archive
/// named `xf`). Anything else is returned unchanged.
pub fn traditional(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(first) = args.get(1).and_then(|a| a.to_str()) else { return Ok(args) };
    let bytes = first.as_bytes();
    let known = bytes.iter().all(|b| BUNDLE_LETTERS.contains(b));
    let is_bundle = !bytes.is_empty()
        && bytes.iter().all(u8::is_ascii_alphabetic)
        // An operation: extract or list, or one refused by name (`czf`, `rvf`). Only `c` is
        // known by itself (`cz`); the others need an `f`, so that `data` stays the name of
        // an archive.
        && bytes.iter().any(|b| matches!(b, b'x' | b't' | b'c' | b'r' | b'u' | b'd' | b'A'))
        && (known || bytes.contains(&b'f'))
        && std::fs::symlink_metadata(first).is_err();
    if !is_bundle {
        return Ok(args);
    }
    // Another operation (`czf`, `rvf`, `chf`): refused by name (config.rs), whatever else
    // the bundle holds.
    if let Some(&op) = bytes.iter().find(|b| b"cruAd".contains(b)) {
        return Ok(vec![args[0].clone(), format!("-{}", op as char).into()]);
    }
    // A bundle with a letter fastuntar does not know (`xWf`): said, not taken for the
    // name of an archive that does not exist.
    if let Some(&b) = bytes.iter().find(|b| !BUNDLE_LETTERS.contains(b)) {
        return Err(format!("option '{}' in '{first}' is not supported", b as char));
    }
    let mut out = vec![args[0].clone()];
    let mut values = args[2..].iter();
    for &letter in bytes {
        out.push(format!("-{}", letter as char).into());
        if BUNDLE_VALUES.contains(&letter) {
            match values.next() {
                Some(v) => out.push(v.clone()),
                None => {
                    return Err(format!("option '{}' in '{first}' needs a value", letter as char));
                }
            }
        }
    }
    out.extend(values.cloned());
    Ok(out)
}

/// GNU tar's `TAR_OPTIONS`: options read before those of the command line (`args`, after
/// `traditional`), so that the command line's come later and win. `env` is split into words
/// as GNU tar splits it (gnulib's wordsplit: blanks separate, '…' and "…" quote, a backslash
/// escapes the next character or gives C's `\n`, `\t`…). As GNU tar, a word that is not an
/// option or an option's value is refused, and so is any error in the options themselves,
/// named as coming from TAR_OPTIONS.
pub fn with_env_options(
    args: Vec<OsString>,
    env: Option<&std::ffi::OsStr>,
) -> Result<Vec<OsString>, UsageError> {
    use clap::CommandFactory;
    use std::os::unix::ffi::OsStrExt;
    let Some(env) = env else { return Ok(args) };
    let words =
        split_words(env.as_bytes()).map_err(|e| format!("cannot split TAR_OPTIONS: {e}"))?;
    if words.is_empty() {
        return Ok(args);
    }
    let program = args.first().cloned().unwrap_or_else(|| "fastuntar".into());
    let alone = std::iter::once(program.clone()).chain(words.iter().cloned());
    match Args::command().try_get_matches_from(alone) {
        Ok(m) => {
            if let Some(mut operands) = m.get_many::<OsString>("operands") {
                let first = operands.next().map(|o| o.to_string_lossy().into_owned());
                return Err(format!(
                    "non-option arguments in TAR_OPTIONS: '{}'",
                    first.unwrap_or_default()
                )
                .into());
            }
        }
        Err(e) if !e.use_stderr() => e.exit(),
        // What concerns options together (`--clamp-mtime` here, `--mtime` on the command
        // line) is judged with the command line, as GNU tar judges it after both.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::ArgumentConflict
                    | clap::error::ErrorKind::MissingRequiredArgument
            ) => {}
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("");
            let message = format!(
                "error parsing TAR_OPTIONS: {}",
                first.strip_prefix("error: ").unwrap_or(first)
            );
            return Err(UsageError { message, status: usage_status(&e) });
        }
    }
    let mut out = vec![program];
    out.extend(words);
    out.extend(args.into_iter().skip(1));
    Ok(out)
}

/// Splits `text` into words as GNU tar splits TAR_OPTIONS (see `with_env_options`).
fn split_words(text: &[u8]) -> Result<Vec<OsString>, &'static str> {
    use std::os::unix::ffi::OsStringExt;
    fn escaped(c: u8) -> u8 {
        match c {
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 11,
            c => c,
        }
    }
    let mut words = Vec::new();
    let mut word: Option<Vec<u8>> = None;
    let mut bytes = text.iter().copied();
    while let Some(c) = bytes.next() {
        match c {
            b' ' | b'\t' | b'\n' => {
                if let Some(w) = word.take() {
                    words.push(OsString::from_vec(w));
                }
            }
            b'\'' => {
                let w = word.get_or_insert_with(Vec::new);
                loop {
                    match bytes.next() {
                        Some(b'\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("missing closing quote"),
                    }
                }
            }
            b'"' => {
                let w = word.get_or_insert_with(Vec::new);
                loop {
                    match bytes.next() {
                        Some(b'"') => break,
                        Some(b'\\') => match bytes.next() {
                            Some(c) => w.push(escaped(c)),
                            None => return Err("missing closing quote"),
                        },
                        Some(c) => w.push(c),
                        None => return Err("missing closing quote"),
                    }
                }
            }
            b'\\' => {
                let w = word.get_or_insert_with(Vec::new);
                match bytes.next() {
                    Some(c) => w.push(escaped(c)),
                    None => w.push(b'\\'),
                }
            }
            c => word.get_or_insert_with(Vec::new).push(c),
        }
    }
    words.extend(word.map(OsString::from_vec));
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(args: &[&str]) -> Result<Vec<String>, String> {
        let args = args.iter().map(OsString::from).collect();
        traditional(args).map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn bundles_become_dashed_options() {
        assert_eq!(
            rewrite(&["t", "xzvf", "a.tgz"]).unwrap(),
            ["t", "-x", "-z", "-v", "-f", "a.tgz"]
        );
        assert_eq!(
            rewrite(&["t", "xfC", "a.tar", "out", "m1"]).unwrap(),
            ["t", "-x", "-f", "a.tar", "-C", "out", "m1"]
        );
        assert_eq!(rewrite(&["t", "tf", "a.tar", "-v"]).unwrap(), ["t", "-t", "-f", "a.tar", "-v"]);
        assert!(rewrite(&["t", "xf"]).unwrap_err().contains("'f' in 'xf' needs a value"));
    }

    #[test]
    fn a_bundle_with_an_unknown_letter_is_refused() {
        assert!(rewrite(&["t", "xWf", "a.tar"]).unwrap_err().contains("option 'W' in 'xWf'"));
        // GNU tar's -h (--dereference) and -H FORMAT are letters of a bundle too.
        assert_eq!(
            rewrite(&["t", "xhHf", "posix", "a"]).unwrap(),
            ["t", "-x", "-h", "-H", "posix", "-f", "a"]
        );
        assert_eq!(rewrite(&["t", "xPf", "a"]).unwrap(), ["t", "-x", "-P", "-f", "a"]);
        // Without an f, unknown letters leave it an archive name.
        assert_eq!(rewrite(&["t", "data"]).unwrap(), ["t", "data"]);
        // Other operations are refused by name (config.rs), not taken for an archive named
        // `czf`, nor refused for a letter fastuntar does not know (`chf`).
        assert_eq!(rewrite(&["t", "czf", "o.tgz", "d"]).unwrap(), ["t", "-c"]);
        assert_eq!(rewrite(&["t", "chf", "o.tar", "d"]).unwrap(), ["t", "-c"]);
        assert_eq!(rewrite(&["t", "rvf", "o.tar", "d"]).unwrap(), ["t", "-r"]);
        assert_eq!(rewrite(&["t", "cz"]).unwrap(), ["t", "-c"]);
    }

    fn split(text: &str) -> Result<Vec<String>, &'static str> {
        split_words(text.as_bytes())
            .map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn tar_options_split_like_wordsplit() {
        assert_eq!(split("  -v   --strip=1\t-C\n/x ").unwrap(), ["-v", "--strip=1", "-C", "/x"]);
        assert_eq!(
            split(r#"-C 'a b' "--exclude=c d" e\ f"#).unwrap(),
            ["-C", "a b", "--exclude=c d", "e f"]
        );
        assert_eq!(split(r#""a\"b" 'c\d' x\ty ''"#).unwrap(), ["a\"b", "c\\d", "x\ty", ""]);
        assert_eq!(split("").unwrap(), Vec::<String>::new());
        assert_eq!(split("'-v").unwrap_err(), "missing closing quote");
        assert_eq!(split("\"-v").unwrap_err(), "missing closing quote");
    }

    #[test]
    fn tar_options_come_first() {
        let args: Vec<OsString> = ["t", "-x", "-f", "a"].iter().map(OsString::from).collect();
        let env = std::ffi::OsStr::new("-v --strip-components=1");
        let out = with_env_options(args.clone(), Some(env)).unwrap();
        assert_eq!(out, ["t", "-v", "--strip-components=1", "-x", "-f", "a"]);
        assert_eq!(with_env_options(args.clone(), None).unwrap(), args);
        assert_eq!(with_env_options(args.clone(), Some("  ".as_ref())).unwrap(), args);
        // An unknown option: GNU tar's argp status, 64; one tar itself refuses: 2.
        let err = with_env_options(args.clone(), Some("--bogus".as_ref())).unwrap_err();
        assert!(err.message.starts_with("error parsing TAR_OPTIONS: "), "{err}");
        assert!(err.message.contains("--bogus"), "{err}");
        assert_eq!(err.status, 64);
        let err = with_env_options(args.clone(), Some("-H bogus".as_ref())).unwrap_err();
        assert_eq!(err.status, 2, "{err}");
        let err = with_env_options(args.clone(), Some("-v name".as_ref())).unwrap_err();
        assert_eq!(err.message, "non-option arguments in TAR_OPTIONS: 'name'");
        let err = with_env_options(args.clone(), Some("'-v".as_ref())).unwrap_err();
        assert_eq!(err.message, "cannot split TAR_OPTIONS: missing closing quote");
        // Judged together with the command line: --clamp-mtime needs --mtime, given there.
        let mut with_mtime = args.clone();
        with_mtime.push("--mtime=@0".into());
        assert!(with_env_options(with_mtime, Some("--clamp-mtime".as_ref())).is_ok());
    }

    #[test]
    fn anything_else_is_left_alone() {
        for args in [
            &["t", "-xf", "a.tar"][..],
            &["t", "a.tar"],
            &["t", "vf", "a.tar"],
            &["t", "xyz"],
            &["t"],
            &["t", ""],
            &["t", "/"],
        ] {
            assert_eq!(rewrite(args).unwrap(), *args);
        }
    }
}
