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
//!
//! This file holds what the three share (the job queue, `Shared`, a job's pieces); the
//! splitter is in `splitter.rs`, the workers in `worker.rs`, the reader in `reader.rs`, and a
//! job's input as zstd reads it in `input.rs`.

mod input;
mod reader;
mod splitter;
#[cfg(test)]
mod tests;
mod worker;

pub use reader::ParallelZstd;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::archive::UnitStart;
use crate::decode::archive_file::AlignedBuf;
use crate::decode::frames::Carried;
use crate::pool::PoolBuf;
use input::{JobInput, Next};

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

/// Gives `n` buffers' places in `ahead_cap` back.
fn release(shared: &Shared, n: usize) {
    shared.lock().unread -= n;
    shared.changed.notify_all();
}
