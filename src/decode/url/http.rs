//! One GET, carried out (the action side of this module): ureq with rustls, the system's trust
//! store plus `--cacert`, the proxy `proxy.rs` chose, redirects followed as `redirect.rs`
//! allows, and every timeout set to `--stall-timeout`. The answer is handed back as it is,
//! whatever its status; the caller decides (fetch.rs, with `retry.rs` and `validator.rs`).

use std::io::{self, Read};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use headers::HeaderMapExt;
use ureq::Agent;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{Connector, DefaultConnector};
use url::Url;

use super::failed::Failed;
use super::interim::MAX_HEADER_BYTES;
use super::redirect;
use super::retry::{self, Failure};
use super::source::Sign;
use super::validator::{ContentRange, Validator};

/// What a request needs besides its address.
#[derive(Clone, Debug)]
pub struct Settings {
    /// No byte for this long (resolving, connecting, headers, any read of the body) fails the
    /// attempt as a stall.
    pub stall: Duration,
    /// A PEM file of CA certificates trusted besides the system's.
    pub cacert: Option<std::path::PathBuf>,
    /// Connections kept open for reuse (one per parallel connection).
    pub connections: usize,
    /// No proxy, whatever the environment says: the credential endpoints on the machine or its
    /// link (EC2 instance metadata, the container agent), as the AWS SDKs reach them.
    pub direct: bool,
}

/// An answer: the address it came from after redirects, its status and the headers that
/// matter, and its body to read.
pub struct Answer {
    pub url: Url,
    pub status: u16,
    /// Content-Range as the `headers` crate read it: the range (None: `*`) and the length;
    /// None when absent or malformed.
    pub content_range: Option<ContentRange>,
    pub content_length: Option<u64>,
    pub validator: Validator,
    /// What a Retry-After header asks (429, 503).
    pub retry_after: Option<Duration>,
    /// S3's x-amz-bucket-region: an S3 error answer names the bucket's region in it.
    pub bucket_region: Option<String>,
    pub body: ureq::BodyReader<'static>,
}

/// The agents (one per proxy choice: a redirect may lead to a host NO_PROXY names) with their
/// connection pools, shared by every connection thread.
pub struct Client {
    settings: Settings,
    tls: TlsConfig,
    agents: Mutex<Vec<(Option<String>, Agent)>>,
}

impl Client {
    pub fn new(settings: Settings) -> Result<Client> {
        let roots = roots(settings.cacert.as_deref())?;
        let tls = TlsConfig::builder().root_certs(RootCerts::new_with_certs(&roots)).build();
        Ok(Client { settings, tls, agents: Mutex::new(Vec::new()) })
    }

