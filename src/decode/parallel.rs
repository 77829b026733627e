//! Multi-frame zstd decoded on several threads, read back as one stream in order.
//!
//! Agave writes snapshot archives as independent zstd frames of 32 MiB of tar stream each, so
//! frames can be decoded at once on different cores. Three parties share the work:
//!
//! - the **splitter** thread reads the compressed input in pieces, finds frame boundaries with
//!   `frames::Walker` (frame and block headers only, nothing is decompressed) and queues each
//!   frame as a job whose compressed bytes follow on the job's own channel;
//! - **workers** claim queued frames *ahead of* the one being read and decode them into pool
//!   buffers, which wait, in order, on the frame's output channel: in place into adjacent
//!   buffers when the frame's header gives its size (`run_for`), else buffer by buffer;
//! - the **reader** (the `Read` impl, on the caller's thread) consumes frames in order: a frame
//!   a worker decoded is copied out of its buffers (or passed over in place, `Skip`, where the
//!   tar parser skips data); a frame nobody has claimed when the reader
//!   reaches it is decoded by the reader itself straight into the caller's buffer, as the
//!   sequential decoder does. With N decoders (N-1 workers and the reader) every N-th frame
//!   (0, N, 2N, ...) is left to the reader, so it decodes its share while the workers decode
//!   the frames after it: when workers took whatever was next, the reader only ever copied
//!   (101 of the 119 frames of a 4 GB archive went to the one worker on 2 CPUs). Frame 0 of a
//!   single-frame archive, and frames whose window is over WORKER_MAX_WINDOW, are the reader's
//!   too.
//!
//! Memory: decoded output waiting for the reader lives in the buffers of a pool of its own
//! (file data has another); frames ahead of the reader may hold at most `ahead_cap` of them,
//! so more threads than the budget allows means fewer frames decoded ahead, never more
//! memory. Compressed input read ahead is bounded by `input_budget` bytes. A worker decoding the
//! frame the reader is waiting for is never held back by the cap.
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
use super::frames::{Carried, Event, Walker};
use crate::archive::Skip;
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

/// Largest window a worker decodes; frames declaring more are left to the reader's one
/// decoder, so decoder memory is at most one `--max-window` plus this much per worker, at any
/// thread count. 8 MiB is what `zstd -19` uses without `--long`; Agave's level-1 and level-3
/// frames of 32 MiB declare 512 KiB and 2 MiB.
pub const WORKER_MAX_WINDOW: u64 = 8 << 20;

/// Buffers the frame the reader is on may hold beyond `ahead_cap`: one, so it always gets a
/// buffer when frames ahead hold the whole cap (the reader consumes its frame's in order).
pub const HEAD_EXTRA: usize = 1;

/// `ahead_cap` for a frame pool of `count` buffers: all but the reader's HEAD_EXTRA. The pool
/// is the decoder's alone (config.rs `Pools`): FRAME_BYTES per worker by default, so each
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
}

pub struct Options {
    /// Worker threads (0: the reader decodes every frame itself).
    pub workers: usize,
    pub max_window_log: u32,
    /// Pool buffers decoded frames may hold unread (the frame the reader is on may hold
    /// HEAD_EXTRA more, so the pool has at least `ahead_cap + HEAD_EXTRA`).
    pub ahead_cap: usize,
    /// Compressed bytes read ahead, at most.
    pub input_budget: usize,
    /// Compressed bytes read at a time (PIECE_FILE or PIECE_STREAM).
    pub piece: usize,
}

