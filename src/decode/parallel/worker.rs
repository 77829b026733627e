//! The workers: each claims queued jobs ahead of the reader's and decodes them into frame-pool
//! buffers, in place into a run of adjacent buffers when the frames' headers give their
//! size (`run_for`), else buffer by buffer within `ahead_cap`.

use std::io;
use std::sync::Arc;

use zstd::zstd_safe::{DCtx, DParameter, OutBuffer, ResetDirective, get_error_name};

use super::*;
use crate::pool::{Pool, PoolBuf, Run};

/// A worker: claims jobs ahead of the reader and decodes them into pool buffers.
pub(super) fn work(shared: &Arc<Shared>, pool: &Pool) {
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
