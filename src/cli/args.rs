//! The command line as clap reads it (the raw flags; cli/resolve.rs makes the run's typed options of them), in
//! groups as GNU tar's --help groups its options: one file of `args/` per group, flattened
//! into `Args`, whose fields keep the flags' ids.

pub mod attributes;
pub mod compat;
pub mod informative;
pub mod input;
pub mod limits;
pub mod names;
pub mod operation;
pub mod overwrite;
pub mod performance;
pub mod resume;
pub mod selection;

use clap::Parser;

use attributes::Attributes;
use compat::Compat;
use informative::Informative;
use input::Input;
use limits::Limits;
use names::Names;
use operation::Operation;
use overwrite::Overwrite;
use performance::Performance;
use resume::Resume;
use selection::Selection;

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
        Exit status, as GNU tar: 0 success; 2 a member could not be extracted or a fatal error; \
        64 an unknown option.\n\n\
        Each option at length: man fastuntar (or fastuntar --man | man -l -), docs/REFERENCE.md.",
    after_long_help = "As in GNU tar, a long option may be shortened to any prefix that names only one option \
        (`--strip=1`, `--numeric`; `--dir` for `--directory`), and an option may be given again: the last \
        value wins, lists such as --exclude collect every value. Options in $TAR_OPTIONS are read before \
        the command line's (docs/USAGE.md).\n\n\
        Examples:\n  \
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
    #[command(flatten)]
    pub operation: Operation,

    #[command(flatten)]
    pub overwrite: Overwrite,

    #[command(flatten)]
    pub selection: Selection,

    #[command(flatten)]
    pub names: Names,

    #[command(flatten)]
    pub attributes: Attributes,

    #[command(flatten)]
    pub input: Input,

    #[command(flatten)]
    pub resume: Resume,

    #[command(flatten)]
    pub performance: Performance,

    #[command(flatten)]
    pub limits: Limits,

    #[command(flatten)]
    pub informative: Informative,

    #[command(flatten)]
    pub compat: Compat,
}
