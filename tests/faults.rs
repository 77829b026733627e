//! Fault injection: the destination fills up or is read-only, a member's parent is a file, the
//! input stops mid-archive, io_uring is unavailable, the filesystem refuses O_DIRECT. Each case
//! runs the binary under every writer configuration that matters and checks the exit code
//! (docs/DESIGN.md: 0 ok, 1 members skipped, 2 fatal), that the message names the member and
//! says what happened, that nothing panicked, and that the run ended within 60 s (a hang is
//! killed and fails the test).
//!
//! Cases that need real filesystems mount them (tmpfs, a loop-mounted ext4 image, ramfs, a
//! read-only bind mount), which needs root: without root, or when a mount fails, the case
//! prints `SKIP faults::<name>: <reason>` and passes. Mounts are undone by a drop guard.
//!
//! Self-contained (no `mod util;`) so it does not move with the shared test kit.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fastuntar");
const TIMEOUT: Duration = Duration::from_secs(60);

/// Writer configurations: both backends, buffered and with every file direct.
const CONFIGS: &[(&str, &[&str])] = &[
    ("portable", &["--io", "portable"]),
    ("uring", &["--io", "uring"]),
    ("portable+direct", &["--io", "portable", "--direct-io", "--direct-io-threshold", "0"]),
    ("uring+direct", &["--io", "uring", "--direct-io", "--direct-io-threshold", "0"]),
];

// ---------------------------------------------------------------------------------------------
// Running the binary

#[derive(Debug)]
struct Out {
    /// Killed after TIMEOUT.
    hung: bool,
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
}

impl Out {
    /// Exit code `code`, no panic, no signal.
    fn expect(&self, code: i32, what: &str) -> Result<(), String> {
        if self.hung {
            return Err(format!(
                "{what}: hung, killed after {TIMEOUT:?}; stderr:\n{}",
                self.stderr
            ));
        }
        if self.signal.is_some() {
            return Err(format!(
                "{what}: killed by signal {:?}; stderr:\n{}",
                self.signal, self.stderr
            ));
        }
        if self.stderr.contains("panicked") {
            return Err(format!("{what}: panicked:\n{}", self.stderr));
        }
        if self.code != Some(code) {
            return Err(format!(
                "{what}: exit {:?}, want {code}; stderr:\n{}",
                self.code, self.stderr
            ));
        }
        Ok(())
    }

    /// The stderr line about `member` (`fastuntar: MEMBER: ...`).
    fn line_about(&self, member: &str) -> Option<&str> {
        let prefix = format!("fastuntar: {member}: ");
        self.stderr.lines().find(|l| l.starts_with(&prefix))
    }
}

/// Runs `cmd`, feeding `stdin` (then closing it) if given. Killed after TIMEOUT: a hang.
fn run(mut cmd: Command, stdin: Option<Vec<u8>>) -> Out {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let feeder = stdin.map(|data| {
        let mut pipe = child.stdin.take().unwrap();
        // Errors (EPIPE when fastuntar stops reading early) are expected: ignore them. The
        // pipe is closed when the thread ends, mid-archive.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        })
    });
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let mut hung = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            eprintln!("{cmd:?} hung: killing it after {TIMEOUT:?}");
            hung = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let stderr = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    Out { hung, code: status.code(), signal: status.signal(), stderr }
}

fn fastuntar(archive: &str, dest: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["-x", archive, "-C"]).arg(dest).arg("-q").args(extra);
    c
}

