//! Member name / hard-link target → a safe relative path, or a refusal. Pure: no filesystem.
//!
//! The rules follow libarchive's secure-extraction defaults (ARCHIVE_EXTRACT_SECURE_NODOTDOT,
//! SECURE_NOABSOLUTEPATHS handled by stripping as GNU tar does): leading `/` is removed (warned
//! about once per run), `.` and empty components vanish, any `..` component refuses the member,
//! NUL bytes refuse it. Symlinks are the writer's business: `write/dest.rs` never resolves a
//! path through one.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Longest path (in bytes, relative to DIR) extracted: PATH_MAX less its NUL, the longest path
/// the kernel accepts in one call. GNU tar fails longer members with "File name too long"
/// (ENAMETOOLONG from openat relative to DIR); so do we, before anything is tracked for them.
pub const MAX_PATH_BYTES: usize = libc::PATH_MAX as usize - 1;

pub enum Verdict {
    /// Extract at this path. An empty path means the destination directory itself.
    Extract(SafePath),
    /// Nothing left after `--strip-components` (or the name was only `.`/`/`): skip silently,
    /// as GNU tar does.
    Nothing,
    /// Skip the member with this warning.
    Refuse(&'static str),
}

pub struct Sanitizer {
    strip_components: usize,
    /// `--one-top-level`'s directory, as components.
    top: Vec<Vec<u8>>,
    /// An absolute name was judged: its warning is due (`take_note`), once per run.
    absolute: Absolute,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Absolute {
    None,
    Due,
    Said,
}

/// GNU tar's warning, once, at the first absolute name.
const REMOVING_SLASH: &str = "Removing leading '/' from member names";

impl Sanitizer {
    /// `top`: `--one-top-level`'s directory (relative, plain components), put in front of
    /// every path after `--strip-components` unless the path lies at or under it already.
    pub fn new(strip_components: usize, top: Option<&std::path::Path>) -> Sanitizer {
        let top = top
            .map(|t| t.components().map(|c| c.as_os_str().as_bytes().to_vec()).collect())
            .unwrap_or_default();
        Sanitizer { strip_components, top, absolute: Absolute::None }
    }

    /// The warning the last `judge` made due, once per sanitizer: "Removing leading '/' from
    /// member names" at the first absolute name. The caller says it.
    pub fn take_note(&mut self) -> Option<&'static str> {
        match self.absolute {
            Absolute::Due => {
                self.absolute = Absolute::Said;
                Some(REMOVING_SLASH)
            }
            _ => None,
        }
    }

    /// Judges a member name or a hard-link target (both get the same treatment in GNU tar,
    /// including `--strip-components`).
    pub fn judge(&mut self, raw: &[u8]) -> Verdict {
        if raw.contains(&0) {
            return Verdict::Refuse("member name contains a NUL byte; skipped");
        }
        if raw.first() == Some(&b'/') && self.absolute == Absolute::None {
            self.absolute = Absolute::Due;
        }
        // GNU tar counts `.` components when stripping (`./top/a` with 1 gives `top/a`), so strip
        // first and drop `.` afterwards.
        let mut parts = Vec::new();
        for c in raw.split(|&b| b == b'/') {
            match c {
                b"" => {}
                b".." => return Verdict::Refuse("member name contains '..'; skipped"),
                _ => parts.push(c),
            }
        }
        let stripped = !parts.is_empty() && self.strip_components > 0;
        if parts.len() <= self.strip_components && stripped {
            if self.top.is_empty() {
                return Verdict::Nothing;
            }
            parts.clear();
        }
        let mut rest: Vec<&[u8]> =
            parts.into_iter().skip(self.strip_components).filter(|c| *c != b".").collect();
        // `--one-top-level` (GNU tar's `enforce_one_top_level`, after stripping: `top/a` with
        // `--strip-components=1 --one-top-level=X` is `X/a`): a path already at or under the
        // directory stays as it is; `./` becomes the directory itself.
        // A name stripped to nothing is the directory too (GNU tar 1.34: `top/` with
        // `--strip-components=1 --one-top-level=X` gives X its mode and time).
        if !self.top.is_empty() && !self.under_top(&rest) {
            rest.splice(0..0, self.top.iter().map(Vec::as_slice));
        }
        if rest.is_empty() {
            // GNU tar substitutes `.` for an empty name: a directory member then carries the
            // destination's own mode and mtime.
            return if !stripped || !self.top.is_empty() {
                Verdict::Extract(SafePath(PathBuf::new()))
            } else {
                Verdict::Nothing
            };
        }
        let len = rest.iter().map(|c| c.len() + 1).sum::<usize>() - 1;
        if len > MAX_PATH_BYTES {
            return Verdict::Refuse("file name too long (more than PATH_MAX bytes); skipped");
        }
        let path: PathBuf = rest.iter().map(|c| OsStr::from_bytes(c)).collect();
        Verdict::Extract(SafePath(path))
    }

