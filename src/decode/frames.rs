//! zstd frame boundaries without decompressing (RFC 8878 §3.1).
//!
//! A zstd stream is a sequence of frames, each independently decodable: a frame header
//! (magic 0xFD2FB528, a descriptor, an optional window descriptor, dictionary id and content
//! size), then blocks, each with a 3-byte header (`Last_Block` in bit 0, `Block_Type` in bits
//! 1-2, `Block_Size` in bits 3-23) followed by `Block_Size` bytes (one byte for an RLE block),
//! then a 4-byte content checksum when the descriptor says so. Skippable frames (magic
//! 0x184D2A50..=0x184D2A5F, a 4-byte size, then that many bytes) may sit between frames.
//!
//! `Walker` is fed the compressed stream in pieces of any size and reports where each frame
//! starts and ends, so frames can be handed to different threads. It never looks inside a
//! block, so it costs a few instructions per 128 KiB block.

use std::fmt;

/// zstd frame magic, little-endian.
const MAGIC: u32 = 0xFD2F_B528;

/// Largest block (RFC 8878 §3.1.1.2.4: Block_Maximum_Size is at most 128 KiB).
const MAX_BLOCK: u64 = 128 << 10;

/// The longest frame header: magic 4, descriptor 1, window 1, dictionary id 4, content size 8.
const MAX_HEADER: usize = 18;

/// What a frame header declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Window size in bytes: the memory the decoder needs for back-references.
    pub window: u64,
    /// Frame_Content_Size, when present: the decoded size.
    pub content_size: Option<u64>,
    pub checksum: bool,
    pub dictionary_id: u32,
}

/// Where the walk is in the stream.
#[derive(Clone, Copy, Debug)]
enum State {
    /// Between frames: the next 4 bytes are a magic number (or the stream ends).
    Magic,
    /// Inside a frame header of `len` bytes (known once the descriptor is in).
    Header,
    BlockHeader,
    /// Inside a block's content.
    Body {
        left: u64,
        last: bool,
    },
    Checksum {
        left: u64,
    },
    /// Inside a skippable frame's content.
    Skip {
        left: u64,
    },
}

/// Something the walk found, at an absolute offset in the compressed stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A frame starts at `offset` (its magic number).
    Start { offset: u64, header: FrameHeader },
    /// The frame that started last ends just before `offset`.
    End { offset: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkError {
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "archive offset {}: zstd: {}", self.offset, self.what)
    }
}

pub struct Walker {
    state: State,
    /// Header bytes gathered so far (headers may straddle pieces).
    carry: [u8; MAX_HEADER],
    carry_len: usize,
    /// Offset of the next byte to be fed.
    offset: u64,
    /// Offset of the structure being gathered in `carry`.
    started: u64,
    /// Frames whose window exceeds this are refused (--max-window).
    max_window: u64,
    /// The current frame ends with a 4-byte checksum.
    checksum_pending: bool,
}

impl Walker {
    pub fn new(max_window: u64) -> Walker {
        Walker {
            state: State::Magic,
            carry: [0; MAX_HEADER],
            carry_len: 0,
            offset: 0,
            started: 0,
            max_window,
            checksum_pending: false,
        }
    }

    /// Offset of the next byte to be fed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// True when the walk is between frames (the stream may end here).
    pub fn between_frames(&self) -> bool {
        matches!(self.state, State::Magic) && self.carry_len == 0
    }

    /// True inside a zstd frame, past its magic number (not in a skippable frame).
    pub fn in_frame(&self) -> bool {
        matches!(
            self.state,
            State::Header | State::BlockHeader | State::Body { .. } | State::Checksum { .. }
        )
    }

    fn fail<T>(&self, what: impl Into<String>) -> Result<T, WalkError> {
        Err(WalkError { offset: self.started, what: what.into() })
    }

    /// Takes up to `need` bytes into `carry`; true once it holds `need`.
    fn gather(&mut self, data: &[u8], at: &mut usize, need: usize) -> bool {
        let take = (need - self.carry_len).min(data.len() - *at);
        self.carry[self.carry_len..self.carry_len + take].copy_from_slice(&data[*at..*at + take]);
        self.carry_len += take;
        *at += take;
        self.offset += take as u64;
        self.carry_len == need
    }

