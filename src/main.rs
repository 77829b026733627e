//! fastuntar: parse the command line, run the extraction, turn the outcome into an exit code.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::CommandFactory;

use fastuntar::cli::resolve::Edge;
use fastuntar::command::extract::Summary;
use fastuntar::command::{Command, Plans, extract, list, to_stdout};
use fastuntar::exit_codes::ExitCode;
use fastuntar::report::Reporter;
use fastuntar::{cli, report, resources, write};

fn main() {
    // The run's reporter, its clock started now: every line the run says, and the counts
    // its exit status comes from.
    let reporter = Arc::new(Reporter::new());
    report::locale::init_locale();
    ignore_sigxfsz();
    resources::fit_address_space();
    let argv = cli::traditional(std::env::args_os().collect())
        .map_err(cli::UsageError::from)
        .and_then(|argv| cli::with_env_options(argv, std::env::var_os("TAR_OPTIONS").as_deref()));
    let args = match argv {
        Ok(argv) => cli::parse(argv),
        Err(e) => {
            reporter.diagnostic(&format!("fastuntar: {e}"));
            std::process::exit(e.status);
        }
    };
    print_generated(&args, &reporter);
    let plans = resolve(args, &reporter);
    run(plans, &reporter);
}

/// `--completions`, `--man`, `--show-defaults`, `--usage`: the text, then exit.
fn print_generated(args: &cli::Args, reporter: &Reporter) {
    if let Some(shell) = args.completions {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut cli::Args::command(), "fastuntar", &mut text);
        print_all(&text, "the completions", reporter);
    }
    if args.man {
        let mut text = Vec::new();
        let man = clap_mangen::Man::new(cli::Args::command());
        if let Err(e) = man.render(&mut text) {
            reporter.diagnostic(&format!("fastuntar: cannot write the man page: {e}"));
            std::process::exit(ExitCode::Fatal as i32);
        }
        print_all(&text, "the man page", reporter);
    }
    if args.show_defaults {
        print_all(b"-f- -b20 --quoting-style=escape\n", "the defaults", reporter);
    }
    if args.usage {
        let usage = cli::Args::command().render_usage().to_string();
        print_all(format!("{usage}\n").as_bytes(), "the usage", reporter);
    }
}

/// The plans for this run (cli/resolve.rs), from the arguments and what the edge reads of the
/// process's surroundings; with the writers' layout for DIR's filesystem when extracting.
/// What the resolve step warns about is said here; a refusal exits 2.
fn resolve(args: cli::Args, reporter: &Reporter) -> Plans {
    let mut notes = Vec::new();
    let edge = Edge::read(reporter.started_at());
    let plans = edge.and_then(|edge| cli::resolve::resolve(args, &edge, &mut notes));
    for note in &notes {
        reporter.warn(note);
    }
    let mut plans = match plans {
        Ok(plans) => plans,
        Err(e) => {
            reporter.diagnostic(&format!("fastuntar: {e:#}"));
            std::process::exit(ExitCode::Fatal as i32);
        }
    };
    if !plans.command.reads_only() {
        let fs = write::plan::DestFs::probe(&plans.writer);
        plans.writer.layout = Some(cli::resolve::writer_layout(&plans.writer, &fs));
    }
    plans
}

