//! The reader's side of the download (actions): it takes the window's chunks in archive
//! order, waiting on the first piece (`Window::first_start`: any block landing there wakes
//! it), and feeds what it consumed to `--checksum` and `--keep-archive`.

use std::io::{self, Write};
use std::sync::MutexGuard;
use std::time::Instant;

use sha2::Digest;

use super::super::window::{Chunk, Take};
use super::{Shared, Sink};

impl Shared {
    /// Takes the reader's next chunk: Ok(None) at the end of the download.
    fn next_chunk(&self) -> io::Result<Option<Chunk>> {
        let mut st = self.lock();
        loop {
            if let Some(e) = &st.failed {
                return Err(io::Error::other(e.clone()));
            }
            if st.cancel {
                return Err(io::Error::other("the download was stopped"));
            }
            let got = st.window.take();
            if st.window.head_moved() && st.work_waiters > 0 {
                // The standby connections look at the new head: it may be worth a copy.
                self.work.notify_all();
            }
            match got {
                Take::Chunk(c) => {
                    if let Some(t) = st.waiting_since.take() {
                        st.waited += t.elapsed();
                    }
                    return Ok(Some(c));
                }
                Take::End => return Ok(None),
                Take::Wait => {}
            }
            if st.waiting_since.is_none() {
                st.waiting_since = Some(Instant::now());
                // A connection waiting for room or for a job may now copy the late head.
                if st.work_waiters > 0 {
                    self.work.notify_all();
                }
            }
            st = self.data.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn consumed(&self, block: Box<[u8]>, len: usize) {
        let mut st = self.lock();
        st.window.consumed(block, len);
        // Wake the waiting connections once what they wait for fits.
        let wake = st.work_waiters > 0 && st.window.free_bytes() >= st.room_wanted;
        if wake {
            st.room_wanted = u64::MAX;
        }
        drop(st);
        if wake {
            self.work.notify_all();
        }
    }

    /// The reader's read: the next bytes in archive order, fed to the checksum and the kept
    /// copy as they go. As a regular file's read, it fills `out` unless the archive ends (or
    /// the download fails: the bytes before the failure come first, the error at the next
    /// call), so the decoders see the same reads as from a file, whatever the pieces and
    /// blocks the bytes arrived in.
    pub fn read(&self, out: &mut [u8]) -> io::Result<usize> {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while n < out.len() && !sink.eof {
            if let Some((c, _)) = &mut sink.cur {
                let k = c.len.min(out.len() - n);
                out[n..n + k].copy_from_slice(&c.block[c.pos..c.pos + k]);
                c.pos += k;
                c.len -= k;
                n += k;
                if c.len == 0 {
                    let (c, total) = sink.cur.take().expect("just matched");
                    self.consumed(c.block, total);
                }
                continue;
            }
            match self.next_chunk() {
                Ok(Some(c)) => {
                    let total = c.len;
                    sink.cur = Some((c, total));
                }
                Ok(None) => sink.eof = true,
                Err(e) if n == 0 => return Err(e),
                Err(_) => break,
            }
        }
        sink.at += n as u64;
        let done = &out[..n];
        if let Some(h) = &mut sink.hasher {
            h.update(done);
        }
        if let Some(f) = &mut sink.keep {
            f.write_all(done)
                .map_err(|e| io::Error::new(e.kind(), format!("--keep-archive: {e}")))?;
        }
        Ok(n)
    }

    pub fn sink(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }
}
