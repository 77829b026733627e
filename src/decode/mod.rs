//! Input → decoded tar bytes. Compression is detected from the first bytes, never the name.

mod archive_file;
mod bz2;
mod filter;
pub mod frames;
mod gz;
mod lz4;
mod members;
pub mod parallel;
pub mod plan;
mod source;
pub mod url;
mod xz;
mod zstd_stream;

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};

pub use crate::report::summary::DecodeSummary;

use archive_file::{ArchiveFile, Direct};
use filter::Filter;
use parallel::{DecodeStats, ParallelZstd};
use source::{Budget, Source};

use crate::archive::{Skip, UnitStart};
use crate::budget::Pools;
use crate::pool::Pool;

/// Read size for the compressed input. 1 MiB keeps read syscalls to ~100 per 100 MB and matches
/// the decoder's appetite; larger showed no gain.
const INPUT_BUF: usize = 1 << 20;

/// Compressed input the frame-parallel decoder reads ahead of its decoders, per decoder
/// thread: most of one of Agave's frames (32 MiB of tar, ~10 MiB at level 3), so each decoder
/// has its frame's input while the reader is still on an earlier one. At most 64 MiB.
const INPUT_PER_THREAD: usize = 8 << 20;
const INPUT_MAX: usize = 64 << 20;

/// zstd frame magic (RFC 8878 §3.1.1), little-endian 0xFD2FB528.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// LZ4 frame magic, little-endian 0x184D2204.
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Formats fastuntar does not decode itself but, as GNU tar, hands to their program when an
/// archive file starts with their magic (GNU tar's `magic` table): the magic and the program
/// (run with `-d`).
const EXTERNAL: [(&[u8], &str); 2] = [(b"LZIP", "lzip"), (b"\x89LZO\x00\r\n\x1a\n", "lzop")];

/// The program that decodes a stream starting with `head`, for formats read through one
/// (`EXTERNAL`); None for the others.
pub fn external_program(head: &[u8]) -> Option<&'static str> {
    EXTERNAL.iter().find(|(magic, _)| head.starts_with(magic)).map(|(_, program)| *program)
}

/// Most bytes looked at to detect the format: enough to step over a few skippable frames. The
/// decision is made as soon as the bytes that have arrived settle it (a magic number is at most
/// 4 bytes, a skippable frame's header 8), so a pipe is never waited on for all of these.
const SNIFF: usize = 64 << 10;

/// Decoded bytes read after the tar end marker to check the end of the compressed stream (a
/// frame's checksum, trailing data the format's own tool would reject), after which reading
/// stops without a word, as GNU tar stops its `zstd -d` child by closing the pipe. GNU tar's
/// records are 10 KiB by default and 1 MiB with `-b 2048`, so 4 MiB covers the padding to the
/// end of any record and the frame that holds it; a bzip2 bomb decodes 4 MiB in ~10 ms where
/// decoding it whole took minutes.
const TRAILER_DECODED: u64 = 4 << 20;

/// Compressed bytes consumed after the tar end marker, for trailers that decode to little or
/// nothing (zero padding after a gzip member, skippable frames, tiny members): past this,
/// reading stops as at TRAILER_DECODED. A compressed end-of-record padding takes a few hundred
/// bytes; the costliest input per byte, a run of tiny bzip2 streams (libbz2-rs zeroes a 3.6 MB
/// block buffer for each), takes ~0.3 s for 256 KiB.
const TRAILER_INPUT: u64 = 256 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Plain,
    Zstd,
    Gzip,
    Bzip2,
    Lz4,
    Xz,
}

/// The format of a stream starting with `head` (all there is of it), by magic number alone.
/// Skippable frames (magic 0x184D2A50..=0x184D2A5F, shared by zstd and LZ4) are stepped over to
/// find the frame that says which one it is.
pub fn detect(head: &[u8]) -> Format {
    decide(head, true).unwrap_or(Format::Plain)
}

/// A skippable frame's magic (its first 4 bytes, or a prefix of them).
fn skippable(b: &[u8]) -> bool {
    b.first().is_some_and(|m| m & 0xf0 == 0x50)
        && [0x2a, 0x4d, 0x18].starts_with(&b[1..b.len().min(4)])
}

