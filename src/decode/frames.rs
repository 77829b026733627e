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
//! block, so it costs a few instructions per 128 KiB block. Positions are given within the
//! piece being walked, and a frame header that began in an earlier piece comes with the bytes
//! of it that piece held (`Event::Start::carried`): whoever routes the pieces' bytes to frames
//! needs no arithmetic on stream offsets, and a header cut anywhere by the reads still reaches
//! its frame's decoder whole.

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
    /// Inside a frame header (its length is known once the descriptor is in).
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
    /// Inside a skippable frame's 8-byte header (magic, then size).
    SkipHeader,
    /// Inside a skippable frame's content.
    Skip {
        left: u64,
    },
}

/// The first bytes of a frame header that arrived in earlier pieces than the one where the
/// header ends: at most MAX_HEADER - 1.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    bytes: [u8; MAX_HEADER],
    len: u8,
}

impl Carried {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for Carried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Carried({:x?})", self.bytes())
    }
}

/// Something the walk found in the piece being walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A frame starts at `offset` of the stream (its magic number); its header is complete.
    /// Its bytes in this piece begin at `at`; when its header began in an earlier piece, `at`
    /// is 0 and `carried` holds the header's bytes from the earlier pieces (else it is empty).
    Start { offset: u64, at: usize, header: FrameHeader, carried: Carried },
    /// The frame that started last ends just before `at` in this piece (`offset` in the
    /// stream).
    End { offset: u64, at: usize },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkError {
    /// Where the structure that failed begins in the stream,
    pub offset: u64,
    /// and in the piece being walked (0 when it began in an earlier one).
    pub at: usize,
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
        Walker::at(max_window, 0)
    }

    /// A walker whose first byte fed is at `offset` of the stream, a frame's start (a resumed
    /// run reads the archive from there: src/resume/), so its events and errors name the
    /// archive's own offsets.
    pub fn at(max_window: u64, offset: u64) -> Walker {
        Walker {
            state: State::Magic,
            carry: [0; MAX_HEADER],
            carry_len: 0,
            offset,
            started: offset,
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

    fn fail<T>(&self, what: impl Into<String>) -> Result<T, WalkError> {
        Err(WalkError { offset: self.started, at: 0, what: what.into() })
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

    /// Takes up to `left` bytes of content (a block's, a checksum, a skippable frame's);
    /// returns what is left of it.
    fn pass(&mut self, data: &[u8], at: &mut usize, left: u64) -> u64 {
        let take = left.min((data.len() - *at) as u64);
        *at += take as usize;
        self.offset += take;
        left - take
    }

    /// Walks `data`, the next piece of the stream, from `*at` up to and including the next
    /// event, and leaves `*at` just after it; None once the piece is used up. Call it again
    /// with the same piece and `*at` until then: the walker counts every byte it is given.
    pub fn next(&mut self, data: &[u8], at: &mut usize) -> Result<Option<Event>, WalkError> {
        // The stream offset of `data[0]`.
        let base = self.offset - *at as u64;
        self.walk(data, at, base).map_err(|mut e| {
            e.at = e.offset.checked_sub(base).map_or(0, |k| k as usize);
            e
        })
    }

    fn walk(&mut self, data: &[u8], at: &mut usize, base: u64) -> Result<Option<Event>, WalkError> {
        loop {
            if let Some(end) = self.ended(*at) {
                return Ok(Some(end));
            }
            if *at == data.len() {
                return Ok(None);
            }
            match self.state {
                State::Magic => {
                    if self.carry_len == 0 {
                        self.started = self.offset;
                    }
                    if !self.gather(data, at, 4) {
                        return Ok(None);
                    }
                    let magic = u32::from_le_bytes(self.carry[..4].try_into().expect("4 bytes"));
                    if magic == MAGIC {
                        self.state = State::Header;
                    } else if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                        self.state = State::SkipHeader;
                    } else {
                        return self.fail("not a zstd frame (unknown magic number)");
                    }
                }
                State::SkipHeader => {
                    if !self.gather(data, at, 8) {
                        return Ok(None);
                    }
                    let size = u32::from_le_bytes(self.carry[4..8].try_into().expect("4 bytes"));
                    self.carry_len = 0;
                    self.state = State::Skip { left: u64::from(size) };
                }
                State::Header => {
                    // The descriptor (byte 5) says how long the rest is.
                    if self.carry_len < 5 && !self.gather(data, at, 5) {
                        return Ok(None);
                    }
                    let len = header_len(self.carry[4]);
                    if !self.gather(data, at, len) {
                        return Ok(None);
                    }
                    let header = self.parse_header(len)?;
                    return Ok(Some(self.frame_started(base, header)));
                }
                State::BlockHeader => {
                    if self.carry_len == 0 {
                        self.started = self.offset;
                    }
                    if !self.gather(data, at, 3) {
                        return Ok(None);
                    }
                    let h = u32::from(self.carry[0])
                        | u32::from(self.carry[1]) << 8
                        | u32::from(self.carry[2]) << 16;
                    self.carry_len = 0;
                    match block_body(h) {
                        Ok((left, last)) => self.state = State::Body { left, last },
                        Err(what) => return self.fail(what),
                    }
                }
                State::Body { left, last } => {
                    self.state = State::Body { left: self.pass(data, at, left), last };
                }
                State::Checksum { left } => {
                    self.state = State::Checksum { left: self.pass(data, at, left) };
                }
                State::Skip { left } => {
                    self.state = State::Skip { left: self.pass(data, at, left) };
                }
            }
        }
    }

    /// The ends that need no more bytes: a block's, then the checksum's or the frame's (an
    /// `End` event, the walk `at` in the piece), or a skippable frame's.
    fn ended(&mut self, at: usize) -> Option<Event> {
        match self.state {
            State::Body { left: 0, last: false } => self.state = State::BlockHeader,
            State::Body { left: 0, last: true } if self.checksum_pending => {
                self.state = State::Checksum { left: 4 };
            }
            State::Body { left: 0, last: true } | State::Checksum { left: 0 } => {
                self.state = State::Magic;
                return Some(Event::End { offset: self.offset, at });
            }
            State::Skip { left: 0 } => self.state = State::Magic,
            _ => {}
        }
        None
    }

    /// The frame whose `header` was just read, as an event: it began `len` bytes back, in this
    /// piece (which starts at stream offset `base`), or partly in earlier ones, whose share of
    /// it is in `carry`.
    fn frame_started(&mut self, base: u64, header: FrameHeader) -> Event {
        let (at, carried) = match self.started.checked_sub(base) {
            Some(k) => (k as usize, 0),
            None => (0, (base - self.started) as usize),
        };
        let mut c = Carried { bytes: [0; MAX_HEADER], len: carried as u8 };
        c.bytes[..carried].copy_from_slice(&self.carry[..carried]);
        self.carry_len = 0;
        self.state = State::BlockHeader;
        Event::Start { offset: self.started, at, header, carried: c }
    }

    /// Walks all of `data`, pushing what it finds onto `events`.
    #[cfg(test)]
    pub fn feed(&mut self, data: &[u8], events: &mut Vec<Event>) -> Result<(), WalkError> {
        let mut at = 0;
        while let Some(e) = self.next(data, &mut at)? {
            events.push(e);
        }
        Ok(())
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

/// A block header (RFC 8878 3.1.1.2, its 3 bytes as a little-endian number): the bytes of its
/// body that follow (an RLE block's is one byte) and whether it is the frame's last block. Err
/// for a block larger than `MAX_BLOCK` or of the reserved type.
fn block_body(h: u32) -> Result<(u64, bool), String> {
    let last = h & 1 == 1;
    let size = u64::from(h >> 3);
    let left = match (h >> 1) & 3 {
        0 | 2 if size > MAX_BLOCK => return Err(format!("block of {size} bytes (corrupt frame)")),
        0 | 2 => size,
        1 => 1,
        _ => return Err("reserved block type (corrupt frame)".into()),
    };
    Ok((left, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Block headers by type: raw and compressed carry their size, RLE one byte, the reserved
    /// type and a block over 128 KiB are corrupt.
    #[test]
    fn block_headers() {
        let h = |size: u32, kind: u32, last: bool| size << 3 | kind << 1 | u32::from(last);
        assert_eq!(block_body(h(100, 0, false)), Ok((100, false)));
        assert_eq!(block_body(h(7, 2, true)), Ok((7, true)));
        assert_eq!(block_body(h(5000, 1, false)), Ok((1, false)));
        assert!(block_body(h(1, 3, false)).is_err());
        assert!(block_body(h(128 << 10, 2, false)).is_ok());
        assert!(block_body(h((128 << 10) + 1, 0, false)).is_err());
    }

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
                Event::End { offset, .. } => frames.push((start.take().unwrap(), offset)),
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

    /// Each frame's bytes, as a router rebuilds them from the events of `data` read in pieces
    /// cut at `cuts`: the carried start of its header, then its runs of each piece.
    fn frames_from_events(data: &[u8], cuts: &[usize]) -> Vec<(u64, Vec<u8>)> {
        let mut w = Walker::new(1 << 31);
        let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut open = false;
        let mut from = 0;
        for pair in cuts.windows(2) {
            let piece = &data[pair[0]..pair[1]];
            let mut at = 0;
            let mut routed = 0;
            while let Some(e) = w.next(piece, &mut at).unwrap() {
                match e {
                    Event::Start { offset, at: start, carried, .. } => {
                        assert!(!open);
                        assert!(carried.bytes().is_empty() || start == 0, "{e:?}");
                        frames.push((offset, carried.bytes().to_vec()));
                        open = true;
                        routed = start;
                    }
                    Event::End { offset, at: end } => {
                        assert!(open && end >= routed, "{e:?}");
                        assert_eq!(offset, (pair[0] + end) as u64);
                        frames.last_mut().unwrap().1.extend_from_slice(&piece[routed..end]);
                        open = false;
                    }
                }
                assert_eq!(w.offset(), (pair[0] + at) as u64);
            }
            if open {
                frames.last_mut().unwrap().1.extend_from_slice(&piece[routed..]);
            }
            from = pair[1];
        }
        assert_eq!(from, data.len());
        assert!(w.between_frames() && !open);
        frames
    }

    /// Wherever the reads end, inside a frame header, a block header, a checksum or a
    /// skippable frame, each frame's bytes are found whole, and nothing else.
    #[test]
    fn every_frame_whole_wherever_the_reads_end() {
        let (data, bounds) = sample();
        let want: Vec<(u64, Vec<u8>)> =
            bounds.iter().map(|&(s, e)| (s, data[s as usize..e as usize].to_vec())).collect();
        // Reads of every small size, and cuts at every byte near each frame's start.
        for piece in 1..=32 {
            let cuts: Vec<usize> = (0..data.len()).step_by(piece).chain([data.len()]).collect();
            assert!(frames_from_events(&data, &cuts) == want, "reads of {piece}");
        }
        for &(start, _) in &bounds {
            // From inside the skippable frame before one of them to past the block header.
            for k in 0..=36 {
                let cut = (start as usize + k).saturating_sub(14).min(data.len());
                let mut cuts = vec![0, cut, (cut + 5).min(data.len()), data.len()];
                cuts.dedup();
                assert!(frames_from_events(&data, &cuts) == want, "cut at {cut}");
            }
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
