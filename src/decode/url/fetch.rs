//! A connection (actions). A source's first connection asks for its first bytes (`SAMPLE`
//! of them, `first_contact`), whose answer gives the length, the validator and the sample
//! compared with the reference's. Then every connection takes jobs (`Shared::next_job`)
//! until none is left: a ranged GET with If-Range for each piece, its body read into 256 KiB
//! blocks handed to the window (`read_piece`, within `--limit-rate`). A failed attempt goes
//! to `Shared::attempt_failed`, which decides about the source (rest, retry, drop). One
//! source without pinned ranges is read whole by its first connection (`whole`), retried as
//! a single download always was.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::failed::Failed;
use super::floor::{self, Floor};
use super::http::Answer;
use super::ranges::{self, BLOCK, Resume};
use super::retry::{self, Failure};
use super::shared::{Ctx, Shared, Target, Task};
use super::sources::{SAMPLE, Seen};
use super::validator::{self, ContentRange};
use super::window::Published;

/// A connection thread: the source's first answer if it is its first connection, then
/// jobs until none is left.
pub fn connection(sh: Arc<Shared>, ctx: Ctx, lead: bool) {
    let _aside = crate::aside::Aside::enter();
    if lead {
        first_contact(&sh, ctx.source);
    }
    while let Some(task) = sh.next_job(&ctx) {
        match task {
            Task::Whole => whole(&sh, &ctx),
            Task::Piece { start, from, end, .. } => piece(&sh, &ctx, start, from, end),
        }
    }
}

/// A failed attempt: why, whether it brought bytes first, and what Retry-After asked.
struct Attempt {
    failed: Failed,
    progressed: bool,
    retry_after: Option<Duration>,
}

impl From<Failed> for Attempt {
    fn from(failed: Failed) -> Attempt {
        Attempt { failed, progressed: false, retry_after: None }
    }
}

// ---- the first answer ------------------------------------------------------------------------

/// What a first answer gave.
struct First {
    seen: Seen,
    sample: Option<Vec<u8>>,
    whole: Option<Answer>,
}

/// The source's first request, for bytes `from..from+SAMPLE` (with If-Range when a resumed
/// run expects a version), retried for what may pass (a 503 while a mirror starts, a stall);
/// DNS, a refused connection, TLS, a 4xx or an answer that cannot be used are final at once.
fn first_contact(sh: &Shared, source: usize) {
    let target = sh.target(source);
    let expect = sh.fixed.expect.get(source).cloned().flatten();
    let from = sh.fixed.from;
    let mut failures = 0;
    let got = loop {
        if sh.stopped() {
            return;
        }
        let (failure, text, asked) = match ask_first(sh, source, &target, expect.as_ref(), from) {
            Ok(first) => break first,
            Err((f, text, asked)) => (f, text, asked),
        };
        failures += 1;
        if !retry::transient(failure, true) {
            break First { seen: Seen::Failed(text), sample: None, whole: None };
        }
        if failures > sh.fixed.retries {
            let why = format!("{text}; gave up after {} retries", sh.fixed.retries);
            break First { seen: Seen::Failed(why), sample: None, whole: None };
        }
        let wait = retry::wait(failures, asked);
        sh.stats.retries.fetch_add(1, Ordering::Relaxed);
        let when = match wait.as_secs() {
            0 => String::new(),
            s => format!(" in {s} s"),
        };
        sh.say(&target.given, &format!("{text}; retry {failures} of {}{when}", sh.fixed.retries));
        if !sh.pause(wait) {
            return;
        }
    };
    sh.first_answer(source, got.seen, got.sample, got.whole);
}