/// Runs `case` for every configuration; fails at the end naming every configuration that
/// failed, with its reason.
fn for_each_config(
    test: &str,
    configs: &[(&str, &[&str])],
    mut case: impl FnMut(&[&str]) -> Result<(), String>,
) {
    let mut failed = Vec::new();
    for (name, args) in configs {
        if let Err(e) = case(args) {
            failed.push(format!("--- under `{name}`: {e}"));
        }
    }
    assert!(failed.is_empty(), "{test} failed:\n{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Archives

/// Deterministic incompressible bytes (xorshift64*).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(len);
    v
}

/// A GNU-format tar of `(name, data)`; a name ending in `/` is a directory.
fn tar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        if name.ends_with('/') {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
        } else {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
        }
        h.set_mtime(1_700_000_000);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Files `members` are all in `dest` with exactly their data.
fn check_files(dest: &Path, members: &[(&str, &[u8])]) -> Result<(), String> {
    for (name, data) in members {
        let p = dest.join(name);
        if name.ends_with('/') {
            if !p.is_dir() {
                return Err(format!("{name}: not a directory"));
            }
            continue;
        }
        match fs::read(&p) {
            Ok(got) if got == *data => {}
            Ok(got) => {
                return Err(format!(
                    "{name}: {} bytes, want {} (or different data)",
                    got.len(),
                    data.len()
                ));
            }
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
    Ok(())
}

fn scratch(test: &str) -> tempfile::TempDir {
    let d =
        tempfile::Builder::new().prefix(&format!("fastuntar-faults-{test}-")).tempdir().unwrap();
    // Readable by the unprivileged user of the non-root case.
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn empty_dir(p: &Path) {
    if p.exists() {
        fs::remove_dir_all(p).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Mounts

fn skip(test: &str, reason: &str) {
    eprintln!("SKIP faults::{test}: {reason}");
}

fn is_root() -> bool {
    // Safety: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Unmounts on drop (lazily if busy); a loop device made with `-o loop` is freed with it.
struct Mount(PathBuf);

impl Mount {
    /// `mount ARGS... DIR`; Err(reason) when it fails.
    fn new(args: &[&str], dir: &Path) -> Result<Mount, String> {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(args)
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount(dir.to_path_buf()))
    }

    fn remount(&self, opts: &str) -> Result<(), String> {
        let out = Command::new("mount")
            .args(["-o", opts])
            .arg(&self.0)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "remount {opts} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// A root-only case's mount, or a SKIP line and None.
fn mount_or_skip(test: &str, args: &[&str], dir: &Path) -> Option<Mount> {
    if !is_root() {
        skip(test, "needs root to mount");
        return None;
    }
    match Mount::new(args, dir) {
        Ok(m) => Some(m),
        Err(e) => {
            skip(test, &e);
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Disk full

/// Extracts `archive` into a full filesystem at `mnt` under every configuration: exit 2, the
/// message names `big` and says the write failed with ENOSPC and the file is incomplete; the
/// member before it is complete.
fn disk_full(test: &str, mnt: &Path, archive: &Path, first: &(&str, &[u8])) {
    for_each_config(test, CONFIGS, |args| {
        let dest = mnt.join("dest");
        empty_dir(&dest);
        let out = run(fastuntar(archive.to_str().unwrap(), &dest, args), None);
        let res = (|| {
            out.expect(2, "disk full")?;
            let line = out.line_about("big").ok_or("no `fastuntar: big: ...` line")?;
            if !line.contains("No space left on device") || !line.contains("incomplete") {
                return Err(format!("want ENOSPC and \"incomplete\" in: {line:?}"));
            }
            if out.stderr.lines().any(|l| !l.starts_with("fastuntar: ")) {
                return Err("a stderr line that is not a fastuntar: message".into());
            }
            check_files(&dest, std::slice::from_ref(first))
        })();
        empty_dir(&dest);
        res.map_err(|e| format!("{e}\nstderr:\n{}", out.stderr))
    });
}

/// tmpfs of 4 MiB, an 8 MiB member.
#[test]
fn disk_full_tmpfs() {
    let td = scratch("tmpfs");
    let mnt = td.path().join("mnt");
    let Some(_m) =
        mount_or_skip("disk_full_tmpfs", &["-t", "tmpfs", "-o", "size=4m", "tmpfs"], &mnt)
    else {
        return;
    };
    let first = noise(64 << 10, 1);
    let big = noise(8 << 20, 2);
    let ar = tar_of(&[("first", &first), ("big", &big), ("after", b"after\n")]);
    let archive = td.path().join("a.tar");
    fs::write(&archive, ar).unwrap();
    disk_full("disk_full_tmpfs", &mnt, &archive, &("first", &first));
}

/// A loop-mounted 32 MiB ext4 image (O_DIRECT for real), a 48 MiB member.
#[test]
fn disk_full_ext4_loop() {
    let test = "disk_full_ext4_loop";
    if !is_root() {
        return skip(test, "needs root to mount");
    }
    let td = scratch("ext4");
    let img = td.path().join("fs.img");
    fs::File::create(&img).unwrap().set_len(32 << 20).unwrap();
    match Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return skip(
                test,
                &format!("mkfs.ext4 failed: {}", String::from_utf8_lossy(&o.stderr)),
            );
        }
        Err(e) => return skip(test, &format!("mkfs.ext4: {e}")),
    }
    let mnt = td.path().join("mnt");
    let Some(_m) = mount_or_skip(test, &["-o", "loop", img.to_str().unwrap()], &mnt) else {
        return;
    };
    let first = noise(1 << 20, 3);
    let big = noise(48 << 20, 4);
    let ar = tar_of(&[("first", &first), ("big", &big), ("after", b"after\n")]);
    let archive = td.path().join("a.tar");
    fs::write(&archive, ar).unwrap();
    disk_full(test, &mnt, &archive, &("first", &first));
}

/// The io_uring writer hangs after a failed write (found by `disk_full_tmpfs`, about 6 runs in
/// 10): `Uring::reap` (src/write/uring.rs) takes every completion off the ring, then returns
/// at the first failed one without counting the rest out of `in_flight`, so `Drop for Uring`
/// waits in `io_uring_enter` for completions that were already taken: forever. Run five times
/// (each bounded by TIMEOUT), as one run passes by chance.
#[test]
fn uring_enospc_does_not_hang() {
    let test = "uring_enospc_does_not_hang";
    let td = scratch("uringhang");
    let mnt = td.path().join("mnt");
    let Some(_m) = mount_or_skip(test, &["-t", "tmpfs", "-o", "size=4m", "tmpfs"], &mnt) else {
        return;
    };
    let first = noise(64 << 10, 11);
    let big = noise(8 << 20, 12);
    let archive = td.path().join("a.tar");
    fs::write(&archive, tar_of(&[("first", &first), ("big", &big), ("after", b"x")])).unwrap();
    for i in 0..5 {
        let dest = mnt.join("dest");
        empty_dir(&dest);
        let out = run(fastuntar(archive.to_str().unwrap(), &dest, &["--io", "uring"]), None);
        if let Err(e) = out.expect(2, &format!("run {i}")) {
            panic!("{e}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Destination not writable

fn ro_members() -> Vec<(&'static str, Vec<u8>)> {
    vec![("f1", b"one\n".to_vec()), ("d/", Vec::new()), ("d/f2", b"two\n".to_vec())]
}

fn ro_archive(td: &Path) -> PathBuf {
    let m = ro_members();
    let refs: Vec<(&str, &[u8])> = m.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    let archive = td.join("a.tar");
    fs::write(&archive, tar_of(&refs)).unwrap();
    fs::set_permissions(&archive, fs::Permissions::from_mode(0o644)).unwrap();
    archive
}

/// A fatal error naming a member: exit 2, `fastuntar: f1: ...` (or `d/`: the io_uring
/// writer opens `f1` asynchronously, so the synchronous `mkdir` of `d/` may fail first) with
/// `errno_text`.
fn expect_not_writable(out: &Out, errno_text: &str) -> Result<(), String> {
    out.expect(2, "not writable")?;
    let line = out
        .line_about("f1")
        .or_else(|| out.line_about("d/"))
        .ok_or_else(|| format!("no `fastuntar: f1: ...` line:\n{}", out.stderr))?;
    if !line.contains(errno_text) {
        return Err(format!("want {errno_text:?} in {line:?}"));
    }
    Ok(())
}

/// A tmpfs remounted read-only (EROFS).
#[test]
fn dest_read_only_tmpfs() {
    let test = "dest_read_only_tmpfs";
    let td = scratch("rotmpfs");
    let mnt = td.path().join("mnt");
    let Some(m) = mount_or_skip(test, &["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &mnt) else {
        return;
    };
    fs::create_dir(mnt.join("dest")).unwrap();
    if let Err(e) = m.remount("remount,ro") {
        return skip(test, &e);
    }
    let archive = ro_archive(td.path());
    for_each_config(test, CONFIGS, |args| {
        let out = run(fastuntar(archive.to_str().unwrap(), &mnt.join("dest"), args), None);
        expect_not_writable(&out, "Read-only file system")
    });
}

/// A read-only bind mount of a directory on a writable filesystem (EROFS).
#[test]
fn dest_read_only_bind() {
    let test = "dest_read_only_bind";
    let td = scratch("robind");
    let src = td.path().join("src");
    fs::create_dir(&src).unwrap();
    let mnt = td.path().join("mnt");
    let Some(m) = mount_or_skip(test, &["--bind", src.to_str().unwrap()], &mnt) else {
        return;
    };
    if let Err(e) = m.remount("remount,bind,ro") {
        return skip(test, &e);
    }
    let archive = ro_archive(td.path());
    for_each_config(test, CONFIGS, |args| {
        let out = run(fastuntar(archive.to_str().unwrap(), &mnt, args), None);
        expect_not_writable(&out, "Read-only file system")?;
        match fs::read_dir(&src).map(|d| d.count()) {
            Ok(0) => Ok(()),
            other => Err(format!("something was written: {other:?}")),
        }
    });
}

/// A 0555 directory and an unprivileged user (EACCES). As root the mode would not stop
/// anything, so the binary runs as nobody (setpriv) when the test runs as root.
#[test]
fn dest_not_writable_unprivileged() {
    let test = "dest_not_writable_unprivileged";
    let td = scratch("eacces");
    let dest = td.path().join("dest");
    fs::create_dir(&dest).unwrap();
    fs::set_permissions(&dest, fs::Permissions::from_mode(0o555)).unwrap();
    let archive = ro_archive(td.path());
    let root = is_root();
    if root && Command::new("setpriv").arg("--version").output().is_err() {
        return skip(test, "running as root and setpriv is missing");
    }
    for_each_config(test, CONFIGS, |args| {
        let cmd = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN]);
            c.args(["-x", archive.to_str().unwrap(), "-C"]).arg(&dest).arg("-q").args(args);
            c
        } else {
            fastuntar(archive.to_str().unwrap(), &dest, args)
        };
        let out = run(cmd, None);
        expect_not_writable(&out, "Permission denied")
    });
}

// ---------------------------------------------------------------------------------------------
// A member whose parent is a regular file

/// `DIR/a` is a file and the archive has `a/b`, `a/d/` and `c`: fastuntar skips `a/b` and
/// `a/d/` with a warning each (exit 1), leaves `a` alone and extracts `c`. GNU tar fails the
/// same members ("Cannot open: Not a directory", exit 2); the exit codes are compared loosely
/// (both non-zero) since fastuntar's 1 means "members skipped".
#[test]
fn parent_is_a_file() {
    let td = scratch("parentfile");
    let archive = td.path().join("a.tar");
    fs::write(&archive, tar_of(&[("a/b", b"data\n"), ("a/d/", b""), ("c", b"c\n")])).unwrap();
    let setup = |dest: &Path| {
        empty_dir(dest);
        fs::create_dir(dest).unwrap();
        fs::write(dest.join("a"), b"original\n").unwrap();
    };
    let gnu = {
        let dest = td.path().join("gnu");
        setup(&dest);
        let out = Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&dest).output();
        out.ok().map(|o| {
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
                fs::read(dest.join("a")).ok(),
            )
        })
    };
    match &gnu {
        Some((code, stderr, a)) => {
            eprintln!("GNU tar: exit {code:?}, a = {a:?}, stderr:\n{stderr}");
            assert_ne!(*code, Some(0), "GNU tar is expected to fail a/b");
        }
        None => skip("parent_is_a_file (GNU tar comparison)", "tar not found"),
    }
    for_each_config("parent_is_a_file", CONFIGS, |args| {
        let dest = td.path().join("dest");
        setup(&dest);
        let out = run(fastuntar(archive.to_str().unwrap(), &dest, args), None);
        out.expect(1, "parent is a file")?;
        for m in ["a/b", "a/d/"] {
            let line =
                out.line_about(m).ok_or_else(|| format!("no warning for {m}:\n{}", out.stderr))?;
            if !line.contains("Not a directory") {
                return Err(format!("want ENOTDIR in {line:?}"));
            }
        }
        let meta = fs::symlink_metadata(dest.join("a")).map_err(|e| e.to_string())?;
        if !meta.is_file() || fs::read(dest.join("a")).unwrap() != b"original\n" {
            return Err("`a` changed".into());
        }
        check_files(&dest, &[("c", b"c\n")])
    });
}

// ---------------------------------------------------------------------------------------------
// The input stops mid-archive

/// Writes part of a valid archive to fastuntar's stdin and closes the pipe: exit 2, the
/// message names `want_name` and says the archive ended early / the file is incomplete;
/// `small` (before the cut) is complete.
#[test]
fn input_pipe_closed_early() {
    let small = noise(1000, 5);
    let big = noise(3 << 20, 6);
    let members: [(&str, &[u8]); 3] = [("small", &small), ("big", &big), ("tail", b"tail\n")];
    let tar = tar_of(&members);
    let zst = zstd::encode_all(&tar[..], 3).unwrap();
    // (label, bytes fed, the name the message must carry)
    let big_header = 512 + 1024;
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("tar cut in big's data", tar[..tar.len() / 2].to_vec(), "big"),
        ("tar.zst cut in big's data", zst[..zst.len() / 2].to_vec(), "big"),
        ("tar cut in big's header", tar[..big_header + 100].to_vec(), "small"),
        ("tar cut after big's header", tar[..big_header + 512].to_vec(), "big"),
    ];
    for_each_config("input_pipe_closed_early", CONFIGS, |args| {
        for (label, bytes, name) in &cases {
            let td = scratch("pipe");
            let dest = td.path().join("dest");
            let out = run(fastuntar("-", &dest, args), Some(bytes.clone()));
            out.expect(2, label)?;
            let msg = out
                .stderr
                .lines()
                .find(|l| l.contains(name))
                .ok_or_else(|| format!("{label}: no message naming {name}:\n{}", out.stderr))?;
            if !(msg.contains("incomplete") || msg.contains("unexpected end")) {
                return Err(format!(
                    "{label}: want \"incomplete\" or \"unexpected end\" in {msg:?}"
                ));
            }
            if out.stderr.lines().count() != 1 {
                return Err(format!("{label}: want one line:\n{}", out.stderr));
            }
            check_files(&dest, &[("small", &small)]).map_err(|e| format!("{label}: {e}"))?;
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// io_uring unavailable

/// `FASTUNTAR_TEST_NO_URING=1` simulates a kernel that refuses io_uring: exactly one warning,
/// exit 0, the tree complete.
#[test]
fn no_uring_falls_back_to_portable() {
    let td = scratch("nouring");
    let big = noise(3 << 20, 7);
    let members: [(&str, &[u8]); 4] = [("d/", b""), ("d/a", b"a\n"), ("big", &big), ("e", b"")];
    let archive = td.path().join("a.tar");
    fs::write(&archive, tar_of(&members)).unwrap();
    let configs: &[(&str, &[&str])] = &[
        ("uring", &["--io", "uring"]),
        ("uring+direct", &["--io", "uring", "--direct-io", "--direct-io-threshold", "0"]),
    ];
    for_each_config("no_uring_falls_back_to_portable", configs, |args| {
        let dest = td.path().join("dest");
        empty_dir(&dest);
        let mut cmd = fastuntar(archive.to_str().unwrap(), &dest, args);
        cmd.env("FASTUNTAR_TEST_NO_URING", "1");
        let out = run(cmd, None);
        out.expect(0, "no io_uring")?;
        let lines: Vec<&str> = out.stderr.lines().collect();
        if lines.len() != 1 || !lines[0].contains("io_uring is not available") {
            return Err(format!("want exactly one io_uring warning:\n{}", out.stderr));
        }
        check_files(&dest, &members)
    });
}

// ---------------------------------------------------------------------------------------------
// O_DIRECT refused

/// ramfs refuses O_DIRECT (checked with `dd oflag=direct` first): with `--direct-io
/// --direct-io-threshold 0` fastuntar warns once and writes buffered; exit 0, contents right.
#[test]
fn direct_io_refused_ramfs() {
    let test = "direct_io_refused_ramfs";
    let td = scratch("ramfs");
    let mnt = td.path().join("mnt");
    let Some(_m) = mount_or_skip(test, &["-t", "ramfs", "ramfs"], &mnt) else {
        return;
    };
    let probe = Command::new("dd")
        .args(["if=/dev/zero", "bs=4096", "count=1", "oflag=direct"])
        .arg(format!("of={}", mnt.join("probe").display()))
        .output();
    match probe {
        Ok(o) if !o.status.success() => {}
        Ok(_) => return skip(test, "ramfs accepted O_DIRECT on this kernel"),
        Err(e) => return skip(test, &format!("dd: {e}")),
    }
    let _ = fs::remove_file(mnt.join("probe"));
    let (f1, f2, f3) = (noise(4096, 8), noise(70_000, 9), noise((1 << 20) + 3, 10));
    let members: [(&str, &[u8]); 6] =
        [("empty", b""), ("one", b"1"), ("page", &f1), ("d/", b""), ("d/mid", &f2), ("big", &f3)];
    let archive = td.path().join("a.tar");
    fs::write(&archive, tar_of(&members)).unwrap();
    let configs: &[(&str, &[&str])] = &[
        ("portable+direct", &["--io", "portable", "--direct-io", "--direct-io-threshold", "0"]),
        ("uring+direct", &["--io", "uring", "--direct-io", "--direct-io-threshold", "0"]),
    ];
    for_each_config(test, configs, |args| {
        let dest = mnt.join("dest");
        empty_dir(&dest);
        let out = run(fastuntar(archive.to_str().unwrap(), &dest, args), None);
        out.expect(0, "O_DIRECT refused")?;
        let lines: Vec<&str> = out.stderr.lines().collect();
        if lines.len() != 1 || !lines[0].contains("O_DIRECT") {
            return Err(format!("want exactly one O_DIRECT warning:\n{}", out.stderr));
        }
        check_files(&dest, &members)
    });
}
