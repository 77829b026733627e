//! Several writer threads (`--writer-threads N`): files are created in parallel, because
//! ext4's create path (directory lock, inode allocation, journal) is what a tree of small
//! files spends its time in, and one thread leaves the other cores idle.
//!
//! The decoder thread runs the **dispatcher** (`Dispatch`, a `plan::Sink`): it sends each
//! regular file (File, its Data, End) to one worker, and carries out everything else itself,
//! synchronously, in archive order: directories, symlinks, hard links, FIFOs, and the deferred
//! directory metadata (GNU tar's delayed_set_stat, `dest.rs`). Each worker is an ordinary
//! writer (io_uring or portable) with its own `Dest` (its own directory-fd cache); all of them
//! resolve paths the same race-free way.
//!
//! **Routing.** A directory is given to one worker when its first file arrives (the worker
//! with the fewest batches waiting). Past SPREAD_AFTER files, a directory's files join the
//! batch being filled until it is sent, and the next batch goes to the least busy worker: the
//! files of one large directory (a snapshot's `accounts/`) are created on every thread, since
//! the directory lock is held only for the create itself, not for the data, `utimensat` and
//! close. Two ops on one path on different workers are ordered by the waits below.
//!
//! **Ordering across threads.** Each worker publishes how far it has got: the batches it has
//! applied and the archive offset of the oldest member it holds unfinished (`floor`). So
//! "every member before offset S that went to worker i has landed" is known without asking
//! the worker. The dispatcher remembers, since the last full barrier, which worker made a
//! non-directory at a path (`leaf`) and which workers have files beneath a path (`beneath`),
//! keyed by a hash of the path (a collision only costs a needless wait). Before an op it
//! waits for exactly the workers it could race with:
//! - a file whose parent path (or an ancestor) is a file/symlink another worker made: that
//!   one first (so the member fails on the symlink/file as it would in archive order);
//! - a file at a path under which other workers have files (a directory replaced by a file);
//! - a symlink, hard link or FIFO at such a path, or where a worker made a file (the same path
//!   written twice); a hard link also waits for the worker that wrote its target;
//! - a directory's metadata is applied once every member before the one that closed it has
//!   landed, and a member inside a closing directory waits for that (as with one writer).
//!
//! Nothing waits on the decoder, and no worker waits on another, so there is no deadlock:
//! before the dispatcher waits (for a worker, a pool buffer or a full channel) it has sent
//! every op it queued.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use anyhow::Result;

use super::dest::Dest;
use super::tree::PassThrough;
use super::{Stats, Writer, apply_namespace_op};
use crate::plan::{Op, Sink, Stop};
use crate::policy::safety::SafePath;

/// Ops per batch: one channel hand-off (a futex wake-up at worst) per ~20 small files.
const BATCH_OPS: usize = 64;

/// A batch holding this much file data is sent at once.
const BATCH_BYTES: usize = 1 << 20;

/// Batches queued per worker. A directory of 300 small files is ~14 batches: the queue holds a
/// few directories, so the dispatcher can move on to the next one (and the other worker)
/// while this worker is still creating files. The pool bounds the data they hold.
pub const QUEUE_BATCHES: usize = 64;

/// Paths remembered between full barriers (about 32 bytes each). At the cap the dispatcher
/// waits for every worker once and forgets them: one barrier per 65,536 files.
const RECENT_MAX: usize = 1 << 16;

/// Most writer threads (a bitmask of u64 names them).
pub const MAX_WRITERS: usize = 64;