/// The format, or None while `head` is too short to tell and more input may come (`eof`
/// false): it is a proper prefix of a magic number, or a skippable frame's header or body is
/// not all there yet. Anything else is decided at once, so a small archive on a pipe whose
/// writer keeps it open is never waited on.
fn decide(head: &[u8], eof: bool) -> Option<Format> {
    // A skippable frame not all there: at the end of the input, zstd's decoder will say so.
    let more = if eof { Some(Format::Zstd) } else { None };
    let mut at = 0;
    loop {
        let b = &head[at.min(head.len())..];
        let proper_prefix = b.len() < 4
            && (ZSTD_MAGIC.starts_with(b)
                || LZ4_MAGIC.starts_with(b)
                || lz4::LEGACY_MAGIC.to_le_bytes().starts_with(b)
                || skippable(b)
                || b == [GZIP_MAGIC[0]]
                || b"BZh".starts_with(b));
        let proper_prefix = proper_prefix
            || (b.len() < xz::MAGIC.len() && xz::MAGIC.starts_with(b))
            || EXTERNAL.iter().any(|(magic, _)| b.len() < magic.len() && magic.starts_with(b));
        if proper_prefix && !eof {
            return None;
        }
        if b.starts_with(&ZSTD_MAGIC) {
            return Some(Format::Zstd);
        }
        if b.starts_with(&LZ4_MAGIC) || b.starts_with(&lz4::LEGACY_MAGIC.to_le_bytes()) {
            return Some(Format::Lz4);
        }
        if b.len() >= 4 && skippable(b) {
            if b.len() < 8 {
                return more;
            }
            let size = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
            match at.checked_add(8 + size) {
                // The next frame's magic is within what we look at: step over to it.
                Some(next) if next < SNIFF => {
                    if next < head.len() {
                        at = next;
                        continue;
                    }
                    return more;
                }
                // The frame runs past what we look at: zstd is the likelier owner.
                _ => return Some(Format::Zstd),
            }
        }
        if at > 0 {
            // Skippable frames followed by something else: let the zstd decoder complain.
            return Some(Format::Zstd);
        }
        if b.starts_with(&GZIP_MAGIC) {
            return Some(Format::Gzip);
        }
        if b.starts_with(&xz::MAGIC) {
            return Some(Format::Xz);
        }
        if b.len() >= 4 && b.starts_with(b"BZh") && (b'1'..=b'9').contains(&b[3]) {
            return Some(Format::Bzip2);
        }
        return Some(Format::Plain);
    }
}

/// Counts the bytes taken from the raw input (for progress, messages and the direct-IO
/// policy's ratio): read, or consumed from its buffer.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.inner.consume(n);
        self.count.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// A raw input that has no buffers of its own (a file, a pipe, a program's output), behind
/// the INPUT_BUF buffer the decoders read in place.
fn buffered(raw: Box<dyn Read + Send>) -> Box<dyn BufRead + Send> {
    Box::new(io::BufReader::with_capacity(INPUT_BUF, raw))
}

/// Checks what follows the tar end marker in a compressed stream, within TRAILER_DECODED
/// decoded and TRAILER_INPUT compressed bytes.
pub struct Trailer(Arc<Budget>);

impl Trailer {
    /// Reads what follows the end marker in `decoded` (the decoder, positioned after it) so
    /// the decoder checks the rest of the stream, within the budget: errors before the budget
    /// is spent are the stream's; reaching it ends the check quietly.
    pub fn check<R: Read>(&self, decoded: R) -> io::Result<()> {
        self.0.arm(TRAILER_INPUT);
        match io::copy(&mut decoded.take(TRAILER_DECODED), &mut io::sink()) {
            Err(_) if self.0.reached() => Ok(()),
            r => r.map(|_| ()),
        }
    }
}

/// An opened archive whose format is known, before its decoder starts.
pub struct Input {
    pub format: Format,
    /// Size of the archive file, when it is a regular file.
    pub size: Option<u64>,
    /// Bytes consumed from the archive so far.
    pub consumed: Arc<AtomicU64>,
    source: Source<Counted<Box<dyn BufRead + Send>>>,
    trailer: Trailer,
    max_window_log: u32,
    /// Lets a regular archive file be read with O_DIRECT (see archive_file.rs).
    direct: Option<Arc<Direct>>,
    /// Read through an external program (filter.rs): what follows the end marker is read
    /// too, whatever the format, so the program's exit status is checked.
    filtered: bool,
    /// Read from a URL (url/): its counters, and its end to check once the run went well.
    pub download: Option<Arc<url::Download>>,
    /// Where the input begins in the archive (a resumed run: `open_file_at`): a unit's start.
    start: UnitStart,
    /// What identifies a regular archive file (None for anything else).
    pub file: Option<FileId>,
}

/// What identifies a regular archive file between two runs (src/resume/): not its path and
/// not `st_dev` (device numbers may change across a reboot), but the filesystem's id (statvfs
/// `f_fsid`, from the filesystem's UUID on ext4 and btrfs), the inode, the size, the mtime and
/// the ctime. The ctime (issue 40) changes with any write, and no one but the kernel's clock
/// sets it: an archive rewritten in place with its size and mtime put back is told apart. It
/// also changes with chmod, chown, a new hard link and (on ext4, XFS, btrfs) a rename, so an
/// archive moved between two runs is no longer the same one and is not resumed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub fsid: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileId {
    pub fn of(f: &File) -> io::Result<FileId> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let m = f.metadata()?;
        // Safety: an open fd and a zeroed statvfs the call fills.
        let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
        // Safety: as above.
        if unsafe { libc::fstatvfs(f.as_raw_fd(), &mut vfs) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FileId {
            fsid: vfs.f_fsid as u64,
            ino: m.ino(),
            size: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }
}

/// Where a resumed run reads the archive again (src/resume/): the unit's start, in the format
/// the first run found (the bytes there are a frame or a tar header: not sniffed again).
#[derive(Clone, Copy, Debug)]
pub struct Reopen {
    pub format: Format,
    pub unit: UnitStart,
}

