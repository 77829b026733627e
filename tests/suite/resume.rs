//! Resuming an interrupted restore (issue 30; src/resume/, docs/DESIGN.md "Resuming an
//! interrupted restore").
//!
//! **Kill tests.** fastuntar is SIGKILLed at deterministic points spread over the run (the
//! hidden `--debug-kill-at EVENT:N`: the N-th member sent, resume point published, state
//! written / synced / renamed, directory stamped, directory stamped in the final pass, end),
//! then run again with the same command; the tree must be GNU tar's (paths, types, contents,
//! links, modes, mtimes, directories included) and no state file may be left. Inputs: a
//! multi-frame zstd file (resumes at a frame), a plain tar (at a member), a single-frame zstd
//! (decoded again from the start, members before the point passed over) and a URL served by
//! tests/util/http.rs (the resumed run fetches nothing before the point's frame). Rows: the
//! default writer with every point; portable, io_uring with `--direct-io`, and two writer
//! threads with a spread subset.
//!
//! **Refusals.** A changed archive, changed options, a tampered, oversized or symlinked state
//! file: one line naming why, with `--no-resume` as the way out, exit 2, DIR unchanged.
//!
//! Matrix rows: none from the kit. A kill point is a position in one run, so each case picks
//! its own writer rows (listed above) rather than crossing every row with every point: 24
//! points on the default writer, a spread subset on the others.

use crate::util;
use crate::util::http;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use fastuntar::__private::resume::state::State;
use http::{ARCHIVE, Faults, Server};
use util::engine::{Encoding, ZSTD_1, ZSTD_64K};
use util::rawtar::{self, Header, Tar};
use util::snapshot::{Compare, Snapshot, assert_same, snapshot};
use util::{Cmd, Output, Rng, TestDir, have_tools};

const STATE: &str = ".fastuntar-resume";
const TMP: &str = ".fastuntar-resume.tmp";

/// A file at `path` as a failure message shows it: its size, mode and first bytes.
fn describe(path: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    match (std::fs::symlink_metadata(path), std::fs::read(path)) {
        (Ok(m), Ok(bytes)) => format!(
            "{}: {} bytes, mode {:o}, starts {:02x?}",
            path.display(),
            m.len(),
            m.permissions().mode() & 0o7777,
            &bytes[..bytes.len().min(48)]
        ),
        (Ok(m), Err(e)) => format!("{}: {} bytes, unreadable ({e})", path.display(), m.len()),
        (Err(_), _) => format!("{}: absent", path.display()),
    }
}

/// A state every 64 KiB written: many resume points in a 3 MB archive.
const EVERY: &[&str] = &["--writeback-every", "64K"];

/// An archive shaped like the ones resumed in practice, small: a `./` member, 12 directories
/// of 50 files each (100 B to 6 KiB, random, so zstd keeps their size), one 0555 directory
/// whose files come after it (its mode must wait), 20 files in directories only implied
/// (more directories than members), a 600 KiB file, a symlink and a hard link;
/// every directory with its own mtime, so a stamp missed or applied early shows.
fn archive() -> Vec<u8> {
    let mut t = Tar::new();
    let mut rng = Rng::new(30);
    t.header(&Header::dir("./").mode(0o750).mtime(1_500_000_000));
    t.header(&Header::dir("./ro/").mode(0o555).mtime(1_500_000_100));
    for i in 0..5 {
        t.file(format!("./ro/f{i}"), &rng.bytes(700));
    }
    // Directories only implied (as a snapshot's `accounts/`): counted against --max-files too.
    for i in 0..20 {
        t.file(format!("./imp/a{i}/b/c/f"), &rng.bytes(300));
    }
    for d in 0..12u64 {
        let dir = format!("./d{d}/");
        t.header(&Header::dir(&dir).mode(0o700 + (d as u32 % 3) * 0o10).mtime(1_500_001_000 + d));
        for f in 0..50u64 {
            let size = 100 + (rng.next_u64() % 6000) as usize;
            let h = Header::file(format!("{dir}f{f}")).mtime(1_500_002_000 + f).mode(0o640);
            t.entry(&h, &rng.bytes(size));
        }
        if d == 5 {
            t.entry(&Header::file("./d5/big"), &rng.bytes(600 << 10));
        }
    }
    t.symlink("./d0/link", "f1");
    t.hardlink("./d11/hard", "./d0/f2");
    t.finish()
}

/// GNU tar's tree of `archive`, and when it was made.
struct Oracle {
    want: Snapshot,
    started: SystemTime,
}

fn oracle(td: &TestDir, tar: &[u8]) -> Oracle {
    let started = SystemTime::now() - std::time::Duration::from_secs(1);
    let file = td.write("oracle.tar", tar);
    let gnu = td.fresh("gnu");
    let g = Cmd::new("tar").arg("-xf").arg(&file).arg("-C").arg(&gnu).run();
    assert!(g.success(), "GNU tar failed\n{}", g.describe());
    Oracle { want: snapshot(&gnu), started }
}

/// What a case starts from: a fresh test directory named after `test`, the archive, and GNU
/// tar's tree of it; None without GNU tar (a SKIP line; under CI a failure).
fn set_up(test: &str) -> Option<(TestDir, Vec<u8>, Oracle)> {
    if !have_tools(test, &["tar"]) {
        return None;
    }
    let td = TestDir::new(test);
    let tar = archive();
    let o = oracle(&td, &tar);
    Some((td, tar, o))
}

impl Oracle {
    fn same(&self, dest: &Path, ctx: &str) {
        assert!(!dest.join(STATE).exists(), "{ctx}: the state file is left behind");
        self.same_tree(dest, ctx);
    }

    /// `same`, for an archive that has a member named like the state file.
    fn same_tree(&self, dest: &Path, ctx: &str) {
        let ours = snapshot(dest);
        let cmp = Compare::extraction(self.started);
        assert_same(&self.want, "GNU tar", &ours, "fastuntar", &cmp, ctx);
    }
}

/// Where the archive comes from.
enum Source<'a> {
    File(PathBuf),
    Url(&'a Server),
}

impl Source<'_> {
    fn arg(&self) -> std::ffi::OsString {
        match self {
            Source::File(p) => p.clone().into_os_string(),
            Source::Url(s) => s.url(ARCHIVE).into(),
        }
    }
}

/// The run that is killed (not `util::fastuntar()`, which fails a test on a signal).
fn killed(src: &Source, dest: &Path, row: &[&str], point: &str) -> Output {
    Cmd::new(util::fastuntar_path())
        .args(["-x", "-f"])
        .arg(src.arg())
        .arg("-C")
        .arg(dest)
        .args(EVERY)
        .args(row)
        .arg(format!("--debug-kill-at={point}"))
        .run()
}

/// Killed at the first state taken once 1 MiB has landed: a point past the first MiB however
/// slow the disk. (A kill at `end:1` may find only a state written early: on the load
/// protocol's throttled disk a run's only state was at member 15, in the first 64 KiB frame.)
fn killed_past_first_mib(src: &Source, dest: &Path) {
    let k = killed(src, dest, &["--writeback-every", "1M"], "renamed:1");
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
}

