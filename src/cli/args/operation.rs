//! The operation (GNU tar's "Main operation mode", "Operation modifiers" and "Select output
//! stream"): `-x`, `-t`, `-O`, `--to-command`, `-G`; and GNU tar's operations that write
//! archives, refused by name.

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Main operation mode")]
pub struct Operation {
    /// Extract the archive (the default action).
    #[arg(short = 'x', long = "extract", alias = "get")]
    pub extract: bool,

    /// List the members instead of extracting (with -v, like `tar -tvf`).
    ///
    /// Member names one a line, like `tar -tf`; with -v long lines like `tar -tvf` (mode, owner,
    /// size, time, name, link target).
    #[arg(short = 't', long = "list", conflicts_with = "extract")]
    pub list: bool,

    /// Extract files to standard output, like `tar -xO`.
    ///
    /// The data of every member that would be extracted as a regular file (sparse files at their
    /// full size, holes as zeros), in archive order, and nothing else: directories, links, FIFOs
    /// and devices write nothing, nothing is created on disk and -C is not used. --exclude,
    /// --strip-components, --snapshot and the --max-* limits apply as when extracting; -v names go
    /// to standard error; no progress bar or summary; --json is refused.
    #[arg(short = 'O', long = "to-stdout", conflicts_with = "list")]
    pub to_stdout: bool,

    /// Pipe each regular file's data into its own `/bin/sh -c COMMAND`, as GNU tar.
    ///
    /// The data of every member that would be extracted as a regular file goes into its own run of
    /// `/bin/sh -c COMMAND`, as GNU tar's --to-command, with the member described in the
    /// environment: TAR_FILENAME, TAR_REALNAME, TAR_SIZE, TAR_MODE, TAR_MTIME, TAR_UID, TAR_GID,
    /// TAR_UNAME, TAR_GNAME, TAR_FILETYPE, TAR_FORMAT, TAR_ARCHIVE, TAR_VOLUME,
    /// TAR_BLOCKING_FACTOR, TAR_VERSION (fastuntar's), TAR_ATIME and TAR_CTIME (the start time).
    /// Nothing is created on disk.
    ///
    /// A command that exits non-zero is reported ("PID: Child returned status N") and the run exits
    /// 2 at the end (not with --ignore-command-error); one that stops reading gets no more of its
    /// member (`fastuntar -xf A --to-command=sha256sum`).
    #[arg(long = "to-command", value_name = "COMMAND", conflicts_with_all = ["list", "to_stdout"])]
    pub to_command: Option<String>,

    /// With --to-command, a command's non-zero exit status is not an error.
    #[arg(long = "ignore-command-error", overrides_with = "no_ignore_command_error")]
    pub ignore_command_error: bool,

    /// With --to-command, a command's non-zero exit status is an error (the default).
    #[arg(long = "no-ignore-command-error", overrides_with = "ignore_command_error")]
    pub no_ignore_command_error: bool,

    /// Restore a GNU incremental archive (`tar -g`): purge directories as their lists say.
    ///
    /// For an archive made with `tar -g SNAPSHOT -c`, as GNU tar 1.34 does: before each directory
    /// member, the directories its list says were renamed are renamed, and whatever the directory
    /// holds that the list does not name is removed (recursively; symlinks removed, never followed;
    /// -v names each: `fastuntar: Deleting 'src/old'`), so that extracting the levels in order
    /// leaves the tree of the last one.
    ///
    /// -t -vv shows each directory's list. --one-file-system keeps what is mounted inside DIR. A
    /// malformed list is reported (`DIR/: Malformed dumpdir: ...`, exit 2) and that directory is
    /// left as it is.
    #[arg(short = 'G', long = "incremental")]
    pub incremental: bool,

    /// As -G; FILE is not read when extracting (`-g /dev/null` does).
    ///
    /// GNU tar's snapshot FILE is not read when extracting or listing: `-g /dev/null` does, as GNU
    /// tar's manual says.
    #[arg(
        short = 'g',
        long = "listed-incremental",
        value_name = "FILE",
        conflicts_with_all = ["newer", "newer_mtime"]
    )]
    pub listed_incremental: Option<PathBuf>,

    /// GNU tar's operations that write or compare archives (-c, -r, -u, -A, --delete, -d,
    /// --test-label): refused with one line saying so, not clap's "unexpected argument".
    ///
    /// Refused by name with one line and exit 2 (`-c (--create) is not supported: fastuntar
    /// extracts (-x) and lists (-t) archives; ...`), also in tar's bundled form (`czf`), not clap's
    /// "unexpected argument".
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
}
