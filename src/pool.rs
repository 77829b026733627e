//! The bounded pool of aligned I/O buffers: the only allocator of I/O memory.
//!
//! One contiguous, page-aligned region is cut into `count` buffers of `buf_size` bytes. A
//! [`PoolBuf`] is an index into that region; dropping it returns the index to the free list and
//! wakes a waiting [`Pool::get`]. Because the region never moves, the io_uring writer can register
//! it once (`IORING_REGISTER_BUFFERS`) and address each buffer by its index (`WriteFixed`).
//!
//! A buffer can be cut into pieces (`PoolBuf::split_to`): many small files' data share one
//! buffer, each piece at its own BUF_ALIGN-aligned offset, and the buffer returns to the pool
//! when its last piece is dropped. A piece is still addressed by its buffer's index, and its
//! pointer lies inside that registered buffer, which is all `WriteFixed` needs.
//!
//! Back-pressure lives here: the decoder blocks in [`Pool::get`] until the writer has landed
//! enough data to free a buffer, so the bytes in flight never exceed `count * buf_size`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Alignment of the region and of every buffer. 4096 covers every O_DIRECT alignment we can meet
/// (512 on 512-byte-sector disks such as this machine's virtio disk, 4096 on 4Kn devices).
pub const BUF_ALIGN: usize = 4096;

/// Anonymous memory from mmap: page-aligned, zero, and only resident once touched, so a
/// small archive (or `-t`, where only frames decoded ahead use the pool) costs the buffers it
/// uses, not the whole `--memory`. (The allocator's zeroed aligned allocation wrote every
/// page: `-t` of a single-frame archive took 91 MB of RSS instead of 7.)
struct Region {
    base: *mut u8,
    size: usize,
}

// Safety: the region is plain memory; access to each buffer is exclusive through its PoolBuf
// (an index is handed out by exactly one `get` until that PoolBuf is dropped).
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // Safety: `base` and `size` are the mapping made in `try_new`, unmapped only here;
        // every PoolBuf holds the Inner that owns this Region, so no buffer outlives it.
        unsafe { libc::munmap(self.base.cast(), self.size) };
    }
}

struct Inner {
    region: Region,
    buf_size: usize,
    count: usize,
    /// Pieces alive per buffer: it returns to the free list when this drops to 0.
    refs: Box<[AtomicU32]>,
    free: Mutex<Free>,
    returned: Condvar,
}

struct Free {
    /// Bit `i % 64` of word `i / 64` is set when buffer `i` is free.
    bits: Vec<u64>,
    /// Threads blocked in `get`: a returned buffer wakes one only if there is one (a
    /// notify is a futex syscall even with nobody waiting; 100,000 small files made 100,000
    /// of them).
    waiting: usize,
    /// Threads blocked in `wait_run`: each returned buffer wakes every waiter then, as a run
    /// waiter needs many and one woken for a single buffer would leave it asleep.
    run_waiting: usize,
}

/// Single buffers are taken from the top of the region and runs from the bottom, so that file
/// data in flight, scattered over the pool as writes complete in any order, leaves the low
/// buffers side by side for the decoder's runs. With the top-most free buffer taken first, the
/// same few buffers are reused while little is in flight, as a stack of free buffers did.
impl Free {
    fn new(count: usize) -> Free {
        let mut bits = vec![0u64; count.div_ceil(64)];
        for i in 0..count {
            bits[i / 64] |= 1 << (i % 64);
        }
        Free { bits, waiting: 0, run_waiting: 0 }
    }

    /// Takes the highest free buffer.
    fn take(&mut self) -> Option<u32> {
        let (w, word) = self.bits.iter_mut().enumerate().rev().find(|(_, b)| **b != 0)?;
        let bit = 63 - word.leading_zeros() as usize;
        *word &= !(1 << bit);
        Some((w * 64 + bit) as u32)
    }

