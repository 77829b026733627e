//! Everything fastuntar prints goes through here. Non-fatal problems: the run's `Reporter`
//! (reporter.rs), a value the command hands down, prints `fastuntar: MEMBER: message` and
//! remembers that something was skipped, so the exit code is decided in one place (main.rs).
//!
//! Printing never panics (`println!` does on a closed pipe or a full disk). As GNU tar 1.34
//! (gnulib's `close_stdout`): a failed write to standard output (`-v` names, `--json`) stops
//! the printing, not the run, and the run then exits 2 saying `stdout: write error: ...` (the
//! same for `--index-file`'s FILE, where GNU tar says nothing and exits 0); a
//! diagnostic that could not be written to standard error makes the exit status 2 as well.
//! The closing summary line is not a diagnostic: losing it changes nothing. (A closed stdout or
//! stderr never shows up as an error here: Rust's runtime reopens a closed 0, 1 or 2 on
//! /dev/null before main, so such output is discarded as `>/dev/null` would discard it.)

pub mod checkpoint;
pub mod locale;
pub mod plan;
pub mod progress;
pub mod quoting;
pub mod reporter;
pub mod summary;
pub mod time;
pub mod totals;
pub mod voice;

pub use reporter::Reporter;

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The classes of warnings GNU tar's `--warning=[no-]KEYWORD` turns on and off, for the
/// messages fastuntar prints of them. GNU tar's other keywords (about creating archives, or
/// messages fastuntar does not print) are accepted and change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warning {
    /// "NAME: time stamp ... is N s in the future", "NAME: implausibly old time stamp ...".
    Timestamp,
    /// `--keep-newer-files`: "Current 'NAME' is newer or same age".
    IgnoreNewer,
    /// `--skip-old-files -v`: "NAME: skipping existing file".
    ExistingFile,
    /// "NAME: unknown file type 'X', extracted as a regular file".
    UnknownCast,
    /// "Extracting contiguous files as regular files", once per run.
    ContiguousCast,
    /// "A lone zero block at N": the end marker is one zero block, not two.
    AloneZeroBlock,
    /// `--xattrs`, `--acls`: an attribute or ACL that could not be set (GNU tar warns and
    /// exits 0).
    XattrWrite,
}

/// Every keyword GNU tar 1.34 takes for `--warning` (`tar --warning=help`), and the class of
/// ours it names, if any.
pub const WARNING_KEYWORDS: &[(&str, Option<Warning>)] = &[
    ("alone-zero-block", Some(Warning::AloneZeroBlock)),
    ("bad-dumpdir", None),
    ("cachedir", None),
    ("contiguous-cast", Some(Warning::ContiguousCast)),
    ("file-changed", None),
    ("file-ignored", None),
    ("file-removed", None),
    ("file-shrank", None),
    ("file-unchanged", None),
    ("filename-with-nuls", None),
    ("ignore-archive", None),
    ("ignore-newer", Some(Warning::IgnoreNewer)),
    ("new-directory", None),
    ("rename-directory", None),
    ("symlink-cast", None),
    ("timestamp", Some(Warning::Timestamp)),
    ("unknown-cast", Some(Warning::UnknownCast)),
    ("unknown-keyword", None),
    ("xdev", None),
    ("decompress-program", None),
    ("existing-file", Some(Warning::ExistingFile)),
    ("xattr-write", Some(Warning::XattrWrite)),
    ("record-size", None),
    ("failed-read", None),
];

fn bit(w: Warning) -> u64 {
    1 << (w as u32)
}

/// The warning classes `--warning` turned off: a value the resolve step makes
/// (cli/resolve.rs) and hands to whoever warns (the reporting and writer plans).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Warnings {
    off: u64,
}

