//! The operation (GNU tar's "Main operation mode", "Operation modifiers" and "Select output
//! stream"): `-x`, `-t`, `-O`, `--to-command`, `-G`; and GNU tar's operations that write
//! archives, refused by name.

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Operation {
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
}
