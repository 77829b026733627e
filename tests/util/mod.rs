//! Shared test kit for the integration suites (in the spirit of ripgrep's `tests/util.rs` and
//! fd's `tests/testenv`): a fresh temp directory per test, a command runner with a timeout, the
//! list of writer configurations every case runs under, skip helpers, and the submodules
//! `snapshot` (tree snapshots and diffs), `rawtar` (a byte-level tar writer for hostile and
//! corrupt archives) and `tree` (the generated tree of the differential suite).
//!
//! Every test file does `mod util;` and uses a different part of it.
#![allow(dead_code)]

pub mod engine;
pub mod gnu;
pub mod http;
pub mod moto;
pub mod rawtar;
pub mod snapshot;
pub mod standin;
pub mod tree;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_fastuntar");

/// A run that takes longer than this is a hang, and a failure.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The number at `key` in a `--json` summary line.
pub fn json_number(stdout: &str, key: &str) -> Option<u64> {
    let at = stdout.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits: String = stdout[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// One row of a dimension of the engine table (`engine.rs`, which combines the dimensions):
/// the name failures give it, and the flags it passes.
#[derive(Debug, Clone, Copy)]
pub struct EngineRow {
    pub name: &'static str,
    pub args: &'static [&'static str],
}

/// One way of running the writer: a row of the writer dimension.
pub type WriterConfig = EngineRow;

/// The writer rows (backend × direct IO × threshold). Add a backend or a mode here and every
/// case runs under it.
pub const WRITER_CONFIGS: &[WriterConfig] = &[
    WriterConfig { name: "portable", args: &["--io", "portable"] },
    WriterConfig { name: "uring", args: &["--io", "uring"] },
    WriterConfig { name: "uring+direct", args: &["--io", "uring", "--direct-io"] },
    WriterConfig {
        name: "uring+direct(threshold 0)",
        args: &["--io", "uring", "--direct-io", "--direct-io-threshold", "0"],
    },
    WriterConfig {
        name: "uring+direct(threshold 1)",
        args: &["--io", "uring", "--direct-io", "--direct-io-threshold", "1"],
    },
    // Every file direct, including 0..=511-byte ones.
    WriterConfig {
        name: "portable+direct(threshold 0)",
        args: &["--io", "portable", "--direct-io", "--direct-io-threshold", "0"],
    },
];

/// The rows of `WRITER_CONFIGS` named `names`, in that order: a suite's subset (the suite says
/// why it needs no more).
pub fn writer_rows(names: &[&str]) -> Vec<&'static WriterConfig> {
    let row = |n: &&str| WRITER_CONFIGS.iter().find(|c| c.name == *n);
    names.iter().map(|n| row(n).unwrap_or_else(|| panic!("no writer row {n:?}"))).collect()
}

/// Runs `case` once per engine of `matrix` for a plain tar (the writer rows, and the
/// writer-thread and limits rows the suite states): `engine::for_each_run` with the plain
/// encoding. A failure under one engine does not stop the others; at the end the test fails
/// naming every row that failed.
pub fn for_each_config(test: &str, matrix: &engine::Matrix, mut case: impl FnMut(&engine::Engine)) {
    engine::for_each_run(test, matrix, &[engine::Encoding::Plain], |run| case(&run.engine));
}

// ---------------------------------------------------------------------------------------------
// Skips and notes

/// Prints one line straight to the process's stderr. libtest captures `eprintln!` (shown only
/// for failing tests); SKIP lines and summaries should be seen in every CI log.
pub fn note(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Runs the `#[ignore]`d test `name` (its full path) of this test binary alone in a process of
/// its own, with `env` set to `dir` (the child returns at once without it), and asserts that
/// it ran and passed: for what a test must see of a whole process (its fds 1 and 2, process
/// counters) that libtest's threads would share.
pub fn run_child_test(name: &str, env: &str, dir: &std::path::Path, extra: &[&str]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", name, "--test-threads=1"])
        .args(extra)
        .env(env, dir)
        .output()
        .unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "the child test ran: {said}");
}

