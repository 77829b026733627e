//! The connections and the reorder window (actions): each connection thread takes the next
//! piece once the window has room for it, fetches it with retries from the byte where an
//! attempt stopped, and hands its bytes over in 256 KiB blocks; the reader takes the blocks
//! of the head piece in order. Decisions come from ranges.rs, retry.rs and validator.rs.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use sha2::{Digest, Sha256};
use url::Url;

use super::floor::{self, Floor};
use super::http::{Answer, Client, Failed};
use super::ranges::{self, BLOCK, Resume};
use super::retry::{self, Failure};
use super::source::Sign;
use super::validator::{self, ContentRange, Validator};
use crate::report::progress::NetStats;

/// What one connection thread is given.
pub struct Job {
    pub start: u64,
    pub end: Option<u64>,
}

/// What a download is, decided when it was opened (`super::open`).
pub struct Fixed {
    /// The address as given, for messages (a password hidden: `super::shown`).
    pub given: String,
    pub validator: Validator,
    pub length: Option<u64>,
    /// The first byte fetched (0 unless resuming at an offset).
    pub from: u64,
    pub piece: u64,
    pub window: u64,
    pub retries: u32,
    /// `--min-rate` (bytes/s, 0: none) over `--stall-timeout` (`floor.rs`).
    pub min_rate: u64,
    pub stall: Duration,
    /// Pieces on several connections, or one whole response.
    pub pieces: bool,
    /// How a dropped whole response continues.
    pub resume: Resume,
    pub quiet: bool,
    /// Signs each request to the source's endpoint (an S3 object), None for a plain URL.
    pub sign: Option<Arc<dyn Sign>>,
}

/// The download shared by its connection threads and its reader; its `Fixed` part is read
/// through it (`sh.piece`).
pub struct Shared {
    fixed: Fixed,
    pub client: Client,
    /// The address requests go to (after redirects).
    pub url: Mutex<Url>,
    pub stats: Arc<NetStats>,
    state: Mutex<State>,
    /// The reader waits here for the head piece's next block (one waiter: `reader_waiting`).
    data: Condvar,
    /// Connections wait here for room in the window, and retries for their time to pass.
    room: Condvar,
    sink: Mutex<Sink>,
}

#[derive(Default)]
struct State {
    /// Bytes reserved in the window: pieces assigned and not yet consumed, blocks of a whole
    /// response being read.
    used: u64,
    next_piece: u64,
    /// The pieces assigned and not consumed, by their first byte.
    pieces: BTreeMap<u64, Piece>,
    /// Blocks consumed, for reuse.
    free: Vec<Box<[u8]>>,
    /// The first answer, for the connection that takes the first piece.
    first: Option<Answer>,
    failed: Option<String>,
    cancel: bool,
    /// Who waits, so a change wakes only those it concerns (waking every connection for each
    /// block consumed cost a tenth of the CPU on 8 connections).
    reader_waiting: bool,
    room_waiters: usize,
}

struct Piece {
    end: Option<u64>,
    blocks: VecDeque<(Box<[u8]>, usize)>,
    /// Reserved whole when assigned (ranged pieces), or block by block (a whole response).
    reserved: bool,
    done: bool,
}

/// The reader's side: the block being consumed, and what consumed bytes feed.
pub struct Sink {
    cur: Option<(Box<[u8]>, usize, usize)>,
    /// Bytes consumed: the archive offset of the next byte.
    pub at: u64,
    pub hasher: Option<Sha256>,
    pub keep: Option<std::fs::File>,
    eof: bool,
}

impl std::ops::Deref for Shared {
    type Target = Fixed;
    fn deref(&self) -> &Fixed {
        &self.fixed
    }
}