    /// Takes the lowest `k` free buffers that are side by side, if there are.
    fn take_run(&mut self, k: usize) -> Option<usize> {
        let mut len = 0;
        let total = self.bits.len() * 64;
        let end = (0..total).find(|&i| {
            len = if self.is_free(i) { len + 1 } else { 0 };
            len == k
        })?;
        let first = end + 1 - k;
        for i in first..=end {
            self.bits[i / 64] &= !(1 << (i % 64));
        }
        Some(first)
    }

    fn is_free(&self, i: usize) -> bool {
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    fn put(&mut self, i: u32) {
        let i = i as usize;
        self.bits[i / 64] |= 1 << (i % 64);
    }
}

/// A pool of `count` buffers of `buf_size` bytes, or one line saying why it could not be had
/// (RLIMIT_AS, `ulimit -v`, or no memory) instead of an abort.
pub fn allocate(buf_size: usize, count: usize) -> anyhow::Result<Pool> {
    Pool::try_new(buf_size, count).ok_or_else(|| {
        let mib = (buf_size * count) >> 20;
        anyhow::anyhow!(
            "cannot allocate {mib} MiB of buffers: out of memory (ulimit -v?); a smaller \
             --memory needs less"
        )
    })
}

/// A cloneable handle to the pool.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

impl Pool {
    /// A pool of `count` buffers of `buf_size` bytes each (`buf_size` a multiple of BUF_ALIGN).
    #[cfg(test)]
    pub fn new(buf_size: usize, count: usize) -> Pool {
        Pool::try_new(buf_size, count).unwrap_or_else(|| {
            let size = buf_size.checked_mul(count).expect("pool size overflows");
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(size, BUF_ALIGN).expect("layout"),
            )
        })
    }

    /// `new`, or None when the region cannot be allocated (RLIMIT_AS, `ulimit -v`, or no
    /// memory), so the caller can say so in one line instead of aborting.
    pub fn try_new(buf_size: usize, count: usize) -> Option<Pool> {
        assert!(count > 0 && buf_size > 0 && buf_size.is_multiple_of(BUF_ALIGN));
        let size = buf_size.checked_mul(count)?;
        // Safety: a fresh private anonymous mapping; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let base = base.cast::<u8>();
        let free = Free::new(count);
        Some(Pool {
            inner: Arc::new(Inner {
                region: Region { base, size },
                buf_size,
                count,
                refs: (0..count).map(|_| AtomicU32::new(0)).collect(),
                free: Mutex::new(free),
                returned: Condvar::new(),
            }),
        })
    }

    /// Takes a free buffer, waiting until the writer returns one. Its length starts at 0.
    pub fn get(&self) -> PoolBuf {
        let mut free = self.inner.free.lock().unwrap();
        loop {
            if let Some(index) = free.take() {
                drop(free);
                return self.whole(index);
            }
            free.waiting += 1;
            free = self.inner.returned.wait(free).unwrap();
            free.waiting -= 1;
        }
    }

    /// A free buffer, waiting at most `timeout` for one.
    pub fn get_timeout(&self, timeout: std::time::Duration) -> Option<PoolBuf> {
        let mut free = self.inner.free.lock().unwrap();
        if let Some(index) = free.take() {
            drop(free);
            return Some(self.whole(index));
        }
        free.waiting += 1;
        free = self.inner.returned.wait_timeout(free, timeout).unwrap().0;
        free.waiting -= 1;
        let index = free.take()?;
        drop(free);
        Some(self.whole(index))
    }

    /// A free buffer if there is one now; never waits.
    pub fn try_get(&self) -> Option<PoolBuf> {
        let index = self.inner.free.lock().unwrap().take()?;
        Some(self.whole(index))
    }

    /// `k` buffers side by side in the region (the lowest such run), if that many are free
    /// next to each other now; never waits (see `Free` for where runs are found). For output
    /// that must be contiguous: a zstd frame decoded in one piece (decode/parallel.rs).
    pub fn try_get_run(&self, k: usize) -> Option<Run> {
        if k == 0 || k > self.inner.count {
            return None;
        }
        let first = self.inner.free.lock().unwrap().take_run(k)?;
        Some(Run { bufs: (first..first + k).map(|i| self.whole(i as u32)).collect() })
    }

