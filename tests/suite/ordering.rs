//! Archive order across writer threads (issue 12, `src/write/multi.rs`): with several writer
//! threads, files are created in parallel, also files of one directory, and what archive order
//! decides must still come out as with one: the last of two members at a path wins, a hard
//! link sees its target complete, a directory replaced by a file or a symlink is replaced
//! after what was under it, a directory's mode and mtime come after its contents.
//!
//! Each case is extracted under the rows of `MATRIX` (both backends at the default writer
//! count, one writer and four: the one runner's table, tests/util/engine.rs) and compared with
//! `--writer-threads 1 --io portable` (tree, exit code, diagnostics) and, where GNU tar behaves
//! the same, with GNU tar's tree. Its own small tar writer and process runner (the archives
//! are pinned byte for byte); the rows are the kit's.

use crate::util;
use crate::util::engine::{Encoding, Matrix, Set, THREADS_ALL};

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_fastuntar");

/// The rows this suite runs over (tests/util/engine.rs): both backends, each at the default
/// writer count (one per CPU), one writer and four (the order archive order decides must come
/// out of any split). Direct IO, the decoder rows (plain tars) and the limits change nothing of
/// the order of events.
const MATRIX: Matrix = Matrix {
    writers: Some(&["portable", "uring"]),
    compressed: Set::All,
    threads: THREADS_ALL,
    limits: false,
    decoders: None,
};

/// A directory name for a row's extraction.
fn dir_name(row: &str) -> String {
    row.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}
const TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// A minimal ustar writer

struct Tar(Vec<u8>);

impl Tar {
    fn new() -> Tar {
        Tar(Vec::new())
    }

    fn header(&mut self, name: &str, flag: u8, mode: u32, size: usize, mtime: u64, link: &str) {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let oct = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
            let s = format!("{:0w$o}\0", v, w = len - 1);
            h[at..at + len].copy_from_slice(s.as_bytes());
        };
        oct(&mut h, 100, 8, u64::from(mode));
        oct(&mut h, 108, 8, 0);
        oct(&mut h, 116, 8, 0);
        oct(&mut h, 124, 12, size as u64);
        oct(&mut h, 136, 12, mtime);
        h[156] = flag;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        let s = format!("{sum:06o}\0 ");
        h[148..156].copy_from_slice(s.as_bytes());
        self.0.extend_from_slice(&h);
    }

    fn file(&mut self, name: &str, data: &[u8]) -> &mut Tar {
        self.file_mode(name, data, 0o644, 1_600_000_000)
    }

    fn file_mode(&mut self, name: &str, data: &[u8], mode: u32, mtime: u64) -> &mut Tar {
        self.header(name, b'0', mode, data.len(), mtime, "");
        self.0.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.0.extend(std::iter::repeat_n(0u8, pad));
        self
    }

    fn dir(&mut self, name: &str, mode: u32, mtime: u64) -> &mut Tar {
        self.header(name, b'5', mode, 0, mtime, "");
        self
    }

    fn symlink(&mut self, name: &str, target: &str) -> &mut Tar {
        self.header(name, b'2', 0o777, 0, 1_600_000_000, target);
        self
    }

    fn hardlink(&mut self, name: &str, target: &str) -> &mut Tar {
        self.header(name, b'1', 0o644, 0, 1_600_000_000, target);
        self
    }

    /// `dirs` directories of `files` small files each (different sizes), to keep every
    /// writer busy around the members under test.
    fn filler(&mut self, tag: &str, dirs: usize, files: usize) -> &mut Tar {
        for d in 0..dirs {
            self.dir(&format!("{tag}{d}/"), 0o755, 1_500_000_000 + d as u64);
            for f in 0..files {
                let data = noise(100 + (d * 131 + f * 977) % 20_000, (d * 1000 + f) as u64);
                self.file(&format!("{tag}{d}/f{f}"), &data);
            }
        }
        self
    }

    fn finish(&mut self) -> Vec<u8> {
        self.0.extend(std::iter::repeat_n(0u8, 1024));
        std::mem::take(&mut self.0)
    }
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Running and comparing