/// The same command again, without the kill.
fn again(src: &Source, dest: &Path, row: &[&str], extra: &[&str]) -> Output {
    util::fastuntar()
        .args(["-x", "--json", "-f"])
        .arg(src.arg())
        .arg("-C")
        .arg(dest)
        .args(EVERY)
        .args(row)
        .args(extra)
        .run()
}

/// Every kill point of the default row: members at ~8 % steps of the 613 members, each step
/// of the state protocol at several of its occurrences, stamps during the run and in the
/// final directory pass, and the end (state not yet removed).
const ALL_POINTS: &[&str] = &[
    "member:1",
    "member:30",
    "member:80",
    "member:130",
    "member:180",
    "member:230",
    "member:280",
    "member:330",
    "member:380",
    "member:430",
    "member:480",
    "member:530",
    "member:580",
    "published:1",
    "published:3",
    "written:1",
    "synced:2",
    "renamed:1",
    "renamed:3",
    "stamp:4",
    "stamp:10",
    "final-stamp:1",
    "final-stamp:2",
    "end:1",
];

/// The subset the other writer rows run: spread over the run, the protocol, the final pass.
const SOME_POINTS: &[&str] = &["member:300", "renamed:1", "final-stamp:1", "end:1"];

/// The default row's points in the quick tier (`FASTUNTAR_TEST_TIER=quick`): one of each kind
/// of ALL_POINTS (a member early and late, each step of the state protocol, a stamp during the
/// run and in the final pass, the end), 9 of its 24 kill-and-resume runs; the other rows run
/// one point each (`some_points`). Each run extracts the 613 members twice and leaves them to
/// be removed: the three cases were about 80 s of the quick tier's wall time at load 6-10
/// (2026-11-27), most of it this machine's disk. The exhaustive tier runs every point.
const QUICK_POINTS: &[&str] = &[
    "member:1",
    "member:330",
    "published:3",
    "written:1",
    "synced:2",
    "renamed:3",
    "stamp:10",
    "final-stamp:2",
    "end:1",
];

/// The points the `i`th other writer row runs in this tier: SOME_POINTS, or in the quick tier
/// one of them, a different one a row.
fn some_points(i: usize) -> &'static [&'static str] {
    match util::engine::tier() {
        util::engine::Tier::Exhaustive => SOME_POINTS,
        util::engine::Tier::Quick => &SOME_POINTS[i % SOME_POINTS.len()..][..1],
    }
}

/// The default row's kill points in this tier.
fn points() -> &'static [&'static str] {
    match util::engine::tier() {
        util::engine::Tier::Exhaustive => ALL_POINTS,
        util::engine::Tier::Quick => QUICK_POINTS,
    }
}

/// Kills at each point, resumes, compares. Returns how many reruns resumed (said so).
fn kill_and_resume(
    td: &TestDir,
    o: &Oracle,
    src: &Source,
    row: &[&str],
    points: &[&str],
    ctx: &str,
) -> usize {
    let mut resumed = 0;
    for point in points {
        let dest = td.fresh("dest");
        let k = killed(src, &dest, row, point);
        // A point past the run's last event: the run completes.
        assert!(
            k.signal == Some(libc::SIGKILL) || k.code == Some(0),
            "{ctx} {point}: the killed run\n{}",
            k.describe()
        );
        let state = dest.join(STATE).exists();
        let r = again(src, &dest, row, &[]);
        r.expect_code(0);
        // A state in place is resumed from, and said so (how many points a run writes
        // depends on how fast the disk syncs, so not every kill finds one).
        let said = r.stderr_str().contains("resumed at member");
        assert_eq!(said, state, "{ctx} {point}: state {state}, resumed {said}\n{}", r.describe());
        if said {
            resumed += 1;
            assert!(r.stdout_str().contains("\"resumed\":{\"member\":"), "{}", r.describe());
        }
        o.same(&dest, &format!("{ctx}, killed at {point}"));
    }
    resumed
}

fn write_archive(td: &TestDir, enc: Encoding, tar: &[u8]) -> PathBuf {
    td.write(format!("a{}", enc.suffix()), enc.encode(tar))
}

/// Multi-frame zstd from a file: every point under the default writer, with a resumed run
/// that is itself killed, and a subset under the other writer rows. Reruns killed before the first state was in place start over; at
/// every rerun that finds a state resumes from it.
#[test]
fn multi_frame_zstd_killed_anywhere_resumes_to_gnu_tars_tree() {
    let Some((td, tar, o)) = set_up("multi_frame_zstd_killed_anywhere_resumes_to_gnu_tars_tree")
    else {
        return;
    };
    let src = Source::File(write_archive(&td, ZSTD_64K, &tar));
    let n = kill_and_resume(&td, &o, &src, &[], points(), "zstd 64 KiB frames");
    assert!(n >= 1, "none of {} reruns resumed", points().len());
    for (i, row) in [
        &["--io", "portable"][..],
        &["--io", "uring", "--direct-io"],
        &["--writer-threads", "2"],
        &["--threads", "2"],
    ]
    .into_iter()
    .enumerate()
    {
        kill_and_resume(&td, &o, &src, row, some_points(i), &format!("zstd 64 KiB {row:?}"));
    }
    // Killed, resumed and killed again, then a third run.
    let dest = td.fresh("twice");
    killed(&src, &dest, &[], "renamed:1");
    killed(&src, &dest, &[], "member:200");
    let r = again(&src, &dest, &[], &[]);
    r.expect_code(0);
    o.same(&dest, "killed twice");
}

/// A plain tar resumes at a member boundary: the resumed run starts reading at that member's
/// header (the summary's byte is a member's offset, a multiple of 512).
#[test]
fn plain_tar_killed_anywhere_resumes_at_a_member() {
    let Some((td, tar, o)) = set_up("plain_tar_killed_anywhere_resumes_at_a_member") else {
        return;
    };
    let src = Source::File(write_archive(&td, Encoding::Plain, &tar));
    let n = kill_and_resume(&td, &o, &src, &[], points(), "plain");
    assert!(n >= 1, "none of {} reruns resumed", points().len());
    for (i, row) in [&["--io", "portable", "--direct-io"][..], &["--writer-threads", "2"]]
        .into_iter()
        .enumerate()
    {
        kill_and_resume(&td, &o, &src, row, some_points(i), &format!("plain {row:?}"));
    }
    let dest = td.fresh("seek");
    killed(&src, &dest, &[], "renamed:1");
    let r = again(&src, &dest, &[], &[]);
    let at = util::json_number(&r.stdout_str(), "archive_offset").expect("resumed");
    assert!(at > 0 && at.is_multiple_of(512), "byte {at}\n{}", r.describe());
    assert!(r.stdout_str().contains("\"mode\":\"seek\""), "{}", r.describe());
    o.same(&dest, "plain, seek");
}

