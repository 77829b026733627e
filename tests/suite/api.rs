//! The library's API (`fastuntar::Restore`, issue 43): restores in-process compared with GNU
//! tar's tree, two at once, from a reader, cancelled and resumed; every landed file told once
//! with its path and size; the errors by kind; and no process-wide effect (nothing on stdout
//! or stderr, the umask untouched). A routing callback (`Restore::route`): every member where
//! it said, the roots together GNU tar's tree remapped, its skips and refusals told, hostile
//! answers kept in their root, an undeclared root, cancel and resume. The runs are in-process, so the engine matrix's rows
//! (command-line flags) do not apply: each case runs once in both tiers.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fastuntar::{
    Cancel, Error, Landed, MemberKind, Observer, Restore, Resume, Route, SkipReason, Skipped,
    Source, Started,
};

use crate::util::rawtar::{Header, Tar};
use crate::util::snapshot::{Compare, Kind, Snapshot, diff, snapshot};
use crate::util::{Cmd, TestDir, have_tool};

/// A tar of `dirs` directories of `per_dir` files each (sizes from 0 to ~70 KiB, one of
/// 1.5 MiB), a symlink and a `.log` file per directory; `seed` makes two archives differ.
fn archive(dirs: usize, per_dir: usize, seed: u64) -> Vec<u8> {
    let mut t = Tar::new();
    t.dir("top/");
    for d in 0..dirs {
        t.dir(format!("top/d{d}/"));
        for f in 0..per_dir {
            let n = ((f as u64 * 7919 + d as u64 * 104_729 + seed) % 70_000) as usize;
            let data = crate::util::tree::contents(n, seed + (d * per_dir + f) as u64);
            t.file(format!("top/d{d}/f{f}"), &data);
        }
        t.file(format!("top/d{d}/run.log"), format!("log {d} {seed}").as_bytes());
        t.symlink(format!("top/d{d}/link"), format!("f{}", per_dir.saturating_sub(1)));
    }
    t.file("top/big", &crate::util::tree::contents(1_500_000, seed));
    t.finish()
}

/// GNU tar's tree of `archive` with `flags`, in a fresh directory of `td`.
fn gnu_tree(td: &TestDir, archive: &Path, flags: &[&str]) -> Snapshot {
    let dest = td.fresh("gnu");
    fs::create_dir_all(&dest).unwrap();
    let out = Cmd::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&dest)
        .args(flags)
        .env("TAR_OPTIONS", "")
        .run();
    assert!(out.success(), "{}", out.describe());
    snapshot(&dest)
}

/// A time before anything the case makes, for `Compare::extraction` (directory times both
/// after it are the extractions' own): the kernel stamps files with its coarse clock, up to a
/// tick behind `SystemTime::now`, so GNU tar's root made just after `now` could read as older
/// than it (1 run in 3 under load, the root's mtime the only difference).
fn recently() -> SystemTime {
    SystemTime::now() - Duration::from_secs(1)
}

/// Fails with the differences between GNU tar's tree and ours, if any.
fn assert_tree(gnu: &Snapshot, ours: &Path, since: SystemTime, what: &str) {
    let found = diff(gnu, "GNU tar", &snapshot(ours), "Restore", &Compare::extraction(since));
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

/// A landed file as told: its path, root, size, and the length read back from the file
/// handed over.
type Told = (PathBuf, usize, u64, Option<u64>);

/// Keeps everything it is told.
#[derive(Default)]
struct Kept {
    started: Mutex<Vec<(Vec<u8>, MemberKind, u64)>>,
    landed: Mutex<Vec<Told>>,
    skipped: Mutex<Vec<(String, SkipReason)>>,
    /// The words of each skip, in the same order.
    said: Mutex<Vec<String>>,
    warnings: Mutex<Vec<String>>,
    progress: AtomicU64,
    /// Hand the files over and read them back (their length is kept).
    files: bool,
}

impl Observer for Kept {
    fn started(&self, m: &Started<'_>) {
        self.started.lock().unwrap().push((m.name.to_vec(), m.kind, m.size));
    }

    fn landed(&self, f: Landed<'_>) {
        let read = f.file.map(|mut file| {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(0)).unwrap();
            let mut all = Vec::new();
            file.read_to_end(&mut all).unwrap();
            all.len() as u64
        });
        self.landed.lock().unwrap().push((f.path.to_path_buf(), f.root, f.size, read));
    }

    fn skipped(&self, s: &Skipped<'_>) {
        self.skipped.lock().unwrap().push((s.member.to_string(), s.reason));
        self.said.lock().unwrap().push(s.message.to_string());
    }

    fn warning(&self, w: &str) {
        self.warnings.lock().unwrap().push(w.to_string());
    }

    fn progress(&self, _: fastuntar::Progress) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    fn wants_files(&self) -> bool {
        self.files
    }
}

