//! Credentials, and the cache that keeps them fresh.
//!
//! A secret is a `Secret`: its Debug prints `***` and it has no Display, so neither a message,
//! `-v`, `--json` nor a `{:?}` can show one. The access key ID is held the same way: it is
//! not a secret by AWS's rules, but nothing here needs to print it.
//!
//! Temporary credentials (STS, the container agent, instance metadata, a credential process
//! that gives an Expiration) are fetched again before they expire: once half their lifetime
//! has passed, and at the latest REFRESH_AHEAD before the end. A refresh that fails while the
//! credentials held are still good keeps them (the next request tries again); once they have
//! expired, the request fails as its connection's attempt, and is retried as any other.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::decode::url::failed::Failed;
use crate::decode::url::retry::Failure;

/// A secret value: printed as `***`, given out only by `expose`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The value, for the signature only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// One set of credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub key_id: Secret,
    pub secret: Secret,
    /// The session token of temporary credentials.
    pub token: Option<Secret>,
    /// When they stop working; None: never (long-term keys).
    pub expiry: Option<SystemTime>,
}

/// Where credentials come from: fetched again when they are due for a refresh.
pub trait Provider: Send + Sync {
    /// What the messages call it ("the environment", "profile snap in ~/.aws/credentials").
    fn name(&self) -> String;
    /// Fetches the current credentials; the failure's text names what failed, never a value.
    fn fetch(&self) -> Result<Credentials, Failed>;
}

/// Refresh no later than this before the expiry. EC2 hands out new role credentials at least
/// five minutes before the old ones expire (the instance metadata documentation), and the AWS
/// SDKs refresh within the last five to fifteen minutes.
pub const REFRESH_AHEAD: Duration = Duration::from_secs(5 * 60);

/// Whether credentials fetched at `fetched` that expire at `expiry` are due for a refresh at
/// `now`: past half their lifetime, or within REFRESH_AHEAD of the end.
pub fn due(now: SystemTime, fetched: SystemTime, expiry: Option<SystemTime>) -> bool {
    let Some(expiry) = expiry else { return false };
    let life = expiry.duration_since(fetched).unwrap_or(Duration::ZERO);
    let ahead = REFRESH_AHEAD.min(life / 2);
    now + ahead >= expiry
}

/// Whether credentials that expire at `expiry` may still sign a request at `now` (a minute
/// of margin for the request's way and the server's clock).
pub fn usable(now: SystemTime, expiry: Option<SystemTime>) -> bool {
    expiry.is_none_or(|e| now + Duration::from_secs(60) < e)
}

/// The provider the chain chose, and the credentials it gave last.
pub struct Cache {
    provider: Box<dyn Provider>,
    held: Mutex<(Credentials, SystemTime)>,
}

impl Cache {
    /// The first credentials, fetched now: a failure ends the run before any request.
    pub fn new(provider: Box<dyn Provider>) -> Result<Cache, Failed> {
        let first = provider
            .fetch()
            .map_err(|f| Failed { text: format!("{}: {}", provider.name(), f.text), ..f })?;
        Ok(Cache { provider, held: Mutex::new((first, SystemTime::now())) })
    }

    /// The credentials to sign with now, refreshed first when due. Connections that meet a
    /// refresh wait for the one that makes it (the lock is held across the fetch).
    pub fn current(&self) -> Result<Credentials, Failed> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let now = SystemTime::now();
        if due(now, held.1, held.0.expiry) {
            match self.provider.fetch() {
                Ok(c) => *held = (c, now),
                Err(f) if !usable(now, held.0.expiry) => {
                    return Err(Failed {
                        text: format!(
                            "the credentials from {} expired, and getting new ones failed: {}",
                            self.provider.name(),
                            f.text
                        ),
                        ..f
                    });
                }
                // Still good: keep them, try again at the next request.
                Err(_) => {}
            }
        }
        Ok(held.0.clone())
    }
}

/// An RFC 3339 time as AWS writes an Expiration (`2026-11-28T10:00:00Z`), through
/// `aws-smithy-types`' parser.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    use aws_smithy_types::date_time::{DateTime, Format};
    let t = DateTime::from_str(text.trim(), Format::DateTime).ok()?;
    SystemTime::try_from(t).ok()
}

