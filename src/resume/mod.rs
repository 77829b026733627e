//! Resuming an interrupted restore (issue 30; docs/DESIGN.md, "Resuming an interrupted
//! restore").
//!
//! A **resume point** is a member boundary N: every member before N is durable in DIR, and
//! what the run had carried to there (the directories whose metadata was still to be set,
//! what selection and the limits had counted) is written down. It lives in the **state file**
//! `DIR/.fastuntar-resume` (state.rs), removed when the run completes. A rerun that finds a
//! state matching its archive and options starts there: it opens the archive at the start of
//! the input unit that holds member N (a zstd frame; any byte of a plain tar; the start of a
//! single gzip stream), decodes the few bytes before N again without writing them, and goes on.
//!
//! How a resume point is made, in order:
//! 1. the recorder thread (`Recorder`, which also does `--writeback-every`'s syncfs) asks for
//!    one each time another `--writeback-every` bytes were written (`Shared::want`);
//! 2. the decoder thread takes it at the next member whose start it can begin again at
//!    (`Session::mark`) and sends it among the ops (`Op::Mark`), before the member's own;
//! 3. whoever applies directory metadata (the writer, or the dispatcher of several) fills in
//!    its deferred directories as they are at that point (`Dest::carried`) and holds it
//!    until every member before N has landed (`Pending`), then publishes it (`Frontier`);
//! 4. the recorder writes it: the temporary file, syncfs, rename, fsync of DIR (fsio.rs).
//!
//! Decisions are pure (decide.rs, state.rs, options.rs); the rest are actions.

pub mod decide;
mod fsio;
pub mod options;
mod recorder;
pub mod sample;
pub mod state;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};

pub use decide::Flag;
use decide::{Found, Here, Plan};
pub use recorder::Recorder;
use recorder::{Job, record};
use state::{InputId, Probe, State};

use crate::archive::{Member, Reader, Skip, UnitStart};
use crate::decode::plan::InputPlan;
use crate::decode::{self, Format};
use crate::mark::hook::{self, Event};
use crate::mark::{CarriedDir, Counts, Frontier, Mark, Point};
use crate::policy::admit::Admission;
use crate::policy::safety::SafePath;
use crate::reading::Reading;
use crate::report::Reporter;
pub use crate::report::summary::{ResumeReport, Resumed};
use crate::selection::select::Wanted;

/// The version written into every state (the options' digest is of this program's forms).
pub const PROGRAM: &str = env!("CARGO_PKG_VERSION");

/// How long the recorder waits for the resume point it asked for before it syncs without
/// one (a member being written for that long: a large file).
const MARK_WAIT: Duration = Duration::from_millis(250);

/// The recorder's poll while nothing is due, and while it waits for a resume point it asked
/// for: a thread waking 200 times a second costs nothing measurable (a few microseconds of
/// CPU each), and a run of 100 ms still gets its resume points.
const POLL: Duration = Duration::from_millis(5);
const POLL_DUE: Duration = Duration::from_millis(1);

/// Decoded bytes between two resume points at most. A point costs the decoder a digest of the
/// member, the probes' paths and a boxed op: 256 of them in a 2 GB archive.
const MARK_MAX: u64 = 8 << 20;

/// A digest of member `m` as read: its names, type, mode, owner, size, time and place. The
/// resumed run reads the member at the resume point again and must find the same, or the
/// archive changed (a rewrite that kept the file's size and mtime).
pub fn anchor(m: &Member) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((m.name.len() as u64).to_le_bytes());
    h.update(&m.name);
    h.update((m.link_name.len() as u64).to_le_bytes());
    h.update(&m.link_name);
    h.update([m.type_flag]);
    for v in [u64::from(m.mode), m.uid, m.gid, m.size, m.offset] {
        h.update(v.to_le_bytes());
    }
    h.update(m.mtime.secs.to_le_bytes());
    h.update(m.mtime.nanos.to_le_bytes());
    h.finalize().into()
}

/// The files the probes are chosen from, as the decoder sends them, each with the root it is
/// placed in (0: DIR; `--spread`'s or a routing callback's roots from 1): the last 8, 8 of
/// those at file counts 1, 2, 4, 8, ... (spread over the run, most of them early, where
/// `rm -rf DIR/*` or another extraction would show), and the last file of each root, so that
/// a root emptied since (`rm -rf ROOT/*`: for a snapshot, most of it) is seen even when the
/// last 8 all went elsewhere (a root given one large file takes no other for a while).
#[derive(Default)]
pub struct Probes {
    recent: Vec<(u16, SafePath)>,
    next: usize,
    spread: Vec<(u16, SafePath)>,
    /// By root number.
    last: Vec<Option<SafePath>>,
    files: u64,
}

const RECENT_PROBES: usize = 8;
const SPREAD_PROBES: usize = 8;