/// Two restores at once on two threads of this process, of different archives with
/// different options (`strip_components` and `exclude`, 2 writer threads and 1), each give
/// GNU tar's tree for their own options. (Until issue 43 a run set the process umask to 0
/// for its whole length, which the other run's files were then created under.)
#[test]
fn two_restores_at_once_give_their_own_trees() {
    let test = "api::two_restores_at_once_give_their_own_trees";
    if !have_tool(test, "tar") {
        return;
    }
    let td = TestDir::new(test);
    let (a, b) = (td.write("a.tar", archive(6, 40, 1)), td.write("b.tar", archive(5, 50, 2)));
    let since = recently();
    let gnu_a = gnu_tree(&td, &a, &["--strip-components=1"]);
    let gnu_b = gnu_tree(&td, &b, &["--exclude=*.log"]);
    let (da, db) = (td.join("out-a"), td.join("out-b"));
    std::thread::scope(|s| {
        let one = s.spawn(|| {
            Restore::new(Source::Path(a.clone()), &da).strip_components(1).writer_threads(2).run()
        });
        let two = s.spawn(|| {
            Restore::new(Source::Path(b.clone()), &db).exclude("*.log").writer_threads(1).run()
        });
        let (one, two) = (one.join().unwrap().unwrap(), two.join().unwrap().unwrap());
        assert_eq!((one.skipped, two.skipped), (0, 0));
    });
    assert_tree(&gnu_a, &da, since, "a with strip_components(1)");
    assert_tree(&gnu_b, &db, since, "b with exclude(\"*.log\")");
}

/// A reader as the source (zstd-compressed, handed over as a `Box<dyn Read + Send>` that
/// hands out at most 1,000 bytes a read): GNU tar's tree.
#[test]
fn a_reader_source_gives_gnu_tars_tree() {
    let test = "api::a_reader_source_gives_gnu_tars_tree";
    if !have_tool(test, "tar") {
        return;
    }
    struct Dribble(std::io::Cursor<Vec<u8>>);
    impl Read for Dribble {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(1000);
            self.0.read(&mut buf[..n])
        }
    }
    let td = TestDir::new(test);
    let tar = archive(3, 30, 3);
    let plain = td.write("r.tar", &tar);
    let since = recently();
    let gnu = gnu_tree(&td, &plain, &[]);
    let zst = zstd::bulk::compress(&tar, 3).unwrap();
    let dest = td.join("out");
    let reader = Box::new(Dribble(std::io::Cursor::new(zst)));
    let summary = Restore::new(Source::Reader(reader), &dest).run().unwrap();
    assert_eq!(summary.files, 3 * 31 + 1);
    assert_tree(&gnu, &dest, since, "from a reader");
}

/// Every regular file is told to `landed` exactly once, with its path (relative to the
/// destination), root 0 and size, as the tree holds it; with `wants_files`, the open file
/// handed over reads back as long as that. `started` names every member with its kind and
/// size, `progress` is called, and a hard link is not a landed file.
#[test]
fn every_landed_file_is_told_once_with_its_path_and_size() {
    let td = TestDir::new("api::every_landed_file_is_told_once");
    let mut tar = Tar::new();
    tar.dir("d/").file("d/a", b"aaaa").file("d/empty", b"");
    tar.file("d/big", &crate::util::tree::contents(3_000_000, 9));
    tar.hardlink("d/hard", "d/a").symlink("d/sym", "a");
    let path = td.write("e.tar", tar.finish());
    for (files, dest) in [(false, td.join("plain")), (true, td.join("handed"))] {
        let kept = Arc::new(Kept { files, ..Kept::default() });
        let summary =
            Restore::new(Source::Path(path.clone()), &dest).observer(kept.clone()).run().unwrap();
        let tree = snapshot(&dest);
        let on_disk: BTreeMap<PathBuf, u64> = tree
            .entries
            .iter()
            .filter(|(_, e)| e.kind == Kind::File)
            .map(|(p, e)| (PathBuf::from(String::from_utf8_lossy(p).into_owned()), e.size))
            .filter(|(p, _)| p.as_os_str() != "d/hard")
            .collect();
        let landed = kept.landed.lock().unwrap();
        let mut told = BTreeMap::new();
        for (p, root, size, read) in landed.iter() {
            assert_eq!(*root, 0, "{}", p.display());
            assert!(told.insert(p.clone(), *size).is_none(), "{} told twice", p.display());
            assert_eq!(*read, files.then_some(*size), "{}: the handed file", p.display());
        }
        assert_eq!(told, on_disk, "files={files}");
        assert_eq!(summary.files, 3);
        let started = kept.started.lock().unwrap();
        let kinds: Vec<(&[u8], MemberKind, u64)> =
            started.iter().map(|(n, k, s)| (&n[..], *k, *s)).collect();
        assert_eq!(
            kinds,
            [
                (&b"d/"[..], MemberKind::Dir, 0),
                (b"d/a", MemberKind::File, 4),
                (b"d/empty", MemberKind::File, 0),
                (b"d/big", MemberKind::File, 3_000_000),
                (b"d/hard", MemberKind::Hardlink, 0),
                (b"d/sym", MemberKind::Symlink, 0),
            ]
        );
        assert!(kept.progress.load(Ordering::Relaxed) >= 1, "progress at the end at least");
    }
}

/// Cancels once the run has recorded a resume point (its state file is there); until then,
/// past its first 200 files, it holds each file 2 ms, so that the run cannot end before the
/// writeback thread records one, however fast the disk.
struct CancelAfterPoint {
    state: PathBuf,
    cancel: Cancel,
    landed: AtomicU64,
    /// When it cancelled.
    at: Mutex<Option<Instant>>,
}

