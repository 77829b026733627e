//! The user's side of fastuntar: listing (`-t`, `-tv`) against GNU tar on the peer corpus, `-v`
//! names, `--exclude`, the summary line and `--json`, progress on a terminal (and its cost),
//! `--completions`/`--man`/`--help`/`--version`, formats found by magic, `--sync`, and tar's
//! spellings (`-xf`, `-f A -x`, `--file=A`, positional, `-C`, `-k`, `--skip-old-files`, `-m`,
//! `--strip-components`, `--same-owner` with owner names and `--numeric-owner`, `-p`).
//!
//! GNU tar is the reference wherever it has an opinion. Every run goes through the test kit
//! (`util::Cmd`), which sets `LC_ALL=C` for fastuntar and for GNU tar alike.

use crate::util;
use crate::util::engine::{Matrix, THREADS_ONE_AND_MORE};

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use util::gnu::{self, Case, Ran};
use util::rawtar::{Header, Num, Tar};
use util::snapshot::{Compare, diff, snapshot};
use util::{
    BIN, Cmd, Input, Output, Rng, TestDir, fastuntar, fastuntar_with, for_each_config, gnu_tar,
    have_tool, is_summary, note,
};

/// The rows this suite runs over (tests/util/engine.rs): every writer row for the cases that
/// write (`for_each_config`); the options here act on names and metadata the writers carry out,
/// so the decoder rows (plain tars), the stock limits (a handful of files) and a second
/// writer-thread row change nothing except where the writers split the members (`THREADS`).
const MATRIX: Matrix = Matrix::WRITERS;

/// The cases whose outcome depends on how the writers split the members (-m, -k,
/// --skip-old-files, owners): every writer row at one writer, and a row of each backend at four
/// (directories, links and FIFOs then come from the dispatcher, files from workers).
const THREADS: Matrix = MATRIX.threads(THREADS_ONE_AND_MORE);

/// `--snapshot -m`: the two backends at one and four writers (the snapshot layout's modes
/// are the same decision in each).
const BACKENDS: Matrix = THREADS.only(&["portable", "uring"]);

// --- Test isolation -----------------------------------------------------------------------------

/// Every test holds this shared; the progress-cost measurement holds it exclusively, so no other
/// test of this file runs while it times extractions.
static RUNNING: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    RUNNING.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    RUNNING.write().unwrap_or_else(|e| e.into_inner())
}

// --- Helpers ------------------------------------------------------------------------------------

/// Runs `body`, a test that compares with GNU tar, under the shared lock in a fresh
/// directory `dir`; where `tar` is missing, only `have_tool`'s SKIP line.
fn with_gnu_tar(test: &str, dir: &str, body: impl FnOnce(&TestDir)) {
    let _g = shared();
    if have_tool(test, "tar") {
        body(&TestDir::new(dir));
    }
}

/// `with_gnu_tar` for a test that needs root (`why`); as another user, a SKIP line.
fn with_gnu_tar_as_root(test: &str, why: &str, dir: &str, body: impl FnOnce(&TestDir)) {
    if util::have_root(test, why) {
        with_gnu_tar(test, dir, body);
    }
}

/// `with_gnu_tar_as_root` for a test whose programs run as another user: its directory is one
/// that user can reach (`TestDir::for_users`).
fn with_gnu_tar_as_users(test: &str, why: &str, dir: &str, body: impl FnOnce(&TestDir)) {
    let _g = shared();
    if util::have_root(test, why) && have_tool(test, "tar") {
        body(&TestDir::for_users(dir));
    }
}

/// fastuntar with `TZ=UTC` (through env(1), which execs it: the kit's timeout still applies).
/// The kit's strict checks (panic, signal, exit code range) are repeated here.
fn fastuntar_utc<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let out = Cmd::new("env").arg("TZ=UTC").arg(BIN).args(args).run();
    check_sane(&out);
    out
}

fn check_sane(out: &Output) {
    assert!(!out.timed_out, "fastuntar hung\n{}", out.describe());
    assert!(out.signal.is_none(), "fastuntar died of a signal\n{}", out.describe());
    assert!(!out.stderr_str().contains("panicked"), "fastuntar panicked\n{}", out.describe());
    assert!(matches!(out.code, Some(0..=2)), "exit code outside 0..=2\n{}", out.describe());
}

/// Quotes `s` for sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn q(p: &Path) -> String {
    sh_quote(&p.display().to_string())
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