impl Shared {
    pub fn new(
        fixed: Fixed,
        client: Client,
        first: Answer,
        stats: Arc<NetStats>,
        sink: (Option<Sha256>, Option<std::fs::File>),
    ) -> Shared {
        let url = Mutex::new(first.url.clone());
        let state = State { first: Some(first), ..State::default() };
        let sink = Sink { cur: None, at: fixed.from, hasher: sink.0, keep: sink.1, eof: false };
        Shared {
            fixed,
            client,
            url,
            stats,
            state: Mutex::new(state),
            data: Condvar::new(),
            room: Condvar::new(),
            sink: Mutex::new(sink),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for room in the window (or the end of a retry's pause, a failure, a cancel).
    fn wait_room<'a>(
        &self,
        mut g: MutexGuard<'a, State>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, State> {
        g.room_waiters += 1;
        let mut g = match timeout {
            Some(t) => self.room.wait_timeout(g, t).unwrap_or_else(|e| e.into_inner()).0,
            None => self.room.wait(g).unwrap_or_else(|e| e.into_inner()),
        };
        g.room_waiters -= 1;
        g
    }

    fn wait_data<'a>(&self, mut g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        g.reader_waiting = true;
        let mut g = self.data.wait(g).unwrap_or_else(|e| e.into_inner());
        g.reader_waiting = false;
        g
    }

    fn wake_all(&self) {
        self.data.notify_all();
        self.room.notify_all();
    }

    pub fn cancel(&self) {
        self.lock().cancel = true;
        self.wake_all();
    }

    fn fail(&self, msg: String) {
        let mut st = self.lock();
        if st.failed.is_none() {
            st.failed = Some(msg);
        }
        drop(st);
        self.wake_all();
    }

    /// The whole response as the one piece (no window reservation up front).
    pub fn whole(&self) -> Job {
        let mut st = self.lock();
        st.pieces.insert(
            self.from,
            Piece { end: self.length, blocks: VecDeque::new(), reserved: false, done: false },
        );
        st.next_piece = 1;
        Job { start: self.from, end: self.length }
    }

    /// The next piece, once the window has room for it; None when there is none left or the
    /// download stops.
    fn assign(&self) -> Option<Job> {
        if !self.pieces {
            return None;
        }
        let length = self.length?;
        let mut st = self.lock();
        loop {
            if st.cancel || st.failed.is_some() {
                return None;
            }
            let (start, end) = ranges::piece(st.next_piece, self.piece, self.from, length)?;
            let len = end - start;
            if st.used + len <= self.window || st.pieces.is_empty() {
                st.used += len;
                st.next_piece += 1;
                let piece =
                    Piece { end: Some(end), blocks: VecDeque::new(), reserved: true, done: false };
                st.pieces.insert(start, piece);
                return Some(Job { start, end: Some(end) });
            }
            st = self.wait_room(st, None);
        }
    }

    /// Sleeps `d`, or less when the download stops; false when it stopped.
    fn pause(&self, d: Duration) -> bool {
        let deadline = std::time::Instant::now() + d;
        let mut st = self.lock();
        loop {
            if st.cancel || st.failed.is_some() {
                return false;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return true;
            }
            st = self.wait_room(st, Some(deadline - now));
        }
    }

    fn stopped(&self) -> bool {
        let st = self.lock();
        st.cancel || st.failed.is_some()
    }

    /// A block to read into: for a whole response, once the window has room for it.
    fn block(&self, reserved: bool) -> Option<Box<[u8]>> {
        let mut st = self.lock();
        if !reserved {
            while st.used + BLOCK > self.window && !st.cancel && st.failed.is_none() {
                st = self.wait_room(st, None);
            }
            if st.cancel || st.failed.is_some() {
                return None;
            }
            st.used += BLOCK;
        }
        Some(st.free.pop().unwrap_or_else(|| vec![0u8; BLOCK as usize].into_boxed_slice()))
    }

    /// Hands `n` bytes of `block` over as piece `start`'s next (an empty block goes back).
    fn publish(&self, start: u64, block: Box<[u8]>, n: usize) {
        let mut st = self.lock();
        let piece = st.pieces.get_mut(&start).expect("a piece being fetched is in the window");
        let reserved = piece.reserved;
        if n > 0 {
            piece.blocks.push_back((block, n));
        } else {
            st.free.push(block);
        }
        if !reserved {
            st.used -= BLOCK - n as u64;
        }
        let wake =
            st.reader_waiting && st.pieces.first_key_value().is_some_and(|(k, _)| *k == start);
        drop(st);
        self.stats.downloaded.fetch_add(n as u64, Ordering::Relaxed);
        if wake {
            self.data.notify_one();
        }
    }

    fn done(&self, start: u64) {
        let mut st = self.lock();
        if let Some(p) = st.pieces.get_mut(&start) {
            p.done = true;
        }
        let wake = st.reader_waiting;
        drop(st);
        if wake {
            self.data.notify_one();
        }
    }

    /// Takes the consumer's next block: Ok(None) at the end of the download.
    fn next_block(&self, at: u64) -> io::Result<Option<(Box<[u8]>, usize)>> {
        let mut st = self.lock();
        loop {
            if let Some(e) = &st.failed {
                return Err(io::Error::other(e.clone()));
            }
            if st.cancel {
                return Err(io::Error::other("the download was stopped"));
            }
            if let Some(mut head) = st.pieces.first_entry() {
                if let Some(b) = head.get_mut().blocks.pop_front() {
                    return Ok(Some(b));
                }
                let p = head.get();
                if p.done {
                    let last = p.end.is_none() || p.end == self.length;
                    head.remove();
                    if last {
                        return Ok(None);
                    }
                    continue;
                }
            } else if self.length.is_some_and(|l| at >= l) {
                return Ok(None);
            }
            st = self.wait_data(st);
        }
    }

    fn consumed(&self, block: Box<[u8]>, n: usize) {
        let mut st = self.lock();
        st.used -= n as u64;
        st.free.push(block);
        // Wake the waiting connections once what they wait for fits: a piece, or a block.
        let need = if self.pieces { self.piece } else { BLOCK };
        let wake = st.room_waiters > 0 && self.window - st.used.min(self.window) >= need;
        drop(st);
        if wake {
            self.room.notify_all();
        }
    }

    /// The reader's read: the next bytes in archive order, fed to the checksum and the kept
    /// copy as they go. As a regular file's read, it fills `out` unless the archive ends (or
    /// the download fails: the bytes before the failure come first, the error at the next
    /// call), so the decoders see the same reads as from a file, whatever the pieces and
    /// blocks the bytes arrived in.
    pub fn read(&self, out: &mut [u8]) -> io::Result<usize> {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while n < out.len() && !sink.eof {
            if let Some((block, pos, len)) = &mut sink.cur {
                let k = (*len - *pos).min(out.len() - n);
                out[n..n + k].copy_from_slice(&block[*pos..*pos + k]);
                *pos += k;
                n += k;
                if *pos == *len {
                    let (block, _, len) = sink.cur.take().expect("just matched");
                    self.consumed(block, len);
                }
                continue;
            }
            match self.next_block(sink.at + n as u64) {
                Ok(Some((block, len))) => sink.cur = Some((block, 0, len)),
                Ok(None) => sink.eof = true,
                Err(e) if n == 0 => return Err(e),
                Err(_) => break,
            }
        }
        sink.at += n as u64;
        let done = &out[..n];
        if let Some(h) = &mut sink.hasher {
            h.update(done);
        }
        if let Some(f) = &mut sink.keep {
            f.write_all(done)
                .map_err(|e| io::Error::new(e.kind(), format!("--keep-archive: {e}")))?;
        }
        Ok(n)
    }

    pub fn sink(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One line per retry on stderr, unless a progress bar counts them or -q.
    fn say(&self, line: &str) {
        if !self.quiet && !self.stats.bar.load(Ordering::Relaxed) {
            crate::report::info(&crate::report::said(format_args!("{}: {line}", self.given)));
        }
    }
}

/// A connection thread: pieces until none are left, or the one whole response.
pub fn connection(shared: Arc<Shared>, first_job: Option<Job>) {
    let mut job = first_job;
    loop {
        let Some(j) = job.take().or_else(|| shared.assign()) else { return };
        if let Err(e) = fetch(&shared, &j) {
            shared.fail(format!("{}: {e}", shared.given));
            return;
        }
    }
}

/// Fetches bytes `job.start..job.end`, retrying from where each attempt stopped.
fn fetch(sh: &Shared, job: &Job) -> Result<(), String> {
    let mut at = job.start;
    let mut failures = 0u32;
    let reserved = sh.pieces;
    let first = {
        let mut st = sh.lock();
        if job.start == sh.from { st.first.take() } else { None }
    };
    let mut answer = first;
    loop {
        if Some(at) == job.end || sh.stopped() {
            sh.done(job.start);
            return Ok(());
        }
        // The first answer was checked when the download was opened.
        let (attempt, checked) = match answer.take() {
            Some(a) => (Ok(a), true),
            None => (request(sh, at, job.end), false),
        };
        sh.stats.connections.fetch_add(1, Ordering::Relaxed);
        let outcome = attempt.and_then(|a| {
            let skip = if checked { 0 } else { accept(sh, &a, at, job.end)? };
            read_body(sh, a, job, &mut at, skip, reserved)
        });
        sh.stats.connections.fetch_sub(1, Ordering::Relaxed);
        let (failure, text, progressed, asked) = match outcome {
            Ok(()) => {
                sh.done(job.start);
                return Ok(());
            }
            Err(Attempt { failed, progressed, retry_after }) => {
                (failed.failure, failed.text, progressed, retry_after)
            }
        };
        if sh.stopped() {
            return Ok(());
        }
        if progressed {
            failures = 0;
        }
        failures += 1;
        if !retry::transient(failure, false) {
            return Err(text);
        }
        if !sh.pieces && sh.resume == Resume::Never {
            return Err(format!(
                "{text} at byte {at}; the server gives no ETag or Last-Modified to check a \
                 second request against, so the download cannot continue"
            ));
        }
        if failures > sh.retries {
            return Err(format!("{text} at byte {at}; gave up after {} retries", sh.retries));
        }
        let wait = retry::wait(failures, asked);
        sh.stats.retries.fetch_add(1, Ordering::Relaxed);
        sh.say(&format!(
            "{text} at byte {at}; retry {failures} of {}{}",
            sh.retries,
            match wait.as_secs_f64() {
                0.0 => String::new(),
                s => format!(" in {s:.0} s"),
            }
        ));
        if !sh.pause(wait) {
            return Ok(());
        }
    }
}

/// A failed attempt: why, whether it brought bytes first, and what Retry-After asked.
struct Attempt {
    failed: Failed,
    progressed: bool,
    retry_after: Option<Duration>,
}

impl From<Failed> for Attempt {
    fn from(failed: Failed) -> Attempt {
        Attempt { failed, progressed: false, retry_after: None }
    }
}

/// The request for bytes `at..end` after the first: ranged, with If-Range; or, for a
/// whole response from a server without ranges, the whole file again.
fn request(sh: &Shared, at: u64, end: Option<u64>) -> Result<Answer, Attempt> {
    let url = sh.url.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let range = match sh.resume {
        Resume::Restart if !sh.pieces => None,
        _ => Some((at, end.map(|e| e - 1))),
    };
    Ok(sh.client.get(&url, sh.sign.as_deref(), range, sh.validator.if_range())?)
}

/// Checks an answer to a request for `at..end`; Ok(bytes to pass over first) — the start of a
/// whole file sent again, up to `at`.
fn accept(sh: &Shared, a: &Answer, at: u64, end: Option<u64>) -> Result<u64, Attempt> {
    let fatal = |text: String| Attempt::from(Failed::new(Failure::Protocol, text));
    if let Some(why) = sh.validator.changed(&a.validator) {
        return Err(fatal(format!("the file changed on the server during the download: {why}")));
    }
    match a.status {
        206 => {
            if !validator::range_is(a.content_range, at, end.map(|e| e - 1), sh.length) {
                return Err(fatal(format!(
                    "asked for bytes {at}-{} of {}, the server answered Content-Range {}",
                    end.map_or(String::new(), |e| (e - 1).to_string()),
                    sh.length.map_or("*".to_string(), |l| l.to_string()),
                    describe(a.content_range)
                )));
            }
            Ok(0)
        }
        200 if sh.resume == Resume::Restart && !sh.pieces => {
            if a.content_length != sh.length {
                return Err(fatal(format!(
                    "the file changed on the server during the download: its length is now {}",
                    a.content_length.map_or("unknown".to_string(), |l| l.to_string())
                )));
            }
            Ok(at)
        }
        200 => Err(fatal(
            "the file changed on the server during the download: a request with If-Range got \
             the whole file (200) instead of the rest (206)"
                .to_string(),
        )),
        416 => Err(fatal(format!(
            "the file on the server no longer reaches byte {at} (416 Range Not Satisfiable): it \
             is shorter than the {} bytes it announced",
            sh.length.map_or("?".to_string(), |l| l.to_string())
        ))),
        s => {
            let failed = Failed::new(Failure::Status(s), status_text(s));
            Err(Attempt { failed, progressed: false, retry_after: a.retry_after })
        }
    }
}

/// Reads the answer's body into blocks: `skip` bytes passed over first (counted as
/// re-fetched), then bytes from `at` on, up to the job's end.
fn read_body(
    sh: &Shared,
    a: Answer,
    job: &Job,
    at: &mut u64,
    mut skip: u64,
    reserved: bool,
) -> Result<(), Attempt> {
    let mut body = a.body;
    let started = *at;
    let mut floor = Floor::new(sh.min_rate, sh.stall);
    // An attempt ended for being below --min-rate counts as progress only if it brought a
    // window's worth at that rate (`Floor::enough`).
    let enough = Floor::enough(sh.min_rate, sh.stall);
    let dropped = |e: io::Error, at: u64| Attempt {
        failed: Failed::new(super::http::io_failure(&e), reading_text(&e)),
        progressed: if floor::below(&e).is_some() { at - started >= enough } else { at > started },
        retry_after: None,
    };
    let mut scratch = Vec::new();
    while skip > 0 {
        scratch.resize(BLOCK as usize, 0);
        let want = skip.min(BLOCK) as usize;
        match floor::read(&mut body, &mut scratch[..want], &mut floor) {
            Ok(0) => return Err(dropped(io::ErrorKind::UnexpectedEof.into(), *at)),
            Ok(n) => {
                skip -= n as u64;
                sh.stats.refetched.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => return Err(dropped(e, *at)),
        }
    }
    loop {
        if Some(*at) == job.end {
            // One more read sees the body's end (nothing is left of its Content-Length), so
            // ureq puts the connection back in its pool for the next piece instead of closing
            // it: without it every piece cost a new connection (13 for 13 requests).
            let _ = body.read(&mut [0u8; 1]);
            return Ok(());
        }
        let Some(mut block) = sh.block(reserved) else { return Ok(()) };
        let room = match job.end {
            Some(e) => (e - *at).min(BLOCK) as usize,
            None => BLOCK as usize,
        };
        let mut n = 0;
        let mut error = None;
        while n < room {
            match floor::read(&mut body, &mut block[n..room], &mut floor) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        sh.publish(job.start, block, n);
        *at += n as u64;
        if let Some(e) = error {
            return Err(dropped(e, *at));
        }
        if n < room {
            // The body ended: the end of a whole response without a length, else short.
            return match job.end {
                None => Ok(()),
                Some(_) => Err(dropped(
                    io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed early"),
                    *at,
                )),
            };
        }
    }
}

fn reading_text(e: &io::Error) -> String {
    if let Some(b) = floor::below(e) {
        return b.to_string();
    }
    match super::http::io_failure(e) {
        Failure::Stalled => "stalled (no byte for the stall timeout)".to_string(),
        _ => format!("connection dropped ({e})"),
    }
}

pub fn describe(cr: Option<ContentRange>) -> String {
    match cr {
        None => "(none, or malformed)".to_string(),
        Some((r, l)) => format!(
            "bytes {}/{}",
            r.map_or("*".to_string(), |(a, b)| format!("{a}-{b}")),
            l.map_or("*".to_string(), |l| l.to_string())
        ),
    }
}

/// "404 Not Found", "503 Service Unavailable".
pub fn status_text(s: u16) -> String {
    let reason =
        ureq::http::StatusCode::from_u16(s).ok().and_then(|c| c.canonical_reason()).unwrap_or("");
    format!("{s} {reason}").trim_end().to_string()
}