/// A PAX global header that sets values (Python's `tarfile` with `pax_headers`, `pax -o`)
/// applies to every member after it: each resume point carries it, and the resumed run reads
/// it again before its first member. Before, such an archive got no resume point at all.
#[test]
fn pax_global_headers_are_carried_to_the_resumed_run() {
    let test = "pax_global_headers_are_carried_to_the_resumed_run";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let records = [
        rawtar::pax_record("comment", "made by a test"),
        rawtar::pax_record("mtime", "1234567890.5"),
        rawtar::pax_record("uname", "nobody"),
    ]
    .concat();
    let mut global = Tar::new();
    global.entry(&Header::new("pax_global_header", b'g'), &records);
    let tar = [global.unterminated(), archive()].concat();
    let o = oracle(&td, &tar);
    for enc in [ZSTD_64K, Encoding::Plain] {
        let src = Source::File(write_archive(&td, enc, &tar));
        let points = ["member:300", "renamed:2", "final-stamp:1"];
        let n = kill_and_resume(&td, &o, &src, &[], &points, &format!("global header {enc:?}"));
        assert!(n >= 1, "{enc:?}: none of {} reruns resumed", points.len());
    }
}

/// A single zstd frame cannot be entered in the middle: the resumed run decodes from the start
/// and passes over the members before the point without writing them, and says so.
#[test]
fn single_frame_zstd_is_decoded_again_and_passed_over() {
    let Some((td, tar, o)) = set_up("single_frame_zstd_is_decoded_again_and_passed_over") else {
        return;
    };
    let src = Source::File(write_archive(&td, ZSTD_1, &tar));
    let n = kill_and_resume(&td, &o, &src, &[], points(), "zstd one frame");
    assert!(n >= 1, "none of {} reruns resumed", points().len());
    kill_and_resume(&td, &o, &src, &["--io", "uring", "--direct-io"], some_points(1), "one frame");
    // d0/f3 (at ~100 KB) lies before a point past the first MiB.
    let dest = td.fresh("reread");
    killed_past_first_mib(&src, &dest);
    // A file extracted before the point: a resumed run must not write it again.
    let before =
        std::fs::metadata(dest.join("d0/f3")).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let r = again(&src, &dest, &[], &[]);
    assert!(r.stderr_str().contains("decoded again from the start"), "{}", r.describe());
    assert!(r.stdout_str().contains("\"mode\":\"reread\""), "{}", r.describe());
    let after =
        std::fs::metadata(dest.join("d0/f3")).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    assert_eq!(before.ok(), after.ok(), "a member before the point was written again");
    o.same(&dest, "one frame, passed over");
}

/// From a URL: killed, then resumed; the resumed run asks for nothing before the frame it
/// resumes at (every Range it sends starts there or later), and the tree is GNU tar's.
#[test]
fn url_resumes_without_downloading_the_bytes_before_the_point() {
    let Some((td, tar, o)) = set_up("url_resumes_without_downloading_the_bytes_before_the_point")
    else {
        return;
    };
    let server = Server::start(ZSTD_64K.encode(&tar), Faults::default());
    let src = Source::Url(&server);
    let points = ["member:200", "renamed:1", "final-stamp:1", "end:1"];
    let n = kill_and_resume(&td, &o, &src, &[], &points, "URL");
    assert!(n >= 1, "none of {} reruns resumed", points.len());
    kill_and_resume(&td, &o, &src, &["--io", "portable", "--direct-io"], &points[..2], "URL");
    // A point well past the first 64 KiB frame, so the rerun has a Range to ask for.
    let dest = td.fresh("ranges");
    killed_past_first_mib(&src, &dest);
    let seen_before = server.seen().len();
    let r = again(&src, &dest, &[], &[]);
    let at = util::json_number(&r.stdout_str(), "archive_offset").expect("resumed");
    assert!(at > 0, "{}", r.describe());
    for s in &server.seen()[seen_before..] {
        let Some(range) = &s.range else { continue };
        let from = util::http::parse_range(range).unwrap_or_else(|| panic!("range {range}")).0;
        assert!(from >= at, "the resumed run fetched byte {from}, before {at}\n{}", r.describe());
    }
    let downloaded = util::json_number(&r.stdout_str(), "download_bytes").unwrap();
    let total = ZSTD_64K.encode(&tar).len() as u64;
    assert!(downloaded <= total - at, "downloaded {downloaded} of {total}, resumed at {at}");
    o.same(&dest, "URL, ranges");
}

/// From three sources (issue 42): killed, then resumed with the same three; the resumed run
/// asks no source for a byte before the point, each source is pinned again to the version it
/// served (a mirror that changed in between is dropped, the run goes on), and the tree is GNU
/// tar's.
#[test]
fn url_with_mirrors_resumes() {
    let Some((td, tar, o)) = set_up("url_with_mirrors_resumes") else { return };
    let archive = ZSTD_64K.encode(&tar);
    let a = Server::start(archive.clone(), Faults::default());
    let b = Server::start(archive.clone(), Faults::default());
    let c = Server::start(archive.clone(), Faults::default());
    let (ub, uc) = (b.url(ARCHIVE), c.url(ARCHIVE));
    let row = ["--mirror", &ub, "--mirror", &uc];
    let src = Source::Url(&a);
    let points = ["member:200", "renamed:1", "end:1"];
    let n = kill_and_resume(&td, &o, &src, &row, &points, "three sources");
    assert!(n >= 1, "none of {} reruns resumed", points.len());
    // Past the first MiB, then resumed: no source is asked for a byte before the point.
    let dest = td.fresh("ranges");
    let k = killed(&src, &dest, &[&row[..], &["--writeback-every", "1M"]].concat(), "renamed:1");
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    let before: Vec<usize> = [&a, &b, &c].iter().map(|s| s.seen().len()).collect();
    let r = again(&src, &dest, &row, &[]);
    let at = util::json_number(&r.stdout_str(), "archive_offset").expect("resumed");
    assert!(at > 0, "{}", r.describe());
    for (s, n) in [&a, &b, &c].iter().zip(before) {
        for seen in &s.seen()[n..] {
            let Some(range) = &seen.range else { continue };
            let from = util::http::parse_range(range).unwrap_or_else(|| panic!("range {range}")).0;
            assert!(from >= at, "a source was asked for byte {from}, before {at}");
        }
    }
    o.same(&dest, "three sources, ranges");
    // A mirror whose archive changed since (another ETag, so its If-Range fails): dropped
    // with a line, and the run resumes from the other two and from a mirror the state does
    // not name (compared with the reference's bytes, as any new mirror).
    let dest = td.fresh("changed");
    let k = killed(&src, &dest, &[&row[..], &["--writeback-every", "1M"]].concat(), "renamed:1");
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    b.set_faults(Faults { change_etag_after: Some(0), ..Faults::default() });
    let d = Server::start(archive, Faults::default());
    let ud = d.url(ARCHIVE);
    let row2 = ["--mirror", &ub, "--mirror", &uc, "--mirror", &ud];
    let r = again(&src, &dest, &row2, &[]);
    r.expect_code(0);
    assert!(r.stderr_str().contains("resumed at member"), "{}", r.describe());
    let dropped: Vec<String> = r.diagnostics().into_iter().filter(|l| l.contains(&ub)).collect();
    assert_eq!(dropped.len(), 1, "one line for the changed mirror\n{}", r.describe());
    assert!(dropped[0].contains("changed"), "{}", r.describe());
    o.same(&dest, "a mirror changed, a new one added");
}