/// Drops a regular archive file's consumed pages from the page cache once told to
/// (`Input::dropper`).
#[derive(Clone)]
pub struct Dropper(Option<Arc<Direct>>);

impl Dropper {
    pub fn drop_behind(&self) {
        if let Some(d) = &self.0 {
            d.drop_behind();
        }
    }
}

/// How many threads may decode, and where decoded frames wait (multi-frame zstd) or how much
/// memory the threads may keep (xz blocks, in liblzma's own buffers).
pub struct Threads {
    /// Decoder threads in all, the reader's own included; 1 is the one streaming decoder.
    count: usize,
    /// Decoded frames ahead of the reader wait in this pool's buffers, a pool of their own:
    /// only the reader gives them back, so a worker waiting for one never waits for the tar
    /// stage or the writer (None: one thread, or xz).
    pool: Option<Pool>,
    /// Bytes of decoded data the threads may hold: the pool's, or liblzma's budget for xz.
    bytes: u64,
}

impl Threads {
    /// `count` decoder threads with the frame pool of `pools` (one thread when it has none).
    /// A pool the user did not size (`explicit` false) that cannot be allocated (RLIMIT_AS)
    /// leaves one thread to decode, as the default did before it grew with the threads.
    fn new(count: usize, pools: Pools, explicit: bool) -> Result<Threads> {
        let one = Threads { count: 1, pool: None, bytes: 0 };
        if pools.frames == 0 || count < 2 {
            return Ok(one);
        }
        match crate::pool::allocate(pools.buf_size, pools.frames) {
            Ok(pool) => {
                let bytes = (pool.count() * pool.buf_size()) as u64;
                Ok(Threads { count, pool: Some(pool), bytes })
            }
            Err(_) if !explicit => Ok(one),
            Err(e) => Err(e),
        }
    }

    /// Bytes of decoded data the threads may hold (0: one thread).
    pub fn pool_bytes(&self) -> u64 {
        self.bytes
    }

    /// The pool decoded frames wait in, when there is one.
    pub fn frame_pool(&self) -> Option<&Pool> {
        self.pool.as_ref()
    }
}

/// The decoded tar stream.
pub struct Decoded {
    pub reader: Box<dyn Skip + Send>,
    /// For checking the compressed stream after the tar end marker (None for plain tar).
    pub trailer: Option<Trailer>,
    /// Decoder threads at work (1 unless zstd frames are decoded in parallel).
    pub threads: usize,
    /// zstd frames decoded so far, when the frame-parallel decoder counts them.
    pub stats: Option<Arc<DecodeStats>>,
    /// The download the archive comes from, when it is a URL.
    pub download: Option<Arc<url::Download>>,
}

/// The decoder's counters, readable after its stream has been handed to the tar stage.
pub struct Counters {
    threads: usize,
    stats: Option<Arc<DecodeStats>>,
}

impl Counters {
    pub fn summary(&self) -> DecodeSummary {
        let read = |f: fn(&DecodeStats) -> &AtomicU64| {
            self.stats.as_ref().map(|s| f(s).load(Ordering::Relaxed))
        };
        DecodeSummary {
            threads: self.threads,
            frames: read(|s| &s.frames),
            frames_ahead: read(|s| &s.frames_ahead),
            frames_in_place: read(|s| &s.frames_in_place),
            frame_bytes_handed: read(|s| &s.lent),
            frame_bytes_copied: read(|s| &s.copied),
        }
    }
}

impl Decoded {
    pub fn counters(&self) -> Counters {
        Counters { threads: self.threads, stats: self.stats.clone() }
    }
}

impl Input {
    /// Drops consumed archive pages from the page cache from here on (a regular file only):
    /// for when the writer decided, after the archive was opened, to write direct.
    pub fn drop_behind(&self) {
        self.dropper().drop_behind();
    }

    /// zstd: the content size the first frame's header declares (RFC 8878
    /// Frame_Content_Size), when the bytes read to find the format hold that header (a pipe's
    /// first read may not: then None, as for a frame without one). Nothing more is read.
    pub fn first_frame_size(&self) -> Option<u64> {
        if self.format != Format::Zstd {
            return None;
        }
        let head = self.source.buffered();
        let mut walker = frames::Walker::new(u64::MAX);
        let mut at = 0;
        match walker.next(head, &mut at) {
            Ok(Some(frames::Event::Start { header, .. })) => header.content_size,
            _ => None,
        }
    }

    /// `drop_behind`, for after the decoder has started.
    pub fn dropper(&self) -> Dropper {
        Dropper(self.direct.clone())
    }

    /// Read through a program (`-I PROG`, an lzip or lzop archive): its output cannot be
    /// begun again in the middle.
    pub fn filtered(&self) -> bool {
        self.filtered
    }

    /// Decoder workers `decode` would start with `threads` threads: all but the reader for
    /// zstd, whose frames may decode in parallel, and for xz, whose blocks may; none for other
    /// formats. Their frames get a pool of their own (`Config::pools`); for xz, liblzma's
    /// threads buffer blocks in as much memory of their own.
    pub fn workers(&self, threads: usize) -> usize {
        match self.format {
            Format::Zstd | Format::Xz => threads.saturating_sub(1),
            _ => 0,
        }
    }

