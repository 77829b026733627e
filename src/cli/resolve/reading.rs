//! How the archive is read: `--pax-option`'s list, as GNU tar reads it.

use super::*;

/// GNU tar's PAX keywords that `--pax-option delete=` may not name (xheader.c's protected
/// ones: without them sparse files, incremental and multi-volume archives would be misread).
const PROTECTED_PAX_KEYWORDS: &[&str] = &[
    "GNU.sparse.name",
    "GNU.sparse.major",
    "GNU.sparse.minor",
    "GNU.sparse.realsize",
    "GNU.sparse.numblocks",
    "GNU.sparse.size",
    "GNU.sparse.numbytes",
    "GNU.sparse.offset",
    "GNU.sparse.map",
    "GNU.dumpdir",
    "GNU.volume.label",
    "GNU.volume.filename",
    "GNU.volume.size",
    "GNU.volume.offset",
];

/// `--pax-option LIST`s as GNU tar 1.34 reads them (xheader.c `xheader_set_option` and
/// `xheader_set_keyword_equal`): comma-separated `KEYWORD=VALUE`s or `KEYWORD:=VALUE`s, the
/// keyword taken as written up to the `=` (less the `:`), the value from its first non-blank.
/// `delete` gives a pattern of keywords to skip in `x` headers (one matching a protected
/// keyword is refused); `exthdr.name`, `globexthdr.name`, `exthdr.mtime`, `globexthdr.mtime`
/// are for making archives. Any other keyword is an override, which GNU tar applies to what it
/// reads: refused for the keywords that would change what is extracted (`uname=bob`), and
/// for a protected keyword as GNU tar refuses it; accepted for the others, which change
/// nothing there either.
pub(super) fn pax_delete(options: &[String]) -> Result<Vec<std::ffi::CString>> {
    /// The keywords an override of would change what GNU tar extracts or lists.
    const APPLIED: &[&str] =
        &["path", "linkpath", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"];
    let mut patterns = Vec::new();
    for token in options.iter().flat_map(|o| o.split(',')).filter(|t| !t.is_empty()) {
        let Some((keyword, value)) = token.split_once('=') else {
            bail!("--pax-option: Keyword {token} is unknown or not yet implemented");
        };
        let keyword = keyword.strip_suffix(':').unwrap_or(keyword);
        let value = value.trim_start_matches(|c: char| c.is_ascii_whitespace());
        match keyword {
            "delete" => {
                let pattern = std::ffi::CString::new(value)
                    .map_err(|_| anyhow::anyhow!("--pax-option: a NUL in {value:?}"))?;
                if PROTECTED_PAX_KEYWORDS.iter().any(|k| crate::archive::pax_deleted(&pattern, k)) {
                    bail!("--pax-option: Pattern '{value}' cannot be used");
                }
                patterns.push(pattern);
            }
            "exthdr.name" | "globexthdr.name" | "exthdr.mtime" | "globexthdr.mtime" => {}
            k if PROTECTED_PAX_KEYWORDS.contains(&k) => {
                bail!("--pax-option: Keyword {k} cannot be overridden")
            }
            k if APPLIED.contains(&k)
                || k.starts_with("SCHILY.")
                || k.starts_with("LIBARCHIVE.") =>
            {
                bail!(
                    "--pax-option {k}={value}: overriding a keyword's value is not supported \
                     (fastuntar reads the archive's values; delete={k} ignores them)"
                )
            }
            _ => {}
        }
    }
    Ok(patterns)
}