/// How far each worker has got, published after every batch and every completion it reaps.
pub struct Shared {
    /// Batches applied, per worker.
    applied: Vec<AtomicU64>,
    /// Archive offset of the oldest member the worker holds unfinished (u64::MAX: none).
    floor: Vec<AtomicU64>,
    /// A worker stopped on a fatal error: the dispatcher stops too.
    failed: AtomicBool,
    /// The first worker that failed (usize::MAX: none); its error is the run's.
    first_failed: AtomicUsize,
    /// The dispatcher sleeps on `cv`; workers notify only when it does.
    waiting: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            applied: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            floor: (0..workers).map(|_| AtomicU64::new(u64::MAX)).collect(),
            failed: AtomicBool::new(false),
            first_failed: AtomicUsize::new(usize::MAX),
            waiting: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// The first worker whose error stopped the run.
    pub fn first_failed(&self) -> Option<usize> {
        Some(self.first_failed.load(SeqCst)).filter(|&i| i != usize::MAX)
    }

    /// Batches worker `i` has applied.
    pub fn applied(&self, i: usize) -> u64 {
        self.applied[i].load(SeqCst)
    }

    /// Archive offset of the oldest member worker `i` holds unfinished (u64::MAX: none).
    pub fn floor(&self, i: usize) -> u64 {
        self.floor[i].load(SeqCst)
    }

    /// A worker stopped on a fatal error.
    pub fn failed(&self) -> bool {
        self.failed.load(SeqCst)
    }