struct Run {
    code: Option<i32>,
    stderr: String,
}

fn run(program: &str, args: &[&str]) -> Run {
    run_as(program, args, None)
}

/// `run`, as `uid` (and the same gid) when given: then the binary under test from where that
/// user can reach it (`util::user_bin`).
fn run_as(program: &str, args: &[&str], uid: Option<u32>) -> Run {
    let mut cmd = match uid {
        Some(_) if program == BIN => Command::new(util::user_bin()),
        _ => Command::new(program),
    };
    if let Some(id) = uid {
        use std::os::unix::process::CommandExt;
        cmd.uid(id).gid(id).current_dir(util::users_base());
    }
    run_cmd(cmd, program, args)
}

fn run_cmd(mut cmd: Command, program: &str, args: &[&str]) -> Run {
    cmd.args(args);
    let (code, stderr) = util::run_bounded(cmd, &format!("{program} {args:?}"), TIMEOUT);
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    Run { code, stderr }
}

/// Every entry beneath `root` (DIR itself excluded): type, permission bits, size, mtime,
/// content hash, symlink target, and which earlier path shares its inode (hard links).
fn listing(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<u64, String> = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    let mut entries: Vec<PathBuf> = Vec::new();
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            }
            entries.push(p);
        }
    }
    entries.sort();
    for p in entries {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let m = fs::symlink_metadata(&p).unwrap();
        let desc = if m.file_type().is_symlink() {
            format!("link -> {}", fs::read_link(&p).unwrap().display())
        } else if m.is_dir() {
            // A directory the archive came back to (or never listed) has the time of
            // extraction, as in GNU tar: only "recent" is compared.
            let t =
                if m.mtime() > 1_700_000_000 { "now".to_string() } else { m.mtime().to_string() };
            format!("dir {:o} mtime {t}", m.permissions().mode() & 0o7777)
        } else {
            let first = inodes.entry(m.ino()).or_insert_with(|| rel.clone()).clone();
            let data = fs::read(&p).unwrap();
            let h = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            format!(
                "file {:o} size {} mtime {} hash {h:x} inode-of {first}",
                m.permissions().mode() & 0o7777,
                m.len(),
                m.mtime()
            )
        };
        out.insert(rel, desc);
    }
    out
}

fn diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            Some(w) if w == v => {}
            Some(w) => d.push(format!("{k}: {v}  vs  {w}")),
            None => d.push(format!("{k}: {v}  vs  (missing)")),
        }
    }
    for (k, w) in b {
        if !a.contains_key(k) {
            d.push(format!("{k}: (missing)  vs  {w}"));
        }
    }
    d
}

fn scratch(test: &str) -> PathBuf {
    scratch_in(test, util::private_base())
}

/// `scratch` where another user can reach it (`util::users_base`).
fn users_scratch(test: &str) -> PathBuf {
    scratch_in(test, util::users_base())
}

