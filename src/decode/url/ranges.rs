//! How the archive is cut into pieces fetched on parallel connections, and how many
//! connections a server's first answer allows (pure).
//!
//! Each piece is one ranged GET. Its whole length is reserved in the reorder window before it
//! is asked for, and given back as the reader consumes it, so the bytes held never exceed the
//! window and the piece the reader waits for always has its room: no connection can take
//! the memory the head of the stream needs.

/// Pieces are whole multiples of this (the 256 KiB blocks connections read into).
pub const BLOCK: u64 = 256 << 10;

/// The smallest piece: one more request per 256 KiB costs ~1 % at 50 MB/s per connection on
/// 127.0.0.1; smaller pieces would be mostly request overhead on a real link.
const MIN_PIECE: u64 = BLOCK;

/// The largest piece: past a few MiB a request's round trip is already a small part of its
/// time (a 30 ms round trip against 8 MiB at 50 MB/s: 18 %), and larger pieces leave fewer
/// connections room in the window.
const MAX_PIECE: u64 = 8 << 20;

/// The size of a piece for `connections` connections sharing `window` bytes: each may hold
/// one piece ahead while the reader works through the head one (`connections + 1` pieces fit).
pub fn piece_size(window: u64, connections: usize) -> u64 {
    let share = window / (connections as u64 + 1);
    (share / BLOCK * BLOCK).clamp(MIN_PIECE, MAX_PIECE)
}

/// Bytes `start..end` of piece `index` of an archive of `length` bytes fetched from `from`,
/// or None past the end.
pub fn piece(index: u64, size: u64, from: u64, length: u64) -> Option<(u64, u64)> {
    let start = from.checked_add(index.checked_mul(size)?)?;
    (start < length).then(|| (start, start.saturating_add(size).min(length)))
}

/// How the archive is fetched, from the first answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Pieces on up to this many connections (the server answered 206 with a length, and a
    /// validator guards the requests after the first).
    Pieces(usize),
    /// One response read from the start to its end.
    Whole,
}

/// The mode for `asked` connections given what the first answer showed: ranges (206),
/// the length, a validator for If-Range, and how many pieces there are.
pub fn mode(asked: usize, ranges: bool, length: Option<u64>, if_range: bool, pieces: u64) -> Mode {
    match length {
        Some(_) if ranges && if_range && asked > 1 => {
            Mode::Pieces(asked.min(usize::try_from(pieces).unwrap_or(usize::MAX)).max(1))
        }
        _ => Mode::Whole,
    }
}

/// Where a dropped whole-file download continues, given whether the server answers ranges
/// and has a validator: from `at` with a ranged request, from 0 again (what was received is
/// read again and passed over, after the validator is found unchanged), or not at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    Range,
    Restart,
    Never,
}

pub fn resume(ranges: bool, validator: bool) -> Resume {
    match (ranges, validator) {
        (_, false) => Resume::Never,
        (true, true) => Resume::Range,
        (false, true) => Resume::Restart,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_share_the_window() {
        assert_eq!(piece_size(16 << 20, 8), 1792 << 10);
        assert_eq!(piece_size(16 << 20, 1), 8 << 20);
        assert_eq!(piece_size(1 << 20, 16), BLOCK);
        assert_eq!(piece_size(1 << 30, 4), MAX_PIECE);
        assert_eq!(piece_size(16 << 20, 8) % BLOCK, 0);
    }

    #[test]
    fn pieces_cover_the_archive_once() {
        let (size, len) = (100, 1050);
        let all: Vec<_> = (0..).map_while(|i| piece(i, size, 0, len)).collect();
        assert_eq!(all.len(), 11);
        assert_eq!(all[0], (0, 100));
        assert_eq!(all[10], (1000, 1050));
        assert!(all.windows(2).all(|w| w[0].1 == w[1].0));
        assert_eq!(piece(0, size, 1040, len), Some((1040, 1050)));
        assert_eq!(piece(1, size, 1040, len), None);
        assert_eq!(piece(u64::MAX, size, 0, len), None);
    }

    #[test]
    fn one_connection_unless_ranges_length_and_validator() {
        assert_eq!(mode(8, true, Some(10), true, 5), Mode::Pieces(5));
        assert_eq!(mode(8, true, Some(10), true, 50), Mode::Pieces(8));
        assert_eq!(mode(8, false, Some(10), true, 5), Mode::Whole);
        assert_eq!(mode(8, true, None, true, 5), Mode::Whole);
        assert_eq!(mode(8, true, Some(10), false, 5), Mode::Whole);
        assert_eq!(mode(1, true, Some(10), true, 5), Mode::Whole);
        assert_eq!(resume(true, true), Resume::Range);
        assert_eq!(resume(false, true), Resume::Restart);
        assert_eq!(resume(true, false), Resume::Never);
    }
}