impl CancelAfterPoint {
    /// For a run into `dest` holding `cancel`.
    fn new(dest: &Path, cancel: &Cancel) -> CancelAfterPoint {
        CancelAfterPoint {
            state: dest.join(".fastuntar-resume"),
            cancel: cancel.clone(),
            landed: AtomicU64::new(0),
            at: Mutex::new(None),
        }
    }
}

impl Observer for CancelAfterPoint {
    fn landed(&self, _: Landed<'_>) {
        let n = self.landed.fetch_add(1, Ordering::Relaxed);
        let mut at = self.at.lock().unwrap();
        if at.is_some() {
            return;
        }
        if self.state.exists() {
            self.cancel.cancel();
            *at = Some(Instant::now());
        } else if n > 200 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A run cancelled once resume points have been written returns `Error::Cancelled` soon
/// after; the tree is partial; a rerun with the same options resumes (`Summary::resumed`)
/// and gives GNU tar's tree.
#[test]
fn cancel_then_resume_gives_gnu_tars_tree() {
    let test = "api::cancel_then_resume_gives_gnu_tars_tree";
    if !have_tool(test, "tar") {
        return;
    }
    let td = TestDir::new(test);
    let path = td.write("c.tar", archive(20, 100, 4));
    let since = recently();
    let gnu = gnu_tree(&td, &path, &[]);
    let dest = td.join("out");
    let restore = || Restore::new(Source::Path(path.clone()), &dest).resume_every(256 << 10);
    let cancel = Cancel::new();
    let watch = Arc::new(CancelAfterPoint::new(&dest, &cancel));
    let first = restore().cancel(cancel).observer(watch.clone()).run();
    let returned = Instant::now();
    let Some(cancelled_at) = *watch.at.lock().unwrap() else {
        panic!("the run ended before it recorded a resume point: {first:?}");
    };
    assert!(matches!(first, Err(Error::Cancelled)), "{first:?}");
    let took = returned - cancelled_at;
    crate::util::note(&format!("{test}: the run returned {took:?} after the cancel"));
    assert!(took < Duration::from_secs(2), "the run took {took:?} to stop after the cancel");
    let files = snapshot(&dest).entries.values().filter(|e| e.kind == Kind::File).count();
    assert!(files < 20 * 101 + 1, "the cancelled run left a partial tree ({files} files)");
    let again = restore().run().unwrap();
    assert!(again.resumed, "the rerun resumed: {again:?}");
    assert_tree(&gnu, &dest, since, "cancelled, then resumed");
}

/// The errors by kind: bad options, an input that cannot be opened, a URL that cannot be
/// fetched, a damaged archive (at its member), a limit, a destination that cannot be made
/// (with its errno), a run cancelled before it starts.
#[test]
fn errors_by_kind() {
    let td = TestDir::new("api::errors_by_kind");
    let good = td.write("good.tar", archive(1, 5, 5));
    let run = |r: Restore| r.run().expect_err("the run fails");
    let dest = td.join("out");

    let e = run(Restore::new(Source::Path(good.clone()), &dest).threads(0));
    // In the builder's words, not a flag's.
    assert!(matches!(&e, Error::Options { message } if message.starts_with("threads")), "{e:?}");
    let e = run(Restore::new(Source::Path(good.clone()), &dest).memory(4096));
    assert!(matches!(&e, Error::Options { message } if message.starts_with("memory")), "{e:?}");
    let e = run(Restore::new(Source::Path(good.clone()), &dest).writer_threads(0));
    assert!(
        matches!(&e, Error::Options { message } if message.starts_with("writer_threads")),
        "{e:?}"
    );

    let missing = td.join("missing.tar");
    let e = run(Restore::new(Source::Path(missing), &dest));
    assert!(matches!(&e, Error::Input { name, .. } if name.ends_with("missing.tar")), "{e:?}");
    assert!(std::error::Error::source(&e).unwrap().to_string().contains("missing.tar"));

    let url = "http://127.0.0.1:1/x.tar".to_string();
    let e = run(Restore::new(Source::Url(url.clone()), &dest));
    assert!(matches!(&e, Error::Network { url: u, .. } if *u == url), "{e:?}");

    // Cut inside the data of its second file.
    let mut t = Tar::new();
    t.file("one", &[1; 3000]).file("two", &[2; 5000]);
    let mut cut = t.finish();
    cut.truncate(512 + 3072 + 512 + 1024);
    let e = run(Restore::new(Source::Path(td.write("cut.tar", cut)), td.join("cut")));
    let Error::Archive { member, offset, .. } = &e else { panic!("{e:?}") };
    assert_eq!(member.as_deref(), Some("two"), "{e:?}");
    assert!(*offset > 512 + 3072, "{e:?}");

    let e = run(Restore::new(Source::Path(good.clone()), td.join("limit")).max_files(3));
    assert!(matches!(&e, Error::Limit { .. }), "{e:?}");
    // The same limit passed by the directories a writer makes for a member whose parents the
    // archive does not hold (no directory member: the admission count never sees them).
    let mut t = Tar::new();
    t.file("a/b/c/d", b"1");
    let implied = td.write("implied.tar", t.finish());
    let e = run(Restore::new(Source::Path(implied), td.join("implied")).max_files(2));
    assert!(matches!(&e, Error::Limit { .. }), "{e:?}");

    let file = td.write("a-file", b"x");
    let e = run(Restore::new(Source::Path(good.clone()), file.join("below")));
    assert!(matches!(&e, Error::Destination { errno: Some(libc::ENOTDIR), .. }), "{e:?}");

    let cancel = Cancel::new();
    cancel.cancel();
    let e = run(Restore::new(Source::Path(good), td.join("cancelled")).cancel(cancel));
    assert!(matches!(&e, Error::Cancelled), "{e:?}");
}

/// A restore that skips members, warns and fails a selection says all of it to its observer
/// and nothing on stdout or stderr (fds 1 and 2 captured in a child process of this test
/// binary, as libtest's capture sees only `print!`).
#[test]
fn the_library_writes_nothing_to_stdout_or_stderr() {
    let td = TestDir::new("api::the_library_writes_nothing");
    crate::util::run_child_test("suite::api::silent_child", "FASTUNTAR_SILENT_DIR", td.path(), &[]);
}

/// The run of `the_library_writes_nothing_to_stdout_or_stderr`, in its child process only.
#[test]
#[ignore = "run by the_library_writes_nothing_to_stdout_or_stderr, in a process of its own"]
fn silent_child() {
    use std::os::fd::AsRawFd;
    let Some(dir) = std::env::var_os("FASTUNTAR_SILENT_DIR").map(PathBuf::from) else {
        return;
    };
    let mut t = Tar::new();
    t.file("../escape", b"x").file("/abs", b"y").file("kept", b"zz");
    let path = dir.join("noisy.tar");
    fs::write(&path, t.finish()).unwrap();
    let captured = dir.join("captured");
    let sink = fs::File::create(&captured).unwrap();
    // Safety: dup and dup2 on descriptors this process owns; put back below.
    let saved = unsafe { [libc::dup(1), libc::dup(2)] };
    // Safety: as above.
    unsafe {
        libc::dup2(sink.as_raw_fd(), 1);
        libc::dup2(sink.as_raw_fd(), 2);
    }
    let kept = Arc::new(Kept::default());
    let r = Restore::new(Source::Path(path), dir.join("out"))
        .select("kept")
        .select("missing")
        .select("/abs")
        .observer(kept.clone())
        .run();
    // Safety: as above.
    unsafe {
        libc::dup2(saved[0], 1);
        libc::dup2(saved[1], 2);
    }
    let summary = r.unwrap();
    let written = fs::read_to_string(&captured).unwrap();
    assert_eq!(written, "", "the run wrote to stdout or stderr");
    assert_eq!(fs::read(dir.join("out/kept")).unwrap(), b"zz");
    let warnings = kept.warnings.lock().unwrap().join("\n");
    assert!(warnings.contains("missing: Not found in archive"), "{warnings}");
    assert!(warnings.contains("Removing leading"), "{warnings}");
    assert_eq!(summary.failed, 1, "{summary:?}");
}

/// What `read` gives, read as fast as a thread can for as long as `run` runs: `run`'s result,
/// the values seen and how many reads (a read of None counts and adds nothing).
fn watched<T: Ord + Send, R>(
    read: impl Fn() -> Option<T> + Sync,
    run: impl FnOnce() -> R,
) -> (R, std::collections::BTreeSet<T>, u64) {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let poll = s.spawn(|| {
            let (mut seen, mut reads) = (std::collections::BTreeSet::new(), 0u64);
            while !done.load(Ordering::Relaxed) {
                seen.extend(read());
                reads += 1;
            }
            (seen, reads)
        });
        let r = run();
        done.store(true, Ordering::Relaxed);
        let (seen, reads) = poll.join().unwrap();
        (r, seen, reads)
    })
}

