//! Progress on a terminal: a bar of the archive read (a spinner for stdin), bytes read of
//! the total, bytes written and their rate, members, the download's rate, connections,
//! retries and bytes re-fetched, and the ETA. Fed by the run's tally (`Reporter::tally`,
//! relaxed atomics the reader bumps once per member and the writers' sink once per landed
//! write); a separate thread redraws at most `REDRAW_HZ` times a second, so the extraction
//! threads never wait on the terminal.
//!
//! The line is laid out here (`frame`, a pure function) to fit the terminal's width: one
//! line, never wrapped (a wrapped frame split its numbers over two lines at 80 columns, and
//! a stale half stayed in the scrollback), dropping the least needed fields first. Anything
//! else printed while the bar is on the screen (a `-v` name on a terminal, a warning) goes
//! through `around_output`, which takes the bar off the screen, writes, and puts it back, so
//! no frame is left between the lines. The last frame is cleared when the run ends, well or
//! not (`Drop`), before the summary or the error is printed.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Reporter;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// indicatif's own redraw limit; the issue asks for ~10 redraws a second at most.
const REDRAW_HZ: u8 = 10;

/// The ETA is the bytes left over the read rate of the last `ETA_WINDOW`: long enough to
/// smooth a download's bursts and a frame's decoding, short enough to follow a rate that
/// changed (the page cache filling, a mirror slowing down).
const ETA_WINDOW: Duration = Duration::from_secs(5);

/// Columns when the terminal does not say (`TIOCGWINSZ` fails: a serial console).
const DEFAULT_WIDTH: usize = 80;

/// The bar's narrowest and widest: narrower it says nothing, wider it only takes the room of
/// the figures.
const BAR_MIN: usize = 10;
const BAR_MAX: usize = 30;

/// The bar on the screen now, if any: what `around_output` takes off and puts back. One per
/// process, as the terminal is.
static SHOWN: Mutex<Option<Shown>> = Mutex::new(None);

/// Whether a frame of the bar has been drawn and not yet cleared: read by the CLI's interrupt
/// handler (main.rs), which may not take `SHOWN`'s lock.
pub static ON_SCREEN: AtomicBool = AtomicBool::new(false);

struct Shown {
    bar: ProgressBar,
    /// Standard output is a terminal too (the same one, as far as we can tell): `-v` names
    /// written there land on the bar's line.
    stdout_tty: bool,
}

/// Runs `write` (output to stderr, or to stdout when `to_stdout`) with the progress bar off
/// the screen if it is on it and the output goes to the terminal, then draws the bar again
/// below what was written. Without a bar, or for stdout that is not a terminal (`-v > list`),
/// just runs `write`.
pub fn around_output<R>(to_stdout: bool, write: impl FnOnce() -> R) -> R {
    let shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner());
    match shown.as_ref() {
        Some(s) if !to_stdout || s.stdout_tty => s.bar.suspend(write),
        _ => write(),
    }
}

/// A download's counters (decode/url/), for the progress bar and the summary.
#[derive(Debug, Default)]
pub struct NetStats {
    /// Bytes received that count (not those passed over after a restart, nor a copy's that
    /// arrived second).
    pub downloaded: AtomicU64,
    /// Connections with a request open now, all sources together.
    pub connections: AtomicUsize,
    /// The most connections that had a request open at once.
    pub most: AtomicUsize,
    /// Sockets the download may open at most (every source's `--connections`), for the
    /// writers' descriptor budget.
    pub sockets: AtomicUsize,
    pub retries: AtomicU64,
    /// Bytes received again and passed over (a server without ranges, restarted from 0).
    pub refetched: AtomicU64,
    /// Copies of a late head piece asked from a faster source.
    pub copies: AtomicU64,
    /// A progress bar counts the retries: no line for each.
    pub bar: AtomicBool,
    /// Each source, in the order given (the archive first).
    pub sources: Vec<SourceStats>,
}