impl Warnings {
    /// `--warning` KEYWORDs applied in order, as GNU tar: `all`, `none`, a keyword, or `no-`
    /// and a keyword. An unknown one is an error naming the valid ones.
    pub fn parse(given: &[String]) -> anyhow::Result<Warnings> {
        let mut warnings = Warnings::default();
        for arg in given {
            let (on, word) = match arg.strip_prefix("no-") {
                Some(rest) => (false, rest),
                None => (true, arg.as_str()),
            };
            let all = WARNING_KEYWORDS.iter().filter_map(|(_, w)| *w);
            match word {
                "all" => all.for_each(|w| warnings.set(w, on)),
                "none" => all.for_each(|w| warnings.set(w, !on)),
                _ => match WARNING_KEYWORDS.iter().find(|(k, _)| *k == word) {
                    Some((_, Some(w))) => warnings.set(*w, on),
                    Some((_, None)) => {}
                    None => {
                        let valid: Vec<&str> = WARNING_KEYWORDS.iter().map(|(k, _)| *k).collect();
                        anyhow::bail!(
                            "invalid argument '{arg}' for '--warning' (valid: all, none, {}, \
                             each also with no-)",
                            valid.join(", ")
                        );
                    }
                },
            }
        }
        Ok(warnings)
    }

    fn set(&mut self, w: Warning, on: bool) {
        match on {
            true => self.off &= !bit(w),
            false => self.off |= bit(w),
        }
    }

    /// Whether warnings of class `w` are said.
    pub fn is_on(&self, w: Warning) -> bool {
        self.off & bit(w) == 0
    }

    /// A warning of class `w` to `to`, unless `--warning=no-...` turned it off.
    pub fn warn(&self, to: &Reporter, w: Warning, msg: impl std::fmt::Display) {
        to.warning(*self, w, msg);
    }
}

/// The name every message begins with (`NAME: ...`): `argv[0]`'s last component, so that a
/// `tar` symlink to fastuntar speaks as `tar`, as scripts that grep GNU tar's messages expect;
/// "fastuntar" when `argv[0]` is missing or empty (and in a library run: set once by main).
/// GNU tar prints `argv[0]` whole (`/usr/bin/tar: ...`); the last component reads the same
/// wherever the binary was found.
pub fn program_name(argv0: Option<&std::ffi::OsStr>) -> String {
    let base = argv0.map(|a| a.as_encoded_bytes().rsplit(|&b| b == b'/').next().unwrap_or(b""));
    match base {
        Some(b) if !b.is_empty() => printable(b),
        _ => "fastuntar".to_string(),
    }
}

/// Set once by main from `argv[0]` (`program_name`).
static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the program for every message from now on (main, before anything is said).
pub fn set_program(name: String) {
    let _ = PROGRAM.set(name);
}

/// The program's name in messages (`set_program`; "fastuntar" until then).
pub fn program() -> &'static str {
    PROGRAM.get().map_or("fastuntar", String::as_str)
}

/// `msg` as a line of the program's: `NAME: msg`.
pub fn said(msg: impl std::fmt::Display) -> String {
    format!("{}: {msg}", program())
}

/// GNU tar's last line after a run that went on past errors (exit 2).
pub const PREVIOUS_ERRORS: &str = "Exiting with failure status due to previous errors";

/// GNU tar's last line after an error that ended the run.
pub const NOT_RECOVERABLE: &str = "Error is not recoverable: exiting now";

/// GNU tar's last line for a run that exits `code`: after an error that ended it (`fatal`),
/// "Error is not recoverable: exiting now"; after errors it went on past (members not
/// extracted, an operand that matched nothing, output lost), "Exiting with failure status due
/// to previous errors"; none after success.
pub fn closing(code: crate::exit_codes::ExitCode, fatal: bool) -> Option<&'static str> {
    use crate::exit_codes::ExitCode;
    match (code, fatal) {
        (ExitCode::Success, _) => None,
        (_, true) => Some(NOT_RECOVERABLE),
        (_, false) => Some(PREVIOUS_ERRORS),
    }
}

/// The system's words for an error, as GNU tar prints them (strerror): Rust's io::Error adds
/// " (os error N)", which no tar user greps for. An error of ours (no errno) is said as it is.
pub fn strerror(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) if e.get_ref().is_none() => {
            match text.strip_suffix(&format!(" (os error {code})")) {
                Some(words) => words.to_string(),
                None => text,
            }
        }
        _ => text,
    }
}

/// `text` (a system error said by Rust) without its trailing " (os error N)".
pub fn without_errno(text: String) -> String {
    let Some(open) = text.rfind(" (os error ") else { return text };
    let code = &text[open + " (os error ".len()..];
    match code.strip_suffix(')') {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            text[..open].to_string()
        }
        _ => text,
    }
}

