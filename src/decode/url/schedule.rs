//! Who fetches what, from what was measured (pure). Two decisions:
//!
//! - `assign`: what a free connection of a source takes next. A piece nobody fetches any more
//!   (its fetcher failed: an orphan) first; then, when the piece the reader needs next is held
//!   by a fetcher that falls behind, a copy of its rest from this faster source (the first
//!   copy to arrive wins: `window.rs`); else the next piece, sized by the source's measured
//!   speed (`piece_size`); else wait.
//! - `tune`: how many connections each source may have. One to start with; while the reader
//!   waits for data (the download, not the decoder, is the bottleneck), one source at a time
//!   is given more (two, then doubling, as TCP's slow start) and keeps them only if its rate rose
//!   by at least half of what each new connection would bring at its current per-connection
//!   rate; otherwise it drops back and is not probed again for a while (aria2's `--split`
//!   opens them all at once; TCP probes and backs off).
//!
//! aria2 was the model for pieces taken by free connections from any source (SegmentMan,
//! `getCleanSegmentIfOwnerIsIdle`) and for preferring the measured fastest sources
//! (AdaptiveURISelector); the copy of a late head piece is BitTorrent's end game applied to
//! the one piece a stream waits for.

use super::ranges::BLOCK;

/// The smallest piece: one more request per 256 KiB costs ~1 % at 50 MB/s per connection on
/// 127.0.0.1; smaller pieces would be mostly request overhead on a real link.
pub const MIN_PIECE: u64 = BLOCK;

/// The largest piece: past a few MiB a request's round trip is already a small part of its
/// time (a 30 ms round trip against 8 MiB at 50 MB/s: 18 %), and larger pieces leave fewer
/// connections room in the window.
pub const MAX_PIECE: u64 = 8 << 20;

/// A piece should take about this long at its source's measured speed: a slow source gets
/// small pieces, so the reader never waits long on one, a fast one large pieces, so requests
/// cost little (at 100 MB/s a connection's piece is 8 MiB, the cap, at 10 MB/s 2.5 MB, at
/// 1 MB/s the 256 KiB floor).
const PIECE_TIME: f64 = 0.25;

/// A source's piece must arrive within this fraction of the time until the reader needs it
/// (what lies before it in the window, at the pace of every source together), or the source
/// does not take it; if it is late all the same, a copy of its rest is the remedy.
const DEADLINE_SHARE: f64 = 0.8;

/// A source kept out of new pieces for being too slow (`piece_size`) takes one smallest piece
/// once its speed is this old (seconds), at the window's far end, to be measured again: a
/// measurement taken under a burst of load, or while a mirror warmed up, must not keep it out
/// for the whole run (it did: two of three mirrors judged slow in their first second served
/// nothing more of a 5 MB archive, at a load of 12). If it is slow indeed, the piece is one
/// block, and a copy of it from a faster source is the remedy as for any late piece.
const REMEASURE: f64 = 1.0;

/// A copy of the head's rest is asked for only when the copy would arrive in less than this
/// fraction of the time the current fetcher still needs: a clear win, so two sources of
/// about the same speed never chase each other's pieces.
const COPY_GAIN: f64 = 0.5;

/// What is known of one source's speed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Speed {
    /// Bytes a second one connection of it brings: its pieces' bytes over their time, the
    /// request's round trip included (None until one piece was measured).
    pub per_conn: Option<f64>,
    /// Seconds from a request to its first byte (0 until measured).
    pub first_byte: f64,
    /// When it was last measured (seconds since the download started).
    pub at: f64,
}

/// A fetcher's own progress bounds its rate once it has fetched for this long (its first
/// hundredths of a second are its request's round trip, and on a loaded machine its
/// thread's turn); a request this long measures its source's speed.
pub const JUDGE_AFTER: f64 = 0.05;

/// Weight of the newest measurement of a connection's speed.
const EWMA: f64 = 0.3;

