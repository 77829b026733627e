//! The download's shared state and what is done with it under its lock (actions): the
//! sources as they are now, the reorder window, the jobs connections take (decided by
//! `schedule.rs`), what a failure does to a source (`retry.rs` decides), the admission of the
//! sources (`sources.rs` decides), the reader's side, and the conductor thread that measures
//! the sources and tunes their connections (`schedule::tune`): `reader.rs` and `conductor.rs`
//! hold those two sides.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sha2::Sha256;
use url::Url;

use super::http::{Answer, Client};
use super::limit::Limiter;
use super::ranges::BLOCK;
use super::retry::{self, Failure};
use super::schedule::{self, Held, JUDGE_AFTER, Job, Probe, Speed};
use super::source::Sign;
use super::sources::{self, Mode, Seen};
use super::validator::Validator;
use super::window::{Chunk, Conn, Fetching, Published, Window};
use crate::report::progress::{NetStats, SOURCE_DROPPED, SOURCE_IN_USE, SOURCE_RETRYING};

mod conductor;
mod reader;

/// How often the conductor measures the sources and decides.
const TICK: Duration = Duration::from_millis(50);

/// Rates, and how long the reader waited, are measured over the last RATE_TICKS - 1 ticks
/// (200 ms: a TCP connection's rate on a real link wobbles from one tenth of a second to the
/// next).
const RATE_TICKS: usize = 5;

/// A fetcher that brought no byte for this long, and for several blocks' time at its
/// source's speed, is taken as stalled: the head piece it holds is copied from another
/// source long before `--stall-timeout` ends its request.
const STALL_SUSPECT: f64 = 0.5;

/// What a download is, decided when it was opened.
pub struct Fixed {
    /// The first byte fetched (0 unless resuming at an offset).
    pub from: u64,
    pub retries: u32,
    /// `--min-rate` (bytes/s, 0: none) over `--stall-timeout` (`floor.rs`).
    pub min_rate: u64,
    pub stall: Duration,
    pub quiet: bool,
    /// For each source, the validator a resumed run expects it to show again.
    pub expect: Vec<Option<Validator>>,
    /// The archive's length a resumed run expects.
    pub expect_length: Option<Option<u64>>,
}

/// A source's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Its first answer has not come (or it waits for the admission).
    Starting,
    Active,
    Dropped(String),
}

/// One source as it is now.
pub struct Live {
    pub given: String,
    /// Its address after redirects.
    pub url: Url,
    pub signer: Option<Arc<dyn Sign>>,
    pub validator: Validator,
    pub status: Status,
    pub seen: Seen,
    /// The bytes from `from` its first answer brought.
    pub sample: Option<Vec<u8>>,
    /// A first answer of the whole file (200), for a whole download.
    pub whole: Option<Answer>,
    /// For a resumed run: it showed the validator the interrupted run recorded.
    pub proven: bool,
    /// Connections it may have, and at most.
    pub target: usize,
    pub ceiling: usize,
    /// The connection indexes with a thread now.
    pub alive: Vec<usize>,
    /// Failures in a row (no byte between them), and until when it rests.
    pub failures: u32,
    pub rest_until: Option<Instant>,
    /// After a failure, the one connection that tries again (the others wait for a byte).
    pub trying: Option<Conn>,
    pub speed: Speed,
    pub grow: usize,
    pub hold_until: f64,
    /// How long the next failed probe holds it (`schedule::HOLD`, doubling).
    pub hold: f64,
    /// Bytes it delivered that count, and the conductor's recent samples of that count.
    pub delivered: u64,
    samples: VecDeque<(f64, u64)>,
    pub rate: f64,
}

impl Live {
    pub fn new(given: String, url: Url, signer: Option<Arc<dyn Sign>>, ceiling: usize) -> Live {
        Live {
            given,
            url,
            signer,
            validator: Validator::default(),
            status: Status::Starting,
            seen: Seen::Pending,
            sample: None,
            whole: None,
            proven: false,
            target: 1,
            ceiling,
            alive: Vec::new(),
            failures: 0,
            rest_until: None,
            trying: None,
            speed: Speed::default(),
            grow: 2,
            hold_until: 0.0,
            hold: schedule::HOLD,
            delivered: 0,
            samples: VecDeque::new(),
            rate: 0.0,
        }
    }

