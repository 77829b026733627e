//! A real HTTP/1.1 server on 127.0.0.1 for the URL suite (tests/url.rs), started and stopped by
//! each test, that serves one archive and breaks the exchange on demand, byte-exact: a
//! connection cut after byte N of the archive, a stall at byte N, statuses before the archive,
//! no Range support, an ETag that changes, a wrong Content-Range, a length other than the
//! bytes, redirect chains and loops, HEAD refused; over TLS with a certificate made at test
//! time (rcgen, rustls). Requests are read with `httparse`; responses are written by hand, so
//! a fault lands on the byte asked for. docs/TESTING.md says why this server and not another.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The archive's path; others: `/r/N` redirects N times, `/loop/a` and `/loop/b` redirect to
/// each other, `/down` redirects from https to http (`Faults::downgrade_to`), `/forbidden` is 403,
/// `/endless-headers` sends 4 MiB of headers, `/huge-header` one header line of 4 MiB,
/// `/slow-headers` a byte every 200 ms, anything else 404.
pub const ARCHIVE: &str = "/archive";

/// The faults a server injects. Offsets are bytes of the archive.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Each response whose body reaches one of these offsets stops there: the connection is
    /// closed after the byte before it (each offset once).
    pub cut_at: Vec<u64>,
    /// Once, at this offset, the response pauses this long before its next byte.
    pub stall_at: Option<(u64, Duration)>,
    /// Statuses answered to the first requests of the archive, in turn, with a Retry-After (0:
    /// that request is served).
    pub statuses: Vec<(u16, Option<&'static str>)>,
    /// Range ignored: every GET gets the whole archive, 200.
    pub no_range: bool,
    /// Neither ETag nor Last-Modified sent.
    pub no_validator: bool,
    /// After this many archive requests the ETag changes (and so If-Range fails: 200).
    pub change_etag_after: Option<usize>,
    /// After this many archive requests Content-Range is off by one byte.
    pub wrong_range_after: Option<usize>,
    /// The length announced (Content-Length, Content-Range) exceeds the archive by this much
    /// (the bytes end at the archive's end, and a range past it gets 416).
    pub announce_extra: u64,
    /// The length announced is this much less than the archive (every byte is sent).
    pub announce_less: u64,
    /// Where `/down` redirects (an http:// address).
    pub downgrade_to: Option<String>,
    /// Bytes a second this server sends at most, all its connections together (a peer's
    /// uplink).
    pub rate: Option<u64>,
    /// The server dies (every connection closed, new ones refused) once the body bytes of
    /// every server sharing this counter reach this many; every server given the counter
    /// adds its bytes to it.
    pub die_when: Option<(Arc<AtomicU64>, u64)>,
    /// At `die_when`'s mark the server hangs instead: its connections stay open and send
    /// nothing more (a black-holed mirror), until the server is dropped.
    pub hang: bool,
    /// Interim answers (`100 Continue`, `103 Early Hints`: the status line and its headers)
    /// sent before every answer to the archive, in one write with that answer's head and its
    /// first bytes, as a server that flushes them together does.
    pub interim: Vec<&'static str>,
    /// The first interim answer is written on its own, and the rest of the answer after this
    /// pause: the client reads the interim answer alone, and what follows in reads of its own.
    pub interim_apart: Option<Duration>,
    /// The first N answers to the archive send their bytes K at a time, one write every D
    /// (N, K, D): a trickle, for `--min-rate`.
    pub trickle: Option<(usize, usize, Duration)>,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub range: Option<String>,
    pub if_range: Option<String>,
    pub accept_encoding: Option<String>,
    /// What would carry credentials: Authorization, and every x-amz-* header's name.
    pub authorization: Option<String>,
    pub amz_headers: Vec<String>,
}

struct State {
    archive: Vec<u8>,
    faults: Mutex<Faults>,
    seen: Mutex<Vec<Seen>>,
    archive_requests: AtomicUsize,
    /// TCP connections accepted.
    accepted: AtomicUsize,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// The rate cap's bucket: bytes that may be sent now, as of when.
    bucket: Mutex<(f64, Instant)>,
    /// Its own address (to wake its accept loop when it dies).
    addr: SocketAddr,
    /// Body bytes sent, and when each write of them ended.
    sent: Mutex<Vec<(Instant, u64)>>,
    /// Killed (`Faults::die_when`): its connections, to close them.
    dead: AtomicBool,
    /// Hung (`Faults::hang`), and dropped (a hung body then ends).
    hung: AtomicBool,
    stopped: AtomicBool,
    open: Mutex<Vec<TcpStream>>,
}

