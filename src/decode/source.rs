//! The compressed input, buffered: what `BufReader` does, plus `peek` (the next few bytes
//! without consuming them, however the reads split), `fill_more` (one more read, for format
//! detection that decides on whatever has arrived instead of waiting for a fixed amount), and
//! a budget that ends the input once the decoder has consumed that much more (`Budget`).

use std::io::{self, BufRead, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Set from outside the decoder (it owns the Source): once `arm`ed with N, the Source ends
/// (with an error) after N more bytes have been consumed, and says so in `reached`.
#[derive(Default)]
pub struct Budget {
    /// Bytes still allowed when armed; 0 while unarmed.
    armed: AtomicU64,
    reached: AtomicBool,
}

impl Budget {
    pub fn arm(&self, bytes: u64) {
        self.armed.store(bytes.max(1), Ordering::Relaxed);
    }

    /// The input ended at the budget: an error it caused is not the stream's.
    pub fn reached(&self) -> bool {
        self.reached.load(Ordering::Relaxed)
    }
}

pub struct Source<R> {
    inner: R,
    buf: Box<[u8]>,
    /// Unconsumed bytes are `buf[pos..end]`.
    pos: usize,
    end: usize,
    /// `inner` returned 0 (end of input).
    eof: bool,
    /// Bytes consumed so far, and where the budget ends them (u64::MAX: not armed yet).
    taken: u64,
    limit: u64,
    budget: Arc<Budget>,
}

impl<R: Read> Source<R> {
    pub fn with_capacity(capacity: usize, inner: R) -> Source<R> {
        Source {
            inner,
            buf: vec![0; capacity].into_boxed_slice(),
            pos: 0,
            end: 0,
            eof: false,
            taken: 0,
            limit: u64::MAX,
            budget: Arc::default(),
        }
    }

    /// The handle that arms this Source's budget.
    pub fn budget(&self) -> Arc<Budget> {
        self.budget.clone()
    }

    /// How many more bytes may be consumed; an error once the budget is spent.
    fn allowance(&mut self) -> io::Result<u64> {
        if self.limit == u64::MAX {
            let armed = self.budget.armed.load(Ordering::Relaxed);
            if armed > 0 {
                self.limit = self.taken.saturating_add(armed);
            }
        }
        if self.taken >= self.limit {
            self.budget.reached.store(true, Ordering::Relaxed);
            return Err(io::Error::other("the check after the end of the archive stopped here"));
        }
        Ok(self.limit - self.taken)
    }

    /// The buffered bytes, unconsumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// One more read from the input, appended to what is buffered. Returns false at the end of
    /// the input (or when the buffer is full).
    pub fn fill_more(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        self.compact();
        if self.end == self.buf.len() {
            return Ok(false);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next `n` bytes without consuming them (fewer only at the end of the input). Reads
    /// until they are there: on a pipe this waits for them, as any decoder would.
    pub fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        debug_assert!(n <= self.buf.len());
        // Looking for more is where a decoder stepping over input without consuming it through
        // fill_buf (empty bzip2 streams) meets the budget.
        self.allowance()?;
        while self.end - self.pos < n && self.fill_more()? {}
        let avail = (self.end - self.pos).min(n);
        Ok(&self.buf[self.pos..self.pos + avail])
    }

    /// Moves the unconsumed bytes to the front of the buffer.
    fn compact(&mut self) {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
    }
}

/// A plain archive starts again at any byte: its decoded offsets are its input offsets (the
/// caller knows whether this Source is the archive itself or a program's output).
impl<R: Read> crate::archive::Skip for Source<R> {
    fn unit_at_or_before(&self, t: u64) -> Option<crate::archive::UnitStart> {
        Some(crate::archive::UnitStart { index: 0, compressed: t, decoded: t })
    }
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.allowance()?;
        // A large read with nothing buffered goes straight to the caller's buffer (a plain
        // archive's file data lands in pool buffers without a copy), as BufReader does.
        if self.pos == self.end && out.len() >= self.buf.len() && self.limit == u64::MAX {
            if self.eof {
                return Ok(0);
            }
            let n = self.inner.read(out)?;
            self.eof = n == 0;
            self.taken += n as u64;
            return Ok(n);
        }
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Source<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let allowed = usize::try_from(self.allowance()?).unwrap_or(usize::MAX);
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
            self.fill_more()?;
        }
        let end = self.end.min(self.pos.saturating_add(allowed));
        Ok(&self.buf[self.pos..end])
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.pos);
        self.pos += n;
        self.taken += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns its data a few bytes per read, as a pipe may.
    struct Dribble<'a>(&'a [u8], usize);

    impl Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn peek_across_reads_and_read_back() {
        let data: Vec<u8> = (0..=255).collect();
        let mut s = Source::with_capacity(16, Dribble(&data, 3));
        assert_eq!(s.peek(5).unwrap(), &data[..5]);
        assert_eq!(s.buffered(), &data[..6]);
        let mut two = [0u8; 2];
        s.read_exact(&mut two).unwrap();
        assert_eq!(two, [0, 1]);
        // Peeking past the buffer's end compacts it.
        assert_eq!(s.peek(16).unwrap(), &data[2..18]);
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, &data[2..]);
        assert_eq!(s.peek(4).unwrap(), b"");
    }

    #[test]
    fn the_budget_ends_the_input() {
        let data = [1u8; 100];
        let mut s = Source::with_capacity(8, &data[..]);
        let mut three = [0u8; 3];
        s.read_exact(&mut three).unwrap();
        s.budget().arm(10);
        let mut got = Vec::new();
        let e = s.read_to_end(&mut got).unwrap_err();
        assert_eq!(got.len(), 10, "{e}");
        assert!(s.budget().reached());
    }

    #[test]
    fn large_reads_bypass_the_buffer() {
        let data = [7u8; 100];
        let mut s = Source::with_capacity(8, &data[..]);
        let mut big = vec![0u8; 64];
        assert_eq!(s.read(&mut big).unwrap(), 64);
        assert_eq!(s.fill_buf().unwrap().len(), 8);
    }
}
