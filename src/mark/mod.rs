//! A resume point on its way from the decoder to the state file, and what travels with it
//! among the ops. Below both sides: the writers hold a point until every member before it
//! has landed (`Pending`) and fill in the directories still waiting (`CarriedDir`); resume/
//! takes points at member boundaries and writes the published ones (src/resume/).
//!
//! `record.rs`: a directory waiting for its metadata, as bytes. `hook.rs`: the kill points
//! of the kill tests, at the protocol's steps on either side.

pub mod hook;
pub mod record;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::archive::{Globals, UnitStart};
use crate::policy::safety::SafePath;
use hook::Event;
use record::Record;

/// Where the resumed run begins: member `member` (its number from 0), whose first header is
/// at `tar` in the decoded stream, inside the input unit `unit`; `anchor` is a digest of the
/// member as read (`resume::anchor`), which must be the same when read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub member: u64,
    pub tar: u64,
    pub unit: UnitStart,
    pub anchor: [u8; 32],
}

/// A directory whose metadata was still to be applied at the resume point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirState {
    /// Above the member before the resume point (`Dest`'s `open`).
    Open,
    /// Left by the archive, waiting for files in flight beneath it (`closing`).
    Closing,
    /// `--delay-directory-restore`: waiting for the end of the run (write/delayed.rs).
    Delayed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CarriedDir {
    pub state: DirState,
    pub record: Record,
}

/// What selection and the limits had counted before the resume point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// `-K` had not yet selected a member.
    pub starting: bool,
    /// Members each MEMBER operand had counted, in command-line order.
    pub found: Vec<u64>,
    /// `--max-bytes`' count and the files and directories counted (`--max-files`).
    pub bytes: u64,
    pub files: u64,
    /// Members reported as not extracted (the exit status is 2 if any).
    pub skipped: u64,
}

/// What `--spread`'s routing had given out before the resume point (command/extract/
/// placer.rs): the resumed run routes every member as the interrupted run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placed {
    /// Weighed bytes given to each root (by root number; DIR's stays 0).
    pub loads: Vec<u64>,
    /// The spread directories made so far (path relative to DIR, as the archive names them),
    /// with the metadata the resumed run applies to them again in each root.
    pub dirs: Vec<Record>,
}

/// A resume point on its way from the decoder to the state file.
#[derive(Debug)]
pub struct Mark {
    pub point: Point,
    pub counts: Counts,
    /// Files extracted before the point, each with its root (0: DIR), to be looked at when
    /// the state is written.
    pub probes: Vec<(u16, SafePath)>,
    /// The PAX global headers read before the point, read again by the resumed run.
    pub globals: Globals,
    /// `--spread`'s routing at the point (empty without it).
    pub placed: Placed,
    /// Filled in by whoever applies directory metadata, as it stood at the point.
    pub delay: bool,
    pub dirs: Vec<CarriedDir>,
    /// Where it is published.
    pub frontier: Arc<Frontier>,
}

/// The deferred directories a mark carries at most (bytes of records): past it the point is
/// not taken. A snapshot's state is a chain of a few directories, under 1 KiB.
pub const CARRIED_MAX: usize = 1 << 20;

/// The newest resume point whose members have all landed.
#[derive(Debug, Default)]
pub struct Frontier {
    newest: Mutex<Option<Box<Mark>>>,
}

impl Frontier {
    fn publish(&self, mark: Box<Mark>) {
        *self.newest.lock().unwrap_or_else(|e| e.into_inner()) = Some(mark);
        hook::at(Event::Published);
    }

    /// The newest published point, taken (the recorder writes it).
    pub fn take(&self) -> Option<Box<Mark>> {
        self.newest.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Resume points a writer holds until every member before each has landed.
#[derive(Default)]
pub struct Pending {
    queue: VecDeque<Box<Mark>>,
}

impl Pending {
    /// `mark`, with the deferred directories as they stand (None: more than a state holds;
    /// this point is dropped, a later one will do).
    pub fn hold(&mut self, mut mark: Box<Mark>, dirs: Option<(bool, Vec<CarriedDir>)>) {
        if let Some((delay, dirs)) = dirs {
            mark.delay = delay;
            mark.dirs = dirs;
            self.queue.push_back(mark);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Publishes the points whose members have all landed: `landed(T)` says whether every
    /// member before decoded offset T has.
    pub fn publish(&mut self, mut landed: impl FnMut(u64) -> bool) {
        while self.queue.front().is_some_and(|m| landed(m.point.tar)) {
            let m = self.queue.pop_front().expect("checked");
            let frontier = m.frontier.clone();
            frontier.publish(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_points_are_published_once_landed() {
        let frontier = Arc::new(Frontier::default());
        let mut pending = Pending::default();
        let mark = |tar: u64| {
            Box::new(Mark {
                point: Point { member: tar / 512, tar, unit: UnitStart::START, anchor: [0; 32] },
                counts: Counts::default(),
                probes: Vec::new(),
                globals: Globals::default(),
                placed: Placed::default(),
                delay: false,
                dirs: Vec::new(),
                frontier: frontier.clone(),
            })
        };
        pending.hold(mark(512), Some((false, Vec::new())));
        pending.hold(mark(4096), Some((false, Vec::new())));
        // Too large to carry: dropped.
        pending.hold(mark(8192), None);
        pending.publish(|t| t <= 1024);
        assert_eq!(frontier.take().map(|m| m.point.tar), Some(512));
        assert!(frontier.take().is_none());
        pending.publish(|_| true);
        assert_eq!(frontier.take().map(|m| m.point.tar), Some(4096));
        assert!(pending.is_empty());
    }
}
