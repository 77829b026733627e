//! What the writers did that a run may say: events to one sink. dest.rs and purge.rs decide
//! and act, and say nothing themselves; `Said` says the events as GNU tar 1.34 does (with -v
//! its `Renaming` and `Deleting` lines, the `--skip-old-files` and `--keep-newer-files`
//! warnings), and a test can pass its own sink to see what happened.

use crate::report::{self, Warning, Warnings, locale};

/// One thing a writer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// `--backup` renamed what was at a member's path, `from` (as extracted, from DIR), to
    /// `to`, out of the member's way.
    Renamed { from: &'a [u8], to: &'a [u8] },
    /// `-G`: `path` (from DIR, escaped already) is removed, as the archive's directory list
    /// no longer names it.
    Deleting { path: &'a str },
    /// `--skip-old-files` kept what was at member `name`'s path.
    Skipped { name: &'a str },
    /// `--keep-newer-files` kept what is at `path` (as GNU tar names it), as new as the
    /// member or newer.
    KeptNewer { path: &'a str },
    /// `--xattrs`, `--acls`: attributes of member `member` were not set; `name` (escaped
    /// already) is the first refused, for `error`, and `more` others were refused as well.
    XattrsNotSet { member: &'a str, name: &'a str, error: &'a str, more: usize },
}

/// Where writers send their events. Shared by every writer thread of a run.
pub trait Events: Send + Sync {
    fn event(&self, e: Event<'_>);
}

/// The events said as GNU tar 1.34 says them: `Renaming`, `Deleting` and "skipping existing
/// file" with -v (`verbose`), "Current 'PATH' is newer or same age" and attributes not set
/// always; the warnings each in the classes `--warning` left on (`warnings`).
pub struct Said {
    pub verbose: bool,
    pub warnings: Warnings,
}

impl Events for Said {
    fn event(&self, e: Event<'_>) {
        match e {
            Event::Renamed { from, to } if self.verbose => {
                // In the locale's quotation marks, as GNU tar's quote_n.
                let utf8 = locale::utf8_locale();
                let (from, to) =
                    (report::locale_quoted(from, utf8), report::locale_quoted(to, utf8));
                // A failed write to stdout is reported at the end (report/mod.rs).
                let _ = report::list_line(format!("Renaming {from} to {to}"), false);
            }
            Event::Deleting { path } if self.verbose => {
                // Escaped already (as GNU tar's quote escapes): only the quotation marks.
                let quoted = report::in_locale_quotes(path, locale::utf8_locale());
                let _ = report::list_line(format!("fastuntar: Deleting {quoted}"), false);
            }
            Event::Skipped { name } if self.verbose => {
                // GNU tar names it without the trailing `/` of a directory member (`./d/` is
                // "./d", `./` is ".").
                let trimmed = name.trim_end_matches('/');
                let name = if trimmed.is_empty() { name } else { trimmed };
                let said = format!("{name}: skipping existing file");
                self.warnings.warn(Warning::ExistingFile, said);
            }
            Event::KeptNewer { path } => {
                let said = format!("Current '{path}' is newer or same age");
                self.warnings.warn(Warning::IgnoreNewer, said);
            }
            Event::XattrsNotSet { member, name, error, more } => {
                let more = match more {
                    0 => String::new(),
                    n => format!(" (and {n} more not set)"),
                };
                let said =
                    format!("{member}: cannot set extended attribute '{name}': {error}{more}");
                self.warnings.warn(Warning::XattrWrite, said);
            }
            Event::Renamed { .. } | Event::Deleting { .. } | Event::Skipped { .. } => {}
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
            Event::Skipped { name } => format!("skipped {name}"),
            Event::KeptNewer { path } => format!("kept newer {path}"),
            Event::XattrsNotSet { member, name, error, more } => {
                format!("xattrs not set {member} {name}: {error} +{more}")
            }
        };
        self.0.lock().unwrap().push(said);
    }
}