/// The unprivileged user of the test below (nobody on Debian).
const NOBODY: u32 = 65534;

/// `program args` as NOBODY (and its group, no supplementary groups), through setpriv.
fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> Cmd {
    let mut c = Cmd::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(program);
    c
}

fn give_to_nobody(p: &Path) {
    std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// As a user who is not root, a resumed run fills directories the interrupted run stamped
/// after its last resume point: `ro/` (0555) is stamped as soon as the archive leaves it for
/// `after/` (0555 too), and a kill before the next state leaves a state whose point lies
/// inside `ro/`. The resumed run must make `ro/`'s members after the point and replace what the
/// interrupted run made in `after/`. Until 2026-11-27 each of them failed ("cannot create:
/// Permission denied", exit 2; found by a stress loop of random SIGKILLs as nobody). The kill
/// is at the first state (`renamed:1`, its point inside `ro/`), and DIR is then made what a
/// run killed a little later leaves: `ro/` and `after/` stamped, a file of `after/` half
/// written. As root no mode stops a write, so the binary runs as nobody (setpriv).
#[test]
fn unprivileged_resume_fills_directories_the_interrupted_run_stamped() {
    let test = "unprivileged_resume_fills_directories_the_interrupted_run_stamped";
    if !have_tools(test, &["tar", "setpriv"]) || !util::have_root(test, "setpriv to nobody") {
        return;
    }
    let td = TestDir::for_users(test);
    let mut t = Tar::new();
    let mut rng = Rng::new(3030);
    t.header(&Header::dir("./").mode(0o755).mtime(1_500_000_000));
    t.header(&Header::dir("./ro/").mode(0o555).mtime(1_500_000_100));
    // 2,000 files of 3000 B: the first state (after 64 KiB written) falls inside ro/, and the
    // run lasts long enough (6 MB) for the recorder to write it on a loaded machine (with
    // 300 files a run under load once ended before its first state).
    for i in 0..2000u64 {
        let h = Header::file(format!("./ro/f{i}")).mode(0o444).mtime(1_500_000_200 + i);
        t.entry(&h, &rng.bytes(3000));
    }
    t.header(&Header::dir("./after/").mode(0o555).mtime(1_500_000_300));
    for i in 0..20u64 {
        let h = Header::file(format!("./after/f{i}")).mode(0o644).mtime(1_500_000_400 + i);
        t.entry(&h, &rng.bytes(3000));
    }
    let file = td.write("ro.tar", t.finish());
    let gnu = td.fresh("gnu");
    give_to_nobody(&gnu);
    let started = SystemTime::now() - std::time::Duration::from_secs(1);
    let g = as_nobody("tar").arg("-xf").arg(&file).arg("-C").arg(&gnu).run();
    assert!(g.success(), "GNU tar as nobody\n{}", g.describe());
    // What stamping applies: the mode, then the time.
    let stamp = |d: &Path, mtime: u64| {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime);
        std::fs::File::open(d).unwrap().set_modified(t).unwrap();
    };
    let o = Oracle { want: snapshot(&gnu), started };
    let rows: &[&[&str]] = &[&[], &["--writer-threads", "2"], &["--io", "portable"]];
    // The quick tier: the default row alone (each row writes and leaves 2,000 files; the
    // three were 26 s of the quick tier at load 5-11). The exhaustive tier runs all three.
    let rows = match util::engine::tier() {
        util::engine::Tier::Exhaustive => rows,
        util::engine::Tier::Quick => &rows[..1],
    };
    for &row in rows {
        let dest = td.fresh("dest");
        give_to_nobody(&dest);
        let run = |extra: &[&str]| {
            as_nobody(util::fastuntar_path())
                .args(["-x", "-f"])
                .arg(&file)
                .arg("-C")
                .arg(&dest)
                .args(EVERY)
                .args(row)
                .args(extra)
                .run()
        };
        let k = run(&["--debug-kill-at=renamed:1"]);
        assert_eq!(k.signal, Some(libc::SIGKILL), "{row:?}\n{}", k.describe());
        // What a run killed a little later leaves (it went on past ro/ without a new state).
        let after = dest.join("after");
        if !after.exists() {
            std::fs::create_dir(&after).unwrap();
        }
        std::fs::write(after.join("f0"), b"half").unwrap();
        for p in [&after, &after.join("f0")] {
            give_to_nobody(p);
        }
        stamp(&after, 1_500_000_300);
        stamp(&dest.join("ro"), 1_500_000_100);
        let r = run(&["--json"]);
        r.expect_code(0);
        let member = util::json_number(&r.stdout_str(), "member").expect("resumed");
        assert!((2..=2001).contains(&member), "{row:?}: the point is past ro/: {member}");
        o.same(&dest, &format!("resumed as nobody into directories stamped later, {row:?}"));
    }
}

/// A DIR left by a run killed after its first state was in place, and the state's bytes.
fn interrupted(td: &TestDir, src: &Source) -> (PathBuf, Vec<u8>) {
    let dest = td.fresh("dest");
    let k = killed(src, &dest, &[], "renamed:1");
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    let state = std::fs::read(dest.join(STATE)).expect("a state file");
    (dest, state)
}

/// One line naming why, the way out, exit 2, and DIR as it was.
fn refused(td: &TestDir, src: &Source, dest: &Path, extra: &[&str], why: &str, ctx: &str) {
    let before = snapshot(dest);
    let r = again(src, dest, &[], extra);
    r.expect_code(2);
    let lines = r.diagnostics();
    assert_eq!(lines.len(), 1, "{ctx}: one line\n{}", r.describe());
    assert!(lines[0].contains(why), "{ctx}: the line says {why:?}\n{}", r.describe());
    assert!(lines[0].contains("--no-resume"), "{ctx}: the way out\n{}", r.describe());
    assert_same(&before, "before", &snapshot(dest), "after", &Compare::exact(), ctx);
    let _ = td;
}

/// Takes DIR's lock as another fastuntar holds it (flock on DIR, src/resume/fsio.rs `lock`).
fn hold_lock(dest: &Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dest).unwrap();
    // Safety: an open fd; flock takes no pointers.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(r, 0, "the lock of {}", dest.display());
    f
}

