//! `--min-rate`: the slowest a connection may deliver before it is treated as stalled (pure,
//! but for the clock `read` takes around a read).
//!
//! A connection's rate is the bytes its reads brought over the time it spent waiting in them,
//! over the last `--stall-timeout` of that time (at least a whole window before it is judged).
//! Time spent waiting for room in the reorder window is not the server's and is not counted,
//! so a slow decoder or disk never makes a connection "slow". Below the floor for a window, the
//! attempt fails as a stall and is retried from the byte it reached (`fetch.rs`), on a new
//! connection, which may reach another server behind the name or another path.
//!
//! The stall timeout alone bounds a wait for one byte: a server that sends one byte every
//! 29 s kept a connection, and the piece the reader waits for, forever. As curl's
//! `--speed-limit`/`--speed-time` (there, the transfer is aborted) and Firedancer's
//! `min_download_speed`.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read};
use std::time::{Duration, Instant};

/// Parts of a window the read time is kept in: the window slides by an eighth.
const SLOTS: u32 = 8;

/// A connection's reads against the floor.
#[derive(Debug)]
pub struct Floor {
    /// Bytes per second.
    floor: u64,
    window: Duration,
    /// (read time, bytes) per slot of window / SLOTS, oldest first.
    slots: VecDeque<(Duration, u64)>,
    time: Duration,
    bytes: u64,
}

/// The error a read below the floor ends with (kind TimedOut: a stall, `http::io_failure`).
#[derive(Debug)]
pub struct BelowFloor {
    pub rate: u64,
    pub floor: u64,
    pub window: Duration,
}

impl fmt::Display for BelowFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "slower than --min-rate ({} B/s over {} s, {} B/s wanted)",
            self.rate,
            self.window.as_secs(),
            self.floor
        )
    }
}

impl std::error::Error for BelowFloor {}

impl Floor {
    /// A floor of `floor` bytes/s over `window`; None when there is none (0).
    pub fn new(floor: u64, window: Duration) -> Option<Floor> {
        (floor > 0 && !window.is_zero()).then(|| Floor {
            floor,
            window,
            slots: VecDeque::new(),
            time: Duration::ZERO,
            bytes: 0,
        })
    }

    /// A read that waited `took` and brought `n` bytes. Err when, over the last window of
    /// read time (a whole window at least), fewer than `floor` bytes a second came.
    pub fn add(&mut self, took: Duration, n: u64) -> Result<(), BelowFloor> {
        let slot = self.window / SLOTS;
        match self.slots.back_mut() {
            Some((t, b)) if *t + took <= slot => {
                *t += took;
                *b += n;
            }
            _ => self.slots.push_back((took, n)),
        }
        self.time += took;
        self.bytes += n;
        // Keep the newest slots that still cover a window.
        while let Some(&(t, b)) = self.slots.front() {
            if self.time - t < self.window {
                break;
            }
            self.slots.pop_front();
            self.time -= t;
            self.bytes -= b;
        }
        let nanos = self.time.as_nanos();
        if self.time >= self.window
            && u128::from(self.bytes) * 1_000_000_000 < u128::from(self.floor) * nanos
        {
            return Err(BelowFloor {
                rate: (u128::from(self.bytes) * 1_000_000_000 / nanos) as u64,
                floor: self.floor,
                window: self.window,
            });
        }
        Ok(())
    }

    /// The bytes an attempt must bring to count as progress when it ends below the floor: a
    /// window's worth at the floor. Fewer, and the attempt is a failure in a row like a stall,
    /// so a server that trickles on every new connection runs out of `--retries`.
    pub fn enough(floor: u64, window: Duration) -> u64 {
        floor.saturating_mul(window.as_secs().max(1))
    }
}