/// Whether this is a CI run (`CI=true`, as CI services and .ci/run set it): a missing tool
/// or oracle is then a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// True when `tool` is on PATH. Otherwise: under CI (`in_ci`) the test fails naming the tool
/// (scripts/test.sh installs every tool a test needs); elsewhere it prints
/// `SKIP <test>: <tool> not installed` and returns false.
pub fn have_tool(test: &str, tool: &str) -> bool {
    static CACHE: OnceLock<Mutex<Vec<(String, bool)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let known = cache.lock().unwrap().iter().find(|(t, _)| t == tool).map(|(_, ok)| *ok);
    let ok = known.unwrap_or_else(|| {
        let ok = which(tool).is_some();
        cache.lock().unwrap().push((tool.to_string(), ok));
        ok
    });
    if !ok {
        skip(test, &format!("{tool} not installed"));
    }
    ok
}

/// A test (or a part of one) that cannot run here: under CI a failure naming `why`;
/// elsewhere one printed line, `SKIP <test>: <why>`.
pub fn skip(test: &str, why: &str) {
    assert!(!in_ci(), "{test}: {why} (CI=true: scripts/test.sh installs what the tests need)");
    note(&format!("SKIP {test}: {why}"));
}

/// True when all `tools` are installed (prints a SKIP line for each missing one; under CI the
/// first missing one fails the test).
pub fn have_tools(test: &str, tools: &[&str]) -> bool {
    // Not `all`: every missing tool gets its SKIP line.
    let missing: Vec<&&str> = tools.iter().filter(|t| !have_tool(test, t)).collect();
    missing.is_empty()
}

/// A fresh `TestDir` named after `test` when every one of `tools` is on PATH; otherwise
/// `have_tools`' SKIP lines (under CI a failure) and None.
pub fn test_dir(test: &str, tools: &[&str]) -> Option<TestDir> {
    have_tools(test, tools).then(|| TestDir::new(test))
}

/// `test_dir` for a test that needs root (`why`): run as another user, a SKIP line and None.
pub fn root_test_dir(test: &str, why: &str, tools: &[&str]) -> Option<TestDir> {
    (have_root(test, why) && have_tools(test, tools)).then(|| TestDir::new(test))
}

/// `root_test_dir` for a test that runs programs as another user: its directory is one that
/// user can reach (`TestDir::for_users`).
pub fn users_test_dir(test: &str, why: &str, tools: &[&str]) -> Option<TestDir> {
    (have_root(test, why) && have_tools(test, tools)).then(|| TestDir::for_users(test))
}

/// Runs `body` in a fresh `TestDir` named after `test` when every one of `tools` is on PATH;
/// otherwise only `have_tools`' SKIP lines.
pub fn with_tools(test: &str, tools: &[&str], body: impl FnOnce(&TestDir)) {
    if have_tools(test, tools) {
        body(&TestDir::new(test));
    }
}

/// True when `tool` is on PATH (no message).
pub fn which_quiet(tool: &str) -> bool {
    which(tool).is_some()
}

/// Where `tool` is on PATH; panics when it is not (check with `have_tool` first).
pub fn which_path(tool: &str) -> PathBuf {
    which(tool).unwrap_or_else(|| panic!("{tool} is not on PATH"))
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

/// This process's umask (from /proc, without changing it: tests run on threads).
pub fn umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .unwrap_or(0o022)
}