/// DIR locked by another process past the 10 s wait (a killed run whose io_uring requests
/// are still being torn down, or a live run): `--resume` is refused in one line; a plain run
/// extracts without resume points, and if the lock is free again when it completes it removes
/// the state left there, which it has made stale (else the next run would resume from it).
#[test]
fn a_locked_dir_is_extracted_without_points_and_its_stale_state_removed() {
    let test = "a_locked_dir_is_extracted_without_points_and_its_stale_state_removed";
    let Some((td, tar, o)) = set_up(test) else {
        return;
    };
    let src = Source::File(write_archive(&td, ZSTD_64K, &tar));
    let (dest, _) = interrupted(&td, &src);
    let lock = hold_lock(&dest);
    let r = again(&src, &dest, &[], &["--resume"]);
    r.expect_code(2);
    let lines = r.diagnostics();
    assert_eq!(lines.len(), 1, "one line\n{}", r.describe());
    assert!(lines[0].contains("another fastuntar is extracting into it"), "{}", r.describe());
    assert!(dest.join(STATE).exists(), "the refused run removed the state");

    // A plain run: slowed by checkpoints (a second each, 3 of them), so the lock is let go
    // while it extracts, once it has said it goes on without resume points.
    use std::io::BufRead;
    let mut child = std::process::Command::new(util::fastuntar_path())
        .args(["-x", "-f"])
        .arg(src.arg())
        .arg("-C")
        .arg(&dest)
        .args(["--checkpoint=100", "--checkpoint-action=sleep=1"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while stderr.read_line(&mut said).unwrap() > 0 && !said.contains("no resume point") {}
    assert!(said.contains("another fastuntar is extracting into it"), "{said}");
    drop(lock);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}\n{said}{rest}");
    o.same(&dest, "extracted while another process held the lock");
}

#[test]
fn mismatches_are_refused_in_one_line_and_no_resume_starts_over() {
    let Some((td, tar, o)) = set_up("mismatches_are_refused_in_one_line_and_no_resume_starts_over")
    else {
        return;
    };
    let path = write_archive(&td, ZSTD_64K, &tar);
    let src = Source::File(path.clone());

    // Options that change what lands.
    let (dest, _) = interrupted(&td, &src);
    refused(&td, &src, &dest, &["--strip-components", "1"], "option", "--strip-components");
    // A byte of the state flipped.
    let (dest2, state) = interrupted(&td, &src);
    let mut bad = state.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(dest2.join(STATE), &bad).unwrap();
    refused(&td, &src, &dest2, &[], "corrupt", "a flipped byte");
    // Oversized: the state (ours: this DIR's, its own inode) with 5 MiB after it. (Five MiB of
    // zeros until issue 40: not a state of ours at all, which now stops nothing:
    // `a_state_file_not_ours_stops_no_run`.)
    let (dest3, state) = interrupted(&td, &src);
    let mut padded = state.clone();
    padded.resize(state.len() + (5 << 20), 0);
    std::fs::write(dest3.join(STATE), &padded).unwrap();
    refused(&td, &src, &dest3, &[], "larger", "5 MiB");
    // Of another format version (version 2, what fastuntar wrote before issue 40), naming
    // this DIR: a state of ours, and refused as one.
    let (dest4, _) = interrupted(&td, &src);
    std::fs::write(dest4.join(STATE), version_2_state(&dest4)).unwrap();
    refused(&td, &src, &dest4, &[], "format version 2", "version 2");
    // `--no-resume` starts over from each of these.
    for d in [&dest, &dest2, &dest3, &dest4] {
        again(&src, d, &[], &["--no-resume"]).expect_code(0);
        o.same(d, "--no-resume");
    }
    // The archive changed (touched: a new mtime).
    let (dest5, _) = interrupted(&td, &src);
    let f = std::fs::File::options().append(true).open(&path).unwrap();
    f.set_modified(SystemTime::now()).unwrap();
    drop(f);
    refused(&td, &src, &dest5, &[], "changed", "a touched archive");
    // `--resume` with no state: starts from the beginning, with a note.
    let fresh = td.fresh("fresh");
    let r = again(&src, &fresh, &[], &["--resume"]);
    r.expect_code(0);
    assert!(r.stderr_str().contains("no resume point"), "{}", r.describe());
    o.same(&fresh, "--resume without a state");
}

/// A state file as version 2 laid it out (program, input, format, options, then DIR's
/// filesystem id and inode: `dest`'s), the rest of its fields left out: what `state::owner`
/// reads of it.
fn version_2_state(dest: &Path) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt;
    // Safety: a zeroed statvfs the call fills, and a C string.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(dest.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut vfs) }, 0);
    let mut body = Vec::new();
    body.extend_from_slice(&5u32.to_le_bytes());
    body.extend_from_slice(b"0.1.0");
    body.push(0);
    body.extend_from_slice(&[0; 40]);
    body.push(1);
    body.extend_from_slice(&[0; 32]);
    body.extend_from_slice(&(vfs.f_fsid as u64).to_le_bytes());
    body.extend_from_slice(&std::fs::metadata(dest).unwrap().ino().to_le_bytes());
    body.extend_from_slice(&[0; 64]);
    let mut file = fastuntar::__private::resume::state::seal(&body);
    file[8..12].copy_from_slice(&2u32.to_le_bytes());
    file
}

/// Issue 40, 4: what sits at `DIR/.fastuntar-resume` and is not a state of this DIR's (a
/// member of an archive extracted there: a file, a symlink out of DIR, a file with our magic
/// naming another DIR, a `.fastuntar-resume.tmp`; a state copied there from another DIR) stops
/// no run: each later run, with that archive or another, extracts and exits 0, says once that
/// it leaves the file alone (and writes no resume point), and nothing outside DIR changes.
/// The README's retry loop ends at its first try, also after a kill past the member. Before,
/// every later run into that DIR stopped with exit 2 ("cannot resume ... --no-resume starts
/// over"), and the loop never ended.
#[test]
fn a_state_file_not_ours_stops_no_run() {
    let test = "a_state_file_not_ours_stops_no_run";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let victim = td.write("victim", b"outside DIR\n");
    let mut forged = b"FUTRESUM".to_vec();
    forged.extend_from_slice(&99u32.to_le_bytes());
    forged.extend_from_slice(&[0x5a; 200]);
    let members: [(&str, &str, Option<&[u8]>); 4] = [
        ("a file", STATE, Some(b"an archive's file\n")),
        ("a symlink out of DIR", STATE, None),
        ("our magic, version 99", STATE, Some(&forged)),
        ("the temporary name", ".fastuntar-resume.tmp", Some(&[7u8; 100])),
    ];
    // 120 files of 3 KB after the member (many states at 64 KiB each), 20 in the other.
    let files = |t: &mut Tar, n: u64| {
        let mut rng = Rng::new(40);
        for i in 0..n {
            t.file(format!("d{}/f{i}", i % 4), &rng.bytes(3000));
        }
    };
    let mut t = Tar::new();
    files(&mut t, 20);
    let other = td.write("other.tar", t.finish());
    for (i, (kind, name, data)) in members.into_iter().enumerate() {
        let mut t = Tar::new();
        t.file("first", b"1\n");
        match data {
            Some(d) => t.file(name, d),
            None => t.symlink(name, victim.to_str().unwrap()),
        };
        files(&mut t, 120);
        let tar = t.finish();
        let o = oracle(&td, &tar);
        let src = Source::File(td.write(format!("member{i}.tar.zst"), ZSTD_64K.encode(&tar)));
        let dest = td.fresh("dest");
        again(&src, &dest, &[], &[]).expect_code(0);
        o.same_tree(&dest, kind);
        for (run, archive) in
            [("the same archive", &src), ("another", &Source::File(other.clone()))]
        {
            let r = again(archive, &dest, &[], &[]);
            r.expect_code(0);
            let lines = r.diagnostics();
            assert_eq!(lines.len(), 1, "{kind}, {run}: one line\n{}", r.describe());
            assert!(lines[0].contains("left as it is"), "{kind}, {run}\n{}", r.describe());
            assert!(!lines[0].contains("cannot resume"), "{kind}, {run}\n{}", r.describe());
        }
        assert!(dest.join(name).symlink_metadata().is_ok(), "{kind}: the file was removed");
        assert_eq!(util::read(&victim), b"outside DIR\n", "{kind}: the victim");
        // The README's loop, after a run killed past the member: its first try ends it.
        let dest = td.fresh("loop");
        let k = killed(&src, &dest, &[], "member:60");
        assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
        let script = r#"n=0; until "$0" -x -f "$1" -C "$2" -q; do n=$((n+1)); [ $n -lt 3 ] || exit 9; sleep 0.1; done; echo "$n""#;
        let l = Cmd::new("sh")
            .args(["-c", script])
            .arg(util::fastuntar_path())
            .arg(src.arg())
            .arg(&dest)
            .run();
        assert_eq!(l.code, Some(0), "{kind}: the retry loop\n{}", l.describe());
        assert_eq!(l.stdout_str().trim(), "0", "{kind}: retries\n{}", l.describe());
        o.same_tree(&dest, &format!("{kind}, after a kill and the loop"));
    }
    // Another DIR's state, copied in (a `cp -a` of an interrupted DIR): not this DIR's.
    let src = Source::File(write_archive(&td, ZSTD_64K, &archive()));
    let (dest, _) = interrupted(&td, &src);
    let copy = td.fresh("copy");
    util::sh(&format!("cp -a {}/. {}", dest.display(), copy.display()));
    let r = again(&src, &copy, &[], &[]);
    r.expect_code(0);
    assert!(r.stderr_str().contains("another directory"), "{}", r.describe());
    assert!(!r.stderr_str().contains("resumed at"), "{}", r.describe());
}

