//! The splitter thread: reads the compressed input in pieces, finds the frames in it
//! (`frames::Walker`, headers only) and queues them as jobs, runs of small frames together
//! (`Filling`), within the input budget.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use super::*;
use crate::decode::archive_file::AlignedBuf;
use crate::decode::frames::{Carried, Event, FrameHeader, Walker};

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
pub(super) struct Splitter<'a> {
    shared: &'a Arc<Shared>,
    filling: Option<Filling>,
    /// Frames found so far, and jobs made.
    frames: u64,
    jobs: u64,
}

impl<'a> Splitter<'a> {
    pub(super) fn new(shared: &'a Arc<Shared>) -> Splitter<'a> {
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

    pub(super) fn run(mut self, mut input: Box<dyn Read + Send>, max_window: u64) {
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