/// A run of a frame's compressed bytes.
enum Piece {
    /// Bytes `start..end` of one read.
    Read { data: Arc<InputBuf>, start: usize, end: usize },
    /// The start of the frame's header, which came in earlier reads than its end.
    Carried(Carried),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Read { data, start, end } => &data.bytes[*start..*end],
            Piece::Carried(c) => c.bytes(),
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

/// What a worker sends the reader for a frame.
enum Out {
    Data(PoolBuf),
    /// The frame is complete; `in_place` when it was decoded in one piece.
    End {
        in_place: bool,
    },
    Err(String),
}

/// A frame waiting to be decoded.
struct Job {
    index: u64,
    offset: u64,
    /// The window its header declares (bytes).
    window: u64,
    /// The decoded size its header declares, when it does.
    content: Option<u64>,
    input: Receiver<Piece>,
    output: Sender<Out>,
}

/// A frame in stream order, as the reader will take it.
struct Entry {
    index: u64,
    offset: u64,
    /// Some until a worker or the reader claims it.
    job: Option<Job>,
    output: Receiver<Out>,
}

#[derive(Default)]
struct State {
    /// Frames found and not yet taken by the reader, in order.
    queue: VecDeque<Entry>,
    /// The splitter is done: the input ended (or failed, with this message).
    done: bool,
    failed: Option<String>,
    /// Index of the frame the reader is on.
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
    /// Threads decoding: the workers that started and the reader. Every `decoders`-th frame
    /// (index 0, N, 2N, ...) is the reader's (see `work`).
    decoders: u64,
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

/// The decoded stream (see the module doc).
pub struct ParallelZstd {
    shared: Arc<Shared>,
    stats: Arc<DecodeStats>,
    current: Current,
    dctx: DCtx<'static>,
    workers: Vec<JoinHandle<()>>,
    /// The stream's sticky error.
    error: Option<(io::ErrorKind, String)>,
}

enum Current {
    /// Between frames.
    None,
    /// Decoding `job` here.
    Inline { job: Job, piece: Option<Piece>, at: usize },
    /// Copying out what a worker decoded.
    Worker { index: u64, offset: u64, rx: Receiver<Out>, buf: Option<PoolBuf>, at: usize },
    /// No more frames.
    Eof,
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
            .spawn(move || split(input, max_window, &s))?;
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
            error: None,
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

    fn fail(&mut self, kind: io::ErrorKind, msg: String) -> io::Error {
        self.shared.cancel();
        self.error = Some((kind, msg.clone()));
        io::Error::new(kind, msg)
    }

    /// Moves to the next frame: claims it if nobody has, else follows its worker.
    fn next_frame(&mut self) -> io::Result<()> {
        let mut st = self.shared.lock();
        loop {
            if let Some(e) = st.queue.pop_front() {
                st.head = e.index;
                drop(st);
                self.shared.changed.notify_all();
                self.current = match e.job {
                    Some(job) => {
                        let _ = self.dctx.reset(ResetDirective::SessionOnly);
                        Current::Inline { job, piece: None, at: 0 }
                    }
                    None => Current::Worker {
                        index: e.index,
                        offset: e.offset,
                        rx: e.output,
                        buf: None,
                        at: 0,
                    },
                };
                return Ok(());
            }
            if st.done {
                let failed = st.failed.clone();
                drop(st);
                return match failed {
                    Some(msg) => Err(self.fail(io::ErrorKind::InvalidData, msg)),
                    None => {
                        self.current = Current::Eof;
                        Ok(())
                    }
                };
            }
            st = self.shared.wait(st);
        }
    }

    /// Decodes the current inline frame into `buf`; 0 at its end.
    fn read_inline(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Current::Inline { job, piece, at } = &mut self.current else { unreachable!() };
        loop {
            let rest: &[u8] = piece.as_ref().map_or(&[], |p| &p.bytes()[*at..]);
            let mut input = InBuffer::around(rest);
            let mut output = OutBuffer::around(buf);
            let r = self.dctx.decompress_stream(&mut output, &mut input);
            let (used, written) = (input.pos(), output.pos());
            *at += used;
            match r {
                Err(code) => {
                    let msg = frame_error(job.index, job.offset, get_error_name(code));
                    return Err(self.fail(io::ErrorKind::InvalidData, msg));
                }
                Ok(0) => {
                    // The frame is complete: nothing of its input may be left.
                    if used < rest.len() || job.input.try_recv().is_ok() {
                        let msg = frame_error(job.index, job.offset, "data after the frame's end");
                        return Err(self.fail(io::ErrorKind::InvalidData, msg));
                    }
                    self.stats.frames.fetch_add(1, Ordering::Relaxed);
                    self.current = Current::None;
                    return Ok(written);
                }
                Ok(_) if written > 0 => return Ok(written),
                Ok(_) if used < rest.len() => {}
                Ok(_) => match job.input.recv() {
                    // Nothing came out and the input is used up: the next piece.
                    Ok(p) => {
                        *piece = Some(p);
                        *at = 0;
                    }
                    // The splitter saw the frame (or the input) end before the decoder did.
                    Err(_) => {
                        let (i, o) = (job.index, job.offset);
                        let why = truncated(&self.shared, i, o);
                        return Err(self.fail(io::ErrorKind::UnexpectedEof, why));
                    }
                },
            }
        }
    }

