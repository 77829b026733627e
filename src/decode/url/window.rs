//! The reorder window: pieces of the archive fetched out of order, held until the reader
//! takes their bytes in order (a plain value, used under the download's lock by the
//! connections and the reader; `shared/` does the locking and the waking).
//!
//! Memory: a ranged piece reserves its whole length when it is made and gives it back as the
//! reader consumes it, so the bytes held never exceed the window and the piece the reader
//! waits for always has its room; a whole answer (one source without ranges) reserves block by
//! block (`reserve_block`). A piece may have two fetchers (a copy of a late head piece from a
//! faster source): each reads its own block, and only the bytes past what has arrived are
//! kept (`publish`: the first copy wins, byte by byte), so a copy costs one block in flight,
//! never a second reservation.

use std::collections::{BTreeMap, VecDeque};

use super::ranges::BLOCK;

/// A connection, as the window knows it.
pub type Conn = u64;

/// Bytes of a block handed to the reader: `block[pos..pos + len]`.
pub struct Chunk {
    pub block: Box<[u8]>,
    pub pos: usize,
    pub len: usize,
}

/// A connection fetching a piece.
#[derive(Clone, Copy, Debug)]
pub struct Fetching {
    pub conn: Conn,
    pub source: usize,
    /// When it asked (seconds since the download started), and the bytes it has brought
    /// since, for its rate.
    pub since: f64,
    pub bytes: u64,
    /// When its last byte came (or when it asked).
    pub last: f64,
}

struct Piece {
    /// One past its last byte (None: a whole answer of unknown length).
    end: Option<u64>,
    /// The bytes `start..filled` arrived.
    filled: u64,
    chunks: VecDeque<Chunk>,
    /// Reserved whole when made (ranged), or block by block (a whole answer).
    reserved: bool,
    /// A whole answer that ended (its length was unknown).
    ended: bool,
    fetchers: Vec<Fetching>,
}

impl Piece {
    fn complete(&self) -> bool {
        self.ended || self.end == Some(self.filled)
    }
}

/// What became of a block a fetcher handed in.
#[derive(Debug, PartialEq, Eq)]
pub enum Published {
    /// `n` new bytes were kept; `complete`: the piece has all its bytes now.
    Kept { n: usize, complete: bool },
    /// Another copy brought these bytes first (or the piece is gone): the fetcher may stop.
    Redundant,
}

/// What the reader finds.
pub enum Take {
    Chunk(Chunk),
    /// The bytes it needs next have not arrived.
    Wait,
    /// The archive ended.
    End,
}

/// The window.
pub struct Window {
    capacity: u64,
    length: Option<u64>,
    used: u64,
    /// The first byte no piece covers.
    next: u64,
    /// The next byte the reader takes.
    reader: u64,
    pieces: BTreeMap<u64, Piece>,
    free: Vec<Box<[u8]>>,
    /// The reader has had the last piece.
    ended: bool,
    /// The reader finished a piece since this was last asked (`head_moved`).
    moved: bool,
}

