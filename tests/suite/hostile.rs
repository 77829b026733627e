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
//! with a `..` component is skipped (warning, exit 2, GNU tar's status for a member it did
//! not extract); nothing is resolved through a symlink, archive-made or pre-existing
//! (warning, exit 2); a member replaces what is at its path by
//! unlinking it first, never writing through a symlink or into a hard link's other names.

use crate::util;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use util::engine::{Encoding, Matrix, PLAIN_AND_SMALL_FRAMES, ZSTD_1, ZSTD_FRAMINGS, for_each_run};
use util::rawtar::{self, Header, Num, Tar};
use util::snapshot::{Compare, Kind, assert_same, snapshot};
use util::tree::set_mtime;
use util::{Output, TestDir};

/// The rows this suite runs over (tests/util/engine.rs): a plain tar under every writer row (each
/// writer keeps DIR's boundary itself), a compressed one (1021-byte frames) under every decoder
/// row with the two sweep writers; one writer and the default (the dispatcher and its workers
/// decide the order of what lands); the stock limits (refusals must not need descriptors).
const MATRIX: Matrix = Matrix::SWEEP;

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

/// One row of the hostile table. `hostile_cases!` turns each row into a test that runs it under
/// every engine configuration and input encoding (`util::engine`), with the safety checks of
/// the module comment after every run.
struct Case {
    /// Arguments after `-x ARCHIVE -C DIR`.
    args: &'static [&'static str],
    /// Arranges DIR before the run.
    prep: fn(&Scene),
    /// The archive: members added to a tar stream (which the runner finishes, and also
    /// compresses per `encodings`).
    build: fn(&Scene, &mut Tar),
    encodings: &'static [Encoding],
    /// The exit status; `None` where `check` decides (it must then check it).
    exit: Option<i32>,
    /// Members each named by a warning. With exit 2, every message also has tar's shape.
    says: &'static [&'static [u8]],
    /// What else must hold after the run.
    check: fn(&Scene, &Output),
}

impl Case {
    const DEFAULT: Case = Case {
        args: &[],
        prep: no_prep,
        build: |_, _| {},
        encodings: PLAIN_AND_SMALL_FRAMES,
        exit: Some(0),
        says: &[],
        check: |_, _| {},
    };
}

