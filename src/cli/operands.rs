//! MEMBER names and `--exclude` patterns from the command line, read in command-line order as
//! GNU tar 1.34 reads them (argp's ARGP_IN_ORDER): `--wildcards`/`--no-wildcards`, `--null`,
//! `--unquote`/`--no-unquote` and `--verbatim-files-from` apply to what comes after them.
//!
//! - MEMBER operands and `-T FILE` names are unquoted (C escapes: `\\`, `\n`, `\141`, ...)
//!   unless `--no-unquote` came before them; a `-T` FILE has one name per line, or per NUL with
//!   `--null`, empty ones skipped, nothing trimmed. GNU tar reads a `-T` line that starts with
//!   `-` as an option; fastuntar refuses it in one line (names.c's option handling is not
//!   copied), unless `--null` or `--verbatim-files-from` makes it a name.
//! - `--exclude` patterns are taken as given; an `-X FILE` has one per line, trailing blanks
//!   removed and blank lines skipped, each ending at a NUL (gnulib's `add_exclude_fp`).
//! - A MEMBER is a pattern when `--wildcards` came before it; an exclude pattern unless
//!   `--no-wildcards` did.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::cli::Ordered;
use crate::report::quoting::unquote;
pub use crate::selection::given::{Flags, Given};

/// GNU tar's `vcs_file_table` (tar.c): what `--exclude-vcs` excludes.
pub const VCS_FILES: &[&str] = &[
    "CVS",
    ".cvsignore",
    "RCS",
    "SCCS",
    ".svn",
    ".git",
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    ".arch-ids",
    "{arch}",
    "=RELEASE-ID",
    "=meta-update",
    "=update",
    ".bzr",
    ".bzrignore",
    ".bzrtags",
    ".hg",
    ".hgignore",
    ".hgtags",
    "_darcs",
];

/// GNU tar's `backup_file_table` (tar.c): what `--exclude-backups` excludes, as patterns.
pub const BACKUP_FILES: &[&str] = &[".#*", "*~", "#*#"];

/// What the command line selects.
#[derive(Debug)]
pub struct Selection {
    pub members: Vec<Given>,
    pub exclude: Vec<Given>,
    /// `--recursion`/`--no-recursion` as the command line leaves it (GNU tar's global
    /// `recursion_option`, which `--occurrence` counts by).
    pub recursion: bool,
    /// A `-T -` or `-X -` list was read from standard input.
    pub read_stdin: bool,
}

