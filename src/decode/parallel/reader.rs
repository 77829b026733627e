//! The reader: the decoded stream on the caller's thread, jobs taken in order, each decoded
//! here straight into the caller's buffer (`decode_inline`) or copied (or handed on in place)
//! out of the buffers a worker filled ahead (`FromWorker`).

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

use zstd::zstd_safe::{DCtx, DParameter, OutBuffer, ResetDirective};

use super::splitter::Splitter;
use super::worker::work;
use super::*;
use crate::archive::{Ahead, Lendable, Skip, UnitStart, Units};
use crate::pool::{Pool, PoolBuf};

/// The decoded stream (see the module doc).
pub struct ParallelZstd {
    pub(super) shared: Arc<Shared>,
    stats: Arc<DecodeStats>,
    current: Current,
    dctx: DCtx<'static>,
    workers: Vec<JoinHandle<()>>,
    /// The frame pool, to wake a worker waiting for a run when the reader moves on.
    pub(super) pool: Pool,
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
