//! The writer side: a trait with two backends and the choice between them.
//!
//! Both backends share `dest.rs`, which owns every path resolution in the destination.

pub mod backup;
pub mod casefold;
pub mod delayed;
pub mod dest;
pub mod direct;
pub mod direct_policy;
pub mod events;
pub mod journal;
pub mod mount;
pub mod multi;
pub mod outcome;
pub mod plan;
pub mod portable;
pub mod purge;
pub mod roots;
pub mod tree;
pub mod uring;

use anyhow::Result;

use crate::plan::Op;
pub use crate::report::summary::Stats;

pub trait Writer: Send {
    /// Carries out one op (possibly asynchronously). An error is fatal for the whole run;
    /// per-member problems go to the events sink (`Event::NotRestored`) and do not return Err.
    fn apply(&mut self, op: Op) -> Result<()>;

    /// Starts what `apply` queued (called after each batch of ops).
    fn submit(&mut self) -> Result<()> {
        Ok(())
    }

    /// Waits for some work in flight to complete. Returns false, without waiting, when nothing
    /// is in flight (then the caller may block for the next op).
    fn progress(&mut self) -> Result<bool> {
        Ok(false)
    }

    /// Archive offset of the oldest member this writer has been given and not finished (a
    /// file in flight), or u64::MAX when every member it was given has landed.
    fn pending_floor(&self) -> u64 {
        u64::MAX
    }

    /// Lands everything in flight, applies deferred directory metadata, and returns the totals.
    /// Called once, also after the producer failed (to leave a consistent tree behind).
    fn finish(&mut self) -> Result<Stats>;
}

pub mod align;

/// A write that failed part-way and left a file shorter than its member:
/// `NAME: WHAT: ERR; the file is incomplete`.
pub fn incomplete(name: &str, what: &str, err: impl std::fmt::Display) -> anyhow::Error {
    let err = crate::report::without_errno(err.to_string());
    anyhow::anyhow!("{name}: {what}: {err}; the file is incomplete")
}

/// Carries out `outcome::judge` for a member that did not land whole, for both backends:
/// what `--skip-old-files` and `--keep-newer-files` kept is not a failure (the exit status
/// stays as it was) and goes to `events`; an error of this member only is reported there and
/// the run goes on (Ok); anything else stops the run (Err). `what` is GNU tar's words for the
/// operation that failed (`CANNOT_OPEN`, `cannot_make`).
pub fn member_failed(
    dest: &dest::Dest,
    entry: &crate::plan::Entry,
    what: &str,
    e: outcome::MemberError,
) -> Result<()> {
    let events = dest.events();
    // A directory member named without its trailing `/` (`x/z: Cannot mkdir`), as GNU tar.
    let name = match entry.name.trim_end_matches('/') {
        "" => entry.name.as_str(),
        trimmed => trimmed,
    };
    match outcome::judge(&e, dest.dir_writable()) {
        outcome::Verdict::Kept(kept) => {
            events.event(events::Event::Kept { name: &entry.name, kept });
            Ok(())
        }
        outcome::Verdict::Report => {
            events.event(events::Event::NotRestored { name, why: &e.words(what) });
            Ok(())
        }
        outcome::Verdict::Stop => {
            let stop = anyhow::anyhow!("{name}: {}", e.words(what));
            // `--max-files` passed by a directory the writer makes is the limit's fault, not
            // the destination's (a library caller gets `Error::Limit`).
            Err(match e {
                outcome::MemberError::TooManyFiles(_) => {
                    crate::report::voice::tag(stop, crate::report::voice::Fault::Limit)
                }
                _ => stop,
            })
        }
    }
}

/// GNU tar 1.34's words for a member that could not be made (extract.c, misc.c's
/// `open_error`, `mkdir_error`, ...), before the system's reason. A link's target is quoted
/// as GNU tar quotes it (the locale's quotation marks).
pub const CANNOT_OPEN: &str = "Cannot open";

