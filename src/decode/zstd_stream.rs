//! The streaming zstd decoder (`--threads 1`, and where the frame-parallel one cannot start):
//! the loop the zstd crate's `stream::read::Decoder` runs (one `decompress_stream` call per
//! read, straight into the caller's buffer, the input borrowed from the `Source`), with the
//! frame boundaries it hides kept: each frame starts at a known input byte and decoded offset,
//! where a resumed run (src/resume/) can begin decoding again.

use std::io::{self, BufRead, Read};

use zstd::zstd_safe::{DCtx, DParameter, InBuffer, OutBuffer, get_error_name};

use crate::archive::{Skip, UnitStart, Units};

pub struct ZstdStream<R> {
    input: R,
    dctx: DCtx<'static>,
    /// Input bytes consumed, from where the input begins in the archive.
    consumed: u64,
    /// Decoded bytes handed out, from the start's.
    delivered: u64,
    /// The number of the next zstd frame (skippable frames are not counted, as the
    /// frame-parallel decoder does not count them).
    index: u64,
    /// Inside a frame (zstd has not finished it): the input may not end here.
    in_frame: bool,
    /// The frame being decoded is a skippable one.
    skippable: bool,
    units: Units,
}

impl<R: BufRead> ZstdStream<R> {
    /// A decoder of `input`, which begins at `start` (a frame's start; `UnitStart::START` for
    /// the whole archive), refusing windows over 2^`max_window_log`.
    pub fn new(input: R, max_window_log: u32, start: UnitStart) -> io::Result<ZstdStream<R>> {
        let mut dctx = DCtx::try_create()
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "cannot allocate"))?;
        dctx.set_parameter(DParameter::WindowLogMax(max_window_log))
            .map_err(|code| io::Error::other(get_error_name(code)))?;
        Ok(ZstdStream {
            input,
            dctx,
            consumed: start.compressed,
            delivered: start.decoded,
            index: start.index,
            in_frame: false,
            skippable: false,
            units: Units::default(),
        })
    }
}

/// A skippable frame's magic number (0x184D2A50..=0x184D2A5F, little-endian).
fn skippable(b: &[u8]) -> bool {
    b.len() >= 4 && b[0] & 0xf0 == 0x50 && b[1..4] == [0x2a, 0x4d, 0x18]
}

impl<R: BufRead> Read for ZstdStream<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let data = self.input.fill_buf()?;
            if !self.in_frame && !data.is_empty() {
                // A frame begins here: decoding can begin again at it.
                self.skippable = skippable(data);
                let (index, compressed, decoded) = (self.index, self.consumed, self.delivered);
                self.units.entered(UnitStart { index, compressed, decoded });
            }
            let at_end = data.is_empty();
            let (hint, used, made) = {
                let mut src = InBuffer::around(data);
                let mut dst = OutBuffer::around(&mut *buf);
                let hint = self
                    .dctx
                    .decompress_stream(&mut dst, &mut src)
                    .map_err(|code| io::Error::other(get_error_name(code)))?;
                (hint, src.pos(), dst.pos())
            };
            self.input.consume(used);
            self.consumed += used as u64;
            if used > 0 || made > 0 {
                self.in_frame = true;
            }
            if hint == 0 && self.in_frame {
                // zstd finished the frame and flushed everything it decoded.
                self.in_frame = false;
                self.index += u64::from(!self.skippable);
            }
            if made > 0 {
                self.delivered += made as u64;
                return Ok(made);
            }
            if at_end {
                // zstd had nothing more to give: the end of the input, between frames or not.
                return match self.in_frame {
                    true => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "incomplete frame")),
                    false => Ok(0),
                };
            }
            if used == 0 && hint > 0 {
                // zstd takes input whenever it has room for output; never loop on none taken.
                return Err(io::Error::other("the decoder made no progress"));
            }
        }
    }
}

impl<R: BufRead> Skip for ZstdStream<R> {
    fn unit_at_or_before(&self, t: u64) -> Option<UnitStart> {
        self.units.at_or_before(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(data: &[u8]) -> Vec<u8> {
        zstd::bulk::compress(data, 3).unwrap()
    }

    fn part(i: usize, n: usize) -> Vec<u8> {
        (0..n).map(|j| (j * 31 + i * 7) as u8).collect()
    }

    /// Reads `r` to its end in reads of `chunk` bytes.
    fn drain(r: &mut impl Read, chunk: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            match r.read(&mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Every frame is a unit, and decoding begun again at one gives the rest of the stream.
    #[test]
    fn frames_are_units_to_begin_again_at() {
        let parts: Vec<Vec<u8>> = (0..5).map(|i| part(i, 3000 + i * 1000)).collect();
        let mut archive = Vec::new();
        // A skippable frame between two frames, as some tools write.
        for (i, p) in parts.iter().enumerate() {
            if i == 2 {
                archive.extend_from_slice(&[0x5e, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3]);
            }
            archive.extend(frame(p));
        }
        let want: Vec<u8> = parts.concat();
        let src = io::BufReader::with_capacity(700, &archive[..]);
        let mut d = ZstdStream::new(src, 27, UnitStart::START).unwrap();
        assert_eq!(drain(&mut d, 1000).unwrap(), want);
        for (k, p) in parts.iter().enumerate() {
            let t = parts[..k].iter().map(Vec::len).sum::<usize>() as u64;
            let u = d.unit_at_or_before(t + 5).unwrap();
            assert_eq!(u.decoded, t, "frame {k}");
            assert_eq!(u.index, k as u64);
            let rest = &archive[u.compressed as usize..];
            let mut again = ZstdStream::new(io::BufReader::new(rest), 27, u).unwrap();
            let got = drain(&mut again, 4096).unwrap();
            assert_eq!(got, want[t as usize..], "from frame {k}");
            assert_eq!(again.unit_at_or_before(t), Some(u));
            assert!(p.len() > 5);
        }
    }

    #[test]
    fn a_cut_frame_is_an_unexpected_end() {
        let f = frame(&part(0, 10_000));
        let mut d =
            ZstdStream::new(io::BufReader::new(&f[..f.len() - 3]), 27, UnitStart::START).unwrap();
        let e = drain(&mut d, 512).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let mut garbage = f.clone();
        garbage.extend_from_slice(b"not a frame");
        let mut d =
            ZstdStream::new(io::BufReader::new(&garbage[..]), 27, UnitStart::START).unwrap();
        assert!(drain(&mut d, 512).is_err());
    }
}