impl Speed {
    /// The speed after a request that took `secs`, brought `bytes` (its bytes beaten by a
    /// copy too: they came all the same) and its first byte after `first` seconds. A
    /// request measures once it took long enough to tell (a beaten one too: a slow
    /// source's pieces are often finished by a copy). One that brought no byte (stopped
    /// first) tells nothing: a rate of 0 would leave the source unjudgeable (`copy_wins`
    /// lets a fetcher of no known rate be) and let it take pieces as if unmeasured.
    pub fn measured(self, secs: f64, bytes: u64, first: f64, now: f64) -> Speed {
        if secs <= 0.0 || bytes == 0 || (secs < JUDGE_AFTER && bytes < BLOCK) {
            return self;
        }
        let rate = bytes as f64 / secs;
        Speed {
            per_conn: Some(self.per_conn.map_or(rate, |r| r + EWMA * (rate - r))),
            first_byte: self.first_byte + EWMA * (first - self.first_byte),
            at: now,
        }
    }
}

/// The reorder window as a free connection finds it.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// The first byte no piece covers yet.
    pub next: u64,
    /// The archive's length.
    pub length: u64,
    /// Bytes of the window not reserved by a piece.
    pub free: u64,
    /// The window's size.
    pub capacity: u64,
    /// The next byte the reader takes.
    pub reader: u64,
    /// Bytes a second the reader consumes (None until measured).
    pub drain: Option<f64>,
    /// Bytes a second every usable source together can bring (each one's connections at
    /// their measured speed): the pace at which a piece's turn comes when the download is
    /// what the reader waits for.
    pub potential: f64,
    /// Connections open, all sources together.
    pub connections: usize,
    /// Seconds since the download started.
    pub now: f64,
}

/// A piece that needs another fetcher: its bytes `start..end`, of which `start..filled`
/// arrived.
#[derive(Clone, Copy, Debug)]
pub struct Held {
    pub start: u64,
    pub end: u64,
    pub filled: u64,
    /// The run waits on it now: the reader waits for its bytes, or the window is full
    /// behind it.
    pub holds: bool,
    /// Who fetches it now (None: nobody, an orphan); with several fetchers already, no other
    /// copy is asked for.
    pub fetcher: Option<Fetcher>,
    pub fetchers: usize,
}

/// A connection fetching a piece, as measured so far.
#[derive(Clone, Copy, Debug)]
pub struct Fetcher {
    pub source: usize,
    /// Bytes a second it brings: on this piece, once that was measured long enough, else its
    /// source's connections' (None: too early to tell).
    pub rate: Option<f64>,
    /// No byte for longer than its source's speed explains.
    pub stalled: bool,
}

/// What a free connection does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// Fetch bytes `from..end` of the piece at `start`, which nobody fetches any more.
    Resume { start: u64, from: u64, end: u64 },
    /// Fetch bytes `from..end` of the head piece at `start` beside its slow fetcher.
    Copy { start: u64, from: u64, end: u64 },
    /// A new piece, bytes `start..end`.
    Fresh { start: u64, end: u64 },
    /// Nothing now: wait for a change (room in the window, a measurement).
    Wait,
}

/// What the connection of source `me` takes next. `orphan`: the lowest piece nobody fetches;
/// `head`: the piece the reader needs next, if it is not complete; `standby`: the source's
/// spare connection, kept free for urgent work (an orphan, a copy), which takes no new piece.
pub fn assign(
    me: usize,
    speeds: &[Speed],
    w: &Window,
    orphan: Option<&Held>,
    head: Option<&Held>,
    standby: bool,
) -> Job {
    if let Some(o) = orphan {
        return Job::Resume { start: o.start, from: o.filled, end: o.end };
    }
    if let Some(h) = head
        && copy_wins(me, speeds, w, h)
    {
        return Job::Copy { start: h.start, from: h.filled, end: h.end };
    }
    if standby || w.next >= w.length {
        return Job::Wait;
    }
    let size = piece_size(me, speeds, w);
    if size == 0 || (size > w.free && w.next > w.reader) {
        // No room (the piece the reader is at always gets its room: `w.next == w.reader`).
        return Job::Wait;
    }
    Job::Fresh { start: w.next, end: w.next + size.min(w.length - w.next) }
}

