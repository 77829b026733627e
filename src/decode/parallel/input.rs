//! A job's compressed bytes as its decoder takes them (`JobInput`): piece by piece, each piece
//! placed in its frame, zstd's end of every frame checked against where the splitter's walker
//! found it.

use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError};

use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, get_error_name};

use super::*;

/// A job's compressed input as its decoder takes it: piece by piece, knowing the frame each
/// piece belongs to, so that zstd's end of each frame is checked against the walker's. The
/// decoder calls `next` when zstd has used up the piece and wants more (or has finished a
/// frame), `consume` for what zstd took, and `frame_ended` when zstd says a frame is complete.
pub(super) struct JobInput {
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
    pub(super) frame_done: bool,
    /// Frames zstd has finished, of the job's `frames`.
    done: u64,
    pub(super) frames: u64,
}

/// What `JobInput::next` found.
pub(super) enum Next {
    /// Another piece: of the frame zstd is in, or the first of the next frame.
    More,
    /// The job's frames are all complete.
    End,
    /// The run was cancelled.
    Cancelled,
}

impl JobInput {
    pub(super) fn new(rx: Receiver<Vec<Piece>>, first: FrameAt) -> JobInput {
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
    pub(super) fn rest(&self) -> &[u8] {
        self.piece.as_ref().map_or(&[], |p| &p.bytes()[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
    }

    pub(super) fn error(&self, kind: io::ErrorKind, what: &str) -> io::Error {
        self.frame.error(kind, what)
    }

    /// One call of zstd's decompress_stream on what is left of the piece, into `output`: what
    /// zstd took is consumed, its error is the frame's, a frame it finished is checked
    /// (`frame_ended`). Returns zstd's hint (0: a frame ended) and the bytes it took.
    pub(super) fn decompress(
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
    pub(super) fn next(&mut self, shared: &Shared) -> io::Result<Next> {
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
