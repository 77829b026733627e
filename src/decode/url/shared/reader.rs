//! The reader's side of the download (actions): it takes the window's chunks in archive
//! order, waiting on the first piece (`Window::first_start`: any block landing there wakes
//! it), and feeds what it took to `--checksum` and `--keep-archive`; the decoders read the
//! chunks' blocks in place (`url::Reader`, a `BufRead`) and hand them back (`consumed`).

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

    /// A chunk's block back in the window once the reader is done with it (`len`: the
    /// chunk's length when taken).
    pub fn consumed(&self, block: Box<[u8]>, len: usize) {
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

    /// The reader's next chunk in archive order (None at the end of the download), fed whole
    /// to the checksum and the kept copy as it is taken: the bytes the reader holds count as
    /// read, as a file's read-ahead does. Its block goes back to the window with `consumed`.
    pub fn take(&self) -> io::Result<Option<Chunk>> {
        let mut sink = self.sink();
        if let Some((kind, why)) = &sink.broken {
            return Err(io::Error::new(*kind, why.clone()));
        }
        if sink.eof {
            return Ok(None);
        }
        let Some(c) = self.next_chunk()? else {
            sink.eof = true;
            return Ok(None);
        };
        let bytes = &c.block[c.pos..c.pos + c.len];
        sink.at += c.len as u64;
        if let Some(h) = &mut sink.hasher {
            h.update(bytes);
        }
        if let Some(f) = &mut sink.keep
            && let Err(e) = f.write_all(bytes)
        {
            // Every later take fails too: a reader that already has bytes of this read goes
            // on with them and meets the error at its next call, not a hole in the archive.
            let why = format!("--keep-archive: {e}");
            sink.broken = Some((e.kind(), why.clone()));
            drop(sink);
            self.consumed(c.block, c.len);
            return Err(io::Error::new(e.kind(), why));
        }
        Ok(Some(c))
    }

    pub fn sink(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }
}
