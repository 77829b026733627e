//! Informative output (GNU tar's "Informative output" and "Other options"): `-v`, `--totals`,
//! `--warning`, `--checkpoint`, listings' quoting and times, `--json`, `-q`, help and version.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ArgAction;

#[derive(clap::Args, Debug)]
pub struct Informative {
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

    /// Say "DIR: Omitting" for each directory member that is not extracted or listed (not
    /// selected, excluded or older than -N's DATE).
    #[arg(long = "show-omitted-dirs")]
    pub show_omitted_dirs: bool,

    /// Print each member name as it is extracted, and the end-of-run summary on standard
    /// error (said without -v only on a terminal).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,

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

    /// Print the version.
    #[arg(long = "version", action = ArgAction::Version)]
    pub version: Option<bool>,

    /// Print help (-h is --dereference, as in GNU tar).
    #[arg(short = '?', long = "help", action = ArgAction::Help)]
    pub help: Option<bool>,

    /// In -tv listings, times with seconds (and nanoseconds where the archive has them), as
    /// GNU tar's --full-time.
    #[arg(long = "full-time")]
    pub full_time: bool,

    /// Times in -tv listings and in warnings in UTC, not local time.
    #[arg(long = "utc")]
    pub utc: bool,

    /// Print the end-of-run summary as one JSON object on standard output.
    #[arg(long = "json")]
    pub json: bool,

    /// Print nothing but errors (no progress, no summary).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

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