    /// The decoder threads for this input and `pools` (`Threads::new`): for zstd with the frame
    /// pool allocated; for xz only its size, which liblzma's threads keep in buffers of their
    /// own; one thread for the other formats (`workers` gave them no frames).
    pub fn threads(&self, count: usize, pools: Pools, explicit: bool) -> Result<Threads> {
        match self.format {
            Format::Xz if count > 1 && pools.frames > 0 => {
                Ok(Threads { count, pool: None, bytes: (pools.frames * pools.buf_size) as u64 })
            }
            _ => Threads::new(count, pools, explicit),
        }
    }

    /// Starts the decoder the format calls for: for zstd with more than one thread, the
    /// frame-parallel one (`parallel.rs`), which reads a single-frame stream as the streaming
    /// decoder does.
    pub fn decode(self, threads: Threads) -> Result<Decoded> {
        let Input {
            format,
            source,
            trailer,
            max_window_log,
            direct,
            filtered,
            download,
            start,
            ..
        } = self;
        let trailer = (format != Format::Plain || filtered).then_some(trailer);
        let mut decoded =
            Decoded { reader: Box::new(io::empty()), trailer, threads: 1, stats: None, download };
        // `Threads::new` gives a pool only with more than one thread. The frame-parallel
        // decoder needs at least its splitter thread: where none can start (`ulimit -u` or
        // pids.max at its limit), the streaming decoder reads the frames one after another.
        let pool = threads.pool.filter(|_| format != Format::Zstd || can_start_a_thread());
        if let Some(d) = &direct {
            // Decided below for the frame-parallel decoder; every other reads buffered.
            d.buffered();
        }
        decoded.reader = match (format, pool) {
            (Format::Plain, _) => Box::new(source),
            (Format::Zstd, Some(pool)) => {
                // The splitter reads ahead on its own thread, where a direct read stalls
                // nobody; it hands over aligned buffers.
                if let Some(d) = &direct {
                    d.direct();
                }
                let opts = parallel::Options {
                    workers: threads.count - 1,
                    max_window_log,
                    ahead_cap: parallel::ahead_cap(pool.count()),
                    input_budget: (threads.count * INPUT_PER_THREAD).min(INPUT_MAX),
                    piece: match direct {
                        Some(_) => parallel::PIECE_FILE,
                        None => parallel::PIECE_STREAM,
                    },
                    start,
                };
                let stats = Arc::new(DecodeStats::default());
                let d = ParallelZstd::new(Box::new(source), opts, pool, stats.clone())
                    .context("cannot start the zstd decoder threads")?;
                decoded.threads = d.threads();
                decoded.stats = Some(stats);
                Box::new(d)
            }
            (Format::Zstd, None) => {
                let d = zstd_stream::ZstdStream::new(source, max_window_log, start)
                    .context("cannot start the zstd decoder")?;
                Box::new(Named { inner: d, what: "zstd" })
            }
            (Format::Gzip, _) => {
                Box::new(Named { inner: gz::GzMembers::new(source), what: "gzip" })
            }
            (Format::Bzip2, _) => {
                Box::new(Named { inner: bz2::BzStreams::new(source), what: "bzip2" })
            }
            (Format::Lz4, _) => Box::new(Named { inner: lz4::Lz4Frames::new(source), what: "lz4" }),
            (Format::Xz, _) => {
                decoded.threads = xz::threads(threads.count, threads.bytes);
                let d = xz::streams(source, max_window_log, threads.count, threads.bytes);
                Box::new(Named { inner: d, what: "xz" })
            }
        };
        Ok(decoded)
    }
}

/// Opens `path` (None: standard input), through the `filter` program when one is given
/// (filter.rs), and finds the format from its magic number; `decode` then starts the decoder.
/// `drop_behind` drops consumed archive pages from the page cache (regular files only).
pub fn open(
    path: Option<&Path>,
    filter: Option<&[String]>,
    max_window_log: u32,
    drop_behind: bool,
) -> Result<Input> {
    let input = open_as(path, filter, max_window_log, drop_behind)?;
    if filter.is_some() {
        return Ok(input);
    }
    let Some(program) = external_program(input.source.buffered()) else { return Ok(input) };
    // lzip, lzop: as GNU tar, the archive file is read through `PROGRAM -d`; standard input,
    // already partly read, is refused as there ("Use --lzip option").
    let Some(p) = path else {
        bail!("the archive on standard input is {program}-compressed: give --{program}");
    };
    drop(input);
    let words = [program.to_string(), "-d".to_string()];
    open_as(path, Some(&words), max_window_log, drop_behind)
        .with_context(|| format!("{}: {program}-compressed", p.display()))
}

