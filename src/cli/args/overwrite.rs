//! Overwrite control (GNU tar's "Overwrite control"): what a member does with what is already
//! at its path, and `--backup`.

use std::ffi::OsString;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Overwrite control")]
pub struct Overwrite {
    /// Keep a symlink to a directory where the archive has that directory; extract through it.
    ///
    /// Where a directory member meets a symlink to a directory (`lib -> usr/lib` on a merged-/usr
    /// system), keep the symlink and extract what is under it through it, as GNU tar. Symlinks are
    /// then followed only inside DIR: an absolute target or `..` is taken as if DIR were `/` (a
    /// chroot's view). One writer thread, whatever --writer-threads asks (a file may have two names
    /// then; a line says so).
    #[arg(long = "keep-directory-symlink")]
    pub keep_directory_symlink: bool,

    /// Do not replace existing files: report each, go on, exit 2.
    ///
    /// Each existing file is reported (`MEMBER: cannot create: File exists`) and the run goes on,
    /// then exits 2, as GNU tar. An existing directory is kept with its own mode and times.
    #[arg(short = 'k', long = "keep-old-files", conflicts_with = "skip_old_files")]
    pub keep_old_files: bool,

    /// Like -k, silently: members whose path exists are skipped, exit status 0.
    ///
    /// Nothing is reported and the exit status stays 0; with -v each kept member is named (`MEMBER:
    /// skipping existing file`), as GNU tar does. Not together with -k.
    #[arg(long = "skip-old-files")]
    pub skip_old_files: bool,

    /// Do not replace existing files that are as new as their archive copy or newer.
    ///
    /// Keep an existing file, symlink (its own time, not followed) or hard link whose modification
    /// time is the same as or later than the member's (`Current 'PATH' is newer or same age`, exit
    /// status unchanged), and replace the older ones; nanoseconds count where the archive has them
    /// (PAX). The check is made by the writer, on the entry it is about to replace.
    ///
    /// A directory is never newer: a directory member makes an empty one anew with its own metadata
    /// and leaves a non-empty one as it is (mode and time too); a file member replaces an empty
    /// one. As GNU tar 1.34; not together with -k, --skip-old-files, --overwrite,
    /// --no-overwrite-dir.
    #[arg(
        long = "keep-newer-files",
        conflicts_with_all = ["keep_old_files", "skip_old_files", "overwrite", "no_overwrite_dir"]
    )]
    pub keep_newer_files: bool,

    /// Keep the mode and owner of existing directories.
    ///
    /// Directories that exist already (before the run or made earlier in it) keep their mode and
    /// owner instead of the member's; they still get the member's modification time (unless -m), as
    /// GNU tar 1.34.
    #[arg(
        long = "no-overwrite-dir",
        conflicts_with_all = ["keep_old_files", "skip_old_files", "overwrite"],
        overrides_with = "overwrite_dir"
    )]
    pub no_overwrite_dir: bool,

    /// Remove what is at a member's path before extracting it (an empty directory too).
    ///
    /// As GNU tar's -U: for files, links and FIFOs the same as the default (fastuntar never writes
    /// into an existing file); a directory member removes an existing empty directory and makes it
    /// anew, and a non-empty one stays as it is, metadata too (`MEMBER: cannot create directory:
    /// Directory not empty`, exit 2). One writer thread.
    #[arg(
        short = 'U',
        long = "unlink-first",
        conflicts_with_all = ["keep_old_files", "skip_old_files", "keep_newer_files", "no_overwrite_dir", "overwrite"]
    )]
    pub unlink_first: bool,

    /// Remove a whole directory tree that is in a member's way.
    ///
    /// An existing directory in a member's way goes with everything in it (symlinks inside are
    /// removed, never followed): a directory member empties what was there, a file member replaces
    /// a whole tree. DIR itself stays. As GNU tar, with or without -U. One writer thread.
    #[arg(long = "recursive-unlink")]
    pub recursive_unlink: bool,

    /// Rename what a member would replace instead of removing it (NAME~, NAME.~N~).
    ///
    /// As GNU tar. CONTROL: `simple`/`never` (NAME~, or NAME and --suffix), `numbered`/`t`
    /// (NAME.~N~), `existing`/`nil` (numbered where numbered backups exist, else simple; the
    /// default, or $VERSION_CONTROL), `none`/`off`. A directory is never backed up; a symlink is
    /// renamed itself. With -v, `Renaming 'a' to 'a~'` right after the member's name, as GNU tar
    /// (each member then lands before the next is read).
    #[arg(long = "backup", value_name = "CONTROL", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub backup: Option<String>,

    /// The suffix of simple backups (default `~`); turns --backup on.
    ///
    /// The default is $SIMPLE_BACKUP_SUFFIX, else `~`. --suffix alone turns backups on.
    #[arg(long = "suffix", value_name = "SUFFIX")]
    pub suffix: Option<String>,

    /// Give existing directories the member's mode, owner and time (the default).
    #[arg(long = "overwrite-dir", overrides_with = "no_overwrite_dir")]
    pub overwrite_dir: bool,

    /// Extract everything under DIR, or under the archive's name without its suffix.
    ///
    /// DIR is relative to -C. Without DIR, the archive's name less its suffix (.tar,
    /// .tar.gz/.tgz/.taz, .tar.bz2/.tbz/.tbz2/.tz2, .tar.xz/.txz, .tar.zst/.tzst, .tar.lz,
    /// .tar.lzma/.tlz, .tar.lzo, .tar.Z/.taZ, .tar.lz4); with standard input or another name, GNU
    /// tar's "Cannot deduce top-level directory name" and exit 2. A member already at or under DIR
    /// is not prefixed twice; hard-link targets likewise.
    ///
    /// Applied after --strip-components (a name stripped to nothing becomes DIR); MEMBER operands,
    /// --exclude, -v and -t see the archive's names. A DIR with `..` or a leading `/` is refused.
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

    /// Replace existing files (the default), never writing into them.
    ///
    /// An existing file is removed and created anew, never written through in place or through a
    /// link (GNU tar's --overwrite writes into it). Not together with -k or --skip-old-files.
    #[arg(long = "overwrite", conflicts_with_all = ["keep_old_files", "skip_old_files"])]
    pub overwrite: bool,
}
