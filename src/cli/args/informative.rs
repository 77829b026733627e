//! Informative output (GNU tar's "Informative output" and "Other options"): `-v`, `--totals`,
//! `--warning`, `--checkpoint`, listings' quoting and times, `--json`, `-q`, help and version.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ArgAction;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Informative output")]
pub struct Informative {
    /// Ask before extracting each member (`y` extracts it).
    ///
    /// As GNU tar's -w: `extract 'NAME'?` where the listing goes (standard error with -O), the
    /// answer read from standard input, or from /dev/tty when standard input is the archive or a
    /// `-T -` list (none there: exit 2 before anything is extracted). `y`/`Y`... extracts, anything
    /// else skips silently, and once the input ends every question is answered no. No progress bar
    /// is drawn over the questions.
    #[arg(short = 'w', long = "interactive", visible_alias = "confirmation")]
    pub interactive: bool,

    /// Show each listed member's block in the archive (`block 7: NAME`).
    ///
    /// As GNU tar: each listed member (-t, -v) is preceded by its block in the archive (GNU tar's
    /// numbers: the header's block less GNU long-name headers, one more when extracting), a POSIX
    /// volume label by `block 0: `; the end marker is shown (`block 9: ** Block of NULs **`, every
    /// zero block with -i), and an input that ends without one (`** End of File **`).
    #[arg(short = 'R', long = "block-number")]
    pub block_number: bool,

    /// Write the listing (-t, -v) to FILE instead of standard output.
    ///
    /// The listing (-t, -v names, `Renaming`/`Deleting` lines, checkpoint dots) goes to FILE
    /// instead of standard output (standard error with -O), as GNU tar's --index-file. FILE is
    /// created (or emptied) first; one that cannot be made stops the run before anything is read. A
    /// symlink as FILE is refused, one line (GNU tar follows it); /dev/stdout, /dev/stderr and
    /// /dev/fd/N work. A write to FILE that fails is said at the end, exit 2.
    #[arg(long = "index-file", value_name = "FILE")]
    pub index_file: Option<PathBuf>,

    /// Say "DIR: Omitting" for each directory member left out.
    ///
    /// For each directory member that is not extracted or listed: not selected, excluded, or older
    /// than -N's DATE.
    #[arg(long = "show-omitted-dirs")]
    pub show_omitted_dirs: bool,

    /// Print each member name as it is extracted (-vv: long lines, as -tv).
    ///
    /// -vv prints GNU tar's long lines (as -tv's); with -O the names go to standard error. With -v
    /// the end-of-run summary line goes to standard error too (without it, only on a terminal, with
    /// --totals or --json).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,

    /// At the end, print "Total bytes read: N (SIZE, RATE/s)", then the summary.
    ///
    /// On standard error, as GNU tar (also with -t and -O): N is the tar stream's bytes
    /// (decompressed) in whole records of --blocking-factor (10240 bytes; -b N: N x 512,
    /// --record-size), up to the record holding the end marker, as GNU tar counts them. Extracting,
    /// the summary line follows. --totals=SIGNAL is refused.
    #[arg(
        long = "totals",
        value_name = "SIGNAL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub totals: Option<String>,

    /// -t and -v show the names as extracted, not as stored.
    ///
    /// With --transform, --strip-components or --one-top-level, -t and -v show the names as
    /// extracted (the top directory included), as GNU tar. GNU tar 1.34's --show-stored-names
    /// (meant for creating archives) does the same when reading, and is accepted as another
    /// spelling.
    #[arg(long = "show-transformed-names", alias = "show-stored-names", action = ArgAction::Count)]
    pub show_transformed_names: u8,