/// Issue 40, 6: the archive rewritten in place between the runs, with the same inode, size,
/// mtime and member headers and other bytes in a member before the resume point. The rerun
/// is refused in one line (its ctime changed), DIR as it was. And where the ctime is put back
/// too (root with debugfs on the filesystem's image, as a restore of an image would), the
/// sample of bytes the state keeps refuses it. Before, the rerun resumed and left a tree
/// mixing the two versions.
#[test]
fn an_archive_rewritten_in_place_is_not_resumed() {
    let test = "an_archive_rewritten_in_place_is_not_resumed";
    let Some((td, tar, _)) = set_up(test) else { return };
    // The data of ./ro/f0, the first file (after two directory headers and its own).
    let at = 3 * 512;
    let rewrite = |path: &Path| {
        use std::os::unix::fs::FileExt;
        let m = std::fs::metadata(path).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(&[b'X'; 100], at).unwrap();
        f.set_modified(m.modified().unwrap()).unwrap();
        let after = std::fs::metadata(path).unwrap();
        assert_eq!((after.len(), after.modified().unwrap()), (m.len(), m.modified().unwrap()));
    };
    let path = write_archive(&td, Encoding::Plain, &tar);
    let src = Source::File(path.clone());
    let (dest, _) = interrupted(&td, &src);
    rewrite(&path);
    refused(&td, &src, &dest, &[], "ctime", "rewritten in place");

    if !have_tools(test, &["mkfs.ext4", "losetup", "debugfs"]) || !util::have_root(test, "mount") {
        return;
    }
    let mut fs = Ext4::new(&td, "inplace");
    let path = fs.mnt.join("a.tar");
    std::fs::write(&path, &tar).unwrap();
    let src = Source::File(path.clone());
    let dest = fs.mnt.join("dest");
    std::fs::create_dir(&dest).unwrap();
    let k = killed(&src, &dest, &[], "renamed:1");
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    let times = |fs: &Ext4| -> Vec<(String, String)> {
        let out = util::sh(&format!("debugfs -R 'stat /a.tar' {} 2>/dev/null", fs.image.display()));
        let text = out.stdout_str();
        ["ctime", "mtime"]
            .iter()
            .map(|f| {
                let line = text.lines().find(|l| l.trim_start().starts_with(&format!("{f}:")));
                let v = line.unwrap_or_else(|| panic!("no {f} in\n{text}")).split_whitespace();
                let (sec, extra) = v.clone().nth(1).unwrap().split_once(':').unwrap();
                (sec.to_string(), format!("0x{extra}"))
            })
            .collect()
    };
    fs.unmount().unwrap();
    let before = times(&fs);
    fs.mount();
    rewrite(&path);
    fs.unmount().unwrap();
    for ((sec, extra), field) in before.iter().zip(["ctime", "mtime"]) {
        util::sh(&format!(
            "debugfs -w -R 'sif /a.tar {field} {sec}' {0} && \
             debugfs -w -R 'sif /a.tar {field}_extra {extra}' {0}",
            fs.image.display()
        ));
    }
    assert_eq!(times(&fs), before, "the times put back");
    fs.mount();
    refused(&td, &src, &dest, &[], "bytes before the resume point", "ctime put back");
}

/// Issue 40, 2, with resuming: `--delay-directory-restore` over an archive whose directory
/// comes again with another mode and time (`r/` 0755, its files, `s/`, `r/` 0500, more). Killed
/// before the repeat (the state carries `r` waiting), after it (both of `r`'s records carried,
/// pushed again in order by the resumed run and merged there), in the final pass and at the
/// end: the resumed tree is GNU tar's with the option (`r` 0500, its last time).
#[test]
fn delayed_directories_met_again_resume_to_gnu_tars_tree() {
    let test = "delayed_directories_met_again_resume_to_gnu_tars_tree";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let mut t = Tar::new();
    let mut rng = Rng::new(4040);
    let dir = |name: &str, mode: u32, mtime: u64| Header::dir(name).mode(mode).mtime(mtime);
    t.header(&dir("./", 0o755, 1_500_000_000));
    t.header(&dir("./r/", 0o755, 1_500_000_100));
    for i in 0..150u64 {
        t.entry(&Header::file(format!("./r/f{i}")).mtime(1_500_000_200), &rng.bytes(3000));
    }
    t.header(&dir("./s/", 0o750, 1_500_000_300));
    for i in 0..100u64 {
        t.entry(&Header::file(format!("./s/f{i}")).mtime(1_500_000_400), &rng.bytes(3000));
    }
    t.header(&dir("./r/", 0o500, 1_600_000_000));
    t.header(&dir("./r/sub/", 0o700, 1_600_000_100));
    for i in 0..50u64 {
        t.entry(&Header::file(format!("./r/sub/g{i}")).mtime(1_500_000_500), &rng.bytes(3000));
    }
    t.header(&dir("./s/", 0o705, 1_600_000_200));
    let tar = t.finish();
    let started = SystemTime::now() - std::time::Duration::from_secs(1);
    let file = td.write("oracle.tar", &tar);
    let gnu = td.fresh("gnu");
    let g = Cmd::new("tar")
        .args(["--delay-directory-restore", "-xf"])
        .arg(&file)
        .arg("-C")
        .arg(&gnu)
        .run();
    assert!(g.success(), "GNU tar failed\n{}", g.describe());
    let o = Oracle { want: snapshot(&gnu), started };
    let src = Source::File(write_archive(&td, Encoding::Plain, &tar));
    let points = [
        "member:100",
        "member:200",
        "member:270",
        "renamed:1",
        "renamed:4",
        "final-stamp:1",
        "final-stamp:3",
        "end:1",
    ];
    let row = &["--delay-directory-restore"][..];
    let n = kill_and_resume(&td, &o, &src, row, &points, "delayed, repeated");
    assert!(n >= 1, "none of {} reruns resumed", points.len());
    kill_and_resume(
        &td,
        &o,
        &src,
        &[row, &["--writer-threads", "2"]].concat(),
        &points[1..3],
        "w2",
    );
}

