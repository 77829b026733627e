//! What may land: `--strip-components`, `--one-top-level`'s directory, `--snapshot` and the
//! limits, owners, times, attributes, `-G`.

use super::*;

/// The limits, owners, times and attributes into `opts`: sizes read, GNU tar's defaults for
/// root (owners restored unless `--no-same-owner`), `--xattrs` with its filter.
pub(super) fn member_options(args: &Args, edge: &Edge, opts: &mut Options) -> Result<()> {
    let opt_size = |s: &Option<String>, flag: &str| -> Result<Option<u64>> {
        s.as_deref().map(parse_size).transpose().with_context(|| flag.to_string())
    };
    opts.limits = Limits {
        max_files: args.limits.max_files,
        max_bytes: opt_size(&args.limits.max_bytes, "--max-bytes")?,
        max_member_size: opt_size(&args.limits.max_member_size, "--max-member-size")?,
    };
    opts.snapshot = args.limits.snapshot;
    if args.attributes.xattrs_on && args.limits.snapshot {
        bail!(
            "--xattrs cannot be used with --snapshot: the snapshot layout holds only files \
             and directories with fixed modes"
        );
    }
    opts.xattrs = args
        .attributes
        .xattrs_on
        .then(|| {
            crate::metadata::xattrs::XattrFilter::new(
                &args.attributes.xattrs_include,
                &args.attributes.xattrs_exclude,
            )
        })
        .transpose()?;
    opts.strip_components = args.names.strip_components;
    // As GNU tar: restored by default for root (`--no-same-owner` says not), by request
    // for everyone else.
    opts.same_owner =
        args.attributes.same_owner || (!args.attributes.no_same_owner && edge.machine.root);
    opts.numeric_owner = args.attributes.numeric_owner;
    opts.touch = args.attributes.touch;
    opts.acls = args.attributes.acls_on;
    opts.incremental = args.operation.incremental || args.operation.listed_incremental.is_some();
    Ok(())
}

/// Suffixes GNU tar 1.34 strips from the archive's base name to name `--one-top-level`'s
/// directory (suffix.c `compression_suffixes`), and `lz4`, which 1.34 does not know: after
/// one that does not start with `t`, a `.tar` before it goes too (`a.tar.gz` → `a`, `a.gz` →
/// `a`, `a.tgz.tar` → `a.tgz`). Case matters (`a.TAR` is not deduced).
const TOP_LEVEL_SUFFIXES: &[&str] = &[
    "tar", "gz", "tgz", "taz", "Z", "taZ", "bz2", "tbz", "tbz2", "tz2", "lz", "lzma", "tlz", "lzo",
    "xz", "txz", "zst", "tzst", "lz4",
];

/// `--one-top-level[=DIR]`: DIR as plain components (None: `.`, nothing to add), or without
/// DIR the archive's base name less its suffix (GNU tar's `strip_compression_suffix`); standard
/// input, or a name without a known suffix, is GNU tar's usage error. A DIR that would leave the
/// destination (absolute, `..`) is refused, whether given or deduced.
pub(super) fn top_level(
    dir: &std::path::Path,
    archive: Option<&std::path::Path>,
) -> Result<Option<PathBuf>> {
    use std::path::Component;
    let deduced;
    let dir = if dir.as_os_str().is_empty() {
        let cannot = || {
            anyhow::anyhow!(
                "Cannot deduce top-level directory name; please set it explicitly with \
                 --one-top-level=DIR"
            )
        };
        // A URL's name is its path's last segment: the query string (a presigned URL's
        // signature, which may hold '/') and the fragment are not part of it; an s3:// key is
        // taken as it is ('?' and '#' are characters of it).
        let url_path = archive.filter(|a| crate::decode::url::is_url(a.as_os_str())).map(|a| {
            let text = a.to_string_lossy();
            match crate::decode::url::s3::is_s3(&text) {
                true => PathBuf::from(text.as_ref()),
                false => PathBuf::from(text.split(['?', '#']).next().unwrap_or("")),
            }
        });
        let archive = url_path.as_deref().or(archive);
        let base = archive.and_then(|a| a.file_name()).ok_or_else(cannot)?.as_bytes();
        let dot = base.iter().rposition(|&b| b == b'.').ok_or_else(cannot)?;
        let suffix = &base[dot + 1..];
        if !TOP_LEVEL_SUFFIXES.iter().any(|s| s.as_bytes() == suffix) {
            return Err(cannot());
        }
        let mut len = dot;
        if len > 4 && &base[len - 4..len] == b".tar" && suffix[0] != b't' {
            len -= 4;
        }
        if len == 0 {
            return Err(cannot());
        }
        deduced = PathBuf::from(std::ffi::OsStr::from_bytes(&base[..len]));
        &deduced
    } else {
        dir
    };
    let mut out = PathBuf::new();
    for c in dir.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => bail!(
                "--one-top-level: {}: the directory must lie inside the destination (no leading \
                 '/', no '..')",
                dir.display()
            ),
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}