/// The process umask is never changed while a restore runs: a thread reads it (from
/// /proc/self/status, which does not change it) as fast as it can all along. Until issue 43
/// the writers set it to 0 for the whole run.
#[test]
fn the_umask_is_unchanged_during_a_run() {
    let td = TestDir::new("api::the_umask_is_unchanged");
    let path = td.write("u.tar", archive(10, 100, 6));
    let before = crate::util::umask();
    let (r, seen, reads) = watched(
        || Some(crate::util::umask()),
        || Restore::new(Source::Path(path), td.join("out")).run(),
    );
    r.unwrap();
    assert!(reads > 10, "the umask was read {reads} times during the run");
    assert_eq!(seen, [before].into(), "umasks seen during the run ({reads} reads)");
}

/// A thread of this process's scheduling policy (`util::policy_in`).
fn policy_of(tid: i32) -> Option<i32> {
    crate::util::policy_in(Path::new(&format!("/proc/self/task/{tid}/stat")))
}

/// The writer on the calling thread stands aside for the decoder while it works
/// (SCHED_BATCH, src/aside.rs), and the thread has its own policy back when the run returns:
/// with one writer (on the calling thread) and with several (the first on it).
#[test]
fn the_calling_thread_gets_its_policy_back() {
    let td = TestDir::new("api::the_calling_thread_gets_its_policy_back");
    let path = td.write("p.tar", archive(20, 60, 9));
    for writers in [1, 2] {
        let (path, out) = (path.clone(), td.join(format!("out{writers}")));
        let on_a_thread = std::thread::spawn(move || {
            // Safety: no arguments; the calling thread's id.
            let me = unsafe { libc::gettid() };
            let before = policy_of(me);
            if before != Some(libc::SCHED_OTHER) {
                // A harness run under another policy: the writer leaves it alone.
                return Err(before);
            }
            let restore = Restore::new(Source::Path(path), out).writer_threads(writers);
            let (r, during, reads) = watched(|| policy_of(me), || restore.run());
            r.unwrap();
            Ok((during, policy_of(me), reads))
        });
        let (during, after, reads) = match on_a_thread.join().unwrap() {
            Ok(seen) => seen,
            Err(policy) => {
                crate::util::note(&format!(
                    "the_calling_thread_gets_its_policy_back: SKIP, the test thread's policy \
                     is {policy:?}, not SCHED_OTHER"
                ));
                return;
            }
        };
        assert!(reads > 10, "{writers} writers: the policy was read {reads} times");
        assert!(during.contains(&libc::SCHED_BATCH), "{writers} writers: seen {during:?}");
        assert_eq!(after, Some(libc::SCHED_OTHER), "{writers} writers");
    }
}