/// The hidden `--debug-kill-at` at a step of the state protocol (`renamed:1`) waits at the end
/// for a state that is coming; a run that writes none (`--no-resume`, `-k`, standard input)
/// is not held: it ends at once with exit 0. Before, it waited the full 60 s.
#[test]
fn a_kill_at_a_state_step_does_not_hold_a_run_without_points() {
    let td = TestDir::new("a_kill_at_a_state_step_does_not_hold_a_run_without_points");
    let tar = archive();
    let path = write_archive(&td, ZSTD_64K, &tar);
    for (row, stdin) in [(&["--no-resume"][..], false), (&["-k"], false), (&[], true)] {
        let dest = td.fresh("dest");
        let mut c = Cmd::new(util::fastuntar_path());
        c.args(["-x", "-q", "-C"]).arg(&dest).args(EVERY).args(row);
        c.arg("--debug-kill-at=renamed:1").timeout(std::time::Duration::from_secs(50));
        match stdin {
            true => c.args(["-f", "-"]).stdin(util::Input::File(path.clone())),
            false => c.arg("-f").arg(&path),
        };
        let out = c.run();
        assert_eq!(out.code, Some(0), "{row:?}, stdin {stdin}\n{}", out.describe());
        assert!(
            out.elapsed < std::time::Duration::from_secs(30),
            "{row:?}, stdin {stdin}: held {:?}",
            out.elapsed
        );
    }
}

/// A loop-mounted ext4 of the test's own, unmounted (and its loop device freed) when dropped.
/// A resumed run after a reboot or a remount: the filesystem keeps its inodes but may come
/// back on another device number (the power-cut test's loop device is attached anew, and under
/// load is often the next one). The directories the state carried are still stamped: here
/// every carried directory's recorded device is made another one, as after such a remount.
#[test]
fn carried_directories_are_stamped_when_the_device_number_changed() {
    let Some((td, tar, plain)) =
        set_up("carried_directories_are_stamped_when_the_device_number_changed")
    else {
        return;
    };
    // GNU tar with the option: the links made at the end move d0's and d11's mtimes.
    let delayed = {
        let started = SystemTime::now() - std::time::Duration::from_secs(1);
        let gnu = td.fresh("gnu-delayed");
        let file = td.write("delayed.tar", &tar);
        let g = Cmd::new("tar")
            .arg("-xf")
            .arg(&file)
            .arg("--delay-directory-restore")
            .arg("-C")
            .arg(&gnu)
            .run();
        assert!(g.success(), "GNU tar failed\n{}", g.describe());
        Oracle { want: snapshot(&gnu), started }
    };
    let src = Source::File(write_archive(&td, ZSTD_64K, &tar));
    for row in [&[][..], &["--delay-directory-restore"], &["--io", "uring", "--direct-io"]] {
        let o =
            if row.is_empty() || row[0] != "--delay-directory-restore" { &plain } else { &delayed };
        let dest = td.fresh("dest");
        let k = killed(&src, &dest, row, "renamed:1");
        assert_eq!(k.signal, Some(libc::SIGKILL), "{row:?}: {}", k.describe());
        let path = dest.join(STATE);
        let mut state = State::decode(&std::fs::read(&path).expect("a state file")).unwrap();
        assert!(state.dirs.iter().any(|d| d.record.path.is_empty()), "{row:?}: `.` is carried");
        for d in &mut state.dirs {
            d.record.dev ^= 0x5a5a;
        }
        std::fs::write(&path, state.encode()).unwrap();
        let r = again(&src, &dest, row, &[]);
        r.expect_code(0);
        assert!(util::json_number(&r.stdout_str(), "archive_offset").is_some(), "{row:?}: resumed");
        o.same(&dest, &format!("carried directories on another device number {row:?}"));
    }
}

struct Ext4 {
    image: PathBuf,
    mnt: PathBuf,
    dev: Option<String>,
}

impl Ext4 {
    fn new(td: &TestDir, name: &str) -> Ext4 {
        let image = td.join(format!("{name}.img"));
        let mnt = td.fresh(name);
        util::sh(&format!("truncate -s 256M {0} && mkfs.ext4 -q -F {0}", image.display()));
        let mut fs = Ext4 { image, mnt, dev: None };
        fs.mount();
        fs
    }

    fn mount(&mut self) {
        let out = util::sh(&format!("losetup -f --show {}", self.image.display()));
        let dev = out.stdout_str().trim().to_string();
        util::sh(&format!("mount {dev} {}", self.mnt.display()));
        self.dev = Some(dev);
    }

    /// Unmounts and detaches the loop device. A shut-down ext4 can stay busy for a moment after
    /// the killed run is reaped (io_uring tears its ring down, and drops the files it holds,
    /// in a kernel worker): `umount` is retried for up to 30 s. Were the failure ignored, the
    /// next `mount` would put a second mount of the same image over the first, and the two
    /// would corrupt each other (a loaded CI run once failed that way and left both mounted).
    fn unmount(&mut self) -> Result<(), String> {
        let Some(dev) = self.dev.take() else { return Ok(()) };
        let start = std::time::Instant::now();
        let mut out = Cmd::new("umount").arg(&self.mnt).run();
        while !out.success() && start.elapsed() < std::time::Duration::from_secs(30) {
            std::thread::sleep(std::time::Duration::from_millis(100));
            out = Cmd::new("umount").arg(&self.mnt).run();
        }
        if !out.success() {
            // Detached when the last user goes, so nothing outlives the test's directory.
            let _ = Cmd::new("umount").args(["-l"]).arg(&self.mnt).run();
            let _ = Cmd::new("losetup").args(["-d", &dev]).run();
            return Err(format!("umount {}: {}", self.mnt.display(), out.stderr_str()));
        }
        let _ = Cmd::new("losetup").args(["-d", &dev]).run();
        Ok(())
    }