    /// `try_get_run`, or if no such run is free, the same once a buffer returns (or
    /// `wake_run_waiters` is called, or `timeout` passes): for a worker whose frame's buffers
    /// are still being written (their data was handed to the writer as it was decoded,
    /// decode/parallel.rs), which looks again at why it waits each time this returns None.
    pub fn wait_run(&self, k: usize, timeout: std::time::Duration) -> Option<Run> {
        if k == 0 || k > self.inner.count {
            return None;
        }
        let mut free = self.inner.free.lock().unwrap();
        let first = match free.take_run(k) {
            Some(first) => first,
            None => {
                free.run_waiting += 1;
                free = self.inner.returned.wait_timeout(free, timeout).unwrap().0;
                free.run_waiting -= 1;
                free.take_run(k)?
            }
        };
        drop(free);
        Some(Run { bufs: (first..first + k).map(|i| self.whole(i as u32)).collect() })
    }

    /// Wakes the threads waiting in `wait_run`, to look again at why they wait.
    pub fn wake_run_waiters(&self) {
        if self.inner.free.lock().unwrap().run_waiting > 0 {
            self.inner.returned.notify_all();
        }
    }

    /// Whether `buf` is one of this pool's buffers (a registered region's index means nothing
    /// for another pool's).
    pub fn holds(&self, buf: &PoolBuf) -> bool {
        Arc::ptr_eq(&self.inner, &buf.pool)
    }

    /// The whole buffer `index`, just taken off the free list, as one piece.
    fn whole(&self, index: u32) -> PoolBuf {
        self.inner.refs[index as usize].store(1, Ordering::Relaxed);
        PoolBuf { pool: self.inner.clone(), index, start: 0, cap: self.inner.buf_size, len: 0 }
    }

    pub fn buf_size(&self) -> usize {
        self.inner.buf_size
    }

    pub fn count(&self) -> usize {
        self.inner.count
    }

    /// One iovec per buffer, in index order, for `register_buffers`.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.inner.count)
            .map(|i| libc::iovec {
                // Safety: i < count, so the offset stays inside the region.
                iov_base: unsafe { self.inner.region.base.add(i * self.inner.buf_size) }.cast(),
                iov_len: self.inner.buf_size,
            })
            .collect()
    }
}

/// One buffer of the pool, or a piece of one (`split_to`): bytes `start .. start + cap` of
/// buffer `index`, owned exclusively until dropped.
pub struct PoolBuf {
    pool: Arc<Inner>,
    index: u32,
    start: usize,
    cap: usize,
    len: usize,
}

impl PoolBuf {
    /// Index of this buffer in the registered region (the `buf_index` of `WriteFixed`).
    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// A piece of this buffer's slot from its start: `cap` bytes, the first `len` valid. The
    /// slot goes back to the pool when its last piece is dropped.
    fn piece(&self, cap: usize, len: usize) -> PoolBuf {
        self.pool.refs[self.index as usize].fetch_add(1, Ordering::Relaxed);
        PoolBuf { pool: self.pool.clone(), index: self.index, start: self.start, cap, len }
    }

    /// Cuts the first `n` bytes (at most `capacity`) off as a piece of their own, sharing
    /// this buffer's pool slot. This one keeps the rest from the next BUF_ALIGN boundary on
    /// (so every piece stays aligned for O_DIRECT), with no valid bytes.
    pub fn split_to(&mut self, n: usize) -> PoolBuf {
        assert!(n <= self.cap);
        let piece = self.piece(n, self.len.min(n));
        let skip = n.next_multiple_of(BUF_ALIGN).min(self.cap);
        self.start += skip;
        self.cap -= skip;
        self.len = 0;
        piece
    }