pub fn is_root() -> bool {
    // Safety: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True when running as root; otherwise prints `SKIP <test>: needs root (<why>)`.
pub fn have_root(test: &str, why: &str) -> bool {
    let ok = is_root();
    if !ok {
        note(&format!("SKIP {test}: needs root ({why})"));
    }
    ok
}

// ---------------------------------------------------------------------------------------------
// Temp directories, and what another user can reach (issue 40)
//
// A test that runs a program as another user (uid 65534, through `Cmd::user` or setpriv)
// must give that user what it runs, reads and writes in a place it can reach, wherever the
// checkout is: cloned under /root (0700), or in a `mktemp -d`, uid 65534 could not reach
// `target/` and three tests failed with "cannot start: Permission denied" (until then
// races.rs made every ancestor of its test directory searchable by others, /root included,
// which hid the others). So:
//
// - every ordinary `TestDir` lives under `<tmp>/private`, a directory of mode 0700, on every
//   machine: a test that lets another user at an ordinary test directory fails in every
//   tier, not only from a checkout under /root;
// - `TestDir::for_users` makes one under the users' base (`users_base`): `<tmp>/` itself when
//   others can reach it, else a directory of this process in the system's temporary
//   directory;
// - another user runs `user_bin()`, a copy of the binary under test in the users' base;
//   `Cmd` swaps it in for the binary when it runs as another user (`Cmd::user`, setpriv).
//
// `<tmp>` is Cargo's per-target temporary directory (the build's filesystem, which matters
// for O_DIRECT: tmpfs would take the suites off the path they test), or
// FASTUNTAR_TEST_TMPDIR: scripts/test.sh's exhaustive tier reruns the tests that staged
// something for another user with it (and FASTUNTAR_TEST_BIN) under a fresh 0700 directory.

/// Where the tests keep their directories instead of Cargo's per-target temporary directory.
pub const TMPDIR_VAR: &str = "FASTUNTAR_TEST_TMPDIR";

/// A file that each test staging something for another user appends its name to
/// (scripts/test.sh's 0700 rerun reads it).
pub const USERS_LOG_VAR: &str = "FASTUNTAR_TEST_USERS_LOG";

/// The tests' temporary directory.
pub fn tmp_base() -> PathBuf {
    std::env::var_os(TMPDIR_VAR).map_or_else(|| env!("CARGO_TARGET_TMPDIR").into(), PathBuf::from)
}

/// Whether a user who is neither `p`'s owner nor in its group can reach `p`: `p` and every
/// directory above it let others search them (o+x).
pub fn reachable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.ancestors().all(|a| fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// `<tmp>/private`, mode 0700: where ordinary test directories live.
pub fn private_base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let base = tmp_base().join("private");
        fs::create_dir_all(&base).unwrap();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o700)).unwrap();
        base
    })
}

/// The users' base in a temporary directory (`tmp`), when `<tmp>` itself is not reachable.
static USERS_TMP: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_users_tmp() {
    if let Some(p) = USERS_TMP.get() {
        let _ = fs::remove_dir_all(p);
    }
}

/// Where another user's test directories and binary go: `<tmp>` when others can reach it
/// (the build's filesystem), else a directory of this process (0755) in the system's
/// temporary directory (`$TMPDIR`, /tmp), removed when the process exits.
pub fn users_base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let tmp = tmp_base();
        fs::create_dir_all(&tmp).unwrap();
        users_base_of(&tmp, &std::env::temp_dir())
    })
}

/// `users_base` for the tests' temporary directory `tmp` and the system's `system`: pure but
/// for the directory it makes.
pub fn users_base_of(tmp: &Path, system: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if reachable(tmp) {
        return tmp.to_path_buf();
    }
    let d = tempfile::Builder::new()
        .prefix("fastuntar-users-")
        .tempdir_in(system)
        .unwrap_or_else(|e| panic!("a directory for another user in {}: {e}", system.display()))
        .keep();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    if USERS_TMP.set(d.clone()).is_ok() {
        // Safety: registers a plain function with no arguments, run once at exit.
        unsafe { libc::atexit(remove_users_tmp) };
    }
    d
}

/// Notes that the running test stages something for another user (`USERS_LOG_VAR`).
fn note_user_test() {
    let Some(log) = std::env::var_os(USERS_LOG_VAR) else { return };
    let Some(name) = thread::current().name().map(str::to_owned) else { return };
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = writeln!(f, "{name}");
    }
}

