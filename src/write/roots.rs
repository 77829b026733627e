//! Several roots (`--spread`, issue 43): the ops of members placed in a spread root
//! (`Entry::root`, decided by policy/route.rs) go to that root's own writer thread, a *lane*,
//! an ordinary writer (io_uring or portable) with its own `Dest` opened on the root, so that
//! each disk has its own queue and several disks work at once; every other op goes on to
//! DIR's writers (one, or the dispatcher of several) as without the option.
//!
//! `Roots` is a `plan::Sink` on the decoder thread, in front of DIR's sink. Each lane runs
//! `multi::run_worker`, which publishes how far it has got (batches applied, the archive
//! offset of the oldest member it holds), so a resume point is held here until every lane
//! has landed the members before it, then handed on to DIR's writers, which publish it once
//! DIR's have landed too. Roots hold disjoint trees (route.rs), so no op of one lane ever
//! waits for another's.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use super::multi::Shared;
use crate::mark::Mark;
use crate::plan::{Op, Sink, Stop};

/// Ops per batch sent to a lane (as the dispatcher's: write/multi.rs).
const BATCH_OPS: usize = 64;

/// A batch holding this much file data is sent at once.
const BATCH_BYTES: usize = 1 << 20;

/// Ops queued for one lane, not yet sent.
struct Outbox {
    ops: Vec<Op>,
    bytes: usize,
    /// Smallest archive offset of a member with ops in `ops`.
    min_offset: u64,
}

/// The decoder's side of the lanes.
pub struct Roots<'a> {
    home: &'a mut dyn Sink,
    txs: Vec<SyncSender<Vec<Op>>>,
    out: Vec<Outbox>,
    /// Per lane: (batch number, its smallest member offset) of batches sent, perhaps not yet
    /// applied.
    sent: Vec<VecDeque<(u64, u64)>>,
    batches: Vec<u64>,
    shared: Arc<Shared>,
    /// The lane receiving the current file's Data and End (None: DIR's writers).
    current: Option<(usize, u64)>,
    /// Resume points waiting for the lanes.
    marks: VecDeque<Box<Mark>>,
}

impl<'a> Roots<'a> {
    /// `txs[i]` feeds the writer of root i + 1, which reports to `shared` as worker i.
    pub fn new(home: &'a mut dyn Sink, txs: Vec<SyncSender<Vec<Op>>>, shared: Arc<Shared>) -> Self {
        let n = txs.len();
        Roots {
            home,
            txs,
            out: (0..n)
                .map(|_| Outbox { ops: Vec::new(), bytes: 0, min_offset: u64::MAX })
                .collect(),
            sent: vec![VecDeque::new(); n],
            batches: vec![0; n],
            shared,
            current: None,
            marks: VecDeque::new(),
        }
    }

    /// Hangs up on the lanes (they land what they hold and finish).
    pub fn close(&mut self) {
        let _ = self.send_all();
        self.txs.clear();
    }

    fn queue(&mut self, lane: usize, op: Op, offset: u64) -> Result<(), Stop> {
        let o = &mut self.out[lane];
        o.bytes += op.held_bytes();
        o.ops.push(op);
        o.min_offset = o.min_offset.min(offset);
        if o.ops.len() >= BATCH_OPS || o.bytes >= BATCH_BYTES {
            self.send(lane)?;
        }
        Ok(())
    }

    fn send(&mut self, lane: usize) -> Result<(), Stop> {
        let o = &mut self.out[lane];
        if o.ops.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut o.ops, Vec::with_capacity(BATCH_OPS));
        let min = std::mem::replace(&mut o.min_offset, u64::MAX);
        o.bytes = 0;
        let tx = self.txs.get(lane).ok_or(Stop::Gone)?;
        tx.send(batch).map_err(|_| Stop::Gone)?;
        self.sent[lane].push_back((self.batches[lane], min));
        self.batches[lane] += 1;
        Ok(())
    }

    fn send_all(&mut self) -> Result<(), Stop> {
        (0..self.out.len()).try_for_each(|lane| self.send(lane))
    }

    /// Whether every member before archive offset `s` that went to a lane has landed.
    fn landed(&mut self, s: u64) -> bool {
        (0..self.sent.len()).all(|i| {
            let applied = self.shared.applied(i);
            let floor = self.shared.floor(i);
            let sent = &mut self.sent[i];
            while sent.front().is_some_and(|&(b, _)| b < applied) {
                sent.pop_front();
            }
            floor >= s
                && sent.front().is_none_or(|&(_, min)| min >= s)
                && self.out[i].min_offset >= s
        })
    }

    /// Hands DIR's writers the resume points whose members every lane has landed.
    fn publish_marks(&mut self) -> Result<(), Stop> {
        while let Some(tar) = self.marks.front().map(|m| m.point.tar) {
            if !self.landed(tar) {
                break;
            }
            let m = self.marks.pop_front().expect("checked");
            self.home.push(Op::Mark(m))?;
        }
        Ok(())
    }

    fn check_failed(&self) -> Result<(), Stop> {
        if self.shared.failed() { Err(Stop::Gone) } else { Ok(()) }
    }

    /// `-v --backup`: every lane lands what it was given before DIR's writers are told.
    fn barrier(&mut self, done: SyncSender<()>) -> Result<(), Stop> {
        let mut waits = Vec::new();
        for lane in 0..self.txs.len() {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            self.queue(lane, Op::Barrier(tx), u64::MAX)?;
            self.send(lane)?;
            waits.push(rx);
        }
        // An Err: the lane stopped (its error ends the run).
        for rx in waits {
            let _ = rx.recv();
        }
        self.home.push(Op::Barrier(done))
    }
}

impl Sink for Roots<'_> {
    fn push(&mut self, op: Op) -> Result<(), Stop> {
        let root = match &op {
            Op::Mark(_) => {
                let Op::Mark(m) = op else { unreachable!() };
                self.marks.push_back(m);
                // Part-filled batches go now, or the point would wait for them to fill.
                self.send_all()?;
                return self.publish_marks();
            }
            Op::Barrier(_) => {
                let Op::Barrier(done) = op else { unreachable!() };
                return self.barrier(done);
            }
            Op::Data { .. } | Op::End => {
                let current = self.current;
                if matches!(op, Op::End) {
                    self.current = None;
                }
                return match current {
                    Some((lane, offset)) => self.queue(lane, op, offset),
                    None => self.home.push(op),
                };
            }
            op => op.entry().map_or(0, |e| usize::from(e.root)),
        };
        self.check_failed()?;
        if root == 0 {
            if matches!(op, Op::File { .. }) {
                self.current = None;
            }
            return self.home.push(op);
        }
        let lane = root - 1;
        let offset = op.entry().map_or(u64::MAX, |e| e.offset);
        if matches!(op, Op::File { .. }) {
            self.current = Some((lane, offset));
        }
        self.queue(lane, op, offset)
    }

    fn flush(&mut self) -> Result<(), Stop> {
        self.send_all()?;
        self.publish_marks()?;
        self.home.flush()
    }
}
