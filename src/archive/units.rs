//! Where a decoded stream can be started again (issue 30, src/resume/): the independent units
//! of its input (a zstd frame, a plain tar's any byte), each known by where it starts in the
//! input and in the decoded stream. Pure bookkeeping: the decoders note each unit as they
//! enter it, the tar stage asks for the last one at or before a member's start.

/// The start of an independent unit of the input: decoding may begin again there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitStart {
    /// Its number among the units (zstd: the frame's), for messages.
    pub index: u64,
    /// The input byte where it starts (zstd: its frame's magic number).
    pub compressed: u64,
    /// The decoded stream's byte where its first output goes: what the units before it
    /// decoded to.
    pub decoded: u64,
}

impl UnitStart {
    /// The start of the stream, which every decoder can begin at.
    pub const START: UnitStart = UnitStart { index: 0, compressed: 0, decoded: 0 };
}

/// Unit starts remembered: a mark is asked for at the member the tar stage is on, whose start
/// lies in one of the last few units; a member whose headers span more (a megabyte of PAX
/// records in frames of a few KiB) gets no resume point, the next one does.
const REMEMBERED: usize = 64;

/// The last REMEMBERED unit starts, in stream order: O(1) memory whatever the input's units
/// are like (1.2 million 7-byte zstd frames, issue 27).
#[derive(Clone, Debug, Default)]
pub struct Units {
    ring: Vec<UnitStart>,
    /// Where the next one goes once the ring is full.
    next: usize,
}

impl Units {
    /// A unit begins. Starts come in stream order (their `decoded` never decreases).
    pub fn entered(&mut self, u: UnitStart) {
        if self.ring.len() < REMEMBERED {
            self.ring.push(u);
        } else {
            self.ring[self.next] = u;
            self.next = (self.next + 1) % REMEMBERED;
        }
    }

    /// The last remembered unit that starts at or before decoded offset `t`, with no later
    /// unit starting at or before it. None when every remembered unit starts after `t` (or none
    /// was entered yet): the unit that holds `t` was forgotten.
    pub fn at_or_before(&self, t: u64) -> Option<UnitStart> {
        let oldest = self.ring.get(self.next).or(self.ring.first())?;
        if oldest.decoded > t {
            return None;
        }
        // The ring holds one run of increasing `decoded`: the last at or before `t` is the one.
        self.ring.iter().filter(|u| u.decoded <= t).max_by_key(|u| (u.decoded, u.index)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: u64) -> UnitStart {
        UnitStart { index: i, compressed: i * 10, decoded: i * 100 }
    }

    #[test]
    fn the_unit_holding_an_offset() {
        let mut u = Units::default();
        assert_eq!(u.at_or_before(0), None);
        for i in 0..5 {
            u.entered(unit(i));
        }
        assert_eq!(u.at_or_before(0), Some(unit(0)));
        assert_eq!(u.at_or_before(99), Some(unit(0)));
        assert_eq!(u.at_or_before(100), Some(unit(1)));
        assert_eq!(u.at_or_before(10_000), Some(unit(4)));
    }

    #[test]
    fn forgotten_units_give_none() {
        let mut u = Units::default();
        for i in 0..(REMEMBERED as u64 + 10) {
            u.entered(unit(i));
        }
        // Units 0..10 were forgotten: an offset inside them has no unit any more.
        assert_eq!(u.at_or_before(950), None);
        assert_eq!(u.at_or_before(1000), Some(unit(10)));
        assert_eq!(u.at_or_before(1099), Some(unit(10)));
        assert_eq!(u.at_or_before(u64::MAX), Some(unit(REMEMBERED as u64 + 9)));
    }

    /// Empty frames start where the frame before them does (in the decoded stream): the last
    /// of them is the one to start again at, never an earlier one whose output came before.
    #[test]
    fn units_of_no_output_pick_the_last() {
        let mut u = Units::default();
        u.entered(UnitStart { index: 0, compressed: 0, decoded: 0 });
        u.entered(UnitStart { index: 1, compressed: 9, decoded: 0 });
        u.entered(UnitStart { index: 2, compressed: 18, decoded: 512 });
        assert_eq!(u.at_or_before(100).map(|x| x.index), Some(1));
    }
}