/// One source's part of the counters.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// The source as messages show it.
    pub name: String,
    /// Bytes of it that count.
    pub bytes: AtomicU64,
    /// Bytes a second it delivered lately (the download's scheduler measures it).
    pub rate: AtomicU64,
    /// Connections with a request open to it now, and the most at once.
    pub connections: AtomicUsize,
    pub most: AtomicUsize,
    /// Why it is not used (None: in use, or still starting); its `state` word.
    pub dropped: std::sync::Mutex<Option<String>>,
    pub state: AtomicU8,
}

/// `SourceStats::state`.
pub const SOURCE_STARTING: u8 = 0;
pub const SOURCE_IN_USE: u8 = 1;
pub const SOURCE_RETRYING: u8 = 2;
pub const SOURCE_DROPPED: u8 = 3;

impl SourceStats {
    pub fn named(name: String) -> SourceStats {
        SourceStats { name, ..SourceStats::default() }
    }

    /// "starting", "in use", "retrying", "dropped".
    pub fn state_word(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            SOURCE_IN_USE => "in use",
            SOURCE_RETRYING => "retrying",
            SOURCE_DROPPED => "dropped",
            _ => "starting",
        }
    }

    pub fn why_dropped(&self) -> Option<String> {
        self.dropped.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What one frame shows: the counters read at one moment.
#[derive(Debug, Clone, Default)]
struct Frame {
    /// Bytes of the archive read (compressed, as it is on disk or on the wire).
    read: u64,
    /// The archive's size, when known (a file, a URL with a length).
    total: Option<u64>,
    written: u64,
    members: u64,
    /// Seconds since the bar started (> 0).
    secs: f64,
    /// Time left at the recent read rate; None while it is not known yet.
    eta: Option<Duration>,
    net: Option<NetFrame>,
    /// Frames drawn so far: the spinner's position.
    tick: u64,
}

#[derive(Debug, Clone, Default)]
struct NetFrame {
    downloaded: u64,
    connections: usize,
    retries: u64,
    refetched: u64,
    /// With several sources, each one's part: `1: 95.4 MiB/s 3c`, `2: dropped`.
    sources: Vec<String>,
}

/// With several sources, each one's part of the bar: its rate and connections (and
/// `retrying`), or that it is starting or was dropped; nothing for one source.
fn source_parts(n: &NetStats) -> Vec<String> {
    if n.sources.len() < 2 {
        return Vec::new();
    }
    n.sources
        .iter()
        .enumerate()
        .map(|(i, src)| {
            let state = src.state.load(Ordering::Relaxed);
            let what = match state {
                SOURCE_DROPPED => "dropped".to_string(),
                SOURCE_STARTING => "starting".to_string(),
                _ => format!(
                    "{} {}c{}",
                    rate(src.rate.load(Ordering::Relaxed), 1.0).trim_start(),
                    src.connections.load(Ordering::Relaxed),
                    if state == SOURCE_RETRYING { " retrying" } else { "" }
                ),
            };
            format!("{}: {what}", i + 1)
        })
        .collect()
}

/// The line for `frame` in `width` columns: at most `width - 1` of them (a line that reaches
/// the last column makes some terminals wrap), every character one column wide. Fields
/// appear in a fixed order; when they do not all fit, the least needed go first (the rates,
/// the members, the download's details), the bar shrinks to `BAR_MIN`, and what must stay
/// (how far, how much is left, retries) stays; a terminal too narrow even for that gets what
/// fits of it. Figures are padded to their widest (`1000 MiB`, `1.86 GiB/s`), so that the
/// fields and the bar's width stay put from one frame to the next.
fn frame(f: &Frame, width: usize) -> String {
    // (priority: lower stays longer, glued to the field before it with one space instead of
    // two, text), in display order.
    let mut fields: Vec<(u8, bool, String)> = Vec::new();
    match f.total {
        Some(total) => {
            let done = u128::from(f.read.min(total)) * 100;
            let pct = done.checked_div(u128::from(total)).unwrap_or(100) as u8;
            fields.push((0, false, format!("{pct:>3}%")));
            fields.push((1, false, format!("{:>8}/{}", size(f.read), size(total))));
        }
        None => {
            fields.push((1, false, format!("{:>8} read", size(f.read))));
            fields.push((6, true, format!("{:>10}", rate(f.read, f.secs))));
        }
    }
    if let Some(n) = &f.net {
        fields.push((4, false, format!("down {:>10}", rate(n.downloaded, f.secs))));
        fields.push((7, true, format!("on {} conn", n.connections)));
        for src in &n.sources {
            fields.push((7, false, src.clone()));
        }
    }
    fields.push((3, false, format!("{:>8} written", size(f.written))));
    fields.push((6, true, format!("{:>10}", rate(f.written, f.secs))));
    fields.push((5, false, format!("{} members", f.members)));
    if let Some(n) = &f.net {
        if n.retries > 0 {
            let retries = plural(n.retries, "retry", "retries");
            fields.push((2, false, format!("{} {retries}", n.retries)));
        }
        if n.refetched > 0 {
            fields.push((5, false, format!("{} re-fetched", size(n.refetched))));
        }
    }
    if f.total.is_some() {
        let eta = f.eta.map_or_else(|| "-".to_string(), duration);
        fields.push((1, false, format!("ETA {eta:<5}")));
    }

    let room = width.max(2) - 1;
    let head_min = if f.total.is_some() { BAR_MIN } else { 1 };
    let mut keep = 8u8;
    loop {
        let mut body = String::new();
        for (_, glued, text) in fields.iter().filter(|(p, ..)| *p < keep) {
            if !body.is_empty() {
                body += if *glued { " " } else { "  " };
            }
            body += text;
        }
        let used = body.chars().count() + 1;
        // Priorities 0 and 1 (how far, what is left) stay whatever the width.
        if used + head_min <= room || keep == 2 {
            let head = match f.total {
                Some(total) => bar(f.read, total, room.saturating_sub(used).clamp(1, BAR_MAX)),
                None => spinner(f.tick).to_string(),
            };
            let line: String = format!("{head} {body}").chars().take(room).collect();
            return line.trim_end().to_string();
        }
        keep -= 1;
    }
}

/// `filled` of `total` as a bar of `width` cells.
fn bar(filled: u64, total: u64, width: usize) -> String {
    let cells = if total == 0 {
        width
    } else {
        ((filled.min(total) as u128 * width as u128) / total as u128) as usize
    };
    "█".repeat(cells) + &"░".repeat(width - cells)
}

fn spinner(tick: u64) -> char {
    const CHARS: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    CHARS[(tick % CHARS.len() as u64) as usize]
}

/// Bytes in at most 4 digits and a binary unit: `512 B`, `9.54 KiB`, `95.4 MiB`, `954 MiB`,
/// `1.86 GiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    // 1000 rather than 1024: `1010 MiB` is one digit more than the layout counts on.
    while v >= 1000.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    let digits = if v < 10.0 {
        2
    } else if v < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.digits$} {}", UNITS[unit])
}

