//! The io_uring backend: many files in flight, submissions batched, completions reaped while
//! the decoder keeps filling the pool.
//!
//! Each file is a small state machine (Agave's file creator has the same shape):
//! open (IORING_OP_OPENAT relative to a cached directory fd) → writes (WRITE_FIXED from the
//! registered pool when registration succeeded, else WRITE) → for a direct-IO file, an
//! unaligned tail written buffered after O_DIRECT is cleared → metadata → close
//! (IORING_OP_CLOSE). Data that arrives before the open completes waits in the file's queue.
//!
//! Every operation is an entry in `ops` whose index is the `user_data`; the entry owns (or its
//! file owns) whatever memory the kernel reads, so nothing is freed while in flight, and
//! `Drop` waits for every operation before the pool can go away.
//!
//! Directories, symlinks, hard links and FIFOs stay synchronous (through `dest.rs`); before
//! one of them, or a file, touches a path that an in-flight file occupies (the same path, an
//! ancestor, or a hard link's target), the ring is drained so archive order is kept.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use anyhow::{Result, anyhow};
use io_uring::{IoUring, opcode, squeue, types};

use super::dest::{Dest, Slot};
use super::direct::{DirectPolicy, clear_direct, reserve};
use super::outcome::MemberError;
use super::tree::{self, NodeId};
use super::{Stats, Writer, apply_namespace_op, member_failed};
use crate::plan::{Entry, Op};
use crate::policy::safety::SafePath;
use crate::pool::{Pool, PoolBuf};

/// Submission queue size. 256 entries hold a batch for ~85 small files (open+write+close)
/// and are far more than the 64 writes a default pool can have in flight.
const RING_ENTRIES: u32 = 256;

/// Completion queue size; also the cap on operations in flight (so the CQ never overflows).
const CQ_ENTRIES: u32 = 2 * RING_ENTRIES;

/// Queued submissions that trigger an io_uring_enter: batching amortises the syscall over
/// ~10 small files without leaving the disk idle.
const SUBMIT_BATCH: usize = 32;

enum OpKind {
    Open,
    /// A write of `len` bytes at `ptr` to `offset`. `buf` owns the memory, or is None when the
    /// file's `tail` holds it (the last chunk of a direct file is written in two parts).
    /// `index`: the registered buffer it lies in (WRITE_FIXED), None for a plain WRITE.
    Write {
        buf: Option<PoolBuf>,
        index: Option<u16>,
        ptr: *const u8,
        len: usize,
        offset: u64,
    },
    Close,
}

struct Pending {
    file: usize,
    kind: OpKind,
}

struct FileState {
    entry: Entry,
    /// Bytes reserved with fallocate so far (direct files only).
    preallocated: u64,
    /// End of the data received so far.
    received: u64,
    /// The producer stopped inside this file: close it as it is, without its metadata.
    incomplete: bool,
    size: u64,
    sparse: bool,
    /// Opened (or being opened) with O_DIRECT, and still in direct mode.
    direct: bool,
    /// Counted as a direct-IO file in the summary.
    went_direct: bool,
    /// Keeps the directory fd and the name alive while the open is in flight.
    slot: Slot,
    /// The file's node in the destination tree, busy until the file is closed.
    node: NodeId,
    fd: Option<OwnedFd>,
    /// Chunks that arrived before the open completed.
    queued: Vec<(u64, PoolBuf)>,
    writes: usize,
    ended: bool,
    /// The member was skipped (open failed): its remaining data is dropped.
    failed: bool,
    /// The last chunk of a direct file: (file offset of the unaligned tail, its start in the
    /// buffer, the buffer). Written buffered once every direct write has completed.
    tail: Option<(u64, usize, PoolBuf)>,
    tail_submitted: bool,
    closing: bool,
    /// Opens that came back with EINTR (resubmitted up to `super::RESTARTS` times).
    interrupted: u32,
    /// `--overwrite -h` and a symlink at the path: opened through it (`Dest::open_through`),
    /// here, after everything in flight has landed (it may be a file written before).
    through: bool,
}

