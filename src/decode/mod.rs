//! Input → decoded tar bytes. Compression is detected from the first bytes, never the name.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// Read size for the compressed input. 1 MiB keeps read syscalls to ~100 per 100 MB and matches
/// the decoder's appetite; larger showed no gain.
const INPUT_BUF: usize = 1 << 20;

/// zstd frame magic (RFC 8878 §3.1.1), little-endian 0xFD2FB528.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// zstd skippable frames: magic 0x184D2A50..=0x184D2A5F.
fn is_zstd_skippable(b: &[u8]) -> bool {
    b.len() >= 4 && b[0] & 0xf0 == 0x50 && b[1..4] == [0x2a, 0x4d, 0x18]
}

/// Largest zstd window accepted: 2^31, what `zstd --long=31` writes.
pub const MAX_WINDOW_LOG: u32 = 31;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Plain,
    Zstd,
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
pub fn open(path: Option<&Path>) -> Result<Input> {
    let (raw, size): (Box<dyn Read + Send>, Option<u64>) = match path {
        None => (Box::new(io::stdin()), None),
        Some(p) => {
            let f = File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
            let meta = f.metadata().with_context(|| format!("{}: cannot stat", p.display()))?;
            if meta.is_dir() {
                anyhow::bail!("{}: is a directory", p.display());
            }
            let size = meta.is_file().then_some(meta.len());
            (Box::new(f), size)
        }
    };
    let consumed = Arc::new(AtomicU64::new(0));
    let counted = Counted { inner: raw, count: consumed.clone() };
    let mut buffered = BufReader::with_capacity(INPUT_BUF, counted);
    let head = fill_at_least(&mut buffered, 4).context("cannot read the archive")?;
    let format = if head.starts_with(&ZSTD_MAGIC) || is_zstd_skippable(&head) {
        Format::Zstd
    } else {
        Format::Plain
    };
    let reader: Box<dyn Read + Send> = match format {
        Format::Plain => Box::new(buffered),
        Format::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(buffered)
                .context("cannot start the zstd decoder")?;
            d.window_log_max(MAX_WINDOW_LOG).context("cannot set the zstd window limit")?;
            Box::new(ZstdErrors(d))
        }
    };
    Ok(Input { format, size, consumed, reader })
}

/// Names zstd's errors as such, so "corrupt block" reads as a decoding problem.
struct ZstdErrors<R>(R);

impl<R: Read> Read for ZstdErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "zstd: truncated input (incomplete frame)",
                )
            } else {
                io::Error::new(e.kind(), format!("zstd: {e}"))
            }
        })
    }
}

/// Peeks at least `n` bytes (fewer only at end of input) without consuming them.
fn fill_at_least<R: Read>(r: &mut BufReader<R>, n: usize) -> io::Result<Vec<u8>> {
    let buf = r.fill_buf()?;
    // A short first read (a pipe) may return fewer bytes; a 4-byte magic almost always fits,
    // and BufReader cannot grow its buffer without consuming, so accept what the first read gave.
    Ok(buf[..buf.len().min(n)].to_vec())
}