/// Whether a copy of the head's rest from `me` would arrive clearly before its fetcher's,
/// while the reader will wait for it.
fn copy_wins(me: usize, speeds: &[Speed], w: &Window, h: &Held) -> bool {
    let Some(f) = h.fetcher else { return false };
    if h.fetchers != 1 || h.filled >= h.end || (f.source == me && !f.stalled) {
        return false;
    }
    let rest = (h.end - h.filled) as f64;
    let theirs = match (f.stalled, f.rate) {
        (true, _) => f64::INFINITY,
        (false, Some(r)) if r > 0.0 => rest / r,
        // Too early to tell how fast it is: let it be.
        _ => return false,
    };
    let mine = match speeds[me].per_conn {
        Some(r) if r > 0.0 => speeds[me].first_byte + rest / r,
        // A source not yet measured takes over only from a stalled fetcher.
        _ if f.stalled => 0.0,
        _ => return false,
    };
    // The reader has this long before it reaches the bytes still missing (none when the run
    // waits on them already).
    let slack = match w.drain {
        _ if h.holds => 0.0,
        Some(d) if d > 0.0 => h.filled.saturating_sub(w.reader) as f64 / d,
        _ => 0.0,
    };
    theirs > slack && mine < theirs * COPY_GAIN
}

/// The size of the next piece for `me`: its speed times PIECE_TIME, within the window's share
/// of a connection and [MIN_PIECE, MAX_PIECE], in whole blocks. 0 when `me` is slower than
/// another source and could not deliver even MIN_PIECE before the reader needs it.
pub fn piece_size(me: usize, speeds: &[Speed], w: &Window) -> u64 {
    let share = (w.capacity / (w.connections as u64 + 1)).clamp(MIN_PIECE, MAX_PIECE);
    let Some(rate) = speeds[me].per_conn.filter(|r| *r > 0.0) else {
        // Not measured yet: one small piece measures it.
        return MIN_PIECE.min(share);
    };
    let mut size = ((rate * PIECE_TIME) as u64).clamp(MIN_PIECE, share);
    let fastest = speeds.iter().filter_map(|s| s.per_conn).fold(0.0, f64::max);
    // The piece the reader is at is taken by whoever is free: the run waits on it.
    if w.potential > 0.0 && rate < fastest && w.next > w.reader {
        // The piece is needed when the reader has consumed what lies before it, at the pace
        // every source together can bring (the measured drain would leave out this source's
        // part, and so keep it out; when the decoder is slower, the window is full and what
        // lies before the piece is long).
        let pace = w.potential;
        let needed_in = w.next.saturating_sub(w.reader) as f64 / pace;
        let time = needed_in * DEADLINE_SHARE - speeds[me].first_byte;
        let fits = (rate * time).max(0.0) as u64;
        if fits < MIN_PIECE {
            if w.now - speeds[me].at >= REMEASURE {
                return MIN_PIECE;
            }
            return 0;
        }
        size = size.min(fits);
    }
    size / BLOCK * BLOCK
}

/// How many connections a source may have, and what it measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Bytes a second it delivered over the last measurement.
    pub rate: f64,
    /// Connections it may have now.
    pub target: usize,
    /// `--connections` (within the open-file limit).
    pub ceiling: usize,
    /// Verified and not dropped or backing off.
    pub usable: bool,
    /// Not probed again before this time (seconds since the download started).
    pub hold_until: f64,
    /// Connections the next probe adds (2 at first, doubled after each success, 1 after a
    /// failure).
    pub grow: usize,
    /// Seconds from a request to its first byte.
    pub first_byte: f64,
}

/// A probe under way: `source` went from `from` connections to `from + added` at `since`,
/// delivering `before` bytes a second until then.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    pub source: usize,
    pub from: usize,
    pub added: usize,
    pub before: f64,
    pub since: f64,
}

/// What `tune` decides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tune {
    Keep,
    /// Give `source` `add` more connections (a probe starts).
    Open {
        source: usize,
        add: usize,
    },
    /// The probe paid: keep them (and grow by twice as many next time, `doubled`; or, when
    /// the reader stopped waiting during it, by as many: the connections met its pace, and
    /// whether more would raise the rate cannot be told until it waits again).
    Settle {
        source: usize,
        doubled: bool,
    },
    /// The probe added nothing: back to `to` connections, and hold.
    Revert {
        source: usize,
        to: usize,
    },
}