pub struct Uring {
    ring: IoUring,
    /// The registered buffers (kept so the regions outlive the ring's use of them).
    table: Table,
    dest: Dest,
    policy: DirectPolicy,
    ops: Slab<Pending>,
    files: Slab<FileState>,
    /// Files open (or being opened) at once, at most: the fd budget's share.
    max_files: usize,
    /// Files written buffered are opened with openat(2) on this thread instead of
    /// IORING_OP_OPENAT (see `OPEN_BUFFERED_HERE_FROM`).
    open_buffered_here: bool,
    /// Files whose open failed for want of fds, to reopen once others have closed.
    reopen: Vec<usize>,
    /// The file receiving Data ops.
    current: Option<usize>,
    /// Operations submitted or queued and not yet reaped.
    in_flight: usize,
    stats: Stats,
    /// Resume points waiting for their members to land (src/resume/), and the files closed
    /// when they were last looked at (nothing lands between two closes but namespace ops,
    /// which land at once: the slab is scanned once per close, not once per op).
    marks: crate::mark::Pending,
    marks_seen: u64,
}

// Safety: the raw pointers in `ops` point into pool buffers owned by the same entries (or
// their files), which are plain memory usable from any thread; the ring and fds are Send. A
// Uring is used by one thread at a time (it is moved into its writer thread).
unsafe impl Send for Uring {}

/// From this many writer threads on, each opens the files it writes buffered on its own
/// thread. IORING_OP_OPENAT with O_CREAT cannot complete without blocking, so io_uring hands
/// every open to an io-wq worker; with several rings those workers crowd the same directory
/// and inode-allocation locks (`rwsem_spin_on_owner` in `perf`). 100,000 small files to the
/// RAM-backed ext4, extract+sync, medians of 3 interleaved runs: 2 writers with ring opens
/// 4.21 s, with opens on the writer threads 3.81 s (`--io portable` 3.89 s); 1 writer with
/// ring opens 4.55 s, on its thread 4.92 s (one thread gains from opens running beside it).
/// Data still goes through the ring, and files written with O_DIRECT open there too.
pub const OPEN_BUFFERED_HERE_FROM: usize = 2;

/// The ring's table of registered buffers: the file data pool's in slots `0..n`, and, in the
/// slots after them, the decoder's frame pool, whose buffers come as file data where the tar
/// stage hands them on (lend.rs). Those slots are reserved empty when the ring is set up and
/// filled when the first such buffer comes, so that the frame pool of an archive whose frames
/// are never handed on (one frame, or a listing) is not pinned (registering pins, and so
/// makes resident, every page). A direct write from a buffer that is not registered pins its
/// pages itself, and io_uring runs it on an io-wq worker: `--threads 2 --direct-io` of the
/// agave archive spent 2 % of its samples in `gup_fast_fallback` there.
struct Table {
    files: Pool,
    /// Whether the file pool is registered (else every write is a plain WRITE).
    registered: bool,
    frames: Option<Pool>,
    frame_slots: Slots,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Slots {
    /// No slots for the frame pool: its buffers are written with plain WRITEs.
    None,
    Reserved,
    Filled,
}

impl Table {
    fn new(ring: &IoUring, files: &Pool, frames: Option<&Pool>) -> Table {
        let iovecs = files.iovecs();
        let mut table = Table {
            files: files.clone(),
            registered: false,
            frames: frames.cloned(),
            frame_slots: Slots::None,
        };
        if let Some(f) = frames {
            // Empty entries (no address, no length) are slots to fill later (Linux 5.13).
            let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
            let mut all = iovecs.clone();
            all.resize(iovecs.len() + f.count(), empty);
            let tags = vec![0u64; all.len()];
            // Safety: the iovecs describe the file pool's region, which lives as long as
            // `table.files` (a clone of the pool's Arc) inside the Uring, i.e. longer than the
            // ring; the empty entries describe no memory.
            if all.len() <= usize::from(u16::MAX)
                && unsafe { ring.submitter().register_buffers2(&all, &tags) }.is_ok()
            {
                table.registered = true;
                table.frame_slots = Slots::Reserved;
                return table;
            }
        }
        // Safety: as above.
        table.registered = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        table
    }

