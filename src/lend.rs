//! Which chunks of a member's data go to the writer in the decoder's own buffers ("lent"),
//! and which are copied into file buffers.
//!
//! The frame-parallel decoder's workers decode frames into pool buffers of their own
//! (decode/parallel.rs). The tar stage used to copy every byte of them into file buffers; now
//! it hands a piece of the worker's buffer to the writer as the file's data wherever the
//! writer can write it from there (`Skip::ahead`/`lend`, `Reader::data_ahead`/`lend_data`). `take` decides,
//! from where the member's next bytes lie, a pure function of its arguments:
//!
//! - a file written buffered takes any bytes from anywhere: everything is lent;
//! - a file written with O_DIRECT needs the memory of each write aligned (the destination's
//!   DIO alignment), and every chunk but its last to start and end at a multiple of the
//!   writer's unit (write/direct.rs `DirectPolicy::direct_part`: the last chunk's unaligned
//!   tail is written buffered). A chunk is lent when its bytes start at an aligned address;
//!   it then runs to the end of the buffer, less what is beyond the last whole unit. What is
//!   left (less than a unit at a buffer's end, where a frame or a job ended off the unit) is
//!   copied together with the next buffer's first bytes, one unit (a file buffer's worth
//!   where the next bytes come from a frame the reader decodes itself: a read that ended a
//!   few KiB into it would hand on bytes zstd has not checked yet; a damaged frame must fail
//!   the read first; `straddle_len`). Where the member's bytes
//!   are not aligned in memory at all (its data starts off the alignment relative to the
//!   buffer, as a member of a tar stream cut into frames at odd offsets), they are copied up
//!   to the buffer's end, and the next buffer is looked at again.
//!
//! Small files (the tar stage packs them into shared file buffers) are not lent: a lent
//! piece holds its whole decoder buffer until written, and each is sent at once (see
//! extract.rs `Stage::file`).

use crate::archive::Ahead;
#[cfg(test)]
use crate::archive::Lendable;
use crate::write::direct::DirectPolicy;

/// What the writer needs of a file's chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Written buffered: any bytes, anywhere.
    Any,
    /// Written with O_DIRECT: memory aligned to `align`; every chunk but the last a whole
    /// number of `unit`s (so each starts at a multiple of `unit` in the file).
    Direct { unit: usize, align: usize },
}

impl Rule {
    /// The rule for a file the writer's `policy` writes, `direct` or not (direct_policy.rs
    /// `Gate`).
    pub fn for_file(policy: &DirectPolicy, direct: bool) -> Rule {
        match policy.opens_direct(direct) {
            true => Rule::Direct { unit: policy.unit(), align: policy.align },
            false => Rule::Any,
        }
    }
}

/// The next chunk of a member's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Hand on this many bytes where they lie.
    Lend(usize),
    /// Copy this many into a file buffer.
    Copy(usize),
    /// Copy the `n` bytes left in this buffer (under a unit) into a file buffer, then as many
    /// more as `straddle_len` says once it is known where the next ones lie.
    Straddle(usize),
}

/// How long a direct file's chunk is that begins with the `rest` bytes at a buffer's end
/// (`Take::Straddle`), with `left` bytes of the member to go from its start, when the bytes
/// after `rest` come from `next`: one unit where they lie in a worker's buffer; where the
/// reader decodes them itself (its own frame), a file buffer's worth, as without lending, so
/// that a chunk never ends a few KiB into a frame zstd has not checked yet (a damaged frame
/// fails the read before anything of it is sent). The reader moves past its buffer before
/// it looks at the next one: it never waits for a worker while it holds a buffer beyond the
/// one `ahead_cap` leaves it (decode/parallel.rs HEAD_EXTRA).
pub fn straddle_len(rest: usize, left: u64, next: Ahead, unit: usize, buf_size: usize) -> usize {
    let want = match next {
        Ahead::Lend(_) => unit,
        Ahead::Read(_) => buf_size,
    };
    usize::try_from(left).map_or(want, |left| want.min(left)).max(rest)
}