/// `open` with the program `filter` as given (none: the data is read as it is).
fn open_as(
    path: Option<&Path>,
    filter: Option<&[String]>,
    max_window_log: u32,
    drop_behind: bool,
) -> Result<Input> {
    let mut direct = None;
    let mut id = None;
    let (raw, size): (Box<dyn Read + Send>, Option<u64>) = match (filter, path) {
        (Some(words), _) => (Box::new(Filter::spawn(words, path)?), None),
        (None, None) => (Box::new(io::stdin()), None),
        (None, Some(p)) => {
            let f = File::open(p).with_context(|| format!("{}: Cannot open", p.display()))?;
            let meta = f.metadata().with_context(|| format!("{}: Cannot stat", p.display()))?;
            if meta.is_dir() {
                anyhow::bail!("{}: Cannot read: Is a directory", p.display());
            }
            let size = meta.is_file().then_some(meta.len());
            if meta.is_file() {
                id = Some(FileId::of(&f).with_context(|| format!("{}: Cannot stat", p.display()))?);
                let file = ArchiveFile::new(f, p, drop_behind);
                direct = Some(file.direct());
                (Box::new(file), size)
            } else {
                // A FIFO or a device: read as it comes.
                (Box::new(f), size)
            }
        }
    };
    let filtered = filter.is_some();
    let mut input = sourced(buffered(raw), size, max_window_log, direct, filtered, None, None)?;
    input.file = id;
    Ok(input)
}

/// A resumed run (src/resume/): the regular archive file `path` opened at `at.unit`, read
/// from its 4096-aligned page (direct reads need one) with the bytes before the unit passed
/// over. The file is checked by the caller (`Input::file`) before anything is decoded.
pub fn open_file_at(
    path: &Path,
    max_window_log: u32,
    drop_behind: bool,
    at: Reopen,
) -> Result<Input> {
    let f = File::open(path).with_context(|| format!("{}: Cannot open", path.display()))?;
    let id = FileId::of(&f).with_context(|| format!("{}: Cannot stat", path.display()))?;
    let page =
        at.unit.compressed / archive_file::DIRECT_ALIGN as u64 * archive_file::DIRECT_ALIGN as u64;
    let mut file = ArchiveFile::new(f, path, drop_behind);
    file.seek_to(page);
    let direct = Some(file.direct());
    let raw = buffered(Box::new(file));
    let mut input = sourced(raw, Some(id.size), max_window_log, direct, false, None, Some(at))?;
    input.file = Some(id);
    Ok(input)
}

/// A resumed run's download (src/resume/): `plan.url` from `at.unit`'s first byte, of the
/// version `expect` (a changed archive fails here, before anything is read).
pub fn open_url_at(
    plan: &url::Plan,
    max_window_log: u32,
    at: Reopen,
    expect: url::Identity,
) -> Result<Input> {
    let start = url::Start { from: at.unit.compressed, expect: Some(expect) };
    let download = Arc::new(url::open(plan, start)?);
    let size = download.identity().length;
    let raw: Box<dyn BufRead + Send> = Box::new(download.reader());
    sourced(raw, size, max_window_log, None, false, Some(download), Some(at))
}

/// Opens the archive at `plan.url` (url/): the first answer gives its length, then its bytes
/// are read as they arrive, on `plan.connections` connections, and the format is found from
/// its magic number as for a file.
pub fn open_url(plan: &url::Plan, max_window_log: u32) -> Result<Input> {
    let download = Arc::new(url::open(plan, url::Start::default())?);
    let size = download.identity().length;
    // The download lends its blocks: the decoders read them where they landed.
    let raw: Box<dyn BufRead + Send> = Box::new(download.reader());
    sourced(raw, size, max_window_log, None, false, Some(download), None)
}

/// A read of the archive that failed: "cannot read the archive: WHY", but a decompressor's
/// failure alone, in GNU tar's words (`Child returned status N`).
fn read_error(e: io::Error) -> anyhow::Error {
    match filter::is_child_failed(&e) {
        true => anyhow::Error::new(e),
        false => anyhow::Error::new(e).context("cannot read the archive"),
    }
}

/// `raw` under the Source the decoders read, its format found (or, `at`, known: a resumed
/// run's input begins at `at.unit`, inside the archive, after the bytes of the page it was
/// read from, `raw`'s first, are passed over).
fn sourced(
    raw: Box<dyn BufRead + Send>,
    size: Option<u64>,
    max_window_log: u32,
    direct: Option<Arc<Direct>>,
    filtered: bool,
    download: Option<Arc<url::Download>>,
    at: Option<Reopen>,
) -> Result<Input> {
    let from = at.map_or(0, |at| at.unit.compressed);
    // Progress counts the archive's bytes from its start, the resumed part as read.
    let page = if download.is_some() {
        from
    } else {
        from / archive_file::DIRECT_ALIGN as u64 * archive_file::DIRECT_ALIGN as u64
    };
    let consumed = Arc::new(AtomicU64::new(page));
    let counted = Counted { inner: raw, count: consumed.clone() };
    let mut source = Source::with_capacity(SNIFF, counted);
    let trailer = Trailer(source.budget());
    let format = match at {
        None => sniff(&mut source).map_err(read_error)?,
        Some(at) => {
            let before = from - page;
            let passed = io::copy(&mut (&mut source).take(before), &mut io::sink())
                .context("cannot read the archive")?;
            if passed != before {
                bail!("the archive ends before byte {from}, where the resume point is");
            }
            // The resumed unit's first bytes in the Source's own buffer, as format detection
            // leaves them: `first_frame_size` reads the frame's header there.
            source.fill_more().context("cannot read the archive")?;
            at.format
        }
    };
    Ok(Input {
        format,
        size,
        consumed,
        source,
        trailer,
        max_window_log,
        direct,
        filtered,
        download,
        start: at.map_or(UnitStart::START, |at| at.unit),
        file: None,
    })
}