    fn agent(&self, url: &Url) -> Result<Agent, Failed> {
        let proxy = match self.settings.direct {
            true => None,
            false => super::proxy::choose(url, &|k| std::env::var(k).ok()),
        };
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, a)) = agents.iter().find(|(p, _)| *p == proxy) {
            return Ok(a.clone());
        }
        let parsed = match &proxy {
            Some(p) => Some(ureq::Proxy::new(p).map_err(|e| {
                Failed::new(Failure::Protocol, format!("proxy {p} (from the environment): {e}"))
            })?),
            None => None,
        };
        let stall = Some(self.settings.stall);
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .accept_encoding("identity")
            .user_agent(concat!("fastuntar/", env!("CARGO_PKG_VERSION")))
            .max_response_header_size(MAX_HEADER_BYTES)
            .max_idle_connections_per_host(self.settings.connections.max(1))
            .max_idle_connections(self.settings.connections.max(1))
            .timeout_resolve(stall)
            .timeout_connect(stall)
            .timeout_send_request(stall)
            .timeout_recv_response(stall)
            .timeout_per_read(stall)
            .timeout_per_write(stall)
            .tls_config(self.tls.clone())
            .proxy(parsed)
            .build();
        // ureq's own chain (TCP, proxy, TLS), then `interim::Stepping` over each connection.
        let connector = DefaultConnector::new().chain(super::interim::Stepping);
        let agent = Agent::with_parts(config, connector, DefaultResolver::default());
        agents.push((proxy, agent.clone()));
        Ok(agent)
    }

    /// GET `url`, bytes `start..=end` (`end` None: to the end; `ranged` false: no Range
    /// header, the whole file), with If-Range when `if_range` is given; redirects followed.
    /// With `sign`, each request to an address it covers (its endpoint's origin) is signed
    /// as it is sent, a retry or a redirect hop included; one to another origin goes unsigned
    /// (a redirect off the endpoint carries no credentials, as curl drops Authorization).
    pub fn get(
        &self,
        url: &Url,
        sign: Option<&dyn Sign>,
        range: Option<(u64, Option<u64>)>,
        if_range: Option<&str>,
    ) -> Result<Answer, Failed> {
        let mut seen = vec![url.clone()];
        let mut at = url.clone();
        loop {
            let agent = self.agent(&at)?;
            let mut req = agent.get(at.as_str());
            let mut headers: Vec<(&str, String)> = Vec::new();
            if let Some((start, end)) = range {
                let value = match end {
                    Some(e) => format!("bytes={start}-{e}"),
                    None => format!("bytes={start}-"),
                };
                headers.push(("range", value));
                if let Some(v) = if_range {
                    headers.push(("if-range", v.to_string()));
                }
            }
            if let Some(s) = sign.filter(|s| s.covers(&at)) {
                let plain: Vec<(&str, &str)> =
                    headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let signed = s.sign(&at, &plain)?;
                headers.extend(signed);
            }
            for (name, value) in headers {
                req = req.header(name, value);
            }
            let resp = req.call().map_err(|e| failed(&e))?;
            let status = resp.status().as_u16();
            let headers = resp.headers();
            let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            // A redirect without a Location is an answer to report (S3's 301 PermanentRedirect
            // for a bucket in another region says where in its body).
            if redirect::is_redirect(status)
                && let Some(location) = text("location")
            {
                at = redirect::next(&at, location, &seen)
                    .map_err(|e| Failed::new(Failure::Protocol, e))?;
                seen.push(at.clone());
                continue;
            }
            let content_range = headers
                .get("content-range")
                .map(|_| headers.typed_get::<headers::ContentRange>())
                .map(|cr| cr.map(|c| (c.bytes_range(), c.bytes_len())))
                .unwrap_or(None);
            let content_length = text("content-length").and_then(|v| v.trim().parse().ok());
            let validator = Validator::new(text("etag"), text("last-modified"));
            let retry_after =
                text("retry-after").and_then(|v| retry::retry_after(v, SystemTime::now()));
            let bucket_region = text("x-amz-bucket-region").map(str::to_string);
            let body = resp.into_body().into_reader();
            return Ok(Answer {
                bucket_region,
                url: at,
                status,
                content_range,
                content_length,
                validator,
                retry_after,
                body,
            });
        }
    }
}

/// A request other than the archive's GETs: to a credential endpoint (instance metadata, the
/// container agent, STS). No redirect is followed (a 3xx is the answer), and the body is read
/// whole, up to a bound.
pub struct Call<'a> {
    pub method: &'a str,
    pub url: &'a Url,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The answer to a `Call`: status and body.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Client {
    /// Carries out `call`; a body longer than `limit` bytes fails it (a protocol error).
    pub fn call(&self, call: &Call, limit: u64) -> Result<Reply, Failed> {
        let agent = self.agent(call.url)?;
        let mut req = ureq::http::Request::builder().method(call.method).uri(call.url.as_str());
        for (k, v) in call.headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(call.body.to_vec())
            .map_err(|e| Failed::new(Failure::Protocol, format!("a request not made: {e}")))?;
        let resp = agent.run(req).map_err(|e| failed(&e))?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        resp.into_body()
            .into_reader()
            .take(limit + 1)
            .read_to_end(&mut body)
            .map_err(|e| Failed::new(io_failure(&e), format!("reading the answer: {e}")))?;
        if body.len() as u64 > limit {
            return Err(Failed::new(
                Failure::Protocol,
                format!("an answer of more than {limit} bytes"),
            ));
        }
        Ok(Reply { status, body })
    }
}

