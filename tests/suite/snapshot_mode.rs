//! Hostile conditions: `--snapshot` (the ledger snapshot layout, nothing else), the
//! `--max-files/--max-bytes/--max-member-size` limits, headers declaring huge sizes, the zstd
//! `--max-window` cap, and the exit codes (0 clean, 1 members skipped, 2 fatal).
//!
//! The rules under test (src/admit.rs, src/safety.rs, docs/DESIGN.md):
//! * `--snapshot` admits only `version`, `snapshots/`, `snapshots/<slot>/`,
//!   `snapshots/<slot>/<slot>`, `snapshots/status_cache`, `accounts/`, `accounts/<slot>.<id>`,
//!   as regular files (GNU sparse included) and directories. Files land 0644 and directories
//!   0755 whatever the archive says. Anything else stops the run (exit 2) before any of that
//!   member is written, naming it; members before it are extracted, members after it are not.
//! * The path is sanitised first: a leading `/` is stripped (one warning), so `/version` is
//!   `version` and is admitted; a `..` component refuses the member, which in `--snapshot` mode
//!   is fatal.
//! * A limit refusal is fatal and names the member and the flag; the member's file does not
//!   exist afterwards, not even empty. `--snapshot` defaults: 5,000,000 members, 4 TiB.

use crate::util;
use crate::util::Flags;
use crate::util::engine::{Engine, Matrix};

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use util::rawtar::{self, Header, Num, Tar};
use util::snapshot::{Kind, snapshot};
use util::{
    Cmd, Input, Output, Rng, TestDir, WriterConfig, disk_usage, fastuntar, fastuntar_with,
    for_each_config, is_root, is_summary, note, umask,
};

/// The rows this suite runs over (tests/util/engine.rs): every writer row. `--snapshot`'s
/// layout, limits and messages are decided before the writers and carried out by each of
/// them; the inputs are plain tars (no decoder row applies) of a few files (the stock limits
/// change nothing).
const MATRIX: Matrix = Matrix::WRITERS;

const TIB: u64 = 1 << 40;

/// The writer rows that matter for "nothing of a refused member is written": the two
/// backends, buffered and direct.
const BACKENDS: Matrix =
    MATRIX.only(&["portable", "uring", "uring+direct", "portable+direct(threshold 0)"]);

fn two_backends() -> Vec<&'static WriterConfig> {
    BACKENDS.writer_rows()
}

/// Runs `case` under each row of `BACKENDS` (the one runner), reporting every failing one at
/// the end.
fn for_each_backend(test: &str, case: impl FnMut(&Engine)) {
    for_each_config(test, &BACKENDS, case)
}

/// Extracts `archive` into a fresh DIR under `cfg` with `args`; returns DIR and the output.
fn extract(td: &TestDir, cfg: &impl Flags, archive: &Path, args: &[&str]) -> (PathBuf, Output) {
    let dest = td.fresh("dest");
    let out = fastuntar_with(cfg).extract(archive, &dest).args(args).run();
    (dest, out)
}