    fn usable(&self) -> bool {
        self.status == Status::Active
    }
}

/// What the admission decided.
#[derive(Clone, Copy, Debug)]
pub struct Admitted {
    pub mode: Mode,
    pub reference: usize,
    pub length: Option<u64>,
}

pub struct State {
    pub sources: Vec<Live>,
    pub window: Window,
    pub admitted: Option<Admitted>,
    /// The reference's first bytes, which every other source's must equal.
    sample: Option<Vec<u8>>,
    failed: Option<String>,
    cancel: bool,
    /// The reader waits for data: since when, and how long it waited in all.
    waiting_since: Option<Instant>,
    waited: Duration,
    /// Connections waiting for a job, and the least room one of them waits for.
    work_waiters: usize,
    room_wanted: u64,
    next_conn: Conn,
    probe: Option<Probe>,
    /// The conductor's recent samples of the reader's position, and its rate from them.
    reader_samples: VecDeque<(f64, u64)>,
    drain: Option<f64>,
    /// A whole download's one connection took its job.
    whole_taken: bool,
}

/// The reader's side: the chunk being consumed, and what consumed bytes feed.
pub struct Sink {
    /// Bytes the reader has taken: the archive offset of the next byte.
    pub at: u64,
    pub hasher: Option<Sha256>,
    pub keep: Option<std::fs::File>,
    eof: bool,
    /// A write of the kept copy failed: every take from then on fails with it.
    broken: Option<(std::io::ErrorKind, String)>,
}

/// The download shared by its connection threads, its conductor and its reader.
pub struct Shared {
    pub fixed: Fixed,
    pub client: Client,
    pub limiter: Option<Limiter>,
    pub stats: Arc<NetStats>,
    state: Mutex<State>,
    /// The reader waits here for the head piece's next bytes.
    data: Condvar,
    /// Connections wait here for a job; `open` for the first answers.
    work: Condvar,
    sink: Mutex<Sink>,
    start: Instant,
}

/// A connection thread: its source, its index among the source's connections, its id.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub source: usize,
    pub index: usize,
    pub conn: Conn,
}

/// A job a connection was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// Bytes `from..end` of the piece at `start` (`copy`: beside a slow fetcher).
    Piece { start: u64, from: u64, end: u64, copy: bool },
    /// The whole archive from `from`, as one answer (one source without pinned ranges).
    Whole,
}

/// What a connection needs to make a request to its source.
pub struct Target {
    pub url: Url,
    pub given: String,
    pub validator: Validator,
    pub signer: Option<Arc<dyn Sign>>,
}

