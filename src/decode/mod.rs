//! Input → decoded tar bytes. Compression is detected from the first bytes, never the name.

pub mod frames;
mod lz4;
pub mod parallel;

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// Read size for the compressed input. 1 MiB keeps read syscalls to ~100 per 100 MB and matches
/// the decoder's appetite; larger showed no gain.
const INPUT_BUF: usize = 1 << 20;

/// zstd frame magic (RFC 8878 §3.1.1), little-endian 0xFD2FB528.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// LZ4 frame magic, little-endian 0x184D2204.
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Bytes looked at to detect the format: enough to step over a few skippable frames.
const SNIFF: usize = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Plain,
    Zstd,
    Gzip,
    Bzip2,
    Lz4,
}

/// The format of a stream starting with `head`, by magic number alone. Skippable frames
/// (magic 0x184D2A50..=0x184D2A5F, shared by zstd and LZ4) are stepped over to find the frame
/// that says which one it is.
pub fn detect(head: &[u8]) -> Format {
    let mut at = 0;
    loop {
        let b = &head[at.min(head.len())..];
        if b.starts_with(&ZSTD_MAGIC) {
            return Format::Zstd;
        }
        if b.starts_with(&LZ4_MAGIC) || b.starts_with(&lz4::LEGACY_MAGIC.to_le_bytes()) {
            return Format::Lz4;
        }
        if b.len() >= 8 && b[0] & 0xf0 == 0x50 && b[1..4] == [0x2a, 0x4d, 0x18] {
            let size = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
            match at.checked_add(8 + size) {
                Some(next) if next < head.len() => {
                    at = next;
                    continue;
                }
                // The frame runs past what we looked at: zstd is the likelier owner.
                _ => return Format::Zstd,
            }
        }
        if at > 0 {
            // Skippable frames followed by something else: let the zstd decoder complain.
            return Format::Zstd;
        }
        if b.starts_with(&GZIP_MAGIC) {
            return Format::Gzip;
        }
        if b.len() >= 4 && b.starts_with(b"BZh") && (b'1'..=b'9').contains(&b[3]) {
            return Format::Bzip2;
        }
        return Format::Plain;
    }
}

/// Input pages dropped from the page cache at a time behind the reader (with
/// `drop_behind`): large enough that the fadvise calls cost nothing measurable.
const DROP_BEHIND_STEP: u64 = 32 << 20;

/// A regular archive file read sequentially; with `drop_behind`, pages already consumed are
/// dropped from the page cache so reading a 100 GB archive does not fill memory with it.
struct ArchiveFile {
    file: File,
    pos: u64,
    dropped: u64,
    drop_behind: bool,
}

impl Read for ArchiveFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.pos += n as u64;
        if self.drop_behind && self.pos - self.dropped >= DROP_BEHIND_STEP {
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

/// Counts bytes read from the raw input (for progress and messages).
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

pub struct Input {
    pub format: Format,
    /// Size of the archive file, when it is a regular file.
    pub size: Option<u64>,
    /// Bytes consumed from the archive so far.
    pub consumed: Arc<AtomicU64>,
    pub reader: Box<dyn Read + Send>,
}

/// Opens `path` (None: standard input) and wraps it in the decoder its magic calls for.
/// `drop_behind` drops consumed archive pages from the page cache (regular files only).
pub fn open(path: Option<&Path>, max_window_log: u32, drop_behind: bool) -> Result<Input> {
    let (raw, size): (Box<dyn Read + Send>, Option<u64>) = match path {
        None => (Box::new(io::stdin()), None),
        Some(p) => {
            let f = File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
            let meta = f.metadata().with_context(|| format!("{}: cannot stat", p.display()))?;
            if meta.is_dir() {
                anyhow::bail!("{}: is a directory", p.display());
            }
            let size = meta.is_file().then_some(meta.len());
            // Safety: the fd is open; fadvise takes no pointers. A hint only.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
            let drop_behind = drop_behind && meta.is_file();
            (Box::new(ArchiveFile { file: f, pos: 0, dropped: 0, drop_behind }), size)
        }
    };
    let consumed = Arc::new(AtomicU64::new(0));
    let mut counted = Counted { inner: raw, count: consumed.clone() };
    let head = sniff(&mut counted).context("cannot read the archive")?;
    let format = detect(&head);
    let input = BufReader::with_capacity(INPUT_BUF, io::Cursor::new(head).chain(counted));
    let reader: Box<dyn Read + Send> = match format {
        Format::Plain => Box::new(input),
        Format::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(input)
                .context("cannot start the zstd decoder")?;
            d.window_log_max(max_window_log).context("cannot set the zstd window limit")?;
            Box::new(Named { inner: d, what: "zstd" })
        }
        Format::Gzip => {
            Box::new(Named { inner: flate2::bufread::MultiGzDecoder::new(input), what: "gzip" })
        }
        Format::Bzip2 => {
            Box::new(Named { inner: bzip2::bufread::MultiBzDecoder::new(input), what: "bzip2" })
        }
        Format::Lz4 => Box::new(Named { inner: lz4::Lz4Frames::new(input), what: "lz4" }),
    };
    Ok(Input { format, size, consumed, reader })
}

/// Reads up to SNIFF bytes (fewer only at end of input), however the input splits its reads.
fn sniff<R: Read>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(SNIFF);
    r.take(SNIFF as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// Prefixes decoder errors with the format's name, so "corrupt block" reads as a decoding
/// problem, and names a stream that ends inside a frame.
struct Named<R> {
    inner: R,
    what: &'static str,
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
            } else {
                io::Error::new(e.kind(), format!("{what}: {e}"))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_by_magic() {
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
}
