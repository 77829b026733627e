//! An archive read from an `http://`, `https://` or `s3://` address: a `Read` that yields the
//! archive's bytes in order as they arrive, for the decoders as any other input
//! (docs/DESIGN.md "Reading from a URL").
//!
//! - `source.rs`: an operand as a `Source` (the address requests go to, and for S3 the signer
//!   of each request); `s3/`: an S3 object's endpoint, region, credentials and signing.
//! - `http.rs`: one GET through ureq (rustls, the system's trust store and `--cacert`, the
//!   proxy of the environment, redirects), every timeout at `--stall-timeout`.
//! - `interim.rs`: a layer over ureq's connections that works around its miscount of the
//!   bytes after a 1xx interim answer.
//! - `fetch.rs`: the connection threads and the reorder window.
//! - `keep.rs`: `--keep-archive`'s copy, made and named without following or reusing what is
//!   at its names.
//! - Decisions, pure and tested on their own: `ranges.rs` (pieces, how many connections, how
//!   a dropped response continues), `retry.rs` (what is retried, the backoff, Retry-After),
//!   `floor.rs` (`--min-rate`: when a connection is too slow),
//!   `validator.rs` (ETag/Last-Modified, If-Range, Content-Range checks), `redirect.rs`,
//!   `proxy.rs`.
//!
//! `open` is "this URL from byte X, expecting this version": a restore that resumes at an
//! offset opens the download there with the `Identity` the first run recorded.

mod fetch;
mod floor;
pub mod http;
mod interim;
mod keep;
pub mod proxy;
pub mod ranges;
pub mod redirect;
pub mod retry;
pub mod s3;
pub mod source;
pub mod validator;

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use url::Url;

use crate::report::progress::NetStats;

use fetch::{Fixed, Shared};
use http::{Answer, Client, Settings};
use ranges::Mode;
use retry::Failure;
use validator::ContentRange;
pub use validator::Validator;

/// Connections by default (`--connections`). Mirrors cap each connection (nginx's
/// `limit_rate`, CDNs' per-connection shaping); on 127.0.0.1 at 50 MB/s per connection a
/// 596 MB archive restored in 6.24 s on 2, 3.18 s on 4, 2.19 s on 8 and 3.22 s on 16, against
/// 2.32 s from a local file (docs/PERFORMANCE.md, "Restore from a URL"); aria2's users pick 8
/// to 16.
pub const DEFAULT_CONNECTIONS: usize = 8;

/// The most connections `--connections` may ask for (aria2's cap as well).
pub const MAX_CONNECTIONS: usize = 16;

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

/// The resolved options of a download (config.rs makes it from the flags).
#[derive(Clone, Debug)]
pub struct Plan {
    /// The address as given (a presigned URL keeps its query string as it is).
    pub url: String,
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
    /// `-v`: say where redirects led.
    pub verbose: bool,
    /// `-q`: no retry lines.
    pub quiet: bool,
    /// `--no-sign-request`: an `s3://` object is asked for without credentials (a public
    /// bucket).
    pub no_sign_request: bool,
}

/// What identifies the archive a download reads: the address after redirects, the validator
/// and the length the first answer gave. A resumed download expects them again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub url: String,
    pub validator: Validator,
    pub length: Option<u64>,
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
    /// The server answered a ranged request with 206: the archive can be opened again at an
    /// offset (a resumed run, src/resume/).
    ranged: bool,
}

impl Download {
    /// Descriptors the download will open after now: a socket for each connection thread
    /// started (they connect as they start), for the writers' budget (resources.rs).
    pub fn later_fds(&self) -> usize {
        self.stats.threads.load(Ordering::Relaxed)
    }
}

/// Stops the connection threads once neither the reader nor the Download is left.
struct Guard(Arc<Shared>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The archive's bytes in order.
pub struct Reader {
    shared: Arc<Shared>,
    _guard: Arc<Guard>,
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.shared.read(buf)
    }
}

/// The name `--keep-archive FILE` has until the run ends well.
pub fn incomplete_name(keep: &Path) -> PathBuf {
    let mut name = keep.as_os_str().to_owned();
    name.push(".incomplete");
    PathBuf::from(name)
}

