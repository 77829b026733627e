//! Reading a regular archive file: sequentially, optionally dropping consumed pages from the
//! page cache, and — for the frame-parallel zstd decoder — with O_DIRECT where the range is
//! not in the page cache.
//!
//! Why direct reads: a buffered read of an archive that is not cached costs the kernel its
//! page-cache work (allocate, fill, copy out, later reclaim) on top of the disk: `dd bs=1M` of
//! the 1.35 GB agave.tar.zst after dropping caches took 0.7-1.8 s of system time on this VM,
//! with O_DIRECT and 8 MiB reads 0.07-0.14 s at the same disk speed (0.95 GB/s). With two
//! CPUs that system time is taken from the decoders. A range that *is* cached (an archive just
//! downloaded or read before) is read from the cache instead, which is cheaper than the disk:
//! `cachestat(2)` (Linux 6.5) says so without touching the cache, unlike a RWF_NOWAIT read,
//! which starts readahead for what it cannot find. Without cachestat every aligned read is
//! direct.
//!
//! Only callers that ask (`Direct::direct`) and hand over buffers aligned to DIRECT_ALIGN get
//! direct reads; the streaming decoders read buffered, since a synchronous direct read would
//! stall the one thread that also decodes.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Buffer address, length and file offset alignment of a direct read. 4096 covers every
/// O_DIRECT alignment we can meet (512 on this machine's virtio disk, 4096 on 4Kn devices).
pub const DIRECT_ALIGN: usize = 4096;

/// Input pages dropped from the page cache at a time behind the reader (with
/// `drop_behind`): large enough that the fadvise calls cost nothing measurable.
const DROP_BEHIND_STEP: u64 = 32 << 20;

/// cachestat(2): the same number on every architecture (new system calls share one table).
const SYS_CACHESTAT: libc::c_long = 451;

/// How the decoder wants the file read, decided after format detection: whoever owns the
/// decoder says `direct` or `buffered`; the ArchiveFile acts on it at its next read.
/// The same handle also turns on dropping consumed pages (`drop_behind`) once the writer has
/// decided to write direct.
#[derive(Default)]
pub struct Direct(AtomicU8, AtomicBool);

const UNDECIDED: u8 = 0;
const DIRECT: u8 = 1;
const BUFFERED: u8 = 2;

impl Direct {
    /// Aligned reads of uncached ranges go direct.
    pub fn direct(&self) {
        self.0.store(DIRECT, Ordering::Relaxed);
    }

    /// Every read is buffered, with readahead.
    pub fn buffered(&self) {
        self.0.store(BUFFERED, Ordering::Relaxed);
    }

    fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    /// Consumed pages are dropped from the page cache from now on.
    pub fn drop_behind(&self) {
        self.1.store(true, Ordering::Relaxed);
    }

    fn drops_behind(&self) -> bool {
        self.1.load(Ordering::Relaxed)
    }
}

pub struct ArchiveFile {
    file: File,
    /// The same file opened with O_DIRECT, when the filesystem allows it.
    direct_file: Option<File>,
    direct: Arc<Direct>,
    /// cachestat(2) works here (false after ENOSYS or any other failure: then read direct).
    cachestat: bool,
    pos: u64,
    dropped: u64,
    drop_behind: bool,
    /// At least half the file was in the page cache when it was opened (the user's own
    /// download, a second extraction): its pages are not ours to drop behind the reader.
    cached_at_open: bool,
    /// Bytes read with O_DIRECT (for tests).
    direct_bytes: u64,
    /// The `Direct` decision this file last acted on.
    mode: u8,
}