/// `body.read(buf)`, timed for `floor`: an error of kind TimedOut carrying `BelowFloor` once
/// the connection fell below it.
pub fn read(body: &mut impl Read, buf: &mut [u8], floor: &mut Option<Floor>) -> io::Result<usize> {
    let Some(f) = floor else { return body.read(buf) };
    let started = Instant::now();
    let n = body.read(buf)?;
    f.add(started.elapsed(), n as u64).map_err(|b| io::Error::new(io::ErrorKind::TimedOut, b))?;
    Ok(n)
}

/// The `BelowFloor` an error of `read` carries, if any.
pub fn below(e: &io::Error) -> Option<&BelowFloor> {
    e.get_ref().and_then(|i| i.downcast_ref::<BelowFloor>())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// One byte every 29 s against 1 KiB/s over 30 s: slow once a whole window of reading has
    /// passed (the second read), never before.
    #[test]
    fn a_trickle_is_slow_after_a_window() {
        let mut f = Floor::new(1024, 30 * S).unwrap();
        assert!(f.add(29 * S, 1).is_ok());
        let e = f.add(29 * S, 1).unwrap_err();
        assert_eq!((e.rate, e.floor, e.window), (0, 1024, 30 * S));
        assert!(e.to_string().contains("slower than --min-rate (0 B/s over 30 s, 1024 B/s"));
    }

    /// Steady reads at the floor or above never trip it, however long; a pause inside a fast
    /// window does not either.
    #[test]
    fn at_or_above_the_floor_is_not_slow() {
        let mut f = Floor::new(1000, 10 * S).unwrap();
        for _ in 0..1000 {
            assert!(f.add(S / 10, 100).is_ok());
        }
        let mut f = Floor::new(1000, 10 * S).unwrap();
        assert!(f.add(S, 20_000).is_ok());
        assert!(f.add(9 * S, 0).is_ok(), "20,000 bytes over 10 s is 2,000 B/s");
        // That burst slides out of the window; what is left is 0 B/s.
        assert!(f.add(2 * S, 0).is_err());
    }

    /// The window slides: a fast start does not cover a slow end for longer than a window
    /// (and an eighth).
    #[test]
    fn the_window_slides() {
        let mut f = Floor::new(1000, 8 * S).unwrap();
        assert!(f.add(S, 1_000_000).is_ok());
        let mut slow_after = None;
        for i in 1..=20 {
            if f.add(S, 10).is_err() {
                slow_after = Some(i);
                break;
            }
        }
        assert_eq!(slow_after, Some(8), "8 slow seconds after the fast one");
        // Many tiny reads keep a few slots (two neighbours hold more than a slot's time).
        let mut f = Floor::new(1, 8 * S).unwrap();
        for _ in 0..100_000 {
            let _ = f.add(Duration::from_micros(700), 1);
        }
        assert!(f.slots.len() <= 2 * SLOTS as usize + 1, "{}", f.slots.len());
    }

    #[test]
    fn no_floor_and_enough() {
        assert!(Floor::new(0, 30 * S).is_none());
        assert_eq!(Floor::enough(1024, 30 * S), 30 * 1024);
        assert_eq!(Floor::enough(u64::MAX, 30 * S), u64::MAX);
    }

    /// A reader that waits before each read, as a socket does.
    struct Waits<'a>(&'a [u8]);

    impl Read for Waits<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            std::thread::sleep(Duration::from_millis(2));
            self.0.read(buf)
        }
    }

    /// `read` passes bytes through and ends with a TimedOut error that `below` finds.
    #[test]
    fn read_marks_the_error() {
        let mut f = Floor::new(1 << 30, Duration::from_millis(1));
        let mut buf = [0u8; 4];
        let e = read(&mut Waits(b"abcd"), &mut buf, &mut f).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(below(&e).is_some());
        let mut none = None;
        assert_eq!(read(&mut &b"abcd"[..], &mut buf, &mut none).unwrap(), 4);
        assert!(below(&io::Error::from(io::ErrorKind::TimedOut)).is_none());
    }
}