/// An error and its causes, `{:#}` as anyhow joins them (`outer: inner: ...`), each system
/// error in its strerror words (`strerror`).
pub fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for (i, cause) in voice::causes(e).enumerate() {
        if i > 0 {
            out.push_str(": ");
        }
        match cause.downcast_ref::<io::Error>() {
            Some(io) => out.push_str(&strerror(io)),
            None => out.push_str(&cause.to_string()),
        }
    }
    out
}

/// Writes `line` and a newline to stderr in one write, so lines from two threads never mix.
pub(crate) fn write_stderr(line: &str) -> io::Result<()> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    progress::around_output(false, || io::stderr().lock().write_all(&buf))
}

/// A line for stderr that is information only (the closing summary): a failure is ignored.
pub fn info(line: &str) {
    let _ = write_stderr(line);
}

pub(crate) fn with_newline(line: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    buf
}

/// Whether `--index-file`'s FILE may be followed when it is a symlink: only the system's names
/// for this process's descriptors, symlinks by design (`/dev/stdout`, `/dev/stderr`,
/// `/dev/fd/N`, `/proc/self/fd/N`), which no archive can make.
fn index_file_may_be_a_symlink(path: &Path) -> bool {
    let p = path.as_os_str().as_encoded_bytes();
    let fd = |rest: &[u8]| !rest.is_empty() && rest.iter().all(u8::is_ascii_digit);
    matches!(p, b"/dev/stdout" | b"/dev/stderr")
        || p.strip_prefix(b"/dev/fd/").is_some_and(fd)
        || p.strip_prefix(b"/proc/self/fd/").is_some_and(fd)
}

/// A name or value from the archive made safe for a one-line message: control characters,
/// backslashes and bytes that are not UTF-8 escaped (GNU tar's "escape" quoting), so a hostile
/// name cannot forge a line or send terminal escapes.
pub fn printable(bytes: &[u8]) -> String {
    quote(bytes, true)
}

/// A name as GNU tar's `quote()` puts it in a message: between the locale's quotation marks
/// (‘…’ in a UTF-8 locale, '…' otherwise), escaped as `quote` escapes.
pub fn locale_quoted(bytes: &[u8], utf8: bool) -> String {
    in_locale_quotes(&quote(bytes, utf8), utf8)
}

/// `text` (escaped already) between the locale's quotation marks.
/// As gnulib's locale quoting, the closing mark inside the text gets a backslash (`'it\'s'`
/// in the C locale, `‘a\’b’` in a UTF-8 one).
pub fn in_locale_quotes(text: &str, utf8: bool) -> String {
    let (open, close) = if utf8 { ("\u{2018}", "\u{2019}") } else { ("'", "'") };
    let text = match text.contains(close) {
        true => std::borrow::Cow::Owned(text.replace(close, &format!("\\{close}"))),
        false => std::borrow::Cow::Borrowed(text),
    };
    format!("{open}{text}{close}")
}