fn cannot_make(op: &Op) -> String {
    let quoted = |b: &[u8]| crate::report::locale_quoted(b, crate::report::locale::utf8_locale());
    match op {
        Op::Dir(_) => "Cannot mkdir".to_string(),
        Op::Symlink { target, .. } => format!("Cannot create symlink to {}", quoted(target)),
        Op::Hardlink { target, .. } => {
            format!(
                "Cannot hard link to {}",
                quoted(target.as_path().as_os_str().as_encoded_bytes())
            )
        }
        Op::Special { node: crate::plan::Node::Fifo, .. } => "Cannot mkfifo".to_string(),
        Op::Special { .. } => "Cannot mknod".to_string(),
        _ => CANNOT_OPEN.to_string(),
    }
}

/// A file whose data and metadata landed, told to the run's events with its open fd.
pub fn file_done(
    dest: &dest::Dest,
    entry: &crate::plan::Entry,
    size: u64,
    fd: std::os::fd::BorrowedFd<'_>,
) {
    let (root, path) = (usize::from(entry.root), entry.path.as_path());
    dest.events().event(events::Event::FileDone { root, path, size, fd });
}

/// Directories, symlinks, hard links, FIFOs and device nodes: synchronous in both backends
/// (rare in snapshots). Returns the op back when it is a file op.
pub fn apply_namespace_op(dest: &mut dest::Dest, stats: &mut Stats, op: Op) -> Result<Option<Op>> {
    let (result, counter) = match &op {
        Op::Dir(entry) => (dest.mkdir(entry), Some(&mut stats.dirs)),
        Op::Symlink { entry, target } => (dest.symlink(entry, target), Some(&mut stats.links)),
        Op::Hardlink { entry, target } => (dest.hardlink(entry, target), Some(&mut stats.links)),
        Op::Special { entry, node } => (dest.mknod(entry, *node), None),
        Op::Purge { entry, list, done } => {
            // Err: the run stops; the decoder's wait for `done` ends with it.
            dest.purge(entry, list)?;
            if let Some(done) = done {
                // The decoder may have stopped waiting (it failed): nothing to tell then.
                let _ = done.send(());
            }
            return Ok(None);
        }
        _ => return Ok(Some(op)),
    };
    match result {
        Ok(()) => {
            if let Some(c) = counter {
                *c += 1;
            }
        }
        Err(e) => {
            let entry = op.entry().expect("a namespace op has its member");
            let e = dest.explain(&entry.path, e);
            member_failed(dest, entry, &cannot_make(&op), e)?
        }
    }
    Ok(None)
}

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::policy::admit::FileCount;
use crate::pool::{BUF_ALIGN, Pool};
use crate::resources::FdBudget;
use plan::{Backend, Layout, RingProbe, WriterPlan};
use portable::Portable;

/// Calls `call`, a system call returning a negative value on failure, again while it fails
/// with EINTR; returns its last result (errno as that call left it). A thread with an
/// io_uring ring has a signal pending whenever the ring has completions to deliver
/// (TIF_NOTIFY_SIGNAL), and a system call that waits for an interruptible lock in the kernel
/// then fails with EINTR instead of being restarted: overlayfs's copy-up lock did so in 2 of 3
/// extractions over a lower layer holding the same tree (`--io uring`, 2 writer threads).
/// Each return to user space runs the ring's pending work, so the next try finds no signal
/// unless more completions have come in since. At most RESTARTS tries (a FUSE daemon that
/// always answers EINTR would otherwise spin a writer forever): then the EINTR stands.
pub fn restart<T: Copy + Into<i64>>(mut call: impl FnMut() -> T) -> T {
    let mut tries = 0;
    loop {
        let r = call();
        tries += 1;
        if r.into() >= 0
            || tries >= RESTARTS
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
        {
            return r;
        }
    }
}

