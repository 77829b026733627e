//! The run's reporter: what one run has said and counted, as a value the command makes and
//! hands down (by `Arc` to the threads), so that two runs in one process (the fuzz target's
//! two backends, a test) each start from nothing.
//!
//! It counts the members skipped and the errors the run went on after (the exit status is
//! decided from them, main.rs), keeps the output failures (a diagnostic lost, the first failed
//! write to stdout or `--index-file`'s FILE), the `--index-file` FILE itself, the clock
//! `--totals` measures by, and the tally the progress bar and the resume recorder read.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use std::sync::Arc;

use super::voice::{Cancel, MemberKind, PROGRESS_EVERY, Skip, Voice};
use super::{Warning, Warnings, printable, with_newline, write_stderr};

/// What other threads read while the run goes on: members seen by the reader, bytes landed by
/// the writers. Relaxed atomics, bumped once per member and once per landed write (never per
/// byte); readers use how much they grew.
#[derive(Debug, Default)]
pub struct Tally {
    pub members: AtomicU64,
    pub written: AtomicU64,
}

#[derive(Debug)]
pub struct Reporter {
    skipped: AtomicU64,
    failed: AtomicU64,
    /// A diagnostic could not be written to stderr.
    diagnostic_lost: AtomicBool,
    /// The first failed write to stdout or the index file, as said at the end (`stdout: write
    /// error: ...`); nothing is written to either after that.
    stdout_failed: Mutex<Option<String>>,
    /// `--index-file FILE`: the listing goes there instead of stdout (GNU tar's `stdlis`),
    /// with FILE's name as messages show it. Set once, before anything is read.
    index_file: OnceLock<(File, String)>,
    /// When the run started: the clock `--totals`' rate is measured by, and the wall time GNU
    /// tar calls its start time (`--to-command`'s TAR_ATIME, the time stamp warnings).
    start: (Instant, SystemTime),
    /// Bytes of the tar stream the reader consumed when the archive ended (`--totals`).
    end: AtomicU64,
    pub tally: Tally,
    /// Where the run's words go instead of stderr and stdout, when a program runs it
    /// (voice.rs); None: the terminal's streams.
    voice: Option<Arc<dyn Voice>>,
    /// The caller's stop token (voice.rs `Cancel`), looked at between members and buffers.
    cancel: Option<Cancel>,
    /// Milliseconds since `start` of the last `Voice::progress`.
    last_progress: AtomicU64,
}

impl std::fmt::Debug for dyn Voice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Voice")
    }
}

impl Default for Reporter {
    fn default() -> Self {
        Reporter::new()
    }
}

impl Reporter {
    /// A run's reporter, its clock started now.
    pub fn new() -> Reporter {
        Reporter {
            skipped: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            diagnostic_lost: AtomicBool::new(false),
            stdout_failed: Mutex::new(None),
            index_file: OnceLock::new(),
            start: (Instant::now(), SystemTime::now()),
            end: AtomicU64::new(0),
            tally: Tally::default(),
            voice: None,
            cancel: None,
            last_progress: AtomicU64::new(0),
        }
    }

    /// A run's reporter that says everything to `voice` and nothing to stdout or stderr, and
    /// stops when `cancel` is cancelled.
    pub fn with_voice(voice: Arc<dyn Voice>, cancel: Option<Cancel>) -> Reporter {
        Reporter { voice: Some(voice), cancel, ..Reporter::new() }
    }