/// How long a probe is measured: at least this, and at least a few round trips (a new
/// connection's first piece needs a request and TCP's slow start). Longer than the
/// conductor's rate window (200 ms), so the rate it judges by is all after the probe began.
/// Each probe costs this much time at the lower rate: from one connection to eight in three
/// probes is 0.75 s (with 0.5 s, a 596 MB restore from a mirror capping each connection at
/// 50 MB/s took 2.88 s against aria2's 1.97 s).
const PROBE_TIME: f64 = 0.25;

/// The reader waited for data at least this fraction of the last measurement: the download
/// is what holds the run back, so more connections may help.
pub const STARVED: f64 = 0.1;

/// A probe pays when each added connection brought at least this fraction of what one of
/// the source's connections brought before it.
const PAYS: f64 = 0.5;

/// After a probe that added nothing, the source is not probed again for this long (seconds),
/// doubled for each such probe in a row, up to HOLD_MAX: a probe judged on a noisy
/// measurement costs at most a second at the lower rate (with a fixed 5 s, a first probe from
/// 51 to 80 MB/s, short of what two connections should add, left a 596 MB restore at 50 MB/s
/// for 5 s: 6.6 s against 2.6 s).
pub const HOLD: f64 = 1.0;
pub const HOLD_MAX: f64 = 16.0;