    /// Walks `data`, the next piece of the stream, pushing what it finds onto `events`.
    pub fn feed(&mut self, data: &[u8], events: &mut Vec<Event>) -> Result<(), WalkError> {
        let mut at = 0;
        while at < data.len() {
            match self.state {
                State::Magic => {
                    if self.carry_len == 0 {
                        self.started = self.offset;
                    }
                    if !self.gather(data, &mut at, 4) {
                        break;
                    }
                    let magic = u32::from_le_bytes(self.carry[..4].try_into().expect("4 bytes"));
                    if magic == MAGIC {
                        self.state = State::Header;
                    } else if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                        // A skippable frame: its size comes next.
                        if !self.gather_skippable(data, &mut at) {
                            self.state = State::Skip { left: u64::MAX };
                            break;
                        }
                    } else {
                        return self.fail("not a zstd frame (unknown magic number)");
                    }
                }
                State::Skip { left: u64::MAX } => {
                    if !self.gather_skippable(data, &mut at) {
                        break;
                    }
                }
                State::Header => {
                    // The descriptor (byte 5) says how long the rest is.
                    if self.carry_len < 5 && !self.gather(data, &mut at, 5) {
                        break;
                    }
                    let len = header_len(self.carry[4]);
                    if !self.gather(data, &mut at, len) {
                        break;
                    }
                    let header = self.parse_header(len)?;
                    events.push(Event::Start { offset: self.started, header });
                    self.carry_len = 0;
                    self.state = State::BlockHeader;
                }
                State::BlockHeader => {
                    if self.carry_len == 0 {
                        self.started = self.offset;
                    }
                    if !self.gather(data, &mut at, 3) {
                        break;
                    }
                    let h = u32::from(self.carry[0])
                        | u32::from(self.carry[1]) << 8
                        | u32::from(self.carry[2]) << 16;
                    self.carry_len = 0;
                    let last = h & 1 == 1;
                    let size = u64::from(h >> 3);
                    let left = match (h >> 1) & 3 {
                        0 | 2 if size > MAX_BLOCK => {
                            return self.fail(format!("block of {size} bytes (corrupt frame)"));
                        }
                        0 | 2 => size,
                        1 => 1,
                        _ => return self.fail("reserved block type (corrupt frame)"),
                    };
                    self.state = State::Body { left, last };
                }
                State::Body { left, last } => {
                    let take = left.min((data.len() - at) as u64);
                    at += take as usize;
                    self.offset += take;
                    let left = left - take;
                    if left > 0 {
                        self.state = State::Body { left, last };
                    } else if !last {
                        self.state = State::BlockHeader;
                    } else if self.checksum_pending {
                        self.state = State::Checksum { left: 4 };
                    } else {
                        self.end_frame(events);
                    }
                }
                State::Checksum { left } => {
                    let take = left.min((data.len() - at) as u64);
                    at += take as usize;
                    self.offset += take;
                    if left == take {
                        self.end_frame(events);
                    } else {
                        self.state = State::Checksum { left: left - take };
                    }
                }
                State::Skip { left } => {
                    let take = left.min((data.len() - at) as u64);
                    at += take as usize;
                    self.offset += take;
                    if left == take {
                        self.state = State::Magic;
                    } else {
                        self.state = State::Skip { left: left - take };
                    }
                }
            }
        }
        Ok(())
    }

    /// Gathers a skippable frame's 8-byte header; true once the walk is inside its content.
    fn gather_skippable(&mut self, data: &[u8], at: &mut usize) -> bool {
        if !self.gather(data, at, 8) {
            return false;
        }
        let size = u32::from_le_bytes(self.carry[4..8].try_into().expect("4 bytes"));
        self.carry_len = 0;
        self.state = if size == 0 { State::Magic } else { State::Skip { left: u64::from(size) } };
        true
    }

    fn end_frame(&mut self, events: &mut Vec<Event>) {
        events.push(Event::End { offset: self.offset });
        self.state = State::Magic;
    }

    fn parse_header(&mut self, len: usize) -> Result<FrameHeader, WalkError> {
        let h = &self.carry[..len];
        let fhd = h[4];
        if fhd & 0x08 != 0 {
            return self.fail("reserved bit set in the frame header (corrupt frame)");
        }
        let single = fhd & 0x20 != 0;
        let checksum = fhd & 0x04 != 0;
        let mut at = 5;
        let mut window = 0;
        if !single {
            let wd = h[at];
            at += 1;
            let exponent = u32::from(wd >> 3);
            let mantissa = u64::from(wd & 7);
            let base = 1u64 << (10 + exponent);
            window = base + base / 8 * mantissa;
        }
        let did_len = [0, 1, 2, 4][usize::from(fhd & 3)];
        let dictionary_id = le(&h[at..at + did_len]) as u32;
        at += did_len;
        let fcs_len = fcs_len(fhd);
        let content_size = (fcs_len > 0).then(|| {
            let v = le(&h[at..at + fcs_len]);
            if fcs_len == 2 { v + 256 } else { v }
        });
        if single {
            window = content_size.unwrap_or(0);
        }
        self.checksum_pending = checksum;
        if window > self.max_window {
            return self.fail(format!(
                "the frame needs a {window}-byte window, more than --max-window allows (raise --max-window, up to 2G)"
            ));
        }
        Ok(FrameHeader { window, content_size, checksum, dictionary_id })
    }
}

