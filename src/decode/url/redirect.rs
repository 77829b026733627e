//! Which redirects are followed (pure): at most MAX_HOPS, to http or https only, never from
//! https down to http, and never back to an address already visited (a loop).

use url::Url;

/// Redirects followed for one request (curl follows 50 with -L, browsers ~20, ureq 10):
/// Agave's RPC nodes answer with one, a mirror behind a CDN two or three.
pub const MAX_HOPS: usize = 10;

/// Whether `status` is a redirect that carries a Location to follow with a GET.
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The next address after `from` answered with `location`, given the addresses `seen` so far
/// for this request (`from` among them); Err says why it is not followed.
pub fn next(from: &Url, location: &str, seen: &[Url]) -> Result<Url, String> {
    let mut to = from
        .join(location.trim())
        .map_err(|e| format!("redirect to an invalid address ({e}): {location:?}"))?;
    to.set_fragment(None);
    if !matches!(to.scheme(), "http" | "https") {
        return Err(format!("redirect to {to} refused: only http and https are followed"));
    }
    if from.scheme() == "https" && to.scheme() == "http" {
        return Err(format!("redirect from https to http ({to}) refused"));
    }
    if seen.contains(&to) {
        return Err(format!("redirect loop: back to {to}"));
    }
    if seen.len() > MAX_HOPS {
        return Err(format!("more than {MAX_HOPS} redirects (the last to {to})"));
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn relative_absolute_and_query_strings() {
        let from = u("https://rpc.example/snapshot.tar.zst");
        let seen = [from.clone()];
        assert_eq!(
            next(&from, "/snapshot-1-abc.tar.zst", &seen).unwrap().as_str(),
            "https://rpc.example/snapshot-1-abc.tar.zst"
        );
        let presigned = "https://cdn.example/a/b.tar.zst?X-Amz-Signature=ab%2Fcd&X-Amz-Expires=60";
        assert_eq!(next(&from, presigned, &seen).unwrap().as_str(), presigned);
        assert_eq!(next(&from, "x#frag", &seen).unwrap().as_str(), "https://rpc.example/x");
    }

    #[test]
    fn downgrades_loops_and_long_chains_are_refused() {
        let from = u("https://a.example/x");
        let e = next(&from, "http://a.example/x", std::slice::from_ref(&from)).unwrap_err();
        assert!(e.contains("from https to http"), "{e}");
        assert!(next(&u("http://a/x"), "https://a/y", &[]).is_ok());
        assert!(next(&from, "ftp://a/x", &[]).unwrap_err().contains("only http and https"));
        let e = next(&u("https://a/y"), "/x", &[u("https://a/x"), u("https://a/y")]).unwrap_err();
        assert!(e.contains("redirect loop"), "{e}");
        let seen: Vec<Url> = (0..=MAX_HOPS).map(|i| u(&format!("https://a/{i}"))).collect();
        assert!(next(&from, "/next", &seen).unwrap_err().contains("more than 10 redirects"));
        assert!(next(&from, "/next", &seen[..MAX_HOPS]).is_ok());
        assert!(is_redirect(307) && !is_redirect(304) && !is_redirect(200));
    }
}
