//! What identifies one version of the archive on the server (pure): the ETag, else the
//! Last-Modified date, that the first response gave, and what a later response must show.
//!
//! Every request after the first carries `If-Range` with it (RFC 9110 §13.1.5): a server
//! whose file changed answers 200 with the whole new file instead of 206, and a 206 that
//! carries another validator is refused as well, so two versions are never spliced.

/// The first response's validators, as sent (quoted ETag, HTTP-date).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Validator {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl Validator {
    /// From the response's header values; an ETag that is not one (RFC 9110 §8.8.3, checked
    /// by the `headers` crate) counts as none.
    pub fn new(etag: Option<&str>, last_modified: Option<&str>) -> Validator {
        let etag = etag.filter(|e| e.parse::<headers::ETag>().is_ok()).map(str::to_string);
        let last_modified =
            last_modified.filter(|d| httpdate::parse_http_date(d).is_ok()).map(str::to_string);
        Validator { etag, last_modified }
    }

    /// What `If-Range` carries: a strong ETag, else the Last-Modified date (a weak ETag may not
    /// be used there, RFC 9110 §13.1.5). None: nothing can tell a change, so no request after
    /// the first is made.
    pub fn if_range(&self) -> Option<&str> {
        self.etag.as_deref().filter(|e| !e.starts_with("W/")).or(self.last_modified.as_deref())
    }

    /// Why a response showing `now` is of another version than this one, or None when it is
    /// the same. A validator the response leaves out is not held against it: its 206 already
    /// answered our If-Range.
    pub fn changed(&self, now: &Validator) -> Option<String> {
        if let (Some(a), Some(b)) = (&self.etag, &now.etag)
            && a != b
        {
            return Some(format!("its ETag changed from {a} to {b}"));
        }
        if let (Some(a), Some(b)) = (&self.last_modified, &now.last_modified)
            && a != b
        {
            return Some(format!("its Last-Modified changed from {a} to {b}"));
        }
        None
    }
}

/// A Content-Range as the `headers` crate reads it: the range (None: `*`) and the complete
/// length (None: `*`).
pub type ContentRange = (Option<(u64, u64)>, Option<u64>);

/// Whether a 206's Content-Range is the one asked for: `start..=end` of `length` bytes (`end`
/// None: to the end). Anything else (another range, another length) is refused by the caller.
pub fn range_is(
    got: Option<ContentRange>,
    start: u64,
    end: Option<u64>,
    length: Option<u64>,
) -> bool {
    let Some((Some((a, b)), total)) = got else { return false };
    let end_ok = match (end, total) {
        (Some(e), Some(t)) => b == e.min(t.saturating_sub(1)),
        (None, Some(t)) => b + 1 == t,
        (_, None) => true,
    };
    a == start && b >= a && end_ok && (length.is_none() || total == length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_range_prefers_a_strong_etag() {
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT";
        let strong = Validator::new(Some("\"abc\""), Some(lm));
        assert_eq!(strong.if_range(), Some("\"abc\""));
        let weak = Validator::new(Some("W/\"abc\""), Some(lm));
        assert_eq!(weak.if_range(), Some(lm));
        assert_eq!(Validator::new(Some("W/\"abc\""), None).if_range(), None);
        assert_eq!(Validator::new(None, None).if_range(), None);
        // Not an ETag (unquoted), not a date: none.
        assert_eq!(Validator::new(Some("abc"), Some("yesterday")), Validator::default());
    }

    #[test]
    fn a_change_is_seen_in_either_validator() {
        let first = Validator::new(Some("\"1\""), Some("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert_eq!(first.changed(&first), None);
        assert_eq!(first.changed(&Validator::default()), None);
        let etag = Validator::new(Some("\"2\""), None);
        assert!(first.changed(&etag).unwrap().contains("ETag changed from \"1\" to \"2\""));
        let date = Validator::new(None, Some("Mon, 07 Nov 1994 08:49:37 GMT"));
        assert!(first.changed(&date).unwrap().contains("Last-Modified"));
    }

    #[test]
    fn content_range_must_be_the_one_asked() {
        let cr = |a, b, t| Some((Some((a, b)), t));
        assert!(range_is(cr(0, 99, Some(1000)), 0, Some(99), Some(1000)));
        assert!(range_is(cr(0, 99, Some(1000)), 0, Some(99), None));
        // The last piece is clipped to the length.
        assert!(range_is(cr(900, 999, Some(1000)), 900, Some(1099), Some(1000)));
        assert!(range_is(cr(5, 999, Some(1000)), 5, None, Some(1000)));
        assert!(!range_is(cr(0, 99, Some(1000)), 1, Some(99), Some(1000)));
        assert!(!range_is(cr(0, 98, Some(1000)), 0, Some(99), Some(1000)));
        assert!(!range_is(cr(0, 99, Some(1001)), 0, Some(99), Some(1000)));
        assert!(!range_is(Some((None, Some(1000))), 0, Some(99), Some(1000)));
        assert!(!range_is(None, 0, Some(99), Some(1000)));
    }
}