/// Runs the command the plans say, then exits with its code.
fn run(plans: Plans, reporter: &Arc<Reporter>) -> ! {
    let report = &plans.report;
    if let Some(path) = &report.index_file
        && let Err(e) = reporter.open_index_file(path)
    {
        reporter.diagnostic(&format!("fastuntar: {e}"));
        std::process::exit(ExitCode::Fatal as i32);
    }
    // -t and -O: no summary line, no progress (with -O stdout carries data, and they would
    // draw over `| less`).
    if plans.command.reads_only() {
        let outcome = match plans.command {
            Command::List => list::run(&plans, reporter),
            _ => to_stdout::run(&plans, reporter),
        };
        print_totals(report, &outcome, reporter);
        exit(code_of(&outcome, reporter), reporter);
    }
    let outcome = extract::run(&plans, reporter);
    print_totals(report, &outcome, reporter);
    let code = code_of(&outcome, reporter);
    if let Ok(summary) = &outcome {
        let tty = std::io::stderr().is_terminal();
        let skipped = reporter.skipped_count();
        match summary_to(report.json, report.quiet, report.verbose > 0 || report.totals, tty) {
            SummaryTo::Json => {
                let _ = reporter.print_line(&json(summary, code, skipped));
            }
            SummaryTo::Stderr => {
                report::info(&format!("fastuntar: {}", line(summary, report.verbose > 0, skipped)))
            }
            SummaryTo::Nowhere => {}
        }
    }
    exit(code, reporter);
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
/// said on a terminal, or when asked (`-v`, `--totals`: `asked`), never with `-q`; `--json`
/// always prints its object.
fn summary_to(json: bool, quiet: bool, asked: bool, stderr_tty: bool) -> SummaryTo {
    match () {
        _ if json => SummaryTo::Json,
        _ if quiet => SummaryTo::Nowhere,
        _ if asked || stderr_tty => SummaryTo::Stderr,
        _ => SummaryTo::Nowhere,
    }
}

/// `--totals`, after a run that read its archive to the end (GNU tar prints nothing after a
/// fatal error), before the summary line.
fn print_totals<T>(plan: &report::plan::ReportPlan, outcome: &anyhow::Result<T>, r: &Reporter) {
    if plan.totals && outcome.is_ok() {
        r.diagnostic(&r.totals_line(plan.record_size));
    }
}

/// The exit code of a run's outcome (`Reporter::status`: GNU tar's 2 also for a member that
/// could not be extracted), saying its error if it failed.
fn code_of<T>(outcome: &anyhow::Result<T>, reporter: &Reporter) -> ExitCode {
    if let Err(e) = outcome {
        reporter.diagnostic(&format!("fastuntar: {e:#}"));
    }
    reporter.status(outcome.is_ok())
}

/// Exits with `code`, or with 2 when output was lost (report.rs): a failed write to stdout is
/// said here, once; a diagnostic that stderr did not take cannot be said at all.
fn exit(code: ExitCode, reporter: &Reporter) -> ! {
    let mut code = code;
    if let Some(e) = reporter.stdout_failure() {
        reporter.diagnostic(&format!("fastuntar: {e}"));
        code = ExitCode::Fatal;
    }
    if reporter.diagnostic_lost() {
        code = ExitCode::Fatal;
    }
    std::process::exit(code as i32);
}

/// Prints generated text (completions, man page) and exits: 0, also when the reader closed
/// the pipe early (`fastuntar --man | head`); 2 with a message on any other failure.
fn print_all(text: &[u8], what: &str, reporter: &Reporter) -> ! {
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            reporter.diagnostic(&format!("fastuntar: cannot write {what}: {e}"));
            std::process::exit(ExitCode::Fatal as i32);
        }
        _ => std::process::exit(ExitCode::Success as i32),
    }
}

/// A write past RLIMIT_FSIZE (`ulimit -f`) raises SIGXFSZ, whose default action kills the
/// process with no word about the member (GNU tar 1.34 dies that way: "File size limit
/// exceeded", status 153 in the shell). Ignored, the write fails with EFBIG instead, in this
/// thread and in io_uring's workers alike, and the run ends with the member's error line.
fn ignore_sigxfsz() {
    // Safety: installs SIG_IGN, which runs no code in the handler; no other thread exists yet.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
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

    #[test]
    fn success_is_quiet_unless_asked_or_on_a_terminal() {
        // (json, quiet, asked, tty)
        assert_eq!(summary_to(false, false, false, false), SummaryTo::Nowhere);
        assert_eq!(summary_to(false, false, false, true), SummaryTo::Stderr);
        assert_eq!(summary_to(false, false, true, false), SummaryTo::Stderr);
        assert_eq!(summary_to(false, true, true, true), SummaryTo::Nowhere);
        assert_eq!(summary_to(true, false, false, false), SummaryTo::Json);
        assert_eq!(summary_to(true, true, false, false), SummaryTo::Json);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(super::json_string("https://h/a?b=\"c\"\\"), r#""https://h/a?b=\"c\"\\""#);
        assert_eq!(super::json_string("a\nb\u{1}"), r#""a\u000ab\u0001""#);
    }
}
