//! Multi-frame zstd decoded on several threads, read back as one stream in order.
//!
//! Agave writes snapshot archives as independent zstd frames of 32 MiB of tar stream each, so
//! frames can be decoded at once on different cores. Three parties share the work:
//!
//! - the **splitter** thread reads the compressed input in pieces, finds frame boundaries with
//!   `frames::Walker` (frame and block headers only, nothing is decompressed) and hands frames
//!   out as **jobs**: a job is one frame, or a run of small frames found in the same read
//!   (`Filling`), whose compressed bytes follow on the job's own channel (the pieces of one
//!   read in one message), each frame's first piece marked with the frame;
//! - **workers** claim queued jobs *ahead of* the one being read and decode them into pool
//!   buffers, which wait, in order, on the job's output channel: in place into adjacent
//!   buffers when the frames' headers give their size (`run_for`), else buffer by buffer;
//! - the **reader** (the `Read` impl, on the caller's thread) consumes jobs in order: a job a
//!   worker decoded is copied out of its buffers (or passed over in place, `Skip`, where the
//!   tar parser skips data); a job nobody has claimed when the reader reaches it is decoded
//!   by the reader itself straight into the caller's buffer, as the sequential decoder does.
//!   With N decoders (N-1 workers and the reader) every N-th job (0, N, 2N, ...) is left to
//!   the reader, so it decodes its share while the workers decode the jobs after it: when
//!   workers took whatever was next, the reader only ever copied (101 of the 119 frames of a
//!   4 GB archive went to the one worker on 2 CPUs). Job 0 of a single-frame archive, and
//!   jobs with a window over WORKER_MAX_WINDOW, are the reader's too.
//!
//! All three meet a job's bytes through `JobInput`, which checks that zstd ends each frame
//! where the walker found its end.
//!
//! Memory: decoded output waiting for the reader lives in the buffers of a pool of its own
//! (file data has another); jobs ahead of the reader may hold at most `ahead_cap` of them, so
//! more threads than the budget allows means fewer jobs decoded ahead, never more memory.
//! Compressed input read ahead is bounded by `input_budget` bytes, and the jobs waiting for
//! the reader by JOBS_PER_DECODER per decoder thread, each at most BATCH_FRAMES frames. A
//! worker decoding the job the reader is waiting for is never held back by the cap.
//!
//! Errors keep their place: a corrupt or truncated frame is reported when the reader reaches
//! it, as "zstd frame N (byte X of the archive): ...", so everything before it is delivered and
//! nothing after it; a failure a worker finds early in a later frame waits for its turn.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use zstd::zstd_safe::{DCtx, DParameter, InBuffer, OutBuffer, ResetDirective, get_error_name};

use super::archive_file::AlignedBuf;
use super::frames::{Carried, Event, FrameHeader, Walker};
use crate::archive::{Ahead, Lendable, Skip, UnitStart, Units};
use crate::pool::{Pool, PoolBuf, Run};

/// Compressed bytes read at a time by the splitter from a regular file, which it reads with
/// O_DIRECT where uncached (archive_file.rs): direct reads of 4 MiB keep this VM's disk near
/// its rate (`dd iflag=direct` of the 1.35 GB agave.tar.zst: 1.45 s at 4 MiB, 1.60 s at 1 MiB),
/// and `-t --threads 2` of it cold took 1.94 s against 2.22 s with 1 MiB pieces (medians of 5
/// interleaved runs).
pub const PIECE_FILE: usize = 4 << 20;

/// The same from a pipe, which returns at most what the writer has put in (64 KiB at a time
/// from a full pipe): a larger piece would only reserve more of the input budget per read.
pub const PIECE_STREAM: usize = 1 << 20;

/// How often a worker blocked on input or on the pool looks whether the run was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Largest window a worker decodes; jobs with a frame declaring more are left to the reader's
/// one decoder, so decoder memory is at most one `--max-window` plus this much per worker, at
/// any thread count. 8 MiB is what `zstd -19` uses without `--long`; Agave's level-1 and
/// level-3 frames of 32 MiB declare 512 KiB and 2 MiB.
pub const WORKER_MAX_WINDOW: u64 = 8 << 20;

/// A frame found in the same read as the job before it joins that job while the job holds
/// less than this much compressed input (and declares less than BATCH_DECODED of output), so
/// that tiny frames do not cost a job each: a job costs two channels, a queue entry, a pool
/// buffer and a hand-over between threads, ~5 µs, and 1.2 million frames of 7 bytes each
/// took 6.6 s and 329 MB with `--threads 2` where `--threads 1` took 0.32 s (issue 27).
/// Frames this large decode for ~100 µs or more, so a job of its own costs them nothing.
pub const BATCH_BYTES: usize = 32 << 10;

/// The decoded size past which a job takes no more frames, when headers declare it: its frames
/// are worth a thread of their own already.
pub const BATCH_DECODED: u64 = 1 << 20;

/// Most frames in one job: a frame costs its decoder ~0.1-0.3 µs besides its bytes, so 1,024
/// of them are ~0.2 ms of work, well above a job's cost, and a job's frames stay few.
pub const BATCH_FRAMES: u64 = 1024;

/// Jobs that may wait for the reader (queued, claimed or decoded ahead), per decoder thread:
/// enough that each worker finds work past the reader's job, few enough that the jobs' own
/// memory (their channels, ~3 KiB) stays small whatever the input's frames are like.
pub const JOBS_PER_DECODER: usize = 4;

/// Buffers the job the reader is on may hold beyond `ahead_cap`: one, so it always gets a
/// buffer when jobs ahead hold the whole cap (the reader consumes its job's in order).
pub const HEAD_EXTRA: usize = 1;

/// `ahead_cap` for a frame pool of `count` buffers: all but the reader's HEAD_EXTRA. The pool
/// is the decoder's alone (budget.rs `Pools`): FRAME_BYTES per worker by default, so each
/// worker's share holds one of Agave's 32 MiB frames whole.
pub fn ahead_cap(count: usize) -> usize {
    count.saturating_sub(HEAD_EXTRA).max(1)
}

/// Counters for the summary.
#[derive(Debug, Default)]
pub struct DecodeStats {
    /// zstd frames read to their end.
    pub frames: AtomicU64,
    /// Of those, frames a worker decoded ahead of the reader.
    pub frames_ahead: AtomicU64,
    /// Of those, frames decoded in place into adjacent buffers (`run_for`).
    pub frames_in_place: AtomicU64,
    /// The jobs those frames were decoded in (one per frame, but for runs of small ones).
    pub jobs: AtomicU64,
    /// Bytes of frames a worker decoded that the reader handed on in the worker's buffers
    /// (`Skip::lend`), and that it copied out into the caller's buffers.
    pub lent: AtomicU64,
    pub copied: AtomicU64,
}

pub struct Options {
    /// Worker threads (0: the reader decodes every frame itself).
    pub workers: usize,
    pub max_window_log: u32,
    /// Pool buffers decoded jobs may hold unread (the job the reader is on may hold
    /// HEAD_EXTRA more, so the pool has at least `ahead_cap + HEAD_EXTRA`).
    pub ahead_cap: usize,
    /// Compressed bytes read ahead, at most.
    pub input_budget: usize,
    /// Compressed bytes read at a time (PIECE_FILE or PIECE_STREAM).
    pub piece: usize,
    /// Where the input begins: a frame's start and its place in the archive (a resumed run,
    /// src/resume/), so frames are numbered and placed as in the whole archive.
    pub start: UnitStart,
}

/// A frame's place in the stream, for messages: its number and where its magic number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameAt {
    index: u64,
    offset: u64,
}

impl FrameAt {
    fn error(&self, kind: io::ErrorKind, what: &str) -> io::Error {
        io::Error::new(kind, frame_error(self.index, self.offset, what))
    }
}

/// A run of compressed bytes of a job: of one frame, or of frames of the job found one right
/// after the other in one read, sent as one run.
struct Piece {
    /// The frame that begins at its first byte, when one does (its first piece).
    starts: Option<FrameAt>,
    /// Frames that begin further on in it, each where the one before ends.
    then: u32,
    /// Where its first byte is in the stream (so where those frames begin is known too).
    offset: u64,
    bytes: Bytes,
}

enum Bytes {
    /// Bytes `start..end` of one read.
    Read { data: Arc<InputBuf>, start: usize, end: usize },
    /// The start of the frame's header, which came in earlier reads than its end.
    Carried(Carried),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Read { data, start, end } => &data.bytes[*start..*end],
            Bytes::Carried(c) => c.bytes(),
        }
    }
}

/// One read of compressed input; gives its bytes back to the input budget when dropped.
struct InputBuf {
    bytes: AlignedBuf,
    shared: Arc<Shared>,
}

impl Drop for InputBuf {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.input_used -= self.bytes.capacity();
        st.spare.push(std::mem::replace(&mut self.bytes, AlignedBuf::empty()));
        drop(st);
        self.shared.changed.notify_all();
    }
}

/// What a worker sends the reader for a job.
enum Out {
    Data(PoolBuf),
    /// The job is complete; `in_place` when it was decoded in one piece.
    End {
        in_place: bool,
    },
    Err(io::Error),
}

