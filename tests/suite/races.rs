//! A local user racing the extraction. Someone who can write into a directory inside DIR may
//! rename and swap entries while root extracts; the tree fastuntar leaves is then not promised,
//! but nothing outside DIR may change (docs/SECURITY.md, "Metadata without races").
//!
//! Each case runs an attacker that loops over `symlink(victim, tmp); rename(tmp, name)` for the
//! names the archive is creating, while fastuntar extracts as root, under every writer
//! configuration: once as a thread of this (root) process, once as a process of an
//! unprivileged user (uid 65534, a perl loop started through setpriv), as the real attacker
//! would be. The victim, a root-owned file outside DIR, must keep its mode, owner, times and
//! contents.

use crate::util;
use crate::util::engine::Matrix;

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use util::rawtar::{self, Header, Tar};
use util::{TestDir, fastuntar_with, for_each_config, have_root, have_tools};

/// The rows this suite runs over (tests/util/engine.rs): every writer row. The races are
/// between the writer and another process changing DIR; the decoder (a plain tar) and the
/// limits do not take part.
const MATRIX: Matrix = Matrix::WRITERS;

/// Who races the extraction.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Racer {
    /// A thread of the test process (root): the fastest loop.
    Thread,
    /// A process of uid 65534, as a local user would race: a perl loop (no fork per swap).
    Nobody,
}

/// The unprivileged attacker: swaps each name for a symlink to the victim until `stop` exists,
/// then prints how many swaps it made.
const NOBODY_RACER: &str = r#"
my ($victim, $dir, $stop, @names) = @ARGV;
my ($n, $tmp) = (0, "$dir/.swap");
until (-e $stop) {
    for my $name (@names) {
        unlink $tmp;
        $n++ if symlink($victim, $tmp) && rename($tmp, "$dir/$name");
    }
}
print "$n
";
"#;

/// Starts the unprivileged attacker on `dir`'s `names`.
fn nobody_attacker(dir: &Path, names: &[&str], victim: &Path, stop: &Path) -> std::process::Child {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "perl", "-e", NOBODY_RACER])
        .arg(victim)
        .arg(dir)
        .arg(stop)
        .args(names)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the unprivileged attacker")
}