    fn wake(&self) {
        if self.waiting.load(SeqCst) {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }

    fn fail(&self, i: usize) {
        let _ = self.first_failed.compare_exchange(usize::MAX, i, SeqCst, SeqCst);
        self.failed.store(true, SeqCst);
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}

/// One worker thread: applies its batches, reaps completions while none is waiting, and
/// publishes its progress. Lands what it holds (`finish`) when the dispatcher hangs up or
/// when it fails.
pub fn run_worker(
    i: usize,
    writer: &mut dyn Writer,
    rx: Receiver<Vec<Op>>,
    shared: &Shared,
) -> Result<Stats> {
    // Back to its own policy when this returns: worker 0 is the calling thread.
    let _aside = crate::aside::Aside::enter();
    let worked = work(i, writer, &rx, shared);
    if worked.is_err() {
        shared.fail(i);
    }
    // The dispatcher's next send to this worker fails from here on.
    drop(rx);
    let finished = writer.finish();
    shared.floor[i].store(u64::MAX, SeqCst);
    shared.wake();
    match (worked, finished) {
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => {
            shared.fail(i);
            Err(e)
        }
        (Ok(()), Ok(stats)) => Ok(stats),
    }
}

fn work(i: usize, writer: &mut dyn Writer, rx: &Receiver<Vec<Op>>, shared: &Shared) -> Result<()> {
    let mut applied = 0u64;
    loop {
        let batch = match rx.try_recv() {
            Ok(b) => b,
            Err(TryRecvError::Empty) => {
                let busy = writer.progress()?;
                shared.floor[i].store(writer.pending_floor(), SeqCst);
                shared.wake();
                if busy {
                    continue;
                }
                match rx.recv() {
                    Ok(b) => b,
                    Err(_) => return Ok(()),
                }
            }
            Err(TryRecvError::Disconnected) => return Ok(()),
        };
        for op in batch {
            writer.apply(op)?;
        }
        writer.submit()?;
        applied += 1;
        // The floor first: a reader that sees the new count sees a floor at least as new.
        shared.floor[i].store(writer.pending_floor(), SeqCst);
        shared.applied[i].store(applied, SeqCst);
        shared.wake();
    }
}

/// What the dispatcher remembers about one path since the last full barrier.
#[derive(Clone, Copy, Default)]
struct Mark {
    /// 1 + the worker that made a non-directory here (0: none).
    leaf: u8,
    /// Workers with files strictly beneath this path.
    beneath: u64,
    /// 1 + the worker this directory's last file went to (0: none yet).
    assigned: u8,
    /// Files routed into this directory since the last barrier.
    files: u32,
}

/// A directory's first files go to one worker; from this many on, its files are spread over
/// every worker, a batch at a time. One directory of 100,000 small files: 3.21 s on one
/// worker, 2.72 s spread (2 writers, fresh ext4 on the disk, extract+sync); a tree of 337
/// directories of ~300 files the same either way (2.49 / 2.48 s). Small directories stay on
/// one worker so that the members of a small archive land in archive order, as with one
/// writer: with a directory spread, a later member on another worker can take the last free
/// blocks or inodes before an earlier one gets them, and the earlier one fails (named on a
/// line of its own) where one writer would have written it.
const SPREAD_AFTER: u32 = 256;

/// FNV-1a's offset basis, where every path's hash starts.
const ROOT_KEY: u64 = 0xcbf2_9ce4_8422_2325;

/// Hashes of every leading part of `path` (`a`, `a/b`, `a/b/c`), into `out`: FNV-1a over the
/// components with a separator, finished with a multiply-xorshift so the map's buckets spread.
fn prefix_hashes(path: &SafePath, out: &mut Vec<u64>) {
    out.clear();
    let mut h = ROOT_KEY;
    for c in path.components() {
        for &b in c {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ u64::from(b'/')).wrapping_mul(0x100_0000_01b3);
        let mut f = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        f ^= f >> 29;
        out.push(f);
    }
}

/// Ops queued for one worker, not yet sent.
struct Outbox {
    ops: Vec<Op>,
    bytes: usize,
    /// Smallest archive offset of a member with ops in `ops`.
    min_offset: u64,
}

pub struct Dispatch {
    txs: Vec<SyncSender<Vec<Op>>>,
    out: Vec<Outbox>,
    /// Per worker: (batch number, its smallest member offset) of batches sent and perhaps not
    /// yet applied.
    sent: Vec<VecDeque<(u64, u64)>>,
    /// Batches sent, per worker.
    batches: Vec<u64>,
    shared: std::sync::Arc<Shared>,
    /// Where the dispatcher makes directories, links and FIFOs, and stamps directories.
    pub dest: Dest,
    /// What the dispatcher made (directories, links).
    pub stats: Stats,
    recent: HashMap<u64, Mark, BuildHasherDefault<PassThrough>>,
    /// The worker receiving the current file's Data and End, and the file's offset.
    current: Option<(usize, u64)>,
    hashes: Vec<u64>,
    /// Waits for workers (for the summary and the performance notes).
    pub waits: u64,
    /// Resume points waiting for their members to land (src/resume/).
    marks: crate::mark::Pending,
}

impl Dispatch {
    pub fn new(
        txs: Vec<SyncSender<Vec<Op>>>,
        dest: Dest,
        shared: std::sync::Arc<Shared>,
    ) -> Dispatch {
        let n = txs.len();
        assert!((1..=MAX_WRITERS).contains(&n));
        Dispatch {
            txs,
            out: (0..n)
                .map(|_| Outbox {
                    ops: Vec::with_capacity(BATCH_OPS),
                    bytes: 0,
                    min_offset: u64::MAX,
                })
                .collect(),
            sent: vec![VecDeque::new(); n],
            batches: vec![0; n],
            shared,
            dest,
            stats: Stats::default(),
            recent: HashMap::default(),
            current: None,
            hashes: Vec::new(),
            waits: 0,
            marks: Default::default(),
        }
    }

    /// Hangs up on the workers (they land what they hold and finish).
    pub fn close(&mut self) {
        let _ = self.flush();
        self.txs.clear();
    }

    fn all(&self) -> u64 {
        if self.txs.len() == 64 { u64::MAX } else { (1u64 << self.txs.len()) - 1 }
    }

    fn queue(&mut self, w: usize, op: Op, offset: u64) -> Result<(), Stop> {
        let o = &mut self.out[w];
        o.bytes += op.held_bytes();
        o.ops.push(op);
        o.min_offset = o.min_offset.min(offset);
        if o.ops.len() >= BATCH_OPS || o.bytes >= BATCH_BYTES {
            self.send(w)?;
        }
        Ok(())
    }

    fn send(&mut self, w: usize) -> Result<(), Stop> {
        let o = &mut self.out[w];
        if o.ops.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut o.ops, Vec::with_capacity(BATCH_OPS));
        let min = std::mem::replace(&mut o.min_offset, u64::MAX);
        o.bytes = 0;
        let tx = self.txs.get(w).ok_or(Stop::Gone)?;
        tx.send(batch).map_err(|_| Stop::Gone)?;
        self.sent[w].push_back((self.batches[w], min));
        self.batches[w] += 1;
        Ok(())
    }

    /// True when every member before archive offset `s` that went to a worker in `mask` has
    /// landed. Forgets the batches the workers have applied.
    fn landed(&mut self, mask: u64, s: u64) -> bool {
        (0..self.txs.len()).filter(|i| mask & (1 << i) != 0).all(|i| {
            let applied = self.shared.applied[i].load(SeqCst);
            let floor = self.shared.floor[i].load(SeqCst);
            let sent = &mut self.sent[i];
            while sent.front().is_some_and(|&(b, _)| b < applied) {
                sent.pop_front();
            }
            floor >= s && sent.front().is_none_or(|&(_, min)| min >= s) && {
                // Ops still in the outbox have not been sent: not landed.
                self.out[i].min_offset >= s
            }
        })
    }

    /// Sends what the workers in `mask` have queued and waits until every member before
    /// archive offset `s` that went to them has landed.
    fn wait(&mut self, mask: u64, s: u64) -> Result<(), Stop> {
        for i in 0..self.txs.len() {
            if mask & (1 << i) != 0 {
                self.send(i)?;
            }
        }
        if self.landed(mask, s) {
            return Ok(());
        }
        self.waits += 1;
        let shared = self.shared.clone();
        loop {
            if shared.failed.load(SeqCst) {
                return Err(Stop::Gone);
            }
            let g = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.waiting.store(true, SeqCst);
            if self.landed(mask, s) {
                shared.waiting.store(false, SeqCst);
                return Ok(());
            }
            // The timeout is only a safety net: workers notify while `waiting` is set.
            let _ = shared.cv.wait_timeout(g, Duration::from_millis(20));
            shared.waiting.store(false, SeqCst);
        }
    }

    fn check_failed(&self) -> Result<(), Stop> {
        if self.shared.failed.load(SeqCst) { Err(Stop::Gone) } else { Ok(()) }
    }

    /// Deferred directory metadata before the member at `path`, as one writer does it: the
    /// directories the archive has left are stamped once everything before has landed; a
    /// member inside one waits for that, and so does a hard link whose target (`also`) is
    /// inside one, as a user (`Dest::awaits_stamp`).
    fn before_member(
        &mut self,
        path: &SafePath,
        also: Option<&SafePath>,
        offset: u64,
    ) -> Result<(), Stop> {
        let inside = self.dest.enter_at(path, offset);
        if inside || also.is_some_and(|t| self.dest.awaits_stamp(t)) {
            let all = self.all();
            self.wait(all, offset)?;
        }
        self.settle()
    }

    fn settle(&mut self) -> Result<(), Stop> {
        if self.dest.closing() == 0 {
            return Ok(());
        }
        // `landed` for every worker, on a snapshot (dest is borrowed mutably meanwhile): the
        // smallest offset any worker may still hold unfinished.
        let all = self.all();
        let _ = self.landed(all, 0); // forgets applied batches
        let oldest = (0..self.txs.len())
            .map(|i| {
                let floor = self.shared.floor[i].load(SeqCst);
                let sent = self.sent[i].front().map_or(u64::MAX, |&(_, m)| m);
                floor.min(sent).min(self.out[i].min_offset)
            })
            .min()
            .unwrap_or(u64::MAX);
        self.dest.settle_when(|s| oldest >= s).map_err(Stop::Fatal)
    }

    /// Picks the worker for a file at `path` (the one its directory was given, or the least
    /// busy), waits for the workers it could race with, and remembers the file.
    fn route_file(&mut self, path: &SafePath, offset: u64) -> Result<usize, Stop> {
        let mut hashes = std::mem::take(&mut self.hashes);
        prefix_hashes(path, &mut hashes);
        let routed = self.route_hashed(&hashes, offset);
        self.hashes = hashes;
        routed
    }

    fn route_hashed(&mut self, h: &[u64], offset: u64) -> Result<usize, Stop> {
        let n = h.len();
        if self.recent.len() >= RECENT_MAX {
            let all = self.all();
            self.wait(all, offset)?;
            self.recent.clear();
        }
        let parent = if n >= 2 { h[n - 2] } else { ROOT_KEY };
        let (assigned, files) = self.recent.get(&parent).map_or((0, 0), |m| (m.assigned, m.files));
        let w = match usize::from(assigned).checked_sub(1) {
            // A small directory stays with its worker; a large one's files join its last
            // worker's batch until that is sent, and the next batch goes to the least busy.
            Some(w) if files < SPREAD_AFTER || !self.out[w].ops.is_empty() => w,
            _ => self.least_busy(),
        };
        let m = self.recent.entry(parent).or_default();
        m.assigned = w as u8 + 1;
        m.files = m.files.saturating_add(1);
        let bit = 1u64 << w;
        let mut mask = 0u64;
        for (k, key) in h.iter().enumerate() {
            let Some(m) = self.recent.get(key) else { continue };
            if m.leaf != 0 && usize::from(m.leaf - 1) != w {
                mask |= 1 << (m.leaf - 1);
            }
            if k == n - 1 {
                mask |= m.beneath & !bit;
            }
        }
        if mask != 0 {
            self.wait(mask, offset)?;
        }
        self.recent.entry(h[n - 1]).or_default().leaf = w as u8 + 1;
        for k in (0..n - 1).rev() {
            let m = self.recent.entry(h[k]).or_default();
            if m.beneath & bit != 0 {
                break;
            }
            m.beneath |= bit;
        }
        Ok(w)
    }

    fn least_busy(&self) -> usize {
        (0..self.txs.len())
            .min_by_key(|&i| {
                let queued = self.batches[i].saturating_sub(self.shared.applied[i].load(SeqCst));
                (queued, self.out[i].ops.len())
            })
            .unwrap_or(0)
    }

    /// Before the dispatcher makes a non-file at `path` (and, for a hard link, reads
    /// `target`): waits for the workers that made something at or above either path, or have
    /// files beneath `path` unless it is a directory. A directory waits for those too where a
    /// non-directory is at `path` now (one fstatat, only when files beneath are in flight),
    /// and with -k or --skip-old-files: a directory that exists keeps its metadata then, and
    /// one the archive's earlier files imply exists (`d/f` before `d/`, as with one writer).
    fn before_namespace_op(
        &mut self,
        path: &SafePath,
        is_dir: bool,
        target: Option<&SafePath>,
        offset: u64,
    ) -> Result<(), Stop> {
        let mut h = std::mem::take(&mut self.hashes);
        let mut mask = 0u64;
        prefix_hashes(path, &mut h);
        for (k, key) in h.iter().enumerate() {
            if let Some(m) = self.recent.get(key) {
                if m.leaf != 0 {
                    mask |= 1 << (m.leaf - 1);
                }
                if k == h.len() - 1
                    && m.beneath != 0
                    && (!is_dir || self.dest.keeps_old() || self.dest.holds_non_directory(path))
                {
                    // A directory about to replace a symlink or file (the archive's, or one
                    // already in DIR) waits too: the files beneath it in flight must meet what
                    // is there now (and be refused, as with one writer), not the new directory.
                    mask |= m.beneath;
                }
            }
        }
        if let Some(t) = target {
            prefix_hashes(t, &mut h);
            for (k, key) in h.iter().enumerate() {
                if let Some(m) = self.recent.get(key) {
                    if m.leaf != 0 {
                        mask |= 1 << (m.leaf - 1);
                    }
                    // A target that is a directory files in flight imply: the link fails as
                    // with one writer (EPERM), not because the directory is not made yet.
                    if k == h.len() - 1 {
                        mask |= m.beneath;
                    }
                }
            }
        }
        self.hashes = h;
        if mask != 0 { self.wait(mask, offset) } else { Ok(()) }
    }
}

impl Dispatch {
    /// Publishes the resume points whose members have all landed on every worker.
    fn publish_marks(&mut self) {
        if self.marks.is_empty() {
            return;
        }
        let mut marks = std::mem::take(&mut self.marks);
        let all = self.all();
        marks.publish(|t| self.landed(all, t));
        self.marks = marks;
    }
}

impl Sink for Dispatch {
    fn push(&mut self, op: Op) -> Result<(), Stop> {
        self.publish_marks();
        match op {
            Op::Mark(m) => {
                let dirs = self.dest.carried(crate::mark::CARRIED_MAX);
                self.marks.hold(m, dirs);
                // The batches being filled go now: a worker's part-filled batch would hold the
                // point back until it fills, which a slow input (a URL) may take minutes to do.
                for w in 0..self.txs.len() {
                    self.send(w)?;
                }
                Ok(())
            }
            Op::Restore(c) => {
                let (delay, dirs) = *c;
                self.dest.restore_carried(delay, dirs).map_err(Stop::Fatal)
            }
            Op::Data { .. } => match self.current {
                Some((w, offset)) => self.queue(w, op, offset),
                None => Ok(()),
            },
            Op::End => match self.current.take() {
                Some((w, offset)) => self.queue(w, op, offset),
                None => Ok(()),
            },
            Op::Barrier(done) => {
                let all = self.all();
                self.wait(all, u64::MAX)?;
                let _ = done.send(());
                Ok(())
            }
            Op::File { ref entry, .. } => {
                self.check_failed()?;
                // The op is ours, not the dispatcher's: its path is borrowed, not copied (a
                // malloc and a copy per file).
                let offset = entry.offset;
                self.before_member(&entry.path, None, offset)?;
                let w = self.route_file(&entry.path, offset)?;
                self.current = Some((w, offset));
                self.queue(w, op, offset)
            }
            op => {
                self.check_failed()?;
                let Some(entry) = op.entry() else { return Ok(()) };
                let (path, offset) = (&entry.path, entry.offset);
                let target = match &op {
                    Op::Hardlink { target, .. } => Some(target),
                    _ => None,
                };
                self.before_member(path, target, offset)?;
                if matches!(op, Op::Purge { .. }) {
                    // It renames and removes anywhere beneath the directory: every member
                    // before it lands first.
                    let all = self.all();
                    self.wait(all, offset)?;
                } else {
                    let is_dir = matches!(op, Op::Dir(_));
                    self.before_namespace_op(path, is_dir, target, offset)?;
                }
                apply_namespace_op(&mut self.dest, &mut self.stats, op)
                    .map(drop)
                    .map_err(Stop::Fatal)
            }
        }
    }

    fn flush(&mut self) -> Result<(), Stop> {
        for w in 0..self.txs.len() {
            self.send(w)?;
        }
        self.publish_marks();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_differ_and_are_stable() {
        let p = SafePath("a/b/c".into());
        let mut h = Vec::new();
        prefix_hashes(&p, &mut h);
        assert_eq!(h.len(), 3);
        let mut h2 = Vec::new();
        prefix_hashes(&SafePath("a/b".into()), &mut h2);
        assert_eq!(&h[..2], &h2[..]);
        assert_ne!(h[0], h[1]);
        prefix_hashes(&SafePath("ab".into()), &mut h2);
        assert_ne!(h2[0], h[1]);
    }
}