/// Consecutive frames decoded by one thread, in order: one frame, or a run of small ones.
struct Job {
    /// Its place among the jobs: the reader takes them in this order, and every
    /// `decoders`-th is the reader's to decode (see `work`).
    seq: u64,
    /// The largest window its frames declare (bytes).
    window: u64,
    /// The decoded size of all its frames, when each header declares its own.
    content: Option<u64>,
    /// Bytes decoded so far, by the reader (when it decodes the job itself).
    produced: u64,
    input: JobInput,
    output: Sender<Out>,
}

/// A job in stream order, as the reader will take it.
struct Entry {
    seq: u64,
    /// Its first frame (for a message), and how many it has (for the counters).
    first: FrameAt,
    frames: u64,
    /// Some until a worker or the reader claims it.
    job: Option<Job>,
    output: Receiver<Out>,
}

#[derive(Default)]
struct State {
    /// Jobs queued and not yet taken by the reader, in order.
    queue: VecDeque<Entry>,
    /// The splitter is done: the input ended (or failed, with this message).
    done: bool,
    failed: Option<String>,
    /// `seq` of the job the reader is on.
    head: u64,
    /// Decoded buffers not yet read.
    unread: usize,
    /// Compressed bytes held in pieces.
    input_used: usize,
    /// Piece buffers given back, for the splitter to read into again: a fresh 1 MiB vector
    /// per read was zeroed and page-faulted in every time (0.3-0.5 s of CPU on a 1.35 GB
    /// archive, which made a single-frame archive slower with --threads 2 than with 1).
    spare: Vec<AlignedBuf>,
    /// The reader is gone or a frame failed: stop.
    cancel: bool,
    /// Threads decoding: the workers that started and the reader. Every `decoders`-th job
    /// (seq 0, N, 2N, ...) is the reader's (see `work`).
    decoders: u64,
    /// The reader has handed buffers on (`lend`): buffers may be out with the writer, and
    /// come back on their own, so a worker waits for a run of them (`run_for`).
    lending: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled on every change anyone may wait for.
    changed: Condvar,
    /// `State::cancel`, readable without the lock.
    cancelled: AtomicBool,
    opts: Options,
}

impl Shared {
    fn cancel(&self) {
        self.lock().cancel = true;
        self.cancelled.store(true, Ordering::Relaxed);
        self.changed.notify_all();
    }

    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }
}

/// A job's compressed input as its decoder takes it: piece by piece, knowing the frame each
/// piece belongs to, so that zstd's end of each frame is checked against the walker's. The
/// decoder calls `next` when zstd has used up the piece and wants more (or has finished a
/// frame), `consume` for what zstd took, and `frame_ended` when zstd says a frame is complete.
struct JobInput {
    rx: Receiver<Vec<Piece>>,
    /// The pieces of the last message, then the one being decoded.
    pieces: std::vec::IntoIter<Piece>,
    piece: Option<Piece>,
    at: usize,
    /// The frame being decoded: the last whose first piece came (the job's first, before).
    frame: FrameAt,
    /// Frames still to begin in the current piece, and where that piece is in the stream.
    then: u32,
    offset: u64,
    /// zstd has finished `frame` (or none has begun): the next piece must begin a frame.
    frame_done: bool,
    /// Frames zstd has finished, of the job's `frames`.
    done: u64,
    frames: u64,
}

/// What `JobInput::next` found.
enum Next {
    /// Another piece: of the frame zstd is in, or the first of the next frame.
    More,
    /// The job's frames are all complete.
    End,
    /// The run was cancelled.
    Cancelled,
}

impl JobInput {
    fn new(rx: Receiver<Vec<Piece>>, first: FrameAt) -> JobInput {
        JobInput {
            rx,
            pieces: Vec::new().into_iter(),
            piece: None,
            at: 0,
            frame: first,
            then: 0,
            offset: 0,
            frame_done: true,
            done: 0,
            frames: 0,
        }
    }

    /// What is left of the current piece.
    fn rest(&self) -> &[u8] {
        self.piece.as_ref().map_or(&[], |p| &p.bytes()[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
    }

    fn error(&self, kind: io::ErrorKind, what: &str) -> io::Error {
        self.frame.error(kind, what)
    }

    /// One call of zstd's decompress_stream on what is left of the piece, into `output`: what
    /// zstd took is consumed, its error is the frame's, a frame it finished is checked
    /// (`frame_ended`). Returns zstd's hint (0: a frame ended) and the bytes it took.
    fn decompress(
        &mut self,
        dctx: &mut DCtx<'_>,
        output: &mut OutBuffer<'_, [u8]>,
    ) -> io::Result<(usize, usize)> {
        let (r, used) = {
            let mut input = InBuffer::around(self.rest());
            (dctx.decompress_stream(output, &mut input), input.pos())
        };
        self.consume(used);
        match r {
            Err(code) => Err(self.error(io::ErrorKind::InvalidData, get_error_name(code))),
            Ok(0) => self.frame_ended().map(|()| (0, used)),
            Ok(hint) => Ok((hint, used)),
        }
    }

    /// zstd has finished the current frame: nothing of its input may be left, unless the
    /// next frame begins right there in the same piece.
    fn frame_ended(&mut self) -> io::Result<()> {
        self.done += 1;
        self.frame_done = true;
        if self.rest().is_empty() {
            return Ok(());
        }
        if self.then == 0 {
            return Err(self.error(io::ErrorKind::InvalidData, "data after the frame's end"));
        }
        self.then -= 1;
        let offset = self.offset + self.at as u64;
        self.frame = FrameAt { index: self.frame.index + 1, offset };
        self.frame_done = false;
        Ok(())
    }

    /// Waits for the next piece. Where it belongs must agree with zstd: the first piece of a
    /// frame only once zstd finished the one before, more of a frame only while zstd is in it.
    fn next(&mut self, shared: &Shared) -> io::Result<Next> {
        if self.then > 0 {
            // zstd read on past where the walker found the frame's end.
            let why = "the frame is longer than its block headers say";
            return Err(self.error(io::ErrorKind::InvalidData, why));
        }
        loop {
            if let Some(p) = self.pieces.next() {
                return self.take(p);
            }
            // A message already there is taken without a timed wait (its clock reads were a
            // tenth of the CPU time of an archive of 7-byte frames).
            match self.rx.try_recv().or_else(|_| self.rx.recv_timeout(CANCEL_POLL)) {
                Ok(pieces) => self.pieces = pieces.into_iter(),
                Err(RecvTimeoutError::Timeout) if shared.cancelled() => return Ok(Next::Cancelled),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected)
                    if self.frame_done && self.done == self.frames =>
                {
                    return Ok(Next::End);
                }
                // The splitter saw the frame (or the input) end before the decoder did.
                Err(RecvTimeoutError::Disconnected) => {
                    let why = truncated(shared, self.frame);
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, why));
                }
            }
        }
    }

    /// Takes `p` as the piece to decode, if it belongs where zstd is.
    fn take(&mut self, p: Piece) -> io::Result<Next> {
        match (p.starts, self.frame_done) {
            (Some(frame), true) => {
                self.frame = frame;
                self.frame_done = false;
            }
            (None, false) => {}
            // The walker found the frame's end where zstd wants more of it.
            (Some(_), false) => {
                let why = "the compressed input ends inside the frame";
                return Err(self.error(io::ErrorKind::UnexpectedEof, why));
            }
            (None, true) => {
                return Err(self.error(io::ErrorKind::InvalidData, "data after the frame's end"));
            }
        }
        (self.then, self.offset) = (p.then, p.offset);
        self.piece = Some(p);
        self.at = 0;
        Ok(Next::More)
    }
}

/// The decoded stream (see the module doc).
pub struct ParallelZstd {
    shared: Arc<Shared>,
    stats: Arc<DecodeStats>,
    current: Current,
    dctx: DCtx<'static>,
    workers: Vec<JoinHandle<()>>,
    /// The frame pool, to wake a worker waiting for a run when the reader moves on.
    pool: Pool,
    /// Buffers were handed on (`lend`).
    lending: bool,
    /// The stream's sticky error.
    error: Option<(io::ErrorKind, String)>,
    /// Decoded bytes handed out (read or passed over), from `Options::start`'s.
    delivered: u64,
    /// Where the last jobs began: each job starts at a frame, so decoding can begin again
    /// there (`Skip::unit_at_or_before`).
    units: Units,
}

enum Current {
    /// Between jobs.
    None,
    /// Decoding this job here.
    Inline(Job),
    /// Taking what a worker decoded.
    Worker(FromWorker),
    /// No more jobs.
    Eof,
}

/// A job a worker decodes: its buffers as they come, and how far the reader is in the one
/// it is on.
struct FromWorker {
    first: FrameAt,
    frames: u64,
    rx: Receiver<Out>,
    buf: Option<PoolBuf>,
    at: usize,
}

