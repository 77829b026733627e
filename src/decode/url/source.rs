//! Where the archive's bytes are asked for: a `Source` is an http(s) address and, for an S3
//! object, the `Sign` that signs each request to its endpoint. The connection code (fetch.rs,
//! mod.rs) handles every source alike: it passes `sign` to `Client::get`, which signs each
//! request as it is sent, so a retry, a piece and a redirect hop each get a fresh signature
//! with the credentials of the moment (refreshed before they expire), and a request to another
//! origin (a redirect off the endpoint) goes unsigned.
//!
//! `url::resolve` (mod.rs) turns an operand into a Source.

use std::sync::Arc;

use url::Url;

use super::failed::Failed;
use super::shown;

/// Signs requests to one endpoint (an S3 object's: `s3::sign::Signer`).
pub trait Sign: Send + Sync {
    /// Whether a request to `url` is signed: only its endpoint's origin (scheme, host, port).
    fn covers(&self, url: &Url) -> bool;

    /// The headers to add to a GET of `url` that carries `headers` (lower-case names: `range`,
    /// `if-range`), signed now. Their values hold credentials: they go on the request and
    /// nowhere else (never into a message).
    fn sign(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
    ) -> Result<Vec<(&'static str, String)>, Failed>;
}

/// One place the archive can be fetched from.
#[derive(Clone)]
pub struct Source {
    /// The operand as messages show it (`shown`: a password in a URL hidden).
    pub given: String,
    /// Where the first request goes.
    pub url: Url,
    /// Signs the requests to `url`'s origin; None for a plain URL or `--no-sign-request`.
    pub sign: Option<Arc<dyn Sign>>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("given", &self.given)
            .field("url", &shown(self.url.as_str()))
            .field("signed", &self.sign.is_some())
            .finish()
    }
}
