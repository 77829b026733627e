//! `--limit-rate`: one token bucket shared by every connection of every source, so the
//! download as a whole stays under the rate (curl's `--limit-rate` caps one transfer; aria2's
//! `--max-overall-download-limit` is the model for all connections together).
//!
//! A connection asks for the bytes it is about to read (`Limiter::take`); the bucket grants
//! at most GRANT at a time, refilled at the rate, holding at most BURST. The decision (how
//! long to wait for how many bytes) is `Bucket::take`, pure over the time given; `Limiter`
//! carries it out with a mutex and sleeps.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most a connection reads per grant: small enough that 16 connections interleave
/// within a tenth of a second at 10 MB/s, large enough that a grant costs nothing beside the
/// read it allows (a socket read brings up to ureq's 128 KiB buffer).
pub const GRANT: u64 = 64 << 10;

/// What the bucket holds at most: a tenth of a second at the rate, at least one grant. A
/// connection idle for a while may then read that much at once, which over the 10 s the rate
/// is judged on is 1 %.
fn burst(rate: u64) -> f64 {
    ((rate / 10).max(GRANT)) as f64
}

/// The bucket: tokens (bytes that may be read now), refilled at `rate` bytes a second.
#[derive(Debug)]
pub struct Bucket {
    rate: f64,
    tokens: f64,
    at: Instant,
    /// Whether a taker had to wait since this was last asked (`Limiter::limiting`).
    waited: bool,
}

impl Bucket {
    pub fn new(rate: u64, now: Instant) -> Bucket {
        // Starts empty: a run begins at the rate, not with a burst.
        Bucket { rate: rate.max(1) as f64, tokens: 0.0, at: now, waited: false }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now.max(self.at);
        self.tokens = (self.tokens + dt * self.rate).min(burst(self.rate as u64));
    }

    /// Asks for up to `want` bytes at `now`: Ok(granted) — those may be read now — or
    /// Err(wait) — ask again after that long.
    pub fn take(&mut self, want: u64, now: Instant) -> Result<u64, Duration> {
        self.refill(now);
        let want = want.clamp(1, GRANT) as f64;
        if self.tokens >= 1.0 {
            let granted = self.tokens.min(want).floor();
            self.tokens -= granted;
            return Ok(granted as u64);
        }
        self.waited = true;
        // The time until a grant worth having is there: `want`, or at a low rate what 20 ms
        // bring (a wait of seconds for one 64 KiB grant would make the flow lumpy).
        let worth = want.min((self.rate / 50.0).max(1.0));
        let missing = worth - self.tokens;
        Err(Duration::from_secs_f64(missing / self.rate))
    }

    /// Bytes granted but not read (the body ended first) go back.
    pub fn give_back(&mut self, n: u64) {
        self.tokens = (self.tokens + n as f64).min(burst(self.rate as u64));
    }
}

/// The bucket shared by the connections.
#[derive(Debug)]
pub struct Limiter {
    bucket: Mutex<Bucket>,
}

impl Limiter {
    pub fn new(rate: u64) -> Limiter {
        Limiter { bucket: Mutex::new(Bucket::new(rate, Instant::now())) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until some of `want` bytes may be read: how many (at least 1, at most GRANT).
    /// `stop` is asked between waits, so a cancelled download does not sleep on.
    pub fn take(&self, want: u64, stop: &dyn Fn() -> bool) -> Option<u64> {
        loop {
            let asked = self.lock().take(want, Instant::now());
            match asked {
                Ok(n) => return Some(n),
                Err(_) if stop() => return None,
                // At most 100 ms at a time, so a stop is seen soon.
                Err(wait) => std::thread::sleep(wait.min(Duration::from_millis(100))),
            }
        }
    }

    pub fn give_back(&self, n: u64) {
        if n > 0 {
            self.lock().give_back(n);
        }
    }

    /// The cap, bytes a second.
    pub fn rate(&self) -> f64 {
        self.lock().rate
    }

    /// Whether the cap held a connection back since the last call: the download is then
    /// limited by the cap, and more connections would add nothing.
    pub fn limiting(&self) -> bool {
        std::mem::take(&mut self.lock().waited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten seconds of connections asking as fast as they can, on a simulated clock: the bytes
    /// granted are the rate's within 1 %.
    #[test]
    fn the_rate_holds_over_ten_seconds() {
        for rate in [1 << 20, 50 << 20, 1 << 30, 3000] {
            let t0 = Instant::now();
            let mut b = Bucket::new(rate, t0);
            let mut now = t0;
            let end = t0 + Duration::from_secs(10);
            let mut got = 0u64;
            while now < end {
                match b.take(256 << 10, now) {
                    Ok(n) => got += n,
                    Err(w) => now += w,
                }
            }
            let want = rate as f64 * 10.0;
            let ratio = got as f64 / want;
            assert!((0.99..=1.01).contains(&ratio), "rate {rate}: {got} of {want} ({ratio})");
        }
    }

    #[test]
    fn grants_are_bounded_and_idle_time_buys_one_burst() {
        let t0 = Instant::now();
        let mut b = Bucket::new(100 << 20, t0);
        // Empty at first: wait for one grant's worth.
        let w = b.take(1 << 20, t0).unwrap_err();
        assert!(w <= Duration::from_millis(1), "{w:?}");
        // A minute idle buys a tenth of a second, not a minute.
        let later = t0 + Duration::from_secs(60);
        let mut burst = 0;
        while let Ok(n) = b.take(1 << 20, later) {
            assert!(n <= GRANT);
            burst += n;
        }
        assert_eq!(burst, 10 << 20);
        b.give_back(1000);
        assert_eq!(b.take(5000, later), Ok(1000));
        assert!(b.waited);
    }

    #[test]
    fn the_limiter_stops_when_asked() {
        let l = Limiter::new(1);
        // Drain what the first instant gives, then a stop ends the wait.
        let _ = l.take(1, &|| true);
        assert_eq!(l.take(GRANT, &|| true), None);
        assert!(l.limiting() && !l.limiting());
    }
}