/// The binary under test as another user runs it: a copy (mode 0755) in a directory of this
/// process under the users' base, whatever the path of the build.
pub fn user_bin() -> PathBuf {
    static BIN_COPY: OnceLock<PathBuf> = OnceLock::new();
    note_user_test();
    BIN_COPY
        .get_or_init(|| {
            use std::os::unix::fs::PermissionsExt;
            let dir = users_base().join(format!("bin-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
            let to = dir.join("fastuntar");
            fs::copy(fastuntar_path(), &to).unwrap();
            fs::set_permissions(&to, fs::Permissions::from_mode(0o755)).unwrap();
            if USERS_TMP.get().is_none() {
                BIN_DIRS.lock().unwrap().push(dir);
                // Safety: as above.
                unsafe { libc::atexit(remove_bin_dirs) };
            }
            to
        })
        .clone()
}

/// The binary copies made in `<tmp>` (not removed with a temporary users' base).
static BIN_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_bin_dirs() {
    if let Ok(dirs) = BIN_DIRS.lock() {
        for d in dirs.iter() {
            let _ = fs::remove_dir_all(d);
        }
    }
}

/// Whether `program` is the binary under test (by the paths the kit knows it by).
fn is_bin(program: &OsStr) -> bool {
    program == OsStr::new(BIN) || program == fastuntar_path().as_os_str()
}

/// A fresh directory for one test, removed on drop. It lives under Cargo's per-target temp dir
/// (on the same file system as the build, which matters for O_DIRECT: tmpfs refuses it).
pub struct TestDir {
    dir: tempfile::TempDir,
    /// Taken just before the directory was made: any directory mtime at or after this was set by
    /// the extraction's own activity, not by the archive (see `snapshot::Compare`).
    pub started: SystemTime,
}

impl TestDir {
    /// A test directory under `<tmp>/private` (0700): no other user reaches it.
    pub fn new(test: &str) -> TestDir {
        let base = private_base();
        TestDir::in_dir(test, base)
            .unwrap_or_else(|e| panic!("cannot create a temp dir in {}: {e}", base.display()))
    }

    /// A test directory (mode 0755) another user can reach, for a test that runs programs as
    /// another user: under the users' base (`users_base`).
    pub fn for_users(test: &str) -> TestDir {
        use std::os::unix::fs::PermissionsExt;
        note_user_test();
        let base = users_base();
        let td = TestDir::in_dir(test, base)
            .unwrap_or_else(|e| panic!("cannot create a temp dir in {}: {e}", base.display()));
        fs::set_permissions(td.path(), fs::Permissions::from_mode(0o755)).unwrap();
        td
    }

    /// A test directory under `base` (`/dev/shm`, for what the build's file system cannot
    /// hold), or why not.
    pub fn in_dir(test: &str, base: &Path) -> std::io::Result<TestDir> {
        let started = SystemTime::now() - Duration::from_secs(1);
        let safe: String = test
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(40)
            .collect();
        let dir = tempfile::Builder::new().prefix(&format!("{safe}-")).tempdir_in(base)?;
        Ok(TestDir { dir, started })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.dir.path().join(p)
    }

    /// A new, empty subdirectory with a unique name starting with `prefix`.
    pub fn fresh(&self, prefix: &str) -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = self.join(format!("{prefix}{}", N.fetch_add(1, Ordering::Relaxed)));
        fs::create_dir(&p).unwrap();
        p
    }

    pub fn write(&self, rel: impl AsRef<Path>, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, data).unwrap();
        p
    }
}

// ---------------------------------------------------------------------------------------------
// Running commands

/// Where a command's standard input comes from.
pub enum Input {
    Null,
    Bytes(Vec<u8>),
    /// Bytes written in pieces with a pause after each but the last (a slow pipe, whose
    /// reader's reads then end where the pieces do).
    Chunks {
        chunks: Vec<Vec<u8>>,
        pause: Duration,
    },
    File(PathBuf),
}

impl Input {
    /// `chunks` with 150 ms after each: reads end there even on a loaded machine.
    pub fn trickle(chunks: Vec<Vec<u8>>) -> Input {
        Input::Chunks { chunks, pause: Duration::from_millis(150) }
    }

    /// `data` cut before each of `cuts` (offsets, in any order), with `pause` after each piece.
    pub fn cut(data: &[u8], cuts: &[usize], pause: Duration) -> Input {
        let mut cuts: Vec<usize> =
            cuts.iter().copied().filter(|&c| c > 0 && c < data.len()).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut chunks = Vec::with_capacity(cuts.len() + 1);
        let mut from = 0;
        for c in cuts.into_iter().chain([data.len()]) {
            chunks.push(data[from..c].to_vec());
            from = c;
        }
        Input::Chunks { chunks, pause }
    }
}

/// What a finished command did.
#[derive(Debug)]
pub struct Output {
    /// What was run, for messages.
    pub cmdline: String,
    /// The exit code; None when killed by a signal.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
    pub elapsed: Duration,
    /// The program's peak resident set in KiB, when asked for (`Cmd::measure_rss`) and
    /// /usr/bin/time is installed.
    pub peak_rss_kib: Option<u64>,
    /// The CPU seconds it used (user and system), measured with the peak RSS.
    pub cpu_seconds: Option<f64>,
}

