//! An archive read from `http://`, `https://` or `s3://` addresses: a `Read` that yields the
//! archive's bytes in order as they arrive, for the decoders as any other input
//! (docs/DESIGN.md "Reading from a URL"). The archive may come from several sources at once
//! (`--mirror`, `--mirrors`): pieces are fetched from every source, scheduled by measured
//! speed, and put back in order.
//!
//! - `source.rs`: a `Source` (the address requests go to, and for S3 the signer of each
//!   request), which `resolve` makes of an operand; `s3/`: an S3 object's endpoint, region,
//!   credentials and signing. `failed.rs`: what a request, a signer or a credential provider
//!   that failed gives (its class and its words).
//! - `http.rs`: one GET through ureq (rustls, the system's trust store and `--cacert`, the
//!   proxy of the environment, redirects, a source's signer), every timeout at
//!   `--stall-timeout`.
//! - `interim.rs`: a layer over ureq's connections that works around its miscount of the
//!   bytes after a 1xx interim answer, and the bound on an answer's head it keeps within.
//! - `shared/`: the download's state under its lock: the sources as they are now, the jobs
//!   connections take, failures, the admission; the reader's side (`reader.rs`) and the
//!   conductor thread (`conductor.rs`).
//! - `fetch.rs`: the connection threads. `window.rs`: the reorder window.
//! - `limit.rs`: `--limit-rate`, one token bucket for every connection.
//! - `keep.rs`: `--keep-archive`'s copy, made and named without following or reusing what is
//!   at its names.
//! - Decisions, pure and tested on their own: `sources.rs` (the sources and what makes them
//!   one archive), `schedule.rs` (who fetches what, how many connections), `ranges.rs` (how a
//!   dropped whole answer continues), `retry.rs` (what is retried, the backoff,
//!   Retry-After), `floor.rs` (`--min-rate`: when a connection is too slow), `validator.rs`
//!   (ETag/Last-Modified, If-Range, Content-Range checks), `redirect.rs`, `proxy.rs`.
//!
//! `open` is "these sources from byte X, expecting this version": a restore that resumes at
//! an offset opens the download there with the `Identity` the first run recorded.

mod failed;
mod fetch;
mod floor;
pub mod http;
mod interim;
mod keep;
pub mod limit;
pub mod proxy;
pub mod ranges;
pub mod redirect;
pub mod retry;
pub mod s3;
pub mod schedule;
mod shared;
pub mod source;
pub mod sources;
pub mod validator;
mod window;

use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use url::Url;

use crate::report::progress::{NetStats, SourceStats};

use http::{Answer, Client, Settings};
use shared::{Ctx, Fixed, Live, Shared};
use sources::{Mode, Seen};
use validator::ContentRange;
pub use validator::Validator;
use window::Chunk;

/// Connections by default (`--connections`), for each source: a ceiling. Each source starts
/// with one and is given more while the total rate still rises (`schedule::tune`). Mirrors
/// cap each connection (nginx's `limit_rate`, CDNs' per-connection shaping); on 127.0.0.1 at
/// 50 MB/s per connection a 596 MB archive restored in 6.24 s on 2, 3.18 s on 4, 2.19 s on 8
/// and 3.22 s on 16, against 2.32 s from a local file (docs/PERFORMANCE.md, "Restore from a
/// URL"); aria2's users pick 8 to 16.
pub const DEFAULT_CONNECTIONS: usize = 8;

/// The most `--connections` may ask for (aria2's cap as well).
pub const MAX_CONNECTIONS: usize = 16;

/// The most sources a download uses (the archive and its mirrors): each has a thread for
/// its first answer and at least one connection, and a resume state names each. Lists that
/// snapshot finders print are sorted fastest first; the rest of a longer list is not used.
pub const MAX_SOURCES: usize = 32;

/// `--stall-timeout` by default: no byte for this long and the attempt is retried.
pub const DEFAULT_STALL: Duration = Duration::from_secs(30);

