//! LZ4 frame sequences as `lz4 -dc` reads them: concatenated frames, skippable frames (magic
//! 0x184D2A50..=0x184D2A5F) stepped over, legacy frames (magic 0x184C2102, `lz4 -l`), and
//! trailing data after a complete frame ignored. lz4_flex's FrameDecoder handles one modern
//! frame, so this loops around it.

use std::io::{self, Chain, Cursor, Read};

use lz4_flex::frame::FrameDecoder;

const LZ4_MAGIC: u32 = 0x184D_2204;
pub const LEGACY_MAGIC: u32 = 0x184C_2102;
/// Legacy frames hold blocks of at most 8 MiB decompressed (lz4's LEGACY_BLOCKSIZE).
const LEGACY_BLOCK: usize = 8 << 20;
/// LZ4_compressBound(LEGACY_BLOCK): no valid compressed block is larger.
const LEGACY_BOUND: usize = LEGACY_BLOCK + LEGACY_BLOCK / 255 + 16;

type Framed<R> = FrameDecoder<Chain<Cursor<[u8; 4]>, Spy<R>>>;

/// Notes whether the input ended under a frame decoder: lz4_flex's FrameDecoder takes the end
/// of the input where a block header should be as the end of the frame, so a frame cut in its
/// last block header or EndMark would pass as complete. A complete frame is read to its
/// EndMark (and checksum) and never sees the end of the input.
struct Spy<R> {
    inner: R,
    eof: bool,
}

impl<R: Read> Read for Spy<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.eof |= n == 0 && !buf.is_empty();
        Ok(n)
    }
}

enum State<R: Read> {
    /// At a frame boundary; `pending` is a magic number already read (a legacy frame ends
    /// where the next frame's magic appears in place of a block size).
    Between(R, Option<[u8; 4]>),
    /// Inside a frame (its magic, already read, is replayed to the decoder).
    In(Box<Framed<R>>),
    /// Inside a legacy frame: decoded bytes of the current block and how many were returned.
    Legacy {
        r: R,
        out: Vec<u8>,
        at: usize,
    },
    Done,
    /// Only transiently, while moving between states.
    Poisoned,
}

pub struct Lz4Frames<R: Read> {
    state: State<R>,
    /// A complete frame has been read (after one, undecodable data ends the stream).
    seen_frame: bool,
}

impl<R: Read> Lz4Frames<R> {
    pub fn new(inner: R) -> Self {
        Lz4Frames { state: State::Between(inner, None), seen_frame: false }
    }
}

/// Reads a 4-byte little-endian word; None at a clean end of input.
fn read_word<R: Read>(r: &mut R) -> io::Result<Option<[u8; 4]>> {
    let mut w = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        match r.read(&mut w[n..]) {
            Ok(0) if n == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated frame header"));
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(w))
}

/// Decoded again from the start when a run resumes (the default unit).
impl<R: Read> crate::archive::Skip for Lz4Frames<R> {}

impl<R: Read> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let state = std::mem::replace(&mut self.state, State::Poisoned);
            let step = match state {
                State::Done => {
                    self.state = State::Done;
                    Some(0)
                }
                State::Poisoned => {
                    return Err(io::Error::other("an earlier error stopped the decoder"));
                }
                State::In(d) => self.in_frame(d, buf)?,
                State::Legacy { r, out, at } => self.in_legacy(r, out, at, buf)?,
                State::Between(r, pending) => self.between(r, pending)?,
            };
            if let Some(n) = step {
                return Ok(n);
            }
        }
    }
}