    /// Takes up to `want` bytes of what a worker decoded, copying them into `buf` when there
    /// is one (else they are passed over); 0 at the frame's end.
    fn take_worker(&mut self, buf: Option<&mut [u8]>, want: usize) -> io::Result<usize> {
        let Current::Worker { index, offset, rx, buf: chunk, at } = &mut self.current else {
            unreachable!()
        };
        loop {
            if let Some(c) = chunk
                && *at < c.len()
            {
                let n = (c.len() - *at).min(want);
                if let Some(buf) = buf {
                    buf[..n].copy_from_slice(&c.data()[*at..*at + n]);
                }
                *at += n;
                return Ok(n);
            }
            if chunk.take().is_some() {
                release(&self.shared, 1);
            }
            match rx.recv() {
                Ok(Out::Data(b)) => {
                    *chunk = Some(b);
                    *at = 0;
                }
                Ok(Out::End { in_place }) => {
                    self.stats.frames.fetch_add(1, Ordering::Relaxed);
                    self.stats.frames_ahead.fetch_add(1, Ordering::Relaxed);
                    if in_place {
                        self.stats.frames_in_place.fetch_add(1, Ordering::Relaxed);
                    }
                    self.current = Current::None;
                    return Ok(0);
                }
                Ok(Out::Err(msg)) => return Err(self.fail(io::ErrorKind::InvalidData, msg)),
                Err(_) => {
                    let msg = frame_error(*index, *offset, "the decoder stopped");
                    return Err(self.fail(io::ErrorKind::Other, msg));
                }
            }
        }
    }
}

impl Read for ParallelZstd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some((kind, msg)) = &self.error {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let n = match self.current {
                Current::None => {
                    self.next_frame()?;
                    continue;
                }
                Current::Eof => return Ok(0),
                Current::Inline { .. } => self.read_inline(buf)?,
                Current::Worker { .. } => {
                    let want = buf.len();
                    self.take_worker(Some(&mut *buf), want)?
                }
            };
            if n > 0 {
                return Ok(n);
            }
        }
    }
}