/// Reads `ordered` (cli.rs) in order. `skip_first_operand`: the first operand is the archive
/// (no -f). `stdin_taken`: the archive is read from standard input, so no `-T -`/`-X -`.
/// What is worth a warning (a `-T` list with a NUL) goes to `notes`.
pub fn resolve(
    ordered: &[Ordered],
    skip_first_operand: bool,
    stdin_taken: bool,
    notes: &mut Vec<String>,
) -> Result<Selection> {
    let mut sel =
        Selection { members: Vec::new(), exclude: Vec::new(), recursion: true, read_stdin: false };
    // None: the default, literal MEMBERs and wildcard exclude patterns.
    let mut wildcards: Option<bool> = None;
    let (mut null, mut unquote_names, mut verbatim) = (false, true, false);
    let mut skip = skip_first_operand;
    // The last --anchored/--no-anchored, --ignore-case/..., as GNU tar's matching_flags.
    let (mut anchored, mut ignore_case, mut slash, mut recursion) = (None, false, true, true);
    let flags = |anchored: Option<bool>, default, ignore_case, slash, recursion| Flags {
        anchored: anchored.unwrap_or(default),
        ignore_case,
        slash,
        recursion,
    };
    for o in ordered {
        let member_flags = flags(anchored, true, ignore_case, slash, recursion);
        let exclude_flags = flags(anchored, false, ignore_case, slash, recursion);
        match o {
            Ordered::Operand(_) if skip => skip = false,
            // config.rs `destination`.
            Ordered::Directory(_) => {}
            Ordered::Operand(text) | Ordered::AddFile(text) => {
                sel.members.push(member(text.as_bytes(), unquote_names, wildcards, member_flags));
            }
            Ordered::FilesFrom(path) => {
                sel.read_stdin |= path.as_os_str() == "-";
                for name in files_from(path, stdin_taken, null, verbatim, notes)? {
                    sel.members.push(member(&name, unquote_names, wildcards, member_flags));
                }
            }
            Ordered::Exclude(p) => {
                sel.exclude.push(Given {
                    text: p.as_bytes().to_vec(),
                    wildcards: wildcards.unwrap_or(true),
                    flags: exclude_flags,
                });
            }
            Ordered::ExcludeFrom(path) => {
                let what = || format!("--exclude-from {}", path.display());
                let text = read(path, stdin_taken).with_context(what)?;
                sel.read_stdin |= path.as_os_str() == "-";
                let wildcards = wildcards.unwrap_or(true);
                let given =
                    |text: &[u8]| Given { text: text.to_vec(), wildcards, flags: exclude_flags };
                sel.exclude.extend(exclude_patterns(&text).map(given));
            }
            Ordered::Wildcards(on) => wildcards = Some(*on),
            Ordered::Null(on) => null = *on,
            Ordered::Unquote(on) => unquote_names = *on,
            Ordered::Verbatim(on) => verbatim = *on,
            Ordered::Anchored(on) => anchored = Some(*on),
            Ordered::IgnoreCase(on) => ignore_case = *on,
            Ordered::WildcardsMatchSlash(on) => slash = *on,
            Ordered::Recursion(on) => recursion = *on,
            // bsdtar's meaning, and GNU tar's when it creates an archive: the names and what
            // is under them, wherever they are, whatever the switches say. (GNU tar 1.34
            // extracting excludes only the entries themselves: a `.git` directory's files
            // are extracted and make it anew.)
            Ordered::ExcludeVcs => {
                sel.exclude.extend(VCS_FILES.iter().map(|f| Given::new(f.as_bytes(), false, false)))
            }
            // As GNU tar 1.34 matches them when extracting: wildcards, unanchored, but the
            // entries themselves only (`bk~/` is left out, `bk~/f` extracted), whatever the
            // switches say.
            Ordered::ExcludeBackups => sel.exclude.extend(BACKUP_FILES.iter().map(|f| {
                let mut g = Given::new(f.as_bytes(), true, false);
                g.flags.recursion = false;
                g
            })),
        }
    }
    sel.recursion = recursion;
    Ok(sel)
}

/// A MEMBER name as given: C escapes decoded unless `--no-unquote`, literal unless
/// `--wildcards`.
fn member(text: &[u8], unquote_names: bool, wildcards: Option<bool>, flags: Flags) -> Given {
    Given {
        text: if unquote_names { unquote(text) } else { text.to_vec() },
        wildcards: wildcards.unwrap_or(false),
        flags,
    }
}

/// The names a `-T` FILE gives (`-` is standard input), as `list_names` reads them: a name
/// starting with `-` is refused unless `--null` or `--verbatim-files-from`.
fn files_from(
    path: &Path,
    stdin_taken: bool,
    null: bool,
    verbatim: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<Vec<u8>>> {
    let what = || format!("--files-from {}", path.display());
    let text = read(path, stdin_taken).with_context(what)?;
    let (names, nul) = list_names(&text, null);
    if nul {
        notes.push(format!(
            "{}: a name read contains a NUL byte; NUL separates the names after it",
            path.display()
        ));
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names {
        if name[0] == b'-' && !null && !verbatim {
            bail!(
                "{}: name {}: it starts with '-' (GNU tar would read an option there; \
                 --verbatim-files-from reads it as a name)",
                path.display(),
                i + 1
            );
        }
        out.push(name.to_vec());
    }
    Ok(out)
}

/// The names of a `-T` FILE with their numbers (from 0, empty lines counted), empty ones
/// left out: one a line, or with `--null` one per NUL. Without `--null` a NUL ends the name
/// and makes NUL the separator from there on, as in GNU tar (names.c read_name_from_file,
/// which warns so: the bool).
fn list_names(text: &[u8], null: bool) -> (Vec<(usize, &[u8])>, bool) {
    let (lines, rest, nul) = match text.iter().position(|&b| b == 0) {
        _ if null => (&[][..], text, false),
        Some(at) => (&text[..at], &text[at + 1..], true),
        None => (text, &[][..], false),
    };
    let names = lines.split(|&b| b == b'\n').chain(rest.split(|&b| b == 0));
    (names.enumerate().filter(|(_, n)| !n.is_empty()).collect(), nul)
}

/// The patterns of an `--exclude-from` FILE: one a line, cut at a NUL, trailing blanks
/// dropped, empty ones left out.
fn exclude_patterns(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n').filter_map(|line| {
        let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
        let end = line.iter().rposition(|b| !is_c_space(*b)).map_or(0, |e| e + 1);
        (end > 0).then(|| &line[..end])
    })
}

