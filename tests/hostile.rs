//! Hostile archives: nothing outside DIR may be created, modified, linked or chmodded.
//!
//! Every case runs in a scene
//!
//! ```text
//! case/archive.tar
//! case/tmp/sentinel/...   files, a subdir, a symlink: snapshotted before and after
//! case/tmp/dest/          DIR
//! ```
//!
//! under every writer configuration, and checks after extraction that
//! * the sentinel's full snapshot (types, modes, mtimes incl. the sentinel dir's own, owners,
//!   contents, symlink targets) is unchanged,
//! * `case/` and `case/tmp/` hold nothing new and DIR is still a real directory,
//! * no inode under DIR is one of the sentinel's (no hard link to anything outside),
//! * fastuntar did not panic, hang or die of a signal (the runner checks that),
//! * the exit code and the warnings are the intended ones (tar's message shape:
//!   `fastuntar: MEMBER: what happened`).
//!
//! The rules are libarchive's secure defaults: a leading `/` is stripped (one warning); a member
//! with a `..` component is skipped (warning, exit 1); nothing is resolved through a symlink,
//! archive-made or pre-existing (warning, exit 1); a member replaces what is at its path by
//! unlinking it first, never writing through a symlink or into a hard link's other names.

mod util;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use util::rawtar::{self, Header, Num, Tar};
use util::snapshot::{Compare, Kind, assert_same, snapshot};
use util::tree::set_mtime;
use util::{Output, TestDir, fastuntar_with, for_each_config};

struct Scene {
    case: PathBuf,
    tmp: PathBuf,
    sentinel: PathBuf,
    dest: PathBuf,
}

