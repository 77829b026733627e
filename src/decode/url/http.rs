//! One GET, carried out (the action side of this module): ureq with rustls, the system's trust
//! store plus `--cacert`, the proxy `proxy.rs` chose, redirects followed as `redirect.rs`
//! allows, and every timeout set to `--stall-timeout`. The answer is handed back as it is,
//! whatever its status; the caller decides (fetch.rs, with `retry.rs` and `validator.rs`).

use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use headers::HeaderMapExt;
use ureq::Agent;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use url::Url;

use super::redirect;
use super::retry::{self, Failure};
use super::validator::{ContentRange, Validator};

/// The most header bytes a response may have (ureq stops reading at this bound and fails the
/// request: a server sending endless headers costs at most this much). Real responses carry
/// under 2 KiB; S3's and CDNs' with their x-amz-*/cf-* headers under 4 KiB.
const MAX_HEADER_BYTES: usize = 64 << 10;

/// Headers a source adds to every one of its requests, first and retries alike (an S3
/// object's SigV4 `Authorization`, `x-amz-date`, `x-amz-content-sha256`), made for that
/// request: its address and its Range. They are sent only to the source's own origin: a
/// redirect to another scheme, host or port gets none, as curl drops `Authorization`.
pub trait Sign: Send + Sync {
    /// The headers for a GET of `url` with `range` (the Range header's value, if any); Err:
    /// why the request cannot be signed (its credentials could not be had).
    fn headers(&self, url: &Url, range: Option<&str>) -> Result<Vec<(String, String)>, String>;
}

/// Whether two addresses share an origin (scheme, host, port): where a source's signature
/// may go.
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

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
    pub body: ureq::BodyReader<'static>,
}

/// A request that got no answer to read, or one not to follow.
#[derive(Debug)]
pub struct Failed {
    pub failure: Failure,
    pub text: String,
}

impl Failed {
    pub fn new(failure: Failure, text: impl Into<String>) -> Failed {
        Failed { failure, text: text.into() }
    }
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
        let proxy = super::proxy::choose(url, &|k| std::env::var(k).ok());
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
        let agent = Agent::new_with_config(config);
        agents.push((proxy, agent.clone()));
        Ok(agent)
    }

    /// GET `url`, bytes `start..=end` (`end` None: to the end; `ranged` false: no Range
    /// header, the whole file), with If-Range when `if_range` is given, signed by `sign` while
    /// at `url`'s origin; redirects followed.
    pub fn get(
        &self,
        url: &Url,
        range: Option<(u64, Option<u64>)>,
        if_range: Option<&str>,
        sign: Option<&dyn Sign>,
    ) -> Result<Answer, Failed> {
        let mut seen = vec![url.clone()];
        let mut at = url.clone();
        let range = range.map(|(start, end)| match end {
            Some(e) => format!("bytes={start}-{e}"),
            None => format!("bytes={start}-"),
        });
        loop {
            let agent = self.agent(&at)?;
            let mut req = agent.get(at.as_str());
            if let Some(value) = &range {
                req = req.header("Range", value);
                if let Some(v) = if_range {
                    req = req.header("If-Range", v);
                }
            }
            if let Some(s) = sign.filter(|_| same_origin(url, &at)) {
                let headers = s
                    .headers(&at, range.as_deref())
                    .map_err(|e| Failed::new(Failure::Protocol, format!("cannot sign: {e}")))?;
                for (name, value) in headers {
                    req = req.header(name, value);
                }
            }
            let resp = req.call().map_err(|e| failed(&e))?;
            let status = resp.status().as_u16();
            let headers = resp.headers();
            let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            if redirect::is_redirect(status) {
                let Some(location) = text("location") else {
                    return Err(Failed::new(
                        Failure::Protocol,
                        format!("{status} without a Location"),
                    ));
                };
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
            let body = resp.into_body().into_reader();
            return Ok(Answer {
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

/// The failure class and a short text of ureq's error.
fn failed(e: &ureq::Error) -> Failed {
    use ureq::Error as E;
    let failure = match e {
        E::HostNotFound => Failure::Dns,
        E::ConnectionFailed => Failure::Refused,
        E::Timeout(_) => Failure::Stalled,
        E::Tls(_) | E::Pem(_) | E::Rustls(_) => Failure::Tls,
        E::Io(io) => io_failure(io),
        E::Protocol(_) | E::BadUri(_) | E::Http(_) | E::InvalidProxyUrl => Failure::Protocol,
        _ => Failure::Dropped,
    };
    let text = match e {
        E::HostNotFound => "the host name does not resolve (DNS)".to_string(),
        E::Timeout(t) => format!("no answer for the stall timeout ({t})"),
        E::Rustls(r) => format!("TLS: {r}"),
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
