//! The bytes under the headers: blocks read (the one peeked at first), a member's data read
//! into the caller's buffer, data passed over in place, and the rest of a member read past
//! before the next header.

use std::io;

use super::{Fill, Reader, Res, SCRATCH, eof, io_what, read_full, short_read};
use crate::archive::Skip;
use crate::archive::format::{self, BLOCK, Block, BlockCheck};

impl<R: Skip> Reader<R> {
    pub(super) fn read_data_inner(&mut self, buf: &mut [u8]) -> Res<Option<(u64, usize)>> {
        let Some(cur) = self.cur.as_mut() else {
            return Ok(None);
        };
        if !cur.readable {
            return Ok(None);
        }
        let (offset, n) = match &cur.segments {
            Some(segments) => loop {
                let Some(s) = segments.get(cur.seg) else {
                    return Ok(None);
                };
                let left = s.len - cur.seg_done;
                if left == 0 {
                    cur.seg += 1;
                    cur.seg_done = 0;
                    continue;
                }
                break (s.offset + cur.seg_done, left.min(buf.len() as u64) as usize);
            },
            None => {
                if cur.data_left == 0 {
                    return Ok(None);
                }
                (cur.next, cur.data_left.min(buf.len() as u64) as usize)
            }
        };
        let (k, res) = read_full(&mut self.inner, &mut buf[..n]);
        self.pos += k as u64;
        cur.data_left -= k as u64;
        if cur.segments.is_some() {
            cur.seg_done += k as u64;
        } else {
            cur.next += k as u64;
        }
        if k < n {
            // The input ended inside the data: what arrived is handed on (GNU tar writes it
            // too), and the error is the next call's (sticky from here: `check`). Not after a
            // read error: a decoder that failed (a damaged zstd frame) may have given bytes
            // its checksum never vouched for.
            let clean_end = res.is_ok();
            let what = short_read(res);
            let name = cur.name.clone();
            let e = self.msg(Some(&name), self.pos, &what);
            if k == 0 || !clean_end {
                return Err(e);
            }
            self.error = Some(e);
            return Ok(Some((offset, k)));
        }
        Ok(Some((offset, n)))
    }

    /// Reads one block, taking the peeked one first.
    pub(super) fn read_block(&mut self, blk: &mut Block) -> io::Result<Fill> {
        if let Some(p) = self.peeked.take() {
            *blk = *p;
            self.pos += BLOCK as u64;
            return Ok(Fill::Full);
        }
        let (n, res) = read_full(&mut self.inner, blk);
        self.pos += n as u64;
        if n < BLOCK {
            res?;
        }
        Ok(match n {
            0 => Fill::Eof,
            BLOCK => Fill::Full,
            n => Fill::Partial(n),
        })
    }

    /// Reads one block that must be there (extension data, sparse maps).
    pub(super) fn read_block_full(&mut self, blk: &mut Block) -> io::Result<()> {
        match self.read_block(blk)? {
            Fill::Full => Ok(()),
            Fill::Eof | Fill::Partial(_) => Err(eof()),
        }
    }

    /// Consumes `n` bytes (the peeked block counts as its first 512).
    pub(super) fn skip(&mut self, mut n: u64) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        if self.peeked.take().is_some() {
            n = n.saturating_sub(BLOCK as u64);
            self.pos += BLOCK as u64;
        }
        if self.scratch.is_empty() {
            self.scratch = vec![0; SCRATCH];
        }
        while n > 0 {
            match self.inner.skip_in_place(n) {
                Ok(0) => {}
                Ok(k) => {
                    // At most `n` by the trait's contract; min() so a source that broke it
                    // could not wrap the count.
                    let k = k.min(n);
                    n -= k;
                    self.pos += k;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let want = n.min(self.scratch.len() as u64) as usize;
            match self.inner.read(&mut self.scratch[..want]) {
                Ok(0) => return Err(eof()),
                Ok(k) => {
                    n -= k as u64;
                    self.pos += k as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads past the rest of the current member.
    pub(super) fn finish_current(&mut self) -> Res<()> {
        let Some(cur) = self.cur.take() else {
            return Ok(());
        };
        let fail = |s: &Self, e: &io::Error| s.msg(Some(&cur.name), s.pos, &io_what(e));
        if cur.maybe_data {
            // Traditional tars ignore the size of hard links (and some writers fill it in
            // without storing data), while pax allows hard links with data. Look at the
            // next block: a valid header or an end block means there is no data.
            let mut blk = Box::new([0u8; BLOCK]);
            match read_full(&mut self.inner, &mut blk[..]) {
                (0, Ok(())) => return Ok(()),
                (BLOCK, _) => {
                    let check = format::check(&blk);
                    self.peeked = Some(blk);
                    if check != BlockCheck::BadChecksum {
                        return Ok(());
                    }
                }
                (n, res) => {
                    self.pos += n as u64;
                    return Err(fail(self, &res.err().unwrap_or_else(eof)));
                }
            }
        }
        let n = cur.data_left.saturating_add(cur.pad);
        self.skip(n).map_err(|e| fail(self, &e))
    }
}