/// `--min-rate` by default, bytes/s: a connection that brings less over a whole
/// `--stall-timeout` of waiting in its reads is retried as stalled (`floor.rs`). What it ends
/// is the server that sends a byte every 29 s, which the stall timeout alone let keep a
/// connection, and the piece the reader waits for, forever. It is set below what a working
/// connection gets on a thin link: 16 connections on a 1 Mbit/s link (a token bucket on a
/// loopback of its own, 400 ms of queue) were never retried; on 256 kbit/s, 2 KB/s each,
/// TCP's unfairness put some under it for 30 s (263-886 B/s) and they were retried, but the
/// run took 288 s against 286 s without the floor (docs/PERFORMANCE.md, "The --min-rate
/// floor"). At 1 KiB/s a 1 GB archive would take 11 days. Agave's
/// `--minimal-snapshot-download-speed` (10 MiB/s) picks another node; here the same address is
/// asked again, so a high floor only retries a slow mirror (`--min-rate 10M` for who wants it).
pub const DEFAULT_MIN_RATE: u64 = 1 << 10;

/// With `--keep-archive` or `--checksum`, what follows the point where the decoder stopped
/// reading (the tar end marker, a compressed stream's end) is downloaded as well, so the copy
/// and the checksum cover the whole file, but at most this much: a real archive ends within a
/// record (10 KiB, 1 MiB with `-b 2048`) of its end marker, and a server announcing terabytes
/// more is not believed.
const DRAIN_MAX: u64 = 64 << 20;

/// How long the start waits, after the first source that could lead answered, for the
/// others' first answers: a first answer is one round trip, and a source slower than this to
/// give one joins later instead of holding the start back (its length is then checked when
/// it answers: a source of another length is dropped, not refused).
const FIRST_WAIT: Duration = Duration::from_secs(1);

/// The resolved options of a download (options/input.rs makes it from the run's options).
#[derive(Clone, Debug)]
pub struct Plan {
    /// The address as given (a presigned URL keeps its query string as it is).
    pub url: String,
    /// The other sources of the same archive (`--mirror`, `--mirrors FILE`), in order.
    pub mirrors: Vec<String>,
    /// Connections per source, at most.
    pub connections: usize,
    pub stall: Duration,
    /// `--min-rate`: bytes/s a connection must keep over `stall` (0: no floor).
    pub min_rate: u64,
    pub retries: u32,
    pub cacert: Option<PathBuf>,
    pub keep: Option<PathBuf>,
    pub checksum: Option<[u8; 32]>,
    /// Bytes the reorder window may hold (taken from `--memory`).
    pub window: u64,
    /// `--limit-rate`: bytes a second, all connections together.
    pub limit_rate: Option<u64>,
    /// `-v`: say where redirects led.
    pub verbose: bool,
    /// `-q`: no retry lines.
    pub quiet: bool,
    /// `--no-sign-request`: an `s3://` object is asked for without credentials (a public
    /// bucket).
    pub no_sign_request: bool,
}

/// What identifies the archive a download reads: the reference source's address after
/// redirects and its validator, the length, and every source admitted at the start with its
/// own validator. A resumed download expects them again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub url: String,
    pub validator: Validator,
    pub length: Option<u64>,
    /// Each source that was admitted at the start (as given, its password hidden) and the
    /// validator it showed; empty when the state recorded one source only (`url` and
    /// `validator` are then the first source's).
    pub sources: Vec<Pinned>,
}

/// A source and the version it served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    pub given: String,
    pub validator: Validator,
}

impl Identity {
    /// The validator source `given` (the `index`th in order) must show again, if recorded.
    fn expects(&self, given: &str, index: usize) -> Option<Validator> {
        if self.sources.is_empty() {
            return (index == 0).then(|| self.validator.clone());
        }
        self.sources.iter().find(|p| p.given == given).map(|p| p.validator.clone())
    }
}

/// Where a download starts: at byte `from`, of the version `expect` describes (None: any).
#[derive(Clone, Debug, Default)]
pub struct Start {
    pub from: u64,
    pub expect: Option<Identity>,
}