impl Window {
    /// A window of `capacity` bytes over an archive of `length` bytes read from `from`.
    pub fn new(capacity: u64, length: Option<u64>, from: u64) -> Window {
        Window {
            capacity,
            length,
            used: 0,
            next: from,
            reader: from,
            pieces: BTreeMap::new(),
            free: Vec::new(),
            ended: false,
            moved: false,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes not reserved.
    pub fn free_bytes(&self) -> u64 {
        self.capacity.saturating_sub(self.used)
    }

    pub fn next(&self) -> u64 {
        self.next
    }

    pub fn reader(&self) -> u64 {
        self.reader
    }

    /// Makes the piece `start..end` (`end` None: a whole answer), reserving it whole when
    /// `reserved`. Pieces are made in order: `start` is `next()`.
    pub fn make(&mut self, start: u64, end: Option<u64>, reserved: bool) {
        debug_assert_eq!(start, self.next);
        if reserved && let Some(e) = end {
            self.used += e - start;
        }
        self.next = end.unwrap_or(u64::MAX);
        let piece = Piece {
            end,
            filled: start,
            chunks: VecDeque::new(),
            reserved,
            ended: false,
            fetchers: Vec::new(),
        };
        self.pieces.insert(start, piece);
    }

    /// `f` fetches the piece at `start` from now.
    pub fn attach(&mut self, start: u64, f: Fetching) {
        if let Some(p) = self.pieces.get_mut(&start) {
            p.fetchers.push(f);
        }
    }

    /// `conn` no longer fetches the piece at `start` (done, failed, or beaten by a copy).
    pub fn detach(&mut self, start: u64, conn: Conn) {
        if let Some(p) = self.pieces.get_mut(&start) {
            p.fetchers.retain(|f| f.conn != conn);
        }
    }

    /// Whether the piece at `start` has all its bytes (or is gone: consumed).
    pub fn complete(&self, start: u64) -> bool {
        self.pieces.get(&start).is_none_or(Piece::complete)
    }

    /// A block to read into (reused, or new).
    pub fn block(&mut self) -> Box<[u8]> {
        self.free.pop().unwrap_or_else(|| vec![0u8; BLOCK as usize].into_boxed_slice())
    }

    /// A whole answer's next block: reserves it if the window has room.
    pub fn reserve_block(&mut self) -> bool {
        if self.used + BLOCK > self.capacity {
            return false;
        }
        self.used += BLOCK;
        true
    }

    /// A block not handed in goes back (a fetcher that stopped).
    pub fn give_back(&mut self, block: Box<[u8]>, reserved_block: bool) {
        if reserved_block {
            self.used -= BLOCK;
        }
        self.free.push(block);
    }

    /// `conn` read `got.len` bytes into `got.block` (from its start), the piece at `start`'s
    /// bytes from `at`: the part past what has arrived is kept; the rest (another copy's
    /// bytes) is dropped. `reserved_block`: the block was reserved on its own (a whole
    /// answer's).
    pub fn publish(
        &mut self,
        start: u64,
        conn: Conn,
        at: u64,
        got: Chunk,
        reserved_block: bool,
        now: f64,
    ) -> Published {
        let Chunk { block, len: n, .. } = got;
        let Some(p) = self.pieces.get_mut(&start) else {
            self.give_back(block, reserved_block);
            return Published::Redundant;
        };
        if let Some(f) = p.fetchers.iter_mut().find(|f| f.conn == conn) {
            f.bytes += n as u64;
            if n > 0 {
                f.last = now;
            }
        }
        let end = at + n as u64;
        if n == 0 {
            let complete = p.complete();
            self.give_back(block, reserved_block);
            return Published::Kept { n: 0, complete };
        }
        if end <= p.filled || at > p.filled {
            // Bytes already here (or, never, a gap: a fetcher always continues from where
            // its bytes end, at or before `filled`).
            self.give_back(block, reserved_block);
            return Published::Redundant;
        }
        let skip = (p.filled - at) as usize;
        let kept = n - skip;
        p.chunks.push_back(Chunk { block, pos: skip, len: kept });
        p.filled = end;
        if reserved_block {
            // The block was reserved whole; only its kept bytes stay reserved.
            self.used -= BLOCK - kept as u64;
        }
        Published::Kept { n: kept, complete: p.complete() }
    }

    /// A whole answer ended: its piece is complete as it is.
    pub fn end_whole(&mut self, start: u64) {
        if let Some(p) = self.pieces.get_mut(&start) {
            p.ended = true;
        }
    }

    /// The first piece in the window: the one the reader takes its bytes from.
    pub fn first_start(&self) -> Option<u64> {
        self.pieces.keys().next().copied()
    }

    /// The lowest piece nobody fetches and that lacks bytes: (start, filled, end).
    pub fn orphan(&self) -> Option<(u64, u64, u64)> {
        self.pieces.iter().find_map(|(&s, p)| {
            let end = p.end?;
            (p.reserved && p.fetchers.is_empty() && p.filled < end).then_some((s, p.filled, end))
        })
    }

    /// The first piece still lacking bytes (the one the reader will wait for): its start,
    /// filled and end, and its fetchers.
    pub fn head(&self) -> Option<(u64, u64, u64, &[Fetching])> {
        self.pieces.iter().find_map(|(&s, p)| {
            let end = p.end?;
            (!p.complete()).then_some((s, p.filled, end, p.fetchers.as_slice()))
        })
    }

    /// Every piece with fetchers: its start, filled, end and fetchers.
    pub fn fetching(&self) -> impl Iterator<Item = (u64, u64, Option<u64>, &[Fetching])> {
        self.pieces
            .iter()
            .filter(|(_, p)| !p.fetchers.is_empty())
            .map(|(&s, p)| (s, p.filled, p.end, p.fetchers.as_slice()))
    }

    /// The reader's next chunk.
    pub fn take(&mut self) -> Take {
        loop {
            if self.ended {
                return Take::End;
            }
            let Some(mut head) = self.pieces.first_entry() else {
                return match self.length {
                    Some(l) if self.reader >= l => Take::End,
                    _ => Take::Wait,
                };
            };
            if let Some(c) = head.get_mut().chunks.pop_front() {
                return Take::Chunk(c);
            }
            let p = head.get();
            if !p.complete() {
                return Take::Wait;
            }
            let last = p.end.is_none() || p.ended || p.end == self.length;
            head.remove();
            self.ended = last;
            self.moved = true;
        }
    }

    /// Whether the reader finished a piece since the last call: the piece it needs next
    /// changed, and may be one a copy should help.
    pub fn head_moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }

    /// The reader consumed a chunk of `len` bytes: its room and its block come back.
    pub fn consumed(&mut self, block: Box<[u8]>, len: usize) {
        self.used -= len as u64;
        self.reader += len as u64;
        self.free.push(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetching(conn: Conn, source: usize) -> Fetching {
        Fetching { conn, source, since: 0.0, bytes: 0, last: 0.0 }
    }

    /// `n` bytes read into `b` from its start.
    fn whole(b: Box<[u8]>, n: usize) -> Chunk {
        Chunk { block: b, pos: 0, len: n }
    }

    fn block_of(w: &mut Window, byte: u8) -> Box<[u8]> {
        let mut b = w.block();
        b.fill(byte);
        b
    }

    fn drain(w: &mut Window) -> Vec<u8> {
        let mut out = Vec::new();
        while let Take::Chunk(c) = w.take() {
            out.extend_from_slice(&c.block[c.pos..c.pos + c.len]);
            w.consumed(c.block, c.len);
        }
        out
    }

    /// Pieces arrive out of order and are read in order; reservations come back as they are
    /// consumed.
    #[test]
    fn pieces_in_order_within_the_reservation() {
        let len = 3 * BLOCK;
        let mut w = Window::new(4 * BLOCK, Some(len), 0);
        for i in 0..3 {
            w.make(i * BLOCK, Some((i + 1) * BLOCK), true);
            w.attach(i * BLOCK, fetching(i, 0));
        }
        assert_eq!(w.free_bytes(), BLOCK);
        for i in [2u64, 0, 1] {
            let b = block_of(&mut w, i as u8);
            let got = w.publish(i * BLOCK, i, i * BLOCK, whole(b, BLOCK as usize), false, 1.0);
            assert_eq!(got, Published::Kept { n: BLOCK as usize, complete: true });
            if i == 2 {
                // The head has not arrived: the reader waits.
                assert!(matches!(w.take(), Take::Wait));
            }
        }
        let all = drain(&mut w);
        assert_eq!(all.len() as u64, len);
        assert!(all[..BLOCK as usize].iter().all(|&b| b == 0));
        assert!(all[2 * BLOCK as usize..].iter().all(|&b| b == 2));
        assert!(matches!(w.take(), Take::End));
        assert_eq!(w.free_bytes(), 4 * BLOCK);
    }

    /// Two copies of a piece: whichever brings a byte first wins it; bytes already here are
    /// dropped, a block that overlaps keeps only its new part.
    #[test]
    fn the_first_copy_wins_byte_by_byte() {
        let mut w = Window::new(8 * BLOCK, Some(4 * BLOCK), 0);
        w.make(0, Some(4 * BLOCK), true);
        w.attach(0, fetching(1, 0));
        // The slow fetcher brings its first block.
        let b = block_of(&mut w, 1);
        assert!(matches!(
            w.publish(0, 1, 0, whole(b, BLOCK as usize), false, 1.0),
            Published::Kept { .. }
        ));
        // A copy from the other source starts at BLOCK, brings two blocks.
        w.attach(0, fetching(2, 1));
        assert_eq!(w.head().map(|h| h.3.len()), Some(2));
        for k in 1..3u64 {
            let b = block_of(&mut w, 2);
            let got = w.publish(0, 2, k * BLOCK, whole(b, BLOCK as usize), false, 2.0);
            assert!(matches!(got, Published::Kept { .. }));
        }
        // The slow one's second block is all old bytes: dropped, and it may stop.
        let b = block_of(&mut w, 1);
        assert_eq!(
            w.publish(0, 1, BLOCK, whole(b, BLOCK as usize), false, 3.0),
            Published::Redundant
        );
        // A half block from the slow one past the copy's: its new half is kept.
        let b = block_of(&mut w, 1);
        let half = BLOCK as usize / 2;
        let got = w.publish(0, 1, 3 * BLOCK - half as u64, whole(b, BLOCK as usize), false, 3.0);
        assert_eq!(got, Published::Kept { n: half, complete: false });
        let b = block_of(&mut w, 2);
        let got = w.publish(0, 2, 3 * BLOCK, whole(b, BLOCK as usize), false, 4.0);
        assert_eq!(got, Published::Kept { n: half, complete: true });
        let all = drain(&mut w);
        assert_eq!(all.len() as u64, 4 * BLOCK);
        let at = |o: u64| all[o as usize];
        assert_eq!(
            (at(0), at(BLOCK), at(3 * BLOCK - 1), at(3 * BLOCK), at(4 * BLOCK - 1)),
            (1, 2, 2, 1, 2)
        );
        assert_eq!(w.free_bytes(), 8 * BLOCK);
    }

    #[test]
    fn a_piece_whose_fetchers_left_is_an_orphan() {
        let mut w = Window::new(8 * BLOCK, Some(4 * BLOCK), 0);
        w.make(0, Some(2 * BLOCK), true);
        w.make(2 * BLOCK, Some(4 * BLOCK), true);
        w.attach(0, fetching(1, 0));
        w.attach(2 * BLOCK, fetching(2, 0));
        assert_eq!(w.orphan(), None);
        let b = block_of(&mut w, 0);
        w.publish(2 * BLOCK, 2, 2 * BLOCK, whole(b, 1000), false, 1.0);
        w.detach(2 * BLOCK, 2);
        assert_eq!(w.orphan(), Some((2 * BLOCK, 2 * BLOCK + 1000, 4 * BLOCK)));
        assert_eq!(w.head().map(|h| h.0), Some(0));
        assert_eq!(w.next(), 4 * BLOCK);
    }

    /// A whole answer reserves block by block; a short block gives back what it did not use.
    #[test]
    fn a_whole_answer_block_by_block() {
        let mut w = Window::new(2 * BLOCK, None, 0);
        w.make(0, None, false);
        assert!(w.reserve_block() && w.reserve_block() && !w.reserve_block());
        let b = block_of(&mut w, 7);
        w.publish(0, 1, 0, whole(b, 100), true, 1.0);
        assert_eq!(w.free_bytes(), 2 * BLOCK - BLOCK - 100);
        let b = w.block();
        w.give_back(b, true);
        assert_eq!(w.free_bytes(), 2 * BLOCK - 100);
        w.end_whole(0);
        assert_eq!(drain(&mut w), vec![7u8; 100]);
        assert!(matches!(w.take(), Take::End));
        assert_eq!(w.free_bytes(), 2 * BLOCK);
    }
}