fn write_archive(td: &TestDir, name: &str, bytes: &[u8]) -> PathBuf {
    td.write(name, bytes)
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

/// The modes `--snapshot` imposes (exact as root; a non-root umask may take bits away).
fn snapshot_modes() -> (u32, u32) {
    if is_root() { (0o644, 0o755) } else { (0o644 & !umask(), 0o755 & !umask()) }
}

/// Exit 2 with exactly one diagnostic, `fastuntar: NAME: ...`, that mentions every `words`.
fn expect_fatal_naming(out: &Output, name: &str, words: &[&str], ctx: &str) {
    assert_eq!(out.code, Some(2), "{ctx}: expected exit 2\n{}", out.describe());
    let diags = out.diagnostics();
    assert_eq!(diags.len(), 1, "{ctx}: expected one message line\n{}", out.describe());
    let line = &diags[0];
    assert!(
        line.starts_with(&format!("fastuntar: {name}: ")),
        "{ctx}: the message does not name `{name}` in tar's shape `fastuntar: NAME: ...`\n{}",
        out.describe()
    );
    for w in words {
        assert!(line.contains(w), "{ctx}: the message does not mention `{w}`\n{}", out.describe());
    }
    assert!(
        !out.stderr_lines().iter().any(|l| is_summary(l)),
        "{ctx}: a fatal run printed the success summary\n{}",
        out.describe()
    );
}

// --- The layout that is accepted ----------------------------------------------------------------

/// A snapshot-shaped archive with hostile modes and owners on every member.
fn snapshot_archive() -> Vec<u8> {
    let mut t = Tar::new();
    let own = |h: Header| Header { uid: Num::Octal(1234), gid: Num::Octal(5678), ..h };
    t.entry(&own(Header::file("version").mode(0o777)), b"1.2.0");
    t.header(&own(Header::dir("snapshots/").mode(0o700)));
    t.header(&own(Header::dir("snapshots/123/").mode(0o777)));
    t.entry(&own(Header::file("snapshots/123/123").mode(0o4755)), &Rng::new(1).bytes(70_000));
    t.entry(&own(Header::file("snapshots/status_cache").mode(0o600)), b"status cache");
    t.header(&own(Header::dir("accounts/").mode(0o1777)));
    t.entry(&own(Header::file("accounts/123.0").mode(0o6777)), &Rng::new(2).bytes(5000));
    t.entry(&own(Header::file("accounts/123.1").mode(0o000)), b"");
    t.finish()
}

const SNAPSHOT_FILES: &[&str] =
    &["version", "snapshots/123/123", "snapshots/status_cache", "accounts/123.0", "accounts/123.1"];
const SNAPSHOT_DIRS: &[&str] = &["snapshots", "snapshots/123", "accounts"];

fn check_snapshot_modes(dest: &Path, ctx: &str) {
    let (fmode, dmode) = snapshot_modes();
    let snap = snapshot(dest);
    for (p, e) in &snap.entries {
        if p.as_slice() == b"." {
            continue;
        }
        let name = util::snapshot::show(p);
        match e.kind {
            Kind::File => assert_eq!(e.mode, fmode, "{ctx}: file {name} has mode {:04o}", e.mode),
            Kind::Dir => assert_eq!(e.mode, dmode, "{ctx}: dir {name} has mode {:04o}", e.mode),
            k => panic!("{ctx}: {name} is a {k:?}; --snapshot extracts files and dirs only"),
        }
    }
}

#[test]
fn snapshot_layout_is_accepted_with_imposed_modes() {
    let td = TestDir::new("snapshot_layout_accepted");
    let archive = write_archive(&td, "snap.tar", &snapshot_archive());
    for_each_config("snapshot_layout_is_accepted_with_imposed_modes", &MATRIX, |cfg| {
        let (dest, out) = extract(&td, cfg, &archive, &["--snapshot"]);
        let ctx = format!("[{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(0), "expected exit 0: {ctx}");
        assert!(out.diagnostics().is_empty(), "unexpected messages: {ctx}");
        for f in SNAPSHOT_FILES {
            assert!(dest.join(f).is_file(), "{f} missing: {ctx}");
        }
        for d in SNAPSHOT_DIRS {
            assert!(dest.join(d).is_dir(), "{d}/ missing: {ctx}");
        }
        assert_eq!(util::read(dest.join("version")), b"1.2.0");
        assert_eq!(util::read(dest.join("snapshots/123/123")), Rng::new(1).bytes(70_000));
        assert_eq!(util::read(dest.join("accounts/123.0")), Rng::new(2).bytes(5000));
        check_snapshot_modes(&dest, &ctx);
        if is_root() {
            // Ownership is never restored in --snapshot mode, even when asked for.
            let snap = snapshot(&dest);
            for (p, e) in &snap.entries {
                assert_eq!(
                    (e.uid, e.gid),
                    (0, 0),
                    "{} owned by {}:{}: {ctx}",
                    util::snapshot::show(p),
                    e.uid,
                    e.gid
                );
            }
        }
    });
}

#[test]
fn snapshot_mode_ignores_same_owner() {
    if !util::have_root("snapshot_mode_ignores_same_owner", "chown") {
        return;
    }
    let td = TestDir::new("snapshot_same_owner");
    let archive = write_archive(&td, "snap.tar", &snapshot_archive());
    let (dest, out) = extract(&td, two_backends()[0], &archive, &["--snapshot", "--same-owner"]);
    out.expect_code(0);
    let m = fs::metadata(dest.join("accounts/123.0")).unwrap();
    assert_eq!(
        (m.uid(), m.gid()),
        (0, 0),
        "--snapshot gave the archive's owner\n{}",
        out.describe()
    );
}

/// GNU tar writes the accounts file as a sparse member (old GNU 'S' and PAX 1.0): admitted as
/// a regular file, holes and data restored, mode 0644.
#[test]
fn snapshot_accepts_gnu_sparse_account_file() {
    let test = "snapshot_accepts_gnu_sparse_account_file";
    util::with_tools(test, &["tar"], |td| {
        let src = td.join("src");
        fs::create_dir_all(src.join("snapshots/77")).unwrap();
        fs::create_dir_all(src.join("accounts")).unwrap();
        fs::write(src.join("version"), b"1.2.0").unwrap();
        fs::write(src.join("snapshots/77/77"), b"bank").unwrap();
        fs::write(src.join("snapshots/status_cache"), b"cache").unwrap();
        {
            use std::os::unix::fs::FileExt;
            let f = fs::File::create(src.join("accounts/77.5")).unwrap();
            f.set_len(8 << 20).unwrap();
            f.write_all_at(&Rng::new(3).bytes(4096), 1 << 20).unwrap();
            f.write_all_at(&Rng::new(4).bytes(1000), (8 << 20) - 1000).unwrap();
        }
        fs::set_permissions(src.join("accounts/77.5"), fs::Permissions::from_mode(0o600)).unwrap();
        let want = util::read(src.join("accounts/77.5"));
        for (label, fmt) in [
            ("gnu", &["--format=gnu"][..]),
            ("pax 1.0", &["--format=posix", "--sparse-version=1.0"][..]),
            ("pax 0.1", &["--format=posix", "--sparse-version=0.1"][..]),
        ] {
            let archive = td.join(format!("sparse-{}.tar", label.replace(' ', "_")));
            let made = util::gnu_tar(
                ["-S", "-C"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([src.display().to_string()])
                    .chain(fmt.iter().map(|s| s.to_string()))
                    .chain(["-cf".into(), archive.display().to_string()])
                    .chain(["version", "snapshots", "accounts"].iter().map(|s| s.to_string())),
            );
            assert!(made.success(), "GNU tar could not write the archive\n{}", made.describe());
            let size = fs::metadata(&archive).unwrap().len();
            assert!(size < 1 << 20, "[{label}] the archive is not sparse ({size} bytes)");
            for_each_backend(&format!("{test} [{label}]"), |cfg| {
                let (dest, out) = extract(td, cfg, &archive, &["--snapshot"]);
                let ctx = format!("[{label}, {}]\n{}", cfg.name(), out.describe());
                assert_eq!(out.code, Some(0), "expected exit 0: {ctx}");
                assert!(out.diagnostics().is_empty(), "unexpected messages: {ctx}");
                assert_eq!(util::read(dest.join("accounts/77.5")), want, "contents differ: {ctx}");
                check_snapshot_modes(&dest, &ctx);
            });
        }
    });
}

/// `/version` is `version` once the leading `/` is stripped (src/safety.rs runs before the
/// layout check), so it is admitted, with the one stripping warning. `/etc/passwd` becomes
/// `etc/passwd`, which is not part of the layout: fatal.
#[test]
fn snapshot_absolute_names_are_stripped_then_checked() {
    let td = TestDir::new("snapshot_absolute");
    let mut t = Tar::new();
    t.file("/version", b"abs version");
    t.dir("/accounts/");
    t.file("/accounts/9.9", b"abs account");
    let ok = write_archive(&td, "abs-ok.tar", &t.finish());
    let mut t = Tar::new();
    t.file("/version", b"abs version");
    t.file("/etc/passwd", b"root::0:0::/:/bin/sh\n");
    let bad = write_archive(&td, "abs-bad.tar", &t.finish());
    for_each_backend("snapshot_absolute_names_are_stripped_then_checked", |cfg| {
        let (dest, out) = extract(&td, cfg, &ok, &["--snapshot"]);
        let ctx = format!("[{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(0), "expected exit 0: {ctx}");
        let diags = out.diagnostics();
        assert!(
            diags.len() == 1 && diags[0].contains("leading '/'"),
            "expected only the leading-'/' warning: {ctx}"
        );
        assert_eq!(util::read(dest.join("version")), b"abs version");
        assert_eq!(util::read(dest.join("accounts/9.9")), b"abs account");

        let (dest, out) = extract(&td, cfg, &bad, &["--snapshot"]);
        let ctx = format!("[{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(2), "expected exit 2: {ctx}");
        let diags = out.diagnostics();
        assert!(
            diags
                .iter()
                .any(|l| l.starts_with("fastuntar: /etc/passwd: ") && l.contains("snapshot")),
            "no message naming /etc/passwd and --snapshot: {ctx}"
        );
        assert_eq!(util::read(dest.join("version")), b"abs version", "{ctx}");
        assert!(!exists(&dest.join("etc")), "etc/ was created: {ctx}");
    });
}

// --- Members that stop the run ------------------------------------------------------------------

/// Members that may come first: a valid prefix that must be extracted.
fn good_prefix(t: &mut Tar) {
    t.file("version", b"prefix version\n");
    t.dir("snapshots/");
    t.dir("accounts/");
    t.file("accounts/5.0", b"prefix account\n");
}

/// Members after the bad one: none of them may appear.
fn good_suffix(t: &mut Tar) {
    t.dir("snapshots/7/");
    t.file("snapshots/7/7", b"after\n");
    t.file("accounts/6.0", b"after\n");
    t.file("snapshots/status_cache", b"after\n");
}

struct BadCase {
    /// The member's name as the message shows it.
    name: &'static str,
    /// Paths (relative to DIR) that must not exist afterwards, besides the suffix's.
    absent: &'static [&'static str],
    /// Words the message must contain besides the name.
    words: &'static [&'static str],
    add: fn(&mut Tar),
}

const BAD_CASES: &[BadCase] = &[
    BadCase {
        name: "accounts/x",
        absent: &["accounts/x"],
        words: &["--snapshot"],
        add: |t| {
            t.symlink("accounts/x", "/etc");
        },
    },
    BadCase {
        name: "accounts/7.0",
        absent: &["accounts/7.0"],
        words: &["--snapshot"],
        add: |t| {
            t.hardlink("accounts/7.0", "accounts/5.0");
        },
    },
    BadCase {
        name: "accounts/8.0",
        absent: &["accounts/8.0"],
        words: &["--snapshot"],
        add: |t| {
            t.header(&Header::new("accounts/8.0", rawtar::FIFO));
        },
    },
    BadCase {
        name: "accounts/9.0",
        absent: &["accounts/9.0"],
        words: &["--snapshot"],
        add: |t| {
            t.header(&Header {
                devmajor: 1,
                devminor: 3,
                ..Header::new("accounts/9.0", rawtar::CHR)
            });
        },
    },
    BadCase {
        name: "accounts/123",
        absent: &["accounts/123"],
        words: &["--snapshot"],
        add: |t| {
            t.file("accounts/123", b"no dot\n");
        },
    },
    BadCase {
        name: "snapshots/1/2",
        absent: &["snapshots/1/2", "snapshots/1"],
        words: &["--snapshot"],
        add: |t| {
            t.file("snapshots/1/2", b"slot mismatch\n");
        },
    },
    BadCase {
        name: "snapshots/abc/abc",
        absent: &["snapshots/abc"],
        words: &["--snapshot"],
        add: |t| {
            t.file("snapshots/abc/abc", b"not a slot\n");
        },
    },
    BadCase {
        name: "other",
        absent: &["other"],
        words: &["--snapshot"],
        add: |t| {
            t.file("other", b"other\n");
        },
    },
    BadCase {
        name: "accounts/1.2/",
        absent: &["accounts/1.2"],
        words: &["--snapshot"],
        add: |t| {
            t.dir("accounts/1.2/");
        },
    },
    BadCase {
        name: "snapshots/5",
        absent: &["snapshots/5"],
        words: &["--snapshot"],
        add: |t| {
            t.file("snapshots/5", b"a file where a slot directory goes\n");
        },
    },
    BadCase {
        name: "../version",
        absent: &["../version"],
        words: &["--snapshot", ".."],
        add: |t| {
            t.file("../version", b"escape\n");
        },
    },
    BadCase {
        name: "accounts/../version",
        absent: &[],
        words: &["--snapshot", ".."],
        add: |t| {
            t.file("accounts/../version", b"replaces version through ..\n");
        },
    },
];

#[test]
fn snapshot_refuses_other_members_before_writing_them() {
    let td = TestDir::new("snapshot_refuses");
    let mut failures = Vec::new();
    for case in BAD_CASES {
        let mut t = Tar::new();
        good_prefix(&mut t);
        (case.add)(&mut t);
        good_suffix(&mut t);
        let archive =
            write_archive(&td, &format!("bad-{}.tar", case.name.replace('/', "_")), &t.finish());
        let r = std::panic::catch_unwind(|| {
            for_each_backend(&format!("refuse {}", case.name), |cfg| {
                let (dest, out) = extract(&td, cfg, &archive, &["--snapshot"]);
                let ctx = format!("member `{}` [{}]", case.name, cfg.name());
                expect_fatal_naming(&out, case.name, case.words, &ctx);
                let ctx = format!("{ctx}\n{}", out.describe());
                assert_eq!(
                    util::read(dest.join("version")),
                    b"prefix version\n",
                    "a member before the refused one is missing or incomplete: {ctx}"
                );
                assert_eq!(util::read(dest.join("accounts/5.0")), b"prefix account\n", "{ctx}");
                assert_eq!(
                    fs::metadata(dest.join("accounts/5.0")).unwrap().nlink(),
                    1,
                    "something was linked to accounts/5.0: {ctx}"
                );
                for a in case.absent {
                    assert!(!exists(&dest.join(a)), "`{a}` exists: {ctx}");
                }
                for a in ["snapshots/7", "accounts/6.0", "snapshots/status_cache"] {
                    assert!(
                        !exists(&dest.join(a)),
                        "`{a}`, after the refused member, exists: {ctx}"
                    );
                }
            });
        });
        if r.is_err() {
            failures.push(case.name);
        }
    }
    assert!(failures.is_empty(), "refusal cases that failed (messages above): {failures:?}");
}

// --- Limits -------------------------------------------------------------------------------------

/// `a` 512 bytes, `d/`, `d/b` 1024 bytes, `c` 512 bytes: 4 members, 2048 bytes, largest 1024.
fn limits_archive() -> Vec<u8> {
    let mut t = Tar::new();
    t.file("a", &[b'a'; 512]);
    t.dir("d/");
    t.file("d/b", &[b'b'; 1024]);
    t.file("c", &[b'c'; 512]);
    t.finish()
}

struct LimitCase {
    flag: &'static str,
    at_limit: &'static str,
    over: &'static str,
    /// The member the run stops at.
    stops_at: &'static str,
    /// Present after the refusal.
    present: &'static [&'static str],
    /// Absent after the refusal (the refused member first).
    absent: &'static [&'static str],
}

const LIMIT_CASES: &[LimitCase] = &[
    LimitCase {
        flag: "--max-files",
        at_limit: "4",
        over: "3",
        stops_at: "c",
        present: &["a", "d/b"],
        absent: &["c"],
    },
    LimitCase {
        flag: "--max-bytes",
        at_limit: "2K",
        over: "2047",
        stops_at: "c",
        present: &["a", "d/b"],
        absent: &["c"],
    },
    LimitCase {
        flag: "--max-member-size",
        at_limit: "1K",
        over: "1023",
        stops_at: "d/b",
        present: &["a", "d"],
        absent: &["d/b", "c"],
    },
];

#[test]
fn limits_pass_at_the_limit_and_stop_one_over() {
    let td = TestDir::new("limits");
    let archive = write_archive(&td, "limits.tar", &limits_archive());
    for_each_config("limits_pass_at_the_limit_and_stop_one_over", &MATRIX, |cfg| {
        for c in LIMIT_CASES {
            let (dest, out) = extract(&td, cfg, &archive, &[c.flag, c.at_limit]);
            let ctx = format!("{} {} [{}]\n{}", c.flag, c.at_limit, cfg.name(), out.describe());
            assert_eq!(out.code, Some(0), "at the limit the run must pass: {ctx}");
            assert_eq!(util::read(dest.join("c")), [b'c'; 512], "{ctx}");
            assert_eq!(util::read(dest.join("d/b")), [b'b'; 1024], "{ctx}");

            let (dest, out) = extract(&td, cfg, &archive, &[c.flag, c.over]);
            let ctx = format!("{} {} [{}]", c.flag, c.over, cfg.name());
            expect_fatal_naming(&out, c.stops_at, &[c.flag], &ctx);
            let ctx = format!("{ctx}\n{}", out.describe());
            for p in c.present {
                assert!(exists(&dest.join(p)), "`{p}`, before the limit, is missing: {ctx}");
            }
            assert_eq!(util::read(dest.join("a")), [b'a'; 512], "{ctx}");
            for p in c.absent {
                assert!(!exists(&dest.join(p)), "`{p}` exists (not even empty is allowed): {ctx}");
            }
        }
    });
}

/// The limits apply in `--snapshot` mode too, explicit values replacing the defaults.
#[test]
fn snapshot_mode_explicit_limits() {
    let td = TestDir::new("snapshot_limits");
    let archive = write_archive(&td, "snap.tar", &snapshot_archive());
    // Members in order: version (5 bytes), snapshots/, snapshots/123/, snapshots/123/123 (70000
    // bytes), snapshots/status_cache (12), accounts/, accounts/123.0 (5000), accounts/123.1 (0):
    // 8 members, 75017 bytes.
    for (args, stops_at, flag) in [
        (&["--max-files", "3"][..], "snapshots/123/123", "--max-files"),
        (&["--max-bytes", "70004"][..], "snapshots/123/123", "--max-bytes"),
        (&["--max-member-size", "69999"][..], "snapshots/123/123", "--max-member-size"),
    ] {
        let mut all = vec!["--snapshot"];
        all.extend_from_slice(args);
        let (dest, out) = extract(&td, two_backends()[1], &archive, &all);
        expect_fatal_naming(&out, stops_at, &[flag], &format!("{all:?}"));
        assert!(dest.join("snapshots/123").is_dir(), "{all:?}\n{}", out.describe());
        assert!(!exists(&dest.join(stops_at)), "{all:?}: {stops_at} exists\n{}", out.describe());
    }
    for args in
        [&["--max-files", "8"][..], &["--max-bytes", "75017"], &["--max-member-size", "70000"]]
    {
        let mut all = vec!["--snapshot"];
        all.extend_from_slice(args);
        let (_, out) = extract(&td, two_backends()[1], &archive, &all);
        assert_eq!(out.code, Some(0), "{all:?} is at the limit\n{}", out.describe());
    }
}

/// `version`, `accounts/`, then a header declaring `accounts/1.0` of `size` bytes (base-256
/// size field) and one zero block: the archive ends where the data should start.
fn snapshot_huge(size: u64) -> Vec<u8> {
    let mut t = Tar::new();
    t.file("version", b"1.2.0");
    t.dir("accounts/");
    t.header(&Header::file("accounts/1.0").size(Num::Base256(i128::from(size))));
    t.raw(&[0u8; 512]);
    t.unterminated()
}

/// `--snapshot` caps the total at 4 TiB by default: one byte over is refused from the header
/// alone (fast, nothing written); exactly 4 TiB passes admission and then fails as truncated;
/// an explicit `--max-bytes` replaces the default.
#[test]
fn snapshot_default_max_bytes_is_4_tib() {
    let td = TestDir::new("snapshot_4tib");
    // `version` holds 5 bytes: the total is 4 TiB exactly, then one byte more.
    let over = write_archive(&td, "over.tar", &snapshot_huge(4 * TIB - 4));
    let at = write_archive(&td, "at.tar", &snapshot_huge(4 * TIB - 5));
    for_each_backend("snapshot_default_max_bytes_is_4_tib", |cfg| {
        let (dest, out) = extract(&td, cfg, &over, &["--snapshot"]);
        let ctx = format!("4 TiB + 1 [{}]", cfg.name());
        expect_fatal_naming(&out, "accounts/1.0", &["--max-bytes"], &ctx);
        assert!(out.elapsed < Duration::from_secs(5), "{ctx}: took {:?}", out.elapsed);
        assert!(!exists(&dest.join("accounts/1.0")), "{ctx}: accounts/1.0 exists");
        assert_eq!(util::read(dest.join("version")), b"1.2.0", "{ctx}");

        for (archive, args, label) in [
            (&at, &["--snapshot"][..], "exactly 4 TiB"),
            (&over, &["--snapshot", "--max-bytes", "5T"][..], "4 TiB + 1 with --max-bytes 5T"),
        ] {
            let (dest, out) = extract(&td, cfg, archive, args);
            let ctx = format!("{label} [{}]\n{}", cfg.name(), out.describe());
            assert_eq!(out.code, Some(2), "the data is missing, so this fails: {ctx}");
            assert!(
                !out.stderr_str().contains("--max-bytes"),
                "refused by the limit although within it: {ctx}"
            );
            assert!(out.elapsed < Duration::from_secs(5), "took {:?}: {ctx}", out.elapsed);
            let (blocks, apparent) = disk_usage(&dest);
            assert!(blocks < 4 << 20 && apparent < 4 << 20, "DIR holds {blocks}/{apparent}: {ctx}");
        }
    });
}

// --- A header declaring 1 TB --------------------------------------------------------------------

/// The ~1 KB archives declaring a 1 TB member `name`: the size in a base-256 field, in a PAX
/// record, and zstd-compressed. `prefix` members come first.
fn tb_variants(prefix: &Tar, name: &str) -> Vec<(&'static str, Vec<u8>)> {
    let tb: u64 = 1_000_000_000_000;
    let with = |f: &dyn Fn(&mut Tar)| {
        let mut t = prefix.clone();
        f(&mut t);
        t.unterminated()
    };
    let base256 = with(&|t| {
        t.header(&Header::file(name).size(Num::Base256(i128::from(tb))));
        t.raw(&[0u8; 512]);
    });
    let pax = with(&|t| {
        t.pax(&[("size", tb.to_string())]);
        t.header(&Header::file(name));
    });
    let zst = rawtar::zstd(&base256, 3);
    vec![("base-256 size", base256), ("PAX size", pax), ("zstd", zst)]
}

/// A ~1 KB archive declaring a 1 TB member must fail fast and leave nothing big behind: no
/// preallocation, no sparse `ftruncate` to the declared size, no pool-sized zero writes.
#[test]
fn one_tb_member_in_a_1kb_archive_fails_fast() {
    let td = TestDir::new("one_tb");
    let mut snap_prefix = Tar::new();
    snap_prefix.dir("accounts/");
    let mut archives = Vec::new();
    for (mode, prefix, name) in
        [("plain", Tar::new(), "big"), ("--snapshot", snap_prefix, "accounts/1.0")]
    {
        for (label, bytes) in tb_variants(&prefix, name) {
            if label == "base-256 size" && mode == "plain" {
                assert!(bytes.len() <= 1024, "not a 1 KB archive");
            }
            let file = format!("tb-{mode}-{label}").replace(|c: char| !c.is_alphanumeric(), "_");
            archives.push((mode, name, label, write_archive(&td, &file, &bytes)));
        }
    }
    for_each_config("one_tb_member_in_a_1kb_archive_fails_fast", &MATRIX, |cfg| {
        for (mode, name, label, archive) in &archives {
            let args: &[&str] = if *mode == "plain" { &[] } else { &["--snapshot"] };
            let (dest, out) = extract(&td, cfg, archive, args);
            let ctx = format!("{label}, {mode} [{}]\n{}", cfg.name(), out.describe());
            assert_eq!(out.code, Some(2), "expected exit 2: {ctx}");
            assert!(out.elapsed < Duration::from_secs(5), "took {:?}: {ctx}", out.elapsed);
            let (blocks, apparent) = disk_usage(&dest);
            let listing = snapshot(&dest).listing();
            assert!(blocks <= 4 << 20, "DIR has {blocks} bytes allocated: {ctx}\n{listing}");
            assert!(apparent <= 4 << 20, "DIR has {apparent} bytes of st_size: {ctx}\n{listing}");
            let du = Cmd::new("du").args(["-s", "--block-size=1"]).arg(&dest).run();
            let used: u64 = du
                .stdout_str()
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("du failed\n{}", du.describe()));
            assert!(used <= 4 << 20, "du says {used} bytes: {ctx}");
            assert!(
                out.diagnostics().iter().any(|l| l.starts_with(&format!("fastuntar: {name}: "))),
                "the message does not name {name}: {ctx}"
            );
        }
    });
}