/// Opens `plan.url` at `start`: the first ranged GET (never HEAD: a presigned URL refuses it)
/// gives the length and the validator, then the connection threads start.
pub fn open(plan: &Plan, start: Start) -> Result<Download> {
    let given = shown(&plan.url);
    let src = source::resolve(&plan.url, plan)?;
    let url = &src.url;
    // A socket each: no more than the open-file limit leaves room for (`ulimit -n`).
    let connections = crate::resources::connections_fit(plan.connections);
    let plan = &Plan { connections, ..plan.clone() };
    let client = Client::new(Settings {
        stall: plan.stall,
        cacert: plan.cacert.clone(),
        connections: plan.connections,
        direct: false,
    })?;
    let piece = ranges::piece_size(plan.window, plan.connections);
    let stats = Arc::new(NetStats::default());
    let (answer, ranged, length, mode) = first_contact(&client, &src, plan, &start, piece, &stats)?;
    let from = start.from;
    let validator = answer.validator.clone();
    let identity = Identity { url: answer.url.to_string(), validator: validator.clone(), length };
    if plan.verbose && answer.url.as_str() != url.as_str() {
        crate::report::info(&crate::report::said(format_args!(
            "{given}: redirected to {}",
            shown(answer.url.as_str())
        )));
    }
    let resume = ranges::resume(
        ranged && validator.if_range().is_some(),
        validator.etag.is_some() || validator.last_modified.is_some(),
    );
    let (keep, keep_file) = match &plan.keep {
        Some(k) => {
            let (kept, file) = keep::Kept::create(k, &incomplete_name(k))?;
            (Some(kept), Some(file))
        }
        None => (None, None),
    };
    let hasher = plan.checksum.map(|_| Sha256::new());
    let fixed = Fixed {
        given: given.clone(),
        validator: identity.validator.clone(),
        length,
        from,
        piece,
        window: plan.window,
        retries: plan.retries,
        min_rate: plan.min_rate,
        stall: plan.stall,
        pieces: matches!(mode, Mode::Pieces(_)),
        resume,
        quiet: plan.quiet,
        sign: src.sign.clone(),
    };
    let shared = Arc::new(Shared::new(fixed, client, answer, stats.clone(), (hasher, keep_file)));
    let guard = Arc::new(Guard(shared.clone()));
    let (threads, first_job) = match mode {
        Mode::Pieces(n) => (n, None),
        Mode::Whole => (1, Some(shared.whole())),
    };
    let started = start_connections(&shared, threads, first_job)
        .with_context(|| format!("{given}: cannot start a connection thread"))?;
    // Their sockets open as they start; the writers' descriptor budget, made before that,
    // counts them (`Download::later_fds`).
    stats.threads.store(started, Ordering::Relaxed);
    let kept = std::sync::Mutex::new(None);
    Ok(Download { shared, guard, identity, stats, keep, kept, checksum: plan.checksum, ranged })
}

/// The first ranged GET from `start` (pieces of `piece` bytes): the answer, whether the server
/// answers ranges, the archive's length and how it is fetched. Asked for a piece whose answer
/// cannot be used as one, it asks again for the whole (nothing was consumed yet).
fn first_contact(
    client: &Client,
    src: &source::Source,
    plan: &Plan,
    start: &Start,
    piece: u64,
    stats: &NetStats,
) -> Result<(Answer, bool, Option<u64>, Mode)> {
    let from = start.from;
    let if_range = start.expect.as_ref().and_then(|i| i.validator.if_range());
    let mut end = (plan.connections > 1).then(|| from + piece - 1);
    loop {
        let a = first_answer(client, src, (from, end), if_range, plan, stats)?;
        let verdict = first_verdict(a.status, a.content_range, a.content_length, (from, end));
        let (ranged, length) = verdict.map_err(|e| anyhow!("{}: {e}", shown(&plan.url)))?;
        let expect = start.expect.as_ref();
        if let Some(why) = expect.and_then(|x| changed_since(x, &a.validator, length)) {
            bail!("{}: the archive changed on the server: {why}", shown(&plan.url));
        }
        let count = length.map_or(0, |l| l.saturating_sub(from).div_ceil(piece));
        let if_range = a.validator.if_range().is_some();
        let mode = ranges::mode(plan.connections, ranged, length, if_range, count);
        let partial =
            a.status == 206 && a.content_range.and_then(|c| c.0).map(|r| r.1 + 1) != length;
        if mode == Mode::Whole && end.is_some() && partial {
            end = None;
            continue;
        }
        return Ok((a, ranged, length, mode));
    }
}