/// Reads until the format is known: from the first read on, whatever has arrived is looked
/// at, and more is read only while it cannot tell (see `decide`), never past SNIFF bytes.
fn sniff<R: BufRead>(input: &mut Source<R>) -> io::Result<Format> {
    loop {
        let head = input.buffered();
        if head.len() >= SNIFF {
            return Ok(detect(&head[..SNIFF]));
        }
        if let Some(format) = decide(head, false) {
            return Ok(format);
        }
        if !input.fill_more()? {
            return Ok(detect(input.buffered()));
        }
    }
}

/// Prefixes decoder errors with the format's name, so "corrupt block" reads as a decoding
/// problem, and names a stream that ends inside a frame.
struct Named<R> {
    inner: R,
    what: &'static str,
}

impl<R: Skip> Skip for Named<R> {
    fn skip_in_place(&mut self, n: u64) -> io::Result<u64> {
        self.inner.skip_in_place(n)
    }

    fn unit_at_or_before(&self, t: u64) -> Option<UnitStart> {
        self.inner.unit_at_or_before(t)
    }
}

impl<R: Read> Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let what = self.what;
        self.inner.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(e.kind(), format!("{what}: the compressed input ends inside a frame"))
            } else if what == "zstd" && e.to_string().contains("too much memory") {
                io::Error::new(
                    e.kind(),
                    "zstd: the frame needs a larger window than --max-window allows (raise --max-window, up to 2G)",
                )
            } else if what == "xz" && e.to_string().contains("memory limit") {
                io::Error::new(
                    e.kind(),
                    "xz: the stream needs a larger dictionary than --max-window allows (raise --max-window, up to 2G)",
                )
            } else {
                io::Error::new(e.kind(), format!("{what}: {e}"))
            }
        })
    }
}

/// Whether this process may start one more thread now (a thread that ends at once: its slot
/// under `ulimit -u` is free again when the real one starts).
fn can_start_a_thread() -> bool {
    std::thread::Builder::new().spawn(|| {}).is_ok_and(|t| t.join().is_ok())
}