/// Each state's step: Some(n) when `buf` got `n` bytes (0: the end), None to go on from the
/// state it left.
impl<R: Read> Lz4Frames<R> {
    /// Inside a frame: its decoded bytes, then, at its end mark, the next frame.
    fn in_frame(&mut self, mut d: Box<Framed<R>>, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let n = d.read(buf)?;
        if n > 0 || buf.is_empty() {
            self.state = State::In(d);
            return Ok(Some(n));
        }
        let (_magic, spy) = d.into_inner().into_inner();
        if spy.eof {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "frame without its end mark"));
        }
        self.seen_frame = true;
        self.state = State::Between(spy.inner, None);
        Ok(None)
    }

    /// Inside a legacy frame: the current block's decoded bytes, then the next block (its
    /// compressed size), or a new frame's magic, or the end.
    fn in_legacy(
        &mut self,
        mut r: R,
        mut out: Vec<u8>,
        at: usize,
        buf: &mut [u8],
    ) -> io::Result<Option<usize>> {
        if at < out.len() {
            let n = buf.len().min(out.len() - at);
            buf[..n].copy_from_slice(&out[at..at + n]);
            self.state = State::Legacy { r, out, at: at + n };
            return Ok(Some(n));
        }
        let Some(word) = read_word(&mut r)? else {
            self.state = State::Done;
            return Ok(Some(0));
        };
        let size = u32::from_le_bytes(word);
        if size == LZ4_MAGIC || size == LEGACY_MAGIC || size & 0xFFFF_FFF0 == 0x184D_2A50 {
            self.seen_frame = true;
            self.state = State::Between(r, Some(word));
            return Ok(None);
        }
        let size = size as usize;
        if size > LEGACY_BOUND {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("legacy block of {size} bytes is larger than any valid one"),
            ));
        }
        let mut block = vec![0u8; size];
        r.read_exact(&mut block)?;
        out.resize(LEGACY_BLOCK, 0);
        let n = lz4_flex::block::decompress_into(&block, &mut out)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        out.truncate(n);
        self.state = State::Legacy { r, out, at: 0 };
        Ok(None)
    }

    /// At a frame boundary (`pending`: the magic already read): a frame, a legacy frame, a
    /// skippable frame passed over, the end, or what follows the last frame.
    fn between(&mut self, mut r: R, pending: Option<[u8; 4]>) -> io::Result<Option<usize>> {
        let word = match pending {
            Some(w) => Some(w),
            None => read_word(&mut r)?,
        };
        let Some(word) = word else {
            self.state = State::Done;
            return Ok(Some(0));
        };
        let magic = u32::from_le_bytes(word);
        if magic == LZ4_MAGIC {
            let replay = Cursor::new(word).chain(Spy { inner: r, eof: false });
            self.state = State::In(Box::new(FrameDecoder::new(replay)));
        } else if magic == LEGACY_MAGIC {
            self.state = State::Legacy { r, out: Vec::new(), at: 0 };
        } else if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            let truncated =
                || io::Error::new(io::ErrorKind::UnexpectedEof, "truncated skippable frame");
            let size = u32::from_le_bytes(read_word(&mut r)?.ok_or_else(truncated)?) as u64;
            let skipped = io::copy(&mut (&mut r).take(size), &mut io::sink())?;
            if skipped < size {
                return Err(truncated());
            }
            self.state = State::Between(r, None);
        } else if self.seen_frame {
            // `lz4 -d` ignores undecodable data after a complete frame.
            self.state = State::Done;
            return Ok(Some(0));
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not an LZ4 frame (magic {magic:#010x})"),
            ));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn frame(data: &[u8]) -> Vec<u8> {
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn concatenated_and_skippable_frames() {
        let mut s = vec![0x5a, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3];
        s.extend(frame(b"hello "));
        s.extend([0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0]);
        s.extend(frame(b"world"));
        let mut out = String::new();
        Lz4Frames::new(&s[..]).read_to_string(&mut out).unwrap();
        assert_eq!(out, "hello world");
    }

    #[test]
    fn truncation_is_an_error_and_trailing_data_is_ignored() {
        let f = frame(b"hello");
        for cut in 1..f.len() {
            assert!(
                Lz4Frames::new(&f[..cut]).read_to_end(&mut Vec::new()).is_err(),
                "cut at {cut}"
            );
        }
        assert!(Lz4Frames::new(&f[..6]).read_to_end(&mut Vec::new()).is_err());
        assert!(Lz4Frames::new(&f[..f.len() - 6]).read_to_end(&mut Vec::new()).is_err());
        assert!(Lz4Frames::new(&b"junkjunk"[..]).read_to_end(&mut Vec::new()).is_err());
        let mut g = f.clone();
        g.extend(b"junk");
        let mut out = Vec::new();
        Lz4Frames::new(&g[..]).read_to_end(&mut out).unwrap();
        assert_eq!(out, b"hello");
    }

    #[test]
    fn legacy_frames() {
        let block = lz4_flex::block::compress(b"legacy data");
        let mut s = LEGACY_MAGIC.to_le_bytes().to_vec();
        s.extend((block.len() as u32).to_le_bytes());
        s.extend(&block);
        s.extend(frame(b" then modern"));
        let mut out = String::new();
        Lz4Frames::new(&s[..]).read_to_string(&mut out).unwrap();
        assert_eq!(out, "legacy data then modern");
        let mut bad = LEGACY_MAGIC.to_le_bytes().to_vec();
        bad.extend(u32::MAX.to_le_bytes());
        assert!(Lz4Frames::new(&bad[..]).read_to_end(&mut Vec::new()).is_err());
    }
}