/// One first request and what its answer shows; Err: a failure to retry or not (`transient`
/// decides), its text and a Retry-After.
fn ask_first(
    sh: &Shared,
    source: usize,
    target: &Target,
    expect: Option<&validator::Validator>,
    from: u64,
) -> Result<First, (Failure, String, Option<Duration>)> {
    let end = from + SAMPLE - 1;
    let if_range = expect.and_then(|v| v.if_range());
    let signer = target.signer.as_deref();
    let mut a = match sh.client.get(&target.url, signer, Some((from, Some(end))), if_range) {
        Ok(a) if (200..300).contains(&a.status) || a.status == 416 => a,
        Ok(a) => {
            let (status, asked) = (a.status, a.retry_after);
            let text = format!("{}{}", status_text(status), super::error_detail(a));
            return Err((Failure::Status(status), text, asked));
        }
        Err(f) => return Err((f.failure, f.text, None)),
    };
    let failed = |text: String| First { seen: Seen::Failed(text), sample: None, whole: None };
    let (ranged, length) = match super::first_verdict(
        a.status,
        a.content_range,
        a.content_length,
        (from, Some(end)),
    ) {
        Ok(v) => v,
        Err(e) => return Ok(failed(e)),
    };
    if let Some(v) = expect
        && let Some(why) = super::changed_since(v, sh.fixed.expect_length, &a.validator, length)
    {
        return Ok(failed(format!("the archive changed on the server: {why}")));
    }
    sh.first_seen(source, &a, expect.is_some());
    if !ranged {
        // The whole file (200): kept for a whole download, unread.
        return Ok(First { seen: Seen::Whole { length }, sample: None, whole: Some(a) });
    }
    let Some(length) = length else {
        // Ranges without a length: the pieces cannot be laid out.
        return Ok(First { seen: Seen::Whole { length: None }, sample: None, whole: None });
    };
    let want = SAMPLE.min(length.saturating_sub(from)) as usize;
    let mut sample = vec![0u8; want];
    let mut floor = Floor::new(sh.fixed.min_rate, sh.fixed.stall);
    let (n, error) = fill(sh, &mut a.body, &mut sample, &mut floor);
    if let Some(e) = error {
        return Err((super::http::io_failure(&e), reading_text(&e), None));
    }
    if n < want {
        return Err((Failure::Dropped, "the connection closed early".into(), None));
    }
    // One more read sees the body's end, so the connection goes back to the pool.
    let _ = a.body.read(&mut [0u8; 1]);
    let pinned = a.validator.if_range().is_some();
    Ok(First { seen: Seen::Ranges { length, pinned }, sample: Some(sample), whole: None })
}

// ---- pieces ----------------------------------------------------------------------------------

/// Fetches bytes `from..end` of the piece at `start` in one request; a failure is the
/// source's to judge (`attempt_failed`), the piece's rest left to another fetcher.
fn piece(sh: &Shared, ctx: &Ctx, start: u64, from: u64, end: u64) {
    let target = sh.target(ctx.source);
    let mut at = from;
    let asked = Instant::now();
    let mut first_byte = 0.0;
    sh.request(ctx.source, true);
    let outcome = (|| -> Result<(), Attempt> {
        let signer = target.signer.as_deref();
        let if_range = target.validator.if_range();
        let a = sh.client.get(&target.url, signer, Some((at, Some(end - 1))), if_range)?;
        first_byte = asked.elapsed().as_secs_f64();
        accept(sh, &target, &a, at, Some(end), false)?;
        read_piece(sh, ctx, a, start, &mut at, end)
    })();
    sh.request(ctx.source, false);
    match outcome {
        Ok(()) => {
            let took = asked.elapsed().as_secs_f64();
            sh.done(ctx, start, Some((took, at - from, first_byte)));
        }
        Err(Attempt { failed, progressed, retry_after }) => {
            let progressed = progressed || at > from;
            sh.attempt_failed(
                ctx,
                start,
                at,
                failed.failure,
                &failed.text,
                progressed,
                retry_after,
            );
        }
    }
}