impl Probes {
    /// A regular file was sent to be written at `path` within root `root`.
    pub fn note(&mut self, root: u16, path: &SafePath) {
        self.files += 1;
        if self.files.is_power_of_two() {
            if self.spread.len() == SPREAD_PROBES {
                self.spread.remove(0);
            }
            self.spread.push((root, path.clone()));
        }
        if self.recent.len() < RECENT_PROBES {
            self.recent.push((root, path.clone()));
        } else {
            // Reuses the allocation: one note per file costs no malloc.
            let slot = &mut self.recent[self.next];
            slot.0 = root;
            slot.1.0.clone_from(&path.0);
            self.next = (self.next + 1) % RECENT_PROBES;
        }
        let r = usize::from(root);
        if self.last.len() <= r {
            self.last.resize(r + 1, None);
        }
        match &mut self.last[r] {
            Some(p) => p.0.clone_from(&path.0),
            none => *none = Some(path.clone()),
        }
    }

    /// The probes, each once: at most `state::MAX_PROBES` (root numbers are below
    /// `MAX_ROOTS`).
    fn paths(&self) -> Vec<(u16, SafePath)> {
        let last = self.last.iter().enumerate().filter_map(|(r, p)| Some((r as u16, p.clone()?)));
        let mut v: Vec<(u16, SafePath)> =
            self.spread.iter().chain(&self.recent).cloned().chain(last).collect();
        v.sort_by(|a, b| (a.0, &a.1.0).cmp(&(b.0, &b.1.0)));
        v.dedup();
        v.truncate(state::MAX_PROBES);
        v
    }
}

/// What the recorder thread and the decoder share.
#[derive(Default)]
struct Shared {
    frontier: Arc<Frontier>,
    /// The recorder wants a resume point: the decoder takes one at the next member it can.
    want: AtomicBool,
    /// State files written.
    written: AtomicU64,
    /// The decoded offset of the last resume point taken.
    last_mark: AtomicU64,
    recording: Mutex<Recording>,
}

#[derive(Default)]
struct Recording {
    /// A member named like the state file is being extracted: no more states (`retire`).
    retired: bool,
    /// A syncfs failed: the extraction's data may not be on disk.
    fatal: Option<String>,
    /// A state could not be written: said once, and no more are tried.
    failed: bool,
}

/// What identifies this run's archive, options and DIR in the states it writes.
#[derive(Clone)]
struct Fixed {
    input: InputId,
    format: Format,
    /// The archive can be read again from a unit's start (a regular file; a URL whose server
    /// answers ranges). Otherwise every point is at the start of the input (decoded again).
    seekable: bool,
    /// The archive file, opened again by its path and checked to be the one read, for the
    /// sample each state keeps of its bytes (sample.rs). None for a URL.
    file: Option<Arc<std::fs::File>>,
}

/// DIR opened and locked for a run that writes resume points, made first as the writers
/// would make it, with a temporary state a killed run left removed; and DIR's identity.
fn take_dir(cfg: &ResumePlan, dir: Option<OwnedFd>, shown: &str) -> Result<(OwnedFd, (u64, u64))> {
    let d = match dir {
        Some(d) => d,
        None => {
            std::fs::create_dir_all(&cfg.dest)
                .map_err(|e| anyhow!("{shown}: cannot create: {e}"))?;
            let d = fsio::open_dir(&cfg.dest)?.ok_or_else(|| anyhow!("{shown}: cannot open"))?;
            if !fsio::lock(&d)? {
                return Err(anyhow!("{shown}: another fastuntar took it"));
            }
            d
        }
    };
    let id = fsio::dir_id(&d).map_err(|e| anyhow!("{shown}: {e}"))?;
    fsio::remove_state_tmp(&d, id).map_err(|e| anyhow!("{shown}: {e}"))?;
    Ok((d, id))
}

/// The run's resume state: what was decided at the start, and the recorder's channel.
pub struct Session {
    dest: std::path::PathBuf,
    /// `--spread`'s roots, synced with DIR.
    roots: Vec<std::path::PathBuf>,
    /// DIR, locked for the run (None: resume points are off and no state was used).
    dir: Option<Arc<OwnedFd>>,
    /// Why this run writes no resume points (None: it does).
    off: Option<String>,
    /// The temporary state's name holds a file not ours (fsio.rs `foreign_tmp`): left as it
    /// is, so no state is written, whether the run resumed or not.
    foreign_tmp: Option<String>,
    /// The archive file's path (None: a URL or standard input).
    archive: Option<std::path::PathBuf>,
    /// DIR, when another process held its lock past LOCK_WAIT (`busy`).
    contended: Option<OwnedFd>,
    resumed: Option<Box<State>>,
    fixed: Option<Fixed>,
    options: [u8; 32],
    dest_id: (u64, u64),
    every: u64,
    shared: Arc<Shared>,
    asked: bool,
    quiet: bool,
    /// What the session says, and the run's counts it records and carries on.
    report: Arc<Reporter>,
}