/// A lying size with some data behind it: the run fails at the end of the data, and the file
/// left incomplete holds what arrived, no more. With `--direct-io` the writers reserve up to
/// 64 MiB ahead of the data (`PREALLOC_AHEAD` in src/write/portable.rs, fallocate mode 0, which
/// also moves i_size); the incomplete file must not keep that reservation as zeros that were
/// never in the archive.
#[test]
fn incomplete_file_is_no_larger_than_its_data() {
    let td = TestDir::new("lying_size_data");
    let data = Rng::new(9).bytes(1 << 20);
    let mut t = Tar::new();
    t.header(&Header::file("big").size(Num::Base256(1_000_000_000_000)));
    t.raw(&data);
    let archive = write_archive(&td, "tb-1mib.tar", &t.unterminated());
    for_each_config("incomplete_file_is_no_larger_than_its_data", &MATRIX, |cfg| {
        let (dest, out) = extract(&td, cfg, &archive, &[]);
        let ctx = format!("[{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(2), "expected exit 2: {ctx}");
        assert!(out.elapsed < Duration::from_secs(5), "took {:?}: {ctx}", out.elapsed);
        let m = fs::metadata(dest.join("big")).unwrap();
        assert!(
            m.len() <= data.len() as u64 && m.blocks() * 512 <= 2 << 20,
            "the incomplete file has st_size {} and {} bytes allocated for {} bytes of data: {ctx}",
            m.len(),
            m.blocks() * 512,
            data.len()
        );
        let got = util::read(dest.join("big"));
        assert_eq!(&got[..], &data[..got.len()], "the data written differs: {ctx}");
    });
}

// --- zstd window ----------------------------------------------------------------------------------

/// The window log in a zstd frame header (None for a single-segment frame).
fn zstd_window_log(frame: &[u8]) -> Option<u32> {
    let fhd = *frame.get(4)?;
    if fhd & 0x20 != 0 {
        return None;
    }
    Some(10 + u32::from(frame.get(5)? >> 3))
}

#[test]
fn max_window() {
    let test = "max_window";
    util::with_tools(test, &["zstd"], |td| {
        let mut t = Tar::new();
        t.dir("w/");
        for i in 0..4u64 {
            t.file(format!("w/f{i}"), &Rng::new(i).bytes(40_000));
        }
        let tar = write_archive(td, "w.tar", &t.finish());
        let zst = td.join("w.tar.zst");
        // Through a pipe, zstd cannot know the size and keeps the 2 GiB window in the header.
        util::sh(&format!("cat '{}' | zstd -q --long=31 -c > '{}'", tar.display(), zst.display()));
        let frame = util::read(&zst);
        let wlog = zstd_window_log(&frame);
        assert_eq!(wlog, Some(31), "zstd --long=31 through a pipe did not write a 2 GiB window");

        // --max-window 2G: decodes, from a pipe and from the file, with one decoder thread and
        // with several (a frame over the workers' window is the reader's own).
        for threads in ["1", "4"] {
            let dest = td.fresh("dest");
            let out = fastuntar()
                .args(["--max-window", "2G", "--threads", threads, "-x", "-", "-C"])
                .arg(&dest)
                .stdin(Input::Bytes(frame.clone()))
                .run();
            out.expect_code(0);
            assert_eq!(util::read(dest.join("w/f3")), Rng::new(3).bytes(40_000));
            let args = ["--max-window", "2G", "--threads", threads];
            let (_, out) = extract(td, two_backends()[1], &zst, &args);
            out.expect_code(0);
        }

        // The default (128M, zstd -d's own) and an explicit 128M: refused before anything is
        // decoded, and the message says what to do. (A 98 KB frame declaring 2 GiB that decodes
        // 3 GiB of zeros took 2.1 GB of RSS under the old 2G default.)
        for (input, limit, threads) in [
            ("pipe", None, "1"),
            ("file", None, "1"),
            ("pipe", Some("128M"), "4"),
            ("file", Some("128M"), "4"),
            ("file", None, "4"),
        ] {
            let ctx = format!("{input}, --max-window {limit:?}, --threads {threads}");
            let dest = td.fresh("dest");
            let mut c = fastuntar();
            if let Some(limit) = limit {
                c.args(["--max-window", limit]);
            }
            c.args(["--threads", threads, "-C"]).arg(&dest);
            if input == "pipe" {
                c.args(["-x", "-"]).stdin(Input::Bytes(frame.clone()));
            } else {
                c.arg("-xf").arg(&zst);
            }
            let out = c.run();
            assert_eq!(out.code, Some(2), "[{ctx}] expected exit 2\n{}", out.describe());
            let diags = out.diagnostics();
            assert_eq!(diags.len(), 1, "[{ctx}] one message line\n{}", out.describe());
            assert!(
                diags[0].starts_with("fastuntar: ") && diags[0].contains("raise --max-window"),
                "[{ctx}] the message should say to raise --max-window\n{}",
                out.describe()
            );
            assert!(!exists(&dest.join("w/f0")), "[{ctx}] data was extracted\n{}", out.describe());
        }
    });
}

/// A `./` member is DIR itself. Without --snapshot it gets the member's mode and mtime as GNU
/// tar gives them (as root); with --snapshot DIR is left as the operator made it: a 0700
/// ledger directory must not become 0755 (or 0777) because an archive said so.
#[test]
fn dot_member_and_dest_modes() {
    let test = "dot_member_and_dest_modes";
    if !is_root() {
        note(&format!("SKIP {test}: GNU tar applies ./'s mode to DIR only as root (or with -p)"));
        return;
    }
    let td = TestDir::new(test);
    let mut t = Tar::new();
    t.header(&Header {
        mode: Num::Octal(0o777),
        mtime: Num::Octal(1_000_000_000),
        ..Header::new("./", rawtar::DIR)
    });
    t.file("version", b"1.2.0\n");
    let archive = write_archive(&td, "dot.tar", &t.finish());
    let make_dest = |name: &str| {
        let dest = td.fresh(name);
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o700)).unwrap();
        dest
    };
    let gnu = make_dest("gnu");
    let status =
        std::process::Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&gnu).status();
    let gnu_mode = fs::metadata(&gnu).unwrap().mode() & 0o7777;
    let gnu_mtime = fs::metadata(&gnu).unwrap().mtime();
    assert!(status.is_ok_and(|s| s.success()));
    for_each_backend(test, |cfg| {
        let dest = make_dest("dest");
        let out = fastuntar_with(cfg).extract(&archive, &dest).run();
        out.expect_code(0);
        let meta = fs::metadata(&dest).unwrap();
        assert_eq!(meta.mode() & 0o7777, gnu_mode, "as GNU tar: DIR takes ./'s mode");
        assert_eq!(meta.mtime(), gnu_mtime, "as GNU tar: DIR takes ./'s mtime");

        let dest = make_dest("dest");
        let out = fastuntar_with(cfg).extract(&archive, &dest).arg("--snapshot").run();
        out.expect_code(0);
        assert_eq!(
            fs::metadata(&dest).unwrap().mode() & 0o7777,
            0o700,
            "--snapshot: DIR untouched"
        );
        assert_eq!(util::read(dest.join("version")), b"1.2.0\n");
    });
    assert_eq!(gnu_mode, 0o777, "GNU tar as root applies ./'s mode (the premise of this test)");
}

