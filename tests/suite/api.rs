//! The library's API (`fastuntar::Restore`, issue 43): restores in-process compared with GNU
//! tar's tree, two at once, from a reader, cancelled and resumed; every landed file told once
//! with its path and size; the errors by kind; and no process-wide effect (nothing on stdout
//! or stderr, the umask untouched). The runs are in-process, so the engine matrix's rows
//! (command-line flags) do not apply: each case runs once in both tiers.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fastuntar::{
    Cancel, Error, Landed, MemberKind, Observer, Restore, SkipReason, Skipped, Source, Started,
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
    /// Cancels once the run has recorded a resume point (its state file is there); until
    /// then, past its first 200 files, it holds each file 2 ms, so that the run cannot end
    /// before the writeback thread records one, however fast the disk.
    struct CancelAfterPoint {
        state: PathBuf,
        cancel: Cancel,
        landed: AtomicU64,
        at: Mutex<Option<Instant>>,
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
    let cancel = Cancel::new();
    let state = dest.join(".fastuntar-resume");
    let watch = Arc::new(CancelAfterPoint {
        state,
        cancel: cancel.clone(),
        landed: AtomicU64::new(0),
        at: Mutex::new(None),
    });
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
    assert!(matches!(&e, Error::Options { message } if message.contains("threads")), "{e:?}");

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
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "suite::api::silent_child", "--test-threads=1"])
        .env("FASTUNTAR_SILENT_DIR", td.path())
        .output()
        .unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "the child test ran: {said}");
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

/// The process umask is never changed while a restore runs: a thread reads it (from
/// /proc/self/status, which does not change it) as fast as it can all along. Until issue 43
/// the writers set it to 0 for the whole run.
#[test]
fn the_umask_is_unchanged_during_a_run() {
    let td = TestDir::new("api::the_umask_is_unchanged");
    let path = td.write("u.tar", archive(10, 100, 6));
    let before = crate::util::umask();
    let done = AtomicBool::new(false);
    let (seen, reads) = std::thread::scope(|s| {
        let poll = s.spawn(|| {
            let (mut seen, mut reads) = (std::collections::BTreeSet::new(), 0u64);
            while !done.load(Ordering::Relaxed) {
                seen.insert(crate::util::umask());
                reads += 1;
            }
            (seen, reads)
        });
        let r = Restore::new(Source::Path(path), td.join("out")).run();
        done.store(true, Ordering::Relaxed);
        r.unwrap();
        poll.join().unwrap()
    });
    assert!(reads > 10, "the umask was read {reads} times during the run");
    assert_eq!(seen, [before].into(), "umasks seen during the run ({reads} reads)");
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

/// What a member finds at its path, as the observer is told it under each overwrite policy
/// (the writers' typed outcome, `write::outcome::MemberError`, mapped to `SkipReason`): a file
/// kept is `Existing` or `KeptNewer` (not counted as skipped), one `-k` refuses and a member
/// the destination refuses (`x/y` where `x` is a file) are `NotRestored` (counted).
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