/// The failure class and a short text of ureq's error.
fn failed(e: &ureq::Error) -> Failed {
    use ureq::Error as E;
    let failure = match e {
        E::HostNotFound => Failure::Dns,
        E::ConnectionFailed => Failure::Refused,
        E::Timeout(_) => Failure::Stalled,
        E::Tls(_) | E::Pem(_) | E::Rustls(_) => Failure::Tls,
        E::Io(io) => io_failure(io),
        // A header past MAX_HEADER_BYTES is what this server sends, not a passing fault: the
        // same request would get it again (docs/SECURITY.md).
        E::LargeResponseHeader(..) => Failure::Protocol,
        E::Protocol(_) | E::BadUri(_) | E::Http(_) | E::InvalidProxyUrl => Failure::Protocol,
        _ => Failure::Dropped,
    };
    let text = match e {
        E::HostNotFound => "the host name does not resolve (DNS)".to_string(),
        E::Timeout(t) => format!("no answer for the stall timeout ({t})"),
        E::Rustls(r) => format!("TLS: {r}"),
        E::LargeResponseHeader(..) => {
            format!("the response header is larger than {} KiB", MAX_HEADER_BYTES >> 10)
        }
        E::Io(io) if io_failure(io) == Failure::Refused => format!("cannot connect: {io}"),
        E::Io(io) if io_failure(io) == Failure::Dns => {
            format!("the host name does not resolve (DNS): {io}")
        }
        E::Io(io) if io_failure(io) == Failure::Tls => format!("TLS: {io}"),
        e => e.to_string(),
    };
    Failed::new(failure, text)
}

/// An I/O error's failure class: refused/unreachable when connecting, a TLS alert or
/// certificate error that rustls surfaced through the stream, a timeout, else a drop.
pub fn io_failure(e: &io::Error) -> Failure {
    use io::ErrorKind as K;
    // ureq's body reader passes its own per-read timeout on as an I/O error of kind Other.
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>());
    if let Some(ureq::Error::Timeout(_)) = inner {
        return Failure::Stalled;
    }
    match e.kind() {
        K::ConnectionRefused | K::HostUnreachable | K::NetworkUnreachable => Failure::Refused,
        K::TimedOut | K::WouldBlock => Failure::Stalled,
        K::InvalidData if tls_error(e) => Failure::Tls,
        // std's getaddrinfo error (library/std/src/sys/net: "failed to lookup address
        // information: ..."), which ureq passes on as an I/O error.
        _ if e.to_string().contains("failed to lookup address") => Failure::Dns,
        _ => Failure::Dropped,
    }
}

fn tls_error(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<ureq::Error>() || inner.to_string().contains("certificate"))
}

/// The system's trust store (rustls-native-certs: SSL_CERT_FILE/SSL_CERT_DIR, else the
/// distribution's bundle, /etc/ssl/certs here) and the certificates of `cacert`.
fn roots(cacert: Option<&Path>) -> Result<Vec<Certificate<'static>>> {
    let native = rustls_native_certs::load_native_certs();
    let mut roots: Vec<Certificate<'static>> =
        native.certs.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect();
    if let Some(path) = cacert {
        let pem = std::fs::read(path)
            .with_context(|| format!("--cacert {}: cannot read", path.display()))?;
        let before = roots.len();
        for item in ureq::tls::parse_pem(&pem) {
            match item {
                Ok(PemItem::Certificate(c)) => roots.push(c),
                Ok(_) => {}
                Err(e) => bail!("--cacert {}: {e}", path.display()),
            }
        }
        if roots.len() == before {
            bail!("--cacert {}: no PEM certificate in it", path.display());
        }
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How ureq's errors are classed for retrying: a header past the bound is final (issue 40:
    /// it was retried 64 times, as a dropped connection).
    #[test]
    fn ureq_errors_classed() {
        let class = |e: ureq::Error| failed(&e).failure;
        let large = ureq::Error::LargeResponseHeader(65_553, MAX_HEADER_BYTES);
        assert!(failed(&large).text.contains("larger than 64 KiB"));
        assert_eq!(class(large), Failure::Protocol);
        assert_eq!(class(ureq::Error::Timeout(ureq::Timeout::RecvBody)), Failure::Stalled);
        assert_eq!(class(ureq::Error::HostNotFound), Failure::Dns);
        assert_eq!(class(ureq::Error::ConnectionFailed), Failure::Refused);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(class(ureq::Error::Io(reset)), Failure::Dropped);
        // A body read's timeout, as ureq's BodyReader returns it ("connection dropped
        // (timeout: per read)" before, on a thin link).
        let per_read = ureq::Error::Timeout(ureq::Timeout::PerRead).into_io();
        assert_eq!(per_read.kind(), io::ErrorKind::Other);
        assert_eq!(io_failure(&per_read), Failure::Stalled);
    }
}