    /// Whether `path` is `--one-top-level`'s directory or lies under it.
    fn under_top(&self, path: &[&[u8]]) -> bool {
        path.len() >= self.top.len() && self.top.iter().zip(path).all(|(t, p)| t == p)
    }
}

/// The name `-t` and `-v` show with `--show-transformed-names`: `name` (already
/// `--transform`ed) as GNU tar 1.34 makes it for extracting, by its own string rules, not
/// `Sanitizer`'s: trailing `/`s set aside (one put back at the end), leading `/`s removed
/// (`safer_name_suffix`), `--strip-components` (`stripped_prefix_len`: nothing left when the
/// name has too few components), then `--one-top-level`'s `top` in front unless the name,
/// past `.` components, is `top` or under it (`enforce_one_top_level`, which then drops `.`
/// components and doubled `/`s). GNU tar also skips a leading `.` of a name's first component
/// (`.X/f` counts as under `X`); fastuntar extracts `.X/f` to `X/.X/f` (README) and shows
/// that. Without either option the name is as given.
pub fn shown_name(name: &[u8], strip: usize, top: Option<&[u8]>) -> Vec<u8> {
    if strip == 0 && top.is_none() {
        return name.to_vec();
    }
    let end = name.iter().rposition(|&b| b != b'/').map_or(0, |e| e + 1);
    let slash = end < name.len();
    let mut rest = &name[..end];
    while let Some(r) = rest.strip_prefix(b"/") {
        rest = r;
    }
    if strip > 0 {
        rest = stripped(rest, strip);
    }
    let mut out = match top {
        None => rest.to_vec(),
        Some(top) => {
            let parts = |s: &'_ [u8]| -> Vec<Vec<u8>> {
                let plain = s.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".");
                plain.map(<[u8]>::to_vec).collect()
            };
            let (at, top_parts) = (parts(rest), parts(top));
            let under = at.len() >= top_parts.len() && at[..top_parts.len()] == top_parts[..];
            match () {
                _ if at.is_empty() => top.to_vec(),
                _ if under => rest.to_vec(),
                _ => [vec![top.to_vec()], at].concat().join(&b'/'),
            }
        }
    };
    if slash {
        out.push(b'/');
    }
    out
}

/// `name` less its first `n` components, as GNU tar's `stripped_prefix_len` counts them (runs
/// of `/` are one separator); empty when it has no more than `n`.
fn stripped(name: &[u8], n: usize) -> &[u8] {
    let mut left = n;
    let mut i = name.iter().position(|&b| b != b'/').unwrap_or(name.len());
    while i < name.len() {
        let slash = name[i] == b'/';
        i += 1;
        if slash {
            left -= 1;
            if left == 0 {
                return &name[i..];
            }
            while name.get(i) == Some(&b'/') {
                i += 1;
            }
        }
    }
    &[]
}

/// A relative path whose components are all plain names (no `/` root, `.`, `..`, or NUL).
/// Only this file constructs one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SafePath(pub(crate) PathBuf);