/// Reads a piece's answer into blocks up to `end`, handing each to the window; stops early,
/// without an error, when another copy brought the bytes first or the download stopped.
fn read_piece(
    sh: &Shared,
    ctx: &Ctx,
    a: Answer,
    start: u64,
    at: &mut u64,
    end: u64,
) -> Result<(), Attempt> {
    let mut body = a.body;
    let began = *at;
    let mut floor = Floor::new(sh.fixed.min_rate, sh.fixed.stall);
    let enough = Floor::enough(sh.fixed.min_rate, sh.fixed.stall);
    loop {
        if *at == end {
            // One more read sees the body's end (nothing is left of its Content-Length), so
            // ureq puts the connection back in its pool for the next piece instead of closing
            // it: without it every piece cost a new connection (13 for 13 requests).
            let _ = body.read(&mut [0u8; 1]);
            return Ok(());
        }
        let mut block = sh.block();
        let room = (end - *at).min(BLOCK) as usize;
        let (n, error) = fill(sh, &mut body, &mut block[..room], &mut floor);
        if n > 0 {
            match sh.publish(ctx, start, *at, block, n, false) {
                Published::Kept { .. } => *at += n as u64,
                // Another copy was first: this answer is not needed (dropping it closes the
                // connection). Its bytes came all the same, and count for the source's speed
                // (`Shared::done`): counted as none, a slow source beaten by a copy measured 0
                // bytes a second, a rate nothing is judged by, and took pieces as if unmeasured.
                Published::Redundant => {
                    *at += n as u64;
                    return Ok(());
                }
            }
        } else {
            sh.recycle(block);
        }
        if let Some(e) = error {
            return Err(dropped(e, *at - began, enough));
        }
        if n < room {
            if sh.stopped() {
                return Ok(());
            }
            let e = io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed early");
            return Err(dropped(e, *at - began, enough));
        }
    }
}