fn rate(bytes: u64, secs: f64) -> String {
    format!("{}/s", size((bytes as f64 / secs.max(1e-3)) as u64))
}

/// `45s`, `4m05s`, `2h03m`.
fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// The read rate over the last `ETA_WINDOW`, and from it the time left.
#[derive(Debug, Default)]
struct Eta {
    samples: VecDeque<(Instant, u64)>,
}

impl Eta {
    fn update(&mut self, now: Instant, read: u64, total: u64) -> Option<Duration> {
        self.samples.push_back((now, read));
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= ETA_WINDOW {
            self.samples.pop_front();
        }
        let &(t0, r0) = self.samples.front()?;
        let secs = now.duration_since(t0).as_secs_f64();
        let left = total.saturating_sub(read);
        if left == 0 {
            return Some(Duration::ZERO);
        }
        // Under a second of history, or nothing read in it: no rate to go by yet.
        if secs < 1.0 || read <= r0 {
            return None;
        }
        let rate = (read - r0) as f64 / secs;
        Some(Duration::from_secs_f64((left as f64 / rate).min(1e8)))
    }
}

pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing on stderr if `enabled` and stderr is a terminal; otherwise does nothing.
    /// `net`: a URL's download, whose rate, connections in use, retries and bytes
    /// re-fetched are shown too (and its retries counted here instead of a line each).
    pub fn start(
        enabled: bool,
        total: Option<u64>,
        consumed: Arc<AtomicU64>,
        net: Option<Arc<NetStats>>,
        report: Arc<Reporter>,
    ) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress { stop, thread: None };
        }
        if let Some(n) = &net {
            n.bar.store(true, Ordering::Relaxed);
        }
        // The line is laid out by `frame`; indicatif draws it, clears it, and keeps it off
        // the screen while `around_output` writes.
        let bar =
            ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr_with_hz(REDRAW_HZ))
                .with_style(ProgressStyle::with_template("{msg}").expect("valid template"));
        let flag = stop.clone();
        let shown = Shown { bar: bar.clone(), stdout_tty: std::io::stdout().is_terminal() };
        // Progress is cosmetic: a thread that cannot start (RLIMIT_NPROC) means no bar.
        let spawned = std::thread::Builder::new().spawn(move || {
            *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown);
            let start = Instant::now();
            let mut eta = Eta::default();
            let mut tick = 0;
            while !flag.load(Ordering::Relaxed) {
                let now = Instant::now();
                let read = consumed.load(Ordering::Relaxed);
                let f = Frame {
                    read,
                    total,
                    written: report.tally.written.load(Ordering::Relaxed),
                    members: report.tally.members.load(Ordering::Relaxed),
                    secs: now.duration_since(start).as_secs_f64().max(1e-3),
                    eta: total.and_then(|t| eta.update(now, read, t)),
                    net: net.as_deref().map(|n| NetFrame {
                        downloaded: n.downloaded.load(Ordering::Relaxed),
                        connections: n.connections.load(Ordering::Relaxed),
                        retries: n.retries.load(Ordering::Relaxed),
                        refetched: n.refetched.load(Ordering::Relaxed),
                        sources: source_parts(n),
                    }),
                    tick,
                };
                tick += 1;
                bar.set_message(frame(&f, terminal_width()));
                ON_SCREEN.store(true, Ordering::Relaxed);
                // Woken early by `finish`, so the run never ends late waiting for a redraw.
                std::thread::park_timeout(Duration::from_millis(1000 / REDRAW_HZ as u64));
            }
            // Off the screen and out of `SHOWN` in one step: a line written in between would
            // be printed on the bar's line and then erased with it.
            let mut shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner());
            bar.finish_and_clear();
            ON_SCREEN.store(false, Ordering::Relaxed);
            *shown = None;
        });
        Progress { stop, thread: spawned.ok() }
    }

    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// The width of the terminal on stderr, in columns.