/// Members the snapshot policy or the path rules skip are told with their reason.
#[test]
fn skipped_members_are_told_why() {
    let td = TestDir::new("api::skipped_members_are_told_why");
    let mut t = Tar::new();
    t.file("../up", b"x").entry(&Header::hardlink("h", "../../etc/passwd"), b"");
    t.file("fine", b"ok");
    let path = td.write("s.tar", t.finish());
    let kept = Arc::new(Kept::default());
    let summary =
        Restore::new(Source::Path(path), td.join("out")).observer(kept.clone()).run().unwrap();
    let skipped = kept.skipped.lock().unwrap().clone();
    assert_eq!(
        skipped,
        [("../up".to_string(), SkipReason::Unsafe), ("h".to_string(), SkipReason::Unsafe)]
    );
    assert_eq!(summary.skipped, 2);
    assert_eq!(fs::read(td.join("out/fine")).unwrap(), b"ok");
}

/// A snapshot-shaped archive: `version`, `snapshots/`, `accounts/` (its own mode and time)
/// with `n` files `accounts/<slot>.<id>` of 1 B to 90 KiB, a hard link `accounts/0.24` to
/// `accounts/3.21` (ids 24 and 21 in one root by `by_id`), then `status` after them.
fn accounts(n: u64) -> Vec<u8> {
    let mut t = Tar::new();
    t.entry(&Header::file("version").mtime(1_600_000_000), b"1.2.3\n");
    t.header(&Header::dir("snapshots/").mtime(1_600_000_001));
    t.entry(&Header::file("snapshots/100/100").mtime(1_600_000_002), &[7; 5000]);
    t.header(&Header::dir("accounts/").mode(0o750).mtime(1_600_000_003));
    for i in 0..n {
        let size = 1 + ((i * 7919) % 90_000) as usize;
        let h = Header::file(format!("accounts/{i}.{}", i * 7)).mtime(1_600_001_000 + i);
        t.entry(&h, &crate::util::tree::contents(size, i));
    }
    t.hardlink("accounts/0.24", "accounts/3.21");
    t.entry(&Header::file("status").mtime(1_600_000_006), b"done\n");
    t.finish()
}

/// The caller's rule of `a_routing_callback_places_every_member_where_it_says`: each account
/// file to root 1 + its id modulo `roots` without the `accounts/` prefix, `accounts/` itself
/// made in every root (its mode and time in each), everything else into the destination.
fn by_id(roots: usize) -> impl Fn(&Path, MemberKind) -> Route + Send + Sync + Clone + 'static {
    move |path: &Path, kind: MemberKind| {
        let Ok(file) = path.strip_prefix("accounts") else { return Route::to(0, path) };
        if kind == MemberKind::Dir && file.as_os_str().is_empty() {
            return Route::Each { roots: (1..=roots).collect(), path: file.into() };
        }
        let id: usize = file.to_str().unwrap().rsplit('.').next().unwrap().parse().unwrap();
        Route::to(1 + id % roots, file)
    }
}

/// The destination's tree with each root's (`roots[i]`, put back under `prefix`): a directory
/// several roots hold must be the same in each (mode, time), a non-directory is in one only.
fn merged(dest: &Path, roots: &[PathBuf], prefix: &str) -> Snapshot {
    let mut all = snapshot(dest);
    let mut dirs = BTreeMap::new();
    for root in roots {
        let s = snapshot(root).map_paths(|p| {
            Some(match p {
                b"." => prefix.as_bytes().to_vec(),
                p => [prefix.as_bytes(), b"/", p].concat(),
            })
        });
        for (p, e) in s.entries {
            let shown = String::from_utf8_lossy(&p).into_owned();
            if e.kind == Kind::Dir {
                if let Some((mode, mtime)) = dirs.insert(p.clone(), (e.mode, e.mtime)) {
                    assert_eq!((mode, mtime), (e.mode, e.mtime), "{shown} differs between roots");
                }
            } else {
                assert!(!all.entries.contains_key(&p), "{shown} is in two roots");
            }
            all.entries.insert(p, e);
        }
    }
    all
}