/// C's isspace in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// A FILE of names or patterns ('-': standard input, unless the archive is read from there).
fn read(path: &Path, stdin_taken: bool) -> Result<Vec<u8>> {
    if path.as_os_str() == OsStr::new("-") {
        if stdin_taken {
            bail!("standard input is already the archive");
        }
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut text)
            .context("cannot read standard input")?;
        return Ok(text);
    }
    std::fs::read(path).context("cannot read")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::PathBuf;

    fn op(s: &str) -> Ordered {
        Ordered::Operand(OsString::from(s))
    }

    fn given(text: &str, wildcards: bool, anchored: bool) -> Given {
        Given::new(text.as_bytes(), wildcards, anchored)
    }

    #[test]
    fn switches_apply_to_what_follows() {
        let ordered = [
            op("archive.tar"),
            op("lit*"),
            Ordered::Exclude("ex*".into()),
            Ordered::Wildcards(true),
            op("pat*"),
            Ordered::Unquote(false),
            op("raw\\141"),
            Ordered::Wildcards(false),
            Ordered::Exclude("lit-ex*".into()),
            Ordered::Unquote(true),
            op("\\141"),
        ];
        let sel = resolve(&ordered, true, false, &mut Vec::new()).unwrap();
        assert_eq!(
            sel.members,
            [
                given("lit*", false, true),
                given("pat*", true, true),
                given("raw\\141", true, true),
                given("a", false, true)
            ]
        );
        assert_eq!(sel.exclude, [given("ex*", true, false), given("lit-ex*", false, false)]);
    }

    #[test]
    fn files_from_and_exclude_from() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names");
        std::fs::write(&names, "a\n\nb c \n\\142\n").unwrap();
        let dashed = dir.path().join("dashed");
        std::fs::write(&dashed, "x\n-Csub\n").unwrap();
        let nul = dir.path().join("nul");
        std::fs::write(&nul, "-n1\0\0n2\0").unwrap();
        let ex = dir.path().join("ex");
        std::fs::write(&ex, "y \nab\r\n  \n\ncut\0off\n").unwrap();
        let ff = |p: &PathBuf| Ordered::FilesFrom(p.clone());
        let sel =
            resolve(&[ff(&names), Ordered::ExcludeFrom(ex.clone())], false, false, &mut Vec::new())
                .unwrap();
        let names_given: Vec<_> = sel.members.iter().map(|g| g.text.clone()).collect();
        assert_eq!(names_given, [&b"a"[..], b"b c ", b"b"]);
        let ex_given: Vec<_> = sel.exclude.iter().map(|g| g.text.clone()).collect();
        assert_eq!(ex_given, [&b"y"[..], b"ab", b"cut"]);
        let e = resolve(&[ff(&dashed)], false, false, &mut Vec::new()).unwrap_err();
        assert!(format!("{e:#}").contains("dashed: name 2: it starts with '-'"), "{e:#}");
        let sel = resolve(&[Ordered::Verbatim(true), ff(&dashed)], false, false, &mut Vec::new())
            .unwrap();
        assert_eq!(sel.members.len(), 2);
        let sel = resolve(&[ff(&nul)], false, false, &mut Vec::new()).unwrap_err();
        assert!(format!("{sel:#}").contains("it starts with '-'"));
        let sel = resolve(&[Ordered::Null(true), ff(&nul)], false, false, &mut Vec::new()).unwrap();
        let names_given: Vec<_> = sel.members.iter().map(|g| g.text.clone()).collect();
        assert_eq!(names_given, [&b"-n1"[..], b"n2"]);
        let e = resolve(&[ff(&PathBuf::from("-"))], false, true, &mut Vec::new()).unwrap_err();
        assert!(format!("{e:#}").contains("standard input is already the archive"));
    }
}