    /// Cuts the first `n` valid bytes (at most `len`) off as a piece of their own, sharing
    /// this buffer's pool slot; this one keeps the valid bytes after them. Unlike `split_to`
    /// the rest starts right after the piece, aligned or not: for handing decoded data on
    /// in pieces that end where a file's data does (decode/parallel.rs, `lend`).
    pub fn split_front(&mut self, n: usize) -> PoolBuf {
        assert!(n <= self.len);
        let piece = self.piece(n, n);
        self.start += n;
        self.cap -= n;
        self.len -= n;
        piece
    }

    /// Number of valid bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.cap);
        self.len = len;
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.base()
    }

    fn base(&self) -> *mut u8 {
        // Safety: index < count and start <= buf_size, so the offset stays inside the region.
        unsafe { self.pool.region.base.add(self.index as usize * self.pool.buf_size + self.start) }
    }

    /// The valid bytes.
    pub fn data(&self) -> &[u8] {
        // Safety: this PoolBuf owns its bytes exclusively; len <= cap.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }

    /// The whole buffer (or piece), valid bytes or not, for filling.
    pub fn full_mut(&mut self) -> &mut [u8] {
        // Safety: exclusive ownership of `start .. start + cap` as above (pieces never
        // overlap); the region was zero-initialised so every byte is initialised.
        unsafe { std::slice::from_raw_parts_mut(self.base(), self.cap) }
    }
}

/// Buffers adjacent in the region, owned together so they can be filled as one slice, then
/// handed on one by one.
pub struct Run {
    /// In index order: each starts where the one before it ends.
    bufs: Vec<PoolBuf>,
}

impl Run {
    /// Buffers in the run.
    pub fn count(&self) -> usize {
        self.bufs.len()
    }

    /// All the run's bytes, for filling.
    pub fn full_mut(&mut self) -> &mut [u8] {
        let first = &self.bufs[0];
        let len = self.bufs.len() * first.pool.buf_size;
        // Safety: the run holds whole buffers `first.index ..` of one region, consecutive
        // (try_get_run), each owned exclusively, so these bytes are one allocation that nobody
        // else can reach while the slice lives; the region was zero-initialised.
        unsafe { std::slice::from_raw_parts_mut(first.base(), len) }
    }