/// Bytes a server writes at a time when it caps its rate or logs what it sent: small enough
/// that the cap is smooth at 1 MB/s.
const CHUNK: usize = 16 << 10;

pub struct Server {
    pub addr: SocketAddr,
    scheme: &'static str,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    /// Watches the shared count of `Faults::die_when`.
    watch: Option<JoinHandle<()>>,
}

const ETAG_1: &str = "\"v1\"";
const ETAG_2: &str = "\"v2\"";
const LAST_MODIFIED: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

/// Connections a server accepts before it refuses more: bounds a runaway client loop.
const MAX_CONNECTIONS: usize = 2000;

impl Server {
    pub fn start(archive: Vec<u8>, faults: Faults) -> Server {
        Server::with_tls(archive, faults, None)
    }

    pub fn with_tls(
        archive: Vec<u8>,
        faults: Faults,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let state = Arc::new(State {
            archive,
            faults: Mutex::new(faults),
            seen: Mutex::new(Vec::new()),
            archive_requests: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            tls,
            bucket: Mutex::new((0.0, Instant::now())),
            addr,
            sent: Mutex::new(Vec::new()),
            dead: AtomicBool::new(false),
            hung: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            for (n, conn) in listener.incoming().enumerate() {
                // Dead: the listener is dropped, so new connections are refused.
                if sp.load(Ordering::Relaxed)
                    || n >= MAX_CONNECTIONS
                    || st.dead.load(Ordering::Relaxed)
                {
                    return;
                }
                let Ok(conn) = conn else { continue };
                st.accepted.fetch_add(1, Ordering::Relaxed);
                if let Ok(c) = conn.try_clone() {
                    st.open.lock().unwrap().push(c);
                }
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        // A server that dies at a shared mark dies when the count passes it, whoever sent the
        // bytes: one the client has stopped asking (a source kept out as slow) dies too.
        let watch = state.faults.lock().unwrap().die_when.is_some().then(|| {
            let (st, sp) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                while !sp.load(Ordering::Relaxed) && !st.dead_or_hung() {
                    st.check_mark();
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        });
        Server { addr, scheme, state, stop, accept: Some(accept), watch }
    }

    /// The URL of `path` on this server (`127.0.0.1`, or `localhost` for TLS's name check).
    pub fn url(&self, path: &str) -> String {
        self.url_as(if self.scheme == "https" { "localhost" } else { "127.0.0.1" }, path)
    }

    pub fn url_as(&self, host: &str, path: &str) -> String {
        format!("{}://{host}:{}{path}", self.scheme, self.addr.port())
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::Relaxed)
    }

    pub fn archive_requests(&self) -> usize {
        self.state.archive_requests.load(Ordering::Relaxed)
    }

    /// Changes the faults from now on.
    pub fn set_faults(&self, faults: Faults) {
        *self.state.faults.lock().unwrap() = faults;
    }

    /// Body bytes sent so far, and when each write of them ended.
    pub fn sent(&self) -> Vec<(Instant, u64)> {
        self.state.sent.lock().unwrap().clone()
    }

    /// Whether it died or hung (`Faults::die_when`).
    pub fn dead(&self) -> bool {
        self.state.dead_or_hung()
    }
}

impl State {
    /// Kills the server: every connection shut, and the accept loop woken to drop the
    /// listener.
    fn die(&self) {
        if self.dead.swap(true, Ordering::Relaxed) {
            return;
        }
        for c in self.open.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
        let _ = TcpStream::connect(self.addr);
    }

    fn dead_or_hung(&self) -> bool {
        self.dead.load(Ordering::Relaxed) || self.hung.load(Ordering::Relaxed)
    }

    /// Dies (or hangs) once the shared count of `Faults::die_when` has reached its mark.
    fn check_mark(&self) {
        let (die, hang) = {
            let f = self.faults.lock().unwrap();
            (f.die_when.clone(), f.hang)
        };
        let Some((count, at)) = die else { return };
        if count.load(Ordering::Relaxed) < at {
            return;
        }
        match hang {
            true => self.hung.store(true, Ordering::Relaxed),
            false => self.die(),
        }
    }

    /// Waits until the rate cap lets `n` more bytes go.
    fn pace(&self, rate: u64, n: usize) {
        loop {
            let wait = {
                let mut b = self.bucket.lock().unwrap();
                let now = Instant::now();
                // At most a tenth of a second's worth saved up.
                let cap = (rate as f64 / 10.0).max(CHUNK as f64);
                b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * rate as f64).min(cap);
                b.1 = now;
                if b.0 >= n as f64 {
                    b.0 -= n as f64;
                    return;
                }
                Duration::from_secs_f64((n as f64 - b.0) / rate as f64)
            };
            std::thread::sleep(wait);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.state.stopped.store(true, Ordering::Relaxed);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        for t in [self.accept.take(), self.watch.take()].into_iter().flatten() {
            let _ = t.join();
        }
    }
}

/// Serves one connection's requests (keep-alive) until it closes, a fault closes it, or 10 s
/// pass without a request.
fn serve(conn: TcpStream, st: &State) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = conn.set_nodelay(true);
    match &st.tls {
        Some(cfg) => {
            let Ok(tls) = rustls::ServerConnection::new(cfg.clone()) else { return };
            let raw = conn.try_clone().ok();
            let mut s = rustls::StreamOwned::new(tls, conn);
            requests(&mut s, st, raw.as_ref());
        }
        None => {
            let raw = conn.try_clone().ok();
            let mut s = conn;
            requests(&mut s, st, raw.as_ref());
        }
    }
}

fn requests(s: &mut (impl Read + Write), st: &State, raw: Option<&TcpStream>) {
    let mut buf = Vec::new();
    loop {
        let Some(req) = read_request(s, &mut buf) else { return };
        st.seen.lock().unwrap().push(req.clone());
        match respond(s, st, &req) {
            Ok(true) => {}
            _ => {
                let _ = s.flush();
                if let Some(r) = raw {
                    let _ = r.shutdown(Shutdown::Both);
                }
                return;
            }
        }
    }
}

fn read_request(s: &mut impl Read, buf: &mut Vec<u8>) -> Option<Seen> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(len)) = req.parse(buf) {
            let get = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
            };
            let seen = Seen {
                method: req.method?.to_string(),
                path: req.path?.to_string(),
                range: get("range"),
                if_range: get("if-range"),
                accept_encoding: get("accept-encoding"),
                authorization: get("authorization"),
                amz_headers: req
                    .headers
                    .iter()
                    .map(|h| h.name.to_ascii_lowercase())
                    .filter(|n| n.starts_with("x-amz-"))
                    .collect(),
            };
            buf.drain(..len);
            return Some(seen);
        }
        if buf.len() > 64 << 10 {
            return None;
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Writes the answer to `req`; Ok(false) when the connection is to be closed.
fn respond(s: &mut impl Write, st: &State, req: &Seen) -> io::Result<bool> {
    let f = st.faults.lock().unwrap().clone();
    if req.method == "HEAD" {
        write!(s, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nAllow: GET\r\n\r\n")?;
        return Ok(true);
    }
    let path = req.path.split('?').next().unwrap_or("");
    let redirect = |s: &mut dyn Write, to: &str| {
        write!(s, "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n")
            .map(|()| true)
    };
    if let Some(n) = path.strip_prefix("/r/") {
        let n: u32 = n.parse().unwrap_or(0);
        let query = req.path.split_once('?').map_or(String::new(), |(_, q)| format!("?{q}"));
        let to = if n <= 1 { format!("{ARCHIVE}{query}") } else { format!("/r/{}{query}", n - 1) };
        return redirect(s, &to);
    }
    match path {
        "/loop/a" => return redirect(s, "/loop/b"),
        "/loop/b" => return redirect(s, "/loop/a"),
        "/down" => return redirect(s, f.downgrade_to.as_deref().unwrap_or("http://127.0.0.1:1/")),
        "/endless-headers" => {
            // A header section that never ends (at most 4 MiB from here).
            write!(s, "HTTP/1.1 200 OK\r\n")?;
            for i in 0..(4 << 20) / 64 {
                write!(s, "X-Pad-{i:08}: {}\r\n", "a".repeat(40))?;
            }
            return Ok(false);
        }
        "/huge-header" => {
            // One header line of 4 MiB: past any bound on the header section's bytes, but a
            // single header (the count of headers is not what stops it).
            write!(s, "HTTP/1.1 200 OK\r\nX-Pad: ")?;
            let line = vec![b'a'; 64 << 10];
            for _ in 0..64 {
                s.write_all(&line)?;
            }
            return Ok(false);
        }
        "/slow-headers" => {
            // Slowloris: a header byte every 200 ms, for at most 10 s.
            for b in b"HTTP/1.1 200 OK\r\nX-Slow: ".iter().chain([b'a'; 50].iter()) {
                s.write_all(&[*b])?;
                s.flush()?;
                std::thread::sleep(Duration::from_millis(200));
            }
            return Ok(false);
        }
        "/forbidden" => {
            write!(s, "HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden")?;
            return Ok(true);
        }
        ARCHIVE => {}
        _ => {
            write!(s, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")?;
            return Ok(true);
        }
    }
    let n = st.archive_requests.fetch_add(1, Ordering::Relaxed);
    // The answer's head, written with its first bytes (`body`), after the interim answers.
    let mut head: Vec<u8> =
        f.interim.iter().flat_map(|i| format!("{i}\r\n\r\n").into_bytes()).collect();
    if let (Some(pause), Some(first)) = (f.interim_apart, f.interim.first()) {
        let alone = first.len() + 4;
        s.write_all(&head[..alone])?;
        s.flush()?;
        std::thread::sleep(pause);
        head.drain(..alone);
    }
    if let Some((status, retry_after)) = f.statuses.get(n).filter(|s| s.0 != 0) {
        let ra = retry_after.map_or(String::new(), |r| format!("Retry-After: {r}\r\n"));
        write!(head, "HTTP/1.1 {status} Try Later\r\n{ra}Content-Length: 5\r\n\r\nlater")?;
        s.write_all(&head)?;
        return Ok(true);
    }
    let etag = match f.change_etag_after {
        Some(after) if n >= after => ETAG_2,
        _ => ETAG_1,
    };
    let real = st.archive.len() as u64;
    let announced = real + f.announce_extra - f.announce_less;
    let validators = if f.no_validator {
        String::new()
    } else {
        format!("ETag: {etag}\r\nLast-Modified: {LAST_MODIFIED}\r\n")
    };
    let wanted = req.range.as_deref().filter(|_| !f.no_range).and_then(parse_range);
    let if_range_ok = req.if_range.as_deref().is_none_or(|v| v == etag || v == LAST_MODIFIED);
    let (start, end) = match wanted {
        Some((a, b)) if if_range_ok => {
            // A file shorter than announced ends at its real length: 416 past it.
            if a >= real.min(announced) {
                write!(
                    head,
                    "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{announced}\r\n\
                     Content-Length: 0\r\n\r\n"
                )?;
                s.write_all(&head)?;
                return Ok(true);
            }
            let b = b.unwrap_or(announced - 1).min(announced - 1);
            let shift = u64::from(f.wrong_range_after.is_some_and(|after| n >= after));
            write!(
                head,
                "HTTP/1.1 206 Partial Content\r\n{validators}Accept-Ranges: bytes\r\n\
                 Content-Range: bytes {}-{}/{announced}\r\nContent-Length: {}\r\n\r\n",
                a + shift,
                b + shift,
                b + 1 - a
            )?;
            (a, b + 1)
        }
        _ => {
            write!(head, "HTTP/1.1 200 OK\r\n{validators}Content-Length: {announced}\r\n\r\n")?;
            (0, announced)
        }
    };
    let sent_end = if f.announce_less > 0 && end == announced { real } else { end.min(real) };
    let trickle = f.trickle.filter(|t| n < t.0).map(|t| (t.1, t.2));
    body(s, st, (start, sent_end), head, trickle)?;
    // Fewer bytes than announced: the connection ends short, as a truncated file would.
    Ok(end <= real)
}

/// `bytes=A-B` or `bytes=A-` (the forms fastuntar sends).
pub fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    Some((a.parse().ok()?, if b.is_empty() { None } else { Some(b.parse().ok()?) }))
}

/// Writes `head`, then archive bytes `start..end` (the first of them in the same write),
/// applying a cut or a stall that falls inside; with `trickle` (K, D), K bytes every D.
fn body(
    s: &mut impl Write,
    st: &State,
    (start, end): (u64, u64),
    mut head: Vec<u8>,
    trickle: Option<(usize, Duration)>,
) -> io::Result<()> {
    if start == end {
        s.write_all(&head)?;
    }
    let mut at = start;
    while at < end {
        let (cut, stall) = {
            let mut f = st.faults.lock().unwrap();
            let cut = f.cut_at.iter().position(|&c| c > at && c < end);
            let cut = cut.map(|i| f.cut_at.remove(i));
            let stall = f.stall_at.filter(|&(o, _)| o >= at && o < end);
            (cut, stall)
        };
        let stop = match (cut, stall) {
            (Some(c), Some((o, _))) => c.min(o),
            (Some(c), None) => c,
            (None, Some((o, _))) => o,
            (None, None) => end,
        };
        let stop = match trickle {
            Some((k, _)) => stop.min(at + k as u64),
            None => stop,
        };
        let paced = f_rate(st).is_some() || f_dies(st);
        if paced || st.dead.load(Ordering::Relaxed) {
            if !head.is_empty() {
                s.write_all(&head)?;
                head.clear();
            }
            let mut k = at;
            while k < stop {
                while st.hung.load(Ordering::Relaxed) && !st.stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if st.dead.load(Ordering::Relaxed) || st.stopped.load(Ordering::Relaxed) {
                    return Err(io::Error::other("dead"));
                }
                let n = ((stop - k) as usize).min(CHUNK);
                if let Some(rate) = f_rate(st) {
                    st.pace(rate, n);
                }
                s.write_all(&st.archive[k as usize..k as usize + n])?;
                s.flush()?;
                k += n as u64;
                sent(st, n as u64);
            }
        } else {
            head.extend_from_slice(&st.archive[at as usize..stop as usize]);
            s.write_all(&head)?;
            s.flush()?;
            head.clear();
            sent(st, stop - at);
        }
        if let Some((_, every)) = trickle {
            std::thread::sleep(every);
        }
        at = stop;
        if cut == Some(stop) {
            return Err(io::Error::other("cut"));
        }
        if let Some((o, d)) = stall
            && o == stop
        {
            st.faults.lock().unwrap().stall_at = None;
            std::thread::sleep(d);
        }
    }
    Ok(())
}

fn f_rate(st: &State) -> Option<u64> {
    st.faults.lock().unwrap().rate
}

fn f_dies(st: &State) -> bool {
    st.faults.lock().unwrap().die_when.is_some()
}

/// Counts `n` body bytes sent; kills the server once the shared count reaches its mark.
fn sent(st: &State, n: u64) {
    {
        let mut log = st.sent.lock().unwrap();
        let total = log.last().map_or(0, |l| l.1) + n;
        log.push((Instant::now(), total));
    }
    let count = st.faults.lock().unwrap().die_when.as_ref().map(|d| d.0.clone());
    if let Some(count) = count {
        count.fetch_add(n, Ordering::Relaxed);
        st.check_mark();
    }
}

/// A CA and a server certificate signed by it for `names`, made now: (the CA's PEM, the server
/// config).
pub fn tls_for(names: &[&str]) -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "fastuntar test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = CertificateParams::new(names).unwrap().signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca.pem(), Arc::new(config))
}

/// A forward proxy on 127.0.0.1 that tunnels `CONNECT host:port` (what a client sends for an
/// https URL through `https_proxy`), and counts the tunnels it made.
pub struct Proxy {
    pub addr: SocketAddr,
    pub tunnels: Arc<AtomicUsize>,
}

impl Proxy {
    pub fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let tunnels = Arc::new(AtomicUsize::new(0));
        let count = tunnels.clone();
        // Detached: it ends with the test process; each tunnel ends when either side closes.
        std::thread::spawn(move || {
            for conn in listener.incoming().take(MAX_CONNECTIONS) {
                let Ok(mut client) = conn else { continue };
                let count = count.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let Some(req) = read_request(&mut client, &mut buf) else { return };
                    if req.method != "CONNECT" {
                        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n");
                        return;
                    }
                    let Ok(server) = TcpStream::connect(req.path.replace("localhost", "127.0.0.1"))
                    else {
                        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                        return;
                    };
                    count.fetch_add(1, Ordering::Relaxed);
                    let _ = client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n");
                    let (mut c2, mut s2) =
                        (client.try_clone().unwrap(), server.try_clone().unwrap());
                    let up = std::thread::spawn(move || {
                        let _ = io::copy(&mut c2, &mut s2);
                        let _ = s2.shutdown(Shutdown::Write);
                    });
                    let (mut s, mut c) = (server, client);
                    let _ = io::copy(&mut s, &mut c);
                    let _ = c.shutdown(Shutdown::Write);
                    let _ = up.join();
                });
            }
        });
        Proxy { addr, tunnels }
    }
}
