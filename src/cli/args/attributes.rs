//! File attributes (GNU tar's "Handling of file attributes" and "Extended file attributes"):
//! owners, permissions, times, extended attributes and ACLs, deferred directory metadata.

use clap::ArgAction;

#[derive(clap::Args, Debug)]
pub struct Attributes {
    /// Do not restore modification times: everything extracted keeps the time it was
    /// created (and no time is set, which saves a system call per member).
    #[arg(short = 'm', long = "touch")]
    pub touch: bool,

    /// Restore extended attributes from the archive's PAX records (SCHILY.xattr, and bsdtar's
    /// LIBARCHIVE.xattr): without --xattrs-include only the user.* namespace, as GNU tar.
    /// Set on each file through its own descriptor after its data and owner. The last of
    /// --xattrs, --no-xattrs and --xattrs-include/--xattrs-exclude decides.
    #[arg(long = "xattrs", action = ArgAction::Count)]
    pub xattrs: u8,

    /// Do not restore extended attributes (the default).
    #[arg(long = "no-xattrs", action = ArgAction::Count)]
    pub no_xattrs: u8,

    /// Do not restore SELinux contexts: what fastuntar always does (GNU tar's default too;
    /// accepted for scripts that say so).
    #[arg(long = "no-selinux", hide = true)]
    pub no_selinux: bool,

    /// Restore only the attributes whose name matches PATTERN (fnmatch wildcards over the
    /// whole name, e.g. 'security.capability' or 'user.*'); implies --xattrs. May be
    /// repeated: an attribute matching any of them is restored.
    #[arg(long = "xattrs-include", value_name = "PATTERN")]
    pub xattrs_include: Vec<String>,

    /// Do not restore the attributes whose name matches PATTERN (as --xattrs-include; wins
    /// over it); implies --xattrs. May be repeated.
    #[arg(long = "xattrs-exclude", value_name = "PATTERN")]
    pub xattrs_exclude: Vec<String>,

    /// Whether the last of the xattr flags turns restoring on (set by `parse`, from where
    /// each flag stands on the command line).
    #[arg(skip)]
    pub xattrs_on: bool,

    /// Restore POSIX ACLs from the archive's PAX records (SCHILY.acl.access, and
    /// SCHILY.acl.default for directories), as GNU tar's --acls: names are looked up here, as
    /// setfacl does. -tv marks members with ACLs `+`. The last of --acls and --no-acls decides.
    #[arg(long = "acls", action = ArgAction::Count)]
    pub acls: u8,

    /// Do not restore ACLs (the default).
    #[arg(long = "no-acls", action = ArgAction::Count)]
    pub no_acls: u8,

    /// Whether the last of --acls and --no-acls is --acls (set by `parse`).
    #[arg(skip)]
    pub acls_on: bool,

    /// Give directories their mode and time at the end of the run, as GNU tar's option: a
    /// member under a directory the archive made read-only earlier still extracts, and a
    /// directory whose members come after others (`a a/b a/c a/b/f`) keeps its archived
    /// time. By default a directory gets them once the archive has left it, as in GNU tar; a
    /// directory of an incremental archive (`tar -g`) turns this on, as there.
    #[arg(long = "delay-directory-restore", overrides_with = "no_delay_directory_restore")]
    pub delay_directory_restore: bool,

    /// A directory gets its mode and time once the archive has left it (the default).
    #[arg(long = "no-delay-directory-restore", overrides_with = "delay_directory_restore")]
    pub no_delay_directory_restore: bool,

    /// Restore owner and group from the archive (the default as root): the member's user and
    /// group names where they exist on this system, else its numeric ids (as GNU tar).
    #[arg(long = "same-owner", overrides_with = "no_same_owner")]
    pub same_owner: bool,

    /// Use the archive's numeric user and group ids, never its names: for --same-owner, and
    /// for the owner column of -tv.
    #[arg(long = "numeric-owner")]
    pub numeric_owner: bool,

    /// Do not restore ownership (the default for users other than root): files belong to
    /// the extracting user.
    #[arg(short = 'o', long = "no-same-owner", overrides_with = "same_owner")]
    pub no_same_owner: bool,

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
