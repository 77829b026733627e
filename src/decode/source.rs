//! The compressed input over a buffered reader (a `BufReader` over a file or a pipe, or a
//! download that lends its blocks): its buffers are read in place, plus `peek` (the next few
//! bytes without consuming them, however the buffers split), `fill_more` (one more read, for
//! format detection that decides on whatever has arrived instead of waiting for a fixed
//! amount), and a budget that ends the input once the decoder has consumed that much more
//! (`Budget`).

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
    /// Bytes taken out of `inner`'s buffer to be looked at together (a `peek` across its
    /// buffers, format detection): `buf[pos..end]`, consumed before any more of `inner`'s.
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// `inner` came to its end: it is not read again (a terminal, or a program's reader,
    /// might wait for more).
    eof: bool,
    /// Bytes consumed so far, and where the budget ends them (u64::MAX: not armed yet).
    taken: u64,
    limit: u64,
    budget: Arc<Budget>,
}

impl<R: BufRead> Source<R> {
    /// A Source over `inner`, whose own buffer (`capacity` bytes) holds only what is looked at
    /// across `inner`'s buffers: the decoders read `inner`'s buffers where they are (a
    /// download's blocks, a `BufReader`'s buffer).
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

    /// How many bytes `inner`'s buffer holds, filling it when empty (again when interrupted, a
    /// read of a pipe under a signal); 0 at the end of the input, from then on without a read.
    /// The slice itself is `inner.fill_buf()` again, which returns it without reading.
    fn fill_len(&mut self) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        let n = loop {
            match self.inner.fill_buf() {
                Ok(b) => break b.len(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        self.eof = n == 0;
        Ok(n)
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

    /// The bytes taken into the Source's own buffer, unconsumed (what `fill_more` and `peek`
    /// gathered).
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Moves the next bytes of the input into the Source's own buffer, after what it holds:
    /// what `inner` has buffered, or one read of it. Returns false at the end of the input
    /// (or when the buffer is full).
    pub fn fill_more(&mut self) -> io::Result<bool> {
        self.compact();
        let room = self.buf.len() - self.end;
        if room == 0 || self.fill_len()? == 0 {
            return Ok(false);
        }
        let avail = self.inner.fill_buf()?;
        let n = avail.len().min(room);
        self.buf[self.end..self.end + n].copy_from_slice(&avail[..n]);
        self.inner.consume(n);
        self.end += n;
        Ok(true)
    }

    /// The next `n` bytes without consuming them (fewer only at the end of the input). Reads
    /// until they are there: on a pipe this waits for them, as any decoder would. Where
    /// `inner`'s buffer holds them, they are looked at there.
    pub fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        debug_assert!(n <= self.buf.len());
        // Looking for more is where a decoder stepping over input without consuming it through
        // fill_buf (empty bzip2 streams) meets the budget.
        self.allowance()?;
        if self.pos == self.end && self.fill_len()? >= n {
            return Ok(&self.inner.fill_buf()?[..n]);
        }
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
impl<R: BufRead> crate::archive::Skip for Source<R> {
    fn unit_at_or_before(&self, t: u64) -> Option<crate::archive::UnitStart> {
        Some(crate::archive::UnitStart { index: 0, compressed: t, decoded: t })
    }
}

impl<R: BufRead> Read for Source<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.allowance()?;
        // With nothing of its own and no budget, the input's own read: a `BufReader`'s large
        // read goes straight to the caller's buffer (a plain archive's file data lands in
        // pool buffers without a copy), a download's copies its blocks' bytes there once.
        if self.pos == self.end && self.limit == u64::MAX {
            if self.eof {
                return Ok(0);
            }
            let n = self.inner.read(out)?;
            self.eof = n == 0 && !out.is_empty();
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

/// The Source's own bytes first, then `inner`'s buffer itself: a decoder reading through
/// `fill_buf` (zstd, gzip, bzip2, xz) decodes from the input's buffers in place.
impl<R: BufRead> BufRead for Source<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let allowed = usize::try_from(self.allowance()?).unwrap_or(usize::MAX);
        if self.pos < self.end {
            let end = self.end.min(self.pos.saturating_add(allowed));
            return Ok(&self.buf[self.pos..end]);
        }
        if self.fill_len()? == 0 {
            return Ok(&[]);
        }
        let avail = self.inner.fill_buf()?;
        Ok(&avail[..avail.len().min(allowed)])
    }

    fn consume(&mut self, n: usize) {
        if self.pos < self.end {
            let n = n.min(self.end - self.pos);
            self.pos += n;
            self.taken += n as u64;
        } else {
            self.inner.consume(n);
            self.taken += n as u64;
        }
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
        let mut s = Source::with_capacity(16, io::BufReader::with_capacity(4, Dribble(&data, 3)));
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
        let mut s = Source::with_capacity(8, io::BufReader::with_capacity(16, &data[..]));
        let mut big = vec![0u8; 64];
        assert_eq!(s.read(&mut big).unwrap(), 64);
        assert_eq!(s.fill_buf().unwrap().len(), 16);
    }

    /// Once the input has ended it is not read again (a terminal, or a program's reader, may
    /// wait for more): this one fails a read after its end.
    #[test]
    fn the_end_is_read_once() {
        struct Once(bool);
        impl Read for Once {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                assert!(!self.0, "read after its end");
                self.0 = true;
                Ok(0)
            }
        }
        let mut s = Source::with_capacity(8, io::BufReader::new(Once(false)));
        assert_eq!(s.peek(4).unwrap(), b"");
        assert!(!s.fill_more().unwrap());
        assert_eq!(s.fill_buf().unwrap(), b"");
        assert_eq!(s.read(&mut [0u8; 64]).unwrap(), 0);
        let mut s = Source::with_capacity(8, io::BufReader::new(Once(false)));
        assert_eq!(s.read(&mut [0u8; 64]).unwrap(), 0);
        assert_eq!(s.fill_buf().unwrap(), b"");
    }

    /// The decoders read the input's own buffer where it is (a download's block), and a peek
    /// it holds is looked at there: nothing is copied into the Source's buffer.
    #[test]
    fn the_input_buffer_is_read_in_place() {
        let data: Vec<u8> = (0..=255).collect();
        let mut s = Source::with_capacity(8, &data[..]);
        assert_eq!(s.peek(4).unwrap().as_ptr(), data.as_ptr());
        let lent = s.fill_buf().unwrap();
        assert_eq!((lent.as_ptr(), lent.len()), (data.as_ptr(), 256));
        s.consume(100);
        assert_eq!(s.fill_buf().unwrap().as_ptr(), data[100..].as_ptr());
        assert!(s.buffered().is_empty());
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, &data[100..]);
    }
}