impl Scene {
    fn new(td: &TestDir) -> Scene {
        let case = td.fresh("case");
        let tmp = case.join("tmp");
        let sentinel = tmp.join("sentinel");
        let dest = tmp.join("dest");
        fs::create_dir_all(sentinel.join("sub")).unwrap();
        fs::create_dir(&dest).unwrap();
        fs::write(sentinel.join("file"), b"sentinel file\n").unwrap();
        fs::write(sentinel.join("f"), b"sentinel f, hard-linked into DIR by some cases\n").unwrap();
        fs::write(sentinel.join("sub/inner"), b"inner\n").unwrap();
        symlink("file", sentinel.join("link")).unwrap();
        fs::set_permissions(sentinel.join("file"), fs::Permissions::from_mode(0o640)).unwrap();
        fs::set_permissions(sentinel.join("sub/inner"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(sentinel.join("sub"), fs::Permissions::from_mode(0o750)).unwrap();
        fs::set_permissions(&sentinel, fs::Permissions::from_mode(0o755)).unwrap();
        for (i, p) in ["file", "f", "sub/inner", "link", "sub", ""].iter().enumerate() {
            set_mtime(&sentinel.join(p), 1_000_000_000 + i as i64, 123);
        }
        Scene { case, tmp, sentinel, dest }
    }

    /// The sentinel's absolute path as bytes (for absolute member names and link targets).
    fn abs(&self, rel: &str) -> Vec<u8> {
        let mut v = self.sentinel.as_os_str().as_bytes().to_vec();
        if !rel.is_empty() {
            v.push(b'/');
            v.extend_from_slice(rel.as_bytes());
        }
        v
    }

    /// Where an absolute member name `/x/y` lands once its `/` is stripped: DIR/x/y.
    fn stripped(&self, abs: &[u8]) -> PathBuf {
        let rel = abs.strip_prefix(b"/").unwrap_or(abs);
        self.dest.join(std::ffi::OsStr::from_bytes(rel))
    }

    fn d(&self, rel: &str) -> PathBuf {
        self.dest.join(rel)
    }
}

/// Runs one hostile case: `build` makes the archive for a scene, `prep` arranges DIR before
/// extraction, `check` asserts the intended outcome. The safety checks run after every case.
fn hostile(
    test: &str,
    args: &[&str],
    build: impl Fn(&Scene) -> Vec<u8>,
    prep: impl Fn(&Scene),
    check: impl Fn(&Scene, &Output),
) {
    hostile_with(test, args, false, build, prep, check)
}

/// `hostile`, measuring the peak RSS when `rss` is set.
fn hostile_with(
    test: &str,
    args: &[&str],
    rss: bool,
    build: impl Fn(&Scene) -> Vec<u8>,
    prep: impl Fn(&Scene),
    check: impl Fn(&Scene, &Output),
) {
    let td = TestDir::new(test);
    for_each_config(test, |cfg| {
        let s = Scene::new(&td);
        let archive = s.case.join("archive.tar");
        fs::write(&archive, build(&s)).unwrap();
        prep(&s);
        let before = snapshot(&s.sentinel);
        let mut cmd = fastuntar_with(cfg);
        cmd.arg("-x").arg(&archive).arg("-C").arg(&s.dest).args(args);
        if rss {
            cmd.measure_rss();
        }
        let out = cmd.run();
        let ctx = format!("{test} [{}]\n{}", cfg.name, out.describe());

        assert_same(
            &before,
            "before",
            &snapshot(&s.sentinel),
            "after",
            &Compare::exact(),
            &format!("SENTINEL MODIFIED: {ctx}"),
        );
        let names = |d: &Path| {
            let mut v: Vec<String> = fs::read_dir(d)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            names(&s.case),
            ["archive.tar", "tmp"],
            "something was created beside tmp/: {ctx}"
        );
        assert_eq!(names(&s.tmp), ["dest", "sentinel"], "something was created beside DIR: {ctx}");
        assert!(
            fs::symlink_metadata(&s.dest).unwrap().is_dir(),
            "DIR is no longer a directory: {ctx}"
        );
        let outside = snapshot(&s.sentinel).inodes();
        let inside = snapshot(&s.dest);
        for (p, e) in &inside.entries {
            assert!(
                !outside.contains(&(e.dev, e.ino)),
                "DIR/{} is a hard link to a file outside DIR: {ctx}",
                util::snapshot::show(p)
            );
        }
        check(&s, &out);
    });
}

fn no_prep(_: &Scene) {}

/// Exit 1, and for each of `members` a `fastuntar: ...MEMBER...` warning line.
fn expect_skipped(out: &Output, members: &[&[u8]]) {
    assert_eq!(out.code, Some(1), "expected exit 1 (members skipped)\n{}", out.describe());
    let diags = out.diagnostics();
    assert!(
        diags.iter().all(|l| l.starts_with("fastuntar: ")),
        "every message has tar's shape `fastuntar: MEMBER: what happened`\n{}",
        out.describe()
    );
    for m in members {
        let m = String::from_utf8_lossy(m);
        assert!(
            diags.iter().any(|l| l.contains(m.as_ref())),
            "no warning naming `{m}`\n{}",
            out.describe()
        );
    }
}

fn expect_clean(out: &Output) {
    assert_eq!(out.code, Some(0), "expected exit 0\n{}", out.describe());
}

fn kind(p: &Path) -> Option<Kind> {
    let m = fs::symlink_metadata(p).ok()?;
    let ft = m.file_type();
    Some(if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Fifo
    })
}

fn contents(p: &Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// --- Names --------------------------------------------------------------------------------------

#[test]
fn absolute_names_are_stripped_into_dir() {
    hostile(
        "absolute_names_are_stripped_into_dir",
        &[],
        |s| {
            let mut t = Tar::new();
            t.member(&Header::file(s.abs("x")), b"absolute x\n");
            t.member(&Header::file(s.abs("file")), b"absolute file\n");
            t.member(&Header::file(b"//double/slash"), b"two slashes\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_clean(out);
            assert_eq!(contents(&s.stripped(&s.abs("x"))), b"absolute x\n", "{}", out.describe());
            assert_eq!(contents(&s.stripped(&s.abs("file"))), b"absolute file\n");
            assert_eq!(contents(&s.d("double/slash")), b"two slashes\n", "{}", out.describe());
            let warnings = out.diagnostics();
            assert_eq!(
                warnings.len(),
                1,
                "one warning about the leading `/`, for all members\n{}",
                out.describe()
            );
            assert!(warnings[0].starts_with("fastuntar: "), "{}", out.describe());
        },
    );
}

#[test]
fn dotdot_members_are_skipped() {
    hostile(
        "dotdot_members_are_skipped",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file("../sentinel/x", b"escaped\n");
            t.file("a/../../sentinel/x", b"escaped\n");
            t.file("../sentinel/file", b"overwritten\n");
            t.file("a/../b", b"inside, but spelled with ..\n");
            t.file("..", b"dot dot\n");
            t.dir("../sentinel/newdir");
            t.file("ok", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(
                out,
                &[b"../sentinel/x", b"a/../../sentinel/x", b"../sentinel/file", b"a/../b"],
            );
            assert_eq!(
                contents(&s.d("ok")),
                b"fine\n",
                "members after the skipped ones are extracted"
            );
            assert!(
                kind(&s.d("b")).is_none() && kind(&s.d("a/b")).is_none(),
                "a/../b was not skipped"
            );
        },
    );
}

#[test]
fn dotdot_in_long_names_is_skipped() {
    hostile(
        "dotdot_in_long_names_is_skipped",
        &[],
        |_| {
            let mut t = Tar::new();
            t.gnu_long_name("../sentinel/gnu-long").file("placeholder-name", b"via L\n");
            t.pax(&[(b"path", b"../sentinel/pax-path")]).file("placeholder2", b"via PAX path\n");
            t.pax(&[(b"linkpath", b"../sentinel/file")])
                .header(&Header::hardlink("pax-hardlink", "placeholder"));
            t.gnu_long_link("../sentinel/file")
                .header(&Header::hardlink("gnu-hardlink", "placeholder"));
            t.file("ok", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(
                out,
                &[
                    b"../sentinel/gnu-long",
                    b"../sentinel/pax-path",
                    b"pax-hardlink",
                    b"gnu-hardlink",
                ],
            );
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
    );
}

#[test]
fn strip_components_cannot_expose_dotdot() {
    hostile(
        "strip_components_cannot_expose_dotdot",
        &["--strip-components", "1"],
        |_| {
            let mut t = Tar::new();
            t.file("top/../sentinel/x", b"escaped\n");
            t.file("x/../../sentinel/x", b"escaped\n");
            t.file("top/ok", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            assert_eq!(out.code, Some(1), "{}", out.describe());
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
    );
}

#[test]
fn nul_in_ustar_name_field_ends_the_name() {
    hostile(
        "nul_in_ustar_name_field_ends_the_name",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file(b"nul-ok\0/../../sentinel/x", b"ustar field\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_clean(out);
            assert_eq!(contents(&s.d("nul-ok")), b"ustar field\n", "{}", out.describe());
        },
    );
}

/// A NUL inside a PAX path or a GNU long name. GNU tar 1.34 cuts the name at the NUL (C
/// strings) and extracts `pax-nul`. Accepted here: the same, or the member skipped with a
/// warning (exit 1), or the archive rejected as corrupt (exit 2, one error line) -- never a
/// name with `..` or NUL in it.
#[test]
fn nul_in_extended_names() {
    for (label, ext) in [("PAX path", 0), ("GNU long name", 1)] {
        hostile(
            &format!("nul_in_extended_names ({label})"),
            &[],
            move |_| {
                let mut t = Tar::new();
                if ext == 0 {
                    t.pax(&[("path", &b"pax-nul\0/../../sentinel/x"[..])]).file("p1", b"pax\n");
                } else {
                    t.gnu_long_name(b"pax-nul\0/../../sentinel/x").file("p1", b"gnu\n");
                }
                t.file("after", b"fine\n");
                t.finish()
            },
            no_prep,
            |s, out| {
                match out.code {
                    Some(0) => assert!(kind(&s.d("pax-nul")).is_some(), "{}", out.describe()),
                    Some(1) => expect_skipped(out, &[b"pax-nul"]),
                    _ => {
                        let d = out.diagnostics();
                        assert!(
                            d.len() == 1 && d[0].contains("offset"),
                            "one error line\n{}",
                            out.describe()
                        );
                    }
                }
                for p in snapshot(&s.dest).entries.keys() {
                    assert!(
                        !p.contains(&0) && !p.windows(2).any(|w| w == b".."),
                        "{}",
                        util::snapshot::show(p)
                    );
                }
            },
        );
    }
}

/// An empty member name (ustar or PAX): skipped with a warning; DIR itself is left alone.
/// (GNU tar substitutes `.` and fails to open it as a file: exit 2 at the end.)
#[test]
fn empty_names_are_skipped() {
    hostile(
        "empty_names_are_skipped",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file(b"", b"empty name\n");
            t.pax(&[("path", "")]).file("p3", b"empty pax path\n");
            t.file("after", b"fine\n");
            t.finish()
        },
        |s| {
            fs::write(s.d("keep"), b"pre-existing\n").unwrap();
        },
        |s, out| {
            expect_skipped(out, &[]);
            assert_eq!(contents(&s.d("keep")), b"pre-existing\n", "DIR's contents were clobbered");
            assert_eq!(contents(&s.d("after")), b"fine\n");
            assert!(kind(&s.d("p3")).is_none(), "the PAX path (empty) overrides the header name");
        },
    );
}

#[test]
fn dot_file_members_do_not_replace_dir() {
    hostile(
        "dot_file_members_do_not_replace_dir",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file(".", b"a file named .\n");
            t.file("./", b"a file named ./\n");
            t.file("./.", b"a file named ./.\n");
            t.header(&Header::symlink(".", "../sentinel"));
            t.header(&Header::new("./", rawtar::FIFO));
            t.file("after", b"fine\n");
            t.finish()
        },
        |s| {
            fs::write(s.d("keep"), b"pre-existing\n").unwrap();
        },
        |s, out| {
            expect_skipped(out, &[]);
            assert_eq!(contents(&s.d("keep")), b"pre-existing\n", "DIR's contents were clobbered");
            assert_eq!(contents(&s.d("after")), b"fine\n");
        },
    );
}

#[test]
fn dot_dir_members() {
    hostile(
        "dot_dir_members",
        &[],
        |_| {
            let mut t = Tar::new();
            t.header(&Header::dir(".").mode(0o755));
            t.header(&Header::dir("./").mode(0o755));
            t.header(&Header::dir("./.").mode(0o755));
            t.header(&Header::dir("././sub/.").mode(0o700));
            t.file("./sub/./f", b"f\n");
            t.finish()
        },
        |s| {
            fs::write(s.d("keep"), b"pre-existing\n").unwrap();
        },
        |s, out| {
            expect_clean(out);
            assert_eq!(contents(&s.d("keep")), b"pre-existing\n");
            assert_eq!(contents(&s.d("sub/f")), b"f\n");
            assert_eq!(fs::metadata(s.d("sub")).unwrap().mode() & 0o7777, 0o700);
        },
    );
}

// --- Archive-made symlinks ----------------------------------------------------------------------

#[test]
fn member_under_archive_symlink_is_refused() {
    hostile(
        "member_under_archive_symlink_is_refused",
        &[],
        |_| {
            let mut t = Tar::new();
            t.symlink("l", "../sentinel");
            t.file("l/x", b"through the symlink\n");
            t.file("l/file", b"overwrite through the symlink\n");
            t.file("l/sub/y", b"deeper\n");
            t.dir("l/newdir");
            t.symlink("l/newlink", "x");
            t.file("ok", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"l/x", b"l/file"]);
            assert_eq!(
                fs::read_link(s.d("l")).unwrap().as_os_str().as_bytes(),
                b"../sentinel",
                "symlink target verbatim"
            );
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
    );
}

#[test]
fn member_under_absolute_archive_symlink_is_refused() {
    hostile(
        "member_under_absolute_archive_symlink_is_refused",
        &[],
        |s| {
            let mut t = Tar::new();
            t.member(&Header::symlink("abs", s.abs("")), b"");
            t.file("abs/x", b"through the absolute symlink\n");
            t.file("abs/sub/inner", b"overwrite\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"abs/x", b"abs/sub/inner"]);
            assert_eq!(
                fs::read_link(s.d("abs")).unwrap().as_os_str().as_bytes(),
                s.abs("").as_slice()
            );
        },
    );
}

#[test]
fn symlink_chain_is_not_followed() {
    hostile(
        "symlink_chain_is_not_followed",
        &[],
        |_| {
            let mut t = Tar::new();
            t.symlink("c1", "c2");
            t.symlink("c2", "c3");
            t.symlink("c3", "../sentinel");
            t.file("c1/x", b"through a chain\n");
            t.dir("c1/sub");
            t.symlink("f3", "../sentinel/file");
            t.symlink("f2", "f3");
            t.file("f2", b"replaces f2 itself\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"c1/x"]);
            assert_eq!(kind(&s.d("f2")), Some(Kind::File));
            assert_eq!(contents(&s.d("f2")), b"replaces f2 itself\n");
            assert_eq!(kind(&s.d("f3")), Some(Kind::Symlink));
        },
    );
}

#[test]
fn member_replaces_symlink_instead_of_writing_through_it() {
    hostile(
        "member_replaces_symlink_instead_of_writing_through_it",
        &[],
        |s| {
            let mut t = Tar::new();
            t.symlink("s", "../sentinel/file");
            t.file("s", b"new s\n");
            t.member(&Header::symlink("s-abs", s.abs("file")), b"");
            t.entry(&Header::file("s-abs").mode(0o777), b"new s-abs\n");
            t.symlink("fifo", "../sentinel/f");
            t.header(&Header::new("fifo", rawtar::FIFO));
            t.symlink("link-then-link", "../sentinel/f");
            t.symlink("link-then-link", "elsewhere");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_clean(out);
            assert_eq!(kind(&s.d("s")), Some(Kind::File));
            assert_eq!(contents(&s.d("s")), b"new s\n");
            assert_eq!(contents(&s.d("s-abs")), b"new s-abs\n");
            assert_eq!(fs::symlink_metadata(s.d("s-abs")).unwrap().mode() & 0o7777, 0o777);
            assert_eq!(kind(&s.d("fifo")), Some(Kind::Fifo));
            assert_eq!(
                fs::read_link(s.d("link-then-link")).unwrap().as_os_str().as_bytes(),
                b"elsewhere"
            );
        },
    );
}

/// A directory member whose path is an archive-made symlink to outside: the directory's mode
/// and mtime must not land on the symlink's target.
#[test]
fn dir_metadata_not_applied_through_symlink() {
    hostile(
        "dir_metadata_not_applied_through_symlink",
        &[],
        |s| {
            let mut t = Tar::new();
            t.symlink("s", "../sentinel");
            t.header(&Header::dir("s").mode(0o777).mtime(0));
            t.symlink("s2", "../sentinel/sub");
            t.header(&Header::dir("s2/").mode(0o777).mtime(5));
            t.member(&Header::symlink("s3", s.abs("sub")), b"");
            t.header(&Header::dir("s3").mode(0o700).mtime(7));
            t.finish()
        },
        no_prep,
        |s, out| {
            assert!(matches!(out.code, Some(0 | 1)), "{}", out.describe());
            for n in ["s", "s2", "s3"] {
                // Either the symlink was replaced by a real directory, or it was left and the
                // member skipped with a warning.
                match kind(&s.d(n)) {
                    Some(Kind::Dir) => {}
                    Some(Kind::Symlink) => expect_skipped(out, &[n.as_bytes()]),
                    k => panic!("{n}: {k:?}\n{}", out.describe()),
                }
            }
        },
    );
}

#[test]
fn dir_then_symlink_then_member() {
    hostile(
        "dir_then_symlink_then_member",
        &[],
        |_| {
            let mut t = Tar::new();
            t.dir("d");
            t.symlink("d", "../sentinel");
            t.file("d/x", b"into d\n");
            t.file("d/file", b"into d\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            assert!(matches!(out.code, Some(0 | 1)), "{}", out.describe());
            match kind(&s.d("d")) {
                // The symlink replaced the (empty) directory: d/x must have been refused.
                Some(Kind::Symlink) => expect_skipped(out, &[b"d/x", b"d/file"]),
                // The symlink member was refused: d/x lands in the real directory.
                Some(Kind::Dir) => {
                    expect_skipped(out, &[b"d"]);
                    assert_eq!(contents(&s.d("d/x")), b"into d\n");
                }
                k => panic!("d: {k:?}\n{}", out.describe()),
            }
        },
    );
}

// --- Hard links ---------------------------------------------------------------------------------

#[test]
fn hardlink_to_outside_is_refused() {
    hostile(
        "hardlink_to_outside_is_refused",
        &[],
        |_| {
            let mut t = Tar::new();
            t.hardlink("h", "../sentinel/file");
            t.hardlink("h2", "a/../../sentinel/f");
            t.file("ok", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"h"]);
            assert!(kind(&s.d("h")).is_none() && kind(&s.d("h2")).is_none(), "{}", out.describe());
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
    );
}

/// A hard link to an absolute path: the target is stripped like a member name, so it resolves
/// inside DIR (or fails); it never links the outside file. A regular member of the same name
/// afterwards must not modify the outside file either.
#[test]
fn hardlink_to_absolute_path_resolves_inside() {
    hostile(
        "hardlink_to_absolute_path_resolves_inside",
        &[],
        |s| {
            let mut t = Tar::new();
            t.member(&Header::hardlink("h", s.abs("file")), b"");
            t.file("h", b"regular h\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            // The stripped target does not exist inside DIR: the link fails (skipped, exit 1).
            expect_skipped(out, &[b"h"]);
            assert_eq!(contents(&s.d("h")), b"regular h\n");
        },
    );
    hostile(
        "hardlink_to_absolute_path_resolves_inside (target extracted)",
        &[],
        |s| {
            let mut t = Tar::new();
            t.member(&Header::file(s.abs("file")), b"inside copy\n");
            t.member(&Header::hardlink("h", s.abs("file")), b"");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_clean(out);
            let inside = s.stripped(&s.abs("file"));
            assert_eq!(fs::metadata(s.d("h")).unwrap().ino(), fs::metadata(&inside).unwrap().ino());
            assert_eq!(contents(&s.d("h")), b"inside copy\n");
        },
    );
}

#[test]
fn hardlink_through_symlink_is_refused() {
    hostile(
        "hardlink_through_symlink_is_refused",
        &[],
        |_| {
            let mut t = Tar::new();
            t.symlink("l", "../sentinel");
            t.hardlink("h", "l/file");
            t.symlink("ls", "../sentinel/f");
            // A hard link to an archive symlink links the symlink itself, not its target.
            t.hardlink("hs", "ls");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"h"]);
            assert!(kind(&s.d("h")).is_none());
            if let Some(k) = kind(&s.d("hs")) {
                assert_eq!(k, Kind::Symlink, "hs must be a link to the symlink, not to its target");
            }
        },
    );
}

// --- Pre-existing things in DIR -----------------------------------------------------------------

#[test]
fn preexisting_symlink_in_dir() {
    hostile(
        "preexisting_symlink_in_dir",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file("pre/x", b"through the pre-existing symlink\n");
            t.file("pre/file", b"overwrite\n");
            t.dir("pre/newdir");
            t.file("pre-abs/sub/inner", b"deep, through an absolute one\n");
            t.file("pre", b"replaces the symlink\n");
            t.header(&Header::dir("pre-dir").mode(0o700).mtime(0));
            t.finish()
        },
        |s| {
            symlink("../sentinel", s.d("pre")).unwrap();
            symlink(&s.sentinel, s.d("pre-abs")).unwrap();
            symlink("../sentinel", s.d("pre-dir")).unwrap();
        },
        |s, out| {
            expect_skipped(out, &[b"pre/x", b"pre/file", b"pre-abs/sub/inner"]);
            assert_eq!(kind(&s.d("pre")), Some(Kind::File), "member `pre` replaces the symlink");
            assert_eq!(contents(&s.d("pre")), b"replaces the symlink\n");
        },
    );
}

#[test]
fn preexisting_hardlink_in_dir() {
    hostile(
        "preexisting_hardlink_in_dir",
        &[],
        |_| {
            let mut t = Tar::new();
            t.entry(&Header::file("hl").mode(0o777).mtime(0), b"new contents for hl\n");
            t.finish()
        },
        |s| {
            fs::hard_link(s.sentinel.join("f"), s.d("hl")).unwrap();
        },
        |s, out| {
            expect_clean(out);
            assert_eq!(contents(&s.d("hl")), b"new contents for hl\n");
            assert_eq!(
                fs::metadata(s.sentinel.join("f")).unwrap().nlink(),
                1,
                "hl was unlinked first"
            );
        },
    );
}

#[test]
fn keep_old_files() {
    let build = |_: &Scene| {
        let mut t = Tar::new();
        t.file("existing", b"new\n");
        t.dir("sub");
        t.file("sub/new", b"new file in an existing dir\n");
        t.file("other", b"other\n");
        t.finish()
    };
    let prep = |s: &Scene| {
        fs::write(s.d("existing"), b"old\n").unwrap();
        fs::create_dir(s.d("sub")).unwrap();
    };
    for flag in ["-k", "--keep-old-files"] {
        hostile(&format!("keep_old_files {flag}"), &[flag], build, prep, |s, out| {
            expect_skipped(out, &[b"existing"]);
            assert_eq!(
                out.diagnostics().len(),
                1,
                "only `existing` is reported\n{}",
                out.describe()
            );
            assert_eq!(contents(&s.d("existing")), b"old\n", "-k replaced an existing file");
            assert_eq!(contents(&s.d("other")), b"other\n");
            assert_eq!(contents(&s.d("sub/new")), b"new file in an existing dir\n");
        });
    }
    hostile("keep_old_files (without -k)", &[], build, prep, |s, out| {
        expect_clean(out);
        assert_eq!(contents(&s.d("existing")), b"new\n");
    });
}

// --- Special files ------------------------------------------------------------------------------

#[test]
fn device_nodes_are_skipped() {
    hostile(
        "device_nodes_are_skipped",
        &[],
        |_| {
            let mut t = Tar::new();
            t.header(&Header { devmajor: 1, devminor: 3, ..Header::new("null", rawtar::CHR) });
            t.header(&Header { devmajor: 8, devminor: 0, ..Header::new("sda", rawtar::BLK) });
            t.header(&Header::new("fifo", rawtar::FIFO).mode(0o600));
            t.file("ok", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"null", b"sda"]);
            assert!(kind(&s.d("null")).is_none() && kind(&s.d("sda")).is_none());
            assert_eq!(kind(&s.d("fifo")), Some(Kind::Fifo), "FIFOs are created");
            assert_eq!(fs::symlink_metadata(s.d("fifo")).unwrap().mode() & 0o7777, 0o600);
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
    );
}

/// The same hostile archive compressed: the zstd path goes through the same checks.
#[test]
fn hostile_archive_compressed() {
    hostile(
        "hostile_archive_compressed",
        &[],
        |s| {
            let mut t = Tar::new();
            t.file("../sentinel/x", b"escaped\n");
            t.symlink("l", "../sentinel");
            t.file("l/x", b"through\n");
            t.member(&Header::file(s.abs("y")), b"absolute\n");
            t.entry(&Header { size: Some(Num::Octal(5)), ..Header::file("ok") }, b"fine\n");
            rawtar::zstd(&t.finish(), 3)
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"../sentinel/x", b"l/x"]);
            assert_eq!(contents(&s.stripped(&s.abs("y"))), b"absolute\n");
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
    );
}

/// A directory member, then a symlink of the same name to outside: the directory's metadata
/// (applied at the end) must not land on the symlink's target.
#[test]
fn dir_metadata_not_applied_after_dir_replaced_by_symlink() {
    hostile(
        "dir_metadata_not_applied_after_dir_replaced_by_symlink",
        &[],
        |s| {
            let mut t = Tar::new();
            t.header(&Header::dir("d").mode(0o777).mtime(0));
            t.symlink("d", "../sentinel");
            t.header(&Header::dir("e/").mode(0o700).mtime(1));
            t.member(&Header::symlink("e", s.abs("sub")), b"");
            t.finish()
        },
        no_prep,
        |_, out| {
            assert!(matches!(out.code, Some(0 | 1)), "{}", out.describe());
        },
    );
}

#[test]
fn hardlink_to_directory_is_skipped() {
    hostile(
        "hardlink_to_directory_is_skipped",
        &[],
        |_| {
            let mut t = Tar::new();
            t.dir("d");
            t.hardlink("h", "d");
            t.hardlink("self", "self");
            t.hardlink("missing", "no/such/file");
            t.file("after", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"h", b"self", b"missing"]);
            assert_eq!(contents(&s.d("after")), b"fine\n", "a bad hard link is not fatal");
        },
    );
}

#[test]
fn member_under_a_regular_file_is_skipped() {
    hostile(
        "member_under_a_regular_file_is_skipped",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file("f", b"a file\n");
            t.file("f/x", b"under a file\n");
            t.header(&Header::new("fifo", rawtar::FIFO));
            t.file("fifo/y", b"under a fifo\n");
            t.symlink("empty-target", "");
            t.file("after", b"fine\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"f/x", b"fifo/y"]);
            assert_eq!(contents(&s.d("f")), b"a file\n");
            assert_eq!(contents(&s.d("after")), b"fine\n");
        },
    );
}

/// What is already in DIR: an empty directory is replaced by a file member (as GNU tar does);
/// a non-empty one cannot be, and the member is skipped with a warning.
#[test]
fn preexisting_directories_in_dir() {
    hostile(
        "preexisting_directories_in_dir",
        &[],
        |_| {
            let mut t = Tar::new();
            t.file("empty-dir", b"replaces an empty dir\n");
            t.file("full-dir", b"cannot replace a non-empty dir\n");
            t.header(&Header::dir("kept").mode(0o700).mtime(7));
            t.file("kept/new", b"new\n");
            t.finish()
        },
        |s| {
            fs::create_dir(s.d("empty-dir")).unwrap();
            fs::create_dir(s.d("full-dir")).unwrap();
            fs::write(s.d("full-dir/old"), b"old\n").unwrap();
            fs::create_dir(s.d("kept")).unwrap();
            fs::write(s.d("kept/old"), b"old\n").unwrap();
        },
        |s, out| {
            expect_skipped(out, &[b"full-dir"]);
            assert_eq!(contents(&s.d("empty-dir")), b"replaces an empty dir\n");
            assert_eq!(contents(&s.d("full-dir/old")), b"old\n");
            assert_eq!(contents(&s.d("kept/old")), b"old\n", "an existing directory is kept");
            assert_eq!(contents(&s.d("kept/new")), b"new\n");
            assert_eq!(fs::metadata(s.d("kept")).unwrap().mode() & 0o7777, 0o700);
        },
    );
}

/// A path of ~3000 bytes in 100 components (under PATH_MAX, far over any header field).
#[test]
fn deep_paths() {
    let deep: String = (0..100).map(|i| format!("{i:03}-{}/", "d".repeat(25))).collect();
    hostile(
        "deep_paths",
        &[],
        move |_| {
            let mut t = Tar::new();
            t.pax(&[("path", format!("{deep}file").as_str())]).file("ignored", b"deep\n");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_clean(out);
            let deep: String = (0..100).map(|i| format!("{i:03}-{}/", "d".repeat(25))).collect();
            assert_eq!(contents(&s.d(&format!("{deep}file"))), b"deep\n");
        },
    );
}

// --- Resource bombs (issue 8) ---------------------------------------------------------------

/// Directory members whose names are a megabyte of padding the sanitiser removes (`/` repeated,
/// then `snapshots/N`): deferred directory metadata once kept each raw name, a megabyte of RSS
/// per member (an 87 KB .tar.zst reached 1.6 GB). Only the sanitised path may be kept, and only
/// for directories still above the current member. Also under `--snapshot`, whose layout
/// allows `snapshots/N/`.
#[test]
fn padded_directory_names_do_not_cost_memory() {
    const MEMBERS: usize = 300;
    let pad = "/".repeat((1 << 20) - 64);
    let mut t = Tar::new();
    for i in 0..MEMBERS {
        let name = format!("{pad}snapshots/{i}/");
        t.member(&Header::dir(name.as_bytes()), b"");
    }
    let archive = rawtar::zstd(&t.finish(), 3);
    assert!(archive.len() < 200_000, "the bomb is small: {} bytes", archive.len());
    for args in [&[][..], &["--snapshot"][..]] {
        hostile_with(
            "padded_directory_names_do_not_cost_memory",
            args,
            true,
            |_| archive.clone(),
            no_prep,
            |s, out| {
                expect_clean(out);
                assert!(s.d(&format!("snapshots/{}", MEMBERS - 1)).is_dir());
                // 300 MiB of names went through; the pool is 64 MiB at most.
                assert_rss_below(out, 120 << 10);
            },
        );
    }
}

/// Paths longer than PATH_MAX are refused before anything is resolved or tracked for them, as
/// GNU tar fails them ("File name too long"): a GNU long name of 1 MiB of `a/` once overflowed
/// the stack (one recursion per component); a hard link whose target is that deep, likewise.
/// A path just under the limit (2,047 levels) still extracts, in bounded time and memory.
#[test]
fn paths_deeper_than_path_max() {
    let bomb = "a/".repeat((1 << 20) / 2 - 8) + "f";
    let max = "d/".repeat(2047) + "f";
    assert_eq!(max.len(), 4095);
    let over = "d/".repeat(2047) + "fx";
    hostile_with(
        "paths_deeper_than_path_max",
        &[],
        true,
        |_| {
            let mut t = Tar::new();
            t.member(&Header::file(bomb.as_bytes()), b"bomb\n");
            t.member(&Header::file(over.as_bytes()), b"over\n");
            t.member(&Header::file(max.as_bytes()), b"deepest\n");
            t.member(&Header::hardlink("link", bomb.as_bytes()), b"");
            t.member(&Header::hardlink("link2", max.as_bytes()), b"");
            t.finish()
        },
        no_prep,
        |s, out| {
            expect_skipped(out, &[b"a/a/a/a/", b"d/d/d/d/", b"link"]);
            assert!(out.stderr_str().contains("too long"), "{}", out.describe());
            // Relative to DIR: the absolute path is longer than PATH_MAX.
            let deepest = util::Cmd::new("cat").arg(&max).current_dir(&s.dest).run();
            assert_eq!(deepest.stdout, b"deepest\n");
            assert_eq!(contents(&s.d("link2")), b"deepest\n");
            assert!(!s.d("a").exists() && !s.d("link").exists());
            assert!(out.elapsed.as_secs() < 10, "{}", out.describe());
            assert_rss_below(out, 120 << 10);
        },
    );
}

/// Unknown member types are extracted as regular files, so their data counts against
/// `--max-member-size` and `--max-bytes` like a file's.
#[test]
fn unknown_types_count_against_the_byte_limits() {
    let data = vec![b'z'; 10_000];
    for args in [&["--max-member-size", "1000"][..], &["--max-bytes", "5000"][..]] {
        hostile(
            "unknown_types_count_against_the_byte_limits",
            args,
            |_| {
                let mut t = Tar::new();
                t.entry(&Header::new("odd", b'Z'), &data);
                t.finish()
            },
            no_prep,
            |s, out| {
                assert_eq!(out.code, Some(2), "{}", out.describe());
                assert!(out.stderr_str().contains(args[0]), "{}", out.describe());
                assert!(!s.d("odd").exists(), "nothing of the member is written");
            },
        );
    }
}

/// Directories created on the way to a member count against `--max-files` with the members:
/// three files 100 levels deep once made 300 directories under `--max-files 3`.
#[test]
fn implied_directories_count_against_max_files() {
    hostile(
        "implied_directories_count_against_max_files",
        &["--max-files", "3"],
        |_| {
            let mut t = Tar::new();
            for i in 0..3 {
                let name = format!("{}f{i}", format!("d{i}/").repeat(100));
                t.member(&Header::file(name.as_bytes()), b"x");
            }
            t.finish()
        },
        no_prep,
        |s, out| {
            assert_eq!(out.code, Some(2), "{}", out.describe());
            assert!(out.stderr_str().contains("--max-files"), "{}", out.describe());
            let created = walk_count(&s.dest);
            assert!(created <= 3, "{created} files and directories under --max-files 3");
        },
    );
}

/// The run's peak RSS stayed under `kib` (skipped, with a note, without /usr/bin/time).
fn assert_rss_below(out: &Output, kib: u64) {
    match out.peak_rss_kib {
        Some(rss) => assert!(rss < kib, "peak RSS {} MiB\n{}", rss >> 10, out.describe()),
        None => util::note("SKIP peak RSS check: /usr/bin/time not installed"),
    }
}

/// Entries under `dir` (not counting it), without following symlinks.
fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            n += 1;
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    n
}
