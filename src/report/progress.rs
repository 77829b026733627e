//! Progress on a terminal: input consumed of the archive's size (a spinner with bytes and rate
//! for stdin), bytes written, members/s, ETA. Fed by the run's tally (`Reporter::tally`,
//! relaxed atomics the reader bumps once per member and the writers' sink once per landed
//! write); a separate thread redraws at most `REDRAW_HZ` times a second, so the extraction
//! threads never wait on the terminal.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Reporter;
use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// indicatif's own redraw limit; the issue asks for ~10 redraws a second at most.
const REDRAW_HZ: u8 = 10;

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

/// A download's part of the bar: rate, connections in use, retries, bytes re-fetched; with
/// several sources, each one's rate and connections, or that it was dropped.
fn download_line(n: &NetStats, secs: f64) -> String {
    let got = n.downloaded.load(Ordering::Relaxed);
    let mut s = format!(
        "downloaded {}/s on {} conn  ",
        HumanBytes((got as f64 / secs) as u64),
        n.connections.load(Ordering::Relaxed)
    );
    if n.sources.len() > 1 {
        for (i, src) in n.sources.iter().enumerate() {
            let state = src.state.load(Ordering::Relaxed);
            let what = match state {
                SOURCE_DROPPED => "dropped".to_string(),
                SOURCE_STARTING => "starting".to_string(),
                _ => format!(
                    "{}/s {}c{}",
                    HumanBytes(src.rate.load(Ordering::Relaxed)),
                    src.connections.load(Ordering::Relaxed),
                    if state == SOURCE_RETRYING { " retrying" } else { "" }
                ),
            };
            s += &format!("[{}: {what}] ", i + 1);
        }
        s += " ";
    }
    let retries = n.retries.load(Ordering::Relaxed);
    if retries > 0 {
        s += &format!("{retries} retries  ");
    }
    let again = n.refetched.load(Ordering::Relaxed);
    if again > 0 {
        s += &format!("{} re-fetched  ", HumanBytes(again));
    }
    s
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
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(
                Some(n),
                ProgressDrawTarget::stderr_with_hz(REDRAW_HZ),
            )
            .with_style(
                ProgressStyle::with_template(
                    "{bar:30} {bytes}/{total_bytes} read  {msg}  ETA {eta}",
                )
                .expect("valid template"),
            ),
            None => {
                ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(REDRAW_HZ))
                    .with_style(
                        ProgressStyle::with_template(
                            "{spinner} {bytes} read ({bytes_per_sec})  {msg}",
                        )
                        .expect("valid template"),
                    )
            }
        };
        let flag = stop.clone();
        // Progress is cosmetic: a thread that cannot start (RLIMIT_NPROC) means no bar.
        let spawned = std::thread::Builder::new().spawn(move || {
            let start = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                let secs = start.elapsed().as_secs_f64().max(1e-3);
                let members = report.tally.members.load(Ordering::Relaxed);
                let written = report.tally.written.load(Ordering::Relaxed);
                bar.set_position(consumed.load(Ordering::Relaxed));
                let download = net.as_deref().map_or(String::new(), |n| download_line(n, secs));
                bar.set_message(format!(
                    "{download}{} written ({}/s)  {members} members ({:.0}/s)",
                    HumanBytes(written),
                    HumanBytes((written as f64 / secs) as u64),
                    members as f64 / secs
                ));
                // Woken early by `finish`, so the run never ends late waiting for a redraw.
                std::thread::park_timeout(Duration::from_millis(1000 / REDRAW_HZ as u64));
            }
            bar.finish_and_clear();
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