    /// Turn a class of warnings off (`no-KEYWORD`) or on.
    ///
    /// As GNU tar's --warning: timestamp (a time stamp in the future or before 1970, `NAME: time
    /// stamp 2090-01-01 00:00:00 is N s in the future`, as GNU tar prints it), ignore-newer
    /// (--keep-newer-files), existing-file (--skip-old-files -v), unknown-cast (unknown member
    /// types), contiguous-cast (`Extracting contiguous files as regular files`, once),
    /// alone-zero-block (`A lone zero block at N`: the end marker is one zero block), xattr-write,
    /// all, none. GNU tar's other keywords are accepted and change nothing (fastuntar prints no
    /// such warning); an unknown one is refused. May be repeated.
    #[arg(long = "warning", value_name = "KEYWORD")]
    pub warning: Vec<String>,

    /// Run the checkpoint actions every N records read (default 10).
    ///
    /// GNU tar's progress hook: at every Nth record read run the --checkpoint-action ACTIONs (by
    /// default "Read checkpoint N" on standard error). A record is --blocking-factor blocks of the
    /// tar stream (decompressed), 10240 bytes by default, counted as GNU tar 1.34 reads them
    /// (--totals' records; those it passes over with lseek in a plain archive file, such as -t's
    /// member data, count none; a compressed archive file's first record counts twice).
    /// --checkpoint=.N adds the dot action. Printed with -q too; no progress bar is drawn then.
    #[arg(
        long = "checkpoint",
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "10",
        action = ArgAction::Append
    )]
    pub checkpoint: Vec<String>,

    /// What a checkpoint does: dot, bell, echo[=STRING], ttyout=STRING, sleep=S, exec=CMD, totals.
    ///
    /// At each checkpoint (every 10 records without --checkpoint): `.` or `dot` (a dot on standard
    /// output, on standard error with -O; no newline), `bell` (to /dev/tty), `echo` or
    /// `echo=STRING` (on standard error), `ttyout=STRING` (to /dev/tty), `sleep=SECONDS`,
    /// `exec=COMMAND` (/bin/sh -c COMMAND, with TAR_CHECKPOINT, TAR_ARCHIVE, TAR_BLOCKING_FACTOR,
    /// TAR_SUBCOMMAND, TAR_FORMAT, TAR_VERSION), `totals`. STRING takes GNU tar's %u (the number),
    /// %s ("read"), %d (seconds), %T, %t, %*, %c escapes and its quoting. Repeat for several
    /// actions, run in command-line order.
    #[arg(long = "checkpoint-action", value_name = "ACTION", action = ArgAction::Append)]
    pub checkpoint_action: Vec<String>,

    /// `--checkpoint` and `--checkpoint-action` in command-line order (filled by `parse`).
    #[arg(skip)]
    pub checkpoints: Vec<crate::report::checkpoint::Arg>,

    /// Print the version.
    #[arg(long = "version", action = ArgAction::Version)]
    pub version: Option<bool>,

    /// Print this help (-h is --dereference, as in GNU tar; each option at length: man fastuntar).
    // HelpShort: `--help` is the short help too (one or two lines an option, GNU tar's
    // groups); the long texts are the man page's and docs/REFERENCE.md's.
    #[arg(short = '?', long = "help", action = ArgAction::HelpShort)]
    pub help: Option<bool>,

    /// In -tv listings, times with seconds (and nanoseconds).
    ///
    /// As GNU tar's --full-time: seconds, and nanoseconds where the archive has them (PAX).
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

    /// Print the defaults of GNU tar's options that apply (`-f- -b20 ...`) and exit.
    ///
    /// Print the defaults of the options GNU tar's --show-defaults names that fastuntar
    /// takes (`-f- -b20 --quoting-style=escape`) and exit.
    #[arg(long = "show-defaults")]
    pub show_defaults: bool,

    /// Print a short usage message and exit.
    #[arg(long = "usage")]
    pub usage: bool,

    /// How names are written in listings: escape (the default), literal, shell, c, ...
    ///
    /// How -t and -v write names and link targets, as GNU tar (gnulib's quotearg): literal, shell,
    /// shell-always, shell-escape, shell-escape-always, c, c-maybe, escape (the default: C escapes
    /// for control characters and `\`, octal for bytes not printable in the locale), locale,
    /// clocale. Messages keep the escape style (a name cannot put a raw control character on
    /// standard error).
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
