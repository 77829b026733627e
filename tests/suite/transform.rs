//! Differential test of `fastuntar::__private::selection::transform` against GNU tar 1.34's `--transform`: GNU tar
//! builds an archive of varied names (directories, dots, case, spaces, control and non-UTF-8
//! bytes, symlinks, hard links), lists it with `-tv --show-transformed-names` under each case's
//! options, and every listed name and link target must be what `Transforms::apply` makes of
//! the stored one. Expressions GNU tar refuses (exit status 2) must be refused by `parse`, with
//! the same message.
//!
//! Matrix rows: none (tests/util/engine.rs). It runs no extraction: the library's
//! `Transforms` against GNU tar's listing.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fastuntar::__private::selection::transform::{NameKind, Transforms};

#[derive(Clone, Copy)]
enum Kind {
    Dir,
    File,
    Symlink(&'static [u8]),
    /// A second name for this earlier file.
    Hardlink(&'static [u8]),
}

/// The archive's members, in order (parents first).
const TREE: &[(&[u8], Kind)] = &[
    (b"abab", Kind::File),
    (b"aaa", Kind::Dir),
    (b"aaa/bbb", Kind::Dir),
    (b"aaa/bbb/ccc.txt", Kind::File),
    (b"aaaa.bbbb", Kind::File),
    (b"Dir.Upper", Kind::Dir),
    (b"Dir.Upper/MiXeD.Case.TXT", Kind::File),
    (b"x y", Kind::Dir),
    (b"x y/with space", Kind::File),
    (b"dots", Kind::Dir),
    (b"dots/.hidden", Kind::File),
    (b"dots/a.b.c.d", Kind::File),
    (b"dots/..double", Kind::File),
    (b"back\\slash", Kind::File),
    (b"semi;colon", Kind::File),
    (b"amp&and", Kind::File),
    (b"1234", Kind::File),
    (b"tab\tname", Kind::File),
    (b"new\nline", Kind::File),
    (b"caf\xe9", Kind::File),
    (b"xyzzy", Kind::File),
    (b"deep", Kind::Dir),
    (b"deep/cab", Kind::Dir),
    (b"deep/cab/bac", Kind::Dir),
    (b"deep/cab/bac/abc.Txt", Kind::File),
    (b"links", Kind::Dir),
    (b"links/rel", Kind::Symlink(b"../aaa/bbb/ccc.txt")),
    (b"links/abs", Kind::Symlink(b"/abs/Target/path")),
    (b"links/sl", Kind::Symlink(b"abab")),
    (b"links/dots", Kind::Symlink(b"a.b/c.d")),
    (b"links/hard", Kind::Hardlink(b"aaa/bbb/ccc.txt")),
    (b"links/hard2", Kind::Hardlink(b"abab")),
];

/// Accepted cases: the `--transform` options of one run.
const ACCEPTED: &[&[&str]] = &[
    &[""],
    &["s/a/X/"],
    &["s/a/X/g"],
    &["s/a/X/2"],
    &["s/a/X/2g"],
    &["s/b/X/2"],
    &["s/b/X/3g"],
    &["s/a/X/010"],
    &["s/a/X/0x2"],
    &["s,[^/],X,010"],
    &["s/a/X/4294967298"],
    &["s,^[^/]*,new,"],
    &["s/^/prefix\\//"],
    &["s/^a/X/2"],
    &["s/^a/X/g"],
    &["s/a\\|b$/X/g"],
    &["s/$/.end/"],
    &["s/\\//_/g"],
    &["s/[.]/DOT/g"],
    &["s/\\./\\\\/g"],
    &["s/x*/-/3"],
    &["s/d*/D/2"],
    &["s/a*/X/4"],
    &["s/x*/-/"],
    &["s/\\>/X/g"],
    &["s/\\(a*\\)\\(b\\)/<\\2\\1>/g"],
    &["s,\\([^/]*\\)/\\(.*\\),\\2/\\1,"],
    &["s/(a|b)+/[&]/gx"],
    &["s/([a-z]+)\\.([a-z]+)$/\\2.\\1/x"],
    &["s/^(.)(.*)$/\\U\\1\\E\\2/x"],
    &["s/[a-z][a-z]*/\\U&/g"],
    &["s/.*/\\L&/"],
    &["s/.*/\\u&/"],
    &["s,[^/]*$,\\u&,"],
    &["s/\\([a-z]\\)\\([a-z]*\\)/\\u\\1\\U\\2\\E!/g"],
    &["s/.*/\\L\\u&/"],
    &["s/.*/\\u\\L&/"],
    &["s/\\(.\\)\\(.\\)/\\u\\u\\1\\2/"],
    &["s/\\(a\\)/\\1\\U/g"],
    &["s/[A-Z]/\\l&/g"],
    &["s/b/\\Uxy&\\Ez/g"],
    &["s/a/\\uxx\\lYY/"],
    &["s/\\(b\\)\\|\\(c\\)/[\\u\\1\\2]/g"],
    &["s/a/\\n/"],
    &["s/b/\\t\\a\\f\\v\\r/"],
    &["s/b/\\b/"],
    &["s/a/\\&\\\\/g"],
    &["s/a/\\q\\z/"],
    &["s,a,\\,,g"],
    &["s|a|\\||"],
    &["s/a/&&/g"],
    &["s/a/\\0\\0/"],
    &["s/A/z/gi"],
    &["s/dir/D/i"],
    &["s/a/X/;s/b/Y/g"],
    &["s/i;c/I-C/"],
    &["s/a/b/g", "s/b/c/"],
    &["s/a/X/gS"],
    &["s/a/X/gH"],
    &["s/a/X/gR"],
    &["s/a/X/gRH"],
    &["flags=s;s/a/X/g"],
    &["flags=h", "s/b/Y/g", "s/c/Z/r"],
    &["s/\\.\\.\\//up\\//"],
    &["s/^\\/abs/\\/ABS/"],
    &["s/[[:upper:]]/_/g"],
    &["s/z\\{2\\}/Z2/"],
    &["s/\\.\\(TXT\\|txt\\)$/.out/"],
    &["s/caf./cafe/"],
    &["s/[^[:print:]]/?/g"],
    &["s/ /_/g"],
    &["s/&/and/"],
    &["s/b/X/2;s/^a/Y/2"],
    &["s/[.]\\(..\\)/\\u\\1/2g"],
    &["s/\\(a\\)\\(b\\)\\(a\\)\\(b\\)/\\4\\3\\2\\1/"],
    &["s/A/y/ig;s/B/z/2gi"],
];

/// Refused cases.
const REFUSED: &[&[&str]] = &[
    &["x"],
    &["s"],
    &["s/a"],
    &["s/a/b"],
    &["s/a/b\\/"],
    &["s/a/b/q"],
    &["s/a/b/ "],
    &["s/\\(a/b/"],
    &["s/[a/b/"],
    &["s/a\\{1/b/"],
    &["s/(/b/x"],
    &["s/a/\\1/"],
    &["s/\\(a\\)/\\2/"],
    &["s/(a)/\\1/"],
    &["s/a/b/;x"],
    &["s/a/b/;;"],
    &["flags=z"],
    // A delimiter inside a bracket expression still ends the regex.
    &["s/\\([^/]*\\)\\/\\(.*\\)/\\2\\/\\1/"],
    &["s/a/b/", "s/c/d/Q"],
];

fn gnu_tar(dir: &Path, args: &[&OsStr]) -> Output {
    Command::new("tar").args(args).current_dir(dir).env("LC_ALL", "C").output().expect("run tar")
}

/// A name as GNU tar's default `escape` quoting style shows it in the C locale.
fn escaped(name: &[u8]) -> String {
    let mut s = String::new();
    for &b in name {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x0c => s.push_str("\\f"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x0b => s.push_str("\\v"),
            0x20..=0x7e => s.push(char::from(b)),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s
}

/// The part of a `tar -tv` line after the mode, owner, size, date and time.
fn listed_name(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start_matches(' ');
        rest = &rest[rest.find(' ').unwrap_or(rest.len())..];
    }
    rest.strip_prefix(' ').unwrap_or_else(|| panic!("unexpected tar -tv line {line:?}"))
}

/// What `tar -tv` should list for every member under `transforms`.
fn expected(transforms: &Transforms) -> Vec<String> {
    let apply = |name: &[u8], kind| {
        let out = transforms.apply(name, kind).unwrap_or_else(|| name.to_vec());
        escaped(&out)
    };
    TREE.iter()
        .map(|&(name, kind)| {
            // GNU tar transforms a name without its trailing `/` (a directory is stored with
            // one) and lists a directory with a `/` appended.
            let shown = apply(name, NameKind::Member);
            match kind {
                Kind::Dir => shown + "/",
                Kind::File => shown,
                Kind::Symlink(t) => format!("{shown} -> {}", apply(t, NameKind::SymlinkTarget)),
                Kind::Hardlink(t) => {
                    format!("{shown} link to {}", apply(t, NameKind::HardlinkTarget))
                }
            }
        })
        .collect()
}

fn listing(dir: &Path, options: &[&str]) -> Output {
    let mut args: Vec<&OsStr> =
        ["-tvf", "a.tar", "--show-transformed-names", "--numeric-owner"].map(OsStr::new).into();
    let opts: Vec<String> = options.iter().map(|o| format!("--transform={o}")).collect();
    args.extend(opts.iter().map(OsStr::new));
    gnu_tar(dir, &args)
}

/// Our message in GNU tar's words: without the expression we add, and a flag byte unquoted.
fn gnu_words(ours: &str) -> String {
    let core = ours.split(" (in '").next().unwrap();
    let core = if core.starts_with("Invalid transform expression '") {
        "Invalid transform expression"
    } else {
        core
    };
    match core.rsplit_once(": '") {
        Some((head, c)) if core.starts_with("Unknown") => {
            format!("{head}: {}", c.strip_suffix('\'').unwrap())
        }
        _ => core.to_string(),
    }
}

fn make_archive(dir: &Path) {
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    let path = |name: &[u8]| src.join(OsStr::from_bytes(name));
    let mut list = Vec::new();
    for &(name, kind) in TREE {
        match kind {
            Kind::Dir => fs::create_dir(path(name)).unwrap(),
            Kind::File => drop(fs::File::create(path(name)).unwrap()),
            Kind::Symlink(t) => {
                std::os::unix::fs::symlink(OsStr::from_bytes(t), path(name)).unwrap()
            }
            Kind::Hardlink(t) => fs::hard_link(path(t), path(name)).unwrap(),
        }
        list.extend_from_slice(name);
        list.push(0);
    }
    fs::File::create(dir.join("list")).unwrap().write_all(&list).unwrap();
    let tar = dir.join("a.tar");
    let args = [OsStr::new("-cf"), tar.as_os_str(), OsStr::new("--no-recursion")];
    let list_path = dir.join("list");
    let more = [OsStr::new("--null"), OsStr::new("-T"), list_path.as_os_str()];
    let out = gnu_tar(&src, &[&args[..], &more[..]].concat());
    assert!(out.status.success(), "tar -c failed: {}", String::from_utf8_lossy(&out.stderr));
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn transform_matches_gnu_tar() {
    let version = Command::new("tar").arg("--version").env("LC_ALL", "C").output();
    let is_gnu = version.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU tar"));
    if !is_gnu {
        crate::util::skip("transform_matches_gnu_tar", "GNU tar missing");
        return;
    }
    let dir =
        TempDir(std::env::temp_dir().join(format!("fastuntar-transform-{}", std::process::id())));
    let _ = fs::remove_dir_all(&dir.0);
    fs::create_dir_all(&dir.0).unwrap();
    make_archive(&dir.0);

    let mut failures = Vec::new();
    // The first case ("" : no expression) also checks the stored names and `escaped`.
    for options in ACCEPTED {
        let out = listing(&dir.0, options);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || !stderr.is_empty() {
            failures.push(format!("{options:?}: GNU tar says {stderr:?}"));
            continue;
        }
        let ours = Transforms::parse(options).unwrap_or_else(|e| panic!("{options:?}: {e:#}"));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let theirs: Vec<&str> = stdout.lines().map(listed_name).collect();
        let want = expected(&ours);
        assert_eq!(theirs.len(), want.len(), "{options:?}: member count");
        for (g, w) in theirs.iter().zip(&want) {
            if g != w {
                failures.push(format!("{options:?}: GNU tar {g:?}, ours {w:?}"));
            }
        }
    }
    for options in REFUSED {
        let out = listing(&dir.0, options);
        assert_eq!(out.status.code(), Some(2), "GNU tar accepted {options:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let theirs = stderr.lines().next().unwrap().strip_prefix("tar: ").unwrap().to_string();
        match Transforms::parse(options) {
            Ok(_) => failures.push(format!("{options:?}: we accept, GNU tar says {theirs:?}")),
            Err(e) => {
                let ours = format!("{e:#}");
                assert!(!ours.contains('\n'), "{ours:?} is not one line");
                if gnu_words(&ours) != theirs {
                    failures.push(format!("{options:?}: GNU tar {theirs:?}, ours {ours:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}