/// Tries of a system call interrupted again and again (`restart`), and of an interrupted
/// io_uring open: the overlayfs case needed one more.
pub const RESTARTS: u32 = 100;

/// The names in the directory open as `dirfd`, without `.` and `..`.
pub fn names_in(dirfd: RawFd) -> io::Result<Vec<CString>> {
    // Safety: dup of an open fd; fdopendir takes the copy, closedir closes it.
    let copy = unsafe { libc::dup(dirfd) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `copy` is an open directory fd we own from here.
    let dir = unsafe { libc::fdopendir(copy) };
    if dir.is_null() {
        let e = io::Error::last_os_error();
        // Safety: fdopendir failed, so `copy` is still ours to close.
        unsafe { libc::close(copy) };
        return Err(e);
    }
    // The copy shares its offset with `dirfd`: read from the start.
    // Safety: `dir` is an open DIR stream.
    unsafe { libc::rewinddir(dir) };
    let mut names = Vec::new();
    loop {
        // Safety: `dir` is an open DIR stream; the entry is valid until the next readdir.
        let ent = unsafe { libc::readdir(dir) };
        if ent.is_null() {
            break;
        }
        // Safety: d_name is a NUL-terminated array inside the entry.
        let n = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        if n.to_bytes() != b"." && n.to_bytes() != b".." {
            names.push(n.to_owned());
        }
    }
    // Safety: `dir` is open; this closes `copy` too.
    unsafe { libc::closedir(dir) };
    Ok(names)
}

/// Writers for `--writer-threads N` (N > 1), and the dispatcher's own `Dest`.
pub struct Writers {
    pub workers: Vec<Box<dyn Writer>>,
    /// How many of `workers` write through io_uring (the rest are portable), for `--json`.
    pub uring: usize,
    /// For the dispatcher (directories, links, deferred metadata); None when N = 1.
    pub dest: Option<dest::Dest>,
    /// Which files are written direct, and why (`-v`, `--json`).
    pub direct: direct_policy::Plan,
    /// `--spread`: one writer per spread root, in root order (write/roots.rs).
    pub lanes: Vec<Box<dyn Writer>>,
}

/// `--io auto` uses the portable writer from this many writer threads on when no file is
/// written with O_DIRECT. Buffered, io_uring gains nothing (snapshot.tar.zst: 7.59 s with
/// io_uring, 7.58 s portable) and costs CPU per small file: 100,000 small files to the
/// RAM-backed ext4 with 2 writers, `scripts/bench.sh --only smallfiles` medians of 3,
/// 5.11 s with io_uring (61 us of CPU per file) against 4.57 s portable (50 us). With
/// files written direct (direct_policy.rs) the ring's asynchronous direct writes are what make
/// large files fast.
const AUTO_PORTABLE_FROM: usize = 2;

/// What the writers are told of the run's input.
#[derive(Clone, Copy, Debug)]
pub struct Incoming {
    /// What the archive tells ahead of the tree it unpacks to (its size when known, a file's
    /// or a URL's Content-Length; its packing), for the direct-IO policy.
    pub arrival: direct_policy::Arrival,
    /// Descriptors the input opens after the writers' budget is made (a URL's connections).
    pub later_fds: usize,
}

/// `n` writers, each with its own `Dest` and its share of the fd budget, plus (for n > 1) a
/// `Dest` for the dispatcher. `frames`: the decoder's frame pool, whose buffers may come as
/// file data (lend.rs). `events`: where every writer says what it did (events.rs), and where
/// this says what it chose.
pub fn create_n(
    plan: &WriterPlan,
    pool: &Pool,
    frames: Option<&Pool>,
    files: Arc<FileCount>,
    input: Incoming,
    events: Arc<dyn events::Events>,
) -> Result<Writers> {
    let warn = |what: &str| events.event(events::Event::Warned { what });
    // Decided at the edge from DIR's filesystem (options/writer.rs `writer_layout`); one writer
    // where it was not.
    let one = Layout { threads: 1, serial: false, journal_less: false, notes: Vec::new() };
    let layout = plan.layout.as_ref().unwrap_or(&one);
    layout.notes.iter().for_each(|n| warn(n));
    let (n, serial, journal_less) = (layout.threads, layout.serial, layout.journal_less);
    // Each spread root has a writer of its own, counted with DIR's in the fd budget.
    let roots: Vec<&std::path::Path> = plan.placement.roots().map(|p| p.as_path()).collect();
    let k = roots.len();
    let fds = fd_budget((n + k, input.later_fds), plan.threads_given, &warn);
    let n = fds.writers.saturating_sub(k).max(1);
    let dests = if n > 1 { n + 1 } else { 1 };
    let dir_fds = (fds.dirs / (dests + k)).max(1);
    let mut dirs = vec![plan.dest.as_path(); dests];
    dirs.extend(&roots);
    let mut all = open_dests(plan, (&dirs, dir_fds), files, events.clone())?;
    let lane_dests = all.split_off(dests);
    let direct_plan = direct_plan(plan, &all[0], pool, input.arrival);
    if let Some(w) = direct_plan.warning() {
        warn(&w);
    }
    let policy = direct_plan.policy();
    let direct = direct_plan.ring_for_direct(plan.tight_memory);
    let dispatcher = if n > 1 { all.pop() } else { None };
    let files_each = (fds.files / (n + k)).max(1);
    let mut uring_ok = uring_first(plan.backend, serial, journal_less, n, direct);
    let mut workers: Vec<Box<dyn Writer>> = Vec::with_capacity(n);
    let mut uring = 0;
    for dest in all {
        if uring_ok {
            match ring(plan) {
                Ok(ring) => {
                    // Without a journal, files are created one after the other (journal.rs),
                    // also when the ring is here for direct writes.
                    let here = n >= uring::OPEN_BUFFERED_HERE_FROM || journal_less;
                    let w = uring::Uring::new(ring, pool, frames, dest, policy, files_each, here);
                    workers.push(Box::new(w));
                    uring += 1;
                    continue;
                }
                Err(e) => {
                    // Asked for, the fallback is worth a word; chosen by `auto`, only with -v:
                    // Docker's default seccomp profile refuses io_uring, and a line on every
                    // run in a container would say nothing the user can act on.
                    if plan.backend == Backend::Uring || plan.verbose {
                        let why = crate::report::without_errno(e.to_string());
                        warn(&format!(
                            "io_uring is not available ({why}); using the portable writer"
                        ));
                    }
                    uring_ok = false;
                }
            }
        }
        workers.push(Box::new(Portable::new(dest, policy)));
    }
    // A lane is one writer on its own disk: io_uring as for one writer on DIR.
    let lane_uring = uring_first(plan.backend, serial, journal_less, 1, direct);
    let mut lanes: Vec<Box<dyn Writer>> = Vec::with_capacity(k);
    for dest in lane_dests {
        match lane_uring.then(|| ring(plan)) {
            Some(Ok(ring)) => {
                let w = uring::Uring::new(ring, pool, frames, dest, policy, files_each, false);
                lanes.push(Box::new(w));
                uring += 1;
            }
            _ => lanes.push(Box::new(Portable::new(dest, policy))),
        }
    }
    Ok(Writers { workers, uring, dest: dispatcher, direct: direct_plan, lanes })
}

/// A `Dest` on each of `dirs` (DIR for each writer and the dispatcher, then each spread root),
/// each caching up to `dir_fds` directories, sharing what the Dests of one run share: the
/// sink, `--max-files`'s count, the directories removed (when several) and the set-group-ID
/// directories seen.
fn open_dests(
    plan: &WriterPlan,
    (dirs, dir_fds): (&[&std::path::Path], usize),
    files: Arc<FileCount>,
    events: Arc<dyn events::Events>,
) -> Result<Vec<dest::Dest>> {
    // Modes are applied exactly with -p and as root (GNU tar's --preserve-permissions default
    // for root, undone by --no-same-permissions; cli/resolve/writer.rs); otherwise the archive's
    // modes minus the umask, like tar without -p.
    let (exact, old_umask) = (plan.exact_modes, crate::resources::process_umask());
    // Removals are told among the Dests of one tree: DIR's (a spread root's lane is alone).
    let on_dir = dirs.iter().filter(|d| **d == plan.dest.as_path()).count();
    let removals = (on_dir > 1).then(|| Arc::new(tree::Removals::default()));
    let setgid = Arc::new(tree::SetgidDirs::default());
    let opts = || dest::DestOptions {
        old_files: plan.old_files,
        events: events.clone(),
        exact,
        user_umask: old_umask,
        dir_fds,
        files: files.clone(),
        keep_dir_symlinks: plan.keep_directory_symlink,
        dereference: plan.dereference,
        write_through: plan.write_through,
        delay_restore: plan.delay_restore,
        recursive_unlink: plan.recursive_unlink,
        backup: plan.backup.clone(),
        one_file_system: plan.one_file_system,
        removals: None,
        setgid: setgid.clone(),
    };
    let dest_opts = |i: usize| match i < on_dir {
        true => dest::DestOptions { removals: removals.clone(), ..opts() },
        false => opts(),
    };
    dirs.iter().enumerate().map(|(i, dir)| dest::Dest::open(dir, dest_opts(i))).collect()
}

/// The file descriptors for `n` writer threads (resources.rs), `later` more counted as open
/// for the input: fewer threads where `ulimit -n` leaves too few, with a warning when the
/// count was asked for (`given`).
fn fd_budget((n, later): (usize, usize), given: bool, warn: &dyn Fn(&str)) -> FdBudget {
    let fds = FdBudget::from_rlimit(n, later);
    if fds.writers < n && given {
        warn(&format!(
            "{} writer threads need more file descriptors than ulimit -n {} leaves; using {}",
            n, fds.limit, fds.writers
        ));
    }
    fds
}

/// A ring for one writer, with the operations and the worker threads it needs, or why not
/// (`plan.ring_probe`: the kernel's answer, or the one the test suite asks for).
fn ring(plan: &WriterPlan) -> std::io::Result<io_uring::IoUring> {
    let ring = uring::setup(plan.ring_probe)?;
    probe_workers(probe_opcodes(ring, plan.ring_probe)?)
}

/// Whether the writers try io_uring first (else the portable writer): `--io uring` always,
/// `portable` never; `auto` where files go direct (`direct`: direct_policy's
/// `Plan::ring_for_direct`) and, when DIR's ext4 has a
/// journal and no one writer is wanted (`serial`), also with fewer than AUTO_PORTABLE_FROM
/// writer threads (`n`).
fn uring_first(backend: Backend, serial: bool, journal_less: bool, n: usize, direct: bool) -> bool {
    match backend {
        Backend::Uring => true,
        Backend::Portable => false,
        Backend::Auto if journal_less => direct,
        Backend::Auto => !serial && (n < AUTO_PORTABLE_FROM || direct),
    }
}

/// The ring's operations that the writer uses: OPENAT, WRITE and CLOSE came with Linux 5.6, and
/// a 5.5 kernel sets up a ring (IORING_SETUP_CQSIZE is 5.5) whose every open would fail with
/// EINVAL. IORING_REGISTER_PROBE (5.6 too) says which the kernel has; where it is missing or
/// lacks one, the caller uses the portable writer. (5.4 and older, Ubuntu 20.04's kernel, refuse
/// the set-up itself.)
fn probe_opcodes(ring: io_uring::IoUring, asked: RingProbe) -> std::io::Result<io_uring::IoUring> {
    use io_uring::opcode;
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    // `--debug-uring no-openat`: a 5.5 kernel's probe, without OPENAT.
    let pretend_old = asked == RingProbe::NoOpenat;
    let needed = [
        ("IORING_OP_OPENAT", opcode::OpenAt::CODE),
        ("IORING_OP_WRITE", opcode::Write::CODE),
        ("IORING_OP_WRITE_FIXED", opcode::WriteFixed::CODE),
        ("IORING_OP_CLOSE", opcode::Close::CODE),
    ];
    let has = |code: u8| probe.is_supported(code) && !(pretend_old && code == opcode::OpenAt::CODE);
    match needed.iter().find(|(_, code)| !has(*code)) {
        Some((name, _)) => {
            Err(std::io::Error::other(format!("the kernel's io_uring has no {name}")))
        }
        None => Ok(ring),
    }
}

/// io_uring runs opens and writes that would block on io-wq worker threads, which count against
/// RLIMIT_NPROC (`ulimit -u`) and a cgroup's pids.max like any thread of the user. When not one
/// can start, the kernel cancels the request (ECANCELED): a user at the limit would see the
/// first file fail with "Operation canceled". A NOP forced onto a worker (IOSQE_ASYNC) finds out
/// before any file does, and the caller uses the portable writer, which needs no extra thread.
/// Once one worker runs, io-wq keeps it while the ring lives (the last idle worker does not
/// exit), so requests are never cancelled later for want of a worker.
fn probe_workers(mut ring: io_uring::IoUring) -> std::io::Result<io_uring::IoUring> {
    use io_uring::{opcode, squeue};
    let nop = opcode::Nop::new().build().flags(squeue::Flags::ASYNC).user_data(0);
    // Safety: a NOP reads no memory of ours.
    unsafe { ring.submission().push(&nop) }.map_err(|_| std::io::Error::other("SQ full"))?;
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let res = ring.completion().next().map_or(0, |c| c.result());
    if res == -libc::ECANCELED {
        return Err(std::io::Error::other(
            "its worker threads cannot start: too many processes, ulimit -u or pids.max",
        ));
    }
    Ok(ring)
}

/// Probes DIR and decides which files go direct (direct_policy.rs), with a warning when
/// `--direct-io` cannot be had.
fn direct_plan(
    plan: &WriterPlan,
    dest: &dest::Dest,
    pool: &Pool,
    arrival: direct_policy::Arrival,
) -> direct_policy::Plan {
    let probed = direct_policy::Destination::probe(dest.root_fd());
    // O_DIRECT needs the data's address and length aligned: every pool buffer starts on a
    // BUF_ALIGN boundary and is buf_size long.
    let pool_align = BUF_ALIGN.min(1 << pool.buf_size().trailing_zeros());
    let min_tree = plan.direct_after.unwrap_or(direct_policy::AUTO_MIN_TREE);
    let threshold = plan.direct_threshold;
    direct_policy::decide(plan.direct, threshold, &probed, arrival, min_tree, pool_align)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--io` and what the layout and the direct-IO policy decided: which backend is tried
    /// first.
    #[test]
    fn which_backend_is_tried_first() {
        use Backend::*;
        // (backend, serial, journal-less, writer threads, files direct) -> io_uring first
        for (backend, serial, journal_less, n, direct, want) in [
            (Uring, true, true, 8, false, true),
            (Portable, false, false, 1, true, false),
            (Auto, false, false, 1, false, true),
            (Auto, false, false, AUTO_PORTABLE_FROM, false, false),
            (Auto, false, false, AUTO_PORTABLE_FROM, true, true),
            (Auto, true, false, 1, true, false),
            (Auto, false, true, 1, false, false),
            (Auto, false, true, 1, true, true),
            (Auto, true, true, 1, true, true),
        ] {
            let got = uring_first(backend, serial, journal_less, n, direct);
            assert_eq!(
                got, want,
                "{backend:?} serial {serial} journal-less {journal_less} {n} {direct}"
            );
        }
    }
}