fn terminal_width() -> usize {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // Safety: TIOCGWINSZ writes one `winsize` into the struct we pass, which lives for the
    // call; a descriptor that is not a terminal makes it fail with ENOTTY and write nothing.
    let r = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 && ws.ws_col > 0 { ws.ws_col as usize } else { DEFAULT_WIDTH }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn file_frame() -> Frame {
        Frame {
            read: 123 * GIB / 10,
            total: Some(1_990 * GIB / 10),
            written: 3_580 * GIB / 10,
            members: 4_123_456,
            secs: 61.0,
            eta: Some(Duration::from_secs(3_725)),
            net: None,
            tick: 3,
        }
    }

    fn url_frame() -> Frame {
        Frame {
            net: Some(NetFrame {
                downloaded: 130 * GIB,
                connections: 8,
                retries: 12,
                refetched: 7 * GIB,
                sources: Vec::new(),
            }),
            ..file_frame()
        }
    }

    fn stdin_frame() -> Frame {
        Frame { total: None, eta: None, ..file_frame() }
    }

    #[test]
    fn sizes_take_at_most_four_digits() {
        let cases = [
            (0, "0 B"),
            (999, "999 B"),
            (1000, "0.98 KiB"),
            (9_999, "9.76 KiB"),
            (100_000_000, "95.4 MiB"),
            (1_000_000_000, "954 MiB"),
            (1_048_000_000, "999 MiB"),
            (1_048_576_000, "0.98 GiB"),
            (2_000_000_000, "1.86 GiB"),
            // Past PiB the unit stays PiB.
            (u64::MAX, "16384 PiB"),
        ];
        for (n, want) in cases {
            assert_eq!(size(n), want, "{n}");
        }
    }

    #[test]
    fn durations_read_as_a_clock() {
        let d = Duration::from_secs;
        assert_eq!(duration(d(0)), "0s");
        assert_eq!(duration(d(59)), "59s");
        assert_eq!(duration(d(60)), "1m00s");
        assert_eq!(duration(d(245)), "4m05s");
        assert_eq!(duration(d(3_725)), "1h02m");
    }

    /// Every frame, at every width from a phone's to a wide screen's, is one line of at most
    /// width - 1 columns (each character here is one column).
    #[test]
    fn a_frame_is_one_line_within_the_width() {
        for f in [file_frame(), url_frame(), stdin_frame(), Frame::default()] {
            for width in 1..=250 {
                let line = frame(&f, width);
                assert!(!line.contains('\n'), "{line:?}");
                assert!(
                    line.chars().count() < width.max(2),
                    "{} columns at width {width}: {line:?}",
                    line.chars().count()
                );
            }
        }
    }

    /// At 80 columns: a file's frame shows everything; a URL's keeps what matters (how far,
    /// what is left, the retries, the bytes written, the download rate) and drops the rest.
    #[test]
    fn at_80_columns_the_needed_fields_stay() {
        let line = frame(&file_frame(), 80);
        for want in ["6%", "12.3 GiB/199 GiB", "358 GiB written", "4123456 members", "ETA 1h02m"] {
            assert!(line.contains(want), "{want:?} missing from {line:?}");
        }
        assert!(line.starts_with("░░░"), "6 % of a bar of 11-30 cells is empty: {line:?}");
        let line = frame(&url_frame(), 80);
        for want in ["6%", "12.3 GiB/199 GiB", "12 retries", "358 GiB written", "ETA 1h02m"] {
            assert!(line.contains(want), "{want:?} missing from {line:?}");
        }
        let bar = line.chars().take_while(|&c| c == '█' || c == '░').count();
        assert!(bar >= BAR_MIN, "a bar of {bar} cells: {line:?}");
        // Wide: every field, and the bar at its widest.
        let line = frame(&url_frame(), 250);
        for want in ["down 2.13 GiB/s on 8 conn", "7.00 GiB re-fetched", "5.87 GiB/s", "members"] {
            assert!(line.contains(want), "{want:?} missing from {line:?}");
        }
        // The figures keep their columns as they change.
        let small = Frame { read: 1, written: 2, members: 3, ..url_frame() };
        let at = |line: &str, what: &str| line.find(what).unwrap();
        let small_line = frame(&small, 250);
        for want in ["down", "written"] {
            assert_eq!(at(&line, want), at(&small_line, want), "{line:?}\n{small_line:?}");
        }
        assert_eq!(line.chars().take_while(|&c| c == '█' || c == '░').count(), BAR_MAX);
        // Standard input: a spinner and what was read, no ETA.
        let line = frame(&stdin_frame(), 80);
        assert!(line.starts_with('⠸') && line.contains(" 12.3 GiB read"), "{line:?}");
        assert!(!line.contains("ETA"), "{line:?}");
    }

    #[test]
    fn the_eta_follows_the_recent_rate() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut eta = Eta::default();
        assert_eq!(eta.update(at(0.0), 0, 1000), None, "no rate yet");
        assert_eq!(eta.update(at(0.5), 50, 1000), None, "under a second of history");
        // 100 B/s: 800 left at 2 s is 8 s.
        assert_eq!(eta.update(at(2.0), 200, 1000), Some(Duration::from_secs(8)));
        // The rate drops to 10 B/s from 2 s on: after the window only the new rate counts.
        for i in 1..=10 {
            eta.update(at(2.0 + i as f64), 200 + 10 * i, 1000);
        }
        assert_eq!(eta.update(at(13.0), 310, 1000), Some(Duration::from_secs(69)));
        assert_eq!(eta.update(at(14.0), 1000, 1000), Some(Duration::ZERO));
    }
}