impl ArchiveFile {
    pub fn new(file: File, path: &Path, drop_behind: bool) -> ArchiveFile {
        // The second descriptor is opened through /proc/self/fd, so it is the file already
        // opened even if `path` has been replaced since.
        let fd_path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let direct_file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&fd_path)
            .or_else(|_| {
                std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path)
            })
            .ok()
            .filter(|d| same_file(&file, d));
        // Until the decoder is chosen there is no readahead when direct reads may follow:
        // every buffered read of a cached range starts readahead of the ranges after it,
        // which then look cached and are read buffered in turn (with readahead on from the
        // format detection's first read, 1,288 of the 1,289 reads of a 1.35 GB archive were
        // buffered). Without a direct descriptor, read sequentially from the start.
        let advice = match direct_file {
            Some(_) => libc::POSIX_FADV_RANDOM,
            None => libc::POSIX_FADV_SEQUENTIAL,
        };
        // Safety: the fd is open; fadvise takes no pointers. A hint only.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice) };
        let mut a = ArchiveFile {
            file,
            direct_file,
            direct: Arc::default(),
            cachestat: true,
            pos: 0,
            dropped: 0,
            drop_behind,
            cached_at_open: false,
            direct_bytes: 0,
            mode: UNDECIDED,
        };
        a.cached_at_open =
            a.resident_pages(0, 0).is_some_and(|(cached, pages)| keeps_cache(cached, pages));
        a
    }

    /// Reads from `pos` on (a resumed run opens the archive at a frame's 4096-aligned page:
    /// direct reads need an aligned offset). Only before the first read.
    pub fn seek_to(&mut self, pos: u64) {
        self.pos = pos;
        self.dropped = pos;
    }

    /// The handle that decides between direct and buffered reads.
    pub fn direct(&self) -> Arc<Direct> {
        self.direct.clone()
    }

    /// Whether `len` bytes at the current position are all in the page cache (or dirty
    /// there, when a direct read would first have to wait for their writeback).
    fn cached(&mut self, len: usize) -> bool {
        self.resident_pages(self.pos, len as u64).is_some_and(|(cached, pages)| cached >= pages)
    }

    /// Of the pages of `len` bytes at `off` (0: to the end of the file), how many are in the
    /// page cache (dirty or under writeback ones count as all: a direct read would wait for
    /// them), and how many there are. None when cachestat(2) is not available.
    fn resident_pages(&mut self, off: u64, len: u64) -> Option<(u64, u64)> {
        if !self.cachestat {
            return None;
        }
        #[repr(C)]
        struct Range {
            off: u64,
            len: u64,
        }
        #[repr(C)]
        #[derive(Default)]
        struct Stat {
            nr_cache: u64,
            nr_dirty: u64,
            nr_writeback: u64,
            nr_evicted: u64,
            nr_recently_evicted: u64,
        }
        let range = Range { off, len };
        let mut stat = Stat::default();
        // Safety: both pointers are to live, properly laid out structs (include/uapi
        // linux/mman.h: struct cachestat_range, struct cachestat) that the call only reads
        // and writes for its duration.
        let r = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                self.file.as_raw_fd(),
                &range as *const Range,
                &mut stat as *mut Stat,
                0u32,
            )
        };
        if r != 0 {
            self.cachestat = false;
            return None;
        }
        let len = match len {
            0 => self.file.metadata().ok()?.len().saturating_sub(off),
            n => n,
        };
        let pages = len.div_ceil(page_size());
        let busy = stat.nr_dirty > 0 || stat.nr_writeback > 0;
        Some((if busy { pages } else { stat.nr_cache }, pages))
    }

    fn read_direct(&mut self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        let aligned = (buf.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
            && buf.len().is_multiple_of(DIRECT_ALIGN)
            && self.pos.is_multiple_of(DIRECT_ALIGN as u64);
        if !aligned || self.mode != DIRECT || self.direct_file.is_none() {
            return None;
        }
        if self.cached(buf.len()) {
            return None;
        }
        let f = self.direct_file.as_ref().expect("checked above");
        match f.read_at(buf, self.pos) {
            // A filesystem that opened O_DIRECT but refuses this read: buffered from now on.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                self.direct_file = None;
                None
            }
            Ok(n) => {
                self.direct_bytes += n as u64;
                Some(Ok(n))
            }
            r => Some(r),
        }
    }
}

impl Read for ArchiveFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mode = self.direct.get();
        if mode != self.mode {
            if mode == BUFFERED && self.direct_file.is_some() {
                // Safety: the fd is open; fadvise takes no pointers. A hint only.
                let fd = self.file.as_raw_fd();
                unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
            }
            self.mode = mode;
        }
        let n = match self.read_direct(buf) {
            Some(r) => r?,
            None => self.file.read_at(buf, self.pos)?,
        };
        self.pos += n as u64;
        let drop_behind = !self.cached_at_open && (self.drop_behind || self.direct.drops_behind());
        if drop_behind && self.pos - self.dropped >= DROP_BEHIND_STEP {
            // Safety: the fd is open; fadvise takes no pointers. Failure only costs cache.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    0,
                    self.pos as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            self.dropped = self.pos;
        }
        Ok(n)
    }
}

/// Whether an archive whose `cached` of `pages` pages were in the page cache at open keeps
/// them: from half on it was there for someone else (a download just finished, an earlier
/// extraction) and dropping it behind the reader would only make their next read go to the
/// disk. Below half, what is cached is mostly what the run's own reads bring in.
fn keeps_cache(cached: u64, pages: u64) -> bool {
    pages > 0 && cached.saturating_mul(2) >= pages
}