/// What the first answer to a request for bytes `from`-`end` (`end` None: to the end) says:
/// whether the server answers ranges and the archive's length, or why the run stops.
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

/// Why the archive on the server is not the one a resumed run expects (its validator, then its
/// length), or None.
fn changed_since(expect: &Identity, now: &Validator, length: Option<u64>) -> Option<String> {
    expect
        .validator
        .changed(now)
        .or_else(|| (expect.length != length).then(|| "its length is not the same".into()))
}

/// Starts `threads` connection threads, the first with `first_job`: how many started. Fewer
/// where threads cannot be had (ulimit -u); none is an error.
fn start_connections(
    shared: &Arc<Shared>,
    threads: usize,
    first_job: Option<fetch::Job>,
) -> std::io::Result<usize> {
    let mut first_job = first_job;
    let mut started = 0;
    for i in 0..threads {
        let sh = shared.clone();
        let job = first_job.take();
        let spawned = std::thread::Builder::new()
            .name(format!("fastuntar-net{i}"))
            .spawn(move || fetch::connection(sh, job));
        match spawned {
            Ok(_) => started += 1,
            Err(e) if started == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(started)
}

/// The first answer, with retries for what may pass (a 503 while a mirror starts, a stall);
/// DNS, a refused connection, TLS and a 4xx end the run at once with one line.
fn first_answer(
    client: &Client,
    src: &source::Source,
    (from, end): (u64, Option<u64>),
    if_range: Option<&str>,
    plan: &Plan,
    stats: &NetStats,
) -> Result<Answer> {
    let given = shown(&plan.url);
    let mut failures = 0;
    loop {
        let sign = src.sign.as_deref();
        let (failure, text, asked) = match client.get(&src.url, sign, Some((from, end)), if_range) {
            Ok(a) if (200..300).contains(&a.status) || a.status == 416 => return Ok(a),
            Ok(a) => {
                let (status, asked) = (a.status, a.retry_after);
                let text = format!("{}{}", fetch::status_text(status), error_detail(a));
                (Failure::Status(status), text, asked)
            }
            Err(f) => (f.failure, f.text, None),
        };
        failures += 1;
        if !retry::transient(failure, true) {
            bail!("{given}: {text}");
        }
        if failures > plan.retries {
            bail!("{given}: {text}; gave up after {} retries", plan.retries);
        }
        let wait = retry::wait(failures, asked);
        stats.retries.fetch_add(1, Ordering::Relaxed);
        if !plan.quiet {
            let when = match wait.as_secs() {
                0 => String::new(),
                s => format!(" in {s} s"),
            };
            crate::report::info(&crate::report::said(format_args!(
                "{given}: {text}; retry {failures} of {}{when}",
                plan.retries
            )));
        }
        std::thread::sleep(wait);
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

impl Download {
    pub fn reader(&self) -> Reader {
        Reader { shared: self.shared.clone(), _guard: self.guard.clone() }
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
        let given = &self.shared.given;
        if self.keep.is_none() && self.checksum.is_none() {
            return Ok(());
        }
        let mut buf = vec![0u8; 1 << 20];
        let mut drained = 0u64;
        loop {
            let n = self.shared.read(&mut buf).with_context(|| given.clone())?;
            if n == 0 {
                break;
            }
            drained += n as u64;
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
        let expect =
            Identity { url: "https://h/a".into(), validator: v("\"1\""), length: Some(10) };
        assert_eq!(changed_since(&expect, &v("\"1\""), Some(10)), None);
        assert!(changed_since(&expect, &v("\"2\""), Some(10)).is_some());
        assert_eq!(
            changed_since(&expect, &v("\"1\""), Some(11)).as_deref(),
            Some("its length is not the same")
        );
    }
}
