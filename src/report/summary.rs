//! The end-of-run summary: what a run did (`Summary`, which command/extract.rs fills from what
//! each stage counted), said as one line on standard error or one `--json` object on standard
//! output, and where it goes (`summary_to`: success is quiet, as GNU tar's).

use std::io::IsTerminal;
use std::time::Duration;

use super::Reporter;
use super::plan::ReportPlan;
use crate::exit_codes::ExitCode;

/// What an extraction did, for the summary line and `--json`.
pub struct Summary {
    pub stats: Stats,
    pub members: u64,
    /// From start to the last file closed and directory stamped.
    pub elapsed: Duration,
    /// Time `--sync` took to make it durable (syncfs), when asked.
    pub sync: Option<Duration>,
    pub decoding: DecodeSummary,
    /// Bytes of the two buffer pools: file data, decoded frames (0 when one thread decoded).
    pub memory: (u64, u64),
    /// Writer threads, and how many of them write through io_uring.
    pub writers: (usize, usize),
    /// Which files were to be written direct, and why.
    pub direct: Direct,
    /// The download, when the archive was a URL.
    pub download: Option<DownloadSummary>,
    /// Where the run resumed, and the resume points it wrote (src/resume/).
    pub resume: ResumeReport,
}

/// What a download did, for the summary.
#[derive(Clone, Debug)]
pub struct DownloadSummary {
    /// The address the archive came from, after redirects.
    pub url: String,
    pub length: Option<u64>,
    pub bytes: u64,
    /// The most connections open at once, all sources together.
    pub connections: usize,
    /// The most each source may have (`--connections`, within the open-file limit).
    pub ceiling: usize,
    pub retries: u64,
    pub refetched: u64,
    /// Copies of a late head piece asked from a faster source.
    pub copies: u64,
    /// Each source, in the order given.
    pub sources: Vec<SourceSummary>,
}

/// What one source did.
#[derive(Clone, Debug)]
pub struct SourceSummary {
    pub url: String,
    pub bytes: u64,
    /// The most connections it had open at once.
    pub connections: usize,
    /// "in use", "dropped", ...
    pub state: &'static str,
    /// Why it was dropped.
    pub dropped: Option<String>,
}

/// What a writer did, for the summary (the writers count it: `write::Stats`).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub files: u64,
    pub files_direct: u64,
    pub dirs: u64,
    pub links: u64,
    pub bytes: u64,
}

/// The decoder's side of the run's summary (`decode::DecodeSummary`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeSummary {
    /// Threads that decoded (1 unless zstd frames were decoded in parallel).
    pub threads: usize,
    /// zstd frames decoded, when the frame-parallel decoder ran (None otherwise).
    pub frames: Option<u64>,
    /// Of those, the frames a worker decoded ahead of the reader.
    pub frames_ahead: Option<u64>,
    /// Of those, the frames decoded in place (their size in the header, as Agave writes them).
    pub frames_in_place: Option<u64>,
    /// Bytes of the frames a worker decoded that went to the writer in the worker's buffers
    /// (lend.rs), and that were copied into file buffers (or out to a caller).
    pub frame_bytes_handed: Option<u64>,
    pub frame_bytes_copied: Option<u64>,
}

/// Which files were to be written direct, and why (write/direct_policy.rs `Plan`): its `-v`
/// words and its `--json` object.
#[derive(Clone, Debug)]
pub struct Direct {
    pub words: String,
    pub json: String,
}

impl Direct {
    /// The `-v` words (`Plan::describe`).
    pub fn describe(&self) -> &str {
        &self.words
    }

    /// The `--json` object (`Plan::json`).
    pub fn json(&self) -> &str {
        &self.json
    }
}

/// The run's resume point, for the summary and `--json` (made by src/resume/).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    pub member: u64,
    pub tar: u64,
    /// The archive's first byte read again, and its size when known.
    pub archive: u64,
    pub size: Option<u64>,
    /// Decoded again from the start (a single gzip stream, single-frame zstd, ...).
    pub from_start: bool,
}

impl Resumed {
    /// The share of the archive not read again, in percent.
    pub fn skipped_percent(&self) -> f64 {
        match self.size {
            Some(s) if s > 0 => self.archive as f64 * 100.0 / s as f64,
            _ => 0.0,
        }
    }