/// GNU tar's default "escape" quoting: C escapes for control characters and backslash,
/// octal for bytes that are not printable in the locale.
pub fn quote(bytes: &[u8], utf8: bool) -> String {
    // Most names are printable ASCII without a backslash: copied as they are (every member's
    // name goes through here; the loop below cost 0.9 % of a small-files extraction).
    let plain = |b: &u8| (0x20..=0x7e).contains(b) && *b != b'\\';
    if bytes.iter().all(plain) {
        // ASCII: the check is quick, nothing is replaced.
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(&b) = rest.first() {
        if utf8
            && b >= 0x80
            && let Some(ch) = first_utf8_char(rest)
            && printable_char(ch)
        {
            out.push(ch);
            rest = &rest[ch.len_utf8()..];
            continue;
        }
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            0x0b => out.push_str("\\v"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
        rest = &rest[1..];
    }
    out
}

/// `locale::init_locale` found a UTF-8 locale: the C library's `iswprint` says which
/// characters are printable (glibc: not unassigned code points, U+2028, noncharacters...).
/// Process-wide as the C library's locale it follows (setlocale), set once at start.
static LIBC_PRINTABLE: AtomicBool = AtomicBool::new(false);

unsafe extern "C" {
    /// <wctype.h>; the libc crate does not declare it.
    fn iswprint(wc: u32) -> libc::c_int;
}

pub(crate) fn use_libc_printable(on: bool) {
    LIBC_PRINTABLE.store(on, Ordering::Relaxed);
}

/// Whether a character of a UTF-8 name prints as it is (else its bytes are escaped).
pub(crate) fn printable_char(ch: char) -> bool {
    if LIBC_PRINTABLE.load(Ordering::Relaxed) {
        // Safety: iswprint takes any wint_t (an unsigned int in glibc and musl) and reads the
        // locale, which was set before threads started.
        unsafe { iswprint(ch as u32) != 0 }
    } else {
        !ch.is_control()
    }
}

fn first_utf8_char(b: &[u8]) -> Option<char> {
    let n = match b[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    std::str::from_utf8(b.get(..n)?).ok()?.chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--warning` keywords in order: `all`, `none`, a class, `no-` a class; an unknown one
    /// is refused.
    #[test]
    fn warning_classes() {
        let w = |given: &[&str]| {
            let given: Vec<String> = given.iter().map(|g| g.to_string()).collect();
            super::Warnings::parse(&given)
        };
        let on = |given: &[&str], class| w(given).unwrap().is_on(class);
        use super::Warning::*;
        assert!(on(&[], Timestamp));
        assert!(!on(&["no-timestamp"], Timestamp));
        assert!(on(&["no-timestamp"], IgnoreNewer));
        assert!(!on(&["none"], XattrWrite));
        assert!(on(&["none", "xattr-write"], XattrWrite));
        assert!(on(&["no-timestamp", "all"], Timestamp));
        assert!(!on(&["all", "no-all"], ExistingFile));
        assert!(on(&["no-none"], UnknownCast));
        assert!(on(&["no-file-changed"], Timestamp));
        assert!(w(&["no-such-thing"]).is_err());
    }

    #[test]
    fn index_file_symlinks_followed_only_for_the_own_descriptors() {
        for p in ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/12"] {
            assert!(index_file_may_be_a_symlink(Path::new(p)), "{p}");
        }
        for p in ["idx", "dest/INDEX", "/dev/fd/", "/dev/fd/1/x", "/dev/./stdout", "/tmp/stdout"] {
            assert!(!index_file_may_be_a_symlink(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn program_named_after_argv0() {
        use std::ffi::OsStr;
        let name = |a: &str| program_name(Some(OsStr::new(a)));
        assert_eq!(name("tar"), "tar");
        assert_eq!(name("/usr/local/bin/tar"), "tar");
        assert_eq!(name("./fastuntar"), "fastuntar");
        assert_eq!(name("gtar\n"), "gtar\\n");
        assert_eq!(name(""), "fastuntar");
        assert_eq!(name("dir/"), "fastuntar");
        assert_eq!(program_name(None), "fastuntar");
    }

    #[test]
    fn closing_lines_as_gnu_tar() {
        use crate::exit_codes::ExitCode::*;
        let table = [
            ((Success, false), None),
            ((Success, true), None),
            ((Fatal, false), Some(PREVIOUS_ERRORS)),
            ((Fatal, true), Some(NOT_RECOVERABLE)),
        ];
        for ((code, fatal), want) in table {
            assert_eq!(closing(code, fatal), want, "{code:?} {fatal}");
        }
    }

    /// strerror's words without Rust's " (os error N)"; our own errors as they are; the
    /// causes of a chain each so.
    #[test]
    fn system_errors_in_strerror_words() {
        let e = io::Error::from_raw_os_error(libc::EEXIST);
        assert_eq!(strerror(&e), "File exists");
        assert_eq!(strerror(&io::Error::other("mine (os error 5)")), "mine (os error 5)");
        let e = io::Error::from_raw_os_error(libc::ENOSPC).to_string();
        assert_eq!(without_errno(e), "No space left on device");
        assert_eq!(without_errno("a (os error x)".into()), "a (os error x)");
        let e = anyhow::Error::new(io::Error::from_raw_os_error(libc::ENOENT))
            .context("f: Cannot open");
        assert_eq!(chain(&e), "f: Cannot open: No such file or directory");
    }

    #[test]
    fn quoting() {
        assert_eq!(quote(b"a b", false), "a b");
        assert_eq!(quote(b"a\\b\n", false), "a\\\\b\\n");
        assert_eq!(quote("é".as_bytes(), false), "\\303\\251");
        assert_eq!(quote("é".as_bytes(), true), "é");
        assert_eq!(quote(b"\xff", true), "\\377");
        assert_eq!(printable(b"x\n\x1b[31m"), "x\\n\\033[31m");
    }
}