impl Output {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Non-empty stderr lines, but GNU tar's closing line (`is_closing`), which every run
    /// that exits 2 ends with: "one line" in a case means one message. dropin.rs
    /// `messages_are_gnu_tars` checks the closing lines against GNU tar's.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr_str()
            .lines()
            .filter(|l| !l.trim().is_empty() && !is_closing(l))
            .map(str::to_string)
            .collect()
    }

    /// Every non-empty stderr line, GNU tar's closing line too.
    pub fn stderr_all_lines(&self) -> Vec<String> {
        self.stderr_str().lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
    }

    /// stderr lines about the archive: everything except the closing summary line
    /// (`fastuntar: N members, N files (...), ... MB in ... s`, printed unless -q) and a notice
    /// that io_uring is unavailable and the portable writer is used instead (the uring configs
    /// may print one on kernels that refuse io_uring).
    pub fn diagnostics(&self) -> Vec<String> {
        self.stderr_lines()
            .into_iter()
            .filter(|l| !is_summary(l))
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                !(l.contains("io_uring") && (l.contains("fall") || l.contains("portable")))
            })
            .collect()
    }

    /// A multi-line description for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nexit: {}{}\n--- stdout ({} bytes) ---\n{}\n--- stderr ---\n{}",
            self.cmdline,
            match (self.code, self.signal) {
                (Some(c), _) => c.to_string(),
                (None, Some(s)) => format!("killed by signal {s}"),
                _ => "?".into(),
            },
            if self.timed_out { " (TIMED OUT)" } else { "" },
            self.stdout.len(),
            truncate_text(&self.stdout_str(), 3000),
            truncate_text(&self.stderr_str(), 6000),
        )
    }

    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Asserts the exit code.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "expected exit {code}\n{}", self.describe());
        self
    }
}

/// The closing summary: `fastuntar: 3 members, 3 files (0 direct, 3 buffered), 0.0 MB in ...`.
/// GNU tar's last line after a run that exits 2 (`report::closing`), as fastuntar or a
/// `tar` symlink to it says it.
pub fn is_closing(line: &str) -> bool {
    let said = ["fastuntar: ", "tar: "].iter().find_map(|p| line.strip_prefix(p));
    matches!(
        said,
        Some("Exiting with failure status due to previous errors")
            | Some("Error is not recoverable: exiting now")
    )
}

pub fn is_summary(line: &str) -> bool {
    line.strip_prefix("fastuntar: ")
        .and_then(|r| r.split_once(" members, "))
        .is_some_and(|(n, rest)| n.bytes().all(|b| b.is_ascii_digit()) && rest.contains(" files ("))
}

fn truncate_text(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n... ({} more bytes)", &s[..end], s.len() - end)
}

/// setrlimit's resource argument: glibc's own type, a plain int elsewhere (musl, for the
/// static build's tests).
#[cfg(target_env = "gnu")]
pub type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type Resource = libc::c_int;

/// A command to run: the binary under test or any other program.
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    input: Input,
    timeout: Duration,
    /// For the binary under test: fail on a panic message, a signal or a timeout.
    strict: bool,
    /// Resource limits (resource, soft, hard) set in the child before it runs.
    rlimits: Vec<(Resource, u64, u64)>,
    /// Run as this (uid, gid), with no supplementary groups.
    user: Option<(u32, u32)>,
    /// Report the peak RSS (through /usr/bin/time).
    measure_rss: bool,
    /// Environment variables set for the child, besides LC_ALL=C.
    envs: Vec<(OsString, OsString)>,
    /// Environment variables the child does not inherit.
    removed: Vec<OsString>,
}

/// Runs the kit's cases against another build (an older commit, to see a regression test fail
/// before its fix): `FASTUNTAR_TEST_BIN=/path/to/fastuntar cargo test ...`.
pub const BIN_VAR: &str = "FASTUNTAR_TEST_BIN";

/// The binary under test.
pub fn fastuntar_path() -> PathBuf {
    std::env::var_os(BIN_VAR).unwrap_or_else(|| BIN.into()).into()
}

/// The binary under test, with the resource limits of the matrix row in progress on this
/// thread (`engine::current_limits`: none outside a runner).
pub fn fastuntar() -> Cmd {
    let mut c = Cmd { strict: true, ..Cmd::new(fastuntar_path()) };
    engine::current_limits().apply(&mut c);
    c
}

