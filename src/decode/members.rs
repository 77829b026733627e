//! Streams made of concatenated members (gzip members, bzip2 streams, xz streams), read as one:
//! a member decoder runs to the end of its member, then the format says what may come between
//! members (`Format::between`), as its own tool reads it. The decoders (flate2's `GzDecoder`,
//! bzip2's `BzDecoder`, liblzma's without `LZMA_CONCATENATED`) each read one member and stop
//! exactly after it; this loops around them.

use std::io::{self, BufRead, Read};

use super::source::Source;

/// What follows a member boundary.
pub enum Next {
    /// Another member: decode it.
    Member,
    /// Something the format steps over was consumed (an empty bzip2 stream): it counts as a
    /// member; look again.
    Skipped,
    /// The end of the stream (trailing data, if any, is ignored).
    End,
}

/// One multi-member format.
pub trait Format<R: BufRead> {
    type Decoder: Read;
    /// A decoder for the member starting at `src` (the format's settings in `self`).
    fn decoder(&self, src: Source<R>) -> io::Result<Self::Decoder>;
    /// The input back from a decoder that reached its member's end.
    fn input(d: Self::Decoder) -> Source<R>;
    /// At a boundary after `done` members, with `src` positioned there: what comes next (or
    /// an error for data the format's tool rejects).
    fn between(src: &mut Source<R>, done: u64) -> io::Result<Next>;
}

enum State<R, D> {
    Between(Source<R>),
    In(Box<D>),
    Done,
    /// Only transiently while moving between states, and after an error.
    Poisoned,
}

pub struct Members<R: BufRead, F: Format<R>> {
    format: F,
    state: State<R, F::Decoder>,
    /// Members read to their end.
    done: u64,
}

impl<R: BufRead, F: Format<R> + Default> Members<R, F> {
    pub fn new(input: Source<R>) -> Self {
        Members::with(input, F::default())
    }
}

impl<R: BufRead, F: Format<R>> Members<R, F> {
    pub fn with(input: Source<R>, format: F) -> Self {
        Members { format, state: State::Between(input), done: 0 }
    }
}

/// Decoded again from the start when a run resumes (the default unit): gzip members, bzip2
/// and xz streams could each be a unit, not done yet.
impl<R: BufRead, F: Format<R>> crate::archive::Skip for Members<R, F> {}

impl<R: BufRead, F: Format<R>> Read for Members<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, State::Poisoned) {
                State::Done => {
                    self.state = State::Done;
                    return Ok(0);
                }
                State::Poisoned => {
                    return Err(io::Error::other("an earlier error stopped the decoder"));
                }
                State::In(mut d) => {
                    let n = d.read(buf)?;
                    if n > 0 || buf.is_empty() {
                        self.state = State::In(d);
                        return Ok(n);
                    }
                    self.done += 1;
                    self.state = State::Between(F::input(*d));
                }
                State::Between(mut src) => match F::between(&mut src, self.done)? {
                    Next::Member => {
                        self.state = State::In(Box::new(self.format.decoder(src)?));
                    }
                    Next::Skipped => {
                        self.done += 1;
                        self.state = State::Between(src);
                    }
                    Next::End => {
                        self.state = State::Done;
                        return Ok(0);
                    }
                },
            }
        }
    }
}