/// A callback spreading `accounts/` over three roots by the file's id: every file lands in the
/// root and at the path the callback said, told once to `landed` with that root; the hard link
/// is a link to its target in their root; the roots and the destination together hold GNU
/// tar's tree with `accounts/` remapped; `max_files` counts the members of all roots.
#[test]
fn a_routing_callback_places_every_member_where_it_says() {
    let test = "api::a_routing_callback_places_every_member_where_it_says";
    if !have_tool(test, "tar") {
        return;
    }
    let td = TestDir::new(test);
    let tar = td.write("a.tar", accounts(150));
    let since = recently();
    let gnu = gnu_tree(&td, &tar, &[]);
    let dest = td.join("ledger");
    let roots: Vec<PathBuf> = (1..=3).map(|i| td.join(format!("nvme{i}"))).collect();
    let kept = Arc::new(Kept::default());
    let rule = by_id(3);
    let summary = Restore::new(Source::Path(tar), &dest)
        .roots(&roots)
        .route(rule.clone())
        .observer(kept.clone())
        .writer_threads(2)
        .run()
        .unwrap();
    assert_eq!((summary.skipped, summary.files), (0, 153), "{summary:?}");
    let landed = kept.landed.lock().unwrap();
    let mut told = BTreeMap::new();
    for (path, root, size, _) in landed.iter() {
        assert!(told.insert((*root, path.clone()), *size).is_none(), "{path:?} told twice");
    }
    assert_eq!(told.len(), 153);
    let mut per_root = [0; 4];
    for i in 0..150u64 {
        let name = format!("accounts/{i}.{}", i * 7);
        let Route::To { root, path } = rule(Path::new(&name), MemberKind::File) else {
            panic!("{name}")
        };
        let size = told.get(&(root, path.clone())).unwrap_or_else(|| panic!("{name} not told"));
        let base = if root == 0 { &dest } else { &roots[root - 1] };
        assert_eq!(fs::metadata(base.join(&path)).unwrap().len(), *size, "{name}");
        per_root[root] += 1;
    }
    assert_eq!(per_root, [0, 50, 50, 50], "files by root");
    for other in ["version", "snapshots/100/100", "status"] {
        assert!(told.contains_key(&(0, PathBuf::from(other))), "{other} in the destination");
    }
    // 24 % 3 == 21 % 3: the link and its target in root 1.
    let (link, target) = (roots[0].join("0.24"), roots[0].join("3.21"));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(link).unwrap().ino(), fs::metadata(target).unwrap().ino());
    let ours = merged(&dest, &roots, "accounts");
    let found = diff(&gnu, "GNU tar", &ours, "Restore (roots merged)", &Compare::extraction(since));
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The limits count over all roots: the 152 members of `accounts/` (no implied directory,
    // which a writer would count) are past `max_files(100)` though no root gets 60.
    let limited = Restore::new(Source::Path(td.join("a.tar")), td.join("limited"))
        .roots(&[td.join("l1"), td.join("l2"), td.join("l3")])
        .route(by_id(3))
        .select("accounts")
        .max_files(100)
        .run();
    assert!(matches!(&limited, Err(Error::Limit { .. })), "{limited:?}");
}

/// The callback's Skip and Refuse are told to the observer with their reasons and words
/// (Skip as no failure, Refuse counted), as is a hard link it put in another root than its
/// target; nothing of them lands anywhere.
#[test]
fn a_routing_callbacks_skips_and_refusals_are_told() {
    let td = TestDir::new("api::a_routing_callbacks_skips_and_refusals_are_told");
    let mut t = Tar::new();
    t.file("keep", b"k").file("run.log", b"l").file("secret", b"s");
    t.file("accounts/1.1", b"one").hardlink("accounts/2.2", "accounts/1.1");
    let tar = td.write("s.tar", t.finish());
    let (dest, roots) = (td.join("out"), [td.join("r1"), td.join("r2")]);
    let rule = |path: &Path, kind: MemberKind| match path.to_str().unwrap() {
        "run.log" => Route::Skip,
        "secret" => Route::Refuse(format!("{kind:?} not wanted here")),
        _ => by_id(2)(path, kind),
    };
    let kept = Arc::new(Kept::default());
    let summary = Restore::new(Source::Path(tar), &dest)
        .roots(&roots)
        .route(rule)
        .observer(kept.clone())
        .run()
        .unwrap();
    let skipped = kept.skipped.lock().unwrap().clone();
    let said = kept.said.lock().unwrap().clone();
    assert_eq!(
        skipped,
        [
            ("run.log".to_string(), SkipReason::Routed),
            ("secret".to_string(), SkipReason::Refused),
            ("accounts/2.2".to_string(), SkipReason::Refused),
        ],
        "{said:?}"
    );
    assert_eq!(said[1], "File not wanted here");
    assert!(said[2].contains("hard link across roots"), "{said:?}");
    assert_eq!(summary.skipped, 2, "a Skip is no failure: {summary:?}");
    let everywhere: Vec<String> = [&dest, &roots[0], &roots[1]]
        .iter()
        .flat_map(|r| snapshot(r).entries.into_keys())
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .collect();
    assert_eq!(everywhere, [".", "keep", ".", ".", "1.1"], "what landed, root by root");
}