/// A worker's frame is in pool buffers already: passing over it is moving a cursor. A frame
/// the reader decodes itself is not (it decodes into the caller's buffer).
impl Skip for ParallelZstd {
    fn skip_in_place(&mut self, n: u64) -> io::Result<u64> {
        if let Some((kind, msg)) = &self.error {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        let want = n.min(usize::MAX as u64) as usize;
        loop {
            match self.current {
                Current::None if want > 0 => self.next_frame()?,
                Current::Worker { .. } if want > 0 => match self.take_worker(None, want)? {
                    // The frame ended: on to the next.
                    0 => {}
                    k => return Ok(k as u64),
                },
                _ => return Ok(0),
            }
        }
    }
}

impl Drop for ParallelZstd {
    fn drop(&mut self) {
        self.shared.cancel();
        // Decoded buffers waiting in frames' channels go back to the pool before the workers
        // are joined: one of them may be waiting for a buffer.
        self.current = Current::None;
        let queue = std::mem::take(&mut self.shared.lock().queue);
        drop(queue);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn frame_error(index: u64, offset: u64, what: &str) -> String {
    format!("zstd frame {index} (byte {offset} of the archive): {what}")
}

/// Why frame `index` got no more input: the splitter's own failure when it stopped (it could
/// not read or allocate; set before it drops the frame's channel), else the archive ends there.
fn truncated(shared: &Shared, index: u64, offset: u64) -> String {
    match &shared.lock().failed {
        Some(why) => why.clone(),
        None => frame_error(index, offset, "the compressed input ends inside the frame"),
    }
}

/// The splitter: reads the input, walks frame boundaries, queues a job per frame and sends
/// each frame's bytes to it.
fn split(mut input: Box<dyn Read + Send>, max_window: u64, shared: &Arc<Shared>) {
    let mut walker = Walker::new(max_window);
    // The frame whose bytes are being sent: its index and input channel.
    let mut current: Option<Sender<Piece>> = None;
    let mut index = 0;
    let piece = shared.opts.piece;
    let budget = shared.opts.input_budget.max(piece);
    let finish = |failed: Option<String>| {
        let mut st = shared.lock();
        st.done = true;
        st.failed = failed;
        drop(st);
        shared.changed.notify_all();
    };
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
        // (archive_file.rs). Where the address space is limited (`ulimit -v`) a new piece may
        // not be had: one line then, not an abort (a 4 MiB piece aborted the run under
        // `ulimit -v 196608` with --threads 8). Reading ahead less instead, with the pieces in
        // flight only, hung in a test: frames ahead may hold them while the frame the reader
        // waits for needs more.
        let Some(mut bytes) = spare.or_else(|| AlignedBuf::try_new(piece)) else {
            let at = walker.offset();
            return finish(Some(format!(
                "cannot allocate {} MiB to read the archive into at byte {at}: out of memory \
                 (ulimit -v?); fewer --threads need less",
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
                return finish(Some(format!("cannot read the archive at byte {at}: {e}")));
            }
        };
        if n == 0 {
            // The end of the input: between frames it is the end of the stream; inside a frame
            // the frame's decoder reports the truncation when its channel closes.
            if current.is_some() || walker.between_frames() {
                drop(current.take());
                return finish(None);
            }
            let at = walker.offset();
            return finish(Some(format!(
                "zstd frame {index}: the compressed input ends inside its header, at byte {at}"
            )));
        }
        // Route the piece's bytes: each frame gets the runs between its start and end; the
        // bytes between frames (skippable frames) go nowhere.
        let mut at = 0;
        let mut routed = 0;
        let send = |tx: &Sender<Piece>, start: usize, end: usize| {
            if end > start {
                let _ = tx.send(Piece::Read { data: data.clone(), start, end });
            }
        };
        let walked = loop {
            match walker.next(&data.bytes, &mut at) {
                Ok(None) => break Ok(()),
                Ok(Some(Event::Start { offset, at: start, header, carried })) => {
                    let (in_tx, in_rx) = channel();
                    let (out_tx, out_rx) = channel();
                    if !carried.bytes().is_empty() {
                        let _ = in_tx.send(Piece::Carried(carried));
                    }
                    let (window, content) = (header.window, header.content_size);
                    let job = Job { index, offset, window, content, input: in_rx, output: out_tx };
                    let mut st = shared.lock();
                    st.queue.push_back(Entry { index, offset, job: Some(job), output: out_rx });
                    drop(st);
                    shared.changed.notify_all();
                    current = Some(in_tx);
                    index += 1;
                    routed = start;
                }
                Ok(Some(Event::End { at: end, .. })) => {
                    if let Some(tx) = current.take() {
                        send(&tx, routed, end);
                    }
                    routed = end;
                }
                Err(e) => break Err(e),
            }
        };
        match walked {
            Ok(()) => {
                if let Some(tx) = &current {
                    send(tx, routed, n);
                }
            }
            Err(e) => {
                // The frame the walk was in gets its bytes up to the structure that failed
                // (none when that began in an earlier read), or the one whose header it was
                // reading gets nothing; either reports this failure in its turn.
                let frame = match current.take() {
                    Some(tx) => {
                        send(&tx, routed, e.at.max(routed));
                        index - 1
                    }
                    None => index,
                };
                return finish(Some(frame_error(frame, e.offset, &e.what)));
            }
        }
    }
}

/// A worker: claims frames ahead of the reader and decodes them into pool buffers.
fn work(shared: &Arc<Shared>, pool: &Pool) {
    // Without a decoder (no memory: `ulimit -v`) this worker does nothing; frames nobody
    // claims are the reader's when it reaches them.
    let Some(mut dctx) = DCtx::try_create() else { return };
    loop {
        let job = {
            let mut st = shared.lock();
            loop {
                if st.cancel {
                    return;
                }
                let (head, decoders) = (st.head, st.decoders);
                if let Some(job) = st
                    .queue
                    .iter_mut()
                    .filter(|e| e.index > head && e.index % decoders != 0)
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
        // frame that failed in place left it on, and the next frame streamed would fail.
        let _ = dctx.reset(ResetDirective::SessionAndParameters);
        let _ = dctx.set_parameter(DParameter::WindowLogMax(shared.opts.max_window_log));
        let msg = match decode_job(&mut dctx, &job, shared, pool) {
            Ok(Some(in_place)) => Out::End { in_place },
            Ok(None) => return,
            Err(msg) => Out::Err(msg),
        };
        let _ = job.output.send(msg);
    }
}

/// Decodes one frame: in one piece into adjacent pool buffers when its header says how big it
/// is and they can be had, else buffer by buffer as they fill. Ok(Some(in place)) when it is
/// complete, Ok(None) when cancelled.
fn decode_job(
    dctx: &mut DCtx<'_>,
    job: &Job,
    shared: &Arc<Shared>,
    pool: &Pool,
) -> Result<Option<bool>, String> {
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

/// Where a frame decodes.
enum Whole {
    /// In one piece into these buffers, counted in `unread` already.
    Run(Run),
    /// Buffer by buffer (`decode_stream`).
    Stream,
    Cancelled,
}

/// Adjacent buffers for all of frame `job`, when its header gives its size and the frame fits
/// in this worker's share of `ahead_cap` (all of it with one worker: 32 of the default 64 MiB
/// pool hold one of Agave's frames): waits for that many to be unread-free, unless the reader
/// reaches the frame first (then it streams: the reader gets the frame's first buffer as soon
/// as it is decoded, not after the whole frame). A frame larger than the share streams at once
/// (a worker waiting for the whole cap kept the other workers idle until the reader reached
/// their frames), and so does a frame when the pool has no such run free.
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
        if job.index <= st.head {
            return Whole::Stream;
        }
        if st.unread + k <= shared.opts.ahead_cap {
            break;
        }
        st = shared.wait(st);
    }
    match pool.try_get_run(k) {
        Some(run) => {
            st.unread += k;
            Whole::Run(run)
        }
        None => Whole::Stream,
    }
}

/// Decodes frame `job` into `run` in place, then sends the run's buffers.
fn decode_whole(
    dctx: &mut DCtx<'_>,
    job: &Job,
    mut run: Run,
    shared: &Arc<Shared>,
) -> Result<bool, String> {
    let fail = |what: &str| frame_error(job.index, job.offset, what);
    dctx.set_parameter(DParameter::StableOutBuffer(true)).map_err(|c| fail(get_error_name(c)))?;
    let out = run.full_mut();
    let mut pos = 0;
    let mut finished = false;
    let result = loop {
        let piece = match job.input.recv_timeout(CANCEL_POLL) {
            Ok(p) => p,
            Err(RecvTimeoutError::Timeout) if shared.cancelled() => break Ok(false),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) if finished => break Ok(true),
            Err(RecvTimeoutError::Disconnected) => {
                break Err(truncated(shared, job.index, job.offset));
            }
        };
        if finished {
            break Err(fail("data after the frame's end"));
        }
        let bytes = piece.bytes();
        let mut input = InBuffer::around(bytes);
        let step = loop {
            let mut output = OutBuffer::around_pos(&mut *out, pos);
            let used = input.pos();
            let r = dctx.decompress_stream(&mut output, &mut input);
            let progress = output.pos() > pos || input.pos() > used;
            pos = output.pos();
            match r {
                Err(code) => break Err(fail(get_error_name(code))),
                Ok(0) if input.pos() < bytes.len() => {
                    break Err(fail("data after the frame's end"));
                }
                Ok(0) => break Ok(true),
                Ok(_) if input.pos() == bytes.len() => break Ok(false),
                // The output holds the whole frame, so the decoder always moves on; a frame
                // that does not would be one larger than its header says, which zstd refuses.
                Ok(_) if !progress => break Err(fail("the frame is larger than its header says")),
                Ok(_) => {}
            }
        };
        match step {
            Ok(done) => finished = done,
            Err(e) => break Err(e),
        }
    };
    if result != Ok(true) {
        return result;
    }
    for b in run.into_bufs(pos) {
        if job.output.send(Out::Data(b)).is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Decodes one frame, sending buffers as they fill. Ok(false) when cancelled.
fn decode_stream(
    dctx: &mut DCtx<'_>,
    job: &Job,
    shared: &Arc<Shared>,
    pool: &Pool,
) -> Result<bool, String> {
    let mut out = None;
    let result = stream_into(dctx, job, shared, pool, &mut out);
    if out.take().is_some() {
        // Counted in `unread` by `output_buffer` and never sent (an error, or an empty last
        // buffer when the frame's output ended exactly at a buffer's end): left counted, a
        // few of them stopped every worker for good.
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
    job: &Job,
    shared: &Arc<Shared>,
    pool: &Pool,
    out: &mut Option<PoolBuf>,
) -> Result<bool, String> {
    let mut finished = false;
    loop {
        let piece = match job.input.recv_timeout(CANCEL_POLL) {
            Ok(p) => p,
            Err(RecvTimeoutError::Timeout) if shared.cancelled() => return Ok(false),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let bytes = piece.bytes();
        if finished {
            return Err(frame_error(job.index, job.offset, "data after the frame's end"));
        }
        let mut input = InBuffer::around(bytes);
        loop {
            // A full buffer goes to the reader; decoding continues into a fresh one.
            if out.as_ref().is_none_or(|b| b.len() == b.capacity()) {
                if let Some(full) = out.take()
                    && job.output.send(Out::Data(full)).is_err()
                {
                    return Ok(false);
                }
                match output_buffer(job.index, shared, pool) {
                    Some(b) => *out = Some(b),
                    None => return Ok(false),
                }
            }
            let b = out.as_mut().expect("an output buffer");
            let len = b.len();
            let mut output = OutBuffer::around_pos(b.full_mut(), len);
            let r = dctx.decompress_stream(&mut output, &mut input);
            let pos = output.pos();
            b.set_len(pos);
            match r {
                Err(code) => return Err(frame_error(job.index, job.offset, get_error_name(code))),
                Ok(0) => {
                    finished = true;
                    if input.pos() < bytes.len() {
                        return Err(frame_error(
                            job.index,
                            job.offset,
                            "data after the frame's end",
                        ));
                    }
                    break;
                }
                // More input needed, unless the output filled up (then there may be more).
                Ok(_) if input.pos() == bytes.len() && pos < b.capacity() => break,
                Ok(_) => {}
            }
        }
    }
    if out.as_ref().is_some_and(|b| !b.is_empty())
        && let Some(last) = out.take()
        && job.output.send(Out::Data(last)).is_err()
    {
        return Ok(false);
    }
    if !finished {
        return Err(truncated(shared, job.index, job.offset));
    }
    Ok(true)
}

/// An output buffer for frame `index`: frames wait while `ahead_cap` buffers are unread, the
/// reader's own frame while HEAD_EXTRA more are (it drains as the reader copies, so it always
/// gets one in the end). None when cancelled.
fn output_buffer(index: u64, shared: &Arc<Shared>, pool: &Pool) -> Option<PoolBuf> {
    let mut st = shared.lock();
    loop {
        if st.cancel {
            return None;
        }
        let cap = shared.opts.ahead_cap + if index <= st.head { HEAD_EXTRA } else { 0 };
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
        let pool = Pool::new(64 << 10, buffers);
        let opts = Options {
            workers,
            max_window_log: 27,
            ahead_cap: ahead_cap(buffers),
            input_budget: 2 << 20,
            piece: PIECE_STREAM,
        };
        let stats = Arc::new(DecodeStats::default());
        let input = Box::new(io::Cursor::new(data));
        let mut d = ParallelZstd::new(input, opts, pool, stats.clone()).unwrap();
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
            let (got, _, stats) = decode_skipping(data.clone(), workers, 64, 4096, 0).unwrap();
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

    #[test]
    fn multi_frame_in_order_at_any_thread_count() {
        let parts = parts((0..12).map(|i| 100_000 + i * 37_000));
        let want: Vec<u8> = parts.concat();
        let data = frames(&parts);
        // 2 buffers, the smallest frame pool (`config::divide`): `ahead_cap` 1, and with 4
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
                let pool = Pool::new(64 << 10, 8);
                let opts = Options {
                    workers,
                    max_window_log: 27,
                    ahead_cap: ahead_cap(8),
                    input_budget: 2 << 20,
                    piece: PIECE_STREAM,
                };
                let input = Box::new(Reads::new(data.clone(), cuts.clone()));
                let stats = Arc::new(DecodeStats::default());
                let mut d = ParallelZstd::new(input, opts, pool, stats).unwrap();
                let mut got = Vec::new();
                let r = d.read_to_end(&mut got);
                assert!(r.is_ok() && got == want, "reads of {read}, {workers} workers: {r:?}");
            }
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
            let pool = Pool::new(64 << 10, 16);
            let opts = Options {
                workers,
                max_window_log: 27,
                ahead_cap: 8,
                input_budget: 4 << 20,
                piece: PIECE_STREAM,
            };
            let stats = Arc::new(DecodeStats::default());
            let mut d =
                ParallelZstd::new(Box::new(io::Cursor::new(data.clone())), opts, pool, stats)
                    .unwrap();
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
            let pool = Pool::new(64 << 10, 4);
            let opts = Options {
                workers: 1,
                max_window_log: 27,
                ahead_cap: ahead_cap(4),
                input_budget: 2 << 20,
                piece: PIECE_STREAM,
            };
            let input = Box::new(Reads::new(data, cuts));
            let stats = Arc::new(DecodeStats::default());
            let mut d = ParallelZstd::new(input, opts, pool, stats).unwrap();
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