/// What the options fixed about resume points (options/resume.rs): the flag, DIR, which
/// option refuses them, and the digest of the options that change what lands. The input
/// stage's: resume points are offsets in the input.
#[derive(Debug, Clone)]
pub struct ResumePlan {
    /// `--resume`, `--no-resume`, or neither.
    pub flag: Flag,
    /// DIR, where the state is kept.
    pub dest: std::path::PathBuf,
    /// `--spread`'s roots: a resume point is durable once their filesystems are synced too.
    pub roots: Vec<std::path::PathBuf>,
    /// The option given that makes a run unable to resume from a member boundary
    /// (options/resume.rs `refused_option`).
    pub refused: Option<&'static str>,
    /// The digest of the options that change what lands (options.rs).
    pub options: [u8; 32],
    /// The hidden `--debug-kill-at EVENT:N` of the kill tests (src/mark/hook.rs).
    pub debug_kill: Option<String>,
    /// `--writeback-every`: bytes written between syncfs calls (None: off, and no points).
    pub writeback: Option<u64>,
    /// `-q`.
    pub quiet: bool,
    /// `-t`, `-O`: nothing is written.
    pub reads_only: bool,
}

/// A run killed a moment ago may still hold DIR's lock while the kernel tears it down (its
/// io_uring requests in flight keep its files open: seconds, measured after a SIGKILL of a
/// 4 GB restore to a loop device), and a retry loop reruns at once: the lock is waited for
/// this long before the run goes on without resume points.
const LOCK_WAIT: Duration = Duration::from_secs(10);