    /// Fills the frame pool's slots when `buf` is its first buffer to come.
    fn prepare(&mut self, ring: &IoUring, buf: &PoolBuf) {
        if self.frame_slots != Slots::Reserved || self.files.holds(buf) {
            return;
        }
        let Some(frames) = self.frames.as_ref().filter(|f| f.holds(buf)) else { return };
        let at = self.files.count() as u32;
        // Safety: the iovecs describe the frame pool's region, which lives as long as
        // `self.frames` (a clone of the pool's Arc), i.e. longer than the ring (see `new`).
        let filled =
            unsafe { ring.submitter().register_buffers_update(at, &frames.iovecs(), None) };
        // Refused (RLIMIT_MEMLOCK, for one): plain writes for the frame pool's buffers.
        self.frame_slots = if filled.is_ok() { Slots::Filled } else { Slots::None };
    }

    /// The registered buffer `buf` lies in (WRITE_FIXED), None for a plain WRITE.
    fn index(&self, buf: &PoolBuf) -> Option<u16> {
        if !self.registered {
            return None;
        }
        if self.files.holds(buf) {
            return Some(buf.index() as u16);
        }
        self.frames.as_ref().filter(|f| f.holds(buf))?;
        let slot = self.files.count() + buf.index() as usize;
        (self.frame_slots == Slots::Filled).then_some(slot as u16)
    }
}

/// Why the ring could not be set up (the caller falls back to the portable backend).
/// `probe`: the kernel's answer, or the one the test suite asks for (`--debug-uring`).
pub fn setup(probe: super::RingProbe) -> io::Result<IoUring> {
    if probe == super::RingProbe::Refused {
        // Behave like kernel.io_uring_disabled=2.
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    IoUring::builder().setup_cqsize(CQ_ENTRIES).build(RING_ENTRIES)
}

impl Uring {
    pub fn new(
        ring: IoUring,
        pool: &Pool,
        frames: Option<&Pool>,
        dest: Dest,
        policy: DirectPolicy,
        max_files: usize,
        open_buffered_here: bool,
    ) -> Uring {
        let table = Table::new(&ring, pool, frames);
        Uring {
            ring,
            table,
            dest,
            policy,
            ops: Slab::default(),
            files: Slab::default(),
            max_files: max_files.max(1),
            open_buffered_here,
            reopen: Vec::new(),
            current: None,
            in_flight: 0,
            stats: Stats::default(),
            marks: Default::default(),
            marks_seen: u64::MAX,
        }
    }

    /// Publishes the resume points whose members have all landed (one scan of the files in
    /// flight, only while a point waits).
    fn publish_marks(&mut self) {
        if !self.marks.is_empty() && self.marks_seen != self.stats.files {
            self.marks_seen = self.stats.files;
            let floor = self.pending_floor();
            self.marks.publish(|t| floor >= t);
        }
    }

    /// Queues one submission. The caller guarantees that the memory the entry points to is
    /// owned by `ops[user_data]` or its file, which live until the completion is reaped.
    fn push(&mut self, entry: squeue::Entry) -> Result<()> {
        while self.in_flight >= CQ_ENTRIES as usize {
            self.wait_one()?;
        }
        loop {
            // Safety: see above; the entry's buffers and names outlive the operation.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                break;
            }
            self.submit_queued()?;
        }
        self.in_flight += 1;
        if self.ring.submission().len() >= SUBMIT_BATCH {
            self.submit_queued()?;
        }
        Ok(())
    }

    fn submit_queued(&mut self) -> Result<()> {
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                    ) =>
                {
                    // EBUSY/EAGAIN: the kernel wants completions reaped first.
                    self.reap()?;
                }
                Err(e) => return Err(anyhow!("io_uring submit failed: {e}")),
            }
        }
    }

    /// Submits what is queued and waits for at least one completion.
    fn wait_one(&mut self) -> Result<()> {
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY)) => {
                    break;
                }
                Err(e) => return Err(anyhow!("io_uring wait failed: {e}")),
            }
        }
        self.reap()
    }

    fn reap(&mut self) -> Result<()> {
        let done: Vec<(u64, i32)> =
            self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        // Count them all out first: if one fails the run, the rest are already off the CQ,
        // and `Drop` must not wait for them.
        self.in_flight -= done.len();
        for (user_data, res) in done {
            self.complete(user_data as usize, res)?;
        }
        Ok(())
    }

    /// Lands everything in flight (files waiting to be reopened included).
    fn drain(&mut self) -> Result<()> {
        loop {
            while self.in_flight > 0 {
                self.wait_one()?;
            }
            if !self.reopen_waiting()? {
                return Ok(());
            }
        }
    }

    /// Submits the opens of the files waiting for an fd (`reopen`) again; whether there were
    /// any. With nothing in flight no close will come to reopen them.
    fn reopen_waiting(&mut self) -> Result<bool> {
        let waiting = std::mem::take(&mut self.reopen);
        for &file in &waiting {
            self.submit_open(file)?;
        }
        Ok(!waiting.is_empty())
    }

    /// Before an op on `entry`: the directories the archive has left are stamped once the files
    /// beneath them have landed (right away if `entry`, or `also`, lies inside one), and if
    /// `entry`'s path, one of its ancestors, or `also` is a file still in flight, or files in
    /// flight lie beneath the path (a directory about to be replaced), everything in flight
    /// lands first, so archive order is kept.
    fn order_after_in_flight(&mut self, entry: &Entry, also: Option<&SafePath>) -> Result<()> {
        let inside = self.dest.enter(&entry.path);
        // A hard link's target inside a directory the archive has left: that directory is
        // stamped first too (one without search permission refuses the link, as in GNU tar).
        if inside || also.is_some_and(|t| self.dest.awaits_stamp(t)) {
            self.drain()?;
        }
        self.dest.settle()?;
        if self.files.len == 0 {
            return Ok(());
        }
        // Through a kept directory symlink one file has two names (`lib/f` and `usr/lib/f`
        // with `lib -> usr/lib`), which `busy` cannot tell: everything in flight lands first.
        // Without this, the second member's short write landed before the first's in 1 of
        // 1,200 files (ordering::keep_directory_symlink_with_writer_threads, --io uring).
        let two_names = self.dest.keeps_dir_symlinks();
        let tree = self.dest.tree();
        if two_names
            || tree.busy(entry.path.components())
            || also.is_some_and(|t| tree.busy(t.components()))
        {
            self.drain()?;
        }
        Ok(())
    }

    fn open_file(&mut self, entry: Entry, size: u64, sparse: bool, direct: bool) -> Result<()> {
        self.order_after_in_flight(&entry, None)?;
        while self.files.len >= self.max_files {
            self.wait_one()?;
        }
        let slot = match self.dest.slot(&entry.path) {
            Ok(s) => s,
            Err(e) => {
                self.current = None;
                let e = self.dest.explain(&entry.path, e);
                return member_failed(&self.dest, &entry, super::CANNOT_OPEN, e);
            }
        };
        let direct = self.policy.opens_direct(direct);
        let through = self.dest.link_at(&slot);
        if through {
            // The file it leads to may be one in flight: what it got lands first.
            self.drain()?;
        }
        let node = self.dest.tree().begin_file(slot.node, entry.path.file_name());
        let file = self.files.insert(FileState {
            entry,
            preallocated: 0,
            received: 0,
            incomplete: false,
            size,
            sparse,
            direct,
            went_direct: direct,
            slot,
            node,
            fd: None,
            queued: Vec::new(),
            writes: 0,
            ended: false,
            failed: false,
            tail: None,
            tail_submitted: false,
            closing: false,
            interrupted: 0,
            through,
        });
        self.current = Some(file);
        self.submit_open(file)
    }

    fn submit_open(&mut self, file: usize) -> Result<()> {
        let f = &self.files[file];
        let flags = libc::O_RDWR
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOFOLLOW
            | libc::O_CLOEXEC
            | if f.direct { libc::O_DIRECT } else { 0 };
        let mode = self.dest.mode(f.entry.mode) & 0o777;
        if f.through {
            let entry = f.entry.clone();
            let res = match self.dest.open_through(&entry, flags & libc::O_DIRECT) {
                Ok(fd) => fd.into_raw_fd(),
                // The system's refusal (O_DIRECT's EINVAL, out of fds) as a completion's.
                Err(MemberError::Io(e)) if e.raw_os_error().is_some() => {
                    -e.raw_os_error().unwrap_or(libc::EIO)
                }
                Err(e) => return self.open_failed(file, e),
            };
            return self.opened(file, res);
        }
        if !f.direct && self.open_buffered_here {
            let (dirfd, name) = (f.slot.dirfd(), f.slot.name.as_ptr());
            // Safety: the name is a NUL-terminated CString owned by the slot; dirfd is open.
            let fd = super::restart(|| unsafe { libc::openat(dirfd, name, flags, mode) });
            let res = match fd {
                0.. => fd,
                _ => -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
            };
            return self.opened(file, res);
        }
        let entry = opcode::OpenAt::new(types::Fd(f.slot.dirfd()), f.slot.name.as_ptr())
            .flags(flags)
            .mode(mode)
            .build();
        let op = self.ops.insert(Pending { file, kind: OpKind::Open });
        self.push(entry.user_data(op as u64))
    }

    fn data(&mut self, offset: u64, buf: PoolBuf) -> Result<()> {
        let Some(file) = self.current else {
            return Ok(());
        };
        let f = &mut self.files[file];
        if f.failed {
            return Ok(());
        }
        f.received = f.received.max(offset + buf.len() as u64);
        if f.fd.is_none() {
            f.queued.push((offset, buf));
            return Ok(());
        }
        self.submit_data(file, offset, buf)
    }

    fn submit_data(&mut self, file: usize, offset: u64, buf: PoolBuf) -> Result<()> {
        let f = &mut self.files[file];
        self.table.prepare(&self.ring, &buf);
        let (index, ptr, len) = (self.table.index(&buf), buf.as_ptr(), buf.len());
        if f.direct {
            let fd = f.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd());
            reserve(fd, f.size, &mut f.preallocated, offset + len as u64)
                .map_err(|e| super::incomplete(&f.entry.name, "cannot reserve space", e))?;
            let direct = self.policy.direct_part(len);
            if direct < len {
                if f.tail.is_some() {
                    return Err(anyhow!("{}: internal error: two unaligned chunks", f.entry.name));
                }
                f.tail = Some((offset + direct as u64, direct, buf));
                if direct > 0 {
                    self.submit_write(file, None, index, ptr, direct, offset)?;
                }
                return self.advance(file);
            }
        }
        self.submit_write(file, Some(buf), index, ptr, len, offset)
    }

    fn submit_write(
        &mut self,
        file: usize,
        buf: Option<PoolBuf>,
        index: Option<u16>,
        ptr: *const u8,
        len: usize,
        offset: u64,
    ) -> Result<()> {
        let f = &mut self.files[file];
        let fd = types::Fd(f.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd()));
        f.writes += 1;
        let entry = match index {
            Some(i) => opcode::WriteFixed::new(fd, ptr, len as u32, i).offset(offset).build(),
            None => opcode::Write::new(fd, ptr, len as u32).offset(offset).build(),
        };
        let op =
            self.ops.insert(Pending { file, kind: OpKind::Write { buf, index, ptr, len, offset } });
        self.push(entry.user_data(op as u64))
    }

    /// Moves a file on once its writes have landed: the buffered tail, then metadata and close.
    fn advance(&mut self, file: usize) -> Result<()> {
        let f = &mut self.files[file];
        if f.fd.is_none() || f.closing || f.writes > 0 || !f.ended {
            return Ok(());
        }
        let fd = f.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        if !f.tail_submitted
            && let Some((offset, start, buf)) = &f.tail
        {
            let (offset, start) = (*offset, *start);
            let (index, len) = (self.table.index(buf), buf.len() - start);
            // Safety: start <= buf.len(), so the pointer stays inside the buffer, which the
            // file keeps in `tail` until it is closed.
            let ptr = unsafe { buf.as_ptr().add(start) };
            if f.direct {
                clear_direct(fd)
                    .map_err(|e| anyhow!("{}: cannot leave direct IO mode: {e}", f.entry.name))?;
                f.direct = false;
            }
            f.tail_submitted = true;
            return self.submit_write(file, None, index, ptr, len, offset);
        }
        if f.incomplete {
            // The data that arrived has landed (its unaligned tail too, just above): as long
            // as that, not its reservation, and owner-only (`Dest::abandon_file`).
            if f.preallocated > f.received {
                // Safety: fd is open for writing. Best effort: the run is failing anyway.
                super::restart(|| unsafe { libc::ftruncate(fd, f.received as libc::off_t) });
            }
            self.dest.abandon_file(fd, &f.entry);
        } else if f.sparse {
            // Trailing holes: the data segments may stop short of the real size.
            // Safety: fd is open for writing.
            if super::restart(|| unsafe { libc::ftruncate(fd, f.size as libc::off_t) }) != 0 {
                let e = io::Error::last_os_error();
                return Err(anyhow!("{}: cannot set the size: {e}", f.entry.name));
            }
        }
        if !f.incomplete {
            match self.dest.finish_file(fd, &f.entry) {
                Err(e) => {
                    let entry = f.entry.clone();
                    member_failed(&self.dest, &entry, "cannot set metadata", e)?;
                }
                Ok(()) => {
                    // Safety: fd is this file's open descriptor, closed only by the Close
                    // pushed below, after this returns.
                    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                    super::file_done(&self.dest, &f.entry, f.size, borrowed);
                }
            }
        }
        let f = &mut self.files[file];
        f.closing = true;
        let entry = opcode::Close::new(types::Fd(fd)).build();
        let op = self.ops.insert(Pending { file, kind: OpKind::Close });
        self.push(entry.user_data(op as u64))
    }

    fn complete(&mut self, op: usize, res: i32) -> Result<()> {
        let Pending { file, kind } = self.ops.remove(op);
        match kind {
            OpKind::Open => self.opened(file, res),
            OpKind::Write { buf, index, ptr, len, offset } => {
                if res == -libc::EAGAIN || res == -libc::EINTR {
                    self.files[file].writes -= 1;
                    return self.submit_write(file, buf, index, ptr, len, offset);
                }
                if res < 0 {
                    let e = io::Error::from_raw_os_error(-res);
                    return Err(super::incomplete(&self.files[file].entry.name, "Cannot write", e));
                }
                let n = res as usize;
                self.files[file].writes -= 1;
                self.stats.bytes += n as u64;
                self.dest.events().event(super::events::Event::Landed { bytes: n as u64 });
                if n == 0 && len > 0 {
                    return Err(super::incomplete(
                        &self.files[file].entry.name,
                        "Cannot write",
                        "wrote 0 bytes",
                    ));
                }
                if n < len {
                    // Short write: resubmit the rest.
                    // Safety: n < len, so the pointer stays inside the same buffer.
                    let rest = unsafe { ptr.add(n) };
                    return self.submit_write(file, buf, index, rest, len - n, offset + n as u64);
                }
                drop(buf);
                self.advance(file)
            }
            OpKind::Close => {
                let f = self.files.remove(file);
                // The kernel closed the fd (even when it reports an error); don't close it again.
                if let Some(fd) = f.fd {
                    let _ = fd.into_raw_fd();
                }
                self.dest.tree().end_file(f.node);
                if self.current == Some(file) {
                    self.current = None;
                }
                // A closed file frees an fd for one that ran out of them.
                if let Some(waiting) = self.reopen.pop() {
                    self.submit_open(waiting)?;
                }
                if res < 0 {
                    let e = io::Error::from_raw_os_error(-res);
                    return Err(anyhow!("{}: close failed: {e}", f.entry.name));
                }
                self.stats.files += 1;
                if f.went_direct {
                    self.stats.files_direct += 1;
                }
                Ok(())
            }
        }
    }

    fn opened(&mut self, file: usize, res: i32) -> Result<()> {
        if res >= 0 {
            let f = &mut self.files[file];
            // Safety: a successful openat completion returns a new fd that we now own.
            f.fd = Some(unsafe { OwnedFd::from_raw_fd(res) });
            for (offset, buf) in std::mem::take(&mut f.queued) {
                self.submit_data(file, offset, buf)?;
            }
            return self.advance(file);
        }
        let err = -res;
        if err == libc::EINTR && self.files[file].interrupted < super::RESTARTS {
            // An open interrupted in the kernel (a FUSE daemon's answer, or a lock waited for
            // interruptibly): again, a bounded number of times, as `super::restart` does.
            self.files[file].interrupted += 1;
            return self.submit_open(file);
        }
        if tree::is_out_of_fds(&io::Error::from_raw_os_error(err)) {
            // Out of descriptors (other fds than the budget foresaw): close cached directories,
            // or reopen once an operation in flight has let a file close.
            if self.dest.tree().shrink() {
                return self.submit_open(file);
            }
            if self.in_flight > 0 {
                self.reopen.push(file);
                return Ok(());
            }
        }
        let f = &mut self.files[file];
        if err == libc::EINVAL && f.direct {
            // Files opened before the first refusal come back here too: warn once.
            self.policy.refused(self.dest.events());
            f.direct = false;
            f.went_direct = false;
            return self.submit_open(file);
        }
        if err == libc::EEXIST {
            let entry = f.entry.clone();
            let slot =
                Slot { dir: f.slot.dir.clone(), node: f.slot.node, name: f.slot.name.clone() };
            match self.dest.remove_existing(&entry, &slot) {
                Ok(()) => return self.submit_open(file),
                Err(e) => return self.open_failed(file, e),
            }
        }
        self.open_failed(file, io::Error::from_raw_os_error(err).into())
    }

    fn open_failed(&mut self, file: usize, e: MemberError) -> Result<()> {
        let f = &mut self.files[file];
        f.failed = true;
        f.queued.clear();
        let entry = f.entry.clone();
        // The file never opened: forget it now (Data ops for it are dropped via `failed`
        // while it stays current; End finds it gone).
        if self.current != Some(file) || f.ended {
            self.forget(file);
        }
        member_failed(&self.dest, &entry, super::CANNOT_OPEN, e)
    }

    fn forget(&mut self, file: usize) {
        let f = self.files.remove(file);
        self.dest.tree().end_file(f.node);
        if self.current == Some(file) {
            self.current = None;
        }
    }

    fn end(&mut self) -> Result<()> {
        let Some(file) = self.current.take() else {
            return Ok(());
        };
        let f = &mut self.files[file];
        f.ended = true;
        if f.failed {
            self.forget(file);
            return Ok(());
        }
        self.advance(file)
    }
}