fn fcs_len(fhd: u8) -> usize {
    match fhd >> 6 {
        0 if fhd & 0x20 != 0 => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    }
}

/// The whole frame header's length (magic included) from its descriptor byte.
fn header_len(fhd: u8) -> usize {
    let window = if fhd & 0x20 != 0 { 0 } else { 1 };
    4 + 1 + window + [0, 1, 2, 4][usize::from(fhd & 3)] + fcs_len(fhd)
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |v, &x| v << 8 | u64::from(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of various shapes, with the offsets where each starts and ends.
    fn sample() -> (Vec<u8>, Vec<(u64, u64)>) {
        let mut out = Vec::new();
        let mut bounds = Vec::new();
        let mut frame = |out: &mut Vec<u8>, data: &[u8], level: i32, checksum: bool, size: bool| {
            let mut e = zstd::stream::Encoder::new(Vec::new(), level).unwrap();
            e.include_checksum(checksum).unwrap();
            e.include_contentsize(size).unwrap();
            if size {
                e.set_pledged_src_size(Some(data.len() as u64)).unwrap();
            }
            std::io::Write::write_all(&mut e, data).unwrap();
            let f = e.finish().unwrap();
            bounds.push((out.len() as u64, (out.len() + f.len()) as u64));
            out.extend_from_slice(&f);
        };
        let mut x = 1u64;
        let random: Vec<u8> = (0..300_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        frame(&mut out, &random, 3, true, true); // raw blocks
        frame(&mut out, &vec![0u8; 1 << 20], 3, false, false); // RLE blocks
        // A skippable frame between frames.
        out.extend_from_slice(&[0x5a, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3]);
        frame(&mut out, b"", 1, true, true);
        let text: Vec<u8> =
            (0..200_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        frame(&mut out, &text, 19, true, false);
        frame(&mut out, &text[..300], 1, false, true); // single segment
        (out, bounds)
    }

    fn walk(data: &[u8], piece: usize) -> Result<Vec<(u64, u64)>, WalkError> {
        let mut w = Walker::new(1 << 31);
        let mut events = Vec::new();
        for p in data.chunks(piece) {
            w.feed(p, &mut events)?;
        }
        assert!(w.between_frames());
        let mut frames = Vec::new();
        let mut start = None;
        for e in events {
            match e {
                Event::Start { offset, .. } => start = Some(offset),
                Event::End { offset } => frames.push((start.take().unwrap(), offset)),
            }
        }
        Ok(frames)
    }

    #[test]
    fn finds_every_frame_in_pieces_of_any_size() {
        let (data, bounds) = sample();
        for piece in [1, 2, 3, 7, 511, 4096, 1 << 20] {
            assert_eq!(walk(&data, piece).unwrap(), bounds, "pieces of {piece}");
        }
    }

    #[test]
    fn headers() {
        let mut w = Walker::new(1 << 31);
        let mut ev = Vec::new();
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(true).unwrap();
        e.set_pledged_src_size(Some(5_000_000)).unwrap();
        std::io::Write::write_all(&mut e, &vec![7u8; 5_000_000]).unwrap();
        w.feed(&e.finish().unwrap(), &mut ev).unwrap();
        let Event::Start { header, .. } = ev[0] else { panic!() };
        assert_eq!(header.content_size, Some(5_000_000));
        assert!(header.checksum);
        assert!(header.window >= 1 << 10 && header.window <= 8 << 20, "{header:?}");
    }

    #[test]
    fn refusals() {
        // A window of 2^31 refused under a 1 MiB limit, before anything is decoded.
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, (31 - 10) << 3, 0, 0, 0];
        let mut w = Walker::new(1 << 20);
        let err = w.feed(&frame, &mut Vec::new()).unwrap_err();
        assert!(err.what.contains("--max-window"), "{err}");
        assert_eq!(err.offset, 0);
        // Garbage where a frame should start.
        let (mut data, bounds) = sample();
        data.extend_from_slice(b"garbage!");
        let err = walk(&data, 4096).unwrap_err();
        assert_eq!(err.offset, bounds.last().unwrap().1);
        // A reserved block type.
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0, 0x07, 0, 0];
        let err = Walker::new(1 << 31).feed(&frame, &mut Vec::new()).unwrap_err();
        assert!(err.what.contains("reserved block type"), "{err}");
    }
}
