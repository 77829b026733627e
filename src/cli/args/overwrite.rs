//! Overwrite control (GNU tar's "Overwrite control"): what a member does with what is already
//! at its path, and `--backup`.

use std::ffi::OsString;

#[derive(clap::Args, Debug)]
pub struct Overwrite {
    /// Keep a symlink to a directory where the archive has that directory (`lib -> usr/lib`
    /// and a member `lib/`), and extract what is under it through the symlink, as GNU tar's
    /// --keep-directory-symlink. Followed only inside DIR: an absolute or `..` target is taken
    /// as if DIR were `/`.
    #[arg(long = "keep-directory-symlink")]
    pub keep_directory_symlink: bool,

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

    /// GNU tar's -W (--verify, for writing): refused with one line, as GNU tar refuses it
    /// with -x.
    #[arg(short = 'W', long = "verify", hide = true)]
    pub verify: bool,

    /// Replace existing files (the default): an existing file is removed and created anew,
    /// never written through in place or through a link (GNU tar's --overwrite writes into
    /// it).
    #[arg(long = "overwrite", conflicts_with_all = ["keep_old_files", "skip_old_files"])]
    pub overwrite: bool,
}