impl Writer for Uring {
    fn apply(&mut self, op: Op) -> Result<()> {
        // Reap whatever finished meanwhile (no syscall: the CQ is shared memory).
        self.reap()?;
        self.publish_marks();
        match op {
            Op::Mark(m) => {
                let dirs = self.dest.carried(crate::mark::CARRIED_MAX);
                self.marks.hold(m, dirs);
                self.marks_seen = u64::MAX;
                self.publish_marks();
                Ok(())
            }
            Op::Restore(c) => {
                let (delay, dirs) = *c;
                self.dest.restore_carried(delay, dirs)
            }
            Op::File { entry, size, sparse, direct } => self.open_file(entry, size, sparse, direct),
            Op::Data { offset, buf } => self.data(offset, buf),
            Op::End => self.end(),
            Op::Barrier(done) => {
                self.drain()?;
                // The decoder may have stopped waiting (it failed): nothing to tell then.
                let _ = done.send(());
                Ok(())
            }
            op => {
                let (entry, target) = match &op {
                    Op::Hardlink { entry, target } => (entry.clone(), Some(target.clone())),
                    op => match op.entry() {
                        Some(e) => (e.clone(), None),
                        None => return Ok(()),
                    },
                };
                self.order_after_in_flight(&entry, target.as_ref())?;
                if matches!(op, Op::Purge { .. }) {
                    // It renames and removes anywhere beneath the directory: nothing may be
                    // in flight.
                    self.drain()?;
                }
                // File ops are matched above, so nothing comes back.
                apply_namespace_op(&mut self.dest, &mut self.stats, op).map(drop)
            }
        }
    }