fn lock_waiting(dir: &OwnedFd) -> std::io::Result<bool> {
    let start = Instant::now();
    loop {
        if fsio::lock(dir)? {
            return Ok(true);
        }
        if start.elapsed() >= LOCK_WAIT {
            return Ok(false);
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn dest_shown(dest: &std::path::Path) -> String {
    crate::report::printable(std::os::unix::ffi::OsStrExt::as_bytes(dest.as_os_str()))
}

/// Why the input named cannot be read again from a resume point, seen before it is opened:
/// standard input, or a path that is not a regular file (None: a file, a URL, or a path not
/// there, which opening reports).
fn not_a_file(url: bool, archive: Option<&std::path::Path>) -> Option<&'static str> {
    match (url, archive) {
        (true, _) => None,
        (false, None) => Some("standard input"),
        (false, Some(p)) => match std::fs::metadata(p) {
            Ok(m) if !m.is_file() => Some("not a regular file"),
            _ => None,
        },
    }
}

/// The archive file's identity as it is now, to hold against a state's (None: a URL, standard
/// input, or a file that cannot be opened).
fn file_id(url: bool, archive: Option<&std::path::Path>) -> Option<InputId> {
    match (url, archive) {
        (false, Some(p)) => {
            std::fs::File::open(p).and_then(|f| decode::FileId::of(&f)).ok().map(InputId::File)
        }
        _ => None,
    }
}

impl Session {
    /// Decides, before anything is opened or written, what this run does about resuming:
    /// reads the state DIR holds and compares it with this run (decide.rs). A refusal is the
    /// Err: one line, exit 2, nothing written. What it says goes to `report`.
    pub fn prepare(
        cfg: &ResumePlan,
        source: &InputPlan,
        report: &Arc<Reporter>,
    ) -> Result<Session> {
        if let Some(k) = &cfg.debug_kill {
            let (event, n) = hook::parse(k).map_err(|e| anyhow!("--debug-kill-at: {e}"))?;
            hook::arm(event, n);
        }
        let shown = dest_shown(&cfg.dest);
        let refuse = |line: String| anyhow!("{shown}: cannot resume: {line}");
        let eligible = decide::eligible(&decide::Options {
            reads_only: cfg.reads_only,
            not_a_file: not_a_file(source.url.is_some(), source.archive.as_deref()),
            refused: cfg.refused,
            no_writeback: cfg.writeback.is_none(),
        });
        let mut session = Session::new(cfg, eligible.clone(), report.clone());
        if cfg.reads_only {
            if cfg.flag == Flag::Resume {
                bail!("--resume applies to -x into a directory");
            }
            return Ok(session);
        }
        session.archive = source.archive.clone().filter(|_| source.url.is_none());
        let dir = fsio::open_dir(&cfg.dest).with_context(|| format!("{shown}: cannot open"))?;
        if let Some(d) = &dir
            && !lock_waiting(d).map_err(|e| anyhow!("{shown}: cannot lock: {e}"))?
        {
            return session.busy(cfg, dir, &shown);
        }
        session.dest_id = match &dir {
            Some(d) => fsio::dir_id(d).map_err(|e| anyhow!("{shown}: {e}"))?,
            None => (0, 0),
        };
        let found = match &dir {
            Some(d) => fsio::read_state(d, session.dest_id),
            None => Found::Absent,
        };
        session.foreign_tmp = dir.as_ref().and_then(|d| fsio::foreign_tmp(d, session.dest_id));
        let here = Here {
            program: PROGRAM.into(),
            options: cfg.options,
            dest: session.dest_id,
            input: file_id(source.url.is_some(), source.archive.as_deref()),
            url: source.url.is_some(),
        };
        let absent = matches!(found, Found::Absent);
        match decide::decide(cfg.flag, found, eligible, &here) {
            Plan::Refuse(line) => return Err(refuse(line)),
            Plan::Fresh { mut off, clear, foreign } => {
                if absent && cfg.flag == Flag::Resume && !cfg.quiet {
                    session.report.warn(format!(
                        "{shown}: --resume: no resume point there; starting from the beginning"
                    ));
                }
                // Said once; and no "no resume points" line after it.
                let said = foreign.is_some() || session.foreign_tmp.is_some();
                if let Some(why) = &foreign
                    && !cfg.quiet
                {
                    session.report.warn(format!(
                        "{shown}/{}: not a resume state of this directory's ({why}): left as it \
                         is; this run writes no resume points",
                        state::STATE_NAME
                    ));
                }
                if let Some(why) = &session.foreign_tmp {
                    if !cfg.quiet {
                        session.report.warn(format!(
                            "{shown}: {why}: left as it is; this run writes no resume points"
                        ));
                    }
                    off = off.or_else(|| Some(why.clone()));
                }
                if clear && let Some(d) = &dir {
                    fsio::remove_state(d, session.dest_id).map_err(|e| anyhow!("{shown}: {e}"))?;
                }
                if said {
                    session.asked = false;
                }
                session.start_fresh(cfg, dir, off, &shown)?;
            }
            Plan::Resume(mut state) => {
                let d = dir.expect("a state was read from it");
                if let Some(why) = changed_in_dest(&d, &cfg.roots, &mut state)
                    .or_else(|| changed_before_point(source.archive.as_deref(), &state))
                {
                    return Err(refuse(format!("{why}; {}", decide::START_OVER)));
                }
                if let Some(why) = &session.foreign_tmp
                    && !cfg.quiet
                {
                    session.report.warn(format!(
                        "{shown}: {why}: left as it is; this run writes no resume points"
                    ));
                }
                fsio::remove_state_tmp(&d, session.dest_id).map_err(|e| anyhow!("{shown}: {e}"))?;
                session.dir = Some(Arc::new(d));
                session.resumed = Some(state);
            }
        }
        Ok(session)
    }

    /// A session that has opened nothing yet; resume points are `off` for that reason.
    fn new(cfg: &ResumePlan, off: Option<String>, report: Arc<Reporter>) -> Session {
        Session {
            dest: cfg.dest.clone(),
            roots: cfg.roots.clone(),
            dir: None,
            off,
            foreign_tmp: None,
            archive: None,
            contended: None,
            resumed: None,
            fixed: None,
            options: cfg.options,
            dest_id: (0, 0),
            every: cfg.writeback.unwrap_or(0),
            shared: Arc::default(),
            asked: cfg.flag == Flag::Resume,
            quiet: cfg.quiet,
            report,
        }
    }

    /// Another fastuntar holds DIR's lock: `--resume` is refused; otherwise this run reads
    /// and writes no resume point (and tries the lock again when it completes: `complete`).
    fn busy(mut self, cfg: &ResumePlan, dir: Option<OwnedFd>, shown: &str) -> Result<Session> {
        self.contended = dir;
        if cfg.flag == Flag::Resume {
            bail!("{shown}: cannot resume: another fastuntar is extracting into it");
        }
        if !cfg.quiet {
            self.report.warn(format!(
                "{shown}: another fastuntar is extracting into it: this run reads and writes no \
                 resume point"
            ));
        }
        self.off = Some("another fastuntar is extracting into DIR".into());
        Ok(self)
    }

    /// A run from the beginning writes resume points unless they are `off` (then says why
    /// when they were asked for): DIR is made, opened and locked for it.
    fn start_fresh(
        &mut self,
        cfg: &ResumePlan,
        dir: Option<OwnedFd>,
        off: Option<String>,
        shown: &str,
    ) -> Result<()> {
        self.off = off;
        if let Some(why) = &self.off {
            if self.asked && !self.quiet {
                self.report.warn(format!("no resume points: {why}"));
            }
            return Ok(());
        }
        match take_dir(cfg, dir, shown) {
            Ok((d, id)) => {
                self.dest_id = id;
                self.dir = Some(Arc::new(d));
            }
            // Asked for: say why it cannot be. Else points are only a default, and DIR that
            // takes no state (a read-only mount, no write permission) gets the writers' own
            // errors per member, as with GNU tar.
            Err(e) if cfg.flag == Flag::Resume => return Err(e),
            Err(e) => self.off = Some(format!("{e:#}")),
        }
        Ok(())
    }

    /// Where to open the archive again, for a resumed run: the unit's start in the first
    /// run's format, and a URL's identity the server must show again.
    pub fn reopen(&self) -> Option<(decode::Reopen, Option<decode::url::Identity>)> {
        let s = self.resumed.as_ref()?;
        let at = decode::Reopen { format: s.format, unit: s.point.unit };
        let expect = match &s.input {
            InputId::Url { url, etag, last_modified, length, sources } => {
                Some(decode::url::Identity {
                    url: url.clone(),
                    validator: decode::url::Validator {
                        etag: etag.clone(),
                        last_modified: last_modified.clone(),
                    },
                    length: *length,
                    sources: sources
                        .iter()
                        .map(|s| decode::url::Pinned {
                            given: s.given.clone(),
                            validator: decode::url::Validator {
                                etag: s.etag.clone(),
                                last_modified: s.last_modified.clone(),
                            },
                        })
                        .collect(),
                })
            }
            InputId::File(_) => None,
        };
        Some((at, expect))
    }

    /// The archive is open: what identifies it goes into the states, and a resumed run checks
    /// that it is the one the state names (the file opened, not the path looked at before).
    pub fn opened(&mut self, input: &decode::Input) -> Result<()> {
        if self.off.is_some() {
            return Ok(());
        }
        let shown =
            crate::report::printable(std::os::unix::ffi::OsStrExt::as_bytes(self.dest.as_os_str()));
        let (id, seekable) = match (&input.file, &input.download) {
            (Some(f), _) => (InputId::File(*f), true),
            (None, Some(d)) => {
                let i = d.identity();
                if i.validator.if_range().is_none() {
                    return self.no_points("the server gives neither an ETag nor Last-Modified");
                }
                let id = InputId::Url {
                    url: i.url.clone(),
                    etag: i.validator.etag.clone(),
                    last_modified: i.validator.last_modified.clone(),
                    length: i.length,
                    sources: i
                        .sources
                        .iter()
                        .map(|p| state::SourceId {
                            given: p.given.clone(),
                            etag: p.validator.etag.clone(),
                            last_modified: p.validator.last_modified.clone(),
                        })
                        .collect(),
                };
                (id, d.ranged())
            }
            (None, None) => return self.no_points("not a regular file"),
        };
        let file = match (&input.file, self.archive.as_deref()) {
            (Some(f), Some(p)) => reopened(p, f),
            _ => None,
        };
        if input.filtered() {
            return self.no_points("it is read through a program");
        }
        if let Some(s) = &self.resumed {
            let same = match (&s.input, &id) {
                (InputId::File(a), InputId::File(b)) => a == b,
                // The server was asked for this version (If-Range) and checked it.
                (InputId::Url { .. }, InputId::Url { .. }) => true,
                _ => false,
            };
            if !same || input.format != s.format {
                bail!(
                    "{shown}: cannot resume: the archive changed since the interrupted run; {}",
                    decide::START_OVER
                );
            }
        }
        if input.file.is_some() && file.is_none() {
            // The path names another file than the one opened (replaced in between): there is
            // nothing to sample the states' bytes from.
            return self.no_points("its path names another file now");
        }
        self.fixed = Some(Fixed { input: id, format: input.format, seekable, file });
        Ok(())
    }

    fn no_points(&mut self, why: &str) -> Result<()> {
        self.off = Some(why.to_string());
        if self.asked && !self.quiet {
            self.report.warn(format!("no resume points: {why}"));
        }
        Ok(())
    }

    /// The archive as extraction reads it: from its start, or for a resumed run from the
    /// resume point, where the member read must be the one the state names (`anchor`), with
    /// selection's counts as they were. Says that the run resumes (unless -q).
    pub fn reading(
        &self,
        plan: &crate::reading::ReadPlan,
        mut wanted: Wanted,
        decoded: decode::Decoded,
    ) -> Result<Reading> {
        let decode::Decoded { reader, trailer, download, .. } = decoded;
        let Some(s) = &self.resumed else {
            let mut r = Reading::new(plan, reader, trailer, wanted, self.report.clone());
            r.download = download;
            return Ok(r);
        };
        let shown = dest_shown(&self.dest);
        let changed = |what: &str| {
            anyhow!(
                "{shown}: cannot resume: the archive changed since the interrupted run ({what}); {}",
                decide::START_OVER
            )
        };
        if !wanted.restore(s.counts.starting, &s.counts.found) {
            return Err(changed("its MEMBER operands"));
        }
        let p = s.point;
        let reader = Reader::resume(reader, p.tar, p.unit.decoded, &s.globals)?;
        let mut r = Reading::resumed(plan, reader, trailer, wanted, self.report.clone());
        r.download = download;
        match r.next_member()? {
            Some(m) if m.offset == p.tar && anchor(&m) == p.anchor => r.unread(m),
            _ => {
                return Err(changed(&format!(
                    "the member at byte {} is not the one it stopped at",
                    p.tar
                )));
            }
        }
        if s.counts.skipped > 0 {
            self.report.carry_skipped(s.counts.skipped);
            self.report.diagnostic(&crate::report::said(format_args!(
                "the interrupted run reported {} member{} it could not extract before the \
                 resume point (the exit status counts them)",
                s.counts.skipped,
                if s.counts.skipped == 1 { "" } else { "s" }
            )));
        }
        if !self.quiet
            && let Some(r) = self.report().resumed
        {
            crate::report::info(&crate::report::said(format_args!(
                "{shown}: {}; {}",
                r.describe(),
                decide::START_OVER
            )));
        }
        Ok(r)
    }

    /// The directories whose metadata was still to be set at the resume point, for the
    /// writer that applies it (`Op::Restore`, the first op of a resumed run).
    pub fn carried_dirs(&self) -> Option<(bool, Vec<CarriedDir>)> {
        let s = self.resumed.as_ref()?;
        Some((s.delay, s.dirs.clone()))
    }

    /// The selection and limits counts at the resume point, for `Admission`, and the number
    /// of members before it.
    pub fn resumed_counts(&self) -> Option<(&Counts, u64)> {
        self.resumed.as_ref().map(|s| (&s.counts, s.point.member))
    }

    /// `--spread`'s routing at the resume point (None: not resumed).
    pub fn resumed_placed(&self) -> Option<&crate::mark::Placed> {
        self.resumed.as_ref().map(|s| &s.placed)
    }

    /// Whether this run writes resume points (a state is expected to come).
    pub fn writes_points(&self) -> bool {
        self.off.is_none()
            && self.foreign_tmp.is_none()
            && self.fixed.is_some()
            && self.dir.is_some()
    }

    /// A resume point at member number `n` (from 0), `m`, just read, before anything of it is
    /// sent: when the recorder asked for one, and `m`'s start can be begun at again.
    pub fn mark<R: Skip>(
        &self,
        reader: &Reader<R>,
        m: &Member,
        n: u64,
        wanted: &Wanted,
        admission: &Admission,
        probes: &Probes,
    ) -> Option<Box<Mark>> {
        // Asked for by the recorder, or MARK_EVERY of the archive since the last one: the
        // decoder runs up to a pool (64 MiB) ahead of the writers, so a point taken only when
        // asked would land long after; the newest landed one is written instead.
        let since = m.offset.saturating_sub(self.shared.last_mark.load(Ordering::Relaxed));
        if !self.shared.want.load(Ordering::Relaxed) && since < self.mark_every() {
            return None;
        }
        let fixed = self.fixed.as_ref()?;
        // PAX global headers reach past the boundary: carried with the point, unless they
        // are too large to.
        let globals = reader.carried()?.clone();
        let unit = match fixed.seekable {
            true => reader.unit_at_or_before(m.offset)?,
            false => UnitStart::START,
        };
        self.shared.want.store(false, Ordering::Relaxed);
        self.shared.last_mark.store(m.offset, Ordering::Relaxed);
        let (starting, found) = wanted.export();
        let (bytes, files) = admission.counts();
        let point = Point { member: n, tar: m.offset, unit, anchor: anchor(m) };
        let counts = Counts { starting, found, bytes, files, skipped: 0 };
        Some(Box::new(Mark {
            point,
            counts,
            probes: probes.paths(),
            globals,
            placed: Default::default(),
            delay: false,
            dirs: Vec::new(),
            frontier: self.shared.frontier.clone(),
        }))
    }

    /// How much of the archive lies between two resume points at most: a quarter of the
    /// `--writeback-every` interval, at most MARK_MAX.
    fn mark_every(&self) -> u64 {
        (self.every / 4).clamp(4096, MARK_MAX)
    }

    /// Whether the decoder should keep probes (resume points are being written).
    pub fn keeps_probes(&self) -> bool {
        self.writes_points()
    }

    /// A member is about to be extracted where the state file lives (`path`, a top-level
    /// `.fastuntar-resume`, or a hard link to it): no more states this run, and the one there
    /// goes first, so the member lands as GNU tar would land it and is never overwritten.
    pub fn retire_if_ours(&self, path: &SafePath) {
        let names = [state::STATE_NAME.as_bytes(), state::TMP_NAME.as_bytes()];
        let ours = path.components().count() == 1 && names.contains(&path.file_name());
        if !ours {
            return;
        }
        let mut rec = self.shared.recording.lock().unwrap_or_else(|e| e.into_inner());
        if !rec.retired {
            rec.retired = true;
            if let Some(d) = &self.dir {
                let _ = fsio::remove_state(d, self.dest_id);
            }
        }
    }

    /// Starts the recorder thread (also `--writeback-every`'s syncfs when no points are
    /// written). Optional: a run whose thread cannot start has neither, as before.
    pub fn recorder(&self) -> Recorder {
        let none = Recorder { stop: None, thread: None };
        if self.every == 0 {
            return none;
        }
        let dir = match &self.dir {
            Some(d) => d.clone(),
            None => match std::fs::File::open(&self.dest) {
                Ok(f) => Arc::new(OwnedFd::from(f)),
                Err(_) => return none,
            },
        };
        let mut syncs = fsio::filesystems(&self.dest, &dir);
        // Made by the writers before this thread starts; one that is not is neither synced
        // nor probed (its writer failed, and with it the run).
        let roots: Vec<Option<OwnedFd>> =
            self.roots.iter().map(|r| fsio::open_dir(r).ok().flatten()).collect();
        for (root, fd) in self.roots.iter().zip(&roots) {
            if let Some(fd) = fd {
                syncs.extend(fsio::filesystems(root, fd));
            }
        }
        let job = match (self.writes_points(), &self.fixed) {
            (true, Some(f)) => Some(Job {
                fixed: f.clone(),
                options: self.options,
                dest: self.dest_id,
                roots,
                shared: self.shared.clone(),
            }),
            _ => None,
        };
        let every = self.every;
        let (shared, report) = (self.shared.clone(), self.report.clone());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let spawned = thread::Builder::new()
            .name("writeback".into())
            .spawn(move || record(&rx, every, &dir, &syncs, job.as_ref(), (&shared, &report)));
        match spawned {
            Ok(t) => Recorder { stop: Some(tx), thread: Some(t) },
            Err(_) => none,
        }
    }

    /// The run completed (everything extracted, directories stamped): the state goes. A
    /// failed syncfs while extracting is the run's error.
    pub fn complete(&self) -> Result<()> {
        let rec = self.shared.recording.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = &rec.fatal {
            bail!("{e}");
        }
        hook::at(Event::End);
        let shown = || self.dest.display();
        if let Some(d) = &self.dir
            && !rec.retired
        {
            fsio::remove_state_at_end(d, self.dest_id).map_err(|e| anyhow!("{}: {e}", shown()))?;
        }
        // Extracted without the lock: a run killed just before may have held it that long
        // (its io_uring requests still tearing down) and left a state this run has made stale.
        // Its lock free now, the state goes, or the next run would resume from it. Still held:
        // a live run owns it.
        if let Some(d) = &self.contended
            && fsio::lock(d).map_err(|e| anyhow!("{}: cannot lock: {e}", shown()))?
        {
            let id = fsio::dir_id(d).map_err(|e| anyhow!("{}: {e}", shown()))?;
            fsio::remove_state_at_end(d, id).map_err(|e| anyhow!("{}: {e}", shown()))?;
        }
        Ok(())
    }

    pub fn report(&self) -> ResumeReport {
        let resumed = self.resumed.as_ref().map(|s| Resumed {
            member: s.point.member,
            tar: s.point.tar,
            archive: s.point.unit.compressed,
            size: match &s.input {
                InputId::File(f) => Some(f.size),
                InputId::Url { length, .. } => *length,
            },
            from_start: s.point.unit.compressed == 0 && s.point.tar > 0,
        });
        ResumeReport { resumed, points: self.shared.written.load(Ordering::Relaxed) }
    }
}

/// Whether DIR and the roots (`roots`: root 1 first) still hold what the state says was
/// extracted: the probes (regular files, same inode, size and mtime), each looked at beneath
/// its own root, and the directories waiting for their metadata (same inode). The reason as
/// the line says it: a probe in a root other than DIR is named with the root's path.
///
/// Each directory's device number is taken as it is now: it names the device the filesystem
/// is mounted from, which a reboot or a remount may change (a loop device attached anew, a
/// disk enumerated in another order) while the inodes stay. The writer stamps a directory only
/// while its device and inode are the recorded ones (`Dest::deferred_fd`): with the old number
/// the resumed run would pass over every directory the state carried, `.` included.
fn changed_in_dest(dir: &OwnedFd, roots: &[std::path::PathBuf], s: &mut State) -> Option<String> {
    // Each root opened once (up to 16 probes and one a root look into them); one that cannot
    // be opened holds none of its probes.
    let opened: Vec<Option<OwnedFd>> =
        roots.iter().map(|r| fsio::open_dir(r).ok().flatten()).collect();
    for p in &s.probes {
        let (at, shown) = match p.root {
            0 => (Some(dir), p.path.display()),
            n => {
                // The roots are in the options' digest: a state of other roots is refused
                // before this.
                let Some(root) = roots.get(usize::from(n) - 1) else {
                    return Some(format!("a probe names root {n}, which this run does not have"));
                };
                let fd = opened[usize::from(n) - 1].as_ref();
                (fd, format!("{}/{}", dest_shown(root), p.path.display()))
            }
        };
        let same = at.is_some_and(|at| {
            fsio::stat_beneath(at, &p.path).is_ok_and(|st| {
                st.st_mode & libc::S_IFMT == libc::S_IFREG
                    && st.st_ino == p.ino
                    && st.st_size as u64 == p.size
                    && i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec)
                        == p.mtime_ns
            })
        });
        if !same {
            return Some(format!("{shown} was changed or removed since the interrupted run"));
        }
    }
    for d in &mut s.dirs {
        let Ok(path) = state::safe_path(&d.record.path) else { return Some("a bad path".into()) };
        let found = match path.is_root() {
            true => fsio::fstat(std::os::fd::AsRawFd::as_raw_fd(dir)),
            false => fsio::stat_beneath(dir, &path),
        };
        match found {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR && st.st_ino == d.record.ino => {
                d.record.dev = st.st_dev;
            }
            _ => {
                return Some(format!(
                    "directory {} was changed or removed since the interrupted run",
                    path.display()
                ));
            }
        }
    }
    None
}

/// The archive at `path` opened again, if it is the file `id` names (the one the run read).
fn reopened(path: &std::path::Path, id: &decode::FileId) -> Option<Arc<std::fs::File>> {
    let f = std::fs::File::open(path).ok()?;
    (decode::FileId::of(&f).ok()? == *id).then(|| Arc::new(f))
}

/// Whether the archive file's bytes before the point are still those the state sampled
/// (sample.rs): the reason as the line says it, or None. A URL's state has no sample.
fn changed_before_point(archive: Option<&std::path::Path>, s: &State) -> Option<String> {
    let (InputId::File(id), Some(want)) = (&s.input, s.sample) else { return None };
    let changed = || {
        "the archive changed since the interrupted run (its bytes before the \
                      resume point are not the same)"
    };
    let Some(file) = archive.and_then(|p| reopened(p, id)) else {
        return Some(changed().into());
    };
    match sample::digest(&file, sample::end(s.point.unit.compressed, id.size)) {
        Ok(got) if got == want => None,
        _ => Some(changed().into()),
    }
}

/// Opens the archive `cfg` names for this run: at the resume point (`Session::reopen`), or
/// from its start.
pub fn open_input(cfg: &InputPlan, session: &Session, drop_behind: bool) -> Result<decode::Input> {
    let Some((at, expect)) = session.reopen() else {
        return decode::open_input(cfg, drop_behind);
    };
    let shown = dest_shown(&session.dest);
    let from_start = at.unit.compressed == 0;
    match (&cfg.url, &cfg.archive, expect) {
        // Decoded again from the start: opened as any run opens it (and its format found).
        (None, _, _) if from_start => decode::open_input(cfg, drop_behind),
        (None, Some(p), _) => decode::open_file_at(p, cfg.max_window_log, drop_behind, at),
        (Some(plan), _, Some(expect)) => decode::open_url_at(plan, cfg.max_window_log, at, expect)
            .map_err(|e| anyhow!("{shown}: cannot resume: {e:#}; {}", decide::START_OVER)),
        _ => Err(anyhow!("{shown}: cannot resume: the archive is not the one the state names")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> SafePath {
        state::safe_path(s.as_bytes()).unwrap()
    }

    /// What can be read again from a resume point is known before the input is opened:
    /// a regular file or a URL, not standard input or a directory, FIFO or device.
    #[test]
    fn inputs_that_cannot_be_read_again_are_told_apart() {
        let dir =
            std::env::temp_dir().join(format!("fastuntar-resume-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.tar");
        std::fs::write(&file, b"x").unwrap();
        let gone = dir.join("gone.tar");
        let dev = std::path::Path::new("/dev/null");
        assert_eq!(not_a_file(false, None), Some("standard input"));
        assert_eq!(not_a_file(false, Some(&dir)), Some("not a regular file"));
        assert_eq!(not_a_file(false, Some(dev)), Some("not a regular file"));
        assert_eq!(not_a_file(false, Some(&file)), None);
        assert_eq!(not_a_file(false, Some(&gone)), None, "opening it says why");
        assert_eq!(not_a_file(true, None), None);
        assert!(matches!(file_id(false, Some(&file)), Some(InputId::File(f)) if f.size == 1));
        assert_eq!(file_id(false, Some(&gone)), None);
        assert_eq!(file_id(true, Some(&file)), None);
        assert_eq!(file_id(false, None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn probes_are_the_last_files_and_spread_ones() {
        let mut probes = Probes::default();
        for i in 1..=1000 {
            probes.note(0, &p(&format!("f{i}")));
        }
        let got: Vec<String> = probes.paths().iter().map(|(_, x)| x.display()).collect();
        assert!(got.len() <= RECENT_PROBES + SPREAD_PROBES, "{got:?}");
        for i in 993..=1000 {
            assert!(got.contains(&format!("f{i}")), "{got:?}");
        }
        for i in [8, 16, 32, 64, 128, 256, 512] {
            assert!(got.contains(&format!("f{i}")), "{got:?}");
        }
    }

    /// Probes come from every root, each with its root: the last files wherever they went,
    /// and the last of each root even when the last 8 all went elsewhere (root 3 was given
    /// one file early, then nothing); never more than the state takes, with the most roots.
    #[test]
    fn probes_keep_their_roots_and_cover_every_root() {
        let mut probes = Probes::default();
        probes.note(0, &p("version"));
        probes.note(3, &p("big"));
        for i in 1..=1000 {
            probes.note(1 + i % 2, &p(&format!("{i}.{i}")));
        }
        let got = probes.paths();
        for want in [(0, "version"), (3, "big"), (1, "1000.1000"), (2, "999.999")] {
            assert!(got.contains(&(want.0, p(want.1))), "{want:?} in {got:?}");
        }
        assert!(!got.contains(&(0, p("big"))), "a root's file probed in DIR: {got:?}");
        let mut most = Probes::default();
        for i in 0..5000usize {
            let root = (i % crate::policy::route::MAX_ROOTS) as u16;
            most.note(root, &p(&format!("f{i}")));
        }
        let got = most.paths();
        assert!(got.len() <= state::MAX_PROBES, "{} probes", got.len());
        let roots: std::collections::BTreeSet<u16> = got.iter().map(|x| x.0).collect();
        assert_eq!(roots.len(), crate::policy::route::MAX_ROOTS, "a root not probed");
    }
}