/// One decision at time `now` (seconds since the start): `starved` is the fraction of the
/// last measurement the reader waited for data, `capped` whether `--limit-rate` held the
/// connections back.
pub fn tune(now: f64, paces: &[Pace], probe: Option<&Probe>, starved: f64, capped: bool) -> Tune {
    if let Some(p) = probe {
        let pace = &paces[p.source];
        if !pace.usable {
            return Tune::Revert { source: p.source, to: p.from };
        }
        if now - p.since < PROBE_TIME.max(5.0 * pace.first_byte) {
            return Tune::Keep;
        }
        let per_conn = p.before / p.from.max(1) as f64;
        let gain = pace.rate - p.before;
        return if gain >= PAYS * per_conn * p.added as f64 {
            Tune::Settle { source: p.source, doubled: true }
        } else if starved < STARVED && !capped {
            Tune::Settle { source: p.source, doubled: false }
        } else {
            Tune::Revert { source: p.source, to: p.from }
        };
    }
    if capped || starved < STARVED {
        return Tune::Keep;
    }
    // The source whose connections each bring the most, among those that may grow.
    let best = paces
        .iter()
        .enumerate()
        .filter(|(_, p)| p.usable && p.target < p.ceiling && now >= p.hold_until && p.rate > 0.0)
        .max_by(|a, b| {
            let pa = a.1.rate / a.1.target.max(1) as f64;
            let pb = b.1.rate / b.1.target.max(1) as f64;
            pa.total_cmp(&pb)
        });
    match best {
        Some((source, p)) => Tune::Open { source, add: p.grow.max(1).min(p.ceiling - p.target) },
        None => Tune::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    fn w(next: u64, reader: u64, free: u64, drain: Option<f64>) -> Window {
        Window {
            next,
            length: 1 << 30,
            free,
            capacity: 16 << 20,
            reader,
            drain,
            potential: drain.unwrap_or(0.0),
            connections: 3,
            now: 0.0,
        }
    }

    fn speed(mb: f64) -> Speed {
        Speed { per_conn: Some(mb * MB), first_byte: 0.001, at: 0.0 }
    }

    /// What a free connection takes: (case, me, speeds, window, orphan, head, want).
    #[test]
    fn what_a_free_connection_takes() {
        let fast = speed(100.0);
        let slow = speed(10.0);
        let unknown = Speed::default();
        let held = |filled, fetcher: Option<Fetcher>, fetchers| Held {
            start: 0,
            end: 4 << 20,
            filled,
            holds: true,
            fetcher,
            fetchers,
        };
        let by = |source, rate: Option<f64>, stalled| Fetcher { source, rate, stalled };
        let roomy = w(8 << 20, 0, 8 << 20, Some(200.0 * MB));
        let full = w(16 << 20, 0, 0, Some(200.0 * MB));
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, usize, Vec<Speed>, Window, Option<Held>, Option<Held>, Job)> = vec![
            (
                "an orphan first, from where it stopped",
                0,
                vec![fast, fast],
                roomy,
                Some(held(1 << 20, None, 0)),
                None,
                Job::Resume { start: 0, from: 1 << 20, end: 4 << 20 },
            ),
            (
                "the next piece: 25 MB wanted, the window's share (16 MiB / 4) caps it",
                0,
                vec![fast, fast],
                roomy,
                None,
                None,
                Job::Fresh { start: 8 << 20, end: 12 << 20 },
            ),
            (
                "a source not measured yet: one small piece",
                1,
                vec![fast, unknown],
                roomy,
                None,
                None,
                Job::Fresh { start: 8 << 20, end: (8 << 20) + MIN_PIECE },
            ),
            ("no room: wait", 0, vec![fast], full, None, None, Job::Wait),
            (
                "the head on a 10x slower source, the reader at it: a copy of its rest",
                0,
                vec![fast, slow],
                full,
                None,
                Some(held(1 << 20, Some(by(1, Some(10.0 * MB), false)), 1)),
                Job::Copy { start: 0, from: 1 << 20, end: 4 << 20 },
            ),
            (
                "the slow source itself does not copy its own piece",
                1,
                vec![fast, slow],
                full,
                None,
                Some(held(1 << 20, Some(by(1, Some(10.0 * MB), false)), 1)),
                Job::Wait,
            ),
            (
                "a head fetcher of about the same speed is left alone",
                0,
                vec![fast, fast],
                full,
                None,
                Some(held(1 << 20, Some(by(1, Some(80.0 * MB), false)), 1)),
                Job::Wait,
            ),
            (
                "a stalled head fetcher is copied even by its own source",
                0,
                vec![fast],
                full,
                None,
                Some(held(1 << 20, Some(by(0, Some(100.0 * MB), true)), 1)),
                Job::Copy { start: 0, from: 1 << 20, end: 4 << 20 },
            ),
            (
                "already copied: no third fetcher",
                0,
                vec![fast, slow],
                full,
                None,
                Some(held(1 << 20, Some(by(1, Some(10.0 * MB), false)), 2)),
                Job::Wait,
            ),
            (
                "the reader will reach the missing bytes before the slow fetcher brings them: a \
                 copy before the run waits",
                0,
                vec![fast, slow],
                roomy,
                None,
                Some(Held {
                    holds: false,
                    ..held(1 << 20, Some(by(1, Some(10.0 * MB), false)), 1)
                }),
                Job::Copy { start: 0, from: 1 << 20, end: 4 << 20 },
            ),
            (
                "a fetcher not yet measured is given time",
                0,
                vec![fast, slow],
                full,
                None,
                Some(held(0, Some(by(1, None, false)), 1)),
                Job::Wait,
            ),
            (
                "the reader is far from the missing bytes: no copy yet",
                0,
                vec![fast, slow],
                Window { reader: 0, drain: Some(1.0 * MB), ..full },
                None,
                Some(Held {
                    holds: false,
                    ..held(3 << 20, Some(by(1, Some(10.0 * MB), false)), 1)
                }),
                Job::Wait,
            ),
            (
                "a slow source cannot make the deadline at the window's near end: wait",
                1,
                vec![fast, slow],
                w(1 << 20, 0, 8 << 20, Some(300.0 * MB)),
                None,
                None,
                Job::Wait,
            ),
            (
                "the deadline counts every source's pace, not the drain without this one",
                1,
                vec![fast, speed(42.0)],
                Window { potential: 142.0 * MB, ..w(4 << 20, 0, 8 << 20, Some(97.0 * MB)) },
                None,
                None,
                Job::Fresh { start: 4 << 20, end: (4 << 20) + (768 << 10) },
            ),
            (
                "a slow source kept out for a second is measured again: one smallest piece",
                1,
                vec![fast, slow],
                Window { now: 1.5, ..w(1 << 20, 0, 8 << 20, Some(300.0 * MB)) },
                None,
                None,
                Job::Fresh { start: 1 << 20, end: (1 << 20) + MIN_PIECE },
            ),
            (
                "a slow source takes a small piece at the window's far end",
                1,
                vec![fast, slow],
                w(16 << 20, 0, 8 << 20, Some(200.0 * MB)),
                None,
                None,
                Job::Fresh { start: 16 << 20, end: (16 << 20) + (512 << 10) },
            ),
            (
                "alone, a slow source takes every piece",
                0,
                vec![slow],
                w(1 << 20, 0, 8 << 20, Some(10.0 * MB)),
                None,
                None,
                Job::Fresh { start: 1 << 20, end: (1 << 20) + (2304 << 10) },
            ),
            (
                "the piece the reader is at gets its room",
                0,
                vec![fast],
                w(8 << 20, 8 << 20, 0, None),
                None,
                None,
                Job::Fresh { start: 8 << 20, end: 12 << 20 },
            ),
            (
                "the reader waits at a piece nobody fetches: a slow source takes it",
                1,
                vec![fast, slow],
                w(8 << 20, 8 << 20, 8 << 20, Some(200.0 * MB)),
                None,
                None,
                Job::Fresh { start: 8 << 20, end: (8 << 20) + (2304 << 10) },
            ),
            (
                "the end of the archive: nothing more",
                0,
                vec![fast],
                Window { next: 1 << 30, ..roomy },
                None,
                None,
                Job::Wait,
            ),
        ];
        for (name, me, speeds, window, orphan, head, want) in cases {
            let got = assign(me, &speeds, &window, orphan.as_ref(), head.as_ref(), false);
            assert_eq!(got, want, "{name}");
        }
        // The standby connection takes urgent work only.
        let head = held(1 << 20, Some(by(1, Some(10.0 * MB), false)), 1);
        let copy = assign(0, &[fast, slow], &full, None, Some(&head), true);
        assert_eq!(copy, Job::Copy { start: 0, from: 1 << 20, end: 4 << 20 });
        assert_eq!(assign(0, &[fast, fast], &roomy, None, None, true), Job::Wait);
        let orphan = held(0, None, 0);
        let resume = assign(0, &[fast], &roomy, Some(&orphan), None, true);
        assert_eq!(resume, Job::Resume { start: 0, from: 0, end: 4 << 20 });
    }

    /// What a finished request does to its source's speed: (case, before, secs, bytes,
    /// first, want per_conn).
    #[test]
    fn a_request_measures_its_source() {
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, Speed, f64, u64, f64, Option<f64>)> = vec![
            ("the first measurement", Speed::default(), 0.5, 4_000_000, 0.01, Some(8.0 * MB)),
            ("later ones move it by EWMA", speed(10.0), 0.1, 3_000_000, 0.001, Some(16.0 * MB)),
            ("too short to tell", Speed::default(), 0.01, 1000, 0.001, None),
            (
                "a whole block is enough",
                Speed::default(),
                0.01,
                BLOCK,
                0.001,
                Some(BLOCK as f64 * 100.0),
            ),
            (
                "a request that brought no byte leaves the speed as it was (was: 0 B/s, never \
                 copied around)",
                Speed::default(),
                0.33,
                0,
                0.001,
                None,
            ),
            ("nor does it lower a measured one", speed(10.0), 0.33, 0, 0.001, Some(10.0 * MB)),
        ];
        for (name, before, secs, bytes, first, want) in cases {
            let got = before.measured(secs, bytes, first, 1.0).per_conn;
            let close = match (got, want) {
                (Some(g), Some(w)) => (g - w).abs() < 1.0,
                (g, w) => g == w,
            };
            assert!(close, "{name}: {got:?}, want {want:?}");
        }
    }

    #[test]
    fn pieces_follow_speed_within_the_window() {
        let win = |connections| Window { connections, ..w(0, 0, 16 << 20, None) };
        // 100 MB/s: 25 MB wanted, the share of 16 MiB among 2 (1 + the reader's) caps it.
        assert_eq!(piece_size(0, &[speed(100.0)], &win(1)), 8 << 20);
        assert_eq!(piece_size(0, &[speed(100.0)], &win(7)), 2 << 20);
        // 10 MB/s: 2.5 MB, in whole blocks.
        assert_eq!(piece_size(0, &[speed(10.0)], &win(1)), 2304 << 10);
        // 0.1 MB/s: the floor.
        assert_eq!(piece_size(0, &[speed(0.1)], &win(1)), MIN_PIECE);
        // 64 connections in a 1 MiB window: still the floor.
        let tight = Window { capacity: 1 << 20, connections: 64, ..w(0, 0, 1 << 20, None) };
        assert_eq!(piece_size(0, &[speed(100.0)], &tight), MIN_PIECE);
    }

    /// How many connections: (case, now, paces, probe, starved, capped, want).
    #[test]
    fn connections_grow_while_they_pay() {
        let pace = |rate_mb: f64, target| Pace {
            rate: rate_mb * MB,
            target,
            ceiling: 8,
            usable: true,
            hold_until: 0.0,
            grow: 1,
            first_byte: 0.001,
        };
        let probe = |source, from, added, before_mb: f64| Probe {
            source,
            from,
            added,
            before: before_mb * MB,
            since: 10.0,
        };
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, f64, Vec<Pace>, Option<Probe>, f64, bool, Tune)> = vec![
            (
                "the reader keeps up: nothing",
                10.0,
                vec![pace(500.0, 1)],
                None,
                0.0,
                false,
                Tune::Keep,
            ),
            (
                "the reader waits: the source with the best per-connection rate grows",
                10.0,
                vec![pace(100.0, 2), pace(90.0, 1)],
                None,
                0.5,
                false,
                Tune::Open { source: 1, add: 1 },
            ),
            (
                "doubling after successes",
                10.0,
                vec![Pace { grow: 4, ..pace(100.0, 4) }],
                None,
                0.5,
                false,
                Tune::Open { source: 0, add: 4 },
            ),
            (
                "never past the ceiling",
                10.0,
                vec![Pace { grow: 4, ..pace(100.0, 6) }],
                None,
                0.5,
                false,
                Tune::Open { source: 0, add: 2 },
            ),
            (
                "at the ceiling, held, or capped: nothing",
                10.0,
                vec![pace(100.0, 8), Pace { hold_until: 12.0, ..pace(100.0, 1) }],
                None,
                0.5,
                false,
                Tune::Keep,
            ),
            ("--limit-rate holds it back", 10.0, vec![pace(100.0, 1)], None, 0.9, true, Tune::Keep),
            (
                "a probe is measured for a while",
                10.2,
                vec![pace(50.0, 2)],
                Some(probe(0, 1, 1, 50.0)),
                0.5,
                false,
                Tune::Keep,
            ),
            (
                "50 → 100 MB/s on a second connection: it pays",
                10.6,
                vec![pace(100.0, 2)],
                Some(probe(0, 1, 1, 50.0)),
                0.5,
                false,
                Tune::Settle { source: 0, doubled: true },
            ),
            (
                "the reader stopped waiting during the probe: kept, no doubling",
                10.6,
                vec![pace(198.0, 7)],
                Some(probe(0, 3, 4, 158.0)),
                0.0,
                false,
                Tune::Settle { source: 0, doubled: false },
            ),
            (
                "a per-port cap: 100 → 104 MB/s adds nothing, back to one",
                10.6,
                vec![pace(104.0, 2)],
                Some(probe(0, 1, 1, 100.0)),
                0.5,
                false,
                Tune::Revert { source: 0, to: 1 },
            ),
            (
                "a source dropped during its probe: back",
                10.2,
                vec![Pace { usable: false, ..pace(0.0, 2) }],
                Some(probe(0, 1, 1, 100.0)),
                0.5,
                false,
                Tune::Revert { source: 0, to: 1 },
            ),
        ];
        for (name, now, paces, probe, starved, capped, want) in cases {
            assert_eq!(tune(now, &paces, probe.as_ref(), starved, capped), want, "{name}");
        }
    }
}
