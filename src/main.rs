//! fastuntar: parse the command line, run the extraction, turn the outcome into an exit code.

use std::io::Write;
use std::sync::Arc;

use clap::CommandFactory;

use fastuntar::__private::cli::resolve::Edge;
use fastuntar::__private::command::{Command, Plans, extract, list, to_stdout};
use fastuntar::__private::exit_codes::ExitCode;
use fastuntar::__private::report::Reporter;
use fastuntar::__private::{cli, report, resources};

fn main() {
    // The run's reporter, its clock started now: every line the run says, and the counts
    // its exit status comes from.
    let reporter = Arc::new(Reporter::new());
    report::set_program(report::program_name(std::env::args_os().next().as_deref()));
    report::locale::init_locale();
    ignore_sigxfsz();
    clear_the_bar_when_interrupted();
    resources::fit_address_space();
    // The writers size their descriptors from the soft limit in force (resources.rs
    // `FdBudget`); the command line takes the hard limit first, as GNU tar's users expect
    // many files in flight. A process setting: the library leaves it to its caller.
    let _ = resources::raise_nofile();
    let argv = cli::traditional(std::env::args_os().collect())
        .map_err(cli::UsageError::from)
        .and_then(|argv| cli::with_env_options(argv, std::env::var_os("TAR_OPTIONS").as_deref()));
    let args = match argv {
        Ok(argv) => cli::parse(argv),
        Err(e) => {
            reporter.diagnostic(&report::said(&e));
            std::process::exit(e.status);
        }
    };
    print_generated(&args, &reporter);
    let plans = resolve(args, &reporter);
    run(plans, &reporter);
}

/// `--completions`, `--man`, `--show-defaults`, `--usage`: the text, then exit.
fn print_generated(args: &cli::Args, reporter: &Reporter) {
    if let Some(shell) = args.informative.completions {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut cli::Args::command(), "fastuntar", &mut text);
        print_all(&text, "the completions", reporter);
    }
    if args.informative.man {
        match cli::reference::man_page(cli::Args::command()) {
            Ok(text) => print_all(&text, "the man page", reporter),
            Err(e) => {
                reporter.diagnostic(&report::said(format_args!(
                    "cannot write the man page: {}",
                    report::strerror(&e)
                )));
                std::process::exit(ExitCode::Fatal as i32);
            }
        }
    }
    if args.informative.show_defaults {
        print_all(b"-f- -b20 --quoting-style=escape\n", "the defaults", reporter);
    }
    if args.informative.usage {
        let usage = cli::Args::command().render_usage().to_string();
        print_all(format!("{usage}\n").as_bytes(), "the usage", reporter);
    }
}

/// The plans for this run: the options the flags ask for (cli/resolve.rs), from the
/// arguments and what the edge reads of the process's surroundings, made into plans as a
/// program's `Restore` makes its own (`Options::prepare`: with the writers' layout for DIR's
/// filesystem when extracting). What the resolve step warns about is said here; a refusal
/// exits 2.
fn resolve(args: cli::Args, reporter: &Reporter) -> Plans {
    let mut notes = Vec::new();
    let plans = Edge::read(reporter.started_at()).and_then(|edge| {
        let options = cli::resolve::options(args, &edge, &mut notes);
        options.and_then(|options| options.prepare(&edge.machine))
    });
    for note in &notes {
        reporter.warn(note);
    }
    match plans {
        Ok(plans) => plans,
        Err(e) => {
            // A refused command line (GNU tar's usage errors, exit 2): the line alone.
            reporter.diagnostic(&report::said(report::chain(&e)));
            std::process::exit(ExitCode::Fatal as i32);
        }
    }
}

/// Runs the command the plans say, then exits with its code.
fn run(plans: Plans, reporter: &Arc<Reporter>) -> ! {
    let report = &plans.report;
    if let Some(path) = &report.index_file
        && let Err(e) = reporter.open_index_file(path)
    {
        fatal(&e, reporter);
    }
    // -t and -O: no summary line, no progress (with -O stdout carries data, and they would
    // draw over `| less`).
    if plans.command.reads_only() {
        let outcome = match plans.command {
            Command::List => list::run(&plans, reporter),
            _ => to_stdout::run(&plans, reporter),
        };
        print_totals(report, &outcome, reporter);
        exit(code_of(&outcome, reporter), cut_short(&outcome), reporter);
    }
    let outcome = extract::run(&plans, reporter);
    print_totals(report, &outcome, reporter);
    let code = code_of(&outcome, reporter);
    if let Ok(summary) = &outcome {
        report::summary::say(summary, report, code, reporter);
    }
    exit(code, cut_short(&outcome), reporter);
}

