//! How members land, as the flags say: DIR from the `-C`s, what to do with what is there
//! (`-k`, `--backup`, ...), direct IO, the backend, `--spread`.

use super::*;

/// The writers' options into `opts`.
pub(super) fn writer_options(args: &Args, edge: &Edge, opts: &mut Options) -> Result<()> {
    opts.direct_threshold = args
        .performance
        .direct_io_threshold
        .as_deref()
        .map(parse_size)
        .transpose()
        .context("--direct-io-threshold")?;
    // 0 is refused with the options (options/writer.rs), for a program's run too.
    opts.writer_threads = args.performance.writer_threads;
    opts.backup = match backup_wanted(args, edge) {
        Some((control, suffix)) => {
            crate::write::backup::Backup::new(control, suffix)?.map(Arc::new)
        }
        None => None,
    };
    opts.dest = destination(args)?;
    let incremental = args.operation.incremental || args.operation.listed_incremental.is_some();
    if incremental && !args.performance.spread.is_empty() {
        bail!("--spread cannot be used with -G (--incremental): its removals are DIR's");
    }
    opts.spread = spreads(&args.performance.spread)?;
    opts.backend = match args.performance.io {
        crate::cli::IoBackend::Auto => Backend::Auto,
        crate::cli::IoBackend::Uring => Backend::Uring,
        crate::cli::IoBackend::Portable => Backend::Portable,
    };
    opts.direct = direct_io(args.performance.direct_io, args.performance.no_direct_io);
    opts.direct_after = match &args.performance.debug_direct_after {
        Some(t) => Some(parse_size(t).context("--debug-direct-after")?),
        None => None,
    };
    opts.old_files = old_files(args);
    opts.overwrite = args.overwrite.overwrite;
    // Modes exactly as archived with -p, and as root unless --no-same-permissions (GNU
    // tar's default); otherwise the archive's modes less the umask, like tar without -p.
    opts.exact_modes = args.attributes.preserve_permissions
        || (!args.attributes.no_same_permissions && edge.machine.root);
    opts.keep_directory_symlink =
        args.overwrite.keep_directory_symlink || args.selection.dereference;
    opts.dereference = args.selection.dereference;
    opts.delay_restore = args.attributes.delay_directory_restore;
    opts.recursive_unlink = args.overwrite.recursive_unlink;
    opts.one_file_system = args.selection.one_file_system;
    opts.ring_probe = match args.performance.debug_uring {
        None => RingProbe::Kernel,
        Some(crate::cli::DebugUring::Refused) => RingProbe::Refused,
        Some(crate::cli::DebugUring::NoOpenat) => RingProbe::NoOpenat,
    };
    opts.sync = args.performance.sync;
    Ok(())
}

/// `--spread PREFIX=DIR1,DIR2,...` values as given, split (options/placement.rs checks them):
/// one PREFIX each, DIRs separated by single commas.
pub fn spreads<S: AsRef<str>>(given: &[S]) -> Result<Vec<Spreading>> {
    given
        .iter()
        .map(|value| {
            let value = value.as_ref();
            let Some((prefix, dirs)) = value.split_once('=') else {
                bail!(
                    "--spread '{value}': expected PREFIX=DIR1,DIR2,... (accounts/=/mnt/a,/mnt/b)"
                );
            };
            Ok(Spreading {
                prefix: prefix.into(),
                roots: dirs.split(',').map(PathBuf::from).collect(),
            })
        })
        .collect()
}

/// DIR from the `-C`s, as GNU tar changes directory for each (a relative one from the one
/// before; `.` without any). GNU tar also lets a `-C` between MEMBER names (or after `-T`)
/// put the names after it elsewhere; one destination per run cannot, so several `-C`s with
/// one after a name are refused. A single `-C` is DIR wherever it stands (GNU tar would
/// extract the names before it into the current directory: README, "How it differs").
pub(super) fn destination(args: &Args) -> Result<PathBuf> {
    let mut dest: Option<PathBuf> = None;
    // Without -f the first operand is the archive, not a name.
    let mut archive_operand = args.input.file.is_none();
    let mut names = false;
    for o in &args.selection.ordered {
        match o {
            Ordered::Operand(_) if std::mem::take(&mut archive_operand) => {}
            Ordered::Operand(_) | Ordered::AddFile(_) | Ordered::FilesFrom(_) => names = true,
            Ordered::Directory(dir) if names && args.selection.directory.len() > 1 => bail!(
                "-C {}: several -C with one after MEMBER names (or -T) would put names in \
                 different directories, which fastuntar does not do: give one -C, or all \
                 before the names",
                dir.display()
            ),
            Ordered::Directory(dir) => {
                dest = Some(match dest {
                    Some(before) => before.join(dir),
                    None => dir.clone(),
                })
            }
            _ => {}
        }
    }
    Ok(dest.unwrap_or_else(|| PathBuf::from(".")))
}

/// `--backup[=CONTROL]` and `--suffix=SUFFIX` with what GNU tar reads of the environment for
/// them: the CONTROL (`$VERSION_CONTROL` for `--backup` without one; empty: the default) and
/// SUFFIX (`$SIMPLE_BACKUP_SUFFIX` without `--suffix`, else `~`) the backups take, or None
/// without either option. `--suffix` alone turns backups on, as in GNU tar.
pub(super) fn backup_wanted<'a>(args: &'a Args, edge: &'a Edge) -> Option<(&'a str, &'a str)> {
    let control = match (args.overwrite.backup.as_deref(), args.overwrite.suffix.as_deref()) {
        (None, None) => return None,
        (Some(""), _) | (None, Some(_)) => edge.version_control.as_deref().unwrap_or(""),
        (Some(control), _) => control,
    };
    let suffix = args.overwrite.suffix.as_deref().or(edge.backup_suffix.as_deref()).unwrap_or("~");
    Some((control, suffix))
}

/// What to do where a member's path exists already. clap keeps these apart
/// (`conflicts_with`): GNU tar's last one wins, which would drop one of two options given
/// without a word.
pub(super) fn old_files(args: &Args) -> OldFiles {
    match () {
        _ if args.overwrite.keep_old_files => OldFiles::Keep,
        _ if args.overwrite.skip_old_files => OldFiles::Skip,
        _ if args.overwrite.keep_newer_files => OldFiles::KeepNewer,
        _ if args.overwrite.no_overwrite_dir => OldFiles::NoOverwriteDir,
        _ if args.overwrite.unlink_first => OldFiles::UnlinkFirst,
        _ => OldFiles::Replace,
    }
}

/// `--direct-io[=WHEN]` and `--no-direct-io`: clap keeps the last of them
/// (`overrides_with`); auto when neither is given.
pub(super) fn direct_io(when: Option<crate::cli::DirectIo>, never: bool) -> DirectIo {
    use crate::cli::DirectIo as Flag;
    match (when, never) {
        (_, true) | (Some(Flag::Never), false) => DirectIo::Never,
        (Some(Flag::Always), false) => DirectIo::Always,
        (Some(Flag::Auto) | None, false) => DirectIo::Auto,
    }
}