/// The next chunk of a member whose next byte is at `offset` in the file, with `left` bytes
/// to go (at least 1), whose bytes come from `ahead`, under `rule`, with file buffers of
/// `buf_size` bytes.
pub fn take(offset: u64, left: u64, ahead: Ahead, rule: Rule, buf_size: usize) -> Take {
    let whole = |n: usize| n.min(usize::try_from(left).unwrap_or(usize::MAX));
    let at = match ahead {
        Ahead::Lend(at) => at,
        // Read up to where a buffer that can be lent may begin (with a direct file, to the
        // unit that straddles it), at most a file buffer.
        Ahead::Read(Some(n)) => {
            let n = usize::try_from(n).unwrap_or(usize::MAX).max(1);
            let n = match rule {
                Rule::Direct { unit, .. } => n.next_multiple_of(unit),
                Rule::Any => n,
            };
            return Take::Copy(whole(n.min(buf_size)));
        }
        Ahead::Read(None) => return Take::Copy(whole(buf_size)),
    };
    let Rule::Direct { unit, align } = rule else { return Take::Lend(whole(at.len)) };
    // Every chunk so far was whole units; a file offset off them would break the writer's
    // rule whatever is done here.
    if !offset.is_multiple_of(unit as u64) {
        return Take::Copy(whole(buf_size));
    }
    if !at.addr.is_multiple_of(align) {
        // Not writable from here: copy to the buffer's end, rounded up to a whole unit.
        return Take::Copy(whole(at.len.next_multiple_of(unit).min(buf_size)));
    }
    if left <= at.len as u64 {
        // The member's last chunk: its tail is the writer's to split off.
        return Take::Lend(left as usize);
    }
    match at.len / unit * unit {
        // The unit across the buffer's end (`straddle_len`).
        0 => Take::Straddle(at.len),
        n => Take::Lend(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;
    const DIRECT: Rule = Rule::Direct { unit: 4096, align: 512 };

    fn at(addr: usize, len: usize) -> Ahead {
        Ahead::Lend(Lendable { addr, len })
    }

    #[test]
    fn buffered_files_take_everything_where_it_lies() {
        assert_eq!(take(0, 10, at(7, 100), Rule::Any, MIB), Take::Lend(10));
        assert_eq!(take(3, 1000, at(7, 100), Rule::Any, MIB), Take::Lend(100));
        // Nothing to lend: read a file buffer's worth, or the rest, or up to where a buffer
        // to lend may begin (a direct file: a whole unit past it).
        let read = Ahead::Read(None);
        assert_eq!(take(0, 5 * MIB as u64, read, Rule::Any, MIB), Take::Copy(MIB));
        assert_eq!(take(0, 5, read, DIRECT, MIB), Take::Copy(5));
        let read = Ahead::Read(Some(1000));
        assert_eq!(take(0, 5 * MIB as u64, read, Rule::Any, MIB), Take::Copy(1000));
        assert_eq!(take(4096, 5 * MIB as u64, read, DIRECT, MIB), Take::Copy(4096));
        assert_eq!(take(4096, 700, read, DIRECT, MIB), Take::Copy(700));
        let read = Ahead::Read(Some(3 * MIB as u64));
        assert_eq!(take(0, 5 * MIB as u64, read, DIRECT, MIB), Take::Copy(MIB));
    }

    #[test]
    fn direct_files_lend_whole_units_from_aligned_memory() {
        // Aligned: up to the last whole unit of the buffer.
        assert_eq!(
            take(0, 3 * MIB as u64, at(4096 * 9 + 512, MIB - 512), DIRECT, MIB),
            Take::Lend(MIB - 4096)
        );
        // The rest of the buffer is under a unit: copied, and then a unit's worth across its
        // end from a worker's buffer, a file buffer's worth from the reader's own frame.
        assert_eq!(take(4096, MIB as u64, at(1024, 3584), DIRECT, MIB), Take::Straddle(3584));
        let (worker, own) = (at(1 << 20, MIB), Ahead::Read(None));
        assert_eq!(straddle_len(3584, MIB as u64, worker, 4096, MIB), 4096);
        assert_eq!(straddle_len(3584, MIB as u64, own, 4096, MIB), MIB);
        assert_eq!(straddle_len(3584, 4000, worker, 4096, MIB), 4000);
        assert_eq!(straddle_len(3584, 9000, own, 4096, MIB), 9000);
        assert_eq!(straddle_len(3584, 9000, Ahead::Read(Some(100)), 4096, MIB), 9000);
        // ... unless the member ends before: the rest is its last chunk, lent.
        assert_eq!(take(4096, 1000, at(1024, 3584), DIRECT, MIB), Take::Lend(1000));
        // The member's last chunk is lent whole, tail and all.
        assert_eq!(take(8192, 5000, at(512, 9000), DIRECT, MIB), Take::Lend(5000));
        assert_eq!(take(8192, 9000, at(512, 9000), DIRECT, MIB), Take::Lend(9000));
    }

    #[test]
    fn direct_files_copy_what_is_not_aligned_in_memory() {
        // Off the alignment: copied to the buffer's end, rounded up to a unit.
        assert_eq!(take(0, 10 * MIB as u64, at(100, 5000), DIRECT, MIB), Take::Copy(8192));
        assert_eq!(take(0, 10 * MIB as u64, at(100, MIB), DIRECT, MIB), Take::Copy(MIB));
        assert_eq!(take(0, 6000, at(100, 5000), DIRECT, MIB), Take::Copy(6000));
        // A file offset off the unit cannot be mended here.
        assert_eq!(take(512, 10 * MIB as u64, at(0, MIB), DIRECT, MIB), Take::Copy(MIB));
    }

    /// Walks a member through buffers that end at `ends` (offsets in the stream), its data
    /// starting at `start` in the stream, the buffers' memory starting at `base` (aligned by
    /// 4096, as pool buffers): every chunk obeys the rule, they tile the member, and what is
    /// copied is what the alignment leaves.
    fn walk(start: usize, size: usize, ends: &[usize], rule: Rule) -> (usize, usize) {
        let base = 1 << 30;
        let (mut offset, mut lent, mut copied) = (0usize, 0, 0);
        while offset < size {
            let pos = start + offset;
            let (buf_start, buf_end) = {
                let i = ends.iter().position(|&e| e > pos).expect("a buffer");
                (if i == 0 { 0 } else { ends[i - 1] }, ends[i])
            };
            let addr = base + (buf_start / 4096 + 1) * 4096 * 64 + (pos - buf_start);
            let left = (size - offset) as u64;
            let t = take(offset as u64, left, at(addr, buf_end - pos), rule, MIB);
            let n = match t {
                Take::Lend(n) => {
                    assert!(n <= buf_end - pos, "a lent chunk stays in its buffer");
                    if let Rule::Direct { align, .. } = rule {
                        assert_eq!(addr % align, 0, "lent from aligned memory");
                    }
                    lent += n;
                    n
                }
                Take::Copy(n) => {
                    copied += n;
                    n
                }
                Take::Straddle(rest) => {
                    assert!(rest < 4096 && rest == buf_end - pos);
                    // The next buffer is a worker's here.
                    let n = straddle_len(rest, left, at(0, MIB), 4096, MIB);
                    copied += n;
                    n
                }
            };
            assert!(n > 0 && n <= MIB && offset + n <= size);
            if let Rule::Direct { unit, .. } = rule
                && offset + n < size
            {
                assert_eq!(n % unit, 0, "chunk {offset}+{n} of {size}: whole units but the last");
            }
            offset += n;
        }
        (lent, copied)
    }

    /// Where the buffers end in a stream cut into frames of `frame` bytes, each decoded into
    /// buffers of a MiB from its start.
    fn buffer_ends(frame: usize) -> Vec<usize> {
        let mut ends = Vec::new();
        for f in 0..(40 * MIB).div_ceil(frame) {
            let (start, end) = (f * frame, (f + 1) * frame);
            ends.extend((start + MIB..end).step_by(MIB));
            ends.push(end);
        }
        ends
    }

    #[test]
    fn every_alignment_tiles_the_member() {
        for frame in [MIB, 32 * MIB, 1021 * 1024 + 512, 1_000_003, 64 << 10] {
            let ends = buffer_ends(frame);
            for start in (0..3 * 4096).step_by(512).chain([frame - 512, frame + 4096 * 5 - 512]) {
                for size in [1, 511, 4096, 4097, 300_000, MIB + 1, 3 * MIB - 7] {
                    let (lent, copied) = walk(start, size, &ends, Rule::Any);
                    assert_eq!((lent, copied), (size, 0));
                    let (lent, copied) = walk(start, size, &ends, DIRECT);
                    assert_eq!(lent + copied, size);
                    if frame % 512 == 0 {
                        // Buffers start at multiples of 512 in the stream, as members do:
                        // only the unit straddling each buffer's end is copied.
                        let edges = size / frame.min(MIB) + 2;
                        assert!(copied <= edges * 4096, "{start} {size}: {copied} copied");
                    }
                }
            }
        }
    }
}