/// The binary under test run by another name, as a drop-in is installed: a symlink `name` to
/// it in `dir` (made if missing), strict as `fastuntar()`.
pub fn fastuntar_named(dir: &Path, name: &str) -> Cmd {
    let link = dir.join(name);
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(fastuntar_path(), &link).unwrap();
    }
    let mut c = Cmd { strict: true, ..Cmd::new(&link) };
    engine::current_limits().apply(&mut c);
    c
}

/// `cmdline` (a shell command line) run with a terminal as its standard input, output and
/// error: `script` from util-linux makes the pty; what the terminal showed is the output's
/// stdout. Bounded: 120 s.
pub fn in_pty(cmdline: &str) -> Output {
    Cmd::new("script").args(["-qfec", cmdline, "/dev/null"]).timeout(Duration::from_secs(120)).run()
}

/// Something that says how to run the binary under test: a writer row, or an engine (a row of
/// every dimension).
pub trait Flags {
    fn cmd(&self) -> Cmd;
}

impl Flags for WriterConfig {
    fn cmd(&self) -> Cmd {
        let mut c = fastuntar();
        c.args(self.args);
        c
    }
}

impl Flags for engine::Engine {
    fn cmd(&self) -> Cmd {
        engine::Engine::cmd(self)
    }
}