    /// Whether the run was asked to stop (voice.rs `Cancel`).
    pub fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }

    /// Err(`voice::cancelled()`) once the run was asked to stop.
    pub fn check_cancel(&self) -> anyhow::Result<()> {
        match self.cancelled() {
            true => Err(super::voice::cancelled()),
            false => Ok(()),
        }
    }

    /// The voice a program listens with, if any.
    pub fn voice(&self) -> Option<&dyn Voice> {
        self.voice.as_deref()
    }

    /// A member about to be restored, told to the voice (with the counters every
    /// PROGRESS_EVERY).
    pub fn started(&self, name: &[u8], kind: MemberKind, size: u64) {
        let Some(v) = &self.voice else { return };
        v.started(name, kind, size);
        let now = self.start.0.elapsed().as_millis() as u64;
        let last = self.last_progress.load(Ordering::Relaxed);
        if now >= last + PROGRESS_EVERY.as_millis() as u64
            && self
                .last_progress
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let t = &self.tally;
            v.progress(t.members.load(Ordering::Relaxed), t.written.load(Ordering::Relaxed));
        }
    }

    /// The counters once more at the end of a run (`Voice::progress`).
    pub fn progress_at_end(&self) {
        if let Some(v) = &self.voice {
            let t = &self.tally;
            v.progress(t.members.load(Ordering::Relaxed), t.written.load(Ordering::Relaxed));
        }
    }

    /// A member was skipped or only partly restored; the run goes on and will exit 2, as GNU
    /// tar exits for a member it could not extract ("Exiting with failure status due to
    /// previous errors").
    pub fn skipped(&self, member: &str, why: Skip, msg: impl std::fmt::Display) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        match &self.voice {
            Some(v) => v.skipped(member, why, &msg.to_string()),
            None => self.diagnostic(&super::said(format_args!("{member}: {msg}"))),
        }
    }

    /// A member kept as it was (`--skip-old-files`, `--keep-newer-files`): told to a voice as
    /// a skip; the command line says it (or not) as its warning classes say.
    pub fn kept(&self, member: &str, why: Skip, msg: &str) -> bool {
        match &self.voice {
            Some(v) => {
                v.skipped(member, why, msg);
                true
            }
            None => false,
        }
    }

    /// An error the run goes on after, but which makes it exit 2 (GNU tar's "Exiting with
    /// failure status due to previous errors"): a MEMBER operand that selected nothing.
    pub fn failed(&self, name: &str, msg: impl std::fmt::Display) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        match &self.voice {
            Some(v) => v.failed(name, &msg.to_string()),
            None => self.diagnostic(&super::said(format_args!("{name}: {msg}"))),
        }
    }

    /// Members a resumed run's interrupted run reported skipped before its resume point:
    /// counted as this run's own (the exit status is 2 if any), without their lines again.
    pub fn carry_skipped(&self, n: u64) {
        self.skipped.fetch_add(n, Ordering::Relaxed);
    }

    pub fn failed_count(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn skipped_count(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Something worth saying that does not change the exit code (e.g. a stripped leading
    /// `/`).
    pub fn warn(&self, msg: impl std::fmt::Display) {
        self.diagnostic(&super::said(msg));
    }

    /// A warning of class `w`, unless `--warning=no-...` turned it off (`warnings`).
    pub fn warning(&self, warnings: Warnings, w: Warning, msg: impl std::fmt::Display) {
        if warnings.is_on(w) {
            self.warn(msg);
        }
    }

    /// An error, warning or skip message for stderr. If it cannot be written the run will
    /// exit 2.
    pub fn diagnostic(&self, line: &str) {
        if let Some(v) = &self.voice {
            let prefix = super::said("");
            v.warning(line.strip_prefix(prefix.as_str()).unwrap_or(line));
            return;
        }
        if write_stderr(line).is_err() {
            self.diagnostic_lost.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a diagnostic could not be written.
    pub fn diagnostic_lost(&self) -> bool {
        self.diagnostic_lost.load(Ordering::Relaxed)
    }

    /// Writes `line` and a newline to stdout (`--json`). After the first failure (kept for
    /// `stdout_failure`) nothing more is written and every call fails.
    pub fn print_line(&self, line: &str) -> io::Result<()> {
        self.write_out(&with_newline(line.as_bytes()), false, false)
    }

    /// A line of the listing (GNU tar's `stdlis`): `-v` names, `Renaming`, `Deleting`. It
    /// goes to `--index-file`'s FILE, else to stdout, or, when stdout carries data
    /// (`beside_data`: `-O`), to stderr. A failed write is handled as `print_line`'s
    /// (stderr's as a diagnostic's).
    pub fn list_line(&self, line: impl AsRef<[u8]>, beside_data: bool) -> io::Result<()> {
        self.list_bytes(&with_newline(line.as_ref()), beside_data)
    }

    /// `list_line` without a newline (`-w`'s questions).
    pub fn list_bytes(&self, bytes: &[u8], beside_data: bool) -> io::Result<()> {
        self.to_listing(bytes, beside_data, false)
    }

    /// A checkpoint's dot, where the listing goes. Unlike a name, a dot that finds its reader
    /// gone (`| head -c1`) or stderr unwritable is not an error: nothing is lost that anyone
    /// reads.
    pub fn list_dot(&self, beside_data: bool) {
        let _ = self.to_listing(b".", beside_data, true);
    }

    /// Writes to the listing: `--index-file`'s FILE, else stdout, or stderr `beside_data`.
    /// `loss_ok`: a closed stdout pipe or a failed stderr write is not kept for the end.
    fn to_listing(&self, bytes: &[u8], beside_data: bool, loss_ok: bool) -> io::Result<()> {
        if self.voice.is_some() {
            // A program's run has no listing.
            return Ok(());
        }
        match self.index_file.get() {
            Some(_) => self.write_out(bytes, true, false),
            None if beside_data => {
                super::progress::around_output(false, || io::stderr().lock().write_all(bytes))
                    .inspect_err(|_| {
                        if !loss_ok {
                            self.diagnostic_lost.store(true, Ordering::Relaxed);
                        }
                    })
            }
            None => self.write_out(bytes, false, loss_ok),
        }
    }

    /// Writes to stdout, or to the index file (`to_index`), unless a write to either failed
    /// before. `pipe_gone_ok`: a closed pipe fails this write only, and is not kept for the
    /// end.
    fn write_out(&self, bytes: &[u8], to_index: bool, pipe_gone_ok: bool) -> io::Result<()> {
        if self.voice.is_some() {
            return Ok(());
        }
        let mut failed = self.stdout_failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.is_some() {
            return Err(io::Error::other("an earlier write to the listing failed"));
        }
        let index = self.index_file.get().filter(|_| to_index);
        let r = match index {
            Some((file, _)) => (&mut &*file).write_all(bytes),
            // Off the progress bar's line when stdout is the terminal too (`-v` names).
            None => super::progress::around_output(true, || {
                let mut out = io::stdout().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }),
        };
        if let Err(e) = &r
            && !(pipe_gone_ok && e.kind() == io::ErrorKind::BrokenPipe)
        {
            let what = index.map_or("stdout", |(_, name)| name.as_str());
            *failed = Some(format!("{what}: write error: {}", super::strerror(e)));
        }
        r
    }

    /// `--index-file FILE`: creates (or empties) FILE for the listing, as GNU tar does before
    /// it reads the archive. A symlink as FILE's last component is not followed (O_NOFOLLOW)
    /// but refused in one line, unless it is one of the system's names for this process's own
    /// descriptors (`index_file_may_be_a_symlink`): FILE may be in a directory an archive has
    /// written, and GNU tar, following a `DIR/INDEX -> ../outside` an earlier archive made,
    /// empties and writes the file outside.
    pub fn open_index_file(&self, path: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = printable(path.as_os_str().as_encoded_bytes());
        let follow = super::index_file_may_be_a_symlink(path);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        if !follow {
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let file = options.open(path).map_err(|e| {
            let last_is_symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
            match e.raw_os_error() == Some(libc::ELOOP) && last_is_symlink && !follow {
                true => {
                    anyhow::anyhow!("{name}: Cannot open: a symlink (--index-file follows none)")
                }
                false => anyhow::anyhow!("{name}: Cannot open: {e}"),
            }
        })?;
        let _ = self.index_file.set((file, name));
        Ok(())
    }

    /// Where the `-t` listing goes: `--index-file`'s FILE, else stdout.
    pub fn listing(&self) -> Box<dyn Write + '_> {
        match self.index_file.get() {
            Some((file, _)) => Box::new(file),
            None if self.voice.is_some() => Box::new(io::sink()),
            None => Box::new(io::stdout().lock()),
        }
    }

    /// Notes a failed write to the listing made elsewhere (`-t` writes through its own
    /// buffer), for the end of the run.
    pub fn stdout_failed(&self, e: &io::Error) {
        let what = self.index_file.get().map_or("stdout", |(_, name)| name.as_str());
        let mut failed = self.stdout_failed.lock().unwrap_or_else(|e| e.into_inner());
        failed.get_or_insert_with(|| format!("{what}: write error: {}", super::strerror(e)));
    }

    /// The first failed write to stdout or the index file, as said at the end of the run.
    pub fn stdout_failure(&self) -> Option<String> {
        self.stdout_failed.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The wall-clock time the run started.
    pub fn started_at(&self) -> SystemTime {
        self.start.1
    }

    /// Seconds since the run started (GNU tar's `compute_duration`).
    pub fn elapsed(&self) -> f64 {
        self.start.0.elapsed().as_secs_f64()
    }

    /// The reader consumed `end` bytes of tar stream by the end of the archive.
    pub fn archive_ends_at(&self, end: u64) {
        self.end.store(end, Ordering::Relaxed);
    }

    /// `--totals`' line, for records of `record` bytes (totals.rs).
    pub fn totals_line(&self, record: u64) -> String {
        let bytes = self.end.load(Ordering::Relaxed).div_ceil(record) * record;
        super::totals::format_line(bytes, self.elapsed())
    }

    /// GNU tar's `print_stats` for `bytes` read by now (totals.rs `stats`).
    pub fn stats(&self, text: &str, bytes: u64) -> String {
        super::totals::format_stats(text, bytes, self.elapsed())
    }

    /// The exit status of a run that ended without a fatal error (`ok`) or with one: GNU
    /// tar's 2 also for a member that could not be extracted or an operand that matched
    /// nothing. (Output lost on the way makes it 2 as well, at the very end: main.rs.)
    pub fn status(&self, ok: bool) -> crate::exit_codes::ExitCode {
        use crate::exit_codes::ExitCode;
        match ok && self.failed_count() == 0 && self.skipped_count() == 0 {
            true => ExitCode::Success,
            false => ExitCode::Fatal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each run's reporter starts from nothing: what one run skipped or failed does not make
    /// the next one's exit status 2 (with the counts in process statics, the second run of the
    /// fuzz target's pair inherited the first one's).
    #[test]
    fn runs_do_not_share_counts() {
        let first = Reporter::new();
        first.carry_skipped(3);
        first.failed.fetch_add(1, Ordering::Relaxed);
        first.tally.members.fetch_add(5, Ordering::Relaxed);
        assert_eq!(first.status(true), crate::exit_codes::ExitCode::Fatal);
        let second = Reporter::new();
        assert_eq!((second.skipped_count(), second.failed_count()), (0, 0));
        assert_eq!(second.tally.members.load(Ordering::Relaxed), 0);
        assert_eq!(second.status(true), crate::exit_codes::ExitCode::Success);
        assert_eq!(second.status(false), crate::exit_codes::ExitCode::Fatal);
    }
}