// --- Exit codes ---------------------------------------------------------------------------------

#[test]
fn exit_codes_and_one_line_messages() {
    let td = TestDir::new("exit_codes");
    let clean = {
        let mut t = Tar::new();
        t.dir("d/");
        t.file("d/ok", b"ok\n");
        write_archive(&td, "clean.tar", &t.finish())
    };
    let skipping = {
        let mut t = Tar::new();
        t.file("first", b"first\n");
        t.file("../x", b"outside\n");
        // Hard links whose targets are refused (device nodes were skipped here until they were
        // made as root, as GNU tar makes them).
        t.hardlink("dev/hl", "../t");
        t.file("../evil\nfastuntar: forged line", b"forged\n");
        t.hardlink("blk", "");
        t.file("last", b"last\n");
        write_archive(&td, "skipping.tar", &t.finish())
    };
    let fatal = {
        let mut t = Tar::new();
        t.file("whole", b"whole\n");
        t.header(&Header::file("cut").size(Num::Octal(100_000)));
        t.raw(&[7u8; 1024]);
        write_archive(&td, "fatal.tar", &t.unterminated())
    };
    for_each_config("exit_codes_and_one_line_messages", &MATRIX, |cfg| {
        let (_, out) = extract(&td, cfg, &clean, &[]);
        let ctx = format!("clean [{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        assert!(out.diagnostics().is_empty(), "{ctx}");

        // -v: the summary is said when asked (success is quiet off a terminal).
        // --totals: the summary off a terminal (after GNU tar's Total bytes read line).
        let (dest, out) = extract(&td, cfg, &skipping, &["-v", "--totals"]);
        let ctx = format!("skipping [{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(2), "members were skipped (GNU tar's 2): {ctx}");
        let mut diags = out.diagnostics();
        diags.retain(|l| !l.starts_with("Total bytes read: "));
        let expected = ["../x", "dev/hl", "../evil\\nfastuntar: forged line", "blk"];
        assert_eq!(diags.len(), expected.len(), "one line per skipped member: {ctx}");
        for (line, name) in diags.iter().zip(expected) {
            assert!(
                line.starts_with(&format!("fastuntar: {name}: ")),
                "expected `fastuntar: {name}: ...`, got `{line}`: {ctx}"
            );
        }
        for l in out.stderr_lines().iter().filter(|l| !l.starts_with("Total bytes read: ")) {
            assert!(l.starts_with("fastuntar: "), "a line not in tar's shape `{l}`: {ctx}");
        }
        let summary = out.stderr_lines().into_iter().find(|l| is_summary(l));
        assert!(
            summary.as_deref().is_some_and(|s| s.contains("4 skipped")),
            "the summary should count the skipped members: {ctx}"
        );
        assert_eq!(util::read(dest.join("first")), b"first\n", "{ctx}");
        assert_eq!(util::read(dest.join("last")), b"last\n", "{ctx}");
        for p in ["dev", "blk", "x", "../x"] {
            assert!(!exists(&dest.join(p)), "{p} exists: {ctx}");
        }

        let (dest, out) = extract(&td, cfg, &fatal, &[]);
        let ctx = format!("fatal [{}]", cfg.name());
        expect_fatal_naming(&out, "cut", &["incomplete"], &ctx);
        assert_eq!(util::read(dest.join("whole")), b"whole\n", "{ctx}\n{}", out.describe());
    });
    note("exit_codes_and_one_line_messages: checked 0/1/2 under every writer config");
}