/// `--totals`, after a run that read its archive to the end (GNU tar prints nothing after a
/// fatal error), before the summary line.
fn print_totals<T>(plan: &report::plan::ReportPlan, outcome: &anyhow::Result<T>, r: &Reporter) {
    if plan.totals && outcome.is_ok() {
        r.diagnostic(&r.totals_line(plan.record_size));
    }
}

/// The exit code of a run's outcome (`Reporter::status`: GNU tar's 2 also for a member that
/// could not be extracted), saying its error if it failed, and GNU tar's closing line for it
/// (`report::closing`).
fn code_of<T>(outcome: &anyhow::Result<T>, reporter: &Reporter) -> ExitCode {
    if let Err(e) = outcome {
        reporter.diagnostic(&report::said(report::chain(e)));
    }
    reporter.status(outcome.is_ok())
}

/// Whether an error cut the run short (GNU tar's "Error is not recoverable"): not an input
/// that was no tar archive at all, after which GNU tar ends as after errors it went past.
fn cut_short<T>(outcome: &anyhow::Result<T>) -> bool {
    outcome
        .as_ref()
        .is_err_and(|e| !report::causes(e).any(|c| c.is::<fastuntar::__private::archive::NotTar>()))
}

/// An error that ends the run before it read the archive (`--index-file`'s FILE cannot be
/// opened): said with GNU tar's closing line, exit 2.
fn fatal(e: &anyhow::Error, reporter: &Reporter) -> ! {
    reporter.diagnostic(&report::said(report::chain(e)));
    reporter.diagnostic(&report::said(report::NOT_RECOVERABLE));
    std::process::exit(ExitCode::Fatal as i32);
}

/// Exits with `code`, or with 2 when output was lost (report.rs): a failed write to stdout is
/// said here, once; a diagnostic that stderr did not take cannot be said at all. A run that
/// exits 2 ends with GNU tar's closing line (`report::closing`).
fn exit(code: ExitCode, fatal: bool, reporter: &Reporter) -> ! {
    let mut code = code;
    if let Some(e) = reporter.stdout_failure() {
        reporter.diagnostic(&report::said(e));
        code = ExitCode::Fatal;
    }
    if let Some(line) = report::closing(code, fatal) {
        reporter.diagnostic(&report::said(line));
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
            reporter.diagnostic(&report::said(format_args!(
                "cannot write {what}: {}",
                report::strerror(&e)
            )));
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

/// On a terminal, Ctrl-C (SIGINT) or SIGTERM would end the process with the progress bar's
/// last frame left on the screen (issue 44). The handler clears it and then dies of the same
/// signal as before (default action, raised again), so the shell sees the same status and a
/// rerun resumes as after any kill. Off a terminal there is no bar and nothing is installed.
///
/// indicatif pads the bar's line to the terminal's width, which leaves the cursor waiting to
/// wrap; a Ctrl-C typed there is echoed `^C` at the start of the next line (seen in tmux: the
/// frame stayed above a cleared line). So for a SIGINT from the terminal (`SI_KERNEL`) with
/// ECHO and ECHOCTL on, the handler clears that line and the one above it; for any other
/// signal the bar's line only, and nothing when no frame is on the screen.
fn clear_the_bar_when_interrupted() {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return;
    }
    extern "C" fn clear_and_die(
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _: *mut libc::c_void,
    ) {
        const THIS_LINE: &[u8] = b"\r\x1b[2K";
        const AND_ABOVE: &[u8] = b"\r\x1b[2K\x1b[1A\r\x1b[2K";
        let shown = fastuntar::__private::report::progress::ON_SCREEN
            .load(std::sync::atomic::Ordering::Relaxed);
        // Safety: `info` is the kernel's siginfo for this delivery (SA_SIGINFO); tcgetattr(3),
        // write(2), signal(2) and raise(3) are async-signal-safe, the buffers static. With the
        // default action restored, raise() ends the process by `sig`.
        unsafe {
            if shown {
                let typed =
                    sig == libc::SIGINT && !info.is_null() && (*info).si_code == libc::SI_KERNEL;
                let mut t: libc::termios = std::mem::zeroed();
                let echoed = typed
                    && libc::tcgetattr(libc::STDERR_FILENO, &mut t) == 0
                    && t.c_lflag & libc::ECHO != 0
                    && t.c_lflag & libc::ECHOCTL != 0;
                let clear = if echoed { AND_ABOVE } else { THIS_LINE };
                libc::write(libc::STDERR_FILENO, clear.as_ptr().cast(), clear.len());
            }
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // Safety: installs a handler that only calls async-signal-safe functions (above);
        // no other thread exists yet. A signal ignored when we started (a background job of
        // a shell without job control) stays ignored.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = clear_and_die as *const () as libc::sighandler_t;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}