/// Reads from `body` until `buf` is full, the body ends or fails, within `--limit-rate` and
/// above `--min-rate` (`floor`, timed on the reads only: waiting for the cap is not the
/// server's time): the bytes read, and the error that stopped it.
fn fill(
    sh: &Shared,
    body: &mut impl Read,
    buf: &mut [u8],
    floor: &mut Option<Floor>,
) -> (usize, Option<io::Error>) {
    let mut n = 0;
    while n < buf.len() {
        let want = buf.len() - n;
        let granted = match &sh.limiter {
            Some(l) => match l.take(want as u64, &|| sh.stopped()) {
                Some(g) => g as usize,
                None => return (n, None),
            },
            None => want,
        };
        match floor::read(body, &mut buf[n..n + granted], floor) {
            Ok(0) => {
                give_back(sh, granted);
                return (n, None);
            }
            Ok(k) => {
                give_back(sh, granted - k);
                n += k;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => give_back(sh, granted),
            Err(e) => {
                give_back(sh, granted);
                return (n, Some(e));
            }
        }
    }
    (n, None)
}

fn give_back(sh: &Shared, n: usize) {
    if let Some(l) = &sh.limiter {
        l.give_back(n as u64);
    }
}

/// A read that failed after `brought` bytes of the attempt. One ended for being below
/// `--min-rate` counts as progress only if it brought `enough` (`Floor::enough`: a window's
/// worth at that rate), so a server that trickles on every new connection runs out of
/// `--retries`.
fn dropped(e: io::Error, brought: u64, enough: u64) -> Attempt {
    let progressed = if floor::below(&e).is_some() { brought >= enough } else { brought > 0 };
    Attempt {
        failed: Failed::new(super::http::io_failure(&e), reading_text(&e)),
        progressed,
        retry_after: None,
    }
}

/// Checks an answer to a request for `at..end`; Ok(bytes to pass over first) — the start of
/// a whole file sent again, up to `at` (`restart`: a whole download from a server without
/// ranges).
fn accept(
    sh: &Shared,
    target: &Target,
    a: &Answer,
    at: u64,
    end: Option<u64>,
    restart: bool,
) -> Result<u64, Attempt> {
    let fatal = |text: String| Attempt::from(Failed::new(Failure::Protocol, text));
    let length = sh.length();
    if let Some(why) = target.validator.changed(&a.validator) {
        return Err(fatal(format!("the file changed on the server during the download: {why}")));
    }
    match a.status {
        206 => {
            if !validator::range_is(a.content_range, at, end.map(|e| e - 1), length) {
                return Err(fatal(format!(
                    "asked for bytes {at}-{} of {}, the server answered Content-Range {}",
                    end.map_or(String::new(), |e| (e - 1).to_string()),
                    length.map_or("*".to_string(), |l| l.to_string()),
                    describe(a.content_range)
                )));
            }
            Ok(0)
        }
        200 if restart => {
            if a.content_length != length {
                return Err(fatal(format!(
                    "the file changed on the server during the download: its length is now {}",
                    a.content_length.map_or("unknown".to_string(), |l| l.to_string())
                )));
            }
            Ok(at)
        }
        200 => Err(fatal(
            "the file changed on the server during the download: a request with If-Range got \
             the whole file (200) instead of the rest (206)"
                .to_string(),
        )),
        416 => Err(fatal(format!(
            "the file on the server no longer reaches byte {at} (416 Range Not Satisfiable): it \
             is shorter than the {} bytes it announced",
            length.map_or("?".to_string(), |l| l.to_string())
        ))),
        s => {
            let failed = Failed::new(Failure::Status(s), status_text(s));
            Err(Attempt { failed, progressed: false, retry_after: a.retry_after })
        }
    }
}

// ---- a whole download ------------------------------------------------------------------------

/// One source without pinned ranges: its answer read from `from` to its end, each attempt
/// from the byte the last one reached (`ranges::resume`: with a range, or the whole file
/// again with the bytes already had passed over, or not at all), `--retries` failures in a
/// row at most.
fn whole(sh: &Shared, ctx: &Ctx) {
    let target = sh.target(ctx.source);
    let ranged = sh.answered_ranges(ctx.source);
    let resume = ranges::resume(
        ranged && target.validator.if_range().is_some(),
        target.validator.etag.is_some() || target.validator.last_modified.is_some(),
    );
    let from = sh.fixed.from;
    let length = sh.length();
    sh.make_whole();
    let mut answer = sh.take_whole_answer(ctx.source);
    let mut at = from;
    let mut failures = 0u32;
    loop {
        if Some(at) == length || sh.stopped() {
            sh.end_whole();
            return;
        }
        // The first answer was checked when the download was opened.
        let (attempt, checked) = match answer.take() {
            Some(a) => (Ok(a), true),
            None => {
                let range = match resume {
                    Resume::Restart => None,
                    _ => Some((at, None)),
                };
                let if_range = target.validator.if_range();
                let got = sh.client.get(&target.url, target.signer.as_deref(), range, if_range);
                (got.map_err(Attempt::from), false)
            }
        };
        sh.request(ctx.source, true);
        let outcome = attempt.and_then(|a| {
            let skip = if checked {
                0
            } else {
                accept(sh, &target, &a, at, None, resume == Resume::Restart)?
            };
            read_whole(sh, ctx, a, &mut at, skip)
        });
        sh.request(ctx.source, false);
        let (failure, text, progressed, asked) = match outcome {
            Ok(()) => {
                sh.end_whole();
                return;
            }
            Err(Attempt { failed, progressed, retry_after }) => {
                (failed.failure, failed.text, progressed, retry_after)
            }
        };
        if sh.stopped() {
            return;
        }
        if progressed {
            failures = 0;
        }
        failures += 1;
        if !retry::transient(failure, false) {
            let why = match failure {
                Failure::Protocol => text,
                _ => format!("{text} at byte {at}"),
            };
            return sh.whole_failed(ctx.source, why);
        }
        if resume == Resume::Never {
            return sh.whole_failed(
                ctx.source,
                format!(
                    "{text} at byte {at}; the server gives no ETag or Last-Modified to check a \
                     second request against, so the download cannot continue"
                ),
            );
        }
        if failures > sh.fixed.retries {
            let why = format!("{text} at byte {at}; gave up after {} retries", sh.fixed.retries);
            return sh.whole_failed(ctx.source, why);
        }
        let wait = retry::wait(failures, asked);
        sh.stats.retries.fetch_add(1, Ordering::Relaxed);
        sh.say(
            &target.given,
            &format!(
                "{text} at byte {at}; retry {failures} of {}{}",
                sh.fixed.retries,
                match wait.as_secs_f64() {
                    0.0 => String::new(),
                    s => format!(" in {s:.0} s"),
                }
            ),
        );
        if !sh.pause(wait) {
            return;
        }
    }
}

/// Reads a whole answer into blocks reserved one by one: `skip` bytes passed over first
/// (counted as re-fetched), then bytes from `at` on, to the end of the answer.
fn read_whole(
    sh: &Shared,
    ctx: &Ctx,
    a: Answer,
    at: &mut u64,
    mut skip: u64,
) -> Result<(), Attempt> {
    let mut body = a.body;
    let started = *at;
    let from = sh.fixed.from;
    let length = sh.length();
    let mut floor = Floor::new(sh.fixed.min_rate, sh.fixed.stall);
    let enough = Floor::enough(sh.fixed.min_rate, sh.fixed.stall);
    let mut scratch = Vec::new();
    while skip > 0 {
        scratch.resize(BLOCK as usize, 0);
        let want = skip.min(BLOCK) as usize;
        match floor::read(&mut body, &mut scratch[..want], &mut floor) {
            Ok(0) => {
                return Err(dropped(io::ErrorKind::UnexpectedEof.into(), *at - started, enough));
            }
            Ok(n) => {
                skip -= n as u64;
                sh.stats.refetched.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => return Err(dropped(e, *at - started, enough)),
        }
    }
    loop {
        if Some(*at) == length {
            let _ = body.read(&mut [0u8; 1]);
            return Ok(());
        }
        let Some(mut block) = sh.whole_block() else { return Ok(()) };
        let room = match length {
            Some(l) => (l - *at).min(BLOCK) as usize,
            None => BLOCK as usize,
        };
        let (n, error) = fill(sh, &mut body, &mut block[..room], &mut floor);
        sh.publish(ctx, from, *at, block, n, true);
        *at += n as u64;
        if let Some(e) = error {
            return Err(dropped(e, *at - started, enough));
        }
        if n < room {
            // The body ended: the end of a whole answer without a length, else short.
            return match length {
                None => Ok(()),
                Some(_) if sh.stopped() => Ok(()),
                Some(_) => Err(dropped(
                    io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed early"),
                    *at - started,
                    enough,
                )),
            };
        }
    }
}

fn reading_text(e: &io::Error) -> String {
    if let Some(b) = floor::below(e) {
        return b.to_string();
    }
    match super::http::io_failure(e) {
        Failure::Stalled => "stalled (no byte for the stall timeout)".to_string(),
        _ => format!("connection dropped ({e})"),
    }
}

pub fn describe(cr: Option<ContentRange>) -> String {
    match cr {
        None => "(none, or malformed)".to_string(),
        Some((r, l)) => format!(
            "bytes {}/{}",
            r.map_or("*".to_string(), |(a, b)| format!("{a}-{b}")),
            l.map_or("*".to_string(), |l| l.to_string())
        ),
    }
}

/// "404 Not Found", "503 Service Unavailable".
pub fn status_text(s: u16) -> String {
    let reason =
        ureq::http::StatusCode::from_u16(s).ok().and_then(|c| c.canonical_reason()).unwrap_or("");
    format!("{s} {reason}").trim_end().to_string()
}