/// The binary under test with a writer row's or an engine's flags (and an engine's limits).
pub fn fastuntar_with(cfg: &impl Flags) -> Cmd {
    cfg.cmd()
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            input: Input::Null,
            timeout: TIMEOUT,
            strict: false,
            rlimits: Vec::new(),
            user: None,
            measure_rss: false,
            envs: Vec::new(),
            removed: Vec::new(),
        }
    }

    /// Measures the program's peak RSS and CPU time with `/usr/bin/time -f '%M %U %S'`
    /// (ru_maxrss of a child that time forks: a child forked from this test process would
    /// count the test's own memory, which it shares until exec). Without /usr/bin/time,
    /// `peak_rss_kib` and `cpu_seconds` stay None.
    pub fn measure_rss(&mut self) -> &mut Self {
        self.measure_rss = true;
        self
    }

    /// Sets a resource limit in the child, as `ulimit` would.
    pub fn rlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> &mut Self {
        self.rlimits.retain(|r| r.0 != resource);
        self.rlimits.push((resource, soft, hard));
        self
    }

    /// Runs the child as `uid`:`gid` without supplementary groups (needs root).
    pub fn user(&mut self, uid: u32, gid: u32) -> &mut Self {
        self.user = Some((uid, gid));
        self
    }

    /// `-xf ARCHIVE -C DEST`.
    pub fn extract(&mut self, archive: impl AsRef<OsStr>, dest: impl AsRef<OsStr>) -> &mut Self {
        self.arg("-xf").arg(archive).arg("-C").arg(dest)
    }

    pub fn arg(&mut self, a: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(a.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self.arg(a);
        }
        self
    }

    /// Sets an environment variable in the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.envs.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Keeps an environment variable from the child (this process's, or one set before).
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.envs.retain(|(k, _)| k != key.as_ref());
        self.removed.push(key.as_ref().to_owned());
        self
    }

    pub fn current_dir(&mut self, d: impl AsRef<Path>) -> &mut Self {
        self.cwd = Some(d.as_ref().to_owned());
        self
    }

    pub fn stdin(&mut self, input: Input) -> &mut Self {
        self.input = input;
        self
    }

    pub fn timeout(&mut self, t: Duration) -> &mut Self {
        self.timeout = t;
        self
    }

    fn cmdline(&self) -> String {
        let mut s = self.program.to_string_lossy().into_owned();
        for a in &self.args {
            s.push(' ');
            let a = a.to_string_lossy();
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                s.push_str(&format!("'{a}'"));
            } else {
                s.push_str(&a);
            }
        }
        if let Some(d) = &self.cwd {
            s.push_str(&format!("   (in {})", d.display()));
        }
        match &self.input {
            Input::File(p) => s.push_str(&format!(" < {}", p.display())),
            Input::Bytes(b) => s.push_str(&format!(" < ({} bytes)", b.len())),
            Input::Chunks { chunks, pause } => s.push_str(&format!(
                " < ({} bytes in {} chunks, {pause:?} after each)",
                chunks.iter().map(Vec::len).sum::<usize>(),
                chunks.len()
            )),
            Input::Null => {}
        }
        s
    }

    /// Runs to completion or until the timeout (then kills it). For the binary under test this
    /// also fails the test on a timeout, a signal, or "panicked" on stderr.
    pub fn run(&mut self) -> Output {
        // Another user runs the binary from where it can reach it (`user_bin`), in a
        // directory it can reach.
        let setpriv = Path::new(&self.program).file_name() == Some(OsStr::new("setpriv"));
        if self.user.is_some() || setpriv {
            let bin = user_bin();
            if is_bin(&self.program) {
                self.program = bin.clone().into();
            }
            for a in self.args.iter_mut().filter(|a| is_bin(a)) {
                *a = bin.clone().into();
            }
            if self.cwd.is_none() {
                self.cwd = Some(users_base().to_path_buf());
            }
        }
        let cmdline = self.cmdline();
        let time = Path::new("/usr/bin/time");
        let rss_file = (self.measure_rss && time.exists())
            .then(|| tempfile::NamedTempFile::new().expect("a temp file for the RSS"));
        let mut c = match &rss_file {
            Some(f) => {
                let mut c = Command::new(time);
                c.args(["-f", "%M %U %S", "-o"]).arg(f.path()).arg(&self.program);
                c
            }
            None => Command::new(&self.program),
        };
        c.args(&self.args).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Messages are compared against English text.
        c.env("LC_ALL", "C");
        for k in &self.removed {
            c.env_remove(k);
        }
        c.envs(self.envs.iter().map(|(k, v)| (k, v)));
        if let Some(d) = &self.cwd {
            c.current_dir(d);
        }
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            // std drops supplementary groups (setgroups(0)) when it changes the uid as root.
            c.uid(uid).gid(gid);
        }
        if !self.rlimits.is_empty() {
            use std::os::unix::process::CommandExt;
            let limits = self.rlimits.clone();
            // Safety: the closure runs in the forked child before exec and only calls
            // setrlimit, which is async-signal-safe; it allocates nothing.
            unsafe {
                c.pre_exec(move || {
                    for &(res, soft, hard) in &limits {
                        let rl = libc::rlimit { rlim_cur: soft, rlim_max: hard };
                        if libc::setrlimit(res, &rl) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let input = std::mem::replace(&mut self.input, Input::Null);
        match &input {
            Input::Null => {
                c.stdin(Stdio::null());
            }
            Input::File(p) => {
                let f = fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                c.stdin(Stdio::from(f));
            }
            Input::Bytes(_) | Input::Chunks { .. } => {
                c.stdin(Stdio::piped());
            }
        }
        let start = Instant::now();
        let mut child = c.spawn().unwrap_or_else(|e| panic!("cannot run {cmdline}: {e}"));
        let feeder = child.stdin.take().map(|mut w| {
            thread::spawn(move || match input {
                // Write errors (the child exited early: EPIPE) are not the test's business.
                Input::Bytes(b) => {
                    let _ = w.write_all(&b);
                }
                Input::Chunks { chunks, pause } => {
                    let last = chunks.len().saturating_sub(1);
                    for (i, ch) in chunks.into_iter().enumerate() {
                        if w.write_all(&ch).and_then(|_| w.flush()).is_err() {
                            break;
                        }
                        if i < last {
                            thread::sleep(pause);
                        }
                    }
                }
                _ => {}
            })
        });
        let out = reader_thread(child.stdout.take().unwrap());
        let err = reader_thread(child.stderr.take().unwrap());
        let mut timed_out = false;
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if start.elapsed() > self.timeout {
                timed_out = true;
                let _ = child.kill();
                break child.wait().unwrap();
            }
            thread::sleep(Duration::from_millis(2));
        };
        let elapsed = start.elapsed();
        // "Command exited with non-zero status N" may come before time's line.
        let timed = rss_file
            .and_then(|f| fs::read_to_string(f.path()).ok())
            .and_then(|text| text.lines().last().map(str::to_owned))
            .map(|line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .unwrap_or_default();
        let field = |i: usize| timed.get(i).and_then(|v| v.parse::<f64>().ok());
        if let Some(f) = feeder {
            let _ = f.join();
        }
        let output = Output {
            cmdline,
            code: status.code(),
            signal: status.signal(),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
            timed_out,
            elapsed,
            peak_rss_kib: field(0).map(|k| k as u64),
            cpu_seconds: field(1).zip(field(2)).map(|(user, sys)| user + sys),
        };
        if self.strict {
            assert!(
                !output.timed_out,
                "fastuntar hung (killed after {:?})\n{}",
                self.timeout,
                output.describe()
            );
            assert!(output.signal.is_none(), "fastuntar died of a signal\n{}", output.describe());
            assert!(
                !output.stderr_str().contains("panicked"),
                "fastuntar panicked\n{}",
                output.describe()
            );
            // 64: a command line GNU tar's argp refuses (cli::usage_status).
            assert!(
                matches!(output.code, Some(0..=2 | 64)),
                "fastuntar exit code outside 0..=2 and 64\n{}",
                output.describe()
            );
        }
        output
    }
}

fn reader_thread(mut r: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Runs a bash command line (with pipefail), failing the test if it does not exit 0.
pub fn sh(script: &str) -> Output {
    let out = Cmd::new("bash").args(["-c", &format!("set -o pipefail; {script}")]).run();
    assert!(out.success(), "shell command failed\n{}", out.describe());
    out
}

/// Runs GNU tar with `args` (no extra flags), returning its output.
pub fn gnu_tar<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Cmd::new("tar").args(args).run()
}

/// Reads a whole file, panicking with the path on error.
pub fn read(p: impl AsRef<Path>) -> Vec<u8> {
    let p = p.as_ref();
    fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Entries under `dir` (not counting it), without following symlinks.
pub fn entries_under(dir: &Path) -> usize {
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

/// Sum of allocated bytes (st_blocks * 512) and of apparent sizes under `dir` (not following
/// symlinks).
pub fn disk_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut blocks = 0;
    let mut apparent = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = fs::symlink_metadata(e.path()) else { continue };
            blocks += m.blocks() * 512;
            apparent += m.size();
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    (blocks, apparent)
}

/// A small deterministic PRNG (xorshift64*), for file contents and random inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Runs `cmd` with stdin and stdout closed and stderr captured; a run still going after
/// `timeout` is killed and fails the test as a hang, named by `what`. Its exit code (None
/// when a signal ended it) and its stderr.
pub fn run_bounded(mut cmd: Command, what: &str, timeout: Duration) -> (Option<i32>, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: no exit after {timeout:?} (hang)");
        }
        thread::sleep(Duration::from_millis(5));
    };
    (status.code(), String::from_utf8_lossy(&reader.join().unwrap()).into_owned())
}

/// A thread's scheduling policy from its `/proc/.../stat` (field 41: 0 SCHED_OTHER,
/// 3 SCHED_BATCH), or None once it has ended.
pub fn policy_in(stat: &Path) -> Option<i32> {
    let stat = std::fs::read_to_string(stat).ok()?;
    // The fields after the command name, which ends at the last ')', begin with field 3.
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(41 - 3)?.parse().ok()
}

/// The scheduling policies of process `pid`'s threads that are still there.
pub fn thread_policies(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks.flatten().filter_map(|t| policy_in(&t.path().join("stat"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 40: what the kit stages for another user is within its reach whatever the
    /// checkout's path, and nothing else is: ordinary test directories sit under a 0700
    /// directory (so a test that forgets to stage fails on every machine), and a tests'
    /// directory others cannot reach (a checkout under /root) sends another user's files to
    /// the system's temporary directory. As root, uid 65534 runs the staged binary.
    #[test]
    fn another_user_reaches_what_is_staged_for_it_and_nothing_else() {
        let td = TestDir::new("kit_private");
        assert!(!reachable(&td.join("x")), "{}", td.path().display());
        let tu = TestDir::for_users("kit_users");
        assert!(reachable(tu.path()), "{}", tu.path().display());
        assert!(reachable(&user_bin()), "{}", user_bin().display());
        let hidden = td.fresh("checkout");
        let system = std::env::temp_dir();
        let base = users_base_of(&hidden, &system);
        assert!(base.starts_with(&system) && reachable(&base), "{}", base.display());
        if USERS_TMP.get() != Some(&base) {
            fs::remove_dir(&base).unwrap();
        }
        if is_root() {
            let out = Cmd::new(user_bin()).arg("--version").user(65534, 65534).run();
            assert!(out.success(), "{}", out.describe());
            let out = Cmd::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(fastuntar_path())
                .arg("--version")
                .run();
            assert!(out.success(), "setpriv and the binary's own path\n{}", out.describe());
        }
    }
}