impl FromWorker {
    /// The buffer the next bytes are in, and where in it; None at the job's end (its
    /// counters added to `stats`). Waits for the worker's next buffer when this one is used up.
    fn next_bytes(
        &mut self,
        shared: &Shared,
        stats: &DecodeStats,
    ) -> io::Result<Option<(&mut PoolBuf, usize)>> {
        loop {
            if self.buf.as_ref().is_some_and(|c| self.at < c.len()) {
                let at = self.at;
                return Ok(self.buf.as_mut().map(|c| (c, at)));
            }
            if self.buf.take().is_some() {
                release(shared, 1);
            }
            match self.rx.recv() {
                Ok(Out::Data(b)) => {
                    self.buf = Some(b);
                    self.at = 0;
                }
                Ok(Out::End { in_place }) => {
                    stats.frames.fetch_add(self.frames, Ordering::Relaxed);
                    stats.jobs.fetch_add(1, Ordering::Relaxed);
                    stats.frames_ahead.fetch_add(self.frames, Ordering::Relaxed);
                    if in_place {
                        stats.frames_in_place.fetch_add(self.frames, Ordering::Relaxed);
                    }
                    return Ok(None);
                }
                Ok(Out::Err(e)) => return Err(e),
                Err(_) => {
                    return Err(self.first.error(io::ErrorKind::Other, "the decoder stopped"));
                }
            }
        }
    }
}

impl ParallelZstd {
    pub fn new(
        input: Box<dyn Read + Send>,
        opts: Options,
        pool: Pool,
        stats: Arc<DecodeStats>,
    ) -> io::Result<ParallelZstd> {
        let workers = opts.workers;
        let max_window = 1u64 << opts.max_window_log;
        let shared = Arc::new(Shared {
            state: Mutex::new(State { decoders: workers as u64 + 1, ..State::default() }),
            changed: Condvar::new(),
            cancelled: AtomicBool::new(false),
            opts,
        });
        // The splitter may block in a read of standard input that never returns: it is not
        // joined, and ends with the process (or at its next read, when cancelled).
        let s = shared.clone();
        std::thread::Builder::new()
            .name("zstd-split".into())
            .spawn(move || Splitter::new(&s).run(input, max_window))?;
        let delivered = shared.opts.start.decoded;
        let mut dctx = DCtx::try_create().ok_or_else(|| {
            shared.cancel();
            io::Error::new(io::ErrorKind::OutOfMemory, "cannot allocate a zstd decoder")
        })?;
        let _ = dctx.set_parameter(DParameter::WindowLogMax(shared.opts.max_window_log));
        let mut this = ParallelZstd {
            shared: shared.clone(),
            stats,
            current: Current::None,
            dctx,
            workers: Vec::new(),
            pool: pool.clone(),
            lending: false,
            error: None,
            delivered,
            units: Units::default(),
        };
        // A user at RLIMIT_NPROC may get fewer workers than asked for: the reader decodes
        // what they do not.
        for i in 0..workers {
            let (s, p) = (shared.clone(), pool.clone());
            match std::thread::Builder::new().name(format!("zstd-{i}")).spawn(move || work(&s, &p))
            {
                Ok(w) => this.workers.push(w),
                Err(_) => break,
            }
        }
        shared.lock().decoders = this.workers.len() as u64 + 1;
        shared.changed.notify_all();
        Ok(this)
    }

