//! When to try again, and how long to wait first (pure).
//!
//! A connection that fails is retried from the byte where it stopped. Its count of failures
//! in a row starts again at the first byte a retry brings, so a mirror that drops connections
//! every few minutes never runs out of retries, and one that is down for good is given up
//! after `--retries` attempts spread over about an hour (`backoff`).

use std::time::{Duration, SystemTime};

/// `--retries` by default: failures in a row, without a byte between them, before a connection
/// gives up. With `backoff`'s waits (0, 1, 2, 4, 8, 16, 32, then 60 s each) 64 retries wait
/// 3,483 s: a mirror may be away for about an hour (`backoff_sum` in the tests).
pub const DEFAULT_RETRIES: u32 = 64;

/// The longest wait between two attempts (and the cap on what Retry-After may ask: a hostile
/// or confused server saying "in a year" does not hang the run for a year).
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Retry-After beyond this is taken as this (10 minutes): a server that announces a longer
/// maintenance is asked again then, and counts one retry.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// The wait before retry number `attempt` (1 for the first retry of a failure in a row): the
/// first is at once (a dropped connection is usually a one-off, and a retry costs one
/// request), then 1 s doubling up to MAX_WAIT.
pub fn backoff(attempt: u32) -> Duration {
    match attempt {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs(1u64 << (n - 2).min(6)).min(MAX_WAIT),
    }
}

/// What a failure is, as far as retrying goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The host name did not resolve.
    Dns,
    /// Nothing listens there (ECONNREFUSED), or the host is unreachable.
    Refused,
    /// The TLS handshake or the certificate failed.
    Tls,
    /// No byte for --stall-timeout (connect, headers or body).
    Stalled,
    /// The connection ended or failed in the middle (reset, EOF before Content-Length).
    Dropped,
    /// The server answered with this status.
    Status(u16),
    /// The server's answer was malformed or inconsistent (a Content-Range other than asked, a
    /// header past its bound): a server that says wrong things is not asked again.
    Protocol,
}

/// Whether `failure` is worth another attempt. On the first request DNS, a refused connection
/// and TLS are final (a typo or a wrong port: one line at once, as curl); later a mirror
/// restarting may refuse for a while, so only TLS stays final. Statuses: 408, 429 and 5xx
/// other than 501 (Not Implemented) and 505 (HTTP Version Not Supported) are temporary; every
/// other 4xx is final (403, 404, 410, ...).
pub fn transient(failure: Failure, first: bool) -> bool {
    match failure {
        Failure::Dns | Failure::Refused => !first,
        Failure::Tls | Failure::Protocol => false,
        Failure::Stalled | Failure::Dropped => true,
        Failure::Status(s) => {
            matches!(s, 408 | 429) || (500..600).contains(&s) && s != 501 && s != 505
        }
    }
}

/// The wait a Retry-After header asks for: delay-seconds or an HTTP-date (RFC 9110 §10.2.3;
/// the date through `httpdate`), at most MAX_RETRY_AFTER; None when it is neither.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The wait before retry `attempt`: what the server asked for, else `backoff`.
pub fn wait(attempt: u32, asked: Option<Duration>) -> Duration {
    asked.unwrap_or_else(|| backoff(attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_minute() {
        let secs: Vec<u64> = (1..=10).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(secs, [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX), MAX_WAIT);
    }

    /// The default survives a mirror that is away for about an hour.
    #[test]
    fn backoff_sum() {
        let total: u64 = (1..=DEFAULT_RETRIES).map(|a| backoff(a).as_secs()).sum();
        assert_eq!(total, 3483);
        assert!((3000..4000).contains(&total));
    }

    #[test]
    fn what_is_retried() {
        for s in [408, 429, 500, 502, 503, 504, 599] {
            assert!(transient(Failure::Status(s), true), "{s}");
        }
        for s in [400, 401, 403, 404, 410, 416, 501, 505] {
            assert!(!transient(Failure::Status(s), false), "{s}");
        }
        assert!(!transient(Failure::Dns, true) && transient(Failure::Dns, false));
        assert!(!transient(Failure::Refused, true) && transient(Failure::Refused, false));
        assert!(!transient(Failure::Tls, false) && !transient(Failure::Protocol, false));
        assert!(transient(Failure::Stalled, true) && transient(Failure::Dropped, true));
    }

    #[test]
    fn retry_after_seconds_or_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(retry_after("99999999", now), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-1", now), None);
        assert_eq!(wait(3, Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert_eq!(wait(3, None), Duration::from_secs(2));
    }
}
