//! File attributes (GNU tar's "Handling of file attributes" and "Extended file attributes"):
//! owners, permissions, times, extended attributes and ACLs, deferred directory metadata.

use clap::ArgAction;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "File attributes")]
pub struct Attributes {
    /// Do not restore modification times.
    ///
    /// Files, directories, symlinks and FIFOs keep the time of extraction (no time is set at all,
    /// one system call less per member); modes and owners as without it. Also with --snapshot.
    #[arg(short = 'm', long = "touch")]
    pub touch: bool,

    /// Restore extended attributes (user.* without --xattrs-include).
    ///
    /// From the archive's PAX records (SCHILY.xattr.*, written by `tar --xattrs` and `bsdtar
    /// --xattrs`, and bsdtar's LIBARCHIVE.xattr.* where no SCHILY record names the attribute). As
    /// GNU tar, without --xattrs-include only the user. namespace, also as root. Files,
    /// directories, symlinks and FIFOs, set through the descriptor of the inode created, after its
    /// data and owner (so security.capability survives).
    ///
    /// An attribute the filesystem or kernel refuses is a warning, once per member (`MEMBER: cannot
    /// set extended attribute 'NAME': ...`; --warning=no-xattr-write silences it), exit status
    /// unchanged as in GNU tar. Refused with --snapshot. The last of --xattrs, --no-xattrs,
    /// --xattrs-include and --xattrs-exclude decides.
    #[arg(long = "xattrs", action = ArgAction::Count)]
    pub xattrs: u8,

    /// Do not restore extended attributes (the default).
    #[arg(long = "no-xattrs", action = ArgAction::Count)]
    pub no_xattrs: u8,

    /// Do not restore SELinux contexts: what fastuntar always does (GNU tar's default too;
    /// accepted for scripts that say so).
    #[arg(long = "no-selinux", hide = true)]
    pub no_selinux: bool,

    /// Restore only the attributes matching PATTERN; implies --xattrs.
    ///
    /// fnmatch(3) without flags over the whole name (`*` matches `.`):
    /// `--xattrs-include='security.capability' --xattrs-include='user.*'` for a container layer as
    /// root. May be repeated: an attribute matching any of them is restored.
    #[arg(long = "xattrs-include", value_name = "PATTERN")]
    pub xattrs_include: Vec<String>,

    /// Do not restore the attributes matching PATTERN; implies --xattrs.
    ///
    /// Patterns as --xattrs-include's; an exclude wins over an include. May be repeated.
    #[arg(long = "xattrs-exclude", value_name = "PATTERN")]
    pub xattrs_exclude: Vec<String>,

    /// Whether the last of the xattr flags turns restoring on (set by `parse`, from where
    /// each flag stands on the command line).
    #[arg(skip)]
    pub xattrs_on: bool,

    /// Restore POSIX ACLs.
    ///
    /// From the archive's PAX records (SCHILY.acl.access; SCHILY.acl.default on directories),
    /// written by `tar --acls` and bsdtar, as GNU tar: files and directories, names looked up on
    /// this system (bsdtar's numeric ids where a name is unknown). An ACL naming an unknown user or
    /// group is a warning (`MEMBER: cannot restore its ACL: unknown user 'x'`, exit status
    /// unchanged) and the file is extracted without it.
    ///
    /// As GNU tar, ACLs are reset: a file or directory without an access ACL gets one from its
    /// mode, and a directory without a default ACL (or with GNU tar's empty `SCHILY.acl.default=`)
    /// loses the one it inherited. With -tv (and with --xattrs) a column after the mode as GNU tar
    /// prints it: `+` ACLs, `*` attributes. The last of --acls and --no-acls decides.
    #[arg(long = "acls", action = ArgAction::Count)]
    pub acls: u8,

    /// Do not restore ACLs (the default).
    #[arg(long = "no-acls", action = ArgAction::Count)]
    pub no_acls: u8,

    /// Whether the last of --acls and --no-acls is --acls (set by `parse`).
    #[arg(skip)]
    pub acls_on: bool,

    /// Give directories their mode and time at the end of the run.
    ///
    /// As GNU tar's option: every directory gets its mode, owner and time at the end of the run,
    /// not once the archive has left it. So a member under a directory the archive made read-only
    /// earlier still extracts (as a user), and a directory whose members come after others (`a a/b
    /// a/c a/b/f`) keeps its archived time. A directory of an incremental archive (`tar -g`, GNU or
    /// POSIX format) turns it on, also without -G, as GNU tar.
    ///
    /// The directories waiting cost 1 MiB of memory at most; the rest goes to an unlinked temporary
    /// file in DIR (or $TMPDIR): a million directories peak 2.6 MB higher than without it.
    #[arg(long = "delay-directory-restore", overrides_with = "no_delay_directory_restore")]
    pub delay_directory_restore: bool,

    /// A directory gets its mode and time once the archive has left it (the default).
    #[arg(long = "no-delay-directory-restore", overrides_with = "delay_directory_restore")]
    pub no_delay_directory_restore: bool,

    /// Restore owner and group from the archive (the default as root).
    ///
    /// As GNU tar: the member's user and group names where they exist on this system, each on its
    /// own, else its numeric uid and gid (also where a PAX record gives the number).
    #[arg(long = "same-owner", overrides_with = "no_same_owner")]
    pub same_owner: bool,

    /// Use the archive's numeric user and group ids, never its names.
    ///
    /// Use the archive's numeric user and group ids, never its names: for --same-owner, and
    /// for the owner column of -tv.
    #[arg(long = "numeric-owner")]
    pub numeric_owner: bool,

    /// Do not restore ownership (the default for users other than root).
    ///
    /// Do not restore ownership (the default for users other than root): files belong to
    /// the extracting user.
    #[arg(short = 'o', long = "no-same-owner", overrides_with = "same_owner")]
    pub no_same_owner: bool,

    /// Restore permission bits exactly, set-id bits included (the default as root).
    ///
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
}