/// The credentials in a JSON answer (the container agent's, instance metadata's, a credential
/// process's): `AccessKeyId`, `SecretAccessKey`, the session token under `token_key`, and
/// `Expiration`. The error names the field, never a value.
pub fn from_json(body: &[u8], token_key: &str) -> Result<Credentials, Failed> {
    let bad = |why: String| Failed::new(Failure::Protocol, why);
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON ({e})")))?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let need = |k: &str| text(k).ok_or_else(|| bad(format!("no {k} in the answer")));
    let expiry = match text("Expiration") {
        Some(e) => {
            Some(parse_time(e).ok_or_else(|| bad(format!("Expiration {e:?} is not a time")))?)
        }
        None => None,
    };
    Ok(Credentials {
        key_id: Secret::new(need("AccessKeyId")?),
        secret: Secret::new(need("SecretAccessKey")?),
        token: text(token_key).map(Secret::new),
        expiry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn secrets_never_show() {
        let c = Credentials {
            key_id: Secret::new("AKIDVISIBLE"),
            secret: Secret::new("wJalrXUtnFEMI"),
            token: Some(Secret::new("FwoGZXIvYXdzE")),
            expiry: None,
        };
        let shown = format!("{c:?} {c:#?}");
        for s in ["AKIDVISIBLE", "wJalrXUtnFEMI", "FwoGZXIvYXdzE"] {
            assert!(!shown.contains(s), "{shown}");
        }
    }

    #[test]
    fn refresh_at_half_life_or_five_minutes_ahead() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let s = Duration::from_secs;
        // One hour: due at 55 min.
        let hour = Some(t0 + s(3600));
        assert!(!due(t0 + s(3299), t0, hour) && due(t0 + s(3300), t0, hour));
        // Four seconds: due at two.
        let short = Some(t0 + s(4));
        assert!(!due(t0 + s(1), t0, short) && due(t0 + s(2), t0, short));
        // Already expired when fetched, or long-term keys.
        assert!(due(t0, t0, Some(t0)));
        assert!(!due(t0 + s(1 << 30), t0, None));
        assert!(usable(t0, None) && usable(t0, Some(t0 + s(61))) && !usable(t0, Some(t0 + s(60))));
    }

    #[test]
    fn json_credentials() {
        let body = br#"{"Code":"Success","AccessKeyId":"ASIA1","SecretAccessKey":"s","Token":"t",
            "Expiration":"2026-11-28T10:00:00Z"}"#;
        let c = from_json(body, "Token").unwrap();
        assert_eq!(c.key_id.expose(), "ASIA1");
        assert_eq!(c.token.as_ref().map(Secret::expose), Some("t"));
        let want = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_860_000);
        assert_eq!(c.expiry, Some(want));
        assert!(
            from_json(br#"{"AccessKeyId":"a"}"#, "Token")
                .unwrap_err()
                .text
                .contains("SecretAccessKey")
        );
        let e = from_json(
            br#"{"AccessKeyId":"a","SecretAccessKey":"hidden","Expiration":"soon"}"#,
            "Token",
        );
        assert!(!e.unwrap_err().text.contains("hidden"));
        assert!(from_json(b"<html>", "Token").is_err());
    }

    struct Counting(Arc<AtomicUsize>, Duration);
    impl Provider for Counting {
        fn name(&self) -> String {
            "counting".into()
        }
        fn fetch(&self) -> Result<Credentials, Failed> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            if n >= 2 {
                return Err(Failed::new(Failure::Refused, "down"));
            }
            Ok(Credentials {
                key_id: Secret::new(format!("K{n}")),
                secret: Secret::new("s"),
                token: None,
                expiry: Some(SystemTime::now() + self.1),
            })
        }
    }

    /// Credentials that are due are fetched again; a failed refresh keeps good ones.
    #[test]
    fn the_cache_refreshes_when_due() {
        let n = Arc::new(AtomicUsize::new(0));
        let cache = Cache::new(Box::new(Counting(n.clone(), Duration::from_secs(3600)))).unwrap();
        assert_eq!(cache.current().unwrap().key_id.expose(), "K0");
        assert_eq!(n.load(Ordering::SeqCst), 1);
        // Fetched 100 s ago, 90 s left: past half its life, due.
        let age = |c: &Cache| {
            let mut h = c.held.lock().unwrap();
            h.1 = SystemTime::now() - Duration::from_secs(100);
            h.0.expiry = Some(SystemTime::now() + Duration::from_secs(90));
        };
        age(&cache);
        assert_eq!(cache.current().unwrap().key_id.expose(), "K1");
        assert_eq!(n.load(Ordering::SeqCst), 2);
        // The third fetch fails; K1 is still good for 90 s: kept.
        age(&cache);
        assert_eq!(cache.current().unwrap().key_id.expose(), "K1");
        cache.held.lock().unwrap().0.expiry = Some(SystemTime::now());
        let e = cache.current().unwrap_err();
        assert!(e.text.contains("expired") && e.text.contains("counting"), "{}", e.text);
    }
}
