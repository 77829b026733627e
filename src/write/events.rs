//! What the writers did that a run may say or count: events to one sink. The writers decide
//! and act, and say nothing themselves; `Said` says the events as GNU tar 1.34 does (with -v
//! its `Renaming` and `Deleting` lines, the `--skip-old-files` and `--keep-newer-files`
//! warnings, the members not restored) and counts them in the run's `Reporter` (the exit
//! status, the bytes landed that progress and the resume recorder read), and a test can pass
//! its own sink to see what happened.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::outcome::KeptExisting;
use crate::report::voice::Skip;
use crate::report::{self, Reporter, Warning, Warnings, locale};

/// One thing a writer did.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// `--backup` renamed what was at a member's path, `from` (as extracted, from DIR), to
    /// `to`, out of the member's way.
    Renamed { from: &'a [u8], to: &'a [u8] },
    /// `-G`: `path` (from DIR, escaped already) is removed, as the archive's directory list
    /// no longer names it.
    Deleting { path: &'a str },
    /// `--skip-old-files` or `--keep-newer-files` kept what was at member `name`'s path
    /// (`KeptExisting::Newer` names the path as GNU tar names it).
    Kept { name: &'a str, kept: &'a KeptExisting },
    /// `--xattrs`, `--acls`: attributes of member `member` were not set; `name` (escaped
    /// already) is the first refused, for `error`, and `more` others were refused as well.
    XattrsNotSet { member: &'a str, name: &'a str, error: &'a str, more: usize },
    /// Member `name` was not restored, or only in part, for `why`: the run goes on, and
    /// exits 2.
    NotRestored { name: &'a str, why: &'a str },
    /// `-G`: `name` failed for `why` (the run goes on, and exits 2).
    Failed { name: &'a str, why: &'a str },
    /// Something worth a warning that changes no exit status.
    Warned { what: &'a str },
    /// The destination refused O_DIRECT: the writer writes buffered from now on (said once
    /// per run, however many writers find out).
    DirectRefused,
    /// `bytes` of a file's data landed (once per completed write, never per byte).
    Landed { bytes: u64 },
    /// A regular file is complete at `path` (from DIR): its `size` bytes landed and its
    /// metadata set; `fd` is still open (closed after this returns).
    FileDone { root: usize, path: &'a std::path::Path, size: u64, fd: std::os::fd::BorrowedFd<'a> },
}

/// Where writers send their events. Shared by every writer thread of a run.
pub trait Events: Send + Sync {
    fn event(&self, e: Event<'_>);
}

/// The events said as GNU tar 1.34 says them: `Renaming`, `Deleting` and "skipping existing
/// file" with -v (`verbose`), "Current 'PATH' is newer or same age" and attributes not set
/// always; the warnings each in the classes `--warning` left on (`warnings`); all to and in
/// the run's reporter (`report`).
pub struct Said {
    verbose: bool,
    warnings: Warnings,
    report: Arc<Reporter>,
    /// `DirectRefused` was said.
    direct_refused: AtomicBool,
}

impl Said {
    pub fn new(verbose: bool, warnings: Warnings, report: Arc<Reporter>) -> Said {
        Said { verbose, warnings, report, direct_refused: AtomicBool::new(false) }
    }
}

impl Events for Said {
    fn event(&self, e: Event<'_>) {
        let report = &*self.report;
        match e {
            Event::Landed { bytes } => {
                report.tally.written.fetch_add(bytes, Ordering::Relaxed);
            }
            Event::FileDone { root, path, size, fd } => {
                if let Some(v) = report.voice() {
                    v.landed((root, path), size, fd);
                }
            }
            // A library's observer is told it as a skip, with why (`KeptExisting::reason`).
            Event::Kept { name, kept }
                if report.kept(kept.shown(name), kept.reason(), kept.summary()) => {}
            Event::NotRestored { name, why } => report.skipped(name, Skip::NotRestored, why),
            Event::Failed { name, why } => report.failed(name, why),
            Event::Warned { what } => report.warn(what),
            Event::DirectRefused => {
                if !self.direct_refused.swap(true, Ordering::Relaxed) {
                    report.warn("the destination refuses O_DIRECT; writing buffered from now on");
                }
            }
            Event::Renamed { from, to } if self.verbose => {
                // In the locale's quotation marks, as GNU tar's quote_n.
                let utf8 = locale::utf8_locale();
                let (from, to) =
                    (report::locale_quoted(from, utf8), report::locale_quoted(to, utf8));
                // A failed write to stdout is reported at the end (report/mod.rs).
                let _ = report.list_line(format!("Renaming {from} to {to}"), false);
            }
            Event::Deleting { path } if self.verbose => {
                // Escaped already (as GNU tar's quote escapes): only the quotation marks.
                let quoted = report::in_locale_quotes(path, locale::utf8_locale());
                let _ = report.list_line(report::said(format_args!("Deleting {quoted}")), false);
            }
            Event::Kept { name, kept: kept @ KeptExisting::Skipped } if self.verbose => {
                // GNU tar names it without the trailing `/` of a directory member (`./d/` is
                // "./d", `./` is ".").
                let trimmed = name.trim_end_matches('/');
                let name = if trimmed.is_empty() { name } else { trimmed };
                let said = format!("{name}: {kept}");
                self.warnings.warn(report, Warning::ExistingFile, said);
            }
            Event::Kept { kept: kept @ KeptExisting::Newer { .. }, .. } => {
                self.warnings.warn(report, Warning::IgnoreNewer, kept.to_string());
            }
            Event::XattrsNotSet { member, name, error, more } => {
                let more = match more {
                    0 => String::new(),
                    n => format!(" (and {n} more not set)"),
                };
                let said =
                    format!("{member}: cannot set extended attribute '{name}': {error}{more}");
                self.warnings.warn(report, Warning::XattrWrite, said);
            }
            Event::Renamed { .. } | Event::Deleting { .. } | Event::Kept { .. } => {}
        }
    }
}

/// A sink that keeps what it is told, for tests.
#[cfg(test)]
#[derive(Default)]
pub struct Kept(pub std::sync::Mutex<Vec<String>>);

#[cfg(test)]
impl Events for Kept {
    fn event(&self, e: Event<'_>) {
        let said = match e {
            Event::Renamed { from, to } => {
                format!("renamed {} {}", String::from_utf8_lossy(from), String::from_utf8_lossy(to))
            }
            Event::Deleting { path } => format!("deleting {path}"),
            Event::Kept { name, kept: KeptExisting::Skipped } => format!("skipped {name}"),
            Event::Kept { kept: KeptExisting::Newer { path }, .. } => format!("kept newer {path}"),
            Event::XattrsNotSet { member, name, error, more } => {
                format!("xattrs not set {member} {name}: {error} +{more}")
            }
            Event::NotRestored { name, why } => format!("not restored {name}: {why}"),
            Event::Failed { name, why } => format!("failed {name}: {why}"),
            Event::Warned { what } => format!("warned {what}"),
            Event::DirectRefused => "direct refused".to_string(),
            Event::Landed { bytes } => format!("landed {bytes}"),
            Event::FileDone { path, size, .. } => format!("done {} {size}", path.display()),
        };
        self.0.lock().unwrap().push(said);
    }
}