    /// Decoder threads at work: the workers that started, and the reader.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        self.shared.cancel();
        self.error = Some((e.kind(), e.to_string()));
        e
    }

    /// Moves to the next job: claims it if nobody has, else follows its worker.
    fn next_job(&mut self) -> io::Result<()> {
        let mut st = self.shared.lock();
        loop {
            if let Some(e) = st.queue.pop_front() {
                st.head = e.seq;
                let lending = st.lending;
                drop(st);
                // Every job before it was delivered whole: it begins at `delivered`.
                let (index, compressed) = (e.first.index, e.first.offset);
                self.units.entered(UnitStart { index, compressed, decoded: self.delivered });
                // Workers look past the new head, and the splitter may queue another job; a
                // worker waiting for a run of buffers for this job streams it instead.
                self.shared.changed.notify_all();
                if lending {
                    self.pool.wake_run_waiters();
                }
                self.current = match e.job {
                    Some(job) => {
                        let _ = self.dctx.reset(ResetDirective::SessionOnly);
                        Current::Inline(job)
                    }
                    None => Current::Worker(FromWorker {
                        first: e.first,
                        frames: e.frames,
                        rx: e.output,
                        buf: None,
                        at: 0,
                    }),
                };
                return Ok(());
            }
            if st.done {
                let failed = st.failed.clone();
                drop(st);
                return match failed {
                    Some(msg) => Err(self.fail(io::Error::new(io::ErrorKind::InvalidData, msg))),
                    None => {
                        self.current = Current::Eof;
                        Ok(())
                    }
                };
            }
            st = self.shared.wait(st);
        }
    }

    /// Decodes the current inline job into `buf`; 0 at its end.
    fn read_inline(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Current::Inline(job) = &mut self.current else { unreachable!() };
        match decode_inline(&mut self.dctx, &mut job.input, &self.shared, buf) {
            Ok(Some(n)) => {
                job.produced += n as u64;
                if job.content == Some(job.produced) {
                    // All its frames declare: they are checked (a checksum, what follows)
                    // before their last bytes are given, as a read that went on would.
                    self.finish_inline()?;
                }
                Ok(n)
            }
            Ok(None) => {
                self.end_inline();
                Ok(0)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The inline job has given all its frames declare: its decoder takes what is left of
    /// its input (a checksum) and says the job ended, so that the next job's bytes, which a
    /// worker may have decoded, come from there.
    fn finish_inline(&mut self) -> io::Result<()> {
        let Current::Inline(job) = &mut self.current else { return Ok(()) };
        let mut one = [0u8];
        match decode_inline(&mut self.dctx, &mut job.input, &self.shared, &mut one) {
            Ok(None) => {
                self.end_inline();
                Ok(())
            }
            Ok(Some(_)) => {
                let why = "the frame is larger than its header says";
                let e = job.input.error(io::ErrorKind::InvalidData, why);
                Err(self.fail(e))
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The inline job is complete: counted, and the next is looked for.
    fn end_inline(&mut self) {
        if let Current::Inline(job) = &self.current {
            self.stats.frames.fetch_add(job.input.frames, Ordering::Relaxed);
            self.stats.jobs.fetch_add(1, Ordering::Relaxed);
        }
        self.current = Current::None;
    }

    /// Takes up to `want` bytes of what a worker decoded, copying them into `buf` when there
    /// is one (else they are passed over); 0 at the job's end.
    fn take_worker(&mut self, buf: Option<&mut [u8]>, want: usize) -> io::Result<usize> {
        let Current::Worker(w) = &mut self.current else { unreachable!() };
        match w.next_bytes(&self.shared, &self.stats) {
            Ok(Some((c, at))) => {
                let n = (c.len() - at).min(want);
                if let Some(buf) = buf {
                    buf[..n].copy_from_slice(&c.data()[at..at + n]);
                    self.stats.copied.fetch_add(n as u64, Ordering::Relaxed);
                }
                w.at += n;
                Ok(n)
            }
            Ok(None) => {
                self.current = Current::None;
                Ok(0)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    fn sticky(&self) -> io::Result<()> {
        match &self.error {
            Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            None => Ok(()),
        }
    }
}

impl Read for ParallelZstd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sticky()?;
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let n = match self.current {
                Current::None => {
                    self.next_job()?;
                    continue;
                }
                Current::Eof => return Ok(0),
                Current::Inline { .. } => self.read_inline(buf)?,
                Current::Worker(_) => {
                    let want = buf.len();
                    self.take_worker(Some(&mut *buf), want)?
                }
            };
            if n > 0 {
                self.delivered += n as u64;
                return Ok(n);
            }
        }
    }
}

/// A worker's job is in pool buffers already: passing over it is moving a cursor, and handing
/// it on as file data is cutting a piece of the buffer. A job the reader decodes itself is
/// not (it decodes into the caller's buffer).
impl Skip for ParallelZstd {
    fn skip_in_place(&mut self, n: u64) -> io::Result<u64> {
        self.sticky()?;
        let want = n.min(usize::MAX as u64) as usize;
        loop {
            match self.current {
                Current::None if want > 0 => self.next_job()?,
                Current::Worker(_) if want > 0 => match self.take_worker(None, want)? {
                    // The job ended: on to the next.
                    0 => {}
                    k => {
                        self.delivered += k as u64;
                        return Ok(k as u64);
                    }
                },
                _ => return Ok(0),
            }
        }
    }

    fn ahead(&mut self) -> io::Result<Ahead> {
        self.sticky()?;
        loop {
            match &mut self.current {
                Current::None => self.next_job()?,
                Current::Eof => return Ok(Ahead::Read(None)),
                Current::Inline(job) => match job.content.map(|c| c.saturating_sub(job.produced)) {
                    // Its last bytes were read: the next job's may be a worker's (a member
                    // whose data begins at a frame's start).
                    Some(0) => self.finish_inline()?,
                    left => return Ok(Ahead::Read(left)),
                },
                Current::Worker(w) => match w.next_bytes(&self.shared, &self.stats) {
                    Ok(Some((c, at))) => {
                        let (addr, len) = (c.as_ptr() as usize + at, c.len() - at);
                        return Ok(Ahead::Lend(Lendable { addr, len }));
                    }
                    Ok(None) => self.current = Current::None,
                    Err(e) => return Err(self.fail(e)),
                },
            }
        }
    }

    fn lend(&mut self, n: usize) -> io::Result<PoolBuf> {
        self.sticky()?;
        let Current::Worker(FromWorker { buf: Some(c), at, .. }) = &mut self.current else {
            return Err(io::Error::other("no decoded buffer to hand on"));
        };
        if n == 0 || n > c.len() - *at {
            return Err(io::Error::other(format!("{n} bytes asked of {}", c.len() - *at)));
        }
        // What the reader passed over goes (the buffer stays in the pool until every piece
        // of it is dropped), then the piece.
        drop(c.split_front(*at));
        *at = 0;
        let piece = c.split_front(n);
        if !self.lending {
            self.lending = true;
            self.shared.lock().lending = true;
        }
        self.stats.lent.fetch_add(n as u64, Ordering::Relaxed);
        // Handed on is delivered, as a read's bytes are (resume points count them).
        self.delivered += n as u64;
        Ok(piece)
    }

    fn unit_at_or_before(&self, t: u64) -> Option<UnitStart> {
        self.units.at_or_before(t)
    }
}

impl Drop for ParallelZstd {
    fn drop(&mut self) {
        self.shared.cancel();
        // Decoded buffers waiting in jobs' channels go back to the pool before the workers
        // are joined: one of them may be waiting for a buffer.
        self.current = Current::None;
        let queue = std::mem::take(&mut self.shared.lock().queue);
        drop(queue);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Decodes a job on the reader's thread, straight into the caller's `buf`: Some(bytes
/// written, at least 1), None at the job's end.
fn decode_inline(
    dctx: &mut DCtx<'_>,
    input: &mut JobInput,
    shared: &Shared,
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    let stopped = |input: &JobInput| input.error(io::ErrorKind::Interrupted, "the decoder stopped");
    loop {
        if input.frame_done {
            match input.next(shared)? {
                Next::More => {}
                Next::End => return Ok(None),
                Next::Cancelled => return Err(stopped(input)),
            }
        }
        let mut output = OutBuffer::around(&mut *buf);
        let (hint, _) = input.decompress(dctx, &mut output)?;
        if output.pos() > 0 {
            return Ok(Some(output.pos()));
        }
        // Nothing came out and the input is used up: the next piece.
        if hint > 0 && input.rest().is_empty() && matches!(input.next(shared)?, Next::Cancelled) {
            return Err(stopped(input));
        }
    }
}

fn frame_error(index: u64, offset: u64, what: &str) -> String {
    format!("zstd frame {index} (byte {offset} of the archive): {what}")
}

/// Why `frame` got no more input: the splitter's own failure when it stopped (it could not
/// read or allocate; set before it drops the job's channel), else the archive ends there.
fn truncated(shared: &Shared, frame: FrameAt) -> String {
    match &shared.lock().failed {
        Some(why) => why.clone(),
        None => {
            frame_error(frame.index, frame.offset, "the compressed input ends inside the frame")
        }
    }
}

/// The job the splitter is sending bytes to.
struct Filling {
    input: Sender<Vec<Piece>>,
    /// Pieces not yet sent: all of one read's for this job go in one message.
    pending: Vec<Piece>,
    /// The job and its entry's output end, until it is queued (then its decoder has it).
    unqueued: Option<(Job, Receiver<Out>, FrameAt)>,
    /// Compressed bytes sent to it.
    bytes: usize,
    /// Its last frame has not ended yet.
    open: bool,
    /// The frame whose first piece is to be sent next.
    starts: Option<FrameAt>,
}

impl Filling {
    /// Whether a frame starting now may join this job: a run of frames found in one read (a
    /// job is queued at the end of the read it began in), still small.
    fn takes_more(&self) -> bool {
        self.unqueued.as_ref().is_some_and(|(job, ..)| {
            self.bytes < BATCH_BYTES
                && job.input.frames < BATCH_FRAMES
                && job.content.is_none_or(|c| c < BATCH_DECODED)
        })
    }

    /// Sends `bytes`, which are at `offset` in the stream, to the open frame.
    fn send(&mut self, bytes: Bytes, offset: u64) {
        let piece = Piece { starts: self.starts.take(), then: 0, offset, bytes };
        self.bytes += piece.bytes().len();
        self.pending.push(piece);
    }

    /// Sends bytes `start..end` of `data` to the open frame; a frame beginning right where the
    /// last piece ends, in the same read, goes with it (1.2 million 7-byte frames cost a piece
    /// each otherwise). `base` is where the read is in the stream.
    fn send_read(&mut self, data: &Arc<InputBuf>, start: usize, end: usize, base: u64) {
        if let Some(Piece { then, bytes: Bytes::Read { data: last, end: e, .. }, .. }) =
            self.pending.last_mut()
            && self.starts.is_some()
            && Arc::ptr_eq(last, data)
            && *e == start
        {
            *e = end;
            *then += 1;
            self.starts = None;
            self.bytes += end - start;
            return;
        }
        self.send(Bytes::Read { data: data.clone(), start, end }, base + start as u64);
    }

    /// Sends the pieces not yet sent.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            // A decoder that is gone (cancelled, or failed on an earlier piece) needs no more.
            let _ = self.input.send(std::mem::take(&mut self.pending));
        }
    }
}

impl Drop for Filling {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The splitter: reads the input, walks frame boundaries, and hands frames out as jobs.
struct Splitter<'a> {
    shared: &'a Arc<Shared>,
    filling: Option<Filling>,
    /// Frames found so far, and jobs made.
    frames: u64,
    jobs: u64,
}

impl<'a> Splitter<'a> {
    fn new(shared: &'a Arc<Shared>) -> Splitter<'a> {
        let frames = shared.opts.start.index;
        Splitter { shared, filling: None, frames, jobs: 0 }
    }

    /// The input ended, or failed with this message. Only then does the input of the job
    /// being filled end (the splitter is dropped after this): its decoder reports the failure.
    fn finish(&self, failed: Option<String>) {
        let mut st = self.shared.lock();
        st.done = true;
        st.failed = failed;
        drop(st);
        self.shared.changed.notify_all();
    }

    fn run(mut self, mut input: Box<dyn Read + Send>, max_window: u64) {
        let mut walker = Walker::at(max_window, self.shared.opts.start.compressed);
        let shared = self.shared;
        let piece = shared.opts.piece;
        let budget = shared.opts.input_budget.max(piece);
        loop {
            let spare = {
                let mut st = shared.lock();
                while st.input_used + piece > budget && !st.cancel {
                    st = shared.wait(st);
                }
                if st.cancel {
                    return;
                }
                st.input_used += piece;
                st.spare.pop()
            };
            // Aligned, so that a regular file not in the page cache is read with O_DIRECT
            // (archive_file.rs). Where the address space is limited (`ulimit -v`) a new piece
            // may not be had: one line then, not an abort (a 4 MiB piece aborted the run under
            // `ulimit -v 196608` with --threads 8). Reading ahead less instead, with the
            // pieces in flight only, hung in a test: jobs ahead may hold them while the job
            // the reader waits for needs more.
            let Some(mut bytes) = spare.or_else(|| AlignedBuf::try_new(piece)) else {
                let at = walker.offset();
                return self.finish(Some(format!(
                    "cannot allocate {} MiB to read the archive into at byte {at}: out of \
                     memory (ulimit -v?); fewer --threads need less",
                    piece >> 20
                )));
            };
            bytes.set_len(piece);
            let n = loop {
                match input.read(&mut bytes) {
                    Ok(n) => break Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break Err(e),
                }
            };
            bytes.set_len(n.as_ref().copied().unwrap_or(0));
            // Capacity stays `piece`: the budget counts what was reserved.
            let data = Arc::new(InputBuf { bytes, shared: shared.clone() });
            let n = match n {
                Ok(n) => n,
                Err(e) => {
                    let at = walker.offset();
                    return self.finish(Some(format!("cannot read the archive at byte {at}: {e}")));
                }
            };
            if n == 0 {
                // The end of the input: between frames it is the end of the stream; inside a
                // frame its decoder reports the truncation when its channel closes.
                if self.filling.take().is_some() || walker.between_frames() {
                    return self.finish(None);
                }
                let (index, at) = (self.frames, walker.offset());
                return self.finish(Some(format!(
                    "zstd frame {index}: the compressed input ends inside its header, at byte {at}"
                )));
            }
            if let Err(failed) = self.route(&mut walker, &data) {
                return self.finish(failed);
            }
        }
    }

    /// Sends the bytes of one read to the frames they belong to (the bytes between frames,
    /// skippable frames, go nowhere), then queues the job that began in it. Err(Some(why))
    /// when the walk fails, Err(None) when the run was cancelled.
    fn route(&mut self, walker: &mut Walker, data: &Arc<InputBuf>) -> Result<(), Option<String>> {
        let base = walker.offset();
        let mut at = 0;
        // Bytes before this were sent, or are not a frame's.
        let mut routed = 0;
        loop {
            match walker.next(&data.bytes, &mut at) {
                Ok(None) => break,
                Ok(Some(Event::Start { offset, at: start, header, carried })) => {
                    routed = start;
                    if !self.start_frame(offset, &header, carried) {
                        return Err(None);
                    }
                }
                Ok(Some(Event::End { at: end, .. })) => {
                    self.send(data, routed, end, base);
                    routed = end;
                    self.end_frame();
                }
                Err(e) => {
                    // The frame the walk was in gets its bytes up to the structure that
                    // failed (none when that began in an earlier read) and reports this
                    // failure in its turn, or the one whose header it was reading does. Its
                    // job is queued, and its input ends once the failure is known (`run`).
                    let open = self.filling.as_ref().is_some_and(|f| f.open);
                    if open {
                        self.send(data, routed, e.at, base);
                    }
                    let index = self.frames - u64::from(open);
                    self.queue();
                    return Err(Some(frame_error(index, e.offset, &e.what)));
                }
            }
        }
        if self.filling.as_ref().is_some_and(|f| f.open) {
            self.send(data, routed, data.bytes.len(), base);
        }
        // A job is queued at the end of the read it began in, so a frame never waits for a
        // later read to be decoded; one still open goes on getting the next reads' bytes.
        if !self.queue() {
            return Err(None);
        }
        if self.filling.as_ref().is_some_and(|f| !f.open) {
            self.filling = None;
        }
        Ok(())
    }

    /// Sends bytes `start..end` of `data`, which begins at `base` in the stream, to the open
    /// frame.
    fn send(&mut self, data: &Arc<InputBuf>, start: usize, end: usize, base: u64) {
        if let Some(f) = &mut self.filling
            && f.open
            && end > start
        {
            f.send_read(data, start, end, base);
        }
    }

    /// A frame begins: it joins the job being filled if that takes more (`takes_more`), else
    /// it begins a job of its own. False when the run was cancelled.
    fn start_frame(&mut self, offset: u64, header: &FrameHeader, carried: Carried) -> bool {
        let frame = FrameAt { index: self.frames, offset };
        self.frames += 1;
        if self.filling.as_ref().is_some_and(|f| !f.takes_more()) && !self.close() {
            return false;
        }
        let f = self.filling.get_or_insert_with(|| {
            let (in_tx, in_rx) = channel();
            let (out_tx, out_rx) = channel();
            let job = Job {
                seq: self.jobs,
                window: 0,
                content: Some(0),
                produced: 0,
                input: JobInput::new(in_rx, frame),
                output: out_tx,
            };
            self.jobs += 1;
            Filling {
                input: in_tx,
                pending: Vec::new(),
                unqueued: Some((job, out_rx, frame)),
                bytes: 0,
                open: false,
                starts: None,
            }
        });
        let (job, ..) = f.unqueued.as_mut().expect("a job that takes more is unqueued");
        job.input.frames += 1;
        job.window = job.window.max(header.window);
        job.content = job.content.zip(header.content_size).and_then(|(a, b)| a.checked_add(b));
        f.open = true;
        f.starts = Some(frame);
        if !carried.bytes().is_empty() {
            f.send(Bytes::Carried(carried), offset);
        }
        true
    }

    /// The frame being sent ends; a queued job is complete then.
    fn end_frame(&mut self) {
        if let Some(f) = &mut self.filling {
            f.open = false;
            if f.unqueued.is_none() {
                self.filling = None;
            }
        }
    }

    /// Queues the job being filled if it is not yet, and sends it nothing more. False when
    /// the run was cancelled.
    fn close(&mut self) -> bool {
        let queued = self.filling.as_ref().is_none_or(|f| f.unqueued.is_none()) || self.queue();
        self.filling = None;
        queued
    }

    /// Queues the job being filled, once fewer than JOBS_PER_DECODER per decoder wait for the
    /// reader. False when the run was cancelled.
    fn queue(&mut self) -> bool {
        let Some(f) = &mut self.filling else { return true };
        f.flush();
        let Some((job, output, first)) = f.unqueued.take() else { return true };
        let mut st = self.shared.lock();
        while st.queue.len() >= st.decoders as usize * JOBS_PER_DECODER && !st.cancel {
            st = self.shared.wait(st);
        }
        if st.cancel {
            return false;
        }
        let (seq, frames) = (job.seq, job.input.frames);
        st.queue.push_back(Entry { seq, first, frames, job: Some(job), output });
        drop(st);
        self.shared.changed.notify_all();
        true
    }
}

/// A worker: claims jobs ahead of the reader and decodes them into pool buffers.
fn work(shared: &Arc<Shared>, pool: &Pool) {
    // Without a decoder (no memory: `ulimit -v`) this worker does nothing; jobs nobody
    // claims are the reader's when it reaches them.
    let Some(mut dctx) = DCtx::try_create() else { return };
    loop {
        let mut job = {
            let mut st = shared.lock();
            loop {
                if st.cancel {
                    return;
                }
                let (head, decoders) = (st.head, st.decoders);
                if let Some(job) = st
                    .queue
                    .iter_mut()
                    .filter(|e| e.seq > head && e.seq % decoders != 0)
                    .find_map(|e| e.job.take_if(|j| j.window <= WORKER_MAX_WINDOW))
                {
                    break job;
                }
                if st.done {
                    return;
                }
                st = shared.wait(st);
            }
        };
        // Parameters too: StableOutBuffer cannot be turned off in the middle of a frame, so a
        // job that failed in place left it on, and the next job streamed would fail.
        let _ = dctx.reset(ResetDirective::SessionAndParameters);
        let _ = dctx.set_parameter(DParameter::WindowLogMax(shared.opts.max_window_log));
        let msg = match decode_job(&mut dctx, &mut job, shared, pool) {
            Ok(Some(in_place)) => Out::End { in_place },
            Ok(None) => return,
            Err(e) => Out::Err(e),
        };
        let _ = job.output.send(msg);
    }
}

/// Decodes one job: in one piece into adjacent pool buffers when its headers say how big it
/// is and they can be had, else buffer by buffer as they fill. Ok(Some(in place)) when it is
/// complete, Ok(None) when cancelled.
fn decode_job(
    dctx: &mut DCtx<'_>,
    job: &mut Job,
    shared: &Arc<Shared>,
    pool: &Pool,
) -> io::Result<Option<bool>> {
    let done = |complete: bool, in_place| complete.then_some(in_place);
    match run_for(job, shared, pool) {
        Whole::Run(run) => {
            let k = run.count();
            let result = decode_whole(dctx, job, run, shared);
            if result.is_err() {
                // The run went back to the pool unsent.
                release(shared, k);
            }
            result.map(|c| done(c, true))
        }
        Whole::Stream => decode_stream(dctx, job, shared, pool).map(|c| done(c, false)),
        Whole::Cancelled => Ok(None),
    }
}

/// Where a job decodes.
enum Whole {
    /// In one piece into these buffers, counted in `unread` already.
    Run(Run),
    /// Buffer by buffer (`decode_stream`).
    Stream,
    Cancelled,
}

/// Adjacent buffers for all of `job`, when its headers give its size and the job fits in this
/// worker's share of `ahead_cap` (all of it with one worker: 32 of the default 64 MiB pool
/// hold one of Agave's frames): waits for that many to be unread-free, unless the reader
/// reaches the job first (then it streams: the reader gets the first buffer as soon as it is
/// decoded, not after the whole job). A job larger than the share streams at once (a worker
/// waiting for the whole cap kept the other workers idle until the reader reached their
/// frames), and so does a job when the pool has no such run free.
///
/// Decoding into one slice is what lets zstd write its output in place (`StableOutBuffer`):
/// streamed, it decodes into its own window and copies out, and that copy into pool memory
/// nobody had touched for a frame took 18 % of all CPU samples of `-t --threads 2` on the
/// agave archive (perf), more than a third of the worker's time.
fn run_for(job: &Job, shared: &Arc<Shared>, pool: &Pool) -> Whole {
    let Some(size) = job.content.filter(|&n| n > 0) else {
        return Whole::Stream;
    };
    let k = size.div_ceil(pool.buf_size() as u64);
    let mut st = shared.lock();
    let workers = st.decoders.saturating_sub(1).max(1);
    if k > shared.opts.ahead_cap as u64 / workers {
        return Whole::Stream;
    }
    let k = k as usize;
    loop {
        if st.cancel {
            return Whole::Cancelled;
        }
        if job.seq <= st.head {
            return Whole::Stream;
        }
        if st.unread + k > shared.opts.ahead_cap {
            st = shared.wait(st);
            continue;
        }
        if let Some(run) = pool.try_get_run(k) {
            st.unread += k;
            return Whole::Run(run);
        }
        if !st.lending {
            return Whole::Stream;
        }
        // Buffers the reader handed on come back as the writer lands them: wait for them
        // (woken as each returns, and when the reader moves on: then it may want this job
        // at once, streamed) rather than stream the job and copy it out of zstd's window.
        drop(st);
        let run = pool.wait_run(k, CANCEL_POLL);
        st = shared.lock();
        if let Some(run) = run {
            // Another worker may have taken buffers meanwhile: within the cap, or back.
            if st.unread + k <= shared.opts.ahead_cap && !st.cancel && job.seq > st.head {
                st.unread += k;
                return Whole::Run(run);
            }
        }
    }
}

/// Decodes `job` into `run` in place, then sends the run's buffers. Ok(false) when cancelled.
fn decode_whole(
    dctx: &mut DCtx<'_>,
    job: &mut Job,
    mut run: Run,
    shared: &Arc<Shared>,
) -> io::Result<bool> {
    let input = &mut job.input;
    if let Err(c) = dctx.set_parameter(DParameter::StableOutBuffer(true)) {
        return Err(input.error(io::ErrorKind::Other, get_error_name(c)));
    }
    // One output for all the job's frames: at a frame's end zstd takes whatever output buffer
    // the next frame begins with, and this one goes on where that frame ended.
    let out = run.full_mut();
    let mut pos = 0;
    loop {
        if input.frame_done {
            match input.next(shared)? {
                Next::More => {}
                Next::End => break,
                Next::Cancelled => return Ok(false),
            }
        }
        let mut output = OutBuffer::around_pos(&mut *out, pos);
        let (hint, used) = input.decompress(dctx, &mut output)?;
        let progress = output.pos() > pos || used > 0;
        pos = output.pos();
        if hint == 0 {
            continue;
        }
        if input.rest().is_empty() {
            if let Next::Cancelled = input.next(shared)? {
                return Ok(false);
            }
        } else if !progress {
            // The output holds the whole job, so the decoder always moves on; a frame that
            // does not would be one larger than its header says, which zstd refuses.
            let why = "the frame is larger than its header says";
            return Err(input.error(io::ErrorKind::InvalidData, why));
        }
    }
    for b in run.into_bufs(pos) {
        if job.output.send(Out::Data(b)).is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Decodes one job, sending buffers as they fill. Ok(false) when cancelled.
fn decode_stream(
    dctx: &mut DCtx<'_>,
    job: &mut Job,
    shared: &Arc<Shared>,
    pool: &Pool,
) -> io::Result<bool> {
    let mut out = None;
    let result = stream_into(dctx, job, shared, pool, &mut out);
    if out.take().is_some() {
        // Counted in `unread` by `output_buffer` and never sent (an error, or an empty last
        // buffer when the job's output ended exactly at a buffer's end): left counted, a few
        // of them stopped every worker for good.
        release(shared, 1);
    }
    result
}

/// Gives `n` buffers' places in `ahead_cap` back.
fn release(shared: &Shared, n: usize) {
    shared.lock().unread -= n;
    shared.changed.notify_all();
}

/// `decode_stream`'s work; the buffer being filled is in `out`, which holds it on return when
/// it was not sent.
fn stream_into(
    dctx: &mut DCtx<'_>,
    job: &mut Job,
    shared: &Arc<Shared>,
    pool: &Pool,
    out: &mut Option<PoolBuf>,
) -> io::Result<bool> {
    let input = &mut job.input;
    loop {
        if input.frame_done {
            match input.next(shared)? {
                Next::More => {}
                Next::End => break,
                Next::Cancelled => return Ok(false),
            }
        }
        // A full buffer goes to the reader; decoding continues into a fresh one.
        if out.as_ref().is_none_or(|b| b.len() == b.capacity()) {
            if let Some(full) = out.take()
                && job.output.send(Out::Data(full)).is_err()
            {
                return Ok(false);
            }
            match output_buffer(job.seq, shared, pool) {
                Some(b) => *out = Some(b),
                None => return Ok(false),
            }
        }
        let b = out.as_mut().expect("an output buffer");
        let len = b.len();
        let mut output = OutBuffer::around_pos(b.full_mut(), len);
        let (hint, _) = input.decompress(dctx, &mut output)?;
        let pos = output.pos();
        b.set_len(pos);
        // More input needed, unless the output filled up (then there may be more).
        if hint > 0
            && input.rest().is_empty()
            && pos < b.capacity()
            && let Next::Cancelled = input.next(shared)?
        {
            return Ok(false);
        }
    }
    if let Some(last) = out.take_if(|b| !b.is_empty())
        && job.output.send(Out::Data(last)).is_err()
    {
        return Ok(false);
    }
    Ok(true)
}

/// An output buffer for job `seq`: jobs wait while `ahead_cap` buffers are unread, the
/// reader's own job while HEAD_EXTRA more are (it drains as the reader copies, so it always
/// gets one in the end). None when cancelled.
fn output_buffer(seq: u64, shared: &Arc<Shared>, pool: &Pool) -> Option<PoolBuf> {
    let mut st = shared.lock();
    loop {
        if st.cancel {
            return None;
        }
        let cap = shared.opts.ahead_cap + if seq <= st.head { HEAD_EXTRA } else { 0 };
        if st.unread < cap {
            break;
        }
        st = shared.wait(st);
    }
    st.unread += 1;
    drop(st);
    // The pool's other holders (the writer's data in flight) return buffers on their own.
    loop {
        if let Some(b) = pool.get_timeout(CANCEL_POLL) {
            return Some(b);
        }
        if shared.cancelled() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of `parts`: even ones with a checksum and no size (as `zstd` writes from a
    /// pipe), odd ones with their size and no checksum (as Agave writes them), which workers
    /// decode in place when they fit.
    fn frames<P: AsRef<[u8]>>(parts: &[P]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, p) in parts.iter().map(AsRef::as_ref).enumerate() {
            let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
            e.include_checksum(i % 2 == 0).unwrap();
            if i % 2 == 1 {
                e.set_pledged_src_size(Some(p.len() as u64)).unwrap();
            }
            std::io::Write::write_all(&mut e, p).unwrap();
            out.extend_from_slice(&e.finish().unwrap());
            if i % 3 == 1 {
                // A skippable frame now and then.
                out.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9]);
            }
        }
        out
    }

    /// Where each frame of `data` starts.
    fn frame_starts(data: &[u8]) -> Vec<usize> {
        let mut ev = Vec::new();
        Walker::new(1 << 31).feed(data, &mut ev).unwrap();
        ev.iter()
            .filter_map(|e| match e {
                Event::Start { offset, .. } => Some(*offset as usize),
                _ => None,
            })
            .collect()
    }

    /// Returns `data` in reads that end at each of `cuts` (and wherever the caller's buffer
    /// ends), as a pipe returns what its writer wrote.
    struct Reads {
        data: Vec<u8>,
        cuts: Vec<usize>,
        at: usize,
    }

    impl Reads {
        fn new(data: Vec<u8>, mut cuts: Vec<usize>) -> Reads {
            cuts.sort_unstable();
            Reads { data, cuts, at: 0 }
        }
    }

    impl Read for Reads {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let stop = self.cuts.iter().copied().find(|&c| c > self.at);
            let end = stop.unwrap_or(self.data.len()).min(self.data.len()).min(self.at + buf.len());
            let n = end - self.at;
            buf[..n].copy_from_slice(&self.data[self.at..end]);
            self.at = end;
            Ok(n)
        }
    }

    /// A decoder of `input` with `workers` workers and a frame pool of `buffers` 64 KiB
    /// buffers (`ahead_cap` all but one), reading 2 MiB ahead, and its counters.
    fn decoder(
        input: impl Read + Send + 'static,
        workers: usize,
        buffers: usize,
    ) -> (ParallelZstd, Arc<DecodeStats>) {
        let opts = Options {
            workers,
            max_window_log: 27,
            ahead_cap: ahead_cap(buffers),
            input_budget: 2 << 20,
            piece: PIECE_STREAM,
            start: UnitStart::START,
        };
        decoder_with(input, opts, buffers)
    }

    /// `decoder` with these options.
    fn decoder_with(
        input: impl Read + Send + 'static,
        opts: Options,
        buffers: usize,
    ) -> (ParallelZstd, Arc<DecodeStats>) {
        let stats = Arc::new(DecodeStats::default());
        let pool = Pool::new(64 << 10, buffers);
        let d = ParallelZstd::new(Box::new(input), opts, pool, stats.clone()).unwrap();
        (d, stats)
    }

    /// One part of `content` per size, seeded by its index.
    fn parts(sizes: impl Iterator<Item = usize>) -> Vec<Vec<u8>> {
        sizes.enumerate().map(|(i, n)| content(n, i as u64)).collect()
    }

    fn content(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 { x as u8 } else { (i / 7) as u8 }
            })
            .collect()
    }

    /// Decodes `data` with `workers` workers and a pool of `buffers`, the reader pausing after
    /// its first byte, so that the workers decode ahead whatever the machine's load (a reader
    /// that reaches every frame first, on a busy machine, leaves them nothing).
    fn decode_after_a_pause(
        data: Vec<u8>,
        workers: usize,
        buffers: usize,
    ) -> (Vec<u8>, Arc<DecodeStats>) {
        let (mut d, stats) = decoder(io::Cursor::new(data), workers, buffers);
        let mut got = vec![0];
        d.read_exact(&mut got).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        d.read_to_end(&mut got).unwrap();
        (got, stats)
    }

    fn decode(data: Vec<u8>, workers: usize, buffers: usize, read: usize) -> io::Result<Vec<u8>> {
        decode_skipping(data, workers, buffers, read, 0).map(|(out, _, _)| out)
    }

    /// Decodes `data`, each read of up to `read` bytes followed by a skip of `skip` (in place
    /// where the stream can, else read into a scratch buffer, as the tar reader does); returns
    /// what was read with zeros where bytes were skipped, which bytes were read, and the stats.
    fn decode_skipping(
        data: Vec<u8>,
        workers: usize,
        buffers: usize,
        read: usize,
        skip: usize,
    ) -> io::Result<(Vec<u8>, Vec<bool>, Arc<DecodeStats>)> {
        let (mut d, stats) = decoder(io::Cursor::new(data), workers, buffers);
        let (mut out, mut was_read) = (Vec::new(), Vec::new());
        let mut buf = vec![0; read.max(skip)];
        loop {
            match d.read(&mut buf[..read])? {
                0 => return Ok((out, was_read, stats)),
                n => {
                    out.extend_from_slice(&buf[..n]);
                    was_read.resize(out.len(), true);
                }
            }
            let mut left = skip;
            while left > 0 {
                let n = match d.skip_in_place(left as u64)? as usize {
                    0 => d.read(&mut buf[..left])?,
                    n => n,
                };
                if n == 0 {
                    return Ok((out, was_read, stats));
                }
                out.resize(out.len() + n, 0);
                was_read.resize(out.len(), false);
                left -= n;
            }
        }
    }

    #[test]
    fn frames_with_their_size_decode_in_place_and_skip_without_copying() {
        let parts = parts((0..10).map(|i| 200_000 + i * 50_000));
        let want: Vec<u8> = parts.concat();
        let data = frames(&parts);
        // 64 buffers of 64 KiB: every odd frame (at most 10 buffers) fits in `ahead_cap`.
        for workers in [1, 3] {
            let (got, stats) = decode_after_a_pause(data.clone(), workers, 64);
            assert!(got == want, "workers {workers}");
            let in_place = stats.frames_in_place.load(Ordering::Relaxed);
            let ahead = stats.frames_ahead.load(Ordering::Relaxed);
            assert!(in_place > 0 && in_place <= ahead, "{in_place} of {ahead} in place");
            // Skipping: what was read is where it belongs; skipped bytes are zeros here.
            for (read, skip) in [(512, 100_000), (7, 65_536), (100_000, 1)] {
                let (got, was_read, _) =
                    decode_skipping(data.clone(), workers, 64, read, skip).unwrap();
                assert_eq!(got.len(), want.len(), "reads of {read}, skips of {skip}");
                assert!(was_read.iter().any(|r| !r), "something was skipped");
                let wrong = (0..want.len()).find(|&i| was_read[i] && got[i] != want[i]);
                assert_eq!(wrong, None, "reads of {read}, skips of {skip}");
            }
        }
        // 4 buffers: no frame fits in `ahead_cap` (3); all stream, and still in order.
        let (got, _, stats) = decode_skipping(data, 1, 4, 4096, 0).unwrap();
        assert!(got == want);
        assert_eq!(stats.frames_in_place.load(Ordering::Relaxed), 0);
    }

    /// Where the next bytes lie when a worker's buffer holds them (`Skip::ahead`).
    fn lendable(d: &mut ParallelZstd) -> Option<Lendable> {
        match d.ahead().unwrap() {
            Ahead::Lend(at) => Some(at),
            Ahead::Read(_) => None,
        }
    }

    /// The tar stage's way with a worker's buffers (`lend`): pieces of every length handed
    /// on, mixed with reads and skips, each piece held a while by another thread (a writer)
    /// before it is dropped. Every byte comes where it belongs, read or lent; the frames' buffers
    /// all come back to the pool once the pieces are dropped; and with a frame's worth of room
    /// for the pieces held, workers go on decoding in place (they wait for a run rather than
    /// stream, `run_for`).
    #[test]
    fn lent_pieces_hold_their_bytes_and_their_buffers_come_back() {
        let parts = parts((0..12).map(|i| 200_000 + i * 41_000));
        let want: Vec<u8> = parts.concat();
        let data = frames(&parts);
        for (workers, buffers) in [(1, 64), (3, 64), (1, 12), (3, 6)] {
            let ctx = format!("{workers} workers, {buffers} buffers");
            let (mut d, stats) = decoder(io::Cursor::new(data.clone()), workers, buffers);
            let pool = d.pool.clone();
            let (tx, rx) = std::sync::mpsc::channel::<PoolBuf>();
            let writer = std::thread::spawn(move || {
                for piece in rx {
                    std::thread::sleep(Duration::from_micros(200));
                    drop(piece);
                }
            });
            let (mut pos, mut step, mut buf) = (1, 0usize, vec![0; 70_000]);
            // Time for the workers to decode ahead whatever the machine's load (see
            // `decode_after_a_pause`).
            d.read_exact(&mut buf[..1]).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            while pos < want.len() {
                step += 1;
                match (step % 5, lendable(&mut d)) {
                    (0..=2, Some(at)) => {
                        let n = at.len.min([1, 511, 4096, 65_536, 100_000][step % 5 + step % 3]);
                        let piece = d.lend(n).unwrap();
                        assert_eq!(piece.as_ptr() as usize, at.addr, "{ctx}");
                        assert!(piece.data() == &want[pos..pos + n], "{ctx}: at {pos}");
                        pos += n;
                        tx.send(piece).unwrap();
                    }
                    (3, _) => {
                        let n = d.read(&mut buf[..(step * 7919) % 70_000 + 1]).unwrap();
                        assert!(buf[..n] == want[pos..pos + n], "{ctx}: at {pos}");
                        pos += n;
                    }
                    _ => {
                        let n = d.skip_in_place(3000).unwrap() as usize;
                        let n = match n {
                            0 => d.read(&mut buf[..3000]).unwrap(),
                            n => n,
                        };
                        pos += n;
                    }
                }
            }
            assert_eq!(d.read(&mut buf).unwrap(), 0, "{ctx}");
            drop(tx);
            writer.join().unwrap();
            let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
            assert!(count(&stats.lent) > 0, "{ctx}: {stats:?}");
            drop(d);
            assert!(pool.try_get_run(buffers).is_some(), "{ctx}: a buffer was not given back");
        }
        // Everything a worker decoded handed on, the last 6 pieces held: the odd frames (those
        // with a size) that a worker decoded are still decoded in place.
        let (mut d, stats) = decoder(io::Cursor::new(data.clone()), 1, 24);
        let (mut held, mut got, mut buf) = (VecDeque::new(), vec![0], vec![0; 100_000]);
        d.read_exact(&mut got).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        loop {
            let Some(at) = lendable(&mut d) else {
                // The reader's own frame: read.
                match d.read(&mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
                continue;
            };
            let piece = d.lend(at.len).unwrap();
            got.extend_from_slice(piece.data());
            held.push_back(piece);
            if held.len() > 6 {
                held.pop_front();
            }
        }
        assert!(got == want);
        assert!(stats.frames_in_place.load(Ordering::Relaxed) > 0, "{stats:?}");
    }

    #[test]
    fn multi_frame_in_order_at_any_thread_count() {
        let parts = parts((0..12).map(|i| 100_000 + i * 37_000));
        let want: Vec<u8> = parts.concat();
        let data = frames(&parts);
        // 2 buffers, the smallest frame pool (`budget::divide`): `ahead_cap` 1, and with 4
        // workers a share of none, so every frame streams.
        for workers in [0, 1, 2, 4] {
            for (buffers, read) in [(2, 512), (4, 512), (16, 100_000), (64, 7)] {
                let got = decode(data.clone(), workers, buffers, read).unwrap();
                assert!(got == want, "workers {workers}, {buffers} buffers, reads of {read}");
            }
        }
        // One frame, and no frames at all.
        assert_eq!(decode(frames(&[&want]), 2, 8, 4096).unwrap(), want);
        assert_eq!(decode(Vec::new(), 2, 8, 4096).unwrap(), b"");
    }

    /// Frame headers cut by the reads anywhere: reads of every size from 1 to 32 bytes over
    /// each frame's and each skippable frame's start, workers or not. Until frames.rs gave the
    /// bytes of a header that began in an earlier read, such a frame's decoder got a stream
    /// without its magic ("Unknown frame descriptor") or without its data.
    #[test]
    fn headers_cut_by_the_reads_anywhere() {
        let parts = parts((0..9).map(|i| 3_000 + i * 7_777));
        let want: Vec<u8> = parts.concat();
        let data = frames(&parts);
        let mut starts = frame_starts(&data);
        // The skippable frames `frames` puts after every third frame.
        let skippable: Vec<usize> = starts.iter().map(|s| s.saturating_sub(10)).collect();
        starts.extend(skippable.into_iter().filter(|&s| data[s] == 0x50));
        assert!(starts.len() > 10);
        for read in 1..=32 {
            let cuts: Vec<usize> = starts
                .iter()
                .flat_map(|&s| (s.saturating_sub(20)..s + 24).step_by(read))
                .filter(|&c| c > 0 && c < data.len())
                .collect();
            for workers in [0, 1, 3] {
                let (mut d, _) = decoder(Reads::new(data.clone(), cuts.clone()), workers, 8);
                let mut got = Vec::new();
                let r = d.read_to_end(&mut got);
                assert!(r.is_ok() && got == want, "reads of {read}, {workers} workers: {r:?}");
            }
        }
    }

    /// Frames of `parts`, each with its size in the header and a checksum: a run of them
    /// decodes in place in one job.
    fn sized_frames<P: AsRef<[u8]>>(parts: &[P]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts.iter().map(AsRef::as_ref) {
            let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
            e.include_checksum(true).unwrap();
            e.set_pledged_src_size(Some(p.len() as u64)).unwrap();
            std::io::Write::write_all(&mut e, p).unwrap();
            out.extend_from_slice(&e.finish().unwrap());
        }
        out
    }

    /// Small frames share jobs (runs of them found in one read, BATCH_BYTES at most), decoded
    /// in order by the reader and the workers, in place when every header gives its size, and
    /// however the reads cut them.
    #[test]
    fn small_frames_share_jobs() {
        let parts = parts((0..3000).map(|i| i % 300));
        let want: Vec<u8> = parts.concat();
        for (data, shape) in [(frames(&parts), "mixed"), (sized_frames(&parts), "sized")] {
            for (workers, buffers, read) in [(0, 8, 4096), (1, 8, 100), (3, 64, 7), (3, 2, 65_536)]
            {
                let ctx = format!("{shape}, {workers} workers, {buffers} buffers, reads of {read}");
                let (got, _, stats) =
                    decode_skipping(data.clone(), workers, buffers, read, 0).unwrap();
                assert!(got == want, "{ctx}");
                let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
                assert_eq!(count(&stats.frames), 3000, "{ctx}");
                assert!(count(&stats.jobs) * 50 < 3000, "{ctx}: {} jobs", count(&stats.jobs));
            }
            // Reads that cut every frame: a frame begun in an earlier read is a job of its own.
            let cuts = (0..data.len()).step_by(13).collect();
            let (mut d, _) = decoder(Reads::new(data.clone(), cuts), 2, 8);
            let mut got = Vec::new();
            d.read_to_end(&mut got).unwrap();
            assert!(got == want, "{shape}, reads of 13");
        }
        // Workers that decode ahead do it in place.
        let (got, stats) = decode_after_a_pause(sized_frames(&parts), 3, 64);
        assert!(got == want);
        assert!(stats.frames_in_place.load(Ordering::Relaxed) > 100, "{stats:?}");
    }

    /// A damaged frame in a job of many is the one reported, in its turn, with its own number
    /// and place: its checksum, its declared size, its block headers.
    #[test]
    fn a_bad_frame_among_small_ones_is_named() {
        let parts = parts((0..400).map(|i| 200 + i % 50));
        let data = sized_frames(&parts);
        let starts = frame_starts(&data);
        let bad = 237;
        let (at, len) = (starts[bad], starts[bad + 1] - starts[bad]);
        let mut damaged = Vec::new();
        // The checksum (its last 4 bytes); a size 1 more than it is (the frames are
        // single-segment, with a 1-byte size after the descriptor); its block's header made a
        // raw block of 100 bytes, so the walker finds the frame's end elsewhere.
        let mut d = data.clone();
        d[at + len - 2] ^= 0x40;
        damaged.push(d);
        let mut d = data.clone();
        assert_eq!(d[at + 4] & 0xe0, 0x20, "single segment, 1-byte size");
        d[at + 5] = d[at + 5].wrapping_add(1);
        damaged.push(d);
        let mut d = data.clone();
        let block = at + 6;
        d[block..block + 3].copy_from_slice(&[(100 << 3) as u8 | 1, 100 >> 5, 0]);
        damaged.push(d);
        // A reserved block type: the walker's own words, not a truncation its decoder saw
        // first.
        let mut d = data.clone();
        d[block] |= 0b110;
        damaged.push(d);
        for (i, d) in damaged.into_iter().enumerate() {
            for workers in [0, 1, 3] {
                let err = decode(d.clone(), workers, 64, 4096).unwrap_err().to_string();
                // The walker names the block it could not walk.
                let byte = if i == 3 { block } else { starts[bad] };
                let want = format!("zstd frame {bad} (byte {byte} of the archive)");
                assert!(err.starts_with(&want), "damage {i}, {workers} workers: {err}");
                if i == 3 {
                    assert!(err.contains("reserved block type"), "{workers} workers: {err}");
                }
            }
        }
    }

    /// However many frames the input holds and however the reads cut them, at most
    /// JOBS_PER_DECODER jobs per decoder wait for a reader that does not read. Each job waited
    /// in the queue before, with two channels: 1.2 million 7-byte frames took 1.46 GB.
    #[test]
    fn jobs_waiting_for_the_reader_are_bounded() {
        let parts = parts((0..20_000).map(|_| 7));
        let data = frames(&parts);
        for cut in [None, Some(11)] {
            let cuts = cut.map_or(Vec::new(), |c| (0..data.len()).step_by(c).collect());
            // As much read ahead as 64 reads (each reserves a whole piece, however few bytes
            // it returns): the bound on jobs is what holds them.
            let opts = Options {
                workers: 3,
                max_window_log: 27,
                ahead_cap: ahead_cap(8),
                input_budget: 64 << 20,
                piece: PIECE_STREAM,
                start: UnitStart::START,
            };
            let (mut d, _) = decoder_with(Reads::new(data.clone(), cuts), opts, 8);
            let mut first = [0u8; 1];
            d.read_exact(&mut first).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let waiting = d.shared.lock().queue.len();
            assert!(waiting <= 4 * JOBS_PER_DECODER, "reads cut at {cut:?}: {waiting} jobs wait");
            assert!(waiting >= 2, "reads cut at {cut:?}: the test waited too little");
            let mut rest = Vec::new();
            d.read_to_end(&mut rest).unwrap();
            assert_eq!(rest.len() + 1, 7 * 20_000);
        }
    }

    #[test]
    fn a_corrupt_frame_fails_in_its_turn() {
        let parts = parts(std::iter::repeat_n(200_000, 8));
        let mut data = frames(&parts);
        // Corrupt frame 4 (it has a checksum) in the middle: later frames decode fine and may
        // finish first.
        let starts = frame_starts(&data);
        let mid = (starts[4] + starts[5]) / 2;
        for b in &mut data[mid..mid + 16] {
            *b ^= 0x5a;
        }
        for workers in [0, 1, 3] {
            let opts = Options {
                workers,
                max_window_log: 27,
                ahead_cap: 8,
                input_budget: 4 << 20,
                piece: PIECE_STREAM,
                start: UnitStart::START,
            };
            let (mut d, _) = decoder_with(io::Cursor::new(data.clone()), opts, 16);
            let mut got = Vec::new();
            let err = loop {
                let mut buf = vec![0; 8192];
                match d.read(&mut buf) {
                    Ok(0) => panic!("no error"),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => break e,
                }
            };
            let msg = err.to_string();
            let want = format!("zstd frame 4 (byte {} of the archive)", starts[4]);
            assert!(msg.starts_with(&want), "{msg}");
            // Everything before the bad frame came out, nothing after it.
            assert_eq!(&got[..4 * 200_000], &parts[..4].concat()[..]);
            assert!(got.len() <= 5 * 200_000);
            // The error is sticky.
            assert!(d.read(&mut [0; 10]).is_err());
        }
    }

    /// A frame whose header declares a size other than what it decodes to fails in its turn,
    /// decoded in place or streamed, with nothing of it delivered when decoded in place.
    #[test]
    fn a_frame_of_another_size_than_declared() {
        let parts = parts(std::iter::repeat_n(150_000, 6));
        let data = frames(&parts);
        let starts = frame_starts(&data);
        // Frame 3 (odd: it has a size): descriptor, no window byte if single-segment, no
        // dictionary, then 4 bytes of size for 150,000.
        let fhd = data[starts[3] + 4];
        assert_eq!(fhd >> 6, 2, "a 4-byte content size");
        let at = starts[3] + 5 + usize::from(fhd & 0x20 == 0);
        for delta in [-4096i64, 4096] {
            let mut bad = data.clone();
            let size = u32::from_le_bytes(bad[at..at + 4].try_into().unwrap());
            bad[at..at + 4].copy_from_slice(&((size as i64 + delta) as u32).to_le_bytes());
            for workers in [0, 1, 3] {
                let err = decode(bad.clone(), workers, 64, 4096).unwrap_err().to_string();
                let want = format!("zstd frame 3 (byte {} of the archive)", starts[3]);
                assert!(err.starts_with(&want), "size {delta:+}, {workers} workers: {err}");
            }
        }
    }

    /// A streamed frame whose output ends exactly at a buffer's end, with its last bytes (the
    /// checksum) in the next read: the empty buffer the worker had taken for more output is
    /// given back. Left counted, two of them stopped the one worker of a 4-buffer pool for good.
    #[test]
    fn no_buffer_is_left_counted() {
        let parts = parts(std::iter::repeat_n(2 << 16, 40));
        let want: Vec<u8> = parts.concat();
        // Every frame with a checksum and no size, so the worker streams them.
        let mut data = Vec::new();
        for p in &parts {
            let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
            e.include_checksum(true).unwrap();
            std::io::Write::write_all(&mut e, p).unwrap();
            data.extend_from_slice(&e.finish().unwrap());
        }
        let mut ends = frame_starts(&data);
        ends.remove(0);
        ends.push(data.len());
        // Reads that end 2 bytes before each frame's end.
        let cuts = ends.iter().map(|e| e - 2).collect();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut d, _) = decoder(Reads::new(data, cuts), 1, 4);
            let mut got = Vec::new();
            d.read_to_end(&mut got).unwrap();
            let unread = d.shared.lock().unread;
            let _ = tx.send((got, unread));
        });
        let (got, unread) = rx.recv_timeout(Duration::from_secs(60)).expect("no hang");
        assert!(got == want);
        assert_eq!(unread, 0, "buffers left counted as unread");
    }

    #[test]
    fn truncated_and_garbage() {
        let parts = parts(std::iter::repeat_n(150_000, 4));
        let data = frames(&parts);
        for workers in [0, 2] {
            let cut = data[..data.len() - 10].to_vec();
            let err = decode(cut, workers, 8, 4096).unwrap_err();
            assert!(err.to_string().contains("frame 3"), "{err}");
            assert!(err.to_string().contains("ends inside the frame"), "{err}");
            let mut junk = data.clone();
            junk.extend_from_slice(b"not zstd");
            let err = decode(junk, workers, 8, 4096).unwrap_err();
            assert!(err.to_string().contains("unknown magic"), "{err}");
        }
    }
}