    fn submit(&mut self) -> Result<()> {
        if self.ring.submission().is_empty() { Ok(()) } else { self.submit_queued() }
    }

    fn progress(&mut self) -> Result<bool> {
        if self.in_flight == 0 {
            // Files that ran out of fds would otherwise hold their queued buffers for good (the
            // decoder waiting for one of them): open them again now, as `drain` does.
            return self.reopen_waiting();
        }
        self.wait_one()?;
        self.publish_marks();
        Ok(true)
    }

    fn pending_floor(&self) -> u64 {
        self.files.entries.iter().flatten().map(|f| f.entry.offset).min().unwrap_or(u64::MAX)
    }

    fn finish(&mut self) -> Result<Stats> {
        // A file the producer stopped in the middle of: close it as it is.
        if let Some(file) = self.current.take() {
            let f = &mut self.files[file];
            if !f.failed {
                f.ended = true;
                f.incomplete = true;
                self.advance(file)?;
            }
        }
        self.drain()?;
        self.dest.leave_all();
        self.dest.settle()?;
        Ok(self.stats.clone())
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // The kernel may still read pool buffers or names owned by `ops`: wait for every
        // operation before they are freed. Errors no longer matter here.
        while self.in_flight > 0 {
            if self.ring.submit_and_wait(1).is_err() {
                break;
            }
            let n = self.ring.completion().count();
            self.in_flight -= n;
        }
    }
}

/// A vector of slots with a free list: indices stay stable while entries come and go.
struct Slab<T> {
    entries: Vec<Option<T>>,
    free: Vec<usize>,
    /// Entries in use.
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { entries: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> Slab<T> {
    fn insert(&mut self, v: T) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                self.entries[i] = Some(v);
                i
            }
            None => {
                self.entries.push(Some(v));
                self.entries.len() - 1
            }
        }
    }

    fn remove(&mut self, i: usize) -> T {
        let v = self.entries[i].take().expect("slab entry in use");
        self.free.push(i);
        self.len -= 1;
        v
    }
}

impl<T> std::ops::Index<usize> for Slab<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        self.entries[i].as_ref().expect("slab entry in use")
    }
}

impl<T> std::ops::IndexMut<usize> for Slab<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.entries[i].as_mut().expect("slab entry in use")
    }
}