fn scratch_in(test: &str, base: &Path) -> PathBuf {
    let d = base.join(format!("ordering-{test}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn have_gnu_tar() -> bool {
    Command::new("tar").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Diagnostics with the member names only (their wording may differ in the errno text).
fn diagnostics(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .filter(|l| l.starts_with("fastuntar: ") && !l.contains(" members, "))
        .filter(|l| !util::is_closing(l))
        .map(|l| l.split(": ").nth(1).unwrap_or("").to_string())
        .collect();
    v.sort();
    v
}

/// Extracts `archive` with every writer-thread count and backend; each must match
/// `--writer-threads 1` (tree, exit code, members named) and, if `gnu`, GNU tar's tree.
fn check(test: &str, archive: &[u8], gnu: bool) {
    let dir = scratch(test);
    let ar = dir.join("a.tar");
    fs::write(&ar, archive).unwrap();
    let ar = ar.to_str().unwrap();
    let extract = |name: &str, extra: &[&str]| {
        let dest = dir.join(name);
        fs::create_dir_all(&dest).unwrap();
        let mut args = vec!["-x", ar, "-C", dest.to_str().unwrap(), "-q"];
        args.extend_from_slice(extra);
        let r = run(BIN, &args);
        (listing(&dest), r)
    };
    let (base, base_run) = extract("w1", &["--writer-threads", "1", "--io", "portable"]);
    if gnu && have_gnu_tar() {
        let dest = dir.join("gnu");
        fs::create_dir_all(&dest).unwrap();
        run("tar", &["-xf", ar, "-C", dest.to_str().unwrap()]);
        let d = diff(&listing(&dest), &base);
        assert!(d.is_empty(), "{test}: GNU tar vs fastuntar -w1:\n{}", d.join("\n"));
    }
    for row in util::engine::runs(test, &MATRIX, &[Encoding::Plain]) {
        let (row, flags) = (row.name(), row.engine.args());
        for round in 0..3 {
            let name = format!("{}-{round}", dir_name(&row));
            let (tree, r) = extract(&name, &flags);
            let d = diff(&base, &tree);
            assert!(
                d.is_empty(),
                "{test}: --writer-threads 1 vs [{row}]:\n{}\nstderr: {}",
                d.join("\n"),
                r.stderr
            );
            assert_eq!(r.code, base_run.code, "{test} {name}: exit code; {}", r.stderr);
            assert_eq!(
                diagnostics(&r.stderr),
                diagnostics(&base_run.stderr),
                "{test} {name}: members named"
            );
            let _ = fs::remove_dir_all(dir.join(&name));
        }
    }
    let _ = fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// Cases

/// The same path twice, far apart, with other directories' files between: the last wins.
#[test]
fn same_path_written_twice() {
    let mut t = Tar::new();
    t.dir("x/", 0o755, 1_500_000_000);
    t.file("x/dup", &noise(50_000, 1));
    t.file("x/dup2", b"first\n");
    t.filler("a", 12, 40);
    t.file("x/dup", &noise(7_000, 2));
    t.filler("b", 6, 40);
    t.file("x/dup2", &noise(300_000, 3));
    t.file("top", b"one\n").filler("c", 3, 10).file("top", b"two\n");
    check("same_path_twice", &t.finish(), true);
}

/// The files of one directory go to every thread (a snapshot's `accounts/`): the same name
/// again a few members later, a hard link right after its target, a symlink over a file just
/// written and a file over that symlink, all in one directory.
#[test]
fn one_directory_on_every_thread() {
    let mut t = Tar::new();
    t.dir("acc/", 0o755, 1_500_000_000);
    for i in 0..700usize {
        t.file(&format!("acc/{i}.0"), &noise(100 + (i * 977) % 30_000, i as u64));
        if i % 7 == 3 {
            t.file(&format!("acc/{}.0", i - 2), &noise(50 + i, 10_000 + i as u64));
        }
        if i % 11 == 5 {
            t.hardlink(&format!("acc/l{i}"), &format!("acc/{i}.0"));
        }
        if i % 13 == 6 {
            // At i = 58 the next member (i % 7 == 3 at 59) writes a file over this symlink.
            t.symlink(&format!("acc/{}.0", i - 1), "elsewhere");
        }
    }
    t.file("acc/5.0", b"last\n");
    check("one_directory", &t.finish(), true);
}

/// A hard link to a file another thread may still be writing (a big one, and small ones in
/// other directories).
#[test]
fn hard_link_to_a_file_in_flight() {
    let mut t = Tar::new();
    t.filler("a", 4, 30);
    t.dir("big/", 0o755, 1_500_000_000);
    t.file("big/data", &noise(6 << 20, 9));
    t.dir("links/", 0o755, 1_500_000_001);
    t.hardlink("links/to-big", "big/data");
    for d in 0..4 {
        t.hardlink(&format!("links/to-a{d}"), &format!("a{d}/f29"));
    }
    t.filler("b", 4, 30);
    t.hardlink("b3/to-b0", "b0/f1");
    check("hard_link_in_flight", &t.finish(), true);
}

/// A directory (empty by then, as GNU tar needs to remove it) replaced by a file, and a file
/// replaced by a directory, with files of other directories in flight.
#[test]
fn directory_replaced_by_a_file() {
    let mut t = Tar::new();
    t.dir("e/", 0o755, 1_500_000_000);
    t.filler("a", 8, 40);
    t.file("e", b"now a file\n");
    t.dir("f/", 0o755, 1_500_000_000);
    t.file("f/x", &noise(20_000, 5));
    t.filler("b", 4, 40);
    t.dir("f/x/", 0o755, 1_500_000_002);
    t.file("f/x/y", b"inside\n");
    check("dir_replaced_by_file", &t.finish(), true);
}

/// A directory member, then a file at its path (the file's open finds the directory, which is
/// removed) and a symlink at the same path right after: the symlink wins, as in GNU tar. With
/// io_uring the file's open completed after the symlink member had been checked against files
/// in flight when 61 or 62 directory members came between (the completion was handled at the
/// start of the next batch), and the removed directory had taken the file's place in the tree
/// with it: the symlink did not wait, and the file replaced it (4 of 6 runs).
#[test]
fn file_over_a_directory_then_a_symlink() {
    for between in 56..=70 {
        let mut t = Tar::new();
        t.dir("x/", 0o755, 1_500_000_000);
        for i in 0..between {
            t.dir(&format!("p{i}/"), 0o755, 1_500_000_000);
        }
        t.file("x", b"first\n");
        t.symlink("x", "target");
        check(&format!("file_over_dir_then_symlink_{between}"), &t.finish(), true);
    }
}

/// A non-empty directory a file cannot replace (both members' fates as with one writer), and
/// files under it still in flight on another thread when the file member comes.
#[test]
fn non_empty_directory_then_a_file() {
    let mut t = Tar::new();
    t.filler("d", 3, 60);
    t.file("d1", b"wants to replace d1/\n");
    t.file("d2/f0", b"replaced content\n");
    check("non_empty_dir_then_file", &t.finish(), false);
}

/// A symlink created where a directory was, then a member beneath it: refused (the symlink is
/// never followed), as with one writer. And a file where a symlink was.
#[test]
fn symlink_where_a_directory_was() {
    let mut t = Tar::new();
    t.dir("s/", 0o755, 1_500_000_000);
    t.dir("t/", 0o755, 1_500_000_000);
    t.filler("a", 6, 40);
    t.symlink("s", "t");
    t.file("s/inner", b"must not land in t/\n");
    t.symlink("a2/f5", "elsewhere");
    t.filler("b", 3, 20);
    t.file("a2/f5", b"a file again\n");
    check("symlink_where_dir_was", &t.finish(), false);
}

/// A symlink, a file beneath it (refused: the symlink is never followed), then a directory
/// member at the symlink's path, which replaces it, and a file there last: as with one writer,
/// the file beneath is refused and the new directory stays empty until the last file replaces
/// it. With several writers the file beneath was still queued for a worker when the directory
/// replaced the symlink, so it landed inside the new directory, and the last member failed
/// ("Directory not empty"). Found by a random differential run (Python tarfile archives).
#[test]
fn directory_where_a_symlink_was_with_files_beneath_in_flight() {
    for filler in [0, 3] {
        let mut t = Tar::new();
        t.filler("a", filler, 20);
        t.symlink("b", "elsewhere");
        t.file("b/x", b"must not land in the directory made later\n");
        t.file("c/y", b"y\n");
        t.dir("b/", 0o555, 1_500_000_000);
        t.file("z", b"z\n");
        t.file("b", b"the last b\n");
        check(&format!("dir_where_symlink_was_{filler}"), &t.finish(), false);
    }
}

/// A directory member, a file member at its path (the empty directory is removed on a
/// worker), then the directory member again: the new directory gets its mode and mtime, as
/// with one writer. Before, the dispatcher's cache still held the removed directory open and
/// the new one kept its temporary 0700 and the time it was made (each writer's cache now
/// forgets what another removed, tree.rs `Removals`). And a hard link to a directory that only
/// files in flight imply fails as with one writer (EPERM), not with ENOENT.
#[test]
fn directory_made_again_after_a_file_replaced_it() {
    for filler in [0, 3] {
        let mut t = Tar::new();
        t.filler("a", filler, 20);
        t.dir("k/d/", 0o755, 1_400_000_000);
        t.file("k/d", b"replaces the empty directory\n");
        t.dir("k/d/", 0o750, 1_500_000_000);
        t.file("k/d/inside", b"in the new directory\n");
        t.file("m/n/f", b"implies m/n\n");
        t.hardlink("h", "m/n");
        check(&format!("dir_made_again_{filler}"), &t.finish(), false);
    }
}

/// As a user (permissions count): directories stamped without search permission (0644) when
/// the archive leaves them, and members after that which need to pass through them (a hard
/// link whose target is inside, a file beneath one an earlier member made): refused with
/// EACCES at every writer count, as GNU tar refuses them. Before, several writers made the
/// link before the directory was stamped (or found the target missing), and one writer made
/// the file through a directory fd it had cached before the stamp.
#[test]
fn directories_without_search_permission_as_a_user() {
    let uid = 65534;
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "directories_without_search_permission_as_a_user: SKIP (needs root to run as uid {uid})"
        );
        return;
    }
    let mut cases = Vec::new();
    let mut t = Tar::new();
    t.dir("k/", 0o644, 1_500_000_000);
    t.file("k/d/x/y", b"y\n");
    t.hardlink("h", "k/d/x/y");
    cases.push(("link_into_stamped", t.finish()));
    let mut t = Tar::new();
    t.file("h/a/c/e", b"e\n");
    t.dir("h/a/", 0o644, 1_500_000_000);
    t.file("z", b"leaves h/a\n");
    t.file("h/a/c/f", b"must be refused\n");
    cases.push(("file_beneath_stamped", t.finish()));
    for (name, archive) in cases {
        let dir = users_scratch(&format!("user-{name}"));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let ar = dir.join("a.tar");
        fs::write(&ar, &archive).unwrap();
        fs::set_permissions(&ar, fs::Permissions::from_mode(0o644)).unwrap();
        let ar = ar.to_str().unwrap();
        let dest_for = |d: &str| {
            let dest = dir.join(d);
            fs::create_dir_all(&dest).unwrap();
            std::os::unix::fs::chown(&dest, Some(uid), Some(uid)).unwrap();
            dest.to_str().unwrap().to_string()
        };
        let lines = |r: &Run| -> Vec<String> {
            let mut v: Vec<String> = r
                .stderr
                .lines()
                .filter(|l| !l.contains(" members, ") && !l.contains("Exiting with failure"))
                .map(|l| l.split_once(": ").map_or("", |x| x.1).replace(" (os error 13)", ""))
                .collect();
            v.sort();
            v
        };
        let base_dest = dest_for("w1");
        let args = ["-x", ar, "-C", &base_dest, "-q", "--writer-threads", "1", "--io", "portable"];
        let base_run = run_as(BIN, &args, Some(uid));
        let base = listing(Path::new(&base_dest));
        assert!(
            lines(&base_run).iter().all(|l| l.ends_with("Permission denied")),
            "{name}: {}",
            base_run.stderr
        );
        if have_gnu_tar() {
            let g = dest_for("gnu");
            let gnu = run_as("tar", &["-xf", ar, "-C", &g], Some(uid));
            let d = diff(&listing(Path::new(&g)), &base);
            assert!(d.is_empty(), "{name}: GNU tar vs fastuntar -w1:\n{}", d.join("\n"));
            let gnu_members: Vec<String> =
                lines(&gnu).iter().map(|l| l.split(':').next().unwrap_or("").to_string()).collect();
            let ours: Vec<String> = lines(&base_run)
                .iter()
                .map(|l| l.split(':').next().unwrap_or("").to_string())
                .collect();
            assert_eq!(
                ours, gnu_members,
                "{name}: members refused\nGNU: {}\nours: {}",
                gnu.stderr, base_run.stderr
            );
        }
        for row in util::engine::runs(
            "directories_without_search_permission_as_a_user",
            &MATRIX,
            &[Encoding::Plain],
        ) {
            let (row, flags) = (row.name(), row.engine.args());
            let d = dest_for(&dir_name(&row));
            let args = [&["-x", ar, "-C", &d, "-q"][..], &flags].concat();
            let r = run_as(BIN, &args, Some(uid));
            let dd = diff(&base, &listing(Path::new(&d)));
            assert!(dd.is_empty(), "{name} [{row}]:\n{}\n{}", dd.join("\n"), r.stderr);
            assert_eq!(r.code, base_run.code, "{name} [{row}]: {}", r.stderr);
            assert_eq!(lines(&r), lines(&base_run), "{name} [{row}]: messages");
        }
        let _ = fs::remove_dir_all(&dir);
    }
}

/// Directory metadata after contents written by other threads: read-only directories, their
/// mtimes, and a directory the archive comes back to (GNU tar's order of events).
#[test]
fn directory_metadata_after_its_contents() {
    let mut t = Tar::new();
    for d in 0..10 {
        t.dir(&format!("ro{d}/"), 0o555, 1_400_000_000 + d);
        t.dir(&format!("ro{d}/sub/"), 0o500, 1_400_000_100 + d);
        for f in 0..30 {
            t.file(&format!("ro{d}/sub/f{f}"), &noise(3000 + f * 10, d * 100 + f as u64));
        }
        t.file(&format!("ro{d}/g"), b"g\n");
    }
    t.filler("z", 3, 20);
    t.file("ro3/late", b"comes back\n");
    check("dir_metadata", &t.finish(), true);
}

/// Disk full with many small files in flight on every thread: exit 2, a line naming a member,
/// only `fastuntar:` lines, no hang, and no file longer than its member.
#[test]
fn disk_full_with_many_files_in_flight() {
    if unsafe { libc_geteuid() } != 0 {
        util::note("SKIP disk_full_with_many_files_in_flight: needs root to mount a tmpfs");
        return;
    }
    let dir = scratch("enospc");
    let mnt = dir.join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        util::note("SKIP disk_full_with_many_files_in_flight: cannot mount tmpfs");
        return;
    }
    let mut t = Tar::new();
    let mut sizes = BTreeMap::new();
    for d in 0..20 {
        for f in 0..100 {
            let name = format!("d{d}/f{f}");
            let data = noise(9000 + f * 7, (d * 100 + f) as u64);
            sizes.insert(name.clone(), data.len() as u64);
            t.file(&name, &data);
        }
    }
    let ar = dir.join("a.tar");
    fs::write(&ar, t.finish()).unwrap();
    let mut failures = Vec::new();
    for row in
        util::engine::runs("disk_full_with_many_files_in_flight", &MATRIX, &[Encoding::Plain])
    {
        let (row, flags) = (row.name(), row.engine.args());
        let dest = mnt.join("dest");
        let _ = fs::remove_dir_all(&dest);
        fs::create_dir_all(&dest).unwrap();
        let args = ["-x", ar.to_str().unwrap(), "-C", dest.to_str().unwrap()];
        let r = run(BIN, &[&args[..], &flags].concat());
        let named = r
            .stderr
            .lines()
            .any(|l| l.starts_with("fastuntar: d") && l.contains("No space left on device"));
        if r.code != Some(2) || !named {
            failures.push(format!("[{row}]: exit {:?}, stderr {}", r.code, r.stderr));
        }
        if r.stderr.lines().any(|l| !l.starts_with("fastuntar: ")) {
            failures.push(format!("[{row}]: a line that is not fastuntar's: {}", r.stderr));
        }
        for (name, desc) in listing(&dest) {
            if let Some(&size) = sizes.get(&name) {
                let got: u64 = desc.split(' ').nth(3).unwrap().parse().unwrap();
                if got > size {
                    failures.push(format!("[{row}]: {name} is {got} bytes, more than {size}"));
                }
            }
        }
        let _ = fs::remove_dir_all(&dest);
    }
    // A writer's descriptor closing late can keep the tmpfs busy for a moment: detach it then,
    // so that neither the mount nor the directory under it outlives the test.
    if !Command::new("umount").arg(&mnt).status().is_ok_and(|s| s.success()) {
        let _ = Command::new("umount").arg("-l").arg(&mnt).status();
    }
    let _ = fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// A directory two writers need at once (the parent of directories on different threads) is
/// created by one of them and counted once against `--max-files`: with the limit at exactly
/// the files and directories the archive makes, every writer count extracts it; one fewer
/// stops it.
#[test]
fn implied_directories_counted_once() {
    let mut t = Tar::new();
    let (tops, subs) = (150, 6);
    for k in 0..tops {
        for i in 0..subs {
            t.file(&format!("t{k}/d{i}/f"), b"x");
        }
    }
    let dir = scratch("implied_once");
    let ar = dir.join("a.tar");
    fs::write(&ar, t.finish()).unwrap();
    let made = tops + 2 * tops * subs;
    let mut failures = Vec::new();
    // Two writers needing one directory at once: both backends at four writers and the
    // default count (one writer has no one to race).
    let rows = MATRIX.threads(&["writers 4", "writers default"]);
    for row in util::engine::runs("implied_directories_counted_once", &rows, &[Encoding::Plain]) {
        let (row, flags) = (row.name(), row.engine.args());
        // The race is between one writer's open and its mkdir: three tries at the limit.
        for (limit, ok, rounds) in [(made, true, 3), (made - 1, false, 1)] {
            for round in 0..rounds {
                let dest = dir.join(format!("{}-{limit}-{round}", dir_name(&row)));
                fs::create_dir_all(&dest).unwrap();
                let limit = limit.to_string();
                let args = [
                    "-x",
                    ar.to_str().unwrap(),
                    "-C",
                    dest.to_str().unwrap(),
                    "--max-files",
                    &limit,
                ];
                let r = run(BIN, &[&args[..], &flags].concat());
                let stopped = r.code == Some(2) && r.stderr.contains("--max-files");
                if (ok && r.code != Some(0)) || (!ok && !stopped) {
                    failures.push(format!(
                        "[{row}] --max-files {limit}: exit {:?}, {}",
                        r.code, r.stderr
                    ));
                }
                let _ = fs::remove_dir_all(&dest);
            }
        }
    }
    let _ = fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A hard link to itself: `tar -cf A f f` stores the second `f` so, and `tar -cf A s ./s/g`
/// stores `./s/g` as a link to `s/g`. GNU tar counts such a link done when its file is there
/// (also while another thread may still be writing it); with nothing there it fails the
/// member (both exit 2).
#[test]
fn hard_link_to_itself() {
    let mut t = Tar::new();
    t.dir("s/", 0o755, 1_500_000_000);
    t.file("s/f", &noise(3 << 20, 4));
    t.hardlink("s/f", "s/f");
    t.filler("a", 3, 20);
    t.file("s/g", b"g\n");
    t.hardlink("./s/g", "s/g");
    let archive = t.finish();
    check("hard_link_to_itself", &archive, true);
    // check() holds every configuration to one writer's exit code; here that code is 0.
    let dir = scratch("hard_link_to_itself_done");
    let ar = dir.join("a.tar");
    fs::write(&ar, &archive).unwrap();
    for row in util::engine::runs("hard_link_to_itself_done", &MATRIX, &[Encoding::Plain]) {
        let dest = dir.join(dir_name(&row.name()));
        fs::create_dir_all(&dest).unwrap();
        let args = ["-x", ar.to_str().unwrap(), "-C", dest.to_str().unwrap(), "-q"];
        let r = run(BIN, &[&args[..], &row.engine.args()].concat());
        assert_eq!(r.code, Some(0), "[{}]: {}", row.name(), r.stderr);
    }
    let _ = fs::remove_dir_all(&dir);
    let mut t = Tar::new();
    t.file("there", b"x\n");
    t.hardlink("nothing", "nothing");
    let dir = scratch("hard_link_to_itself_missing");
    let ar = dir.join("a.tar");
    fs::write(&ar, t.finish()).unwrap();
    let dest = dir.join("out");
    fs::create_dir_all(&dest).unwrap();
    let r = run(BIN, &["-x", ar.to_str().unwrap(), "-C", dest.to_str().unwrap(), "-q"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(diagnostics(&r.stderr), ["nothing"], "{}", r.stderr);
    assert!(r.stderr.contains("hard link to itself, and nothing is there"), "{}", r.stderr);
    let _ = fs::remove_dir_all(&dir);
}

/// Issue 27, finding 5: `--keep-directory-symlink` gives one file two names. `lib ->
/// usr/lib`, 400 files `usr/lib/fN` with content A, then the same 400 as `lib/fN` with
/// content B: every file must end with B, as with GNU tar and one writer. With 4 writer
/// threads asked for 1 to 177 kept A: the writers order members by name, and these are two
/// names. Now one writer, and a line that says so.
#[test]
fn keep_directory_symlink_with_writer_threads() {
    let mut t = Tar::new();
    t.dir("usr/", 0o755, 1_500_000_000).dir("usr/lib/", 0o755, 1_500_000_000);
    t.symlink("lib", "usr/lib");
    let a = noise(3000, 1);
    for i in 0..400 {
        t.file(&format!("usr/lib/f{i}"), &a);
    }
    for i in 0..400 {
        t.file(&format!("lib/f{i}"), format!("B{i}").as_bytes());
    }
    let dir = scratch("keep_directory_symlink_with_writer_threads");
    let ar = dir.join("a.tar");
    fs::write(&ar, t.finish()).unwrap();
    // Three rounds of each: on the old code a run kept stale files 6 times in 10.
    let runs = ["portable", "uring"].repeat(3);
    for (round, io) in runs.into_iter().enumerate() {
        let dest = dir.join(format!("{io}-{round}"));
        fs::create_dir_all(&dest).unwrap();
        let dest_s = dest.to_str().unwrap();
        let mut args = vec!["-x", ar.to_str().unwrap(), "-C", dest_s, "--keep-directory-symlink"];
        args.extend_from_slice(&["--io", io, "--writer-threads", "4"]);
        let r = run(BIN, &args);
        let ctx = format!("--io {io}, --writer-threads 4");
        assert_eq!(r.code, Some(0), "{ctx}: {}", r.stderr);
        let stale: Vec<usize> = (0..400)
            .filter(|i| {
                fs::read(dest.join(format!("usr/lib/f{i}"))).unwrap() != format!("B{i}").as_bytes()
            })
            .collect();
        assert!(stale.is_empty(), "{ctx}: {} files kept the first content: {stale:?}", stale.len());
        assert!(
            r.stderr
                .lines()
                .any(|l| l.contains("--keep-directory-symlink: one writer thread, not 4")),
            "{ctx}: no note: {}",
            r.stderr
        );
    }
    let _ = fs::remove_dir_all(&dir);
}