/// The archive of `cfg` opened and its format found: a URL's download (`open_url`),
/// or a file, standard input or a `-I` program's output (`decode::open`).
pub fn open_input(cfg: &plan::InputPlan, drop_behind: bool) -> Result<Input> {
    if let Some(handed) = &cfg.reader {
        // A program's own reader (the library's `Source::Reader`): read as standard input is.
        let raw = handed.take().context("the archive reader was used by an earlier run")?;
        return sourced(buffered(raw), None, cfg.max_window_log, None, false, None, None);
    }
    match &cfg.url {
        Some(plan) => open_url(plan, cfg.max_window_log),
        None => {
            open(cfg.archive.as_deref(), cfg.filter.as_deref(), cfg.max_window_log, drop_behind)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first frame's declared size is read from what format detection looked at, and
    /// from a resumed run's first bytes (the frame it resumes at): the direct-IO policy's
    /// first guess (`direct_policy::Arrival`). Until the resumed Source filled its own buffer
    /// again, a resumed run had none.
    #[test]
    fn the_first_frame_size_at_the_start_and_at_a_resume_point() {
        let one: Vec<u8> = (0..70_000u32).map(|i| (i % 7) as u8).collect();
        let two: Vec<u8> = (0..90_000u32).map(|i| (i % 11) as u8).collect();
        let first = zstd::bulk::compress(&one, 3).unwrap();
        let mut archive = first.clone();
        archive.extend(zstd::bulk::compress(&two, 3).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tar.zst");
        std::fs::write(&path, &archive).unwrap();
        let input = open(Some(&path), None, 27, false).unwrap();
        assert_eq!(input.first_frame_size(), Some(one.len() as u64));
        let unit =
            UnitStart { index: 1, compressed: first.len() as u64, decoded: one.len() as u64 };
        let at = Reopen { format: Format::Zstd, unit };
        let input = open_file_at(&path, 27, false, at).unwrap();
        assert_eq!(input.first_frame_size(), Some(two.len() as u64));
    }

    /// A frame pool that cannot be had: one thread decodes when the user did not size it,
    /// the run stops with the allocation's message when they did.
    #[test]
    fn a_default_frame_pool_that_does_not_fit_leaves_one_thread() {
        let buf_size = 1 << 20;
        let frames = 1 << 22; // 4 TiB: refused by mmap unless overcommit is unlimited
        if Pool::try_new(buf_size, frames).is_some() {
            eprintln!("SKIP: this kernel maps 4 TiB (vm.overcommit_memory = 1?)");
            return;
        }
        let pools = Pools { buf_size, files: 4, frames };
        let t = Threads::new(4, pools, false).unwrap();
        assert_eq!((t.count, t.pool_bytes()), (1, 0));
        let e = Threads::new(4, pools, true).err().expect("an explicit pool must not shrink");
        assert!(e.to_string().contains("cannot allocate 4194304 MiB of buffers"), "{e}");
        let small = Pools { frames: 4, ..pools };
        let t = Threads::new(4, small, true).unwrap();
        assert_eq!((t.count, t.pool_bytes()), (4, 4 << 20));
    }

    /// A multi-frame archive file whose frame headers (and skippable frames' headers) straddle
    /// the reads the frame-parallel decoder makes of it: the end of what format detection took
    /// into the Source's own buffer (SNIFF), of the file's first read (INPUT_BUF, the
    /// `BufReader`'s) and of the first PIECE_FILE read after it.
    /// Until frames.rs carried a header's first bytes over, a frame starting at byte
    /// 1,048,574 failed with "the compressed input ends inside the frame".
    #[test]
    fn frame_headers_straddling_the_file_reads() {
        let part = |i: usize| -> Vec<u8> { (0..20_000).map(|j| (j * 7 + i) as u8).collect() };
        let frame = |data: &[u8]| zstd::bulk::compress(data, 3).unwrap();
        // A skippable frame that ends at `to`.
        let pad = |out: &mut Vec<u8>, to: usize| {
            let size = to - out.len() - 8;
            out.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18]);
            out.extend_from_slice(&(size as u32).to_le_bytes());
            out.resize(to, 0);
        };
        let reads = [SNIFF, INPUT_BUF, INPUT_BUF + parallel::PIECE_FILE];
        for k in [1, 2, 3, 4, 5, 6, 9, 13, 17] {
            for skippable in [false, true] {
                // A frame, or a skippable frame, starts k bytes before each read ends.
                let mut out = frame(&part(0));
                let mut want = part(0);
                for (i, &end) in reads.iter().enumerate() {
                    pad(&mut out, end - k);
                    if skippable {
                        pad(&mut out, end + 100);
                    }
                    out.extend(frame(&part(i + 1)));
                    want.extend(part(i + 1));
                }
                check(&out, &want, &format!("k {k}, skippable {skippable}"));
            }
        }
        fn check(out: &[u8], want: &[u8], ctx: &str) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.tar.zst");
            std::fs::write(&path, out).unwrap();
            for threads in [2, 4] {
                let input = open(Some(&path), None, 27, false).unwrap();
                let pools = Pools { buf_size: 1 << 20, files: 4, frames: 8 };
                let decoded = input.decode(Threads::new(threads, pools, true).unwrap()).unwrap();
                assert!(decoded.threads > 1);
                let mut got = Vec::new();
                let r = { decoded.reader }.read_to_end(&mut got);
                assert!(r.is_ok() && got == want, "{ctx}, {threads} threads: {r:?}");
            }
        }
    }

    /// A resumed run opens the archive file at a unit's start (src/resume/): the frames from
    /// there decode to the rest of the stream, numbered and placed as in the whole archive,
    /// with one decoder thread or several; a plain archive from any byte.
    #[test]
    fn opened_again_at_a_unit() {
        let parts: Vec<Vec<u8>> =
            (0..12).map(|i| (0..40_000).map(|j| (j * 13 + i * 5) as u8).collect()).collect();
        let mut archive = Vec::new();
        for p in &parts {
            archive.extend(zstd::bulk::compress(p, 3).unwrap());
        }
        let want = parts.concat();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tar.zst");
        std::fs::write(&path, &archive).unwrap();
        let pools = Pools { buf_size: 1 << 20, files: 4, frames: 8 };
        for threads in [1, 2] {
            let input = open(Some(&path), None, 27, false).unwrap();
            let mut d = input.decode(Threads::new(threads, pools, true).unwrap()).unwrap().reader;
            let mut got = Vec::new();
            d.read_to_end(&mut got).unwrap();
            assert_eq!(got, want);
            for t in [0u64, 39_999, 40_000, 200_123, 479_999] {
                let unit = d.unit_at_or_before(t).unwrap();
                // Each frame with one thread; with several, each job (small frames share one).
                assert!(unit.decoded <= t && unit.decoded == unit.index * 40_000, "{t}: {unit:?}");
                assert!(threads > 1 || unit.index == t / 40_000, "{t}: {unit:?}");
                let at = Reopen { format: Format::Zstd, unit };
                let input = open_file_at(&path, 27, false, at).unwrap();
                let mut again =
                    input.decode(Threads::new(threads, pools, true).unwrap()).unwrap().reader;
                let mut rest = Vec::new();
                again.read_to_end(&mut rest).unwrap();
                assert!(rest == want[unit.decoded as usize..], "threads {threads}, offset {t}");
                assert_eq!(again.unit_at_or_before(unit.decoded), Some(unit));
            }
        }
        // A plain archive: any byte.
        let plain = dir.path().join("a.tar");
        std::fs::write(&plain, &want).unwrap();
        let unit = UnitStart { index: 0, compressed: 123_456, decoded: 123_456 };
        let input =
            open_file_at(&plain, 27, false, Reopen { format: Format::Plain, unit }).unwrap();
        let mut rest = Vec::new();
        input
            .decode(Threads::new(1, pools, true).unwrap())
            .unwrap()
            .reader
            .read_to_end(&mut rest)
            .unwrap();
        assert!(rest == want[123_456..]);
    }

    #[test]
    fn detects_by_magic() {
        assert_eq!(external_program(b"LZIP\x01\xce"), Some("lzip"));
        assert_eq!(external_program(b"\x89LZO\x00\r\n\x1a\n\x10"), Some("lzop"));
        assert_eq!(external_program(b"\x89LZO\x00\r\n"), None);
        assert_eq!(external_program(b"LZI"), None);
        // A proper prefix of their magic waits for more, as the others'.
        assert_eq!(decide(b"LZ", false), None);
        assert_eq!(decide(b"\x89LZO", false), None);
        assert_eq!(decide(b"LZIP", false), Some(Format::Plain));
        assert_eq!(detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]), Format::Zstd);
        assert_eq!(detect(&[0x04, 0x22, 0x4d, 0x18, 0]), Format::Lz4);
        assert_eq!(detect(&[0x1f, 0x8b, 8]), Format::Gzip);
        assert_eq!(detect(b"BZh91AY"), Format::Bzip2);
        assert_eq!(detect(b"BZhx"), Format::Plain);
        assert_eq!(detect(b"hello.txt\0\0\0"), Format::Plain);
        assert_eq!(detect(b""), Format::Plain);
        // A skippable frame of 2 bytes, then an LZ4 frame.
        let mut s = vec![0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9];
        s.extend_from_slice(&LZ4_MAGIC);
        assert_eq!(detect(&s), Format::Lz4);
        // A skippable frame whose size runs past the end.
        assert_eq!(detect(&[0x5f, 0x2a, 0x4d, 0x18, 0xff, 0xff, 0xff, 0xff]), Format::Zstd);
    }

    /// What has arrived decides as soon as it can; only a proper prefix of a magic number or
    /// an incomplete skippable frame asks for more.
    #[test]
    fn decides_on_what_has_arrived() {
        for (head, want) in [
            (&b""[..], None),
            (&[0x28][..], None),
            (&[0x28, 0xb5, 0x2f][..], None),
            (&[0x28, 0xb5, 0x2f, 0xfd][..], Some(Format::Zstd)),
            (&[0x1f][..], None),
            (&[0x1f, 0x8b][..], Some(Format::Gzip)),
            (&b"BZh"[..], None),
            (&b"BZh9"[..], Some(Format::Bzip2)),
            (&b"BZx"[..], Some(Format::Plain)),
            (&[0xfd, b'7'][..], None),
            (&[0xfd, b'7', b'z', b'X', b'Z'][..], None),
            (&[0xfd, b'7', b'z', b'X', b'Z', 0][..], Some(Format::Xz)),
            (&[0xfd, b'7', b'z', b'Y'][..], Some(Format::Plain)),
            (&[0x04, 0x22][..], None),
            (&[0x02, 0x21, 0x4c, 0x18][..], Some(Format::Lz4)),
            (&b"f"[..], Some(Format::Plain)),
            (&b"hello.txt"[..], Some(Format::Plain)),
            (&[0x50, 0x2a, 0x4d, 0x18, 4, 0][..], None),
            (&[0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2][..], None),
            (&[0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 9, 0x1f, 0x8b][..], Some(Format::Zstd)),
            (&[0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 9, 0x04, 0x22][..], None),
            (&[0x50, 0x2a, 0x4d, 0x18, 0, 0, 1, 0][..], Some(Format::Zstd)),
        ] {
            assert_eq!(decide(head, false), want, "{head:x?}");
            assert!(decide(head, true).is_some(), "{head:x?} at the end of the input");
        }
    }

    #[test]
    fn sniffing_a_dribbling_input_reads_only_what_it_needs() {
        struct Dribble(Vec<u8>, usize);
        impl Read for Dribble {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.1 == self.0.len() {
                    // A pipe whose writer keeps it open: nothing more is coming yet.
                    panic!("read past what was needed");
                }
                buf[0] = self.0[self.1];
                self.1 += 1;
                Ok(1)
            }
        }
        for (bytes, want) in [
            (b"name of a member".to_vec(), Format::Plain),
            (b"BZh91AY".to_vec(), Format::Bzip2),
            (vec![0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 9, 0x28, 0xb5, 0x2f, 0xfd], Format::Zstd),
        ] {
            let n = match want {
                Format::Plain => 1,
                Format::Bzip2 => 4,
                _ => bytes.len(),
            };
            let raw = io::BufReader::with_capacity(1 << 20, Dribble(bytes[..n].to_vec(), 0));
            let mut src = Source::with_capacity(SNIFF, raw);
            assert_eq!(sniff(&mut src).unwrap(), want);
        }
    }
}