/// An open download: its reader for the decoders, and `finish` for the end of the run.
pub struct Download {
    shared: Arc<Shared>,
    guard: Arc<Guard>,
    identity: Identity,
    pub stats: Arc<NetStats>,
    /// `--keep-archive`: the copy, and once `finish` has checked it, its file (synced) for
    /// `keep_copy` to name.
    keep: Option<keep::Kept>,
    kept: std::sync::Mutex<Option<std::fs::File>>,
    checksum: Option<[u8; 32]>,
    /// The archive as given, for messages.
    given: String,
    /// The reference answered a ranged request with 206: the archive can be opened again at
    /// an offset (a resumed run, src/resume/).
    ranged: bool,
}

impl Download {
    /// Descriptors the download may open after now: a socket for each connection every
    /// source may have (they connect as they start), for the writers' budget
    /// (resources.rs).
    pub fn later_fds(&self) -> usize {
        self.stats.sockets.load(Ordering::Relaxed)
    }
}

/// Stops the connection threads once neither the reader nor the Download is left.
struct Guard(Arc<Shared>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The archive's bytes in order: a `BufRead` whose buffers are the window's blocks, read in
/// place by the decoders.
pub struct Reader {
    shared: Arc<Shared>,
    /// The chunk being read (`pos` and `len` move as it is consumed), and its length when
    /// taken.
    cur: Option<(Chunk, usize)>,
    _guard: Arc<Guard>,
}

impl BufRead for Reader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.cur.is_none() {
            self.cur = self.shared.take()?.map(|c| {
                let len = c.len;
                (c, len)
            });
        }
        Ok(match &self.cur {
            Some((c, _)) => &c.block[c.pos..c.pos + c.len],
            None => &[],
        })
    }

    fn consume(&mut self, n: usize) {
        let Some((c, _)) = &mut self.cur else { return };
        let n = n.min(c.len);
        c.pos += n;
        c.len -= n;
        if c.len == 0 {
            let (c, total) = self.cur.take().expect("just matched");
            self.shared.consumed(c.block, total);
        }
    }
}

/// As a regular file's read: `out` is filled unless the archive ends (or the download fails:
/// the bytes before the failure come first, the error at the next call), so a decoder that
/// reads (the frame-parallel one's splitter) sees the same reads as from a file, whatever the
/// pieces and blocks the bytes arrived in.
impl Read for Reader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < out.len() {
            let avail = match self.fill_buf() {
                Ok([]) => break,
                Ok(avail) => avail,
                Err(e) if n == 0 => return Err(e),
                Err(_) => break,
            };
            let k = avail.len().min(out.len() - n);
            out[n..n + k].copy_from_slice(&avail[..k]);
            self.consume(k);
            n += k;
        }
        Ok(n)
    }
}

/// The block of a chunk not read to its end goes back to the window (its bytes were counted
/// when it was taken).
impl Drop for Reader {
    fn drop(&mut self) {
        if let Some((c, total)) = self.cur.take() {
            self.shared.consumed(c.block, total);
        }
    }
}

/// The name `--keep-archive FILE` has until the run ends well.
pub fn incomplete_name(keep: &Path) -> PathBuf {
    let mut name = keep.as_os_str().to_owned();
    name.push(".incomplete");
    PathBuf::from(name)
}