    /// "resumed at member N / byte X of the archive (Y % skipped)", or that it was decoded
    /// again from the start.
    pub fn describe(&self) -> String {
        match self.from_start {
            true => format!(
                "resumed at member {}: the archive was decoded again from the start, the members \
                 before it passed over without writing",
                self.member
            ),
            false => format!(
                "resumed at member {} / byte {} of the archive ({:.1} % skipped)",
                self.member,
                self.archive,
                self.skipped_percent()
            ),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ResumeReport {
    pub resumed: Option<Resumed>,
    /// Resume points written (state files).
    pub points: u64,
}

/// Says the summary of an extraction that succeeded where `plan` sends it (`summary_to`);
/// `code` is the run's exit code, for `--json`.
pub fn say(summary: &Summary, plan: &ReportPlan, code: ExitCode, reporter: &Reporter) {
    let tty = std::io::stderr().is_terminal();
    let skipped = reporter.skipped_count();
    match summary_to(plan.json, plan.quiet, plan.totals, tty) {
        SummaryTo::Json => {
            let _ = reporter.print_line(&json(summary, code, skipped));
        }
        SummaryTo::Stderr => super::info(&super::said(line(summary, plan.verbose > 0, skipped))),
        SummaryTo::Nowhere => {}
    }
}

/// Where the end-of-run summary goes.
#[derive(Debug, PartialEq, Eq)]
enum SummaryTo {
    /// `--json`: one object on stdout.
    Json,
    /// The human line on stderr.
    Stderr,
    Nowhere,
}

/// Success is quiet, as GNU tar's (scripts and harnesses compare stderr): the summary line is
/// said when stderr is a terminal, or when `--totals` asks (after GNU tar's `Total bytes
/// read` line), never with `-q`; `--json` always prints its object. `-v` is not a trigger
/// (issue 44; issue 28 had it one): GNU tar prints no summary with `-v`, and 16 of its own
/// tests failed on the extra line.
fn summary_to(json: bool, quiet: bool, totals: bool, stderr_tty: bool) -> SummaryTo {
    match () {
        _ if json => SummaryTo::Json,
        _ if quiet => SummaryTo::Nowhere,
        _ if totals || stderr_tty => SummaryTo::Stderr,
        _ => SummaryTo::Nowhere,
    }
}

fn rate_mb_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs.max(1e-9)
}

/// The human summary: members, bytes, direct/buffered files, elapsed, MB/s (and sync time);
/// with -v also which files were to go direct and why (stdout is -v's listing, GNU tar's);
/// `skipped`: the run's members not extracted.
fn line(s: &Summary, verbose: bool, skipped: u64) -> String {
    let secs = s.elapsed.as_secs_f64();
    let st = &s.stats;
    let mut out = format!(
        "{} members, {} files ({} direct, {} buffered), {:.1} MB in {:.2} s ({:.0} MB/s)",
        s.members,
        st.files,
        st.files_direct,
        st.files - st.files_direct,
        st.bytes as f64 / 1e6,
        secs,
        rate_mb_s(st.bytes, secs),
    );
    if let Some(frames) = s.decoding.frames {
        let threads = s.decoding.threads;
        out += &format!("; {frames} zstd frames on {threads} threads");
    }
    if let Some(d) = &s.download {
        out += &format!(
            "; downloaded {:.1} MB on {} connection{}",
            d.bytes as f64 / 1e6,
            d.connections,
            if d.connections == 1 { "" } else { "s" }
        );
        if d.retries > 0 {
            out += &format!(", {} retries", d.retries);
        }
        if d.refetched > 0 {
            out += &format!(", {:.1} MB re-fetched", d.refetched as f64 / 1e6);
        }
        if d.sources.len() > 1 {
            let each: Vec<String> = d
                .sources
                .iter()
                .map(|src| match &src.dropped {
                    Some(why) => format!("{} dropped ({why})", src.url),
                    None => format!("{} {:.1} MB", src.url, src.bytes as f64 / 1e6),
                })
                .collect();
            out += &format!(" from {}", each.join(", "));
        }
    }
    if let Some(sync) = s.sync {
        out += &format!("; sync {:.2} s", sync.as_secs_f64());
    }
    if skipped > 0 {
        out += &format!("; {skipped} skipped");
    }
    if let Some(r) = &s.resume.resumed {
        out += &format!("; {}", r.describe());
    }
    if verbose {
        out += &format!("; {}", s.direct.describe());
    }
    out
}

/// The same as one JSON object (numbers, and a URL's final address escaped by `json_string`).
fn json(s: &Summary, code: ExitCode, skipped: u64) -> String {
    let download = match &s.download {
        None => String::new(),
        Some(d) => {
            let secs = s.elapsed.as_secs_f64();
            let sources: Vec<String> = d
                .sources
                .iter()
                .map(|src| {
                    format!(
                        concat!(
                            "{{\"url\":{},\"bytes\":{},\"mb_per_s\":{:.3},\"connections\":{},",
                            "\"state\":\"{}\",\"dropped\":{}}}"
                        ),
                        json_string(&src.url),
                        src.bytes,
                        rate_mb_s(src.bytes, secs),
                        src.connections,
                        src.state,
                        src.dropped.as_deref().map_or("null".to_string(), json_string)
                    )
                })
                .collect();
            format!(
                concat!(
                    "\"url\":{},\"url_length\":{},\"download_bytes\":{},\"download_mb_per_s\":{:.3},",
                    "\"connections\":{},\"connections_max\":{},\"retries\":{},",
                    "\"refetched_bytes\":{},\"copies\":{},\"sources\":[{}],"
                ),
                json_string(&d.url),
                null_or(d.length),
                d.bytes,
                rate_mb_s(d.bytes, secs),
                d.connections,
                d.ceiling,
                d.retries,
                d.refetched,
                d.copies,
                sources.join(",")
            )
        }
    };
    let resumed = match &s.resume.resumed {
        None => "null".to_string(),
        Some(r) => format!(
            concat!(
                "{{\"member\":{},\"tar_offset\":{},\"archive_offset\":{},",
                "\"skipped_percent\":{:.3},\"mode\":\"{}\"}}"
            ),
            r.member,
            r.tar,
            r.archive,
            r.skipped_percent(),
            if r.from_start { "reread" } else { "seek" }
        ),
    };
    let st = &s.stats;
    let secs = s.elapsed.as_secs_f64();
    let sync = s.sync.map_or("null".to_string(), |d| format!("{:.6}", d.as_secs_f64()));
    format!(
        concat!(
            "{{\"members\":{},\"files\":{},\"files_direct\":{},\"files_buffered\":{},",
            "\"dirs\":{},\"links\":{},\"bytes\":{},\"elapsed_s\":{:.6},\"mb_per_s\":{:.3},",
            "\"sync_s\":{},\"decode_threads\":{},\"frames\":{},\"frames_ahead\":{},",
            "\"frames_in_place\":{},\"frame_bytes_handed\":{},\"frame_bytes_copied\":{},",
            "\"pool_bytes\":{},\"frame_pool_bytes\":{},",
            "\"writer_threads\":{},\"uring_writers\":{},\"direct_io\":{},",
            "{}\"resumed\":{},\"resume_points\":{},\"skipped\":{},\"exit_code\":{}}}"
        ),
        s.members,
        st.files,
        st.files_direct,
        st.files - st.files_direct,
        st.dirs,
        st.links,
        st.bytes,
        secs,
        rate_mb_s(st.bytes, secs),
        sync,
        s.decoding.threads,
        null_or(s.decoding.frames),
        null_or(s.decoding.frames_ahead),
        null_or(s.decoding.frames_in_place),
        null_or(s.decoding.frame_bytes_handed),
        null_or(s.decoding.frame_bytes_copied),
        s.memory.0,
        s.memory.1,
        s.writers.0,
        s.writers.1,
        s.direct.json(),
        download,
        resumed,
        s.resume.points,
        skipped,
        code as i32
    )
}

/// A JSON string of `text`: quotes, backslashes and control characters escaped (RFC 8259 §7).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn null_or(n: Option<u64>) -> String {
    n.map_or("null".to_string(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::{SummaryTo, summary_to};

    /// Every combination of the four inputs (`-v` is none of them: it never decides).
    #[test]
    fn success_is_quiet_unless_asked_or_on_a_terminal() {
        use SummaryTo::*;
        // (json, quiet, totals, stderr a terminal) -> where the summary goes
        let table = [
            ((false, false, false, false), Nowhere),
            ((false, false, false, true), Stderr),
            ((false, false, true, false), Stderr),
            ((false, false, true, true), Stderr),
            ((false, true, false, false), Nowhere),
            ((false, true, false, true), Nowhere),
            ((false, true, true, false), Nowhere),
            ((false, true, true, true), Nowhere),
            ((true, false, false, false), Json),
            ((true, false, false, true), Json),
            ((true, false, true, false), Json),
            ((true, false, true, true), Json),
            ((true, true, false, false), Json),
            ((true, true, false, true), Json),
            ((true, true, true, false), Json),
            ((true, true, true, true), Json),
        ];
        for ((json, quiet, totals, tty), want) in table {
            assert_eq!(summary_to(json, quiet, totals, tty), want, "{json} {quiet} {totals} {tty}");
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(super::json_string("https://h/a?b=\"c\"\\"), r#""https://h/a?b=\"c\"\\""#);
        assert_eq!(super::json_string("a\nb\u{1}"), r#""a\u000ab\u0001""#);
    }
}
