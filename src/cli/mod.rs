//! The command line: `args.rs` the raw flags (clap derive, in GNU tar's --help groups),
//! `argv.rs` what comes before clap (tar's bundled first argument, TAR_OPTIONS), this file
//! `parse` and the options whose place matters (`Ordered`), `operands.rs` those read in
//! order, `resolve.rs` the run's typed options (src/options/) made of them all; `reference.rs` the man page and
//! docs/REFERENCE.md, generated from `args.rs`.

pub mod args;
pub mod argv;
pub mod operands;
pub mod reference;
pub mod resolve;

pub use args::Args;
pub use args::performance::{DebugUring, DirectIo, IoBackend};
pub use argv::{traditional, with_env_options};

use std::ffi::OsString;
use std::path::PathBuf;

/// Parses the command line (after `traditional`), exiting as clap does on an error.
pub fn parse(argv: Vec<OsString>) -> Args {
    try_parse(argv).unwrap_or_else(|e| {
        if !e.use_stderr() {
            e.exit();
        }
        let _ = e.print();
        std::process::exit(usage_status(&e));
    })
}

/// Parses the command line (after `traditional`); clap's error as it is.
pub fn try_parse(argv: Vec<OsString>) -> Result<Args, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Args::command().try_get_matches_from(argv)?;
    let mut args = Args::from_arg_matches(&matches)?;
    // GNU tar: --xattrs, --xattrs-include and --xattrs-exclude turn restoring on, --no-xattrs
    // off; the last one given wins.
    let last = |id: &str| places(&matches, id).into_iter().max();
    let on = ["xattrs", "xattrs_include", "xattrs_exclude"].into_iter().filter_map(last).max();
    args.attributes.xattrs_on = on > last("no_xattrs");
    args.attributes.acls_on = last("acls") > last("no_acls");
    args.selection.ordered = ordered(&matches, &args);
    args.informative.checkpoints = checkpoints(&matches, &args);
    args.informative.quote_chars_ordered = quote_chars(&matches, &args);
    Ok(args)
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
            ("checkpoint", args.informative.checkpoint.iter().cloned().map(Arg::Every).collect()),
            (
                "checkpoint_action",
                args.informative.checkpoint_action.iter().cloned().map(Arg::Action).collect(),
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
            ("quote_chars", tagged(true, &args.informative.quote_chars)),
            ("no_quote_chars", tagged(false, &args.informative.no_quote_chars)),
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
    values("operands", &|i| Ordered::Operand(args.selection.operands[i].clone()));
    values("add_file", &|i| Ordered::AddFile(args.selection.add_file[i].clone()));
    values("files_from", &|i| Ordered::FilesFrom(args.selection.files_from[i].clone()));
    values("exclude", &|i| Ordered::Exclude(args.selection.exclude[i].clone()));
    values("exclude_from", &|i| Ordered::ExcludeFrom(args.selection.exclude_from[i].clone()));
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
    values("directory", &|i| Ordered::Directory(args.selection.directory[i].clone()));
    all.sort_by_key(|(place, _)| *place);
    all.into_iter().map(|(_, o)| o).collect()
}