/// A small tree with the usual shapes: sizes around the block/page/64 KiB/1 MiB edges, nested
/// and empty directories, odd names, a symlink, a hard link, modes.
fn small_tree(root: &Path) {
    let top = root.join("top");
    let w = |rel: &str, data: &[u8]| {
        let p = top.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
    };
    w("a.txt", b"hello\n");
    w("empty", b"");
    w("sizes/f511", &Rng::new(1).bytes(511));
    w("sizes/f4097", &Rng::new(2).bytes(4097));
    w("sizes/f65536", &Rng::new(3).bytes(65536));
    w("sizes/f70000", &Rng::new(4).bytes(70_000));
    w("sizes/f1m1", &Rng::new(5).bytes((1 << 20) + 1));
    w("sub/dir/deep.txt", b"deep\n");
    w("odd/sp ace", b"space\n");
    w("odd/new\nline", b"newline\n");
    w("odd/-dash", b"dash\n");
    w("modes/x", b"#!/bin/sh\n");
    w("modes/ro", b"read only\n");
    fs::set_permissions(top.join("modes/x"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(top.join("modes/ro"), fs::Permissions::from_mode(0o444)).unwrap();
    fs::create_dir_all(top.join("emptydir")).unwrap();
    symlink("a.txt", top.join("link")).unwrap();
    fs::hard_link(top.join("a.txt"), top.join("hard")).unwrap();
    for (i, p) in
        ["a.txt", "sizes", "sub/dir", "sub", "odd", "modes", "emptydir", ""].iter().enumerate()
    {
        util::tree::set_mtime(&top.join(p), 1_600_000_000 + i as i64 * 77, 0);
    }
}

/// `src/top` archived by GNU tar as `archive` (`tar -C src -cf archive top`).
fn gnu_archive_top(src: &Path, archive: &Path) -> PathBuf {
    let out = gnu_tar([
        "-C".as_ref(),
        src.as_os_str(),
        "-cf".as_ref(),
        archive.as_os_str(),
        "top".as_ref(),
    ]);
    assert!(out.success(), "GNU tar -c failed\n{}", out.describe());
    archive.to_path_buf()
}

/// `small_tree` archived by GNU tar as `NAME` (`tar -C src -cf NAME top`).
fn small_archive(td: &TestDir, name: &str) -> PathBuf {
    let src = td.join(format!("{name}.src"));
    fs::create_dir(&src).unwrap();
    small_tree(&src);
    gnu_archive_top(&src, &td.join(name))
}

/// GNU tar's extraction of `archive` with `args`, into a fresh directory.
fn gnu_extract(td: &TestDir, archive: &Path, args: &[&str]) -> PathBuf {
    let d = td.fresh("gnu");
    let out = Cmd::new("tar").args(args).extract(archive, &d).run();
    assert!(out.success(), "GNU tar -x failed\n{}", out.describe());
    d
}

/// The comparison for two extractions made during this test.
fn cmp(td: &TestDir) -> Compare {
    Compare::extraction(td.started)
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/peer")
}

// --- -t / -tv against GNU tar on the peer corpus ------------------------------------------------

/// Archives whose listings may differ from GNU tar's, and why.
const LIST_ALLOWED: &[(&str, &str)] = &[(
    // Its first member, `directory1/`, declares a size of 1. GNU tar's -t skips one block of
    // "data" after it (the `directory2/` header) and shows size 1; on -x GNU tar ignores a
    // directory's size and creates both directories, as fastuntar does for -x and -t alike.
    "test_compat_tar_directory_1.tar",
    "GNU -t honours a directory's declared size (shows 1, skips the next header); -x does not",
)];

/// GNU tar's view of an archive: `tar -tf` on the file, or on the decompressed stream for .lz4
/// (GNU tar has no lz4 reader here) and .zst. For .zst this matters for
/// `test_compat_zstd_2.tar.zst`, which starts with a skippable frame: GNU tar's own detection
/// misses it ("This does not look like a tar archive") although `zstd -dc` reads it and the tar
/// inside is fine. That is a limit of GNU tar's magic sniffing, not of the archive.
///
/// The verdict is tar's, not the decompressor's: `test_compat_lz4_2.tar.lz4` has "unrelated junk
/// data at the end of the file" after a complete LZ4 frame; `lz4 -dc` decodes all of it and then
/// exits 1, while fastuntar ignores data after a complete LZ4 frame by design (src/decode/lz4.rs,
/// as libarchive's test for this archive expects). Trailing garbage after a zstd frame is
/// covered by `list_checks_the_compressed_stream_to_its_end`.
fn gnu_list(archive: &Path, verbose: bool) -> Output {
    let name = archive.file_name().unwrap().to_string_lossy().into_owned();
    let flags = if verbose { "-tvf" } else { "-tf" };
    let script = if name.ends_with(".lz4") {
        format!("{{ lz4 -dc {} 2>/dev/null; true; }} | TZ=UTC tar {flags} -", q(archive))
    } else if name.ends_with(".zst") {
        format!("{{ zstd -q -dc {} 2>/dev/null; true; }} | TZ=UTC tar {flags} -", q(archive))
    } else {
        format!("TZ=UTC tar {flags} {}", q(archive))
    };
    Cmd::new("bash").args(["-c", &format!("set -o pipefail; {script}")]).run()
}

/// GNU tar fails `-t` on a .tar.zst whose compressed stream is damaged after the tar end marker
/// (zstd exits non-zero: "Child returned status 1"), and fastuntar's own `-x` does too (it reads
/// the stream to its end, src/extract.rs `verify_trailer`); `-t` must not exit 0 there.
#[test]
fn list_checks_the_compressed_stream_to_its_end() {
    let _g = shared();
    let test = "list_checks_the_compressed_stream_to_its_end";
    let Some(td) = util::gnu::dir(test, &["zstd"]) else { return };
    let mut t = Tar::new();
    t.file("a", b"a\n");
    t.file("b", &Rng::new(1).bytes(10_000));
    let mut junk = util::rawtar::zstd(&t.finish(), 3);
    junk.extend_from_slice(b"unrelated junk after the zstd frame\n");
    let mut bad_sum = util::rawtar::zstd(&t.finish(), 3);
    // With a content checksum: flip one bit of it (the last 4 bytes of the frame).
    let mut with_sum = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    with_sum.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut with_sum, &t.finish()).unwrap();
    let mut sum = with_sum.finish().unwrap();
    let n = sum.len();
    sum[n - 1] ^= 1;
    bad_sum.clear();
    bad_sum.extend(sum);
    let mut failures = Vec::new();
    for (label, bytes) in [("junk after the frame", junk), ("bad content checksum", bad_sum)] {
        let archive = td.write(format!("{}.tar.zst", label.replace(' ', "_")), &bytes);
        let gnu = gnu_tar(["-tf".as_ref(), archive.as_os_str()]);
        assert!(!gnu.success(), "[{label}] GNU tar accepts it\n{}", gnu.describe());
        let d = td.fresh("x");
        let x = fastuntar().extract(&archive, &d).run();
        let t = fastuntar().arg("-tf").arg(&archive).run();
        if x.code != Some(2) || t.code == Some(0) {
            failures.push(format!(
                "[{label}] GNU tar -t exits {:?}; fastuntar -x exits {:?}, -t exits {:?}\n{}",
                gnu.code,
                x.code,
                t.code,
                t.describe()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An incremental archive (`tar -g`): its directories are dumpdirs ('D'), whose size is the
/// length of their name list; `-tv` shows it as GNU tar does (fastuntar showed 0).
#[test]
fn list_of_an_incremental_archive_like_gnu_tar() {
    with_gnu_tar("list_of_an_incremental_archive_like_gnu_tar", "incremental_list", |td| {
        let src = td.fresh("src");
        util::tree::write_files(&src, &[("d/a", "a\n"), ("d/sub/b", "b\n")]);
        let snar = td.join("snar");
        let archive =
            util::gnu::archive(td, "inc.tar", &["-g", snar.to_str().unwrap()], &src, &["d"]);
        let sized = |g: &Ran, _: &Ran| -> Vec<String> {
            let dumpdir =
                g.out.stdout_str().lines().any(|l| l.ends_with(" d/") && !l.contains(" 0 "));
            if dumpdir {
                vec![]
            } else {
                vec![format!("GNU tar lists no sized d/\n{}", g.out.describe())]
            }
        };
        gnu::check(td, [Case::list(&archive, &["-v"], &[]).env("TZ", "UTC").code(0).also(&sized)]);
    });
}

#[test]
fn list_matches_gnu_tar_on_the_peer_corpus() {
    let _g = shared();
    let test = "list_matches_gnu_tar_on_the_peer_corpus";
    if !util::have_tools(test, &["tar", "lz4", "zstd"]) {
        return;
    }
    let dir = corpus_dir();
    let Ok(rd) = fs::read_dir(&dir) else {
        util::skip(test, &format!("no corpus at {}", dir.display()));
        return;
    };
    let mut archives: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    archives.sort();
    assert!(archives.len() > 50, "the corpus looks incomplete: {} archives", archives.len());
    let mut mismatches = Vec::new();
    let (mut compared, mut gnu_failed) = (0, 0);
    for archive in &archives {
        let name = archive.file_name().unwrap().to_string_lossy().into_owned();
        let allowed = LIST_ALLOWED.iter().any(|(n, _)| *n == name);
        let gnu = gnu_list(archive, false);
        let ours = fastuntar_utc(&["-tf".as_ref(), archive.as_os_str()]);
        if !gnu.success() {
            gnu_failed += 1;
            if ours.code == Some(0) {
                mismatches.push(format!(
                    "{name}: GNU tar fails (exit {:?}: {}) but fastuntar -t exits 0",
                    gnu.code,
                    gnu.stderr_str().trim()
                ));
            }
            continue;
        }
        compared += 1;
        let gnu_v = gnu_list(archive, true);
        let ours_v = fastuntar_utc(&["-tvf".as_ref(), archive.as_os_str()]);
        for (what, g, o) in [("-t", &gnu, &ours), ("-tv", &gnu_v, &ours_v)] {
            if o.code != Some(0) {
                mismatches.push(format!(
                    "{name} {what}: GNU tar lists it, fastuntar exits {:?}: {}",
                    o.code,
                    o.stderr_str().trim()
                ));
            } else if g.stdout != o.stdout && !allowed {
                let (gl, ol) = (g.stdout_str(), o.stdout_str());
                let first = gl
                    .lines()
                    .zip(ol.lines())
                    .find(|(a, b)| a != b)
                    .map(|(a, b)| format!("GNU: {a:?}\n      ours: {b:?}"))
                    .unwrap_or_else(|| {
                        format!("{} lines vs {} lines", gl.lines().count(), ol.lines().count())
                    });
                mismatches.push(format!("{name} {what}: first difference\n      {first}"));
            }
        }
    }
    note(&format!(
        "{test}: {compared} archives compared, {gnu_failed} that GNU tar fails on checked for a \
         non-zero exit, {} mismatches",
        mismatches.len()
    ));
    assert!(mismatches.is_empty(), "listing mismatches:\n  {}", mismatches.join("\n  "));
}

// --- -v -----------------------------------------------------------------------------------------

/// `tar -xvf` prints each member name on stdout; fastuntar -xvf prints the same names (10 or
/// more), exit 0, in the C locale and in a UTF-8 one: a row a locale.
fn assert_verbose_matches(td: &TestDir, archive: &Path) {
    let enough = |_: &Ran, o: &Ran| -> Vec<String> {
        let n = o.out.stdout_str().lines().count();
        if n < 10 { vec![format!("{n} names printed\n{}", o.out.describe())] } else { vec![] }
    };
    let row = |locale| Case::flags(archive, &["-xv"]).only_stdout().env("LC_ALL", locale).code(0);
    gnu::check(td, ["C", "C.UTF-8"].map(|l| row(l).also(&enough)));
}

#[test]
fn verbose_extraction_prints_names_like_gnu_tar() {
    with_gnu_tar("verbose_extraction_prints_names_like_gnu_tar", "verbose_names", |td| {
        let archive = small_archive(td, "v.tar");
        assert_verbose_matches(td, &archive);
    });
}

/// Names that are not ASCII: GNU tar quotes them by the locale (octal escapes such as
/// `\303\274` in the C locale, the characters themselves in a UTF-8 one), as fastuntar's `-t`
/// already does (src/list.rs, `utf8_locale`); `-xv` must print the same.
#[test]
fn verbose_quotes_non_ascii_names_by_locale() {
    with_gnu_tar("verbose_quotes_non_ascii_names_by_locale", "verbose_non_ascii", |td| {
        let src = td.join("src");
        util::tree::write_files(&src, &[("top/ünï", "u\n"), ("top/日本/ファイル", "j\n")]);
        for i in 0..10 {
            fs::write(src.join(format!("top/f{i}")), b"x").unwrap();
        }
        let archive = gnu_archive_top(&src, &td.join("u.tar"));
        assert_verbose_matches(td, &archive);
    });
}

// --- --exclude ----------------------------------------------------------------------------------

fn exclude_tree(root: &Path) {
    for f in [
        "top/x.o",
        "top/x.c",
        "top/a/b/f",
        "top/a/bc/g",
        "top/a/b.o",
        "top/dir/x/f.o",
        "top/dir/y",
        "top/dir2",
        "top/cache/y/z",
        "top/cache/w",
        "top/sub/cache/k",
        "top/sub/cachex",
        "top/sub/dir",
        "top/sub/a/b/c",
    ] {
        let p = root.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, f.as_bytes()).unwrap();
    }
}

/// GNU tar matches a member's name without its trailing `/`: `*/cache/*` excludes what is in
/// `top/cache/` but not the directory `top/cache` itself, and a pattern with a trailing `/`
/// (`cache/`) matches nothing here.
const EXCLUDE_CASES: &[&[&str]] = &[
    &["*.o"],
    &["dir"],
    &["a/b"],
    &["*/cache/*"],
    &["cache"],
    &["cache/"],
    &["top/sub"],
    &["*.o", "dir"],
    &["x.?", "*/a/*", "cachex"],
    &["*.[oc]", "top/a/b[!c]"],
    &["nothing-matches"],
];

#[test]
fn exclude_matches_gnu_tar() {
    with_gnu_tar("exclude_matches_gnu_tar", "exclude", |td| {
        let src = td.join("src");
        exclude_tree(&src);
        let archive = gnu_archive_top(&src, &td.join("ex.tar"));
        let rows = EXCLUDE_CASES.iter().flat_map(|pats| {
            let flags: Vec<&str> = pats.iter().flat_map(|p| ["--exclude", p]).collect();
            [
                Case::extract(&archive, &flags, &[]).code(0),
                Case::list(&archive, &flags, &[]).code(0),
            ]
        });
        gnu::check(td, rows);
    });
}

/// Names GNU tar's own `-c` does not write (a leading `/` or `./`, `//`, backslashes, brackets)
/// and patterns that tell gnulib's two matching paths apart: a pattern without wildcards is
/// compared as a string after every `/`, backslashes removed; one with wildcards goes to
/// fnmatch, after every `/` not followed by another. `tar -t --exclude P` and `fastuntar -t
/// --exclude P` list the same members for each.
#[test]
fn exclude_corner_cases_match_gnu_tar() {
    with_gnu_tar("exclude_corner_cases_match_gnu_tar", "exclude_corners", |td| {
        let names = [
            "x//y1", "x/y1", "a\\b", "ab", "a\\", "q[", "q[[", "[[", "e", "cache/x", "cache//x",
            "dir/sub", "z/./w", "m/n.log", "m.log/k", "/abs/p", "./dot/p", "a*b", "a\\*b", "7up",
            "]", "x-y",
        ];
        let mut t = Tar::new();
        for n in names {
            t.file(n, b"");
        }
        let archive = td.write("corners.tar", t.finish());
        let patterns = [
            "/y1",
            "/y?",
            "y1",
            "a\\b",
            "a\\\\b",
            "a\\",
            "a\\*b",
            "a*b",
            "[",
            "q[",
            "[[",
            "q[[",
            "q[[]",
            "*[",
            "cache/",
            "cache",
            "z/.",
            "n.log",
            "*.log",
            "abs",
            "/abs",
            "dot",
            "./dot",
            "",
            "*",
            "x/",
            "x//",
            "/",
            ".",
            "./*",
            "/*",
            "*/p",
            "[]]",
            "[!a]*",
            "[[:digit:]]*",
            "[[:foo:]]*",
            "x[-]y",
            "[a-c]?",
            "*\\",
            "?",
            "*/",
            "**",
        ];
        let rows = patterns.map(|p| Case::list(&archive, &["--exclude", p], &[]).code(0));
        gnu::check(td, rows);
    });
}

/// A 1 MiB member name with 500,000 '/' and a few patterns: judged in linear time (GNU tar's
/// algorithm, fnmatch after every '/', took 95 s a pattern on it). The listing is GNU tar's:
/// the long name stays, its twin ending in `.log` goes.
#[test]
fn exclude_on_a_one_mebibyte_name() {
    let _g = shared();
    let long = format!("{}end", "a/".repeat(499_999));
    let mut t = Tar::new();
    t.gnu_long_name(&long).file("placeholder", b"");
    t.gnu_long_name(format!("{long}.log")).file("placeholder", b"");
    t.file("cache/x", b"");
    let td = TestDir::new("exclude_long_name");
    let a = td.write("long.tar", t.finish());
    let out = fastuntar()
        .args(["--exclude", "*.log", "--exclude", "cache", "--exclude", "*/tmp/*", "-tf"])
        .arg(&a)
        .timeout(Duration::from_secs(15))
        .measure_rss()
        .run();
    out.expect_code(0);
    assert_eq!(out.stdout, format!("{long}\n").as_bytes(), "{}", out.describe());
    assert!(cpu_time(&out) < Duration::from_secs(5), "took {:?}", cpu_time(&out));
}

/// Issue 27, finding 4: `--transform 's/ /_/g'` on three members with 1 MiB PAX names of
/// spaces took 18 s (each regexec measured the rest of the name for its NUL before searching
/// it: quadratic, as in GNU tar). With REG_STARTEND it is linear, as `--exclude` is.
#[test]
fn global_transform_on_one_mebibyte_names() {
    let _g = shared();
    let mut t = Tar::new();
    let names: Vec<String> = (0..3).map(|i| format!("x{i}{}", " ".repeat((1 << 20) - 8))).collect();
    for name in &names {
        t.pax(&[("path", name.as_str())]).file("placeholder", b"a");
    }
    let td = TestDir::new("global_transform_long_names");
    let a = td.write("spaces.tar", t.finish());
    let out = fastuntar()
        .args(["--transform", "s/ /_/g", "--show-transformed-names", "-tf"])
        .arg(&a)
        .measure_rss()
        .run();
    out.expect_code(0);
    let want: String = names.iter().map(|n| format!("{}\n", n.replace(' ', "_"))).collect();
    assert!(out.stdout == want.as_bytes(), "{}", out.describe());
    assert!(cpu_time(&out) < Duration::from_secs(5), "took {:?}", cpu_time(&out));
}

/// The CPU time (user + sys) a run took, as /usr/bin/time measured it (`Cmd::measure_rss`),
/// else its wall time: what a quadratic scan costs, whatever share of the 2 cores the run got
/// on a loaded machine.
fn cpu_time(out: &Output) -> Duration {
    out.cpu_seconds.map_or(out.elapsed, Duration::from_secs_f64)
}

// --- The summary: human line and --json ---------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum JsonValue {
    Number(f64),
    Null,
    /// Plain ASCII without escapes (what --json writes: filesystem names, modes, reasons).
    Str(String),
    /// An object of the same (`direct_io`).
    Object(BTreeMap<String, JsonValue>),
}

/// Parses one JSON object whose values are numbers, null, escape-free strings or objects of
/// the same (what --json prints).
fn parse_flat_json(s: &str) -> Result<BTreeMap<String, JsonValue>, String> {
    let b = s.trim().as_bytes();
    let mut i = 0;
    let map = parse_object(b, &mut i, s)?;
    ws(b, &mut i);
    if i != b.len() {
        return Err(format!("trailing bytes after the object in {s:?}"));
    }
    Ok(map)
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn expect(b: &[u8], i: &mut usize, c: u8, s: &str) -> Result<(), String> {
    if b.get(*i) == Some(&c) {
        *i += 1;
        Ok(())
    } else {
        Err(format!("expected '{}' at byte {i} of {s:?}", c as char))
    }
}

/// A string without escapes or control characters, from its opening quote.
fn parse_string(b: &[u8], i: &mut usize, s: &str) -> Result<String, String> {
    expect(b, i, b'"', s)?;
    let start = *i;
    while *i < b.len() && b[*i] != b'"' {
        if b[*i] == b'\\' || b[*i] < 0x20 {
            return Err(format!("unexpected byte in a string at {i} of {s:?}"));
        }
        *i += 1;
    }
    let text = String::from_utf8(b[start..*i].to_vec()).map_err(|e| e.to_string())?;
    expect(b, i, b'"', s)?;
    Ok(text)
}

fn parse_object(b: &[u8], i: &mut usize, s: &str) -> Result<BTreeMap<String, JsonValue>, String> {
    let mut map = BTreeMap::new();
    expect(b, i, b'{', s)?;
    ws(b, i);
    if b.get(*i) == Some(&b'}') {
        *i += 1;
        return Ok(map);
    }
    loop {
        ws(b, i);
        let key = parse_string(b, i, s)?;
        ws(b, i);
        expect(b, i, b':', s)?;
        ws(b, i);
        let value = if b[*i..].starts_with(b"null") {
            *i += 4;
            JsonValue::Null
        } else if b.get(*i) == Some(&b'"') {
            JsonValue::Str(parse_string(b, i, s)?)
        } else if b.get(*i) == Some(&b'{') {
            JsonValue::Object(parse_object(b, i, s)?)
        } else {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                *i += 1;
            }
            let text = std::str::from_utf8(&b[start..*i]).unwrap();
            // JSON numbers: no leading '+', no leading zeros, digits around the '.'.
            let valid = !text.is_empty()
                && !text.starts_with('+')
                && !text.starts_with('.')
                && !text.ends_with('.')
                && !text.contains(".e")
                && !(text.trim_start_matches('-').starts_with('0')
                    && text.trim_start_matches('-').len() > 1
                    && !text.trim_start_matches('-')[1..].starts_with(['.', 'e', 'E']));
            let n: f64 = text.parse().map_err(|_| format!("bad number {text:?} in {s:?}"))?;
            if !valid || !n.is_finite() {
                return Err(format!("not a JSON number: {text:?} in {s:?}"));
            }
            JsonValue::Number(n)
        };
        if map.insert(key.clone(), value).is_some() {
            return Err(format!("duplicate key {key:?} in {s:?}"));
        }
        ws(b, i);
        match b.get(*i) {
            Some(b',') => *i += 1,
            Some(b'}') => {
                *i += 1;
                return Ok(map);
            }
            _ => return Err(format!("expected ',' or '}}' at byte {i} of {s:?}")),
        }
    }
}

#[test]
fn json_parser_self_check() {
    let m = parse_flat_json(r#"{"a":1,"b":2.5,"c":null, "d" : -3e2}"#).unwrap();
    assert_eq!(m["a"], JsonValue::Number(1.0));
    assert_eq!(m["c"], JsonValue::Null);
    assert_eq!(m["d"], JsonValue::Number(-300.0));
    let m = parse_flat_json(r#"{"a":{"b":"x","c":1},"d":"y"}"#).unwrap();
    let JsonValue::Object(inner) = &m["a"] else { panic!("{m:?}") };
    assert_eq!(inner["b"], JsonValue::Str("x".into()));
    assert_eq!(m["d"], JsonValue::Str("y".into()));
    for bad in [
        r#"{"a":01}"#,
        r#"{"a":1,}"#,
        r#"{"a":"x\"y"}"#,
        r#"{"a":1} x"#,
        r#"{"a":1,"a":2}"#,
        r#"{"a":{"b":1}"#,
    ] {
        assert!(parse_flat_json(bad).is_err(), "{bad} parsed");
    }
}

/// Members: `d/` dir, 5 files (0, 1, 4096, 70000, 1 MiB + 5 bytes), a symlink, a hard link.
fn summary_archive(td: &TestDir) -> (PathBuf, u64) {
    let sizes = [0usize, 1, 4096, 70_000, (1 << 20) + 5];
    let mut t = Tar::new();
    t.dir("d/");
    for (i, n) in sizes.iter().enumerate() {
        t.file(format!("d/f{i}"), &Rng::new(i as u64).bytes(*n));
    }
    t.symlink("d/link", "f1");
    t.hardlink("d/hard", "d/f2");
    let bytes: u64 = sizes.iter().map(|&n| n as u64).sum();
    (td.write("summary.tar", t.finish()), bytes)
}

const SUMMARY_MEMBERS: u64 = 8;
const SUMMARY_FILES: u64 = 5;

fn json_of(out: &Output) -> BTreeMap<String, JsonValue> {
    let stdout = out.stdout_str();
    assert!(
        stdout.ends_with('\n') && stdout.lines().count() == 1,
        "stdout must be exactly one line\n{}",
        out.describe()
    );
    parse_flat_json(stdout.trim_end()).unwrap_or_else(|e| panic!("{e}\n{}", out.describe()))
}

fn num(j: &BTreeMap<String, JsonValue>, key: &str, out: &Output) -> f64 {
    match j.get(key) {
        Some(JsonValue::Number(n)) => *n,
        other => panic!("`{key}` is {other:?}, not a number\n{}", out.describe()),
    }
}

/// The writer count comes from `--writer-threads` or the machine, never the environment: the
/// old test variable FASTUNTAR_WRITER_THREADS is ignored (it used to fail this run with "not
/// a number", and to set the count).
#[test]
fn writer_threads_ignore_the_environment() {
    let _g = shared();
    let td = TestDir::new("writer-env");
    let (archive, _) = summary_archive(&td);
    let plain = fastuntar().args(["--json"]).extract(&archive, td.fresh("dest")).run();
    let want = num(&json_of(&plain), "writer_threads", &plain);
    for value in ["x", "7"] {
        let out = fastuntar()
            .env("FASTUNTAR_WRITER_THREADS", value)
            .args(["--json"])
            .extract(&archive, td.fresh("dest"))
            .run();
        assert_eq!(out.code, Some(0), "{}", out.describe());
        assert_eq!(num(&json_of(&out), "writer_threads", &out), want, "{}", out.describe());
    }
}

#[test]
fn json_summary() {
    let _g = shared();
    let td = TestDir::new("json");
    let (archive, bytes) = summary_archive(&td);
    let skipping = {
        let mut t = Tar::new();
        t.file("ok", b"ok\n");
        t.file("../x", b"x\n");
        td.write("skip.tar", t.finish())
    };
    let keys = [
        "members",
        "files",
        "files_direct",
        "files_buffered",
        "dirs",
        "links",
        "bytes",
        "elapsed_s",
        "mb_per_s",
        "sync_s",
        "decode_threads",
        "frames",
        "frames_ahead",
        "frames_in_place",
        "frame_bytes_handed",
        "frame_bytes_copied",
        "pool_bytes",
        "frame_pool_bytes",
        "writer_threads",
        "uring_writers",
        "direct_io",
        "resumed",
        "resume_points",
        "skipped",
        "exit_code",
    ];
    for (label, args, direct, sync) in [
        ("plain", &["--json"][..], false, false),
        ("direct", &["--json", "--direct-io", "--direct-io-threshold", "0"][..], true, false),
        ("sync", &["--json", "--sync"][..], false, true),
        (
            "portable direct",
            &["--json", "--io", "portable", "--direct-io", "--direct-io-threshold", "0"][..],
            true,
            false,
        ),
    ] {
        let d = td.fresh("dest");
        let out = fastuntar().args(args).extract(&archive, &d).run();
        let ctx = format!("[{label}]\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        let j = json_of(&out);
        for k in keys {
            assert!(j.contains_key(k), "key `{k}` missing: {ctx}");
        }
        assert_eq!(j.len(), keys.len(), "unexpected keys {:?}: {ctx}", j.keys());
        assert_eq!(num(&j, "members", &out), SUMMARY_MEMBERS as f64, "{ctx}");
        assert_eq!(num(&j, "files", &out), SUMMARY_FILES as f64, "{ctx}");
        let want_direct = if direct { SUMMARY_FILES as f64 } else { 0.0 };
        assert_eq!(num(&j, "files_direct", &out), want_direct, "files_direct: {ctx}");
        assert_eq!(
            num(&j, "files_buffered", &out),
            SUMMARY_FILES as f64 - want_direct,
            "files_buffered: {ctx}"
        );
        assert_eq!(num(&j, "bytes", &out), bytes as f64, "bytes = sum of file sizes: {ctx}");
        assert!(num(&j, "elapsed_s", &out) > 0.0, "elapsed_s: {ctx}");
        assert!(num(&j, "mb_per_s", &out) >= 0.0, "mb_per_s: {ctx}");
        assert_eq!(num(&j, "exit_code", &out), 0.0, "{ctx}");
        assert_eq!(num(&j, "skipped", &out), 0.0, "{ctx}");
        let (writers, uring) = (num(&j, "writer_threads", &out), num(&j, "uring_writers", &out));
        assert!(writers >= 1.0 && (0.0..=writers).contains(&uring), "writers: {ctx}");
        if label == "portable direct" {
            assert_eq!(uring, 0.0, "--io portable: {ctx}");
        }
        // The direct-IO plan: asked for (threshold 0: every file), or auto, which leaves a
        // small archive buffered wherever it is extracted.
        let JsonValue::Object(plan) = &j["direct_io"] else { panic!("direct_io: {ctx}") };
        let text = |k: &str| match plan.get(k) {
            Some(JsonValue::Str(v)) => v.clone(),
            other => panic!("direct_io.{k} is {other:?}: {ctx}"),
        };
        let (mode, reasons, large) = match direct {
            true => ("always", &["asked"][..], "direct"),
            false => ("auto", &["small_archive", "in_memory_fs", "unmeasured_fs"][..], "buffered"),
        };
        assert_eq!(text("mode"), mode, "{ctx}");
        assert!(reasons.contains(&text("reason").as_str()), "{ctx}");
        assert_eq!((text("small"), text("large")), (large.to_string(), large.to_string()), "{ctx}");
        assert!(!text("filesystem").is_empty(), "{ctx}");
        // What the filesystem needs (null where it refuses O_DIRECT for a new file).
        let align = plan.get("alignment");
        let aligned = matches!(align, Some(JsonValue::Number(a)) if *a >= 512.0);
        assert!(aligned || align == Some(&JsonValue::Null), "{ctx}");
        let threshold = if direct { JsonValue::Number(0.0) } else { JsonValue::Null };
        assert_eq!(plan.get("threshold"), Some(&threshold), "{ctx}");
        if sync {
            assert!(num(&j, "sync_s", &out) >= 0.0, "sync_s: {ctx}");
        } else {
            assert_eq!(j["sync_s"], JsonValue::Null, "sync_s without --sync: {ctx}");
        }
        assert!(
            !out.stderr_lines().iter().any(|l| is_summary(l)),
            "--json also printed the human summary: {ctx}"
        );
        assert!(out.diagnostics().is_empty(), "unexpected messages: {ctx}");
    }
    // A skipped member: exit 2 (GNU tar's status for a member it did not extract), and the
    // object says so.
    let d = td.fresh("dest");
    let out = fastuntar().args(["--json", "-xf"]).arg(&skipping).arg("-C").arg(&d).run();
    assert_eq!(out.code, Some(2), "{}", out.describe());
    let j = json_of(&out);
    assert_eq!(num(&j, "exit_code", &out), 2.0, "{}", out.describe());
    assert_eq!(num(&j, "skipped", &out), 1.0, "{}", out.describe());
    assert_eq!(num(&j, "files", &out), 1.0, "{}", out.describe());
}

/// `--direct-io[=auto|always|never]` and `--no-direct-io` (the last one given wins), and what
/// `--json` and `-v` say of the plan (issues 31 and 40). Auto leaves the small plain archive
/// from its file buffered (its size bounds the tree); through a pipe (a tree of unknown size)
/// it starts buffered and writes the files of 64 KiB and more direct once the files before
/// them pass the mark (256 MiB; the hidden `--debug-direct-after` sets a small one), where the
/// filesystem of the test directory is one that gains (ext4, XFS), else buffered with the
/// filesystem's reason. `-v`'s listing on stdout is GNU tar's, unchanged; the plan is said at
/// the end of the summary line on stderr.
#[test]
fn direct_io_modes() {
    let _g = shared();
    let td = TestDir::new("direct_io_modes");
    let (tar_file, _) = summary_archive(&td);
    let tar = std::fs::read(&tar_file).unwrap();
    // The same through zstd, whose one frame declares its content size (the zstd crate's
    // bulk compressor writes it); the files' bytes are random, so the archive is as large as
    // the tar: a compressed archive's size is about the least its tree is.
    let zst = zstd::bulk::compress(&tar, 3).unwrap();
    let zst_file = td.write("summary.tar.zst", zst.clone());
    // (zstd, flags, piped, mode, the reason where the filesystem gains, the files that go
    // direct there). The five files are of 0, 1, 4096, 70,000 and 1 MiB + 5 bytes: 74,097
    // bytes land before the last; the tar is 1,091,584 bytes.
    type Case<'a> = (bool, &'a [&'a str], bool, &'a str, &'a str, u64);
    let cases: &[Case] = &[
        (true, &[], false, "auto", "unknown_tree", 0),
        (true, &[], true, "auto", "unknown_tree", 0),
        (true, &["--debug-direct-after", "1M"], false, "auto", "large_archive", 2),
        (true, &["--debug-direct-after", "1M"], true, "auto", "large_frame", 2),
        (true, &["--debug-direct-after", "2M"], true, "auto", "unknown_tree", 0),
        (true, &["--debug-direct-after", "70K"], true, "auto", "large_frame", 2),
        (true, &["--direct-io"], true, "always", "asked", 2),
        (false, &[], false, "auto", "small_archive", 0),
        (false, &[], true, "auto", "unknown_tree", 0),
        (false, &["--direct-io=auto"], true, "auto", "unknown_tree", 0),
        (false, &["--debug-direct-after", "70K"], true, "auto", "unknown_tree", 1),
        (false, &["--debug-direct-after", "73K"], true, "auto", "unknown_tree", 0),
        (false, &["--debug-direct-after", "0"], true, "auto", "unknown_tree", 2),
        (false, &["--debug-direct-after", "1M"], false, "auto", "large_archive", 2),
        (false, &["--debug-direct-after", "2M"], false, "auto", "small_archive", 0),
        (false, &["--direct-io"], false, "always", "asked", 2),
        (false, &["--direct-io=always"], false, "always", "asked", 2),
        (false, &["--direct-io=never"], true, "never", "declined", 0),
        (false, &["--no-direct-io"], true, "never", "declined", 0),
        (false, &["--direct-io", "--no-direct-io"], false, "never", "declined", 0),
        (false, &["--no-direct-io", "--direct-io"], false, "always", "asked", 2),
        (false, &["--direct-io=never", "--direct-io=auto"], true, "auto", "unknown_tree", 0),
        (false, &["--direct-io", "--direct-io-threshold", "1M"], false, "always", "asked", 1),
    ];
    for &(zstd, flags, piped, mode, gains, want) in cases {
        let d = td.fresh("dest");
        let mut c = fastuntar();
        c.args(["--json", "-x", "-C"]).arg(&d).args(flags);
        let (archive, bytes) = if zstd { (&zst_file, &zst) } else { (&tar_file, &tar) };
        if piped {
            c.args(["-f", "-"]).stdin(Input::Bytes(bytes.clone()));
        } else {
            c.arg("-f").arg(archive);
        }
        let out = c.run();
        let ctx = format!("zstd {zstd} {flags:?} piped {piped}\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        let j = json_of(&out);
        let JsonValue::Object(plan) = &j["direct_io"] else { panic!("direct_io: {ctx}") };
        let text = |k: &str| match plan.get(k) {
            Some(JsonValue::Str(v)) => v.clone(),
            other => panic!("direct_io.{k} is {other:?}: {ctx}"),
        };
        assert_eq!(text("mode"), mode, "{ctx}");
        let reason = text("reason");
        // Auto stays buffered on tmpfs and filesystems not measured, whatever the archive.
        let elsewhere = ["in_memory_fs", "unmeasured_fs", "btrfs_checksums", "no_o_direct"];
        let here = reason == gains;
        assert!(here || (mode == "auto" && elsewhere.contains(&reason.as_str())), "{ctx}");
        let direct = here && !["small_archive", "declined"].contains(&gains);
        let after = plan.get("after");
        match (direct, gains) {
            (false, _) => assert_eq!(after, Some(&JsonValue::Null), "{ctx}"),
            (true, "unknown_tree") => {
                let JsonValue::Number(n) = after.unwrap() else { panic!("after: {ctx}") };
                assert!(*n >= 0.0, "{ctx}");
            }
            (true, _) => assert_eq!(after, Some(&JsonValue::Number(0.0)), "{ctx}"),
        }
        assert_eq!(text("large"), if direct { "direct" } else { "buffered" }, "{ctx}");
        assert_eq!(text("small"), "buffered", "{ctx}");
        // Of the five files the two of 64 KiB and more may go direct.
        let want = if here { want as f64 } else { 0.0 };
        assert_eq!(num(&j, "files_direct", &out), want, "{ctx}");
    }
    // A gzip file of known size under the mark whose tree passes it: 300 KB of zeros, then
    // 1 MiB of them, which goes direct.
    let mut t = Tar::new();
    t.file("z/first", &vec![0u8; 300_000]).file("z/second", &vec![0u8; 1 << 20]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    std::io::Write::write_all(&mut gz, &t.finish()).unwrap();
    let gz_file = td.write("zeros.tar.gz", gz.finish().unwrap());
    // The portable writer (a small memory cgroup's choice for such a plan) writes direct once
    // the gate opens, as io_uring's does.
    let cases = [("100K", 1.0, "auto"), ("2M", 0.0, "auto"), ("100K", 1.0, "portable")];
    for (mark, want, io) in cases {
        let d = td.fresh("dest");
        let out = fastuntar()
            .args(["--json", "--io", io, "--debug-direct-after", mark, "-x", "-C"])
            .arg(&d)
            .arg("-f")
            .arg(&gz_file)
            .run();
        let ctx = format!("gzip, direct after {mark}, --io {io}\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        let j = json_of(&out);
        let JsonValue::Object(plan) = &j["direct_io"] else { panic!("direct_io: {ctx}") };
        let gains = plan.get("reason") == Some(&JsonValue::Str("unknown_tree".into()));
        let want = if gains { want } else { 0.0 };
        assert_eq!(num(&j, "files_direct", &out), want, "{ctx}");
        assert_eq!(fs::read(d.join("z/second")).unwrap(), vec![0u8; 1 << 20], "{ctx}");
    }
    let d = td.fresh("dest");
    let out = fastuntar().arg("--direct-io=sometimes").extract(&tar_file, &d).run();
    assert_eq!(out.code, Some(2), "{}", out.describe());
    assert!(out.stderr_str().contains("auto, always, never"), "{}", out.describe());
    // -v: the listing alone on stdout, the plan at the end of the summary line (asked for by
    // --totals: -v alone says none off a terminal).
    let d = td.fresh("dest");
    let out = fastuntar().args(["--totals", "-xv", "-f"]).arg(&tar_file).arg("-C").arg(&d).run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(
        out.stdout_str(),
        "d/\nd/f0\nd/f1\nd/f2\nd/f3\nd/f4\nd/link\nd/hard\n",
        "{}",
        out.describe()
    );
    let summary: Vec<String> = out.stderr_lines().into_iter().filter(|l| is_summary(l)).collect();
    assert!(
        summary.len() == 1 && summary[0].contains("; direct IO auto: every file buffered"),
        "{}",
        out.describe()
    );
    // Without -v the summary line does not say it.
    let d = td.fresh("dest");
    let out = fastuntar().args(["-x", "-f"]).arg(&tar_file).arg("-C").arg(&d).run();
    assert!(!out.stderr_str().contains("direct IO"), "{}", out.describe());
}

#[test]
fn summary_line_and_quiet() {
    let _g = shared();
    let td = TestDir::new("summary_line");
    let (archive, bytes) = summary_archive(&td);
    for (args, direct) in [
        (&[][..], 0),
        (&["--direct-io", "--direct-io-threshold", "0"][..], SUMMARY_FILES),
        (&["--io", "portable"][..], 0),
    ] {
        // Success is quiet off a terminal, as GNU tar's (issue 28).
        let d = td.fresh("dest");
        let out = fastuntar().args(args).extract(&archive, &d).run();
        let ctx = format!("{args:?}\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        assert!(out.stderr.is_empty() && out.stdout.is_empty(), "not quiet: {ctx}");

        // -v: the names on stdout, and no summary, as GNU tar (issue 44; issue 28 had -v ask
        // for it).
        let d = td.fresh("dest");
        let out = fastuntar().args(args).args(["-v", "-xf"]).arg(&archive).arg("-C").arg(&d).run();
        let ctx = format!("-v {args:?}\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        assert!(out.stderr.is_empty() && !out.stdout.is_empty(), "-v: {ctx}");

        // Asked for: --totals (after GNU tar's line), with -v too.
        for asked in [&["--totals"][..], &["--totals", "-v"]] {
            let d = td.fresh("dest");
            let out =
                fastuntar().args(args).args(asked).arg("-xf").arg(&archive).arg("-C").arg(&d).run();
            let ctx = format!("{asked:?} {args:?}\n{}", out.describe());
            assert_eq!(out.code, Some(0), "{ctx}");
            let lines = out.stderr_lines();
            assert_eq!(lines.len(), 2, "the summary line (after the totals): {ctx}");
            assert!(lines[0].starts_with("Total bytes read: "), "{ctx}");
            assert_eq!(out.stdout.is_empty(), asked.len() == 1, "{ctx}");
            assert!(is_summary(lines.last().unwrap()), "{ctx}");
        }
        let d = td.fresh("dest");
        let out =
            fastuntar().args(args).args(["--totals", "-xf"]).arg(&archive).arg("-C").arg(&d).run();
        let ctx = format!("--totals {args:?}\n{}", out.describe());
        let lines = out.stderr_lines();
        let last = lines.last().unwrap();
        assert!(is_summary(last), "not a summary line: {ctx}");
        assert!(out.stderr_str().ends_with('\n'), "{ctx}");
        let want = format!(
            "fastuntar: {SUMMARY_MEMBERS} members, {SUMMARY_FILES} files ({direct} direct, {} \
             buffered), {:.1} MB in ",
            SUMMARY_FILES - direct,
            bytes as f64 / 1e6
        );
        assert!(last.starts_with(&want), "expected `{want}...`: {ctx}");

        let d = td.fresh("dest");
        let out = fastuntar().args(args).arg("-q").extract(&archive, &d).run();
        let ctx = format!("-q {args:?}\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        assert!(out.stderr.is_empty(), "-q on a clean archive must print nothing: {ctx}");
        assert!(out.stdout.is_empty(), "{ctx}");
    }
}

#[test]
fn sync_reports_its_time() {
    let _g = shared();
    let td = TestDir::new("sync");
    let (archive, _) = summary_archive(&td);
    let d = td.fresh("dest");
    let out =
        fastuntar().args(["--sync", "--totals", "-vxf"]).arg(&archive).arg("-C").arg(&d).run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let lines = out.stderr_lines();
    let summary = lines.iter().find(|l| is_summary(l));
    // One of the summary's `; `-separated parts is `sync N.NN s` (with -v the direct-IO plan
    // follows it).
    let sync_part = summary.and_then(|s| s.split("; ").find_map(|p| p.strip_prefix("sync ")));
    assert!(
        sync_part.is_some_and(|t| t
            .trim_end()
            .strip_suffix(" s")
            .is_some_and(|n| n.parse::<f64>().is_ok_and(|v| v >= 0.0))),
        "the summary should say `; sync N.NN s`\n{}",
        out.describe()
    );
}

// --- Progress on a terminal ---------------------------------------------------------------------

/// Random letters A..=P as a reader (for a big archive without a big buffer).
struct RandomReader {
    rng: Rng,
    left: u64,
}

impl std::io::Read for RandomReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len().min(1 << 16) as u64).min(self.left) as usize;
        let bytes = self.rng.bytes(n);
        for (b, r) in buf[..n].iter_mut().zip(bytes) {
            *b = b'A' + (r & 0x0f);
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// ~840 MB of tar (eight 100 MiB files: three random, five zero), zstd level 1. The random bytes
/// take 16 values, so zstd has to entropy-decode them. (The issue asks for ~300 MB taking over
/// 0.5 s; on this machine 300 MB extracts in ~0.2 s, so the archive is larger; zeros are cheap
/// to generate.)
fn progress_archive(td: &TestDir) -> PathBuf {
    let path = td.join("progress.tar.zst");
    let file = fs::File::create(&path).unwrap();
    let enc = zstd::stream::write::Encoder::new(file, 1).unwrap().auto_finish();
    let mut b = tar::Builder::new(enc);
    const SIZE: u64 = 100 << 20;
    for i in 0..8u64 {
        let mut h = tar::Header::new_gnu();
        h.set_size(SIZE);
        h.set_mode(0o644);
        h.set_mtime(1_600_000_000);
        h.set_entry_type(tar::EntryType::Regular);
        let random = matches!(i, 0 | 3 | 6);
        let name = format!("p/{}{i}", if random { "random" } else { "zero" });
        if random {
            b.append_data(&mut h, name, RandomReader { rng: Rng::new(i), left: SIZE }).unwrap();
        } else {
            b.append_data(&mut h, name, std::io::Read::take(std::io::repeat(0), SIZE)).unwrap();
        }
    }
    b.into_inner().unwrap();
    path
}

/// A place for the 300 MB extractions: tmpfs when there is one (no disk writeback noise in the
/// timings), else the test's directory.
fn scratch(td: &TestDir) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { td.path().to_path_buf() };
    tempfile::Builder::new()
        .prefix("fastuntar-cli-progress-")
        .tempdir_in(&base)
        .or_else(|_| tempfile::Builder::new().tempdir_in(td.path()))
        .unwrap()
}

/// Runs a shell command line under a pseudo-terminal (`script`), output captured.
use util::in_pty;

fn has_progress(text: &str) -> bool {
    (text.chars().any(is_bar) || text.contains(" read "))
        && text.contains("written")
        && (text.contains('\r') || text.contains('\x1b'))
}

/// Progress is drawn on a terminal (and only there, and not with -q).
#[test]
fn progress_on_a_terminal_only() {
    let _g = exclusive();
    let test = "progress_on_a_terminal_only";
    if !have_tool(test, "script") {
        return;
    }
    let td = TestDir::new("progress");
    let t0 = std::time::Instant::now();
    let archive = progress_archive(&td);
    note(&format!("{test}: archive generated in {:.2} s", t0.elapsed().as_secs_f64()));
    let work = scratch(&td);
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        let d = work.path().join(format!("d{n}"));
        fs::create_dir(&d).unwrap();
        d
    };
    let cmd = |d: &Path, extra: &str| {
        format!("exec {} --memory 8M {extra} -xf {} -C {}", sh_quote(BIN), q(&archive), q(d))
    };
    let mut failures = Vec::new();

    // 1. On a terminal: progress is drawn, then the summary.
    let d = fresh();
    let out = in_pty(&cmd(&d, ""));
    let text = out.stdout_str();
    note(&format!("{test}: extraction on a terminal took {:.2} s", out.elapsed.as_secs_f64()));
    if out.code != Some(0) {
        failures.push(format!("under a terminal: exit {:?}\n{}", out.code, out.describe()));
    } else if !has_progress(&text) {
        failures.push(format!("no progress drawn on a terminal:\n{}", text.escape_debug()));
    } else if !text.contains("fastuntar: 8 members, 8 files") {
        failures.push(format!("no summary line on the terminal:\n{}", text.escape_debug()));
    }
    if out.elapsed < Duration::from_millis(500) {
        note(&format!("{test}: NOTE the extraction took under 0.5 s; progress may not be drawn"));
    }
    fs::remove_dir_all(&d).unwrap();

    // 1b. From standard input on a terminal: the spinner form.
    let d = fresh();
    let out =
        in_pty(&format!("exec {} --memory 8M -x - -C {} < {}", sh_quote(BIN), q(&d), q(&archive)));
    if out.code != Some(0) || !has_progress(&out.stdout_str()) {
        failures.push(format!(
            "stdin on a terminal: exit {:?}, progress drawn: {}\n{}",
            out.code,
            has_progress(&out.stdout_str()),
            out.stdout_str().escape_debug()
        ));
    }
    fs::remove_dir_all(&d).unwrap();

    // 2. -q on a terminal: nothing at all.
    let d = fresh();
    let out = in_pty(&cmd(&d, "-q"));
    if out.code != Some(0) || !out.stdout.is_empty() {
        failures.push(format!(
            "-q on a terminal printed something (exit {:?}):\n{}",
            out.code,
            out.stdout_str().escape_debug()
        ));
    }
    fs::remove_dir_all(&d).unwrap();

    // 3. Not a terminal (stderr piped): nothing, as GNU tar (the summary when asked: --totals).
    let d = fresh();
    let out = fastuntar().args(["--memory", "8M", "-xf"]).arg(&archive).arg("-C").arg(&d).run();
    if out.code != Some(0) || !out.stderr.is_empty() {
        failures.push(format!("output without a terminal:\n{}", out.describe()));
    }
    fs::remove_dir_all(&d).unwrap();
    let d = fresh();
    let out = fastuntar()
        .args(["--memory", "8M", "--totals", "-vxf"])
        .arg(&archive)
        .arg("-C")
        .arg(&d)
        .run();
    let err = out.stderr_str();
    if out.code != Some(0)
        || out.stderr_lines().len() != 2
        || !is_summary(&out.stderr_lines()[1])
        || err.contains('\r')
        || err.contains('\x1b')
    {
        failures.push(format!("progress output without a terminal:\n{}", out.describe()));
    }
    fs::remove_dir_all(&d).unwrap();

    // 4. -v names on an 80-column terminal: each frame fits on one line, and no frame is left
    //    between the names (a name printed on the bar's line kept the frame before it in the
    //    scrollback, and a 130-column frame wrapped onto a second line).
    let d = fresh();
    let out = in_pty(&format!("stty cols 80 rows 24; {}", cmd(&d, "-v")));
    if out.code != Some(0) {
        failures.push(format!("-v on a terminal: exit {:?}\n{}", out.code, out.describe()));
    } else {
        failures.extend(frames_left(&out.stdout, 80, "-v on an 80-column terminal"));
        let lines = Screen::replay(&out.stdout, 80).lines;
        let names = lines.iter().filter(|l| l.starts_with("p/")).count();
        if names != 8 {
            failures.push(format!("-v: {names} of the 8 names on the screen:\n{lines:#?}"));
        }
    }
    fs::remove_dir_all(&d).unwrap();

    // 5. A run that fails half-way (the archive cut short): the bar is gone, the error is the
    //    last thing on the screen.
    let d = fresh();
    let cut = work.path().join("cut.tar.zst");
    let bytes = fs::read(&archive).unwrap();
    fs::write(&cut, &bytes[..bytes.len() * 3 / 5]).unwrap();
    let out = in_pty(&format!(
        "stty cols 80 rows 24; exec {} --memory 8M -xf {} -C {}",
        sh_quote(BIN),
        q(&cut),
        q(&d)
    ));
    if out.code != Some(2) {
        failures.push(format!(
            "a cut archive on a terminal: exit {:?}\n{}",
            out.code,
            out.describe()
        ));
    } else {
        failures.extend(frames_left(&out.stdout, 80, "a failing run on an 80-column terminal"));
        let screen = Screen::replay(&out.stdout, 80);
        if !screen.lines.iter().any(|l| l.starts_with("fastuntar: ")) {
            failures.push(format!("a failing run: no error on the screen:\n{:#?}", screen.lines));
        }
    }
    fs::remove_dir_all(&d).unwrap();
    fs::remove_file(&cut).unwrap();

    // The cost of drawing is measured by scripts/progress-cost.sh (a benchmark, not a timed
    // test) and recorded in docs/PERFORMANCE.md.
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What a terminal `cols` columns wide shows after `raw` (a pty's output): every line, the
/// scrolled-off ones too. It knows what indicatif and fastuntar write: text, `\r`, `\n`,
/// `ESC[nK` (erase in line), `ESC[nA`/`ESC[nB` (cursor up/down), `ESC[J` (erase below); other
/// escape sequences change nothing here. A character written past the last column wraps onto
/// the next line, as a terminal's autowrap does.
struct Screen {
    lines: Vec<String>,
    /// Bar frames that reached the last column and wrapped.
    wrapped_frames: usize,
}

impl Screen {
    fn replay(raw: &[u8], cols: usize) -> Screen {
        let text = String::from_utf8_lossy(raw);
        let mut lines: Vec<Vec<char>> = vec![Vec::new()];
        let (mut row, mut col) = (0usize, 0usize);
        let mut wrapped_frames = 0;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\r' => col = 0,
                '\n' => {
                    row += 1;
                    col = 0;
                }
                '\x1b' if chars.peek() == Some(&'[') => {
                    chars.next();
                    let mut param = String::new();
                    let mut fin = ' ';
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() || c == '@' || c == '~' {
                            fin = c;
                            break;
                        }
                        param.push(c);
                    }
                    let n: usize = param.trim_start_matches('?').parse().unwrap_or(0);
                    while lines.len() <= row {
                        lines.push(Vec::new());
                    }
                    match fin {
                        'K' => match n {
                            0 => lines[row].truncate(col),
                            1 => lines[row].iter_mut().take(col + 1).for_each(|c| *c = ' '),
                            _ => lines[row].clear(),
                        },
                        'A' => row = row.saturating_sub(n.max(1)),
                        'B' => row += n.max(1),
                        'J' => {
                            lines[row].truncate(col);
                            lines.truncate(row + 1);
                        }
                        _ => {}
                    }
                }
                c => {
                    if col == cols {
                        if lines.get(row).is_some_and(|l| l.iter().any(|&c| is_bar(c))) {
                            wrapped_frames += 1;
                        }
                        row += 1;
                        col = 0;
                    }
                    while lines.len() <= row {
                        lines.push(Vec::new());
                    }
                    let line = &mut lines[row];
                    while line.len() < col {
                        line.push(' ');
                    }
                    if col < line.len() {
                        line[col] = c;
                    } else {
                        line.push(c);
                    }
                    col += 1;
                }
            }
            while lines.len() <= row {
                lines.push(Vec::new());
            }
        }
        let lines = lines.into_iter().map(|l| l.into_iter().collect::<String>()).collect();
        Screen { lines, wrapped_frames }
    }
}

/// The progress bar's cells.
fn is_bar(c: char) -> bool {
    c == '█' || c == '░'
}

/// What is wrong with the progress bar in a pty's output `raw` on a terminal `cols` wide: no
/// frame drawn at all, a frame that wrapped, or a frame still on the screen or in the
/// scrollback at the end.
fn frames_left(raw: &[u8], cols: usize, what: &str) -> Vec<String> {
    let screen = Screen::replay(raw, cols);
    let mut wrong = Vec::new();
    if !String::from_utf8_lossy(raw).chars().any(is_bar) {
        wrong.push(format!("{what}: no progress bar drawn (too fast?)"));
    }
    if screen.wrapped_frames > 0 {
        wrong.push(format!("{what}: {} frames wider than {cols} columns", screen.wrapped_frames));
    }
    let left: Vec<_> = screen.lines.iter().filter(|l| l.chars().any(is_bar)).collect();
    if !left.is_empty() {
        wrong.push(format!("{what}: {} frames left on the screen:\n{left:#?}", left.len()));
    }
    wrong
}

// --- --completions, --man, --help, --version ----------------------------------------------------

#[test]
fn completions_man_help_version() {
    let _g = shared();
    let out = fastuntar().args(["--completions", "bash"]).run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let s = out.stdout_str();
    assert!(
        s.contains("--direct-io") && s.contains("complete") && s.contains("fastuntar"),
        "not a bash completion script for fastuntar\n{}",
        out.describe()
    );
    if util::have_tool("completions_man_help_version (bash -n)", "bash") {
        let td = TestDir::new("completions");
        let f = td.write("fastuntar.bash", &out.stdout);
        let check = Cmd::new("bash").args(["-n"]).arg(&f).run();
        assert!(check.success(), "the completion script is not valid bash\n{}", check.describe());
    }

    let out = fastuntar().arg("--man").run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let man = out.stdout_str();
    // clap_mangen starts with the `Aq` string definitions (`.ie`/`.el`/`.ds`); the first
    // request after that preamble must be the title.
    let first = man
        .lines()
        .find(|l| !(l.starts_with(".ie") || l.starts_with(".el") || l.starts_with(".\\\"")))
        .unwrap_or("");
    assert!(first.starts_with(".TH"), "the man page does not start with .TH\n{}", out.describe());
    assert!(man.contains(".SH") && man.contains("direct\\-io"), "{}", out.describe());

    let out = fastuntar().arg("--help").run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let help = out.stdout_str();
    assert!(help.contains("Examples"), "--help has no examples\n{help}");
    // Every flag of src/cli.rs (--completions and --man are deliberately hidden).
    let flags = [
        "-x, --extract",
        "-t, --list",
        "-f, --file",
        "-C, --directory",
        "-v, --verbose",
        "-k, --keep-old-files",
        "--exclude",
        "--strip-components",
        "--same-owner",
        "--no-same-owner",
        "-p, --preserve-permissions",
        "--direct-io",
        "--direct-io-threshold",
        "--memory",
        "--io",
        "--snapshot",
        "--max-files",
        "--max-bytes",
        "--max-member-size",
        "--max-window",
        "--sync",
        "--json",
        "-q, --quiet",
        "-?, --help",
        "-h, --dereference",
        "-H, --format",
        "--version",
        "-V, --label",
        "-K, --starting-file",
        "-R, --block-number",
        "-w, --interactive",
        "--index-file",
        "--add-file",
        "--show-defaults",
        "--usage",
        "--quoting-style",
    ];
    let missing: Vec<&str> = flags.iter().copied().filter(|f| !help.contains(f)).collect();
    assert!(missing.is_empty(), "--help does not mention {missing:?}\n{help}");

    // GNU tar's --show-defaults and --usage; --quoting-style's only style.
    let out = fastuntar().arg("--show-defaults").run();
    out.expect_code(0);
    assert_eq!(out.stdout_str(), "-f- -b20 --quoting-style=escape\n");
    let out = fastuntar().arg("--usage").run();
    out.expect_code(0);
    assert!(out.stdout_str().starts_with("Usage: fastuntar "), "{}", out.describe());
    let td = TestDir::new("quoting_style");
    let archive = small_archive(&td, "q.tar");
    let out = fastuntar().arg("-tf").arg(&archive).arg("--quoting-style=bogus").run();
    out.expect_code(2);
    assert!(out.stdout.is_empty(), "{}", out.describe());
    assert!(out.stderr_str().contains("invalid quoting style 'bogus'"), "{}", out.describe());
    assert_eq!(out.stderr_lines().len(), 1, "{}", out.describe());

    // `-V` is GNU tar's --label, not the version.
    let out = fastuntar().arg("--version").run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let v = out.stdout_str();
    assert!(
        v.trim() == format!("fastuntar {}", env!("CARGO_PKG_VERSION")),
        "--version printed {v:?}"
    );
}

// --- Formats by magic ---------------------------------------------------------------------------

#[test]
fn formats_by_magic_not_by_name() {
    let test = "formats_by_magic_not_by_name";
    with_gnu_tar(test, "formats", |td| {
        let plain = small_archive(td, "plain.tar");
        let want_dir = gnu_extract(td, &plain, &[]);
        let want = snapshot(&want_dir);
        // (format, tool, compress command, misleading name)
        let formats: &[(&str, &str, &str, &str)] = &[
            ("tar", "cat", "cat", "tar-named.tar.zst"),
            ("zstd", "zstd", "zstd -q -c", "zstd-named.tar.gz"),
            ("gzip", "gzip", "gzip -c", "gzip-named.bin"),
            ("bzip2", "bzip2", "bzip2 -c", "bzip2-named.tar.lz4"),
            ("lz4", "lz4", "lz4 -q -c", "lz4-named.tar.bz2"),
        ];
        let mut failures = Vec::new();
        for (format, tool, compress, name) in formats {
            if !have_tool(&format!("{test} [{format}]"), tool) {
                continue;
            }
            let archive = td.join(name);
            util::sh(&format!("{compress} < {} > {}", q(&plain), q(&archive)));
            let bytes = util::read(&archive);
            for via in ["file", "stdin"] {
                let d = td.fresh("ours");
                let mut c = fastuntar();
                c.arg("-C").arg(&d);
                if via == "file" {
                    c.arg("-xf").arg(&archive);
                } else {
                    c.args(["-xf", "-"]).stdin(Input::Bytes(bytes.clone()));
                }
                let out = c.run();
                if out.code != Some(0) || !out.diagnostics().is_empty() {
                    failures.push(format!(
                        "{format} via {via}: exit {:?}\n{}",
                        out.code,
                        out.describe()
                    ));
                    continue;
                }
                let dd = diff(&want, "GNU tar (plain .tar)", &snapshot(&d), "fastuntar", &cmp(td));
                if !dd.is_empty() {
                    failures
                        .push(format!("{format} via {via} ({name}):\n    {}", dd.join("\n    ")));
                }
            }
        }
        assert!(failures.is_empty(), "formats by magic:\n  {}", failures.join("\n  "));
    });
}

// --- tar's spellings ----------------------------------------------------------------------------

#[test]
fn tar_spellings() {
    with_gnu_tar("tar_spellings", "spellings", |td| {
        let archive = small_archive(td, "s.tar");
        let want = snapshot(&gnu_extract(td, &archive, &[]));
        // fastuntar's spellings, each against GNU tar's `-xf A -C DIR` (the archive as the
        // operand, or `-x -p A`, are fastuntar's own); standard input, `--directory=DIR`, and
        // no -C (the working directory) as GNU tar spells them too.
        let spellings: &[&[&str]] = &[
            &["-xf", "{archive}"],
            &["-xvf", "{archive}"],
            &["-f", "{archive}", "-x"],
            &["--file={archive}"],
            &["--file", "{archive}", "--extract"],
            &["-x", "{archive}"],
            &["{archive}"],
            &["-xpf", "{archive}"],
            &["-x", "-p", "{archive}"],
            &["-xf", "{archive}", "--preserve-permissions"],
            &["-xf", "{archive}", "--same-permissions"],
            &["-xf", "{archive}", "--no-same-owner"],
        ];
        let gnu_x = ["-xf", "{archive}", "-C", "{dest}"];
        let with_c = |a: &[&str]| -> Vec<String> {
            a.iter().chain(&["-C", "{dest}"]).map(|s| s.to_string()).collect()
        };
        let mut rows: Vec<Case> = spellings
            .iter()
            .map(|a| Case::new(&archive, &with_c(a)).gnu_args(&gnu_x).code(0).without_stdout())
            .collect();
        for a in [&["-xf", "-"][..], &["-x", "-"]] {
            let row = Case::new(&archive, &with_c(a)).gnu_args(&with_c(&["-xf", "-"]));
            rows.push(row.stdin_file(&archive).code(0));
        }
        rows.push(Case::new(&archive, &["-xf", "{archive}", "--directory={dest}"]).code(0));
        rows.push(Case::new(&archive, &["-xf", "{archive}"]).in_dest().code(0));
        let mut failures: Vec<String> = rows.iter().flat_map(|c| gnu::differences(td, c)).collect();
        // -C DIR that does not exist yet (and one whose parent does not either) is created.
        for rel in ["new", "new2/deeper"] {
            let d = td.join(format!("missing/{rel}"));
            let _ = fs::create_dir_all(td.join("missing"));
            let out = fastuntar().extract(&archive, &d).run();
            if out.code != Some(0) || !d.is_dir() {
                failures.push(format!("-C {rel} (missing): not created\n{}", out.describe()));
                continue;
            }
            let dd = diff(
                &want,
                "GNU tar",
                &snapshot(&d),
                "fastuntar",
                &Compare { root: false, ..cmp(td) },
            );
            if !dd.is_empty() {
                failures.push(format!("-C {rel} (missing): {}", dd.join("\n    ")));
            }
        }
        gnu::assert_none(&failures);
    });
}

/// Without -f or an archive operand the archive is $TAPE, else standard input, as in GNU tar
/// (`zstd -dc A | fastuntar -x`); standard input that is a terminal is refused.
#[test]
fn tape_or_standard_input_by_default() {
    with_gnu_tar("tape_or_standard_input_by_default", "default_archive", |td| {
        let archive = small_archive(td, "d.tar");
        let a = archive.to_str().unwrap();
        gnu::check(
            td,
            [
                Case::new(&archive, &["-x", "-C", "{dest}"]).stdin_file(&archive).code(0),
                Case::new(&archive, &["-t"]).stdin_file(&archive).only_stdout().code(0),
                Case::new(&archive, &["-x", "-C", "{dest}"]).env("TAPE", a).code(0),
            ],
        );
        let out = in_pty(&format!("{} -t", sh_quote(BIN)));
        assert_eq!(out.code, Some(2), "{}", out.describe());
        assert!(out.stdout_str().contains("refusing to read the archive from a terminal"));
    });
}

#[test]
fn keep_old_files_refuses_to_replace() {
    let _g = shared();
    let td = TestDir::new("keep_old");
    let mut t = Tar::new();
    t.dir("top/");
    t.file("top/existing", b"new contents\n");
    t.file("top/new", b"new file\n");
    t.dir("top/sub/");
    t.file("top/sub/also-new", b"also new\n");
    let archive = td.write("k.tar", t.finish());
    for_each_config("keep_old_files_refuses_to_replace", &MATRIX, |cfg| {
        for flag in ["-k", "--keep-old-files"] {
            let d = td.fresh("dest");
            fs::create_dir(d.join("top")).unwrap();
            fs::write(d.join("top/existing"), b"old\n").unwrap();
            let out = fastuntar_with(cfg).arg(flag).extract(&archive, &d).run();
            let ctx = format!("{flag} [{}]\n{}", cfg.name(), out.describe());
            // GNU tar: "top/existing: Cannot open: File exists", exit 2.
            assert_eq!(out.code, Some(2), "expected exit 2: {ctx}");
            let diags = out.diagnostics();
            assert_eq!(diags.len(), 1, "one warning: {ctx}");
            assert!(diags[0].starts_with("fastuntar: top/existing: "), "names the file: {ctx}");
            assert!(diags[0].contains("File exists"), "says the file exists: {ctx}");
            assert_eq!(util::read(d.join("top/existing")), b"old\n", "replaced: {ctx}");
            assert_eq!(util::read(d.join("top/new")), b"new file\n", "{ctx}");
            assert_eq!(util::read(d.join("top/sub/also-new")), b"also new\n", "{ctx}");
        }
    });
}

#[test]
fn strip_components_like_gnu_tar() {
    with_gnu_tar("strip_components_like_gnu_tar", "strip", |td| {
        let archive = small_archive(td, "st.tar");
        let row = |n| Case::extract(&archive, &["--strip-components", n], &[]).code(0);
        gnu::check(td, ["1", "2"].map(row));
        let d = td.fresh("ours");
        let out = fastuntar().args(["--strip-components", "1"]).extract(&archive, &d).run();
        assert!(d.join("a.txt").is_file() && !exists(&d.join("top")), "{}", out.describe());
    });
}

#[test]
fn ownership_same_owner_and_default() {
    let _g = shared();
    if !util::have_root("ownership_same_owner_and_default", "chown") {
        return;
    }
    let td = TestDir::new("owner");
    let own = |h: Header| Header {
        uid: Num::Octal(1234),
        gid: Num::Octal(5678),
        uname: Vec::new(),
        gname: Vec::new(),
        ..h
    };
    let mut t = Tar::new();
    t.header(&own(Header::dir("d/")));
    t.entry(&own(Header::file("d/f")), b"owned\n");
    t.header(&own(Header::symlink("d/l", "f")));
    let archive = td.write("o.tar", t.finish());
    for (args, want) in [
        // Root's default, as GNU tar's: restored.
        (&[][..], (1234, 5678)),
        (&["--no-same-owner"][..], (0, 0)),
        (&["--same-owner"][..], (1234, 5678)),
        (&["--same-owner", "--no-same-owner"][..], (0, 0)),
        (&["--no-same-owner", "--same-owner"][..], (1234, 5678)),
    ] {
        let d = td.fresh("dest");
        let out = fastuntar().args(args).extract(&archive, &d).run();
        assert_eq!(out.code, Some(0), "{args:?}\n{}", out.describe());
        for p in ["d", "d/f", "d/l"] {
            let m = fs::symlink_metadata(d.join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), want, "{args:?}: {p} owner\n{}", out.describe());
        }
    }
}

// --- -m, --skip-old-files, owner names ----------------------------------------------------------

/// Seconds since the epoch, now.
fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A tree of every entry type with old times (2001) and non-default modes: directories (one
/// nested, one 0750), small and large files (buffered and direct), a symlink, a FIFO.
fn touch_archive(td: &TestDir) -> PathBuf {
    const OLD: u64 = 1_000_000_000;
    let mut t = Tar::new();
    t.header(&Header::dir("top/").mode(0o750).mtime(OLD));
    t.entry(&Header::file("top/small").mode(0o640).mtime(OLD), b"small\n");
    t.entry(&Header::file("top/large").mtime(OLD), &Rng::new(9).bytes(200_000));
    t.header(&Header::symlink("top/link", "small").mtime(OLD));
    t.header(&Header::new("top/fifo", util::rawtar::FIFO).mode(0o600).mtime(OLD));
    t.header(&Header::dir("top/sub/").mode(0o705).mtime(OLD));
    t.entry(&Header::file("top/sub/deep").mtime(OLD), b"deep\n");
    td.write("touch.tar", t.finish())
}

/// `--sta` is still GNU tar's abbreviation of --starting-file, beside --stall-timeout (listed:
/// GNU tar 1.34 extracts -K's members outside -C).
#[test]
fn sta_still_abbreviates_starting_file() {
    with_gnu_tar("sta_still_abbreviates_starting_file", "sta", |td| {
        let archive = touch_archive(td);
        let first = |_: &Ran, o: &Ran| -> Vec<String> {
            let listed = o.out.stdout_str();
            (!listed.starts_with("top/link\n"))
                .then(|| format!("listed {listed:?}"))
                .into_iter()
                .collect()
        };
        gnu::check(td, [Case::list(&archive, &[], &["--sta=top/link"]).code(0).also(&first)]);
    });
}

/// Command lines as scripts and wrappers write them for GNU tar: an option given twice (the
/// last value wins), long options shortened to a prefix that names one option, `--get` for
/// `--extract`, `--no-selinux`. Each extracts what GNU tar extracts (compared tree by tree);
/// an ambiguous prefix fails both, with nothing extracted.
#[test]
fn repeated_and_shortened_options_like_gnu_tar() {
    let test = "repeated_and_shortened_options_like_gnu_tar";
    with_gnu_tar(test, "habits", |td| {
        let archive = touch_archive(td);
        let (a, d) = ("{archive}", "{dest}");
        let cases: &[&[&str]] = &[
            &["-x", "-x", "-f", a, "-C", d],
            &["--get", "-f", a, "-C", d],
            &["-x", "--get", "-f", a, "-C", d],
            &["-xf", a, "-p", "-p", "-C", d],
            &["-xf", a, "-k", "-k", "-C", d],
            &["-xf", a, "--strip-components", "1", "--strip-components", "0", "-C", d],
            &["-xf", a, "--strip-components=2", "--strip-components=1", "-C", d],
            &["-xf", a, "--strip=1", "-C", d],
            &["-xf", a, "--strip", "1", "-C", d],
            &["-xf", a, "--exclude", "top/sub", "--exclude=top/large", "-C", d],
            &["-xf", a, "--excl=top/small", "--no-overwrite-dir", "-C", d],
            &["-xf", a, "--numeric", "--no-same-o", "--no-selinux", "-C", d],
            &["-xf", a, "--to", "-C", d],
            &["-xf", a, "--dir={dest}"],
            &["-xf", a, "--dire", d],
            &["-xf", a, "--direc={dest}"],
            &["-xf", a, "-C", d, "-C", d],
            &["-xf", a, "--no-same", "-C", d],
            &["-xf", a, "--keep", "-C", d],
        ];
        // A command line GNU tar refuses (64: an option argp does not know, or an ambiguous
        // one) fails both with the same status, and the same empty tree.
        gnu::check(td, cases.iter().map(|args| Case::new(&archive, args)));
    });
}

/// Whether stderr names TAR_OPTIONS (a command line GNU tar refuses because of it).
fn names_tar_options(out: &Output, _: &str) -> Vec<String> {
    out.stderr_str()
        .contains("TAR_OPTIONS")
        .then(|| "names TAR_OPTIONS".into())
        .into_iter()
        .collect()
}

/// GNU tar's TAR_OPTIONS (read before the command line, split as a shell would without
/// expansions) and its options for creating archives, which it accepts and ignores when
/// extracting: as a user's environment or a wrapper written for both gives them. Each case
/// extracts what GNU tar extracts and prints what it prints on stdout (`-v`); a case GNU tar
/// refuses fails both, with nothing extracted, and where GNU tar names TAR_OPTIONS so does
/// fastuntar.
#[test]
fn tar_options_and_creation_options_like_gnu_tar() {
    let test = "tar_options_and_creation_options_like_gnu_tar";
    with_gnu_tar(test, "tar-options", |td| {
        let archive = touch_archive(td);
        let a = "{archive}";
        let x: &[&str] = &["-xf", a, "-C", "{dest}"];
        let creation: &[&str] = &[
            "--sort=name",
            "--owner=0",
            "--group",
            "0",
            "--mtime=@0",
            "--clamp-mtime",
            "--format=posix",
            "--posix",
            "--one-file-system",
            "--atime-preserve",
            "--atime-preserve=system",
            "--remove-files",
            "--exclude-caches",
            "--exclude-tag=T",
            "--exclude-vcs-ignores",
            "--hole-detection=raw",
            "--sparse-version=1.0",
            "--check-device",
            "--no-check-device",
            "--mode=go-w",
            "--owner-map=/dev/null",
            "--dereference",
            "--hard-dereference",
            "--ignore-failed-read",
            "--check-links",
            "--restrict",
            "--rsh-command=/bin/false",
        ];
        let with_creation: Vec<&str> = x.iter().chain(creation).copied().collect();
        let strip1: Vec<&str> = x.iter().chain(&["--strip-components=1"]).copied().collect();
        let cases: &[(Option<&str>, &[&str])] = &[
            (None, &with_creation),
            (None, &["-tf", a, "--sort=name", "--owner", "0", "--form=gnu"]),
            (None, &["-xf", a, "--clamp-mtime", "-C", "{dest}"]),
            (None, &["-xf", a, "--old-archive", "-C", "{dest}"]),
            (Some("-v --strip-components=1"), x),
            (Some("--strip-components=2 -v"), &strip1),
            (Some("--exclude='top/s*'   --no-same-permissions"), x),
            (Some("--transform=\"s,top/small,top/a b,\" -v"), x),
            (Some("--transform=s,top/large,top/c\\ d, --show-transformed-names -v"), x),
            (Some("--sort=name --owner=0 --group=0 --mtime=@0 --clamp-mtime --format=gnu"), x),
            (Some("  "), x),
            (Some("--clamp-mtime"), &["-xf", a, "--mtime=@0", "-C", "{dest}"]),
            (Some("--clamp-mtime"), x),
            (Some("'-v"), x),
            (Some("--bogus"), x),
            (Some("-v top/small"), x),
            (Some("-t"), x),
            (None, &["-xf", a, "--level=0", "-C", "{dest}"]),
            (None, &["-xf", a, "--level=1", "-g", "/dev/null", "-C", "{dest}"]),
            (None, &["-tf", a, "--level=x"]),
            (None, &["-tf", a, "--level=-1", "-G"]),
        ];
        let row = |(env, args): &(Option<&'static str>, &[&str])| {
            let row = Case::new(&archive, args).ours_only(&["-q"]).said(names_tar_options);
            match env {
                Some(env) => row.env("TAR_OPTIONS", env),
                None => row,
            }
        };
        gnu::check(td, cases.iter().map(row));
    });
}

/// Every entry but the root has an mtime in `[from, to]` (seconds); the message names the
/// ones that do not.
fn mtimes_within(s: &util::snapshot::Snapshot, from: i64, to: i64) -> Result<(), String> {
    let bad: Vec<String> = s
        .entries
        .iter()
        .filter(|(p, e)| p.as_slice() != b"." && !(from..=to).contains(&e.mtime.0))
        .map(|(p, e)| format!("{}: {}", util::snapshot::show(p), e.mtime.0))
        .collect();
    if bad.is_empty() { Ok(()) } else { Err(format!("not in [{from}, {to}]: {bad:?}")) }
}

/// `-m` leaves every entry type (files, directories, symlinks, FIFOs) with the time of
/// extraction, as GNU tar -m does, and everything else as without it (a directory's deferred
/// mode still applies); under the `THREADS` rows.
#[test]
fn touch_keeps_the_time_of_extraction_like_gnu_tar() {
    with_gnu_tar("touch_keeps_the_time_of_extraction_like_gnu_tar", "touch", |td| {
        let archive = touch_archive(td);
        let from = now_secs();
        // Without -m the times are the archive's: the window below means something.
        let old = snapshot(&gnu_extract(td, &archive, &["--no-same-owner"]));
        assert!(mtimes_within(&old, from, now_secs()).is_err(), "the archive's times are old");
        // Both trees' times are of the extraction (each run's, compared as a window), the rest
        // as GNU tar's.
        let touched = |g: &Ran, o: &Ran| -> Vec<String> {
            let to = now_secs();
            [("GNU tar", g), ("fastuntar", o)]
                .into_iter()
                .filter_map(|(who, r)| {
                    mtimes_within(&snapshot(&r.dest), from, to).err().map(|e| format!("{who}: {e}"))
                })
                .collect()
        };
        let row = |flag| {
            Case::extract(&archive, &[flag], &[])
                .gnu_args(&["-C", "{dest}", flag, "--no-same-owner", "-xf", "{archive}"])
                .code(0)
                .without_file_times()
                .without_dest_root()
                .over(&THREADS)
                .also(&touched)
        };
        gnu::check(td, ["-m", "--touch"].map(row));
    });
}

/// `--snapshot -m`: the snapshot layout, its imposed modes, and times of extraction (-m only
/// concerns times, so it applies in snapshot mode too).
#[test]
fn touch_applies_in_snapshot_mode() {
    let _g = shared();
    let td = TestDir::new("touch_snapshot");
    let old = |h: Header| h.mtime(1_000_000_000);
    let mut t = Tar::new();
    t.entry(&old(Header::file("version")), b"1.2.0");
    t.header(&old(Header::dir("snapshots/")));
    t.header(&old(Header::dir("snapshots/123/")));
    t.entry(&old(Header::file("snapshots/123/123")), b"bank");
    t.header(&old(Header::dir("accounts/")));
    t.entry(&old(Header::file("accounts/123.0")), &Rng::new(3).bytes(100_000));
    let archive = td.write("s.tar", t.finish());
    for_each_config("touch_applies_in_snapshot_mode", &BACKENDS, |cfg| {
        let d = td.fresh("dest");
        let from = now_secs();
        let out = fastuntar_with(cfg)
            .args(["--snapshot", "-m", "-xf"])
            .arg(&archive)
            .arg("-C")
            .arg(&d)
            .run();
        let ctx = format!("[{}]\n{}", cfg.name(), out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        let s = snapshot(&d);
        if let Err(e) = mtimes_within(&s, from, now_secs()) {
            panic!("{e}\n{ctx}");
        }
        assert_eq!(s.get("accounts/123.0").map(|e| e.mode), Some(0o644), "{ctx}");
        assert_eq!(s.get("snapshots/123").map(|e| e.mode), Some(0o755), "{ctx}");
    });
}

/// Sets up DEST as it was before a `--skip-old-files` run: an existing file, symlink, FIFO and
/// a 0700 directory with an old time, where the archive has members of its own.
fn old_files(d: &Path) {
    fs::create_dir(d.join("top")).unwrap();
    fs::write(d.join("top/existing"), b"old\n").unwrap();
    symlink("elsewhere", d.join("top/link")).unwrap();
    let out = Cmd::new("mkfifo").arg(d.join("top/fifo")).run();
    assert!(out.success(), "{}", out.describe());
    fs::create_dir(d.join("top/kept")).unwrap();
    fs::set_permissions(d.join("top/kept"), fs::Permissions::from_mode(0o700)).unwrap();
    util::tree::set_mtime(&d.join("top/kept"), 1_200_000_000, 0);
    fs::set_permissions(d.join("top"), fs::Permissions::from_mode(0o700)).unwrap();
    for p in ["top/existing", "top/link", "top/fifo"] {
        util::tree::set_mtime(&d.join(p), 1_100_000_000, 0);
    }
}

fn skip_archive(td: &TestDir) -> PathBuf {
    let mut t = Tar::new();
    t.dir("top/");
    t.file("top/existing", b"new contents\n");
    t.file("top/new", b"new file\n");
    t.symlink("top/link", "existing");
    t.header(&Header::new("top/fifo", util::rawtar::FIFO));
    t.header(&Header::dir("top/kept/").mode(0o755).mtime(1_000_000_000));
    t.dir("top/sub/");
    t.file("top/sub/also-new", b"also new\n");
    // A directory member after a file inside it: the directory exists by then (made for the
    // file), and GNU tar leaves its metadata alone.
    t.entry(&Header::file("late/f"), b"f\n");
    t.header(&Header::dir("late/").mode(0o750).mtime(1_000_000_000));
    td.write("skip.tar", t.finish())
}

/// `--skip-old-files`: what exists is kept (files, symlinks, FIFOs, and a directory's own
/// metadata), without a word and with exit 0; with -v each kept member is named on stderr, as
/// GNU tar 1.34 does. Compared with GNU tar under the `THREADS` rows.
#[test]
fn skip_old_files_like_gnu_tar() {
    with_gnu_tar("skip_old_files_like_gnu_tar", "skip_old", |td| {
        let archive = skip_archive(td);
        // GNU tar keeps the old file and, with -v, names the kept members.
        let kept = |g: &Ran, _: &Ran| -> Vec<String> {
            let old = util::read(g.dest.join("top/existing")) == b"old\n";
            (!old)
                .then(|| format!("GNU tar replaced top/existing\n{}", g.out.describe()))
                .into_iter()
                .collect()
        };
        let named = |g: &Ran, o: &Ran| -> Vec<String> {
            let n = gnu::said_sorted(&g.out, "tar").len();
            let few =
                (n < 5).then(|| format!("GNU tar names {n} kept members\n{}", g.out.describe()));
            kept(g, o).into_iter().chain(few).collect()
        };
        let row = |flags: &[&str]| {
            Case::extract(&archive, flags, &[])
                .prepare(&old_files)
                .said(gnu::said_sorted)
                .code(0)
                .over(&THREADS)
        };
        let quiet = row(&["--skip-old-files"]).also(&kept);
        gnu::check(td, [quiet, row(&["--skip-old-files", "-v"]).also(&named)]);
    });
}

/// `-k --skip-old-files` is refused, either way round, as GNU tar refuses it (exit 2).
#[test]
fn keep_and_skip_old_files_conflict() {
    let _g = shared();
    let td = TestDir::new("keep_skip");
    let archive = skip_archive(&td);
    for args in [["-k", "--skip-old-files"], ["--skip-old-files", "--keep-old-files"]] {
        let d = td.fresh("dest");
        let out = fastuntar().args(args).extract(&archive, &d).run();
        assert_eq!(out.code, Some(2), "{args:?}\n{}", out.describe());
        assert!(out.stderr_str().contains("cannot be used with"), "{}", out.describe());
        assert!(!exists(&d.join("top")), "nothing extracted\n{}", out.describe());
    }
}

/// `-k` keeps an existing directory's metadata as GNU tar does (its files are reported).
#[test]
fn keep_old_files_keeps_directories_like_gnu_tar() {
    with_gnu_tar("keep_old_files_keeps_directories_like_gnu_tar", "keep_dirs", |td| {
        let archive = skip_archive(td);
        // The file, the symlink and the FIFO are reported; never a directory.
        let three = |_: &Ran, o: &Ran| -> Vec<String> {
            let n = o.out.diagnostics().len();
            (n != 3)
                .then(|| format!("{n} lines, not 3\n{}", o.out.describe()))
                .into_iter()
                .collect()
        };
        let row = Case::extract(&archive, &["-k"], &[]).prepare(&old_files).code(2);
        gnu::check(td, [row.over(&THREADS).also(&three)]);
    });
}

/// Owner names for `owner_archive`: `daemon` and `mail` exist on every Debian-like system
/// (and here), with ids other than the header's 500/600.
fn local_id(db: &str, name: &str) -> Option<u32> {
    let out = Cmd::new("getent").args([db, name]).run();
    out.stdout_str().split(':').nth(2)?.trim().parse().ok()
}

/// Members whose ustar names exist here or not, with and without PAX records: GNU tar maps
/// the header's uname/gname (each on its own) and takes the numbers where a name is empty or
/// unknown, or where a PAX uid/gid record gives the number; a PAX uname/gname is not looked up.
fn owner_archive(td: &TestDir) -> PathBuf {
    let own = |h: Header, u: &str, g: &str| Header {
        uid: Num::Octal(500),
        gid: Num::Octal(600),
        uname: u.as_bytes().to_vec(),
        gname: g.as_bytes().to_vec(),
        ..h
    };
    let mut t = Tar::new();
    t.header(&own(Header::dir("d/"), "daemon", "mail"));
    t.entry(&own(Header::file("d/both"), "daemon", "mail"), b"x");
    t.entry(&own(Header::file("d/unknown"), "no-such-user-here", "no-such-group-here"), b"x");
    t.entry(&own(Header::file("d/empty"), "", ""), b"x");
    t.entry(&own(Header::file("d/user-only"), "daemon", "no-such-group-here"), b"x");
    t.entry(&own(Header::file("d/group-only"), "no-such-user-here", "mail"), b"x");
    t.entry(&own(Header::file("d/setid").mode(0o6755), "daemon", "mail"), b"x");
    t.header(&own(Header::symlink("d/link", "both"), "daemon", "mail"));
    t.header(&own(Header::new("d/fifo", util::rawtar::FIFO), "daemon", "mail"));
    t.pax(&[("uname", "bin"), ("gname", "lp")]);
    t.entry(&own(Header::file("d/pax-names"), "no-such-user-here", "no-such-group-here"), b"x");
    t.pax(&[("uid", "700"), ("gid", "800")]);
    t.entry(&own(Header::file("d/pax-ids"), "daemon", "mail"), b"x");
    t.pax(&[("uname", ""), ("gname", "")]);
    t.entry(&own(Header::file("d/pax-empty-names"), "daemon", "mail"), b"x");
    td.write("owners.tar", t.finish())
}

/// `--same-owner` (root's default) restores owners by name where the names exist here, as GNU
/// tar does, and `--numeric-owner` by number; compared with GNU tar (owners, modes, set-id bits
/// included) under the `THREADS` rows.
#[test]
fn same_owner_maps_names_like_gnu_tar() {
    let test = "same_owner_maps_names_like_gnu_tar";
    with_gnu_tar_as_root(test, "chown", "owner_names", |td| {
        let (daemon, mail) = (local_id("passwd", "daemon"), local_id("group", "mail"));
        let (Some(daemon), Some(mail)) = (daemon, mail) else {
            note(&format!("SKIP {test}: no user daemon or group mail here"));
            return;
        };
        assert!(daemon != 500 && mail != 600, "the names must map to other ids than the header's");
        let archive = owner_archive(td);
        // GNU tar gives d/both the owner the row is about.
        let owned_by = |want: (u32, u32)| {
            move |g: &Ran, _: &Ran| -> Vec<String> {
                let got = snapshot(&g.dest).get("d/both").map(|e| (e.uid, e.gid));
                (got != Some(want))
                    .then(|| format!("GNU tar's d/both: {got:?}"))
                    .into_iter()
                    .collect()
            }
        };
        let (by_name, by_number) = (owned_by((daemon, mail)), owned_by((500, 600)));
        let row = |flags: &[&str]| {
            Case::extract(&archive, flags, &[]).code(0).owners().without_dest_root().over(&THREADS)
        };
        gnu::check(
            td,
            [
                row(&[]).also(&by_name),
                row(&["--same-owner"]).also(&by_name),
                row(&["--numeric-owner"]).also(&by_number),
                row(&["--same-owner", "--numeric-owner"]).also(&by_number),
                row(&["--numeric-owner", "--same-owner"]).also(&by_number),
            ],
        );
        // With --no-same-owner, --numeric-owner changes nothing but the set-id rule's notion of
        // the archive's owner: everything belongs to us (root).
        for flags in [&["--no-same-owner"][..], &["--no-same-owner", "--numeric-owner"]] {
            let d = td.fresh("ours");
            let out = fastuntar().args(flags).extract(&archive, &d).run();
            assert_eq!(out.code, Some(0), "{flags:?}\n{}", out.describe());
            let s = snapshot(&d);
            let others: Vec<_> =
                s.entries.iter().filter(|(_, e)| (e.uid, e.gid) != (0, 0)).collect();
            assert!(others.is_empty(), "{flags:?}: not ours: {others:?}");
        }
    });
}

/// `--same-owner` as a user who may not give files away: every member is still made, with its
/// mode and time (a symlink's too: its time was not set, and it was reported as "cannot create
/// symlink"), as GNU tar makes them; each is reported as GNU tar words it ("cannot change
/// ownership to uid 4242, gid 4242: Operation not permitted"), exit 2 as GNU tar.
#[test]
fn same_owner_refused_to_a_user_like_gnu_tar() {
    let test = "same_owner_refused_to_a_user_like_gnu_tar";
    with_gnu_tar_as_users(test, "to run as uid 65534", "owner_refused", |td| {
        let own = |h: Header| Header {
            uid: Num::Octal(4242),
            gid: Num::Octal(4242),
            uname: Vec::new(),
            gname: Vec::new(),
            ..h
        };
        let mut t = Tar::new();
        t.header(&own(Header::dir("d/").mode(0o750).mtime(1_000_000_000)));
        t.entry(&own(Header::file("d/f").mode(0o640).mtime(1_000_000_100)), b"f\n");
        t.header(&own(Header::symlink("d/l", "f").mtime(1_000_000_200)));
        t.header(&own(Header::new("d/p", util::rawtar::FIFO).mode(0o600).mtime(1_000_000_300)));
        let archive = td.write("owned.tar", t.finish());
        fs::set_permissions(&archive, fs::Permissions::from_mode(0o644)).unwrap();
        let chown = |d: &Path| std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
        let reported = |_: &Ran, o: &Ran| -> Vec<String> {
            let line = |name| {
                format!(
                    "fastuntar: {name}: Cannot change ownership to uid 4242, gid 4242: \
                     Operation not permitted"
                )
            };
            let missing = ["d/f", "d/l", "d/p"].map(line).into_iter();
            missing
                .filter(|l| !o.out.stderr_str().contains(l))
                .map(|l| format!("no line {l:?}"))
                .collect()
        };
        let row =
            Case::extract(&archive, &["--same-owner"], &[]).prepare(&chown).user(65534, 65534);
        gnu::check(td, [row.code(2).over(&MATRIX).also(&reported)]);
    });
}

/// Root restoring files owned by root: a file made in a set-group-ID directory takes the
/// directory's group, and GNU tar's chown gives it the archive's group back. fastuntar leaves
/// out the chown of a file whose owner is already its own only until it sees such a directory
/// (src/write/tree.rs `SETGID_DIRS`): DIR itself, a directory that was there before, and a
/// directory member that becomes one and that the archive comes back to. Compared with GNU
/// tar, owners included, under the `THREADS` rows; each case is a run of its
/// own (the knowledge is per process).
#[test]
fn files_of_our_own_owner_in_setgid_directories_like_gnu_tar() {
    let test = "files_of_our_own_owner_in_setgid_directories_like_gnu_tar";
    with_gnu_tar_as_root(test, "chown", "setgid_dirs", |td| {
        let Some(mail) = local_id("group", "mail") else {
            note(&format!("SKIP {test}: no group mail here"));
            return;
        };
        let own = |h: Header, g: &str, gid: u64| Header {
            uid: Num::Octal(0),
            gid: Num::Octal(gid),
            uname: b"root".to_vec(),
            gname: g.as_bytes().to_vec(),
            ..h
        };
        let root = |h: Header| own(h, "root", 0);
        let mut t = Tar::new();
        t.header(&own(Header::dir("s/").mode(0o2775), "mail", mail.into()));
        t.entry(&root(Header::file("s/f")), b"before its metadata\n");
        t.entry(&root(Header::file("t/x")), b"elsewhere\n");
        t.entry(&root(Header::file("s/g")), b"after its metadata\n");
        let member = td.write("member.tar", t.finish());
        let mut t = Tar::new();
        // `top` first: with a set-group-ID DIR, nothing but DIR says so before it is made.
        t.entry(&root(Header::file("top")), b"in DIR\n");
        t.entry(&root(Header::file("pre/f")), b"in a directory that was there\n");
        let existing = td.write("existing.tar", t.finish());
        let setgid_dir = |p: &Path| {
            std::os::unix::fs::chown(p, None, Some(mail)).unwrap();
            fs::set_permissions(p, fs::Permissions::from_mode(0o2775)).unwrap();
        };
        type Prepare<'a> = &'a dyn Fn(&Path);
        // (case, archive, how the destination is prepared)
        let plain = |_: &Path| {};
        let pre = |d: &Path| {
            fs::create_dir(d.join("pre")).unwrap();
            setgid_dir(&d.join("pre"));
        };
        let cases: [(&str, &PathBuf, Prepare); 3] = [
            ("a directory member", &member, &plain),
            ("a directory that was there", &existing, &pre),
            ("DIR", &existing, &setgid_dir),
        ];
        // GNU tar gives at least two files group 0 back.
        let regrouped = |g: &Ran, _: &Ran| -> Vec<String> {
            let want = snapshot(&g.dest);
            let zero = want.entries.values().filter(|e| e.gid == 0).count();
            (zero < 2)
                .then(|| format!("GNU tar gave no file group 0: {want:?}"))
                .into_iter()
                .collect()
        };
        let rows = cases.map(|(case, archive, prepare)| {
            let row =
                Case::extract(archive, &[], &[]).named(case).prepare(prepare).code(0).owners();
            row.over(&THREADS).also(&regrouped)
        });
        gnu::check(td, rows);
    });
}

/// The set-id rule (src/extract.rs `setid_checked`) compares the file's final owner with the
/// archive's owner as resolved by name: as root with --no-same-owner, a set-uid member of
/// user `root` (whatever its uid field says) stays set-uid; one of `daemon` with uid 0 does
/// not, unless --numeric-owner makes its owner 0.
#[test]
fn setid_rule_uses_the_owner_by_name() {
    let test = "setid_rule_uses_the_owner_by_name";
    let _g = shared();
    if !util::have_root(test, "the rule compares with uid 0") {
        return;
    }
    let td = TestDir::new(test);
    let own = |h: Header, id: u64, name: &str| Header {
        uid: Num::Octal(id),
        gid: Num::Octal(id),
        uname: name.as_bytes().to_vec(),
        gname: name.as_bytes().to_vec(),
        ..h
    };
    let mut t = Tar::new();
    t.entry(&own(Header::file("root-by-name").mode(0o6755), 500, "root"), b"x");
    t.entry(&own(Header::file("daemon-uid-0").mode(0o6755), 0, "daemon"), b"x");
    let archive = td.write("setid.tar", t.finish());
    for (flags, by_name, uid0) in [(&[][..], 0o6755, 0o755), (&["--numeric-owner"], 0o755, 0o6755)]
    {
        let d = td.fresh("dest");
        let out = fastuntar().arg("--no-same-owner").args(flags).extract(&archive, &d).run();
        assert_eq!(out.code, Some(0), "{flags:?}\n{}", out.describe());
        let mode = |p: &str| fs::metadata(d.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("root-by-name"), by_name, "{flags:?}: root-by-name");
        assert_eq!(mode("daemon-uid-0"), uid0, "{flags:?}: daemon-uid-0");
    }
}

/// `-tv --numeric-owner` lists ids instead of names, and `-tv` lists the id a name maps to
/// where a PAX record emptied the name, both as GNU tar does.
#[test]
fn list_numeric_owner_like_gnu_tar() {
    with_gnu_tar("list_numeric_owner_like_gnu_tar", "list_numeric", |td| {
        let archive = owner_archive(td);
        let row = |flags: &[&str]| {
            let args: Vec<&str> = flags.iter().copied().chain(["{archive}"]).collect();
            Case::new(&archive, &args).only_stdout().env("TZ", "UTC").code(0)
        };
        let flags: [&[&str]; 3] =
            [&["-tvf"], &["--numeric-owner", "-tvf"], &["-tv", "--numeric-owner", "-f"]];
        gnu::check(td, flags.map(row));
        let numeric =
            fastuntar_utc(&["--numeric-owner".as_ref(), "-tvf".as_ref(), archive.as_os_str()]);
        assert!(numeric.stdout_str().contains(" 500/600 "), "{}", numeric.describe());
        assert!(!numeric.stdout_str().contains("daemon"), "{}", numeric.describe());
    });
}

// --- -O / --to-stdout ---------------------------------------------------------------------------

/// A tree with every kind `-O` must treat: files of several sizes (one past the 1 MiB output
/// buffer), an empty file, a sparse file with holes before, between and after its data, nested
/// and empty directories, a symlink, a hard link, a FIFO and a name too long for ustar. Returns
/// the bytes `tar -xO` should write for it: every regular file once (the hard link's data
/// only under its first name), the sparse file at its full size.
fn to_stdout_tree(root: &Path) -> u64 {
    let top = root.join("top");
    let long = format!("top/{}/{}", "d".repeat(90), "f".repeat(80));
    let files: Vec<(String, Vec<u8>)> = vec![
        ("top/a.txt".into(), b"hello\n".to_vec()),
        ("top/empty".into(), Vec::new()),
        ("top/sub/deep/b.bin".into(), Rng::new(11).bytes(70_000)),
        ("top/big".into(), Rng::new(12).bytes(3 * (1 << 20) + 5)),
        (long, b"long name\n".to_vec()),
    ];
    let mut total = 0;
    for (rel, data) in &files {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
        total += data.len() as u64;
    }
    // 8 MiB with 2 small pieces of data: holes first, between and last.
    let sparse = fs::File::create(top.join("sparse")).unwrap();
    sparse.set_len(8 << 20).unwrap();
    use std::os::unix::fs::FileExt;
    sparse.write_all_at(b"first piece", 3 << 20).unwrap();
    sparse.write_all_at(&Rng::new(13).bytes(5000), 6 << 20).unwrap();
    total += 8 << 20;
    fs::create_dir_all(top.join("emptydir")).unwrap();
    symlink("a.txt", top.join("sym")).unwrap();
    fs::hard_link(top.join("a.txt"), top.join("hard")).unwrap();
    assert!(Cmd::new("mkfifo").arg(top.join("fifo")).run().success());
    total
}

/// `fastuntar -xOf archive` with `flags`, run in an empty directory with `-C` naming a
/// directory that does not exist: asserts that nothing was created, and returns the output.
fn ours_to_stdout(td: &TestDir, archive: &Path, flags: &[&str]) -> Output {
    let cwd = td.fresh("cwd");
    let missing = cwd.join("missing");
    let out = fastuntar()
        .current_dir(&cwd)
        .args(flags)
        .arg("-xOf")
        .arg(archive)
        .arg("-C")
        .arg(&missing)
        .run();
    let left: Vec<_> = fs::read_dir(&cwd).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "-O created {left:?}\n{}", out.describe());
    out
}

/// GNU tar's `-xOf archive` with `flags`, in an empty directory.
fn gnu_to_stdout(td: &TestDir, archive: &Path, flags: &[&str]) -> Output {
    let cwd = td.fresh("gnucwd");
    let out = Cmd::new("tar").current_dir(&cwd).args(flags).arg("-xOf").arg(archive).run();
    assert!(out.success(), "GNU tar -xO failed\n{}", out.describe());
    out
}

#[test]
fn to_stdout_matches_gnu_tar() {
    let _g = shared();
    let Some(td) = util::gnu::dir("to_stdout_matches_gnu_tar", &["zstd", "mkfifo"]) else { return };
    let src = td.join("src");
    fs::create_dir(&src).unwrap();
    let expected_len = to_stdout_tree(&src);
    let mut archives = Vec::new();
    for format in ["gnu", "posix"] {
        let a = td.join(format!("{format}.tar"));
        let made = gnu_tar([
            "--sparse".as_ref(),
            format!("--format={format}").as_ref(),
            "-C".as_ref(),
            src.as_os_str(),
            "-cf".as_ref(),
            a.as_os_str(),
            "top".as_ref(),
        ]);
        assert!(made.success(), "{}", made.describe());
        // The archive holds what the test is about: a hard link, a FIFO, the sparse file
        // stored sparse (its 8 MiB are not in the archive).
        let listing = gnu_tar(["-tvf".as_ref(), a.as_os_str()]).stdout_str();
        assert!(listing.contains(" link to ") && listing.contains("\np"), "{listing}");
        assert!(fs::metadata(&a).unwrap().len() < 6 << 20, "{format}: sparse file not sparse");
        let z = td.join(format!("{format}.tar.zst"));
        let zstd = Cmd::new("zstd").args(["-q", "-3"]).arg(&a).arg("-o").arg(&z).run();
        assert!(zstd.success(), "{}", zstd.describe());
        // Frames of 1 MiB of tar each, decoded on two threads (decode/parallel.rs).
        let tar = fs::read(&a).unwrap();
        let frames: Vec<u8> =
            tar.chunks(1 << 20).flat_map(|c| util::engine::zstd_frame(c, 1)).collect();
        let m = td.write(format!("{format}.frames.tar.zst"), frames);
        archives.extend([a, z, m]);
    }
    // What GNU tar writes for the whole archive.
    let full: Vec<Vec<u8>> = archives.iter().map(|a| gnu_to_stdout(&td, a, &[]).stdout).collect();
    for (a, full) in archives.iter().zip(&full) {
        assert_eq!(full.len() as u64, expected_len, "{}", a.display());
    }
    // Each row's GNU tar output checked to be what the row is about: part of the data, or
    // (-v) all of it with more than 10 names on stderr.
    let part = |g: &Ran, _: &Ran| -> Vec<String> {
        full.contains(&g.out.stdout).then(|| "leaves out nothing".into()).into_iter().collect()
    };
    let named = |g: &Ran, _: &Ran| -> Vec<String> {
        let (n, whole) = (names(&g.out, "tar").len(), full.contains(&g.out.stdout));
        (n <= 10 || !whole)
            .then(|| format!("GNU tar -v: {n} names\n{}", g.out.describe()))
            .into_iter()
            .collect()
    };
    // Run in an empty DEST; fastuntar's `-C` names a directory that does not exist there, and
    // nothing may be made (the trees are compared: GNU tar's DEST stays empty).
    let row = |a: &Path, flags: &[&str]| {
        let args: Vec<&str> = flags.iter().copied().chain(["-xOf", "{archive}"]).collect();
        let row = Case::new(a, &args).in_dest().ours_only(&["-C", "{dest}/missing"]);
        row.said(names).code(0)
    };
    let rows = archives.iter().flat_map(|a| {
        [
            row(a, &[]),
            row(a, &[]).ours_only(&["--threads", "2"]),
            row(a, &["--exclude", "big"]).also(&part),
            row(a, &["--exclude", "sub", "--exclude", "*.txt"]).also(&part),
            row(a, &["--strip-components", "2"]).also(&part),
            row(a, &["-v"]).also(&named),
        ]
    });
    gnu::check(&td, rows);
}

/// The lines on stderr that are not GNU tar's messages: `-xOv`'s names (fastuntar's messages
/// stay, and differ).
fn names(out: &Output, _: &str) -> Vec<String> {
    out.stderr_lines().into_iter().filter(|l| !l.starts_with("tar: ")).collect()
}

/// A truncated archive fails as extraction does: exit 2, one line naming the member whose data
/// was cut, after the members before it were written out whole.
#[test]
fn to_stdout_truncated_archive() {
    let _g = shared();
    let td = TestDir::new("to_stdout_cut");
    let first = Rng::new(21).bytes(300_000);
    let mut t = Tar::new();
    t.file("first", &first).dir("d/").file("d/cut", &Rng::new(22).bytes(2 << 20));
    let tar = t.finish();
    // Into the second file's data, before the output buffer (1 MiB) is full: what is in it
    // must still be written.
    let cut = 512 + 300_000_usize.next_multiple_of(512) + 512 + 512 + 100_000;
    let plain = td.write("cut.tar", &tar[..cut]);
    let zst = util::engine::zstd_frame(&tar, 3);
    let zst = td.write("cut.tar.zst", &zst[..zst.len() - 2000]);
    for (a, threads) in [(&plain, "1"), (&zst, "1"), (&zst, "2")] {
        let out = ours_to_stdout(&td, a, &["--threads", threads]);
        assert_eq!(out.code, Some(2), "{}", out.describe());
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "{}", out.describe());
        assert!(lines[0].starts_with("fastuntar: d/cut: "), "{}", out.describe());
        assert!(out.stdout.len() >= first.len(), "{}", out.describe());
        assert_eq!(out.stdout[..first.len()], first[..], "{}", out.describe());
        assert!(out.stdout.len() < first.len() + (2 << 20), "{}", out.describe());
    }
}

/// A reader that stops early (`| head -c 10`) ends the run quietly with exit 0, as `-t | head`
/// does (GNU tar dies of SIGPIPE, 141); `--json` would mix into the data and is refused.
#[test]
fn to_stdout_closed_pipe_and_json() {
    let _g = shared();
    let td = TestDir::new("to_stdout_pipe");
    let mut t = Tar::new();
    t.file("big", &Rng::new(31).bytes(8 << 20)).file("after", b"after\n");
    let a = td.write("p.tar", t.finish());
    let script = format!(
        "{} -xOf {} 2>{}; echo $? > {}",
        sh_quote(BIN),
        q(&a),
        q(&td.join("err")),
        q(&td.join("code"))
    );
    let out = Cmd::new("bash").args(["-c", &format!("({script}) | head -c 10")]).run();
    assert_eq!(out.stdout.len(), 10, "{}", out.describe());
    let err = fs::read_to_string(td.join("err")).unwrap();
    assert_eq!(fs::read_to_string(td.join("code")).unwrap().trim(), "0", "{err}");
    assert!(err.is_empty(), "{err}");
    let out = fastuntar().args(["--json", "-xOf"]).arg(&a).run();
    assert_eq!(out.code, Some(2), "{}", out.describe());
    assert!(out.stdout.is_empty() && out.stderr_str().contains("--json"), "{}", out.describe());
}

/// GNU tar's operations that write or compare archives are refused by name, one line, exit 2,
/// nothing written: a user typing `fastuntar czf out.tgz dir` or `-cf` learns what fastuntar
/// is, rather than clap's "unexpected argument '-c'" (or, for `czf`, that no archive named
/// `czf` exists).
#[test]
fn other_operations_are_refused_by_name() {
    let td = TestDir::new("operations");
    td.write("dir/f", "f\n");
    for (args, named) in [
        (&["-cf", "out.tar", "dir"][..], "-c (--create)"),
        (&["czf", "out.tgz", "dir"], "-c (--create)"),
        (&["chf", "out.tar", "dir"], "-c (--create)"),
        (&["rvf", "out.tar", "dir"], "-r (--append)"),
        (&["df", "out.tar"], "-d (--diff, --compare)"),
        (&["--create", "-f", "out.tar", "dir"], "-c (--create)"),
        (&["-rf", "out.tar", "dir"], "-r (--append)"),
        (&["-uf", "out.tar", "dir"], "-u (--update)"),
        (&["-Af", "out.tar", "other.tar"], "-A (--catenate)"),
        (&["--concatenate", "-f", "out.tar", "other.tar"], "-A (--catenate)"),
        (&["--delete", "-f", "out.tar", "f"], "--delete"),
        (&["-df", "out.tar"], "-d (--diff, --compare)"),
        (&["--compare", "-f", "out.tar"], "-d (--diff, --compare)"),
        (&["--test-label", "-f", "out.tar"], "--test-label"),
        (&["-x", "-c", "-f", "out.tar"], "-c (--create)"),
    ] {
        let out = fastuntar().args(args).current_dir(td.path()).run();
        let said = out.diagnostics();
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.describe());
        assert!(
            said.len() == 1 && said[0].starts_with(&format!("fastuntar: {named} is not supported")),
            "{args:?}: {}",
            out.describe()
        );
        assert!(!td.join("out.tar").exists() && !td.join("out.tgz").exists(), "{args:?}");
    }
}

/// Two extractions in one process through the library, as the fuzz target runs them: the
/// first skips a member (`../escape`), the second skips none, and the second's counts, exit
/// status and tallies are its own. (With the counts in process statics the second run began
/// at the first one's skip, and its status was 2.) The runs go in a child process of this test
/// binary, as they did while an extraction set the process umask to 0 (until issue 43); the
/// library's own runs are checked in-process by suite/api.rs.
#[test]
fn two_runs_in_one_process_count_their_own() {
    let td = TestDir::new("two_runs_in_one_process");
    let (child, env) = ("suite::cli::two_runs_child", "FASTUNTAR_TWO_RUNS_DIR");
    crate::util::run_child_test(child, env, td.path(), &["--nocapture"]);
}

/// The two runs of `two_runs_in_one_process_count_their_own`, in its child process only.
#[test]
#[ignore = "run by two_runs_in_one_process_count_their_own, in a process of its own"]
fn two_runs_child() {
    use fastuntar::__private::cli::resolve::{Edge, options};
    use fastuntar::__private::exit_codes::ExitCode;
    use fastuntar::__private::report::Reporter;
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Relaxed;
    // Outside its parent (test.sh's `--ignored` pass runs every ignored test): nothing to do.
    let Some(dir) = std::env::var_os("FASTUNTAR_TWO_RUNS_DIR").map(PathBuf::from) else {
        return;
    };
    let skips = Tar::new().file("../escape", b"x").file("kept", b"yy").finish();
    let clean = Tar::new().file("a", b"zzz").finish();
    // (archive, members, skipped, status, bytes written)
    let runs = [(skips, 2, 1, ExitCode::Fatal, 2), (clean, 1, 0, ExitCode::Success, 3)];
    for (i, (tar, members, skipped, status, written)) in runs.into_iter().enumerate() {
        let (archive, dest) = (dir.join(format!("{i}.tar")), dir.join(format!("out{i}")));
        fs::write(&archive, tar).unwrap();
        let report = Arc::new(Reporter::new());
        let (a, d) = (archive.to_str().unwrap(), dest.to_str().unwrap());
        // `cli::parse`, as main: `-C` is read in command-line order from what it keeps.
        let argv = ["fastuntar", "-x", "-f", a, "-C", d, "-q"];
        let args = fastuntar::__private::cli::parse(argv.iter().map(Into::into).collect());
        let edge = Edge::read(report.started_at()).unwrap();
        let options = options(args, &edge, &mut Vec::new()).unwrap();
        let plans = options.prepare(&edge.machine).unwrap();
        let summary = fastuntar::__private::command::extract::run(&plans, &report).unwrap();
        assert_eq!(summary.members, members, "run {i}");
        assert_eq!(report.skipped_count(), skipped, "run {i}");
        assert_eq!(report.status(true), status, "run {i}");
        assert_eq!(report.tally.members.load(Relaxed), members, "run {i}");
        assert_eq!(report.tally.written.load(Relaxed), written, "run {i}");
        assert!(report.totals_line(10240).starts_with("Total bytes read: 10240 "), "run {i}");
        assert_eq!(fs::read(dest.join(["kept", "a"][i])).unwrap().len() as u64, written);
    }
}