fn same_file(a: &File, b: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (a.metadata(), b.metadata()) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn page_size() -> u64 {
    // Safety: sysconf takes no pointers.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

/// A buffer aligned for direct reads, of a fixed capacity and a variable length (the splitter's
/// pieces of compressed input).
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    cap: usize,
    len: usize,
}

// Safety: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `cap` bytes (a multiple of DIRECT_ALIGN), zeroed, length `cap`.
    #[cfg(test)]
    pub fn new(cap: usize) -> AlignedBuf {
        AlignedBuf::try_new(cap)
            .unwrap_or_else(|| std::alloc::handle_alloc_error(Self::layout(cap)))
    }

    /// `new`, or None when the memory cannot be had (RLIMIT_AS), so the caller can do with
    /// less instead of aborting.
    pub fn try_new(cap: usize) -> Option<AlignedBuf> {
        let layout = Self::layout(cap);
        // Safety: the layout has a non-zero size (asserted in `layout`).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(AlignedBuf { ptr: std::ptr::NonNull::new(ptr)?, cap, len: cap })
    }

    /// A buffer of no bytes, allocating nothing (a placeholder for one moved out).
    pub fn empty() -> AlignedBuf {
        AlignedBuf { ptr: std::ptr::NonNull::dangling(), cap: 0, len: 0 }
    }

    fn layout(cap: usize) -> std::alloc::Layout {
        assert!(cap > 0 && cap.is_multiple_of(DIRECT_ALIGN));
        std::alloc::Layout::from_size_align(cap, DIRECT_ALIGN).expect("a valid layout")
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Sets the length (at most the capacity); the bytes stay as they are.
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.cap);
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // Safety: `ptr` is a live allocation of `cap` initialised (zeroed at first) bytes, or
        // dangling and well aligned with len 0; len <= cap.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // Safety: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        // Safety: allocated in `new` with this same layout, freed only here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_mostly_cached_at_open_keeps_its_pages() {
        for (cached, pages, keeps) in
            [(0, 0, false), (0, 10, false), (4, 10, false), (5, 10, true), (10, 10, true)]
        {
            assert_eq!(keeps_cache(cached, pages), keeps, "{cached} of {pages} pages");
        }
    }

    /// Read to the end with drop-behind on: a file cached at open is left cached; one that
    /// was not is dropped behind the reader.
    #[test]
    fn drop_behind_spares_an_archive_cached_at_open() {
        let dir = std::env::temp_dir().join(format!("fu-archive-drop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a");
        let len = 2 * DROP_BEHIND_STEP as usize + 4096;
        std::fs::write(&path, vec![3u8; len]).unwrap();
        File::open(&path).unwrap().sync_all().unwrap();
        let read_all = |evict_first: bool| {
            let f = File::open(&path).unwrap();
            if evict_first {
                // Safety: the fd is open; a hint only.
                unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            } else {
                std::fs::read(&path).unwrap();
            }
            let mut a = ArchiveFile::new(f, &path, true);
            a.direct().buffered();
            std::io::copy(&mut a, &mut std::io::sink()).unwrap();
            (a.cached_at_open, a.resident_pages(0, 0))
        };
        let (kept, resident) = read_all(false);
        if let Some((cached, pages)) = resident {
            assert!(kept, "a file read just before is cached at open");
            assert!(cached * 10 >= pages * 9, "{cached} of {pages} pages left: dropped");
            let (kept, resident) = read_all(true);
            let (cached, pages) = resident.unwrap();
            if kept {
                eprintln!("skipped the drop check: {dir:?} keeps evicted pages (tmpfs?)");
            } else {
                assert!(cached * 2 < pages, "{cached} of {pages} pages left: not dropped");
            }
        } else {
            eprintln!("skipped: no cachestat(2) here");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn direct_and_buffered_reads_agree() {
        let dir = std::env::temp_dir().join(format!("fu-archive-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a");
        let data: Vec<u8> = (0..3 * DIRECT_ALIGN + 100).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = File::open(&path).unwrap();
        f.sync_all().unwrap();
        // Safety: the fd is open; a hint only. Drops the clean pages, so the reads below are
        // of uncached ranges.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut a = ArchiveFile::new(f, &path, false);
        let direct = a.direct_file.is_some();
        a.direct().direct();
        let mut got = Vec::new();
        let mut buf = AlignedBuf::new(2 * DIRECT_ALIGN);
        // A first read through an unaligned buffer (format detection reads through the
        // Source's), then aligned ones.
        let mut head = vec![0u8; DIRECT_ALIGN + 1];
        a.read_exact(&mut head[1..]).unwrap();
        got.extend_from_slice(&head[1..]);
        // Safety: as above; what readahead brought in with the buffered read goes too.
        unsafe { libc::posix_fadvise(a.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        loop {
            let n = a.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, data);
        if direct {
            // The tail after the first page, read direct (12,288 + 100 bytes: the last read
            // is short at the end of the file).
            assert_eq!(a.direct_bytes, (data.len() - DIRECT_ALIGN) as u64);
        } else {
            eprintln!("skipped the direct-read check: O_DIRECT not supported in {dir:?}");
        }
        // Cached ranges are read buffered.
        let mut b = ArchiveFile::new(File::open(&path).unwrap(), &path, false);
        b.direct().direct();
        let mut all = Vec::new();
        b.read_to_end(&mut all).unwrap();
        let mut again = ArchiveFile::new(File::open(&path).unwrap(), &path, false);
        again.direct().direct();
        let mut buf = AlignedBuf::new(4 * DIRECT_ALIGN);
        assert!(again.read(&mut buf).unwrap() > 0);
        if again.cachestat {
            assert_eq!(again.direct_bytes, 0, "a cached range is read from the cache");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