    /// The power cut: ext4 stops where it is, its journal not flushed (EXT4_IOC_SHUTDOWN with
    /// EXT4_GOING_FLAGS_NOLOGFLUSH, the xfstests "godown" model): what was not committed is
    /// lost when it is mounted again.
    fn shut_down(&self) {
        const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587D;
        const NOLOGFLUSH: u32 = 2;
        let f = std::fs::File::open(&self.mnt).unwrap();
        let flags = NOLOGFLUSH;
        // Safety: an open fd on the filesystem and a pointer to a u32, as the ioctl takes.
        let r = unsafe {
            libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), EXT4_IOC_SHUTDOWN as _, &flags)
        };
        assert_eq!(r, 0, "EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        // No panic here: a test that failed is unwinding already.
        let _ = self.unmount();
    }
}

/// The power cut: an ext4 shut down without flushing its journal at moments after a state
/// file appeared, mounted again, and the same command run: it must end with GNU tar's tree.
/// Were a state ever ahead of the data, members before its point lost with the page cache
/// would be missing (or its probes would refuse the resume): the checkpoint is never ahead.
#[test]
fn power_cut_never_leaves_a_state_ahead_of_the_data() {
    let test = "power_cut_never_leaves_a_state_ahead_of_the_data";
    if !have_tools(test, &["tar", "mkfs.ext4", "losetup"]) || !util::have_root(test, "mount") {
        return;
    }
    let td = TestDir::new(test);
    let tar = archive();
    let o = oracle(&td, &tar);
    let src = Source::File(write_archive(&td, ZSTD_64K, &tar));
    let mut states = 0;
    for (round, delay_ms) in [0u64, 2, 5, 10, 20, 40].into_iter().enumerate() {
        for row in [&[][..], &["--direct-io"]] {
            let mut fs = Ext4::new(&td, &format!("cut{round}"));
            let dest = fs.mnt.join("d");
            std::fs::create_dir(&dest).unwrap();
            let mut child = std::process::Command::new(util::fastuntar_path())
                .args(["-x", "-q", "-f"])
                .arg(src.arg())
                .arg("-C")
                .arg(&dest)
                .args(EVERY)
                .args(row)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let start = std::time::Instant::now();
            while !dest.join(STATE).exists()
                && start.elapsed() < std::time::Duration::from_secs(20)
                && child.try_wait().unwrap().is_none()
            {
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            fs.shut_down();
            let _ = child.kill();
            let _ = child.wait();
            fs.unmount().unwrap();
            fs.mount();
            if dest.join(STATE).exists() {
                states += 1;
            }
            // What the cut left at the state's names, for the message of a failure.
            let left = [STATE, TMP].map(|name| describe(&dest.join(name))).join("; ");
            let r = again(&src, &dest, row, &[]);
            r.expect_code(0);
            let what = format!("power cut {delay_ms} ms after a state appeared {row:?}");
            assert!(
                !dest.join(TMP).exists() && !dest.join(STATE).exists(),
                "{what}: left after the rerun; after the cut: {left}; the rerun said: {}",
                r.stderr_str()
            );
            o.same(&dest, &what);
        }
    }
    assert!(states >= 1, "no power cut found a state in place");
}

/// Options whose effect cannot be done again from a member boundary, and an archive read from
/// standard input: a run with them writes no state, even killed mid-way (so a rerun never
/// resumes what it could not redo), and `--resume` with them is refused in one line naming
/// the option, with nothing written.
#[test]
fn runs_that_cannot_resume_write_no_state_and_refuse_resume() {
    let test = "runs_that_cannot_resume_write_no_state_and_refuse_resume";
    let td = TestDir::new(test);
    let tar = archive();
    let path = write_archive(&td, ZSTD_64K, &tar);
    let src = Source::File(path.clone());
    let cases: &[(&[&str], &str)] = &[
        (&["-k"], "-k (--keep-old-files)"),
        (&["--skip-old-files"], "--skip-old-files"),
        (&["--keep-newer-files"], "--keep-newer-files"),
        (&["--no-overwrite-dir"], "--no-overwrite-dir"),
        (&["--backup"], "--backup"),
        (&["-G"], "-G (--incremental)"),
        (&["-N", "2000-01-01"], "-N (--newer)"),
    ];
    for &(args, named) in cases {
        let dest = td.fresh("dest");
        let k = killed(&src, &dest, args, "member:300");
        assert_eq!(k.signal, Some(libc::SIGKILL), "{args:?}: {}", k.describe());
        assert!(!dest.join(STATE).exists(), "{args:?}: a state was written");
        let before = snapshot(&dest);
        let mut all = args.to_vec();
        all.push("--resume");
        let r = again(&src, &dest, &all, &[]);
        r.expect_code(2);
        let lines = r.diagnostics();
        assert_eq!(lines.len(), 1, "{args:?}: one line\n{}", r.describe());
        assert!(lines[0].contains(named), "{args:?}: names {named:?}\n{}", r.describe());
        assert_same(&before, "before", &snapshot(&dest), "after", &Compare::exact(), named);
    }
    // Standard input: killed without a state; `--resume` refused, naming it.
    let dest = td.fresh("stdin");
    let k = Cmd::new(util::fastuntar_path())
        .args(["-x", "-f", "-", "-C"])
        .arg(&dest)
        .args(EVERY)
        .arg("--debug-kill-at=member:300")
        .stdin(util::Input::File(path.clone()))
        .run();
    assert_eq!(k.signal, Some(libc::SIGKILL), "stdin: {}", k.describe());
    assert!(!dest.join(STATE).exists(), "stdin: a state was written");
    let r = util::fastuntar()
        .args(["-x", "--resume", "-f", "-", "-C"])
        .arg(&dest)
        .stdin(util::Input::File(path.clone()))
        .run();
    r.expect_code(2);
    assert!(r.stderr_str().contains("standard input"), "stdin --resume: {}", r.describe());
    assert_eq!(r.diagnostics().len(), 1, "stdin --resume: one line\n{}", r.describe());
}

/// A server that ignores Range (every GET is the whole archive, 200): the killed run's state
/// is still resumed, by decoding the archive again from its first byte and passing over the
/// members before the point (no member written twice), and the tree is GNU tar's.
#[test]
fn url_without_range_resumes_by_passing_over() {
    let test = "url_without_range_resumes_by_passing_over";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let tar = archive();
    let o = oracle(&td, &tar);
    let faults = Faults { no_range: true, ..Faults::default() };
    let server = Server::start(ZSTD_64K.encode(&tar), faults);
    let src = Source::Url(&server);
    let dest = td.fresh("dest");
    // The first state (how many more a run writes depends on how fast the disk syncs).
    let k = killed(&src, &dest, &[], "renamed:1");
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    assert!(dest.join(STATE).exists(), "no state after the first rename");
    let r = again(&src, &dest, &[], &[]);
    r.expect_code(0);
    let out = r.stdout_str();
    assert!(out.contains("\"resumed\":{\"member\":"), "not resumed\n{}", r.describe());
    assert_eq!(util::json_number(&out, "archive_offset"), Some(0), "{}", r.describe());
    let member = util::json_number(&out, "member").expect("the member resumed at");
    assert!(member > 0, "resumed at member 0\n{}", r.describe());
    o.same(&dest, "a server without Range");
}
