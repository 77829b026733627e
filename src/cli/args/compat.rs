//! GNU tar's options for writing archives and tapes (its "Compatibility options" and the like):
//! accepted and ignored when reading, as GNU tar ignores them, or refused by name.

use clap::ArgAction;

#[derive(clap::Args, Debug)]
pub struct Compat {
    /// GNU tar's `--level=NUMBER` (the dump level when creating with -g): checked and
    /// ignored, as GNU tar does when reading (a number, else GNU tar's usage error; without -g,
    /// its warning).
    #[arg(long = "level", value_name = "NUMBER", allow_hyphen_values = true, hide = true)]
    pub level: Option<String>,

    /// GNU tar's options for creating an archive that have no meaning when reading one: GNU
    /// tar accepts them with -x and -t and ignores them, and so does fastuntar, so that a
    /// TAR_OPTIONS or a wrapper's options written for both work (`--sort=name --owner=0
    /// --mtime=@0` for reproducible archives). These take no value.
    ///
    /// GNU tar accepts them with -x and -t and ignores them, and so does fastuntar, so that
    /// TAR_OPTIONS or a wrapper's options written for both work (`--sort=name --owner=0 --mtime=@0`
    /// for reproducible archives). These take no value: --check-device, --no-check-device, -l,
    /// --check-links, --hard-dereference, --exclude-caches[-all,-under], --exclude-vcs-ignores,
    /// --ignore-failed-read, --old-archive, --portability, --posix, --remove-files, --restrict.
    /// Long forms only; their combinations are not checked.
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
    ///
    /// --owner, --group, --mode, --owner-map, --group-map, --sort, --hole-detection,
    /// --sparse-version, --exclude-tag[-all,-under], --exclude-ignore[-recursive], --rsh-command,
    /// --rmt-command: their values are not checked (GNU tar refuses `--mode=bogus`).
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

    /// Accepted, without effect when reading (-B, -S, -n, -b N, --record-size N, ...).
    ///
    /// As in GNU tar: -s/--same-order, -B/--read-full-records, -b/--blocking-factor N,
    /// --record-size N, --force-local (the record size counts only for --totals and --checkpoint),
    /// -S/--sparse (sparse members are always made sparse), -n/--seek, --no-seek,
    /// --no-auto-compress (the data decides the format).
    #[arg(
        short = 's',
        long = "same-order",
        help_heading = "Input: archive, compression, URL, mirrors",
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

    #[arg(short = 'b', long = "blocking-factor", value_name = "N", hide = true)]
    pub blocking: Option<String>,

    #[arg(long = "record-size", value_name = "SIZE", hide = true, conflicts_with = "blocking")]
    pub record_size: Option<String>,
}