/// `name: Case { .. },` rows, each a test (as ripgrep's `rgtest!` makes one test per engine).
macro_rules! hostile_cases {
    ($($(#[$doc:meta])* $name:ident: $case:expr,)*) => {$(
        $(#[$doc])*
        #[test]
        fn $name() {
            let case: Case = $case;
            let check = |s: &Scene, out: &Output| {
                expect_exit(out, case.exit, case.says);
                (case.check)(s, out)
            };
            let name = stringify!($name);
            let build = |s: &Scene| {
                let mut t = Tar::new();
                (case.build)(s, &mut t);
                t.finish()
            };
            hostile_in(&MATRIX, name, case.args, case.encodings, false, build, case.prep, check);
        }
    )*};
}

/// The row's uniform expectation: the exit status, and with exit 2 every message in tar's
/// shape; each of `says` named by a message.
fn expect_exit(out: &Output, exit: Option<i32>, says: &[&[u8]]) {
    match exit {
        Some(2) => expect_skipped(out, says),
        Some(code) => {
            assert_eq!(out.code, Some(code), "expected exit {code}\n{}", out.describe());
            expect_named(out, says);
        }
        None => expect_named(out, says),
    }
}

/// Runs one hostile case outside the table (cases that loop over arguments or capture values),
/// in the same encodings as a row.
fn hostile(
    test: &str,
    args: &[&str],
    build: impl Fn(&Scene) -> Vec<u8>,
    prep: impl Fn(&Scene),
    check: impl Fn(&Scene, &Output),
) {
    hostile_in(&MATRIX, test, args, PLAIN_AND_SMALL_FRAMES, false, build, prep, check)
}

/// The runner: for each run (encoding × engine), a fresh scene, `build`'s archive in the run's
/// encoding, `prep`, the extraction (measuring the peak RSS when `rss` is set), the safety
/// checks, then `check`; under the runs of `matrix` (`MATRIX`, or a bomb's rows: it says why).
#[allow(clippy::too_many_arguments)]
fn hostile_in(
    matrix: &Matrix,
    test: &str,
    args: &[&str],
    encodings: &[Encoding],
    rss: bool,
    build: impl Fn(&Scene) -> Vec<u8>,
    prep: impl Fn(&Scene),
    check: impl Fn(&Scene, &Output),
) {
    let td = TestDir::new(test);
    // The last archive built and its encoding: a bomb's 300 MiB of tar is compressed once per
    // encoding, not once per run (it was 66 s of the suite at load 6).
    let mut last: Option<(Vec<u8>, Encoding, Vec<u8>)> = None;
    for_each_run(test, matrix, encodings, |run| {
        let s = Scene::new(&td);
        let file = format!("archive{}", run.encoding.suffix());
        let archive = s.case.join(&file);
        let tar = build(&s);
        let encoded = match &last {
            Some((t, e, z)) if *t == tar && *e == run.encoding => z.clone(),
            _ => run.encoding.encode(&tar),
        };
        fs::write(&archive, &encoded).unwrap();
        last = Some((tar, run.encoding, encoded));
        prep(&s);
        let before = snapshot(&s.sentinel);
        let mut cmd = run.cmd_on(&archive);
        cmd.arg("-x").arg("-C").arg(&s.dest).args(args);
        if rss {
            cmd.measure_rss();
        }
        let out = cmd.run();
        let ctx = format!("{test} [{}]\n{}", run.name(), out.describe());

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
            [file.as_str(), "tmp"],
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

/// Exit 2 (members skipped or a fatal error, as GNU tar), every message in tar's shape
/// `fastuntar: ...`, and a warning naming each of `members`.
fn expect_skipped(out: &Output, members: &[&[u8]]) {
    assert_eq!(out.code, Some(2), "expected exit 2 (members skipped)\n{}", out.describe());
    assert!(
        out.diagnostics().iter().all(|l| l.starts_with("fastuntar: ")),
        "every message has tar's shape `fastuntar: MEMBER: what happened`\n{}",
        out.describe()
    );
    expect_named(out, members);
}

/// For each of `members`, a message naming it.
fn expect_named(out: &Output, members: &[&[u8]]) {
    let diags = out.diagnostics();
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

/// What is at `p` (not following a symlink), if anything.
/// Whether this process may make a device node (root with CAP_MKNOD): tried at `p`, which is
/// removed again.
fn can_mknod(p: &Path) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // Safety: a valid C string; mknod touches no memory of ours.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) } == 0;
    if made {
        fs::remove_file(p).unwrap();
    }
    made
}

fn kind(p: &Path) -> Option<Kind> {
    Some(Kind::of(fs::symlink_metadata(p).ok()?.file_type()))
}

fn contents(p: &Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// --- Names --------------------------------------------------------------------------------------

hostile_cases! {
    absolute_names_are_stripped_into_dir: Case {
        build: |s, t| {
            t.member(&Header::file(s.abs("x")), b"absolute x\n");
            t.member(&Header::file(s.abs("file")), b"absolute file\n");
            t.member(&Header::file(b"//double/slash"), b"two slashes\n");
        },
        check: |s, out| {
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
        ..Case::DEFAULT
    },
    dotdot_members_are_skipped: Case {
        exit: Some(2),
        says: &[b"../sentinel/x", b"a/../../sentinel/x", b"../sentinel/file", b"a/../b"],
        build: |_, t| {
            t.file("../sentinel/x", b"escaped\n");
            t.file("a/../../sentinel/x", b"escaped\n");
            t.file("../sentinel/file", b"overwritten\n");
            t.file("a/../b", b"inside, but spelled with ..\n");
            t.file("..", b"dot dot\n");
            t.dir("../sentinel/newdir");
            t.file("ok", b"fine\n");
        },
        check: |s, _| {
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
        ..Case::DEFAULT
    },
    dotdot_in_long_names_is_skipped: Case {
        exit: Some(2),
        says: &[b"../sentinel/gnu-long", b"../sentinel/pax-path", b"pax-hardlink", b"gnu-hardlink"],
        build: |_, t| {
            t.gnu_long_name("../sentinel/gnu-long").file("placeholder-name", b"via L\n");
            t.pax(&[(b"path", b"../sentinel/pax-path")]).file("placeholder2", b"via PAX path\n");
            t.pax(&[(b"linkpath", b"../sentinel/file")])
                .header(&Header::hardlink("pax-hardlink", "placeholder"));
            t.gnu_long_link("../sentinel/file")
                .header(&Header::hardlink("gnu-hardlink", "placeholder"));
            t.file("ok", b"fine\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
        ..Case::DEFAULT
    },
    strip_components_cannot_expose_dotdot: Case {
        args: &["--strip-components", "1"],
        exit: None,
        build: |_, t| {
            t.file("top/../sentinel/x", b"escaped\n");
            t.file("x/../../sentinel/x", b"escaped\n");
            t.file("top/ok", b"fine\n");
        },
        check: |s, out| {
            assert_eq!(out.code, Some(2), "{}", out.describe());
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
        ..Case::DEFAULT
    },
    nul_in_ustar_name_field_ends_the_name: Case {
        build: |_, t| {
            t.file(b"nul-ok\0/../../sentinel/x", b"ustar field\n");
        },
        check: |s, out| {
            assert_eq!(contents(&s.d("nul-ok")), b"ustar field\n", "{}", out.describe());
        },
        ..Case::DEFAULT
    },
}

/// A NUL inside a PAX path or a GNU long name. GNU tar 1.34 cuts the name at the NUL (C
/// strings) and extracts `pax-nul`. A GNU long name is read the same way (its data is a C
/// string); a PAX path keeps the NUL, and the member is skipped with a warning (exit 2), the
/// rest extracted, as a `..` member is (until issue 41 the run stopped there) -- never a
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
            move |s, out| {
                assert_eq!(contents(&s.d("after")), b"fine\n", "{}", out.describe());
                if ext == 0 {
                    expect_exit(out, Some(2), &[b"pax-nul"]);
                    assert!(kind(&s.d("pax-nul")).is_none(), "{}", out.describe());
                } else {
                    expect_exit(out, Some(0), &[]);
                    assert!(kind(&s.d("pax-nul")).is_some(), "{}", out.describe());
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

hostile_cases! {
    /// An empty member name (ustar or PAX): skipped with a warning; DIR itself is left alone.
    /// (GNU tar substitutes `.` and fails to open it as a file: exit 2 at the end.)
    empty_names_are_skipped: Case {
        prep: |s| {
            fs::write(s.d("keep"), b"pre-existing\n").unwrap();
        },
        exit: Some(2),
        build: |_, t| {
            t.file(b"", b"empty name\n");
            t.pax(&[("path", "")]).file("p3", b"empty pax path\n");
            t.file("after", b"fine\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("keep")), b"pre-existing\n", "DIR's contents were clobbered");
            assert_eq!(contents(&s.d("after")), b"fine\n");
            assert!(kind(&s.d("p3")).is_none(), "the PAX path (empty) overrides the header name");
        },
        ..Case::DEFAULT
    },
    dot_file_members_do_not_replace_dir: Case {
        prep: |s| {
            fs::write(s.d("keep"), b"pre-existing\n").unwrap();
        },
        exit: Some(2),
        build: |_, t| {
            t.file(".", b"a file named .\n");
            t.file("./", b"a file named ./\n");
            t.file("./.", b"a file named ./.\n");
            t.header(&Header::symlink(".", "../sentinel"));
            t.header(&Header::new("./", rawtar::FIFO));
            t.file("after", b"fine\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("keep")), b"pre-existing\n", "DIR's contents were clobbered");
            assert_eq!(contents(&s.d("after")), b"fine\n");
        },
        ..Case::DEFAULT
    },
    dot_dir_members: Case {
        prep: |s| {
            fs::write(s.d("keep"), b"pre-existing\n").unwrap();
        },
        build: |_, t| {
            t.header(&Header::dir(".").mode(0o755));
            t.header(&Header::dir("./").mode(0o755));
            t.header(&Header::dir("./.").mode(0o755));
            t.header(&Header::dir("././sub/.").mode(0o700));
            t.file("./sub/./f", b"f\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("keep")), b"pre-existing\n");
            assert_eq!(contents(&s.d("sub/f")), b"f\n");
            assert_eq!(fs::metadata(s.d("sub")).unwrap().mode() & 0o7777, 0o700);
        },
        ..Case::DEFAULT
    },
    /// `-G`: an incremental archive's list that renames out of DIR is refused as a whole:
    /// nothing renamed or removed, exit 2, the directory named (GNU tar strips the `../`).
    incremental_list_renaming_out_is_refused: Case {
        args: &["-G"],
        exit: Some(2),
        says: &[b"d/: Malformed dumpdir"],
        prep: |s| {
            fs::create_dir_all(s.d("d")).unwrap();
            fs::write(s.d("d/stays"), b"not in the list\n").unwrap();
        },
        build: |_, t| dumpdir(t, "d/", b"Ykeep\0R../sentinel/sub\0Tstolen\0\0"),
        check: |s, _| assert!(s.d("d/stays").exists() && !s.d("stolen").exists()),
        ..Case::DEFAULT
    },
    /// `-G`: what a directory's list does not name is removed, symlinks out of DIR included,
    /// and only they: never what they point to, nor through them.
    incremental_list_removes_symlinks_not_their_targets: Case {
        args: &["-G"],
        prep: |s| {
            fs::create_dir_all(s.d("d/sub")).unwrap();
            symlink(&s.sentinel, s.d("d/out")).unwrap();
            symlink(s.sentinel.join("sub"), s.d("d/sub/in")).unwrap();
            symlink(&s.sentinel, s.d("viasym")).unwrap();
        },
        build: |_, t| {
            dumpdir(t, "d/", b"\0");
            // A directory member that is a symlink out of DIR: not purged through.
            dumpdir(t, "viasym/", b"\0");
        },
        check: |s, _| {
            assert!(fs::symlink_metadata(s.d("d/out")).is_err(), "d/out stays");
            assert!(fs::symlink_metadata(s.d("d/sub")).is_err(), "d/sub stays");
        },
        // viasym cannot be purged (GNU tar: "viasym: Cannot open: Not a directory", exit 2).
        exit: Some(2),
        says: &[b"viasym/: cannot purge: 'viasym' is a symlink; not followed"],
        ..Case::DEFAULT
    },
    /// `-G`: a list longer than the archive names its directory; nothing is purged.
    incremental_list_cut_short_names_its_directory: Case {
        args: &["-G"],
        exit: Some(2),
        says: &[b"d/: unexpected end of archive"],
        prep: |s| {
            fs::create_dir_all(s.d("d")).unwrap();
            fs::write(s.d("d/stays"), b"not in the list\n").unwrap();
        },
        build: |_, t| {
            let h = Header { magic: rawtar::Magic::Gnu, ..Header::new("d/", b'D') };
            let mut list = b"Ya\0".to_vec();
            list.resize(512, 0);
            t.raw(&h.size(Num::Octal(10 << 20)).block(0)).raw(&list);
        },
        check: |s, _| assert!(s.d("d/stays").exists()),
        ..Case::DEFAULT
    },
}

// --- Archive-made symlinks ----------------------------------------------------------------------

hostile_cases! {
    member_under_archive_symlink_is_refused: Case {
        exit: Some(2),
        says: &[b"l/x", b"l/file"],
        build: |_, t| {
            t.symlink("l", "../sentinel");
            t.file("l/x", b"through the symlink\n");
            t.file("l/file", b"overwrite through the symlink\n");
            t.file("l/sub/y", b"deeper\n");
            t.dir("l/newdir");
            t.symlink("l/newlink", "x");
            t.file("ok", b"fine\n");
        },
        check: |s, _| {
            assert_eq!(
                fs::read_link(s.d("l")).unwrap().as_os_str().as_bytes(),
                b"../sentinel",
                "symlink target verbatim"
            );
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
        ..Case::DEFAULT
    },
    member_under_absolute_archive_symlink_is_refused: Case {
        exit: Some(2),
        says: &[b"abs/x", b"abs/sub/inner"],
        build: |s, t| {
            t.member(&Header::symlink("abs", s.abs("")), b"");
            t.file("abs/x", b"through the absolute symlink\n");
            t.file("abs/sub/inner", b"overwrite\n");
        },
        check: |s, _| {
            assert_eq!(
                fs::read_link(s.d("abs")).unwrap().as_os_str().as_bytes(),
                s.abs("").as_slice()
            );
        },
        ..Case::DEFAULT
    },
    symlink_chain_is_not_followed: Case {
        exit: Some(2),
        says: &[b"c1/x"],
        build: |_, t| {
            t.symlink("c1", "c2");
            t.symlink("c2", "c3");
            t.symlink("c3", "../sentinel");
            t.file("c1/x", b"through a chain\n");
            t.dir("c1/sub");
            t.symlink("f3", "../sentinel/file");
            t.symlink("f2", "f3");
            t.file("f2", b"replaces f2 itself\n");
        },
        check: |s, _| {
            assert_eq!(kind(&s.d("f2")), Some(Kind::File));
            assert_eq!(contents(&s.d("f2")), b"replaces f2 itself\n");
            assert_eq!(kind(&s.d("f3")), Some(Kind::Symlink));
        },
        ..Case::DEFAULT
    },
    member_replaces_symlink_instead_of_writing_through_it: Case {
        build: |s, t| {
            t.symlink("s", "../sentinel/file");
            t.file("s", b"new s\n");
            t.member(&Header::symlink("s-abs", s.abs("file")), b"");
            t.entry(&Header::file("s-abs").mode(0o777), b"new s-abs\n");
            t.symlink("fifo", "../sentinel/f");
            t.header(&Header::new("fifo", rawtar::FIFO));
            t.symlink("link-then-link", "../sentinel/f");
            t.symlink("link-then-link", "elsewhere");
        },
        check: |s, _| {
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
        ..Case::DEFAULT
    },
    /// A directory member whose path is an archive-made symlink to outside: the directory's mode
    /// and mtime must not land on the symlink's target.
    dir_metadata_not_applied_through_symlink: Case {
        exit: None,
        build: |s, t| {
            t.symlink("s", "../sentinel");
            t.header(&Header::dir("s").mode(0o777).mtime(0));
            t.symlink("s2", "../sentinel/sub");
            t.header(&Header::dir("s2/").mode(0o777).mtime(5));
            t.member(&Header::symlink("s3", s.abs("sub")), b"");
            t.header(&Header::dir("s3").mode(0o700).mtime(7));
        },
        check: |s, out| {
            assert!(matches!(out.code, Some(0 | 2)), "{}", out.describe());
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
        ..Case::DEFAULT
    },
    dir_then_symlink_then_member: Case {
        exit: None,
        build: |_, t| {
            t.dir("d");
            t.symlink("d", "../sentinel");
            t.file("d/x", b"into d\n");
            t.file("d/file", b"into d\n");
        },
        check: |s, out| {
            assert!(matches!(out.code, Some(0 | 2)), "{}", out.describe());
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
        ..Case::DEFAULT
    },
}

// --- Hard links ---------------------------------------------------------------------------------

hostile_cases! {
    hardlink_to_outside_is_refused: Case {
        exit: Some(2),
        says: &[b"h"],
        build: |_, t| {
            t.hardlink("h", "../sentinel/file");
            t.hardlink("h2", "a/../../sentinel/f");
            t.file("ok", b"fine\n");
        },
        check: |s, out| {
            assert!(kind(&s.d("h")).is_none() && kind(&s.d("h2")).is_none(), "{}", out.describe());
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
        ..Case::DEFAULT
    },
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
            // The stripped target does not exist inside DIR: the link fails (skipped, exit 2).
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

hostile_cases! {
    hardlink_through_symlink_is_refused: Case {
        exit: Some(2),
        says: &[b"h"],
        build: |_, t| {
            t.symlink("l", "../sentinel");
            t.hardlink("h", "l/file");
            t.symlink("ls", "../sentinel/f");
            // A hard link to an archive symlink links the symlink itself, not its target.
            t.hardlink("hs", "ls");
        },
        check: |s, _| {
            assert!(kind(&s.d("h")).is_none());
            if let Some(k) = kind(&s.d("hs")) {
                assert_eq!(k, Kind::Symlink, "hs must be a link to the symlink, not to its target");
            }
        },
        ..Case::DEFAULT
    },
}

// --- Pre-existing things in DIR -----------------------------------------------------------------

hostile_cases! {
    preexisting_symlink_in_dir: Case {
        prep: |s| {
            symlink("../sentinel", s.d("pre")).unwrap();
            symlink(&s.sentinel, s.d("pre-abs")).unwrap();
            symlink("../sentinel", s.d("pre-dir")).unwrap();
        },
        exit: Some(2),
        says: &[b"pre/x", b"pre/file", b"pre-abs/sub/inner"],
        build: |_, t| {
            t.file("pre/x", b"through the pre-existing symlink\n");
            t.file("pre/file", b"overwrite\n");
            t.dir("pre/newdir");
            t.file("pre-abs/sub/inner", b"deep, through an absolute one\n");
            t.file("pre", b"replaces the symlink\n");
            t.header(&Header::dir("pre-dir").mode(0o700).mtime(0));
        },
        check: |s, _| {
            assert_eq!(kind(&s.d("pre")), Some(Kind::File), "member `pre` replaces the symlink");
            assert_eq!(contents(&s.d("pre")), b"replaces the symlink\n");
        },
        ..Case::DEFAULT
    },
    preexisting_hardlink_in_dir: Case {
        prep: |s| {
            fs::hard_link(s.sentinel.join("f"), s.d("hl")).unwrap();
        },
        build: |_, t| {
            t.entry(&Header::file("hl").mode(0o777).mtime(0), b"new contents for hl\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("hl")), b"new contents for hl\n");
            assert_eq!(
                fs::metadata(s.sentinel.join("f")).unwrap().nlink(),
                1,
                "hl was unlinked first"
            );
        },
        ..Case::DEFAULT
    },
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

hostile_cases! {
    /// Device nodes are made as GNU tar and bsdtar make them, where the kernel allows it (root
    /// with CAP_MKNOD): type, device number and mode. Elsewhere each is named ("cannot create
    /// device node: Operation not permitted"), skipped, and the run exits 1.
    device_nodes_where_the_kernel_allows: Case {
        exit: None,
        build: |_, t| {
            let null = Header { devmajor: 1, devminor: 3, ..Header::new("null", rawtar::CHR) };
            t.header(&null.mode(0o666));
            t.header(&Header { devmajor: 8, devminor: 0, ..Header::new("sda", rawtar::BLK) });
            t.header(&Header::new("fifo", rawtar::FIFO).mode(0o600));
            t.file("ok", b"fine\n");
        },
        check: |s, out| {
            assert_eq!(kind(&s.d("fifo")), Some(Kind::Fifo), "FIFOs are created");
            assert_eq!(fs::symlink_metadata(s.d("fifo")).unwrap().mode() & 0o7777, 0o600);
            assert_eq!(contents(&s.d("ok")), b"fine\n");
            if can_mknod(&s.d("probe")) {
                assert_eq!(out.code, Some(0), "{}", out.describe());
                let null = fs::symlink_metadata(s.d("null")).unwrap();
                assert_eq!(kind(&s.d("null")), Some(Kind::CharDev));
                assert_eq!((null.rdev(), null.mode() & 0o7777), (libc::makedev(1, 3), 0o666));
                assert_eq!(kind(&s.d("sda")), Some(Kind::BlockDev));
                assert_eq!(fs::symlink_metadata(s.d("sda")).unwrap().rdev(), libc::makedev(8, 0));
            } else {
                assert_eq!(out.code, Some(2), "{}", out.describe());
                for name in ["null", "sda"] {
                    assert!(kind(&s.d(name)).is_none(), "{name} made");
                    let said = format!("fastuntar: {name}: cannot create device node: ");
                    assert!(out.stderr_str().contains(&said), "{}", out.describe());
                }
            }
        },
        ..Case::DEFAULT
    },
    /// The same hostile archive compressed: the zstd path goes through the same checks.
    hostile_archive_compressed: Case {
        exit: Some(2),
        says: &[b"../sentinel/x", b"l/x"],
        build: |s, t| {
            t.file("../sentinel/x", b"escaped\n");
            t.symlink("l", "../sentinel");
            t.file("l/x", b"through\n");
            t.member(&Header::file(s.abs("y")), b"absolute\n");
            t.entry(&Header { size: Some(Num::Octal(5)), ..Header::file("ok") }, b"fine\n");
        },
        encodings: ZSTD_FRAMINGS,
        check: |s, _| {
            assert_eq!(contents(&s.stripped(&s.abs("y"))), b"absolute\n");
            assert_eq!(contents(&s.d("ok")), b"fine\n");
        },
        ..Case::DEFAULT
    },
    /// A directory member, then a symlink of the same name to outside: the directory's metadata
    /// (applied at the end) must not land on the symlink's target.
    dir_metadata_not_applied_after_dir_replaced_by_symlink: Case {
        exit: None,
        build: |s, t| {
            t.header(&Header::dir("d").mode(0o777).mtime(0));
            t.symlink("d", "../sentinel");
            t.header(&Header::dir("e/").mode(0o700).mtime(1));
            t.member(&Header::symlink("e", s.abs("sub")), b"");
        },
        check: |_, out| {
            assert!(matches!(out.code, Some(0 | 2)), "{}", out.describe());
        },
        ..Case::DEFAULT
    },
    hardlink_to_directory_is_skipped: Case {
        exit: Some(2),
        says: &[b"h", b"self", b"missing"],
        build: |_, t| {
            t.dir("d");
            t.hardlink("h", "d");
            t.hardlink("self", "self");
            t.hardlink("missing", "no/such/file");
            t.file("after", b"fine\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("after")), b"fine\n", "a bad hard link is not fatal");
        },
        ..Case::DEFAULT
    },
    member_under_a_regular_file_is_skipped: Case {
        exit: Some(2),
        says: &[b"f/x", b"fifo/y"],
        build: |_, t| {
            t.file("f", b"a file\n");
            t.file("f/x", b"under a file\n");
            t.header(&Header::new("fifo", rawtar::FIFO));
            t.file("fifo/y", b"under a fifo\n");
            t.symlink("empty-target", "");
            t.file("after", b"fine\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("f")), b"a file\n");
            assert_eq!(contents(&s.d("after")), b"fine\n");
        },
        ..Case::DEFAULT
    },
    /// What is already in DIR: an empty directory is replaced by a file member (as GNU tar does);
    /// a non-empty one cannot be, and the member is skipped with a warning.
    preexisting_directories_in_dir: Case {
        prep: |s| {
            fs::create_dir(s.d("empty-dir")).unwrap();
            fs::create_dir(s.d("full-dir")).unwrap();
            fs::write(s.d("full-dir/old"), b"old\n").unwrap();
            fs::create_dir(s.d("kept")).unwrap();
            fs::write(s.d("kept/old"), b"old\n").unwrap();
        },
        exit: Some(2),
        says: &[b"full-dir"],
        build: |_, t| {
            t.file("empty-dir", b"replaces an empty dir\n");
            t.file("full-dir", b"cannot replace a non-empty dir\n");
            t.header(&Header::dir("kept").mode(0o700).mtime(7));
            t.file("kept/new", b"new\n");
        },
        check: |s, _| {
            assert_eq!(contents(&s.d("empty-dir")), b"replaces an empty dir\n");
            assert_eq!(contents(&s.d("full-dir/old")), b"old\n");
            assert_eq!(contents(&s.d("kept/old")), b"old\n", "an existing directory is kept");
            assert_eq!(contents(&s.d("kept/new")), b"new\n");
            assert_eq!(fs::metadata(s.d("kept")).unwrap().mode() & 0o7777, 0o700);
        },
        ..Case::DEFAULT
    },
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
    let tar = t.finish();
    let archive = ZSTD_1.encode(&tar);
    assert!(archive.len() < 200_000, "the bomb is small: {} bytes", archive.len());
    // 300 MiB of names a run: the memory is the reader's and the dispatcher's, so the streaming
    // decoder and the frame-parallel one under both sweep writers (22 runs were 66 s at load 6).
    let rows = Matrix {
        threads: &["writers default"],
        limits: false,
        decoders: Some(&["threads 1", "threads 4"]),
        ..MATRIX
    };
    for args in [&[][..], &["--snapshot"][..]] {
        hostile_in(
            &rows,
            "padded_directory_names_do_not_cost_memory",
            args,
            &[ZSTD_1],
            true,
            |_| tar.clone(),
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
    // Plain only: what is refused, and the 2,047 levels made, are the reader's and the
    // writers' (every writer row); frame edges inside GNU long names meet the table's rows
    // (`dotdot_in_long_names_is_skipped`, in 1021-byte frames).
    hostile_in(
        &MATRIX,
        "paths_deeper_than_path_max",
        &[],
        &[Encoding::Plain],
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

hostile_cases! {
    /// Directories created on the way to a member count against `--max-files` with the members:
    /// three files 100 levels deep once made 300 directories under `--max-files 3`.
    implied_directories_count_against_max_files: Case {
        args: &["--max-files", "3"],
        exit: None,
        build: |_, t| {
            for i in 0..3 {
                let name = format!("{}f{i}", format!("d{i}/").repeat(100));
                t.member(&Header::file(name.as_bytes()), b"x");
            }
        },
        check: |s, out| {
            assert_eq!(out.code, Some(2), "{}", out.describe());
            assert!(out.stderr_str().contains("--max-files"), "{}", out.describe());
            let created = util::entries_under(&s.dest);
            assert!(created <= 3, "{created} files and directories under --max-files 3");
        },
        ..Case::DEFAULT
    },
}

/// The run's peak RSS stayed under `kib` (skipped, with a note, without /usr/bin/time).
fn assert_rss_below(out: &Output, kib: u64) {
    match out.peak_rss_kib {
        Some(rss) => assert!(rss < kib, "peak RSS {} MiB\n{}", rss >> 10, out.describe()),
        None => util::skip("peak RSS check", "/usr/bin/time not installed"),
    }
}

/// A GNU-format dumpdir member `name` (an incremental archive's directory) listing `list`.
fn dumpdir(t: &mut Tar, name: &str, list: &[u8]) {
    t.entry(&Header { magic: rawtar::Magic::Gnu, ..Header::new(name, b'D') }, list);
}