/// A component of a SafePath as bytes.
fn bytes(c: Component<'_>) -> &[u8] {
    c.as_os_str().as_bytes()
}

impl SafePath {
    /// `path` as given by a program (a routing callback's answer, policy/route.rs), taken only
    /// when it already is safe: relative, every component a plain name (`.` components are
    /// dropped), no NUL byte, at most MAX_PATH_BYTES. Nothing is stripped or repaired: a path
    /// that needs it is none (None).
    pub fn plain(path: &Path) -> Option<SafePath> {
        let mut out = PathBuf::new();
        for c in path.components() {
            match c {
                Component::Normal(n) if !n.as_bytes().contains(&0) => out.push(n),
                Component::CurDir => {}
                _ => return None,
            }
        }
        (out.as_os_str().len() <= MAX_PATH_BYTES).then_some(SafePath(out))
    }

    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The path's components (none for DIR itself).
    pub fn components(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.0.components().map(bytes)
    }

    /// The components of the parent directory.
    pub fn parent_components(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.0.parent().unwrap_or(Path::new("")).components().map(bytes)
    }

    /// The last component (empty for DIR itself).
    pub fn file_name(&self) -> &[u8] {
        self.0.file_name().map_or(&[], |n| n.as_bytes())
    }

    /// DIR itself.
    pub fn is_root(&self) -> bool {
        self.0.as_os_str().is_empty()
    }

    /// As a question shows it: escaped for the locale (`utf8`), and `.` for DIR itself.
    pub fn shown(&self, utf8: bool) -> String {
        if self.is_root() {
            return ".".to_string();
        }
        crate::report::quote(self.0.as_os_str().as_encoded_bytes(), utf8)
    }

    /// True when `other` lies beneath this path (not when they are equal).
    pub fn is_ancestor_of(&self, other: &SafePath) -> bool {
        other.0 != self.0 && other.0.starts_with(&self.0)
    }

    /// Length in bytes, with '/' separators.
    pub fn byte_len(&self) -> usize {
        self.0.as_os_str().len()
    }