impl Shared {
    pub fn new(
        fixed: Fixed,
        client: Client,
        limiter: Option<Limiter>,
        stats: Arc<NetStats>,
        sources: Vec<Live>,
        window: u64,
        sink: (Option<Sha256>, Option<std::fs::File>),
    ) -> Shared {
        let from = fixed.from;
        let state = State {
            sources,
            window: Window::new(window, None, from),
            admitted: None,
            sample: None,
            failed: None,
            cancel: false,
            waiting_since: None,
            waited: Duration::ZERO,
            work_waiters: 0,
            room_wanted: u64::MAX,
            next_conn: 0,
            probe: None,
            reader_samples: VecDeque::new(),
            drain: None,
            whole_taken: false,
        };
        let sink = Sink { at: from, hasher: sink.0, keep: sink.1, eof: false, broken: None };
        Shared {
            fixed,
            client,
            limiter,
            stats,
            state: Mutex::new(state),
            data: Condvar::new(),
            work: Condvar::new(),
            sink: Mutex::new(sink),
            start: Instant::now(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Seconds since the download started.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn wait_work<'a>(
        &self,
        mut g: MutexGuard<'a, State>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, State> {
        g.work_waiters += 1;
        let mut g = match timeout {
            Some(t) => self.work.wait_timeout(g, t).unwrap_or_else(|e| e.into_inner()).0,
            None => self.work.wait(g).unwrap_or_else(|e| e.into_inner()),
        };
        g.work_waiters -= 1;
        g
    }

    /// Wakes every connection (and `open`): something they wait on changed.
    pub fn wake_work(&self) {
        self.work.notify_all();
    }

    fn wake_all(&self) {
        self.data.notify_all();
        self.work.notify_all();
    }

    pub fn cancel(&self) {
        self.lock().cancel = true;
        self.wake_all();
    }

    pub fn stopped(&self) -> bool {
        let st = self.lock();
        st.cancel || st.failed.is_some()
    }

    /// A new connection's id.
    pub fn conn_id(&self) -> Conn {
        let mut st = self.lock();
        st.next_conn += 1;
        st.next_conn
    }

    /// What a request to `source` needs now.
    pub fn target(&self, source: usize) -> Target {
        let st = self.lock();
        let s = &st.sources[source];
        Target {
            url: s.url.clone(),
            given: s.given.clone(),
            validator: s.validator.clone(),
            signer: s.signer.clone(),
        }
    }

    /// One line on stderr about `source` (a retry, a drop), unless -q or a progress bar
    /// shows it.
    pub fn say(&self, given: &str, line: &str) {
        if !self.fixed.quiet && !self.stats.bar.load(Ordering::Relaxed) {
            crate::report::info(&crate::report::said(format_args!("{given}: {line}")));
        }
    }

    // ---- the first answers and the admission --------------------------------------------

    /// A source's first answer: what it showed, its sample, a whole answer to keep. Once
    /// admitted, a late source joins or is dropped here.
    pub fn first_answer(
        &self,
        source: usize,
        seen: Seen,
        sample: Option<Vec<u8>>,
        whole: Option<Answer>,
    ) {
        let mut st = self.lock();
        let s = &mut st.sources[source];
        s.seen = seen;
        s.sample = sample;
        s.whole = whole;
        if let Some(adm) = st.admitted {
            self.late_join(&mut st, source, adm);
        }
        drop(st);
        self.wake_work();
    }

    /// A source that answered after the admission: it joins if it is the same archive.
    fn late_join(&self, st: &mut State, source: usize, adm: Admitted) {
        if adm.mode == Mode::Whole {
            return self.drop_source(st, source, sources::ONE_WHOLE.to_string());
        }
        let verdict = sources::join(&st.sources[source].seen, adm.length)
            .and_then(|()| self.check_sample(st, source));
        match verdict {
            Ok(()) => self.activate(st, source),
            Err(why) => self.drop_source(st, source, why),
        }
    }

    fn check_sample(&self, st: &State, source: usize) -> Result<(), String> {
        let (Some(reference), Some(adm)) = (&st.sample, st.admitted) else { return Ok(()) };
        let got = st.sources[source].sample.as_deref().unwrap_or(&[]);
        let name = &st.sources[adm.reference].given;
        match sources::compare(reference, got, self.fixed.from, name) {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    fn activate(&self, st: &mut State, source: usize) {
        st.sources[source].status = Status::Active;
        self.stats.sources[source].state.store(SOURCE_IN_USE, Ordering::Relaxed);
    }

    /// Waits for the first answers and admits the sources (`sources::admit`): the mode, the
    /// reference, the window's first piece (the reference's sample), the sources dropped.
    /// Sources slower than `grace` after the first usable answer join later. Err: the line
    /// that refuses the run.
    pub fn admit(&self, grace: Duration) -> Result<Admitted, String> {
        let mut st = self.lock();
        let mut first_usable: Option<Instant> = None;
        loop {
            if st.cancel {
                return Err("the download was stopped".into());
            }
            let pending = st.sources.iter().filter(|s| s.seen == Seen::Pending).count();
            let usable = st.sources.iter().any(|s| self.may_lead(s));
            if usable && first_usable.is_none() {
                first_usable = Some(Instant::now());
            }
            let waited_enough = first_usable.is_some_and(|t| t.elapsed() >= grace);
            if pending == 0 || waited_enough {
                break;
            }
            let timeout = match first_usable {
                Some(t) => grace.saturating_sub(t.elapsed()),
                None => Duration::from_secs(3600),
            };
            st = self.wait_work(st, Some(timeout.max(Duration::from_millis(1))));
        }
        let shown: Vec<String> = st.sources.iter().map(|s| s.given.clone()).collect();
        let seen: Vec<Seen> = st.sources.iter().map(|s| s.seen.clone()).collect();
        let mut adm = sources::admit(&seen, &shown)?;
        // A resumed run's reference must be a source that showed the recorded version; the
        // others are compared with it.
        if self.resumed() && adm.mode == Mode::Pieces && !st.sources[adm.reference].proven {
            let proven = |s: &Live| s.proven && matches!(s.seen, Seen::Ranges { pinned: true, .. });
            match st.sources.iter().position(proven) {
                Some(r) => adm.reference = r,
                None => {
                    return Err(format!(
                        "{}: no source shows the version of the archive the interrupted run \
                         read",
                        shown[0]
                    ));
                }
            }
        }
        let admitted = Admitted { mode: adm.mode, reference: adm.reference, length: adm.length };
        st.admitted = Some(admitted);
        st.window = Window::new(st.window.capacity(), adm.length, self.fixed.from);
        let dropped: Vec<(usize, String)> = adm.dropped;
        for (i, why) in &dropped {
            st.sources[*i].status = Status::Dropped(why.clone());
            self.mark_dropped(*i, why);
        }
        self.activate(&mut st, adm.reference);
        if adm.mode == Mode::Pieces {
            let sample = st.sources[adm.reference].sample.clone().unwrap_or_default();
            let from = self.fixed.from;
            if !sample.is_empty() {
                let end = from + sample.len() as u64;
                st.window.make(from, Some(end), true);
                let mut block = st.window.block();
                block[..sample.len()].copy_from_slice(&sample);
                st.window.publish(
                    from,
                    0,
                    from,
                    Chunk { block, pos: 0, len: sample.len() },
                    false,
                    0.0,
                );
                let r = adm.reference;
                st.sources[r].delivered += sample.len() as u64;
                self.stats.downloaded.fetch_add(sample.len() as u64, Ordering::Relaxed);
                self.stats.sources[r].bytes.fetch_add(sample.len() as u64, Ordering::Relaxed);
            }
            st.sample = Some(sample);
            for i in 0..st.sources.len() {
                if i == adm.reference || st.sources[i].status != Status::Starting {
                    continue;
                }
                if matches!(st.sources[i].seen, Seen::Pending) {
                    continue;
                }
                match self.check_sample(&st, i) {
                    Ok(()) => self.activate(&mut st, i),
                    Err(why) => self.drop_source(&mut st, i, why),
                }
            }
        }
        // Said now that the run goes on (with none left, admit failed with one line).
        let names: Vec<String> =
            dropped.iter().map(|(i, _)| st.sources[*i].given.clone()).collect();
        drop(st);
        for ((_, why), name) in dropped.iter().zip(names) {
            self.say(&name, &format!("{why}; not used"));
        }
        self.wake_work();
        Ok(admitted)
    }

    fn resumed(&self) -> bool {
        self.fixed.expect_length.is_some()
    }

    /// Whether a source's first answer could make it the reference.
    fn may_lead(&self, s: &Live) -> bool {
        match s.seen {
            Seen::Ranges { pinned: true, .. } => !self.resumed() || s.proven,
            Seen::Ranges { .. } | Seen::Whole { .. } => !self.resumed(),
            _ => false,
        }
    }

    /// Marks a source dropped in the stats.
    fn mark_dropped(&self, source: usize, why: &str) {
        let s = &self.stats.sources[source];
        s.state.store(SOURCE_DROPPED, Ordering::Relaxed);
        *s.dropped.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.to_string());
    }

    /// Drops a source with its line; with none left, the download fails with one line.
    pub fn drop_source(&self, st: &mut State, source: usize, why: String) {
        if matches!(st.sources[source].status, Status::Dropped(_)) {
            return;
        }
        st.sources[source].status = Status::Dropped(why.clone());
        self.mark_dropped(source, &why);
        let left = st.sources.iter().filter(|s| !matches!(s.status, Status::Dropped(_))).count();
        if left == 0 {
            let seen: Vec<Seen> = st
                .sources
                .iter()
                .map(|s| match &s.status {
                    Status::Dropped(w) => Seen::Failed(w.clone()),
                    _ => Seen::Pending,
                })
                .collect();
            let shown: Vec<String> = st.sources.iter().map(|s| s.given.clone()).collect();
            if st.failed.is_none() {
                st.failed = Some(sources::every_source_failed(&seen, &shown));
            }
            self.data.notify_all();
        } else if st.admitted.is_some() {
            let given = st.sources[source].given.clone();
            let s = if left == 1 { "" } else { "s" };
            self.say(&given, &format!("{why}; dropped, the run goes on with {left} source{s}"));
        }
        self.work.notify_all();
    }

    /// A first answer's address after redirects and its validator; `proven`: it showed the
    /// version a resumed run expects.
    pub fn first_seen(&self, source: usize, a: &Answer, proven: bool) {
        let mut st = self.lock();
        let s = &mut st.sources[source];
        s.url = a.url.clone();
        s.validator = a.validator.clone();
        s.proven = proven;
    }

    /// Whether the source's first answer was a range (206).
    pub fn answered_ranges(&self, source: usize) -> bool {
        matches!(self.lock().sources[source].seen, Seen::Ranges { .. })
    }

    /// The archive's length, once admitted.
    pub fn length(&self) -> Option<u64> {
        self.lock().admitted.and_then(|a| a.length)
    }

    /// A source's address after redirects and what its first answer showed.
    pub fn source_view(&self, source: usize) -> (String, Url, Validator, Seen) {
        let st = self.lock();
        let s = &st.sources[source];
        (s.given.clone(), s.url.clone(), s.validator.clone(), s.seen.clone())
    }

    /// A block not handed in goes back.
    pub fn recycle(&self, block: Box<[u8]>) {
        self.lock().window.give_back(block, false);
    }

    /// The kept first answer of a whole download, if it was one (200 from byte 0).
    pub fn take_whole_answer(&self, source: usize) -> Option<Answer> {
        self.lock().sources[source].whole.take()
    }

    // ---- jobs -----------------------------------------------------------------------------

    /// The next job for connection `ctx`, waiting for one; None when it is to end (its
    /// source dropped or given fewer connections, the download over).
    pub fn next_job(&self, ctx: &Ctx) -> Option<Task> {
        let mut st = self.lock();
        loop {
            if st.cancel || st.failed.is_some() {
                return None;
            }
            let Some(adm) = st.admitted else {
                st = self.wait_work(st, None);
                continue;
            };
            let s = &st.sources[ctx.source];
            match &s.status {
                Status::Dropped(_) => return self.leave(st, ctx),
                Status::Starting => {
                    st = self.wait_work(st, None);
                    continue;
                }
                Status::Active => {}
            }
            if adm.mode == Mode::Whole {
                // One connection reads the one answer; nothing for others.
                if ctx.index == 0 && ctx.source == adm.reference && !st.whole_taken {
                    st.whole_taken = true;
                    return Some(Task::Whole);
                }
                return self.leave(st, ctx);
            }
            // Connections 0..target take pieces; one more, while the ceiling allows, stands by
            // for urgent work (`schedule::assign`'s standby).
            if ctx.index > s.target || ctx.index >= s.ceiling {
                return self.leave(st, ctx);
            }
            if s.failures > 0 && s.trying.is_some_and(|c| c != ctx.conn) {
                st = self.wait_work(st, None);
                continue;
            }
            if let Some(until) = s.rest_until {
                let now = Instant::now();
                if now < until {
                    st = self.wait_work(st, Some(until - now));
                    continue;
                }
            }
            match self.decide(&mut st, ctx) {
                Some(task) => return Some(task),
                None => {
                    st = self.wait_work(st, None);
                }
            }
        }
    }

    fn leave(&self, mut st: MutexGuard<'_, State>, ctx: &Ctx) -> Option<Task> {
        st.sources[ctx.source].alive.retain(|&i| i != ctx.index);
        None
    }

    /// `schedule::assign` for `ctx` on the window as it is: the task, attached; None: wait.
    fn decide(&self, st: &mut State, ctx: &Ctx) -> Option<Task> {
        let now = self.now();
        // A source with a stalled fetcher (a mirror that went silent) takes no new piece
        // until the stall ends in bytes or in a failure, and does not count as fast.
        let mut stalled = vec![false; st.sources.len()];
        for (_, _, _, fetchers) in st.window.fetching() {
            for f in fetchers {
                if self.judge(st, f, now).stalled {
                    stalled[f.source] = true;
                }
            }
        }
        if stalled[ctx.source] {
            return None;
        }
        let speeds: Vec<Speed> = st
            .sources
            .iter()
            .zip(&stalled)
            .map(|(s, &stalled)| if s.usable() && !stalled { s.speed } else { Speed::default() })
            .collect();
        let length = st.admitted.and_then(|a| a.length).unwrap_or(0);
        let connections = st.sources.iter().filter(|s| s.usable()).map(|s| s.target).sum();
        let potential = st
            .sources
            .iter()
            .zip(&speeds)
            .filter_map(|(s, speed)| speed.per_conn.map(|r| r * s.target as f64))
            .sum();
        let w = schedule::Window {
            next: st.window.next(),
            length,
            free: st.window.free_bytes(),
            capacity: st.window.capacity(),
            reader: st.window.reader(),
            drain: self.drain(st),
            potential,
            connections,
            now,
        };
        let orphan = st.window.orphan().map(|(start, filled, end)| Held {
            start,
            end,
            filled,
            holds: false,
            fetcher: None,
            fetchers: 0,
        });
        let holds = st.waiting_since.is_some() || w.free < schedule::MIN_PIECE;
        let head = st.window.head().map(|(start, filled, end, fetchers)| Held {
            start,
            end,
            filled,
            holds,
            fetcher: fetchers.first().map(|f| self.judge(st, f, now)),
            fetchers: fetchers.len(),
        });
        let standby = ctx.index >= st.sources[ctx.source].target;
        let job =
            schedule::assign(ctx.source, &speeds, &w, orphan.as_ref(), head.as_ref(), standby);
        let task = match job {
            Job::Resume { start, from, end } => Task::Piece { start, from, end, copy: false },
            Job::Copy { start, from, end } => {
                self.stats.copies.fetch_add(1, Ordering::Relaxed);
                Task::Piece { start, from, end, copy: true }
            }
            Job::Fresh { start, end } => {
                st.window.make(start, Some(end), true);
                Task::Piece { start, from: start, end, copy: false }
            }
            Job::Wait => {
                if w.next < w.length && !standby {
                    let size = schedule::piece_size(ctx.source, &speeds, &w);
                    if size > w.free {
                        st.room_wanted = st.room_wanted.min(size);
                    }
                }
                return None;
            }
        };
        if let Task::Piece { start, .. } = task {
            let f =
                Fetching { conn: ctx.conn, source: ctx.source, since: now, bytes: 0, last: now };
            st.window.attach(start, f);
        }
        Some(task)
    }

    /// A fetcher as the scheduler sees it: its rate, and whether it stalled. Its rate is its
    /// source's connections', bounded by its own progress once it has fetched for
    /// JUDGE_AFTER (what it brought over its time; before its first block, a block over its
    /// time is more than it can bring): a source's speed measured on its first pieces can be a
    /// burst, and a slow fetcher on the head must be seen for what it is before the reader
    /// has waited long.
    fn judge(&self, st: &State, f: &Fetching, now: f64) -> schedule::Fetcher {
        let s = &st.sources[f.source];
        let took = now - f.since;
        let own = match f.bytes {
            _ if took < JUDGE_AFTER => None,
            0 => Some(BLOCK as f64 / took),
            b => Some(b as f64 / took),
        };
        let rate = match (s.speed.per_conn, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let block_time = s.speed.per_conn.map_or(0.0, |r| BLOCK as f64 / r);
        // Under --limit-rate a connection waits for its share of the cap between blocks.
        let connections: usize = st.sources.iter().filter(|s| s.usable()).map(|s| s.target).sum();
        let capped = self
            .limiter
            .as_ref()
            .map_or(0.0, |l| BLOCK as f64 * connections.max(1) as f64 / l.rate());
        let quiet = now - f.last;
        let suspect = STALL_SUSPECT.max(4.0 * block_time + 4.0 * s.speed.first_byte);
        let stalled = quiet > suspect.max(2.0 * capped);
        schedule::Fetcher { source: f.source, rate, stalled }
    }

    /// Bytes a second the reader consumes, over the conductor's recent samples.
    fn drain(&self, st: &State) -> Option<f64> {
        st.drain.filter(|d| *d > 0.0)
    }

    // ---- what connections hand in ----------------------------------------------------------

    /// A block to read into.
    pub fn block(&self) -> Box<[u8]> {
        self.lock().window.block()
    }

    /// A whole answer's next block, once the window has room for it; None when the download
    /// stops.
    pub fn whole_block(&self) -> Option<Box<[u8]>> {
        let mut st = self.lock();
        loop {
            if st.cancel || st.failed.is_some() {
                return None;
            }
            if st.window.reserve_block() {
                return Some(st.window.block());
            }
            st.room_wanted = st.room_wanted.min(BLOCK);
            st = self.wait_work(st, None);
        }
    }

    /// Makes the one piece of a whole download (from `from`, to the end).
    pub fn make_whole(&self) {
        let mut st = self.lock();
        let length = st.admitted.and_then(|a| a.length);
        let from = self.fixed.from;
        st.window.make(from, length, false);
    }

    /// Hands in `n` bytes read into `block`: the piece at `start`'s bytes from `at`.
    /// `whole_block`: a whole answer's block, reserved on its own.
    pub fn publish(
        &self,
        ctx: &Ctx,
        start: u64,
        at: u64,
        block: Box<[u8]>,
        n: usize,
        whole_block: bool,
    ) -> Published {
        let now = self.now();
        let mut st = self.lock();
        let got = st.window.publish(
            start,
            ctx.conn,
            at,
            Chunk { block, pos: 0, len: n },
            whole_block,
            now,
        );
        if n > 0 {
            let s = &mut st.sources[ctx.source];
            if s.failures > 0 {
                // A byte: the failures in a row end, and its other connections may go on.
                s.failures = 0;
                s.trying = None;
                self.stats.sources[ctx.source].state.store(SOURCE_IN_USE, Ordering::Relaxed);
                self.work.notify_all();
            }
        }
        if let Published::Kept { n: kept, .. } = got {
            st.sources[ctx.source].delivered += kept as u64;
            self.stats.downloaded.fetch_add(kept as u64, Ordering::Relaxed);
            self.stats.sources[ctx.source].bytes.fetch_add(kept as u64, Ordering::Relaxed);
        }
        // The reader waits on the first piece in the window (the block that completes it
        // moves the first incomplete piece on, so that is not the one to compare with).
        let wake = st.waiting_since.is_some() && st.window.first_start().is_none_or(|f| f == start);
        drop(st);
        if wake {
            self.data.notify_one();
        }
        got
    }

    /// A whole answer of unknown length ended.
    pub fn end_whole(&self) {
        let mut st = self.lock();
        st.window.end_whole(self.fixed.from);
        drop(st);
        self.data.notify_all();
    }

    /// `ctx` is done with the piece at `start` (complete, beaten, or stopped): it leaves it.
    /// `took`: the request's time and bytes, and its time to the first byte, for the
    /// source's speed.
    pub fn done(&self, ctx: &Ctx, start: u64, measured: Option<(f64, u64, f64)>) {
        let mut st = self.lock();
        st.window.detach(start, ctx.conn);
        if let Some((secs, bytes, first)) = measured {
            let s = &mut st.sources[ctx.source];
            s.speed = s.speed.measured(secs, bytes, first, self.now());
        }
        let orphaned = st.window.orphan().is_some();
        drop(st);
        if orphaned {
            self.work.notify_all();
        }
    }

    /// An attempt of `ctx` on the piece at `start` failed at byte `at`: the piece is left to
    /// others (an orphan), and the source rests, retries with one connection, or is dropped
    /// (`retry::transient`, `--retries`). `progressed`: bytes came before the failure.
    #[allow(clippy::too_many_arguments)]
    pub fn attempt_failed(
        &self,
        ctx: &Ctx,
        start: u64,
        at: u64,
        failure: Failure,
        text: &str,
        progressed: bool,
        retry_after: Option<Duration>,
    ) {
        let mut st = self.lock();
        st.window.detach(start, ctx.conn);
        if st.cancel || st.failed.is_some() {
            return;
        }
        let beaten = st.window.complete(start);
        let s = &mut st.sources[ctx.source];
        if beaten || matches!(s.status, Status::Dropped(_)) {
            // Another copy has the piece: this failure costs nothing.
            drop(st);
            self.work.notify_all();
            return;
        }
        if !retry::transient(failure, false) {
            let why = format!("{text} at byte {at}");
            let why = if matches!(failure, Failure::Protocol) { text.to_string() } else { why };
            self.drop_source(&mut st, ctx.source, why);
            drop(st);
            self.wake_all();
            return;
        }
        if progressed {
            s.failures = 0;
        }
        s.failures += 1;
        let failures = s.failures;
        if failures > self.fixed.retries {
            let why = format!("{text} at byte {at}; gave up after {} retries", self.fixed.retries);
            self.drop_source(&mut st, ctx.source, why);
            drop(st);
            self.wake_all();
            return;
        }
        let wait = retry::wait(failures, retry_after);
        s.rest_until = Some(Instant::now() + wait);
        s.trying = Some(ctx.conn);
        let given = s.given.clone();
        self.stats.sources[ctx.source].state.store(SOURCE_RETRYING, Ordering::Relaxed);
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        drop(st);
        self.say(
            &given,
            &format!(
                "{text} at byte {at}; retry {failures} of {}{}",
                self.fixed.retries,
                match wait.as_secs_f64() {
                    0.0 => String::new(),
                    s => format!(" in {s:.0} s"),
                }
            ),
        );
        self.work.notify_all();
    }

    /// Fails the download for a whole answer's error (one source: as it always did).
    pub fn whole_failed(&self, source: usize, why: String) {
        let mut st = self.lock();
        self.drop_source(&mut st, source, why);
        drop(st);
        self.wake_all();
    }

    /// A request opened or closed on `source`.
    pub fn request(&self, source: usize, open: bool) {
        let s = &self.stats.sources[source];
        if open {
            let n = self.stats.connections.fetch_add(1, Ordering::Relaxed) + 1;
            self.stats.most.fetch_max(n, Ordering::Relaxed);
            let k = s.connections.fetch_add(1, Ordering::Relaxed) + 1;
            s.most.fetch_max(k, Ordering::Relaxed);
        } else {
            self.stats.connections.fetch_sub(1, Ordering::Relaxed);
            s.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Sleeps `d`, or less when the download stops; false when it stopped.
    pub fn pause(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut st = self.lock();
        loop {
            if st.cancel || st.failed.is_some() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            st = self.wait_work(st, Some(deadline - now));
        }
    }
}