    /// The buffers, with the run's first `len` bytes as their valid bytes (buffers past them
    /// are empty).
    pub fn into_bufs(self, mut len: usize) -> Vec<PoolBuf> {
        let mut bufs = self.bufs;
        for b in &mut bufs {
            let n = len.min(b.cap);
            b.set_len(n);
            len -= n;
        }
        bufs
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        // The last piece of a buffer gives it back. AcqRel: every piece's writes (and the
        // kernel's reads of it, completed before the drop) happen before the buffer is reused.
        if self.pool.refs[self.index as usize].fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let mut free = self.pool.free.lock().unwrap();
        free.put(self.index);
        if free.run_waiting > 0 {
            self.pool.returned.notify_all();
        } else if free.waiting > 0 {
            self.pool.returned.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_returned() {
        let pool = Pool::new(8192, 2);
        let a = pool.get();
        let b = pool.try_get().unwrap();
        assert!(pool.try_get().is_none());
        assert_eq!(a.as_ptr() as usize % BUF_ALIGN, 0);
        assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
        assert_ne!(a.index(), b.index());
        let p2 = pool.clone();
        let waiter = std::thread::spawn(move || p2.get().index());
        drop(a);
        let got = waiter.join().unwrap();
        assert!(got < 2);
    }

    #[test]
    fn runs_are_adjacent_buffers() {
        let pool = Pool::new(8192, 6);
        let held: Vec<PoolBuf> = (0..6).map(|_| pool.get()).collect();
        let mut by_index: Vec<Option<PoolBuf>> = (0..6).map(|_| None).collect();
        for b in held {
            let i = b.index() as usize;
            by_index[i] = Some(b);
        }
        // Free 0, 2, 3, 4: the only run of 3 is 2..=4.
        for i in [0, 2, 3, 4] {
            by_index[i] = None;
        }
        assert!(pool.try_get_run(4).is_none());
        let mut run = pool.try_get_run(3).unwrap();
        assert_eq!(run.full_mut().len(), 3 * 8192);
        run.full_mut()[8190..8194].copy_from_slice(b"abcd");
        assert!(pool.try_get_run(2).is_none(), "0 is alone");
        let bufs = run.into_bufs(8192 + 10);
        let idx: Vec<u32> = bufs.iter().map(|b| b.index()).collect();
        assert_eq!(idx, [2, 3, 4]);
        assert_eq!(bufs.iter().map(|b| b.len()).collect::<Vec<_>>(), [8192, 10, 0]);
        assert_eq!(&bufs[0].data()[8190..], b"ab");
        assert_eq!(&bufs[1].data()[..2], b"cd");
        assert_eq!(bufs[1].as_ptr() as usize - bufs[0].as_ptr() as usize, 8192);
        drop(bufs);
        assert!(pool.try_get_run(3).is_some());
        drop(by_index);
        assert!(pool.try_get_run(6).is_some());
    }

    #[test]
    fn pieces_cut_off_the_front_share_the_buffer() {
        let pool = Pool::new(8192, 2);
        let other = Pool::new(8192, 1);
        let mut b = pool.get();
        b.full_mut()[..10].copy_from_slice(b"0123456789");
        b.set_len(10);
        let (front, next) = (b.split_front(3), b.split_front(4));
        assert_eq!((front.data(), next.data(), b.data()), (&b"012"[..], &b"3456"[..], &b"789"[..]));
        assert_eq!(next.as_ptr() as usize - front.as_ptr() as usize, 3);
        assert_eq!((front.index(), next.index()), (b.index(), b.index()));
        assert!(pool.holds(&next) && !other.holds(&next));
        drop((b, front));
        assert!(pool.try_get_run(2).is_none(), "the last piece holds the buffer");
        drop(next);
        assert!(pool.try_get_run(2).is_some());
    }

    #[test]
    fn a_run_waiter_is_woken_as_buffers_return() {
        let pool = Pool::new(8192, 3);
        let held: Vec<PoolBuf> = (0..3).map(|_| pool.get()).collect();
        let short = std::time::Duration::from_millis(10);
        assert!(pool.wait_run(2, short).is_none(), "nothing returned: the timeout");
        let p2 = pool.clone();
        let waiter = std::thread::spawn(move || {
            let start = std::time::Instant::now();
            // Each return or wake ends one wait: the caller looks again.
            while start.elapsed() < std::time::Duration::from_secs(30) {
                if let Some(run) = p2.wait_run(3, std::time::Duration::from_secs(30)) {
                    return Some(run.count());
                }
            }
            None
        });
        for b in held {
            std::thread::sleep(short);
            drop(b);
        }
        assert_eq!(waiter.join().unwrap(), Some(3));
        // A wake with nothing returned ends the wait without a run.
        let all = pool.try_get_run(3).unwrap();
        let p3 = pool.clone();
        let waiter = std::thread::spawn(move || p3.wait_run(1, std::time::Duration::from_secs(30)));
        while !waiter.is_finished() {
            pool.wake_run_waiters();
            std::thread::sleep(short);
        }
        assert!(waiter.join().unwrap().is_none());
        drop(all);
    }

    #[test]
    fn pieces_share_a_buffer_until_the_last_is_dropped() {
        let pool = Pool::new(16384, 1);
        let mut b = pool.get();
        let p1 = b.split_to(100);
        let p2 = b.split_to(5000);
        assert_eq!(p1.index(), p2.index());
        assert_eq!(p1.capacity(), 100);
        assert_eq!(p2.as_ptr() as usize - p1.as_ptr() as usize, BUF_ALIGN);
        assert_eq!(b.capacity(), 16384 - 3 * BUF_ALIGN);
        assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
        drop(b);
        drop(p1);
        assert!(pool.try_get().is_none());
        drop(p2);
        assert!(pool.try_get().is_some());
    }
}
