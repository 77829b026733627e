//! The block pieces are made of, and how a whole answer that dropped continues (pure). How
//! the archive is cut into pieces, and who fetches them, is `schedule.rs`'s; the reservation
//! of a piece in the reorder window, `window.rs`'s.

/// Pieces are whole multiples of this (the 256 KiB blocks connections read into).
pub const BLOCK: u64 = 256 << 10;

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
    fn a_whole_answer_resumes_by_what_the_server_offers() {
        assert_eq!(resume(true, true), Resume::Range);
        assert_eq!(resume(false, true), Resume::Restart);
        assert_eq!(resume(true, false), Resume::Never);
    }
}