/// Hostile answers cannot leave a root: `..`, absolute paths and an empty name skip the member
/// as an unsafe name does; a symlink planted in a root before the run, or one the archive put
/// there, is not passed through (the member fails, as in the destination); nothing appears
/// outside the roots.
#[test]
fn a_routing_callback_cannot_leave_its_root() {
    let td = TestDir::new("api::a_routing_callback_cannot_leave_its_root");
    let outside = td.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let (dest, roots) = (td.join("out"), [td.join("r1"), td.join("r2")]);
    fs::create_dir_all(&roots[0]).unwrap();
    std::os::unix::fs::symlink(&outside, roots[0].join("planted")).unwrap();
    let mut t = Tar::new();
    for name in ["up", "abs", "deep", "empty", "via-planted", "fine"] {
        t.file(name, name.as_bytes());
    }
    t.symlink("l", "../outside").file("l/x", b"through the archive's symlink");
    let tar = td.write("h.tar", t.finish());
    let escape = td.join("escaped");
    let abs = escape.clone();
    let rule = move |path: &Path, _: MemberKind| match path.to_str().unwrap() {
        "up" => Route::to(1, "../escaped"),
        "abs" => Route::to(2, &abs),
        "deep" => Route::to(1, "a/../../../escaped"),
        "empty" => Route::to(2, ""),
        "via-planted" => Route::to(1, "planted/x"),
        "l" => Route::to(2, "l"),
        "l/x" => Route::to(2, "l/x"),
        other => Route::to(1, other),
    };
    let kept = Arc::new(Kept::default());
    let summary = Restore::new(Source::Path(tar), &dest)
        .roots(&roots)
        .route(rule)
        .observer(kept.clone())
        .run()
        .unwrap();
    let skipped = kept.skipped.lock().unwrap().clone();
    let reasons: BTreeMap<&str, SkipReason> =
        skipped.iter().map(|(m, r)| (m.as_str(), *r)).collect();
    let unsafe_ = SkipReason::Unsafe;
    let failed = SkipReason::NotRestored;
    let want: BTreeMap<&str, SkipReason> = [
        ("up", unsafe_),
        ("abs", unsafe_),
        ("deep", unsafe_),
        ("empty", unsafe_),
        ("via-planted", failed),
        ("l/x", failed),
    ]
    .into();
    assert_eq!(reasons, want, "{:?}", kept.said.lock().unwrap());
    assert_eq!(summary.skipped, 6);
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0, "something landed outside");
    assert!(!escape.exists(), "{} was made", escape.display());
    assert_eq!(fs::read(roots[0].join("fine")).unwrap(), b"fine");
    assert_eq!(fs::read_link(roots[1].join("l")).unwrap(), Path::new("../outside"));
}

/// A root the callback names that `roots` did not declare stops the run at that member with
/// `Error::Options` naming it and the roots there are (what landed before stays); so does
/// `Route::Each` for a file. `roots` without `route`, `route` with `spread`, and a root that
/// holds the destination are refused before anything is written.
#[test]
fn a_routing_callbacks_undeclared_root_stops_the_run() {
    let td = TestDir::new("api::a_routing_callbacks_undeclared_root_stops_the_run");
    let mut t = Tar::new();
    t.file("a", b"a").file("b", b"b").file("c", b"c");
    let tar = td.write("r.tar", t.finish());
    let roots = [td.join("r1"), td.join("r2")];
    let run = |dest: &str, rule: fn(&Path, MemberKind) -> Route| {
        Restore::new(Source::Path(tar.clone()), td.join(dest)).roots(&roots).route(rule).run()
    };
    let e =
        run("out", |p, _| if p == Path::new("b") { Route::to(3, "b") } else { Route::to(2, p) })
            .expect_err("root 3 of 2");
    let Error::Options { message } = &e else { panic!("{e:?}") };
    assert!(message.starts_with("b: the routing callback answered root 3"), "{message}");
    assert!(message.contains("the roots are 0 to 2"), "{message}");
    assert_eq!(fs::read(roots[1].join("a")).unwrap(), b"a", "what landed before stays");
    assert!(!roots[1].join("c").exists(), "the run stopped at b");

    let e = run("each", |p, _| Route::Each { roots: vec![1], path: p.into() }).unwrap_err();
    assert!(matches!(&e, Error::Options { message } if message.contains("Route::Each")), "{e:?}");

    let options = |r: Restore| match r.run() {
        Err(Error::Options { message }) => message,
        other => panic!("{other:?}"),
    };
    let fresh = || Restore::new(Source::Path(tar.clone()), td.join("fresh"));
    assert!(options(fresh().roots(&roots)).contains("roots without route"));
    let both = fresh().spread("accounts", &[td.join("s1")]).route(|p, _| Route::to(0, p));
    assert!(options(both).contains("spread and route cannot be used together"));
    let holding = fresh().roots(&[td.path()]).route(|p, _| Route::to(0, p));
    assert!(options(holding).contains("is or holds the destination"));
    assert!(!td.join("fresh").join("a").exists(), "nothing written");
}

