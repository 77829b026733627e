//! The portable backend: one synchronous system call at a time (openat, pwrite, close).
//! It is the reference the io_uring backend is tested against, and the fallback where the
//! kernel refuses io_uring.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use anyhow::{Result, anyhow};

use super::dest::Dest;
use super::direct::{DirectPolicy, clear_direct, reserve};
use super::outcome::MemberError;
use super::restart;
use super::{Stats, Writer, apply_namespace_op, member_failed};
use crate::plan::{Entry, Op};

struct OpenFile {
    fd: OwnedFd,
    /// Bytes reserved with fallocate so far (direct files only).
    preallocated: u64,
    /// End of the data received so far.
    received: u64,
    entry: Entry,
    size: u64,
    sparse: bool,
    /// Still in direct mode.
    direct: bool,
    /// Opened with O_DIRECT (counted so in the summary).
    went_direct: bool,
}

pub struct Portable {
    dest: Dest,
    policy: DirectPolicy,
    /// The file receiving Data ops; None while no file is open or after it was skipped.
    cur: Option<OpenFile>,
    stats: Stats,
    /// Resume points waiting for their members to land (src/resume/).
    marks: crate::mark::Pending,
}

impl Portable {
    pub fn new(dest: Dest, policy: DirectPolicy) -> Portable {
        Portable { dest, policy, cur: None, stats: Stats::default(), marks: Default::default() }
    }

    fn open_file(&mut self, entry: Entry, size: u64, sparse: bool, direct: bool) -> Result<()> {
        let mut direct = self.policy.opens_direct(direct);
        let fd = match self.dest.create_file(&entry, if direct { libc::O_DIRECT } else { 0 }) {
            Err(MemberError::Io(e)) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                self.policy.refused(self.dest.events());
                direct = false;
                self.dest.create_file(&entry, 0)
            }
            other => other,
        };
        match fd {
            Ok(fd) => {
                self.cur = Some(OpenFile {
                    fd,
                    preallocated: 0,
                    received: 0,
                    entry,
                    size,
                    sparse,
                    direct,
                    went_direct: direct,
                });
                Ok(())
            }
            Err(e) => {
                let e = self.dest.explain(&entry.path, e);
                member_failed(&self.dest, &entry, super::CANNOT_OPEN, e)
            }
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let Some(f) = self.cur.as_mut() else {
            return Ok(());
        };
        let fd = f.fd.as_raw_fd();
        let mut done = 0;
        if f.direct {
            reserve(fd, f.size, &mut f.preallocated, offset + data.len() as u64)
                .map_err(|e| super::incomplete(&f.entry.name, "cannot reserve space", e))?;
            // Whole aligned blocks go direct; an unaligned tail (only the last chunk has one)
            // is written after switching the fd to buffered mode.
            let aligned = self.policy.direct_part(data.len());
            if aligned > 0 {
                pwrite_all(fd, &data[..aligned], offset)
                    .map_err(|e| super::incomplete(&f.entry.name, "Cannot write", e))?;
                done = aligned;
            }
            if done < data.len() {
                clear_direct(fd)
                    .map_err(|e| anyhow!("{}: cannot leave direct IO mode: {e}", f.entry.name))?;
                f.direct = false;
            }
        }
        pwrite_all(fd, &data[done..], offset + done as u64)
            .map_err(|e| super::incomplete(&f.entry.name, "Cannot write", e))?;
        f.received = f.received.max(offset + data.len() as u64);
        self.stats.bytes += data.len() as u64;
        let landed = super::events::Event::Landed { bytes: data.len() as u64 };
        self.dest.events().event(landed);
        Ok(())
    }

    fn close_file(&mut self) -> Result<()> {
        let Some(f) = self.cur.take() else {
            return Ok(());
        };
        let fd = f.fd.as_raw_fd();
        if f.sparse {
            // Trailing holes: the data segments may stop short of the real size.
            // Safety: fd is open for writing.
            if restart(|| unsafe { libc::ftruncate(fd, f.size as libc::off_t) }) != 0 {
                let e = io::Error::last_os_error();
                return Err(anyhow!("{}: cannot set the size: {e}", f.entry.name));
            }
        }
        match self.dest.finish_file(fd, &f.entry) {
            Err(e) => member_failed(&self.dest, &f.entry, "cannot set metadata", e)?,
            Ok(()) => super::file_done(&self.dest, &f.entry, f.size, f.fd.as_fd()),
        }
        self.stats.files += 1;
        if f.went_direct {
            self.stats.files_direct += 1;
        }
        Ok(())
    }
}

impl Writer for Portable {
    fn apply(&mut self, op: Op) -> Result<()> {
        if let Some(e) = op.entry() {
            // Nothing is in flight here: directories the archive has left are stamped at once.
            self.dest.enter(&e.path);
            self.dest.settle()?;
        }
        match op {
            Op::File { entry, size, sparse, direct } => self.open_file(entry, size, sparse, direct),
            Op::Data { offset, buf } => self.write(offset, buf.data()),
            Op::End => self.close_file(),
            // Every op before it was applied in order, on this thread.
            Op::Barrier(done) => {
                let _ = done.send(());
                Ok(())
            }
            // Every member before it has landed: the previous End was applied.
            Op::Mark(m) => {
                let dirs = self.dest.carried(crate::mark::CARRIED_MAX);
                self.marks.hold(m, dirs);
                let floor = self.pending_floor();
                self.marks.publish(|t| floor >= t);
                Ok(())
            }
            Op::Restore(c) => {
                let (delay, dirs) = *c;
                self.dest.restore_carried(delay, dirs)
            }
            // File ops are matched above, so nothing comes back.
            op => apply_namespace_op(&mut self.dest, &mut self.stats, op).map(drop),
        }
    }

    fn pending_floor(&self) -> u64 {
        self.cur.as_ref().map_or(u64::MAX, |f| f.entry.offset)
    }

    fn finish(&mut self) -> Result<Stats> {
        if let Some(f) = self.cur.take() {
            // The producer stopped in the middle of this file (its error says why): leave it
            // as long as the data that arrived (every chunk written, an unaligned last one
            // buffered), not as long as its reservation, and owner-only.
            let fd = f.fd.as_raw_fd();
            if f.preallocated > f.received {
                // Safety: fd is open for writing. Best effort: the run is failing anyway.
                restart(|| unsafe { libc::ftruncate(fd, f.received as libc::off_t) });
            }
            self.dest.abandon_file(fd, &f.entry);
        }
        self.dest.leave_all();
        self.dest.settle()?;
        Ok(self.stats.clone())
    }
}

/// Writes all of `data` at `offset`, resubmitting after short writes and EINTR.
pub fn pwrite_all(fd: RawFd, mut data: &[u8], mut offset: u64) -> io::Result<()> {
    while !data.is_empty() {
        // Safety: data is a valid slice for its length; fd is open for writing.
        let n =
            unsafe { libc::pwrite(fd, data.as_ptr().cast(), data.len(), offset as libc::off_t) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        data = &data[n as usize..];
        offset += n as u64;
    }
    Ok(())
}