    /// For messages: the path as it will be created, escaped like member names.
    /// For messages: the path as printable text, `.` for the destination itself.
    pub fn display(&self) -> String {
        if self.is_root() {
            return ".".to_string();
        }
        crate::report::printable(self.0.as_os_str().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program's path is taken as it is or not at all (`SafePath::plain`).
    #[test]
    fn plain_paths_are_taken_or_refused() {
        use std::ffi::OsStr;
        let plain = |p: &Path| SafePath::plain(p).map(|s| s.0);
        for (given, want) in [
            ("a/b", Some("a/b")),
            ("./a//b/.", Some("a/b")),
            ("", Some("")),
            (".", Some("")),
            ("/a", None),
            ("a/../b", None),
            ("..", None),
            ("a/..", None),
        ] {
            assert_eq!(plain(Path::new(given)), want.map(PathBuf::from), "{given:?}");
        }
        assert_eq!(plain(Path::new(OsStr::from_bytes(b"a\0b"))), None);
        assert_eq!(plain(&PathBuf::from("x".repeat(MAX_PATH_BYTES + 1))), None);
        assert!(plain(&PathBuf::from("x".repeat(MAX_PATH_BYTES))).is_some());
    }

    /// The names GNU tar 1.34 lists with `-t --show-transformed-names` (checked against it).
    #[test]
    fn shown_names_are_gnu_tars() {
        let names =
            ["b/", "b/f", "c", "./x/", "./x/y", "x/y/z/", "a/q", "a/", "./", ".a/k", "//abs/g"];
        let shown = |strip, top: Option<&str>| -> Vec<String> {
            let top = top.map(str::as_bytes);
            let show = |n: &&str| String::from_utf8(shown_name(n.as_bytes(), strip, top)).unwrap();
            names.iter().map(show).collect()
        };
        assert_eq!(
            shown(0, Some("a")),
            [
                // `.a/k`: GNU tar shows and extracts `.a/k`; fastuntar extracts `a/.a/k`.
                "a/b/", "a/b/f", "a/c", "a/x/", "a/x/y", "a/x/y/z/", "a/q", "a/", "a/", "a/.a/k",
                "a/abs/g"
            ]
        );
        assert_eq!(shown(1, None), ["/", "f", "", "x/", "x/y", "y/z/", "q", "/", "/", "k", "g"]);
        assert_eq!(
            shown(1, Some("a")),
            ["a/", "a/f", "a", "a/x/", "a/x/y", "a/y/z/", "a/q", "a/", "a/", "a/k", "a/g"]
        );
        assert_eq!(shown(0, None), names);
    }

    fn judge(strip: usize, raw: &str) -> Option<String> {
        judge_top(strip, None, raw)
    }

    fn judge_top(strip: usize, top: Option<&str>, raw: &str) -> Option<String> {
        match Sanitizer::new(strip, top.map(std::path::Path::new)).judge(raw.as_bytes()) {
            Verdict::Extract(p) => Some(p.as_path().to_string_lossy().into_owned()),
            Verdict::Nothing => Some("<nothing>".into()),
            Verdict::Refuse(_) => None,
        }
    }

    #[test]
    fn rules() {
        assert_eq!(judge(0, "a/b/c").as_deref(), Some("a/b/c"));
        assert_eq!(judge(0, "/etc/passwd").as_deref(), Some("etc/passwd"));
        assert_eq!(judge(0, "//a//./b/").as_deref(), Some("a/b"));
        assert_eq!(judge(0, "./").as_deref(), Some(""));
        assert_eq!(judge(0, "").as_deref(), Some(""));
        assert_eq!(judge(0, "../x"), None);
        assert_eq!(judge(0, "a/../../x"), None);
        assert_eq!(judge(0, "a/.."), None);
        assert_eq!(judge(0, "a\0b"), None);
        assert_eq!(judge(0, "..a/b..").as_deref(), Some("..a/b.."));
        assert_eq!(judge(1, "top/a/b").as_deref(), Some("a/b"));
        assert_eq!(judge(2, "top/a").as_deref(), Some("<nothing>"));
        assert_eq!(judge(1, "./top/a").as_deref(), Some("top/a"));
        assert_eq!(judge(1, "./").as_deref(), Some("<nothing>"));
        let long = "d/".repeat(2047) + "f";
        assert_eq!(judge(0, &long).map(|p| p.len()), Some(4095));
        assert_eq!(judge(0, &("d/".repeat(2048) + "f")), None);
        // Padding the sanitiser removes does not count.
        assert_eq!(judge(0, &("/".repeat(1 << 20) + "a/./b")).as_deref(), Some("a/b"));
    }

    #[test]
    fn one_top_level() {
        let t = |strip, raw| judge_top(strip, Some("X"), raw);
        assert_eq!(t(0, "a/b").as_deref(), Some("X/a/b"));
        assert_eq!(t(0, "X").as_deref(), Some("X"));
        assert_eq!(t(0, "X/a").as_deref(), Some("X/a"));
        assert_eq!(t(0, "./X/a").as_deref(), Some("X/a"));
        assert_eq!(t(0, "/X/a").as_deref(), Some("X/a"));
        assert_eq!(t(0, "Xa/b").as_deref(), Some("X/Xa/b"));
        assert_eq!(t(0, "./").as_deref(), Some("X"));
        // After --strip-components: `top/X/a` is already under X, `top/a` is not.
        assert_eq!(t(1, "top/a").as_deref(), Some("X/a"));
        assert_eq!(t(1, "top/X/a").as_deref(), Some("X/a"));
        assert_eq!(t(1, "top").as_deref(), Some("X"));
        assert_eq!(t(1, "./").as_deref(), Some("X"));
        assert_eq!(judge_top(0, Some("X/Y"), "X/a").as_deref(), Some("X/Y/X/a"));
        assert_eq!(judge_top(0, Some("X/Y"), "X/Y/a").as_deref(), Some("X/Y/a"));
        assert_eq!(t(0, "../a"), None);
    }
}