/// A run with a callback cancelled once a resume point is recorded resumes to GNU tar's tree
/// remapped: the files after the point go where the callback sends them again, the
/// directories it sent to the roots before the point get their times; a rerun without the
/// callback does not resume that state (the state records that a callback routed, and where).
/// A root whose files were removed since (the directories kept) is not resumed silently: the
/// rerun is refused in one line naming a file of that root, as for DIR's files, and
/// `Resume::Off` starts over to the same tree.
#[test]
fn cancel_then_resume_with_a_routing_callback() {
    let test = "api::cancel_then_resume_with_a_routing_callback";
    if !have_tool(test, "tar") {
        return;
    }
    let td = TestDir::new(test);
    let path = td.write("c.tar", archive(20, 100, 7));
    let since = recently();
    let gnu = gnu_tree(&td, &path, &[]);
    let dest = td.join("out");
    let roots = [td.join("r1"), td.join("r2")];
    // `top/dN/...` to root 1 + N % 2 as `dN/...`; `top` itself in both roots; `top/big` in
    // the destination, as archived.
    let rule = |path: &Path, kind: MemberKind| {
        let Ok(rest) = path.strip_prefix("top") else { return Route::to(0, path) };
        let first = rest.components().next().map(|c| c.as_os_str().to_str().unwrap());
        match first.and_then(|f| f.strip_prefix('d')).and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => Route::to(1 + n % 2, rest),
            None if kind == MemberKind::Dir => Route::Each { roots: vec![1, 2], path: rest.into() },
            None => Route::to(0, path),
        }
    };
    let restore = |dest: &Path, roots: &[PathBuf]| {
        Restore::new(Source::Path(path.clone()), dest)
            .resume_every(256 << 10)
            .roots(roots)
            .route(rule)
    };
    let cancelled = |dest: &Path, roots: &[PathBuf]| {
        let cancel = Cancel::new();
        let watch = Arc::new(CancelAfterPoint::new(dest, &cancel));
        let first = restore(dest, roots).cancel(cancel).observer(watch.clone()).run();
        let done = watch.at.lock().unwrap().is_some();
        assert!(done, "no resume point before the end: {first:?}");
        assert!(matches!(first, Err(Error::Cancelled)), "{first:?}");
        let landed = watch.landed.load(Ordering::Relaxed);
        assert!(landed < 20 * 101 + 1, "the cancelled run left a partial tree ({landed} files)");
    };
    cancelled(&dest, &roots);
    let without = Restore::new(Source::Path(path.clone()), &dest).resume(Resume::Require).run();
    let refused = format!("{:?}", without.expect_err("resumed without the callback"));
    assert!(refused.contains("the options that decide what is extracted"), "{refused}");
    let again = restore(&dest, &roots).run().unwrap();
    assert!(again.resumed, "the rerun resumed: {again:?}");
    let ours = merged(&dest, &roots, "top");
    let found = diff(&gnu, "GNU tar", &ours, "Restore (roots merged)", &Compare::extraction(since));
    assert!(found.is_empty(), "cancelled, then resumed:\n{}", found.join("\n"));

    // Root 1 (`top/d0/` first) emptied of its files after the cancel.
    let dest = td.join("out2");
    let roots = [td.join("s1"), td.join("s2")];
    cancelled(&dest, &roots);
    assert!(crate::util::tree::remove_files(&roots[0]) > 0, "root 1 held no file yet");
    let refused = format!("{:?}", restore(&dest, &roots).run().expect_err("resumed, a root empty"));
    let root = format!("{}/", roots[0].display());
    assert!(
        refused.contains(&root) && refused.contains("was changed or removed"),
        "the line names the root's file: {refused}"
    );
    let over = restore(&dest, &roots).resume(Resume::Off).run().unwrap();
    assert!(!over.resumed, "{over:?}");
    let ours = merged(&dest, &roots, "top");
    let found = diff(&gnu, "GNU tar", &ours, "Restore (roots merged)", &Compare::extraction(since));
    assert!(found.is_empty(), "a root emptied, then started over:\n{}", found.join("\n"));
}

#[test]
fn what_is_in_the_way_is_told_by_reason() {
    use SkipReason::{Existing, KeptNewer, NotRestored};
    use fastuntar::Overwrite;
    let td = TestDir::new("api::what_is_in_the_way_is_told_by_reason");
    let mut t = Tar::new();
    // The members are of 2020; what is in the way is of now, so newer.
    t.file("f", b"new").file("x/y", b"y").file("fine", b"ok");
    let path = td.write("w.tar", t.finish());
    // (policy, the members told skipped and why, how many count as skipped)
    type Row = (Overwrite, &'static [(&'static str, SkipReason)], u64);
    let rows: [Row; 4] = [
        (Overwrite::Replace, &[("x/y", NotRestored)], 1),
        (Overwrite::SkipOld, &[("f", Existing), ("x/y", NotRestored)], 1),
        (Overwrite::KeepNewer, &[("f", KeptNewer), ("x/y", NotRestored)], 1),
        (Overwrite::KeepOld, &[("f", NotRestored), ("x/y", NotRestored)], 2),
    ];
    for (i, (how, told, counted)) in rows.into_iter().enumerate() {
        let out = td.join(format!("out{i}"));
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("f"), b"old").unwrap();
        fs::write(out.join("x"), b"a file in the way").unwrap();
        let kept = Arc::new(Kept::default());
        let summary = Restore::new(Source::Path(path.clone()), &out)
            .overwrite(how)
            .observer(kept.clone())
            .run()
            .unwrap();
        let mut skipped = kept.skipped.lock().unwrap().clone();
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        let told: Vec<(String, SkipReason)> =
            told.iter().map(|(m, r)| (m.to_string(), *r)).collect();
        assert_eq!(skipped, told, "{how:?}");
        assert_eq!(summary.skipped, counted, "{how:?}");
        let f = if how == Overwrite::Replace { &b"new"[..] } else { &b"old"[..] };
        assert_eq!(fs::read(out.join("f")).unwrap(), f, "{how:?}");
        assert_eq!(fs::read(out.join("fine")).unwrap(), b"ok", "{how:?}");
    }
}
