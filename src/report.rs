//! Non-fatal problems: one reporting helper that prints `fastuntar: MEMBER: message` and
//! remembers that something was skipped, so the exit code is decided in one place (main.rs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static SKIPPED: AtomicU64 = AtomicU64::new(0);
static QUIET_WARNINGS: AtomicBool = AtomicBool::new(false);

/// A member was skipped or only partly restored; the run will exit 1.
pub fn skipped(member: &str, msg: impl std::fmt::Display) {
    SKIPPED.fetch_add(1, Ordering::Relaxed);
    eprintln!("fastuntar: {member}: {msg}");
}

/// Something worth saying that does not change the exit code (e.g. a stripped leading `/`).
pub fn warn(msg: impl std::fmt::Display) {
    if !QUIET_WARNINGS.load(Ordering::Relaxed) {
        eprintln!("fastuntar: {msg}");
    }
}

pub fn skipped_count() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

/// A name or value from the archive made safe for a one-line message: control characters,
/// backslashes and bytes that are not UTF-8 escaped (GNU tar's "escape" quoting), so a hostile
/// name cannot forge a line or send terminal escapes.
pub fn printable(bytes: &[u8]) -> String {
    quote(bytes, true)
}

/// GNU tar's default "escape" quoting: C escapes for control characters and backslash,
/// octal for bytes that are not printable in the locale.
pub fn quote(bytes: &[u8], utf8: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(&b) = rest.first() {
        if utf8
            && b >= 0x80
            && let Some(ch) = first_utf8_char(rest)
            && !ch.is_control()
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
