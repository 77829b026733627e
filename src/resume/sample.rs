//! A sample of an archive file's bytes before the resume point, kept in the state as a digest
//! and read again before a resumed run trusts the file (issue 40). The file's identity (inode,
//! size, mtime, ctime: `decode::FileId`) and the member at the point (`resume::anchor`) are
//! checked too; the sample covers what neither sees: the bytes a resumed run does not read
//! again, rewritten with the same length by someone who also put the times back (root can set
//! the clock, a restore from a backup or a filesystem image can bring back a ctime).
//!
//! What is read: the `TAIL` bytes just before the point's unit (the end of the frame or of the
//! member's data before it, the last the interrupted run extracted), and `SPOTS` pieces of
//! `SPOT` bytes spread over the rest. 92 KiB at most, a handful of reads, once per state
//! written (every `--writeback-every`, 256 MiB by default) and once when resuming.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use sha2::{Digest, Sha256};

/// Bytes sampled just before the point: a 64 KiB zstd frame of a snapshot is a few of them.
const TAIL: u64 = 64 << 10;
/// Pieces spread over what lies before the tail, and the size of each.
const SPOTS: u64 = 7;
const SPOT: u64 = 4 << 10;

/// The byte ranges (first byte, length) sampled before byte `end` of the file: pure.
pub fn ranges(end: u64) -> Vec<(u64, u64)> {
    let tail = end.min(TAIL);
    let before = end - tail;
    let mut out: Vec<(u64, u64)> = (0..SPOTS)
        .map(|k| {
            let at = before / SPOTS * k;
            (at, SPOT.min(before - at))
        })
        .filter(|&(_, len)| len > 0)
        .collect();
    if tail > 0 {
        out.push((before, tail));
    }
    out
}

/// Where the sample ends for a resume point whose unit begins at byte `unit` of an archive of
/// `size` bytes: the unit's start, or for an input decoded again from its start (a single
/// frame or stream: `unit` 0) the whole file, of which nothing is compared as it is passed over.
pub fn end(unit: u64, size: u64) -> u64 {
    if unit > 0 { unit.min(size) } else { size }
}

/// The digest of `file`'s bytes in `ranges(end)`, each with its place and length.
pub fn digest(file: &File, end: u64) -> io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let mut buf = Vec::new();
    for (at, len) in ranges(end) {
        buf.resize(len as usize, 0);
        file.read_exact_at(&mut buf, at)?;
        h.update(at.to_le_bytes());
        h.update(len.to_le_bytes());
        h.update(&buf);
    }
    Ok(h.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_lie_before_the_end() {
        assert!(ranges(0).is_empty());
        assert_eq!(ranges(100), [(0, 100)]);
        let r = ranges(TAIL + 10);
        assert_eq!((r[0], r.last()), ((0, 10), Some(&(10, TAIL))));
        for end in [1, 4095, 70_000, 1 << 20, 1 << 40] {
            let r = ranges(end);
            assert!(r.iter().all(|&(at, len)| len > 0 && at + len <= end), "{end}: {r:?}");
            assert!(r.iter().map(|r| r.1).sum::<u64>() <= TAIL + SPOTS * SPOT);
            assert_eq!(
                r.last().map(|&(at, len)| at + len),
                Some(end),
                "the tail ends at the point"
            );
        }
        assert_eq!(end(0, 500), 500);
        assert_eq!(end(100, 500), 100);
    }

    /// A byte changed in a sampled range changes the digest; the same bytes give the same.
    #[test]
    fn a_changed_byte_in_the_sample_is_seen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let end = 250_000;
        let one = digest(&File::open(&p).unwrap(), end).unwrap();
        assert_eq!(one, digest(&File::open(&p).unwrap(), end).unwrap());
        for &(at, _) in &ranges(end) {
            let mut changed = data.clone();
            changed[at as usize] ^= 1;
            std::fs::write(&p, &changed).unwrap();
            assert_ne!(digest(&File::open(&p).unwrap(), end).unwrap(), one, "byte {at}");
        }
        std::fs::write(&p, &data[..1000]).unwrap();
        assert!(digest(&File::open(&p).unwrap(), end).is_err(), "a shorter file");
    }
}