/// Swaps `dir/name` for a symlink to `victim` as fast as it can until `stop`; returns how many
/// swaps it made.
fn attacker(dir: PathBuf, names: Vec<String>, victim: PathBuf, stop: Arc<AtomicBool>) -> u64 {
    let swaps = AtomicU64::new(0);
    let target = CString::new(victim.as_os_str().as_bytes()).unwrap();
    let tmp = CString::new(dir.join(".swap").as_os_str().as_bytes()).unwrap();
    let names: Vec<CString> =
        names.iter().map(|n| CString::new(dir.join(n).as_os_str().as_bytes()).unwrap()).collect();
    while !stop.load(Ordering::Relaxed) {
        for n in &names {
            // Safety: valid C strings; failures (the name is being replaced) are the point.
            unsafe {
                libc::unlink(tmp.as_ptr());
                if libc::symlink(target.as_ptr(), tmp.as_ptr()) == 0
                    && libc::rename(tmp.as_ptr(), n.as_ptr()) == 0
                {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    swaps.into_inner()
}

fn state(p: &Path) -> (u32, u32, u32, i64, Vec<u8>) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.mode(), m.uid(), m.gid(), m.mtime(), fs::read(p).unwrap())
}

/// Runs `archive` with `args` while the attacker swaps `names` inside DIR/dir (a directory
/// anyone may write into, as the attacker's would be) for symlinks to the victim.
fn race(test: &str, args: &[&str], names: &[&str], archive: &[u8]) {
    if !have_root(test, "the attack needs root's chmod and chown to mean anything") {
        return;
    }
    race_as(test, Racer::Thread, args, names, archive);
    if have_tools(test, &["setpriv", "perl"]) {
        race_as(test, Racer::Nobody, args, names, archive);
    }
}

fn race_as(test: &str, racer: Racer, args: &[&str], names: &[&str], archive: &[u8]) {
    // The unprivileged attacker must be able to reach DIR/dir. (Until issue 40 this made
    // every directory above the test's searchable by others, /root included.)
    let td = match racer {
        Racer::Nobody => TestDir::for_users(test),
        Racer::Thread => TestDir::new(test),
    };
    for_each_config(test, &MATRIX, |cfg| {
        let case = td.fresh("case");
        fs::set_permissions(&case, fs::Permissions::from_mode(0o755)).unwrap();
        let victim = case.join("victim");
        fs::write(&victim, b"root's secret\n").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
        let before = state(&victim);
        let dest = case.join("dest");
        let dir = dest.join("dir");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let path = case.join("archive.tar");
        fs::write(&path, archive).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let stop_file = case.join("stop");
        let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let (thread, child) = match racer {
            Racer::Thread => {
                let (dir, victim, stop) = (dir.clone(), victim.clone(), stop.clone());
                (Some(thread::spawn(move || attacker(dir, owned, victim, stop))), None)
            }
            Racer::Nobody => (None, Some(nobody_attacker(&dir, names, &victim, &stop_file))),
        };
        // The attacker is running once one of the names is its symlink: a perl child started
        // as nobody could lose the race to a whole (small) extraction, and then the run proved
        // nothing (`swaps > 0` below failed once in a full test.sh run).
        let started = std::time::Instant::now();
        while !names.iter().any(|n| dir.join(n).is_symlink()) {
            assert!(started.elapsed().as_secs() < 30, "the attacker did not start in 30 s");
            thread::sleep(std::time::Duration::from_millis(1));
        }
        let out = fastuntar_with(cfg).arg("-x").arg(&path).arg("-C").arg(&dest).args(args).run();
        stop.store(true, Ordering::Relaxed);
        fs::write(&stop_file, b"").unwrap();
        let swaps = match (thread, child) {
            (Some(t), _) => t.join().unwrap(),
            (_, Some(c)) => {
                let done = c.wait_with_output().expect("the unprivileged attacker");
                String::from_utf8_lossy(&done.stdout).trim().parse().unwrap_or(0)
            }
            _ => unreachable!(),
        };
        // Members whose name was swapped under them are skipped (exit 2); nothing else.
        assert!(matches!(out.code, Some(0 | 2)), "{}", out.describe());
        assert!(swaps > 0, "the attacker never swapped a name");
        assert_eq!(
            state(&victim),
            before,
            "THE FILE OUTSIDE DIR CHANGED [{}, racer {racer:?}] after {swaps} swaps\n{}",
            cfg.name(),
            out.describe()
        );
    });
}

/// FIFO members with set-id bits (and, with `--same-owner`, any FIFO) get owner, mode and mtime
/// after mknod. They are applied through an O_PATH fd of the node checked to be a FIFO: once
/// `fchmodat(dirfd, name, mode, 0)` followed a symlink swapped in after the mknod and turned a
/// root-only file outside DIR into `-rwsrwxrwx` (issue 8, finding 1).
#[test]
fn fifo_metadata_never_follows_a_swapped_symlink() {
    let mut t = Tar::new();
    for _ in 0..1000 {
        t.header(&Header::new("dir/p", rawtar::FIFO).mode(0o4777));
    }
    let archive = t.finish();
    race("fifo_metadata_never_follows_a_swapped_symlink", &[], &["p"], &archive);
    let mut t = Tar::new();
    for _ in 0..1000 {
        let mut h = Header::new("dir/p", rawtar::FIFO).mode(0o666);
        h.uid = rawtar::Num::Octal(65534);
        h.gid = rawtar::Num::Octal(65534);
        t.header(&h);
    }
    let archive = t.finish();
    race("fifo_metadata_never_follows_a_swapped_symlink", &["--same-owner"], &["p"], &archive);
}

/// The same attack against every other member type that gets metadata after creation:
/// regular files (fd), symlinks (AT_SYMLINK_NOFOLLOW), directories (fd of the directory
/// created, checked by inode) and hard links (none).
#[test]
fn no_member_type_follows_a_swapped_symlink() {
    let mut t = Tar::new();
    for i in 0..250 {
        t.entry(&Header::file("dir/f").mode(0o4777), format!("{i}\n").as_bytes());
        t.header(&Header::symlink("dir/l", "target").mode(0o777));
        t.header(&Header::dir("dir/d").mode(0o4777));
        t.header(&Header::hardlink("dir/h", "dir/f"));
    }
    let archive = t.finish();
    race(
        "no_member_type_follows_a_swapped_symlink",
        &["--same-owner"],
        &["f", "l", "d", "h"],
        &archive,
    );
}