/// The source `operand` names: `http://` and `https://` as given (a presigned URL's query
/// string untouched, nothing added), `s3://BUCKET/KEY` through `s3/` (endpoint, region,
/// credentials), with the download's settings (`--no-sign-request`,
/// `--stall-timeout`, `--cacert` for the credential endpoints).
pub fn resolve(operand: &str, plan: &Plan) -> Result<source::Source> {
    let given = shown(operand);
    if s3::is_s3(operand) {
        let opts = s3::Options {
            no_sign: plan.no_sign_request,
            stall: plan.stall,
            cacert: plan.cacert.clone(),
        };
        return s3::source(operand, &opts, &|k| std::env::var(k).ok());
    }
    let url = Url::parse(operand).map_err(|e| anyhow!("{given}: not a valid URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("{given}: only http://, https:// and s3:// URLs are read");
    }
    Ok(source::Source { given, url, sign: None })
}

/// Opens the archive at `start` from every source of `plan`: each source's first ranged GET
/// (never HEAD: a presigned URL refuses it) gives its length, its validator and its first
/// bytes; once the sources are admitted (`sources::admit`), the connections take pieces.
pub fn open(plan: &Plan, start: Start) -> Result<Download> {
    let mut given = sources::in_order(&plan.url, &plan.mirrors);
    if given.len() > MAX_SOURCES {
        if !plan.quiet {
            crate::report::info(&crate::report::said(format_args!(
                "{} sources given, the first {MAX_SOURCES} are used",
                given.len()
            )));
        }
        given.truncate(MAX_SOURCES);
    }
    // An s3:// source becomes its endpoint's address and the signer of its requests.
    let resolved: Vec<source::Source> =
        given.iter().map(|g| resolve(g, plan)).collect::<Result<_>>()?;
    let shown_all: Vec<String> = resolved.iter().map(|s| s.given.clone()).collect();
    let n = given.len();
    // A socket each: no more than the open-file limit leaves room for (`ulimit -n`).
    let fit = crate::resources::connections_fit(plan.connections.saturating_mul(n));
    let ceiling = (fit / n).max(1);
    let client = Client::new(Settings {
        stall: plan.stall,
        cacert: plan.cacert.clone(),
        connections: ceiling * n,
        direct: false,
    })?;
    let stats = Arc::new(NetStats {
        sources: shown_all.iter().map(|s| SourceStats::named(s.clone())).collect(),
        ..NetStats::default()
    });
    stats.sockets.store(ceiling * n, Ordering::Relaxed);
    let expect: Vec<Option<Validator>> = shown_all
        .iter()
        .enumerate()
        .map(|(i, g)| start.expect.as_ref().and_then(|x| x.expects(g, i)))
        .collect();
    let (keep, keep_file) = match &plan.keep {
        Some(k) => {
            let (kept, file) = keep::Kept::create(k, &incomplete_name(k))?;
            (Some(kept), Some(file))
        }
        None => (None, None),
    };
    let hasher = plan.checksum.map(|_| Sha256::new());
    let fixed = Fixed {
        from: start.from,
        retries: plan.retries,
        min_rate: plan.min_rate,
        stall: plan.stall,
        quiet: plan.quiet,
        expect,
        expect_length: start.expect.as_ref().map(|x| x.length),
    };
    let lives: Vec<Live> =
        resolved.into_iter().map(|s| Live::new(s.given, s.url, s.sign, ceiling)).collect();
    let limiter = plan.limit_rate.map(limit::Limiter::new);
    let shared = Arc::new(Shared::new(
        fixed,
        client,
        limiter,
        stats.clone(),
        lives,
        plan.window,
        (hasher, keep_file),
    ));
    let guard = Arc::new(Guard(shared.clone()));
    let first_urls: Vec<Url> = (0..n).map(|i| shared.source_view(i).1).collect();
    let mut started = 0;
    for source in 0..n {
        shared.lock().sources[source].alive.push(0);
        if spawn(&shared, source, 0, true) {
            started += 1;
        } else {
            let mut st = shared.lock();
            st.sources[source].alive.clear();
            let why = "cannot start a connection thread (ulimit -u?)".to_string();
            st.sources[source].seen = Seen::Failed(why);
        }
    }
    if started == 0 {
        bail!("{}: cannot start a connection thread", shown_all[0]);
    }
    shared.wake_work();
    let admitted = shared.admit(FIRST_WAIT).map_err(|e| anyhow!(e))?;
    let (_, url, validator, seen) = shared.source_view(admitted.reference);
    if plan.verbose {
        for (i, first) in first_urls.iter().enumerate() {
            let (_, now, _, _) = shared.source_view(i);
            if now != *first {
                crate::report::info(&crate::report::said(format_args!(
                    "{}: redirected to {}",
                    shown_all[i],
                    shown(now.as_str())
                )));
            }
        }
    }
    let pinned: Vec<Pinned> = {
        let st = shared.lock();
        st.sources
            .iter()
            .filter(|s| s.status == shared::Status::Active)
            .map(|s| Pinned { given: s.given.clone(), validator: s.validator.clone() })
            .collect()
    };
    let identity = Identity {
        url: url.to_string(),
        validator,
        length: admitted.length,
        sources: if n > 1 { pinned } else { Vec::new() },
    };
    let ranged = matches!(seen, Seen::Ranges { .. });
    if admitted.mode == Mode::Pieces && ceiling > 1 {
        // Each source's standby connection, now; more as the conductor gives them.
        let missing = shared::Shared::missing(&mut shared.lock());
        for (source, index) in missing {
            if !spawn(&shared, source, index, false) {
                shared.lock().sources[source].alive.retain(|&i| i != index);
            }
        }
        let sh = shared.clone();
        // Without it (ulimit -u) every source keeps its one connection.
        let _ = std::thread::Builder::new()
            .name("fastuntar-netctl".into())
            .spawn(move || sh.conduct(&|sh, source, index| spawn(sh, source, index, false)));
    }
    Ok(Download {
        shared,
        guard,
        identity,
        stats,
        keep,
        kept: std::sync::Mutex::new(None),
        checksum: plan.checksum,
        given: shown_all[0].clone(),
        ranged,
    })
}

/// Starts connection `index` of `source` (`lead`: its first, which asks its first answer);
/// false when no thread can be had (ulimit -u).
fn spawn(sh: &Arc<Shared>, source: usize, index: usize, lead: bool) -> bool {
    let ctx = Ctx { source, index, conn: sh.conn_id() };
    let sh = sh.clone();
    std::thread::Builder::new()
        .name(format!("fastuntar-net{source}.{index}"))
        .spawn(move || fetch::connection(sh, ctx, lead))
        .is_ok()
}

/// What the first answer to a request for bytes `from`-`end` (`end` None: to the end) says:
/// whether the server answers ranges and the archive's length, or why the source cannot be
/// used.
fn first_verdict(
    status: u16,
    range: Option<ContentRange>,
    content_length: Option<u64>,
    (from, end): (u64, Option<u64>),
) -> Result<(bool, Option<u64>), String> {
    match status {
        206 if validator::range_is(range, from, end, None) => Ok((true, range.and_then(|c| c.1))),
        206 => Err(format!(
            "asked for bytes {from}-{}, the server answered Content-Range {}",
            end.map_or(String::new(), |e| e.to_string()),
            fetch::describe(range)
        )),
        200 if from == 0 => Ok((false, content_length)),
        200 => Err(format!(
            "asked for the archive from byte {from}, the server sent the whole file (200): it \
             changed, or it no longer answers ranges"
        )),
        416 if from == 0 && range.and_then(|c| c.1) == Some(0) => Ok((true, Some(0))),
        s => Err(fetch::status_text(s)),
    }
}

/// Why the archive on a server is not the one a resumed run expects (its validator, then its
/// length), or None.
fn changed_since(
    expect: &Validator,
    expect_length: Option<Option<u64>>,
    now: &Validator,
    length: Option<u64>,
) -> Option<String> {
    expect.changed(now).or_else(|| {
        (expect_length.is_some_and(|l| l != length)).then(|| "its length is not the same".into())
    })
}

impl Download {
    pub fn reader(&self) -> Reader {
        Reader { shared: self.shared.clone(), cur: None, _guard: self.guard.clone() }
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Whether the server answers ranges (`Download::ranged`).
    pub fn ranged(&self) -> bool {
        self.ranged
    }

    /// At the end of a run that went well: with `--keep-archive` or `--checksum`, downloads
    /// what the decoder did not need (within DRAIN_MAX), checks the length and the checksum,
    /// and syncs the kept copy, which `keep_copy` names once nothing else can land in DIR.
    pub fn finish(&self) -> Result<()> {
        let given = &self.given;
        if self.keep.is_none() && self.checksum.is_none() {
            return Ok(());
        }
        let mut drained = 0u64;
        while let Some(c) = self.shared.take().with_context(|| given.clone())? {
            drained += c.len as u64;
            self.shared.consumed(c.block, c.len);
            if drained > DRAIN_MAX {
                bail!(
                    "{given}: more than {} MiB follow the end of the archive; not downloaded",
                    DRAIN_MAX >> 20
                );
            }
        }
        let mut sink = self.shared.sink();
        if let Some(len) = self.identity.length
            && sink.at != len
        {
            bail!("{given}: the download ended at byte {} of {len}", sink.at);
        }
        if let (Some(want), Some(h)) = (self.checksum, sink.hasher.take()) {
            let got: [u8; 32] = h.finalize().into();
            if got != want {
                if let Some(kept) = &self.keep {
                    sink.keep = None;
                    kept.discard();
                }
                bail!(
                    "{given}: sha256 mismatch: the downloaded bytes are {}, --checksum says {} \
                     (what was extracted from them stays in place)",
                    hex(&got),
                    hex(&want)
                );
            }
        }
        if let Some(f) = sink.keep.take() {
            f.sync_all().context("--keep-archive")?;
            *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
        }
        Ok(())
    }

    /// `--keep-archive`: the copy `finish` checked gets its name (keep.rs). Called once the
    /// run's writers are done, so no member of the archive can take the copy's names after
    /// it was looked at. Nothing to do when `finish` did not complete.
    pub fn keep_copy(&self) -> Result<()> {
        let file = self.kept.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (&self.keep, file) {
            (Some(kept), Some(_synced)) => kept.place(),
            _ => Ok(()),
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `--checksum sha256:HEX`: the 32 bytes, or why not.
pub fn parse_checksum(text: &str) -> Result<[u8; 32]> {
    let Some(h) = text.strip_prefix("sha256:") else {
        bail!("'{text}': the form is sha256:HEX (64 hexadecimal digits)");
    };
    if h.len() != 64 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        bail!("'{text}': the form is sha256:HEX (64 hexadecimal digits)");
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("checked above");
    }
    Ok(out)
}

/// `url` as messages and the summary show it: a password in it (`https://user:PASS@host/`)
/// replaced by `***`, so it does not end up in logs; the rest as given.
pub fn shown(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// What an error answer's body says, when it is an AWS error (S3's `<Error>` XML: its Code and
/// Message, escaped and bounded), with the bucket's region when S3 names another: " (Code:
/// Message)", or nothing. At most 4 KiB of the body is read.
fn error_detail(a: Answer) -> String {
    let mut body = Vec::new();
    let _ = a.body.take(4096).read_to_end(&mut body);
    let mut t = s3::error_text(&String::from_utf8_lossy(&body));
    let region = a.bucket_region.filter(|r| {
        !r.is_empty()
            && r.len() < 32
            && r.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    });
    if let Some(r) = region {
        t.push_str(&format!(" (S3 says the bucket is in region {r}: AWS_REGION={r})"));
    }
    match t.is_empty() {
        true => t,
        false => format!(" {t}"),
    }
}

/// Whether an archive operand is a URL: it starts with `http://`, `https://` or `s3://` (any
/// case).
pub fn is_url(operand: &std::ffi::OsStr) -> bool {
    let b = operand.as_encoded_bytes();
    let starts = |p: &[u8]| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p);
    starts(b"http://") || starts(b"https://") || starts(b"s3://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_and_urls() {
        let h = "sha256:".to_string() + &"0f".repeat(32);
        assert_eq!(parse_checksum(&h).unwrap(), [0x0f; 32]);
        assert!(parse_checksum("sha256:abc").is_err());
        assert!(parse_checksum(&("md5:".to_string() + &"0f".repeat(32))).is_err());
        assert!(parse_checksum(&("sha256:".to_string() + &"g0".repeat(32))).is_err());
        assert_eq!(hex(&[0, 0xab]), "00ab");
        assert!(is_url("https://h/x".as_ref()) && is_url("HTTP://h".as_ref()));
        assert!(is_url("s3://b/k".as_ref()) && is_url("S3://b/k".as_ref()));
        assert!(!is_url("http:/h".as_ref()) && !is_url("./https://x".as_ref()));
        assert_eq!(incomplete_name(Path::new("/a/b.tar")), Path::new("/a/b.tar.incomplete"));
        assert_eq!(shown("https://u:secret@h/x?s=1"), "https://u:***@h/x?s=1");
        assert_eq!(shown("https://h/x?X-Amz-Signature=a%2Fb"), "https://h/x?X-Amz-Signature=a%2Fb");
    }

    /// The first answer's status and Content-Range, for the range asked: ranged or not, the
    /// length, or the line that stops the run.
    #[test]
    fn the_first_answer_decides_ranges_and_length() {
        let whole = (0, None);
        let piece = (0, Some(1023));
        assert_eq!(
            first_verdict(206, Some((Some((0, 1023)), Some(5000))), None, piece),
            Ok((true, Some(5000)))
        );
        assert_eq!(
            first_verdict(206, Some((Some((0, 4999)), Some(5000))), None, whole),
            Ok((true, Some(5000)))
        );
        assert_eq!(first_verdict(200, None, Some(5000), piece), Ok((false, Some(5000))));
        assert_eq!(first_verdict(200, None, None, whole), Ok((false, None)));
        // An empty archive: nothing to range over.
        assert_eq!(first_verdict(416, Some((None, Some(0))), None, piece), Ok((true, Some(0))));
        let refused = [
            first_verdict(206, Some((Some((1, 1023)), Some(5000))), None, piece),
            first_verdict(206, None, None, piece),
            // A resumed run asked from byte 4096 and got the whole file.
            first_verdict(200, None, Some(5000), (4096, None)),
            first_verdict(416, Some((None, Some(5000))), None, (4096, None)),
            first_verdict(204, None, None, whole),
        ];
        assert!(refused[0].as_ref().unwrap_err().contains("asked for bytes 0-1023"));
        assert!(refused[2].as_ref().unwrap_err().contains("sent the whole file (200)"));
        assert!(refused.iter().all(Result::is_err), "{refused:?}");
    }

    /// A resumed run's archive must show the same validator and length again.
    #[test]
    fn a_resumed_download_must_be_the_same_archive() {
        let v = |etag: &str| Validator { etag: Some(etag.into()), last_modified: None };
        let one = v("\"1\"");
        assert_eq!(changed_since(&one, Some(Some(10)), &v("\"1\""), Some(10)), None);
        assert!(changed_since(&one, Some(Some(10)), &v("\"2\""), Some(10)).is_some());
        assert_eq!(
            changed_since(&one, Some(Some(10)), &v("\"1\""), Some(11)).as_deref(),
            Some("its length is not the same")
        );
    }

    /// Which validator each source must show again on a resumed run: a state of one source
    /// names the first; a state of several names each by its address.
    #[test]
    fn a_resumed_run_expects_each_source_s_own_version() {
        let v = |etag: &str| Validator { etag: Some(etag.into()), last_modified: None };
        let one = Identity {
            url: "https://h/a".into(),
            validator: v("\"1\""),
            length: Some(10),
            sources: vec![],
        };
        assert_eq!(one.expects("https://h/a", 0), Some(v("\"1\"")));
        assert_eq!(one.expects("https://m/a", 1), None);
        let pin = |g: &str, e: &str| Pinned { given: g.into(), validator: v(e) };
        let three = Identity {
            sources: vec![pin("https://h/a", "\"1\""), pin("https://m/a", "\"m\"")],
            ..one
        };
        assert_eq!(three.expects("https://m/a", 2), Some(v("\"m\"")));
        assert_eq!(three.expects("https://new/a", 1), None);
    }
}
