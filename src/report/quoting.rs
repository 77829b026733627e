//! `--quoting-style`, `--quote-chars`, `--no-quote-chars`: how member names and link targets
//! are written in listings (`-t`, `-v`), as GNU tar 1.34 writes them with gnulib's
//! `quotearg` (quotearg.c, `quotearg_buffer_restyled`): the same ten styles, the same
//! characters quoted, the same way of falling back to outer quotes. The default, `escape`,
//! is `report::quote` (also what every message uses, whatever the style: a hostile name
//! cannot put a raw control character on stderr).
//!
//! The styles: `literal` (as stored); `shell` (in `'...'` only where the shell needs it;
//! control characters raw); `shell-always` (always in `'...'`); `shell-escape` and
//! `shell-escape-always` (as those, control characters as `'$'\n''`); `c` (`"..."` with C
//! escapes); `c-maybe` (as `c`, quotes only where an escape is needed); `escape` (C escapes,
//! no quotes); `locale` and `clocale` (the locale's quotation marks, C escapes). A name with a
//! single quote and nothing else a shell or C string would mind is put in `"..."` by the
//! shell styles, as gnulib does.

use anyhow::{Result, bail};

use crate::report::printable_char;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Literal,
    Shell,
    ShellAlways,
    ShellEscape,
    ShellEscapeAlways,
    C,
    CMaybe,
    Escape,
    Locale,
    CLocale,
}

/// The style names `--quoting-style` takes (GNU tar's `quoting_style_args`).
const STYLES: &[(&str, Style)] = &[
    ("literal", Style::Literal),
    ("shell", Style::Shell),
    ("shell-always", Style::ShellAlways),
    ("shell-escape", Style::ShellEscape),
    ("shell-escape-always", Style::ShellEscapeAlways),
    ("c", Style::C),
    ("c-maybe", Style::CMaybe),
    ("escape", Style::Escape),
    ("locale", Style::Locale),
    ("clocale", Style::CLocale),
];

/// A style and the characters `--quote-chars` added (gnulib's `quote_these_too`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quoting {
    style: Style,
    these_too: [bool; 256],
    /// Some of `these_too` is set.
    extra: bool,
}

impl Default for Quoting {
    fn default() -> Quoting {
        Quoting { style: Style::Escape, these_too: [false; 256], extra: false }
    }
}

impl Quoting {
    /// From `--quoting-style` (the last one) and the `--quote-chars`/`--no-quote-chars`
    /// strings in command-line order (`true`: quote them).
    pub fn new(style: Option<&str>, chars: &[(bool, &[u8])]) -> Result<Quoting> {
        let mut q = Quoting::default();
        if let Some(name) = style {
            let Some((_, s)) = STYLES.iter().find(|(n, _)| *n == name) else {
                let valid: Vec<&str> = STYLES.iter().map(|(n, _)| *n).collect();
                bail!("invalid quoting style '{name}' (valid: {})", valid.join(", "));
            };
            q.style = *s;
        }
        for (on, set) in chars {
            for &c in *set {
                q.these_too[c as usize] = *on;
            }
        }
        q.extra = q.these_too.iter().any(|&on| on);
        Ok(q)
    }

    /// `name` as a listing writes it, in a UTF-8 locale (`utf8`) or the C locale. A name
    /// ends at a NUL, as GNU tar's C strings do.
    pub fn quote(&self, name: &[u8], utf8: bool) -> Vec<u8> {
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if self.style == Style::Escape && !self.extra {
            return crate::report::quote(name, utf8).into_bytes();
        }
        let these_too = self.extra.then_some(&self.these_too);
        restyled(name, self.style, false, these_too, utf8)
    }
}

/// How the loop below treats a style (gnulib folds the shell styles into one and the two
/// locale styles into one).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Literal,
    Shell,
    C,
    Escape,
    Locale,
}

/// The locale's quotation marks for `locale` and `clocale`: ‘…’ in a UTF-8 locale, else
/// '…' and "…".
fn marks(style: Style, utf8: bool) -> (&'static [u8], &'static [u8]) {
    match (utf8, style) {
        (true, _) => ("\u{2018}".as_bytes(), "\u{2019}".as_bytes()),
        (false, Style::CLocale) => (b"\"", b"\""),
        (false, _) => (b"'", b"'"),
    }
}

/// Whether `c` is printable in the C locale (isprint).
fn c_printable(c: u8) -> bool {
    (0x20..=0x7e).contains(&c)
}

/// At `rest` (not empty), a UTF-8 locale's next character: its length and whether it is
/// printable (mbrtowc and iswprint): `(0, false)` for a byte that starts no character,
/// `(rest.len(), false)` for a character cut short at the end.
fn utf8_char(rest: &[u8]) -> (usize, bool) {
    let c = rest[0];
    if c < 0x80 {
        return (1, c_printable(c));
    }
    match std::str::from_utf8(&rest[..rest.len().min(4)]) {
        Ok(s) => s.chars().next().map_or((0, false), |ch| (ch.len_utf8(), printable_char(ch))),
        Err(e) if e.valid_up_to() > 0 => {
            let s = std::str::from_utf8(&rest[..e.valid_up_to()]).expect("valid up to there");
            let ch = s.chars().next().expect("at least one character");
            (ch.len_utf8(), printable_char(ch))
        }
        // Cut short by the end of the name.
        Err(e) if e.error_len().is_none() && rest.len() < 4 => (rest.len(), false),
        Err(_) => (0, false),
    }
}

/// The outcome of one pass: the text, or "start again with outer quotes" (gnulib's
/// `force_outer_quoting_style`).
enum Pass {
    Done(Vec<u8>),
    ForceOuter,
}

/// gnulib's `quotearg_buffer_restyled` for `style`; `elide`: QA_ELIDE_OUTER_QUOTES.
fn restyled(
    arg: &[u8],
    style: Style,
    elide: bool,
    these_too: Option<&[bool; 256]>,
    utf8: bool,
) -> Vec<u8> {
    match pass(arg, style, elide, these_too, utf8) {
        Pass::Done(out) => out,
        Pass::ForceOuter => {
            // Outer quotes quote the extra characters well enough: they are not used again.
            let style = match style {
                Style::ShellEscape | Style::ShellEscapeAlways => Style::ShellEscapeAlways,
                Style::Shell | Style::ShellAlways => Style::ShellAlways,
                _ => Style::C,
            };
            restyled(arg, style, false, None, utf8)
        }
    }
}

fn pass(
    arg: &[u8],
    style: Style,
    mut elide: bool,
    these_too: Option<&[bool; 256]>,
    utf8: bool,
) -> Pass {
    let mut out = Vec::with_capacity(arg.len() + 2);
    let mut backslash = false;
    let mut quote_string: &[u8] = b"";
    let kind = match style {
        Style::CMaybe | Style::C => {
            elide |= style == Style::CMaybe;
            if !elide {
                out.push(b'"');
            }
            backslash = true;
            quote_string = b"\"";
            Kind::C
        }
        Style::Escape => {
            backslash = true;
            elide = false;
            Kind::Escape
        }
        Style::Locale | Style::CLocale => {
            let (left, right) = marks(style, utf8);
            if !elide {
                out.extend_from_slice(left);
            }
            backslash = true;
            quote_string = right;
            Kind::Locale
        }
        Style::Shell | Style::ShellEscape | Style::ShellAlways | Style::ShellEscapeAlways => {
            if matches!(style, Style::Shell | Style::ShellEscape) {
                elide = true;
            }
            backslash =
                style == Style::ShellEscape || (style == Style::ShellEscapeAlways && !elide);
            if !elide {
                out.push(b'\'');
            }
            quote_string = b"'";
            Kind::Shell
        }
        Style::Literal => {
            elide = false;
            Kind::Literal
        }
    };
    let mut pending_shell_escape_end = false;
    let mut single_quote = false;
    let mut all_compat = true;
    let mut i = 0;
    while i < arg.len() {
        let mut is_right_quote = false;
        let mut escaping = false;
        let mut compat = false;
        if backslash
            && kind != Kind::Shell
            && !quote_string.is_empty()
            && arg[i..].starts_with(quote_string)
        {
            if elide {
                return Pass::ForceOuter;
            }
            is_right_quote = true;
        }
        let mut c = arg[i];
        // What follows the character's own case: `Store` (as it is), `Escape` (after a
        // backslash) or `Check` (escaped only if --quote-chars names it).
        enum Then {
            Check,
            Escape,
            Store,
        }
        let c_escape = |esc: u8, c: &mut u8| {
            if backslash {
                *c = esc;
                Then::Escape
            } else {
                Then::Check
            }
        };
        let then = match c {
            b'?' => {
                if kind == Kind::Shell && elide {
                    return Pass::ForceOuter;
                }
                Then::Check
            }
            0x07 => c_escape(b'a', &mut c),
            0x08 => c_escape(b'b', &mut c),
            0x0c => c_escape(b'f', &mut c),
            0x0b => c_escape(b'v', &mut c),
            b'\n' | b'\r' | b'\t' => {
                if kind == Kind::Shell && elide {
                    return Pass::ForceOuter;
                }
                let esc = match c {
                    b'\n' => b'n',
                    b'\r' => b'r',
                    _ => b't',
                };
                c_escape(esc, &mut c)
            }
            b'\\' => {
                if kind == Kind::Shell {
                    if elide {
                        return Pass::ForceOuter;
                    }
                    Then::Store
                } else if backslash && elide && !quote_string.is_empty() {
                    Then::Store
                } else {
                    c_escape(b'\\', &mut c)
                }
            }
            b'{' | b'}' | b'#' | b'~' | b' ' => {
                // `{`/`}` alone, `#`/`~` first, and a blank: special, but fine in "...".
                let special = match c {
                    b'{' | b'}' => arg.len() == 1,
                    b'#' | b'~' => i == 0,
                    _ => true,
                };
                if special {
                    compat = true;
                    if kind == Kind::Shell && elide {
                        return Pass::ForceOuter;
                    }
                }
                Then::Check
            }
            b'!' | b'"' | b'$' | b'&' | b'(' | b')' | b'*' | b';' | b'<' | b'=' | b'>' | b'['
            | b'^' | b'`' | b'|' => {
                if kind == Kind::Shell && elide {
                    return Pass::ForceOuter;
                }
                Then::Check
            }
            b'\'' => {
                single_quote = true;
                compat = true;
                if kind == Kind::Shell {
                    if elide {
                        return Pass::ForceOuter;
                    }
                    // Closes the quotes, an escaped quote, and (with `c` below) opens again.
                    out.extend_from_slice(b"'\\'");
                    pending_shell_escape_end = false;
                }
                Then::Check
            }
            b'%'
            | b'+'
            | b','
            | b'-'
            | b'.'
            | b'/'
            | b'0'..=b'9'
            | b':'
            | b'A'..=b'Z'
            | b']'
            | b'_'
            | b'a'..=b'z' => {
                compat = true;
                Then::Check
            }
            _ => {
                let (m, printable) = if utf8 { utf8_char(&arg[i..]) } else { (1, c_printable(c)) };
                compat = printable;
                if m > 1 || (backslash && !printable) {
                    // A multibyte character as it is, or each of its bytes (or the one
                    // unprintable byte) in octal.
                    let ilim = i + m;
                    loop {
                        if backslash && !printable {
                            if elide {
                                return Pass::ForceOuter;
                            }
                            start_esc(&mut out, kind, &mut escaping, &mut pending_shell_escape_end);
                            out.push(b'0' + (c >> 6));
                            out.push(b'0' + ((c >> 3) & 7));
                            c = b'0' + (c & 7);
                        } else if is_right_quote {
                            out.push(b'\\');
                            is_right_quote = false;
                        }
                        if ilim <= i + 1 {
                            break;
                        }
                        end_esc(&mut out, escaping, &mut pending_shell_escape_end);
                        out.push(c);
                        i += 1;
                        c = arg[i];
                    }
                    Then::Store
                } else {
                    Then::Check
                }
            }
        };
        let escape = match then {
            Then::Store => false,
            Then::Escape => true,
            Then::Check => {
                let quoted = these_too.is_some_and(|t| t[c as usize]);
                ((backslash && kind != Kind::Shell) || elide) && quoted || is_right_quote
            }
        };
        if escape {
            if elide {
                return Pass::ForceOuter;
            }
            start_esc(&mut out, kind, &mut escaping, &mut pending_shell_escape_end);
        }
        end_esc(&mut out, escaping, &mut pending_shell_escape_end);
        out.push(c);
        if !compat {
            all_compat = false;
        }
        i += 1;
    }
    if out.is_empty() && kind == Kind::Shell && elide {
        return Pass::ForceOuter;
    }
    // A single quote used as an apostrophe: "it's" rather than 'it'\''s' where nothing else
    // in the name minds double quotes.
    if kind == Kind::Shell && !elide && single_quote && all_compat {
        return Pass::Done(restyled(arg, Style::C, false, these_too, utf8));
    }
    if !elide {
        out.extend_from_slice(quote_string);
    }
    Pass::Done(out)
}

/// gnulib's START_ESC: a backslash, opening `'$'` first in the shell styles.
fn start_esc(out: &mut Vec<u8>, kind: Kind, escaping: &mut bool, pending: &mut bool) {
    *escaping = true;
    if kind == Kind::Shell && !*pending {
        out.extend_from_slice(b"'$'");
        *pending = true;
    }
    out.push(b'\\');
}

/// gnulib's END_ESC: closes a `$'...'` before a character that needs no escape.
fn end_esc(out: &mut Vec<u8>, escaping: bool, pending: &mut bool) {
    if *pending && !escaping {
        out.extend_from_slice(b"''");
        *pending = false;
    }
}

/// GNU tar's `unquote_string` (misc.c): `\\`, `\a`, `\b`, `\f`, `\n`, `\r`, `\t`, `\v`, `\?`
/// (DEL) and up to three octal digits are decoded; any other backslash stays, with the byte
/// after it. The name ends at a decoded NUL, as the C string it becomes.
pub fn unquote(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        i += 1;
        let Some(&c) = s.get(i) else {
            out.push(b'\\');
            break;
        };
        let decoded = match c {
            b'\\' => b'\\',
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            b'?' => 0x7f,
            b'0'..=b'7' => {
                let mut value = 0u32;
                let mut n = 0;
                while n < 3 && s.get(i).is_some_and(|d| (b'0'..=b'7').contains(d)) {
                    value = value * 8 + u32::from(s[i] - b'0');
                    i += 1;
                    n += 1;
                }
                // A char holds the low 8 bits (`\777` is 0xff).
                out.push(value as u8);
                continue;
            }
            other => {
                out.push(b'\\');
                other
            }
        };
        out.push(decoded);
        i += 1;
    }
    if let Some(nul) = out.iter().position(|&b| b == 0) {
        out.truncate(nul);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GNU tar 1.34: `tar -tf t.tar 'src/\141b'` lists `src/ab`, `'src/\?'` looks for
    /// `src/<DEL>`, `'src/a\'` and `'src/\q'` keep their backslashes.
    #[test]
    fn unquote_like_gnu_tar() {
        assert_eq!(unquote(b"src/\\141b"), b"src/ab");
        assert_eq!(unquote(b"src/\\?"), b"src/\x7f");
        assert_eq!(unquote(b"src/a\\"), b"src/a\\");
        assert_eq!(unquote(b"src/\\q\\*"), b"src/\\q\\*");
        assert_eq!(unquote(b"\\\\\\n\\t\\a\\b\\f\\r\\v"), b"\\\n\t\x07\x08\x0c\r\x0b");
        assert_eq!(unquote(b"\\18"), b"\x018");
        assert_eq!(unquote(b"\\1234"), b"S4");
        assert_eq!(unquote(b"\\777"), b"\xff");
        assert_eq!(unquote(b"cut\\0here"), b"cut");
    }

    fn q(style: &str, name: &[u8], utf8: bool) -> String {
        let quoting = Quoting::new(Some(style), &[]).unwrap();
        String::from_utf8_lossy(&quoting.quote(name, utf8)).into_owned()
    }

    /// Each checked with GNU tar 1.34 (`tar -tf q.tar --quoting-style=STYLE`, C.UTF-8).
    #[test]
    fn styles_like_gnu_tar() {
        let cases: &[(&str, &[u8], &str)] = &[
            ("literal", b"./new\nline", "./new\nline"),
            ("shell", b"./plain", "./plain"),
            ("shell", b"./sp ace", "'./sp ace'"),
            ("shell", b"./quo'te", "\"./quo'te\""),
            ("shell", b"./#hash", "./#hash"),
            ("shell", b"#hash", "'#hash'"),
            ("shell", b"./new\nline", "'./new\nline'"),
            ("shell-always", b"./plain", "'./plain'"),
            ("shell-escape", b"./new\nline", "'./new'$'\\n''line'"),
            ("shell-escape", b"./bad\xff", "'./bad'$'\\377'"),
            ("shell-escape", b"./tab\tx", "'./tab'$'\\t''x'"),
            ("shell-escape-always", b"./plain", "'./plain'"),
            ("c", b"./dq\"x", "\"./dq\\\"x\""),
            ("c", b"./back\\slash", "\"./back\\\\slash\""),
            ("c-maybe", b"./plain", "./plain"),
            ("c-maybe", b"./tab\tx", "\"./tab\\tx\""),
            ("c-maybe", b"./back\\slash", "./back\\slash"),
            ("escape", b"./new\nline", "./new\\nline"),
            ("locale", b"./a\xe2\x80\x99b", "\u{2018}./a\\\u{2019}b\u{2019}"),
            ("clocale", b"./plain", "\u{2018}./plain\u{2019}"),
        ];
        for (style, name, want) in cases {
            assert_eq!(q(style, name, true), *want, "{style} {:?}", String::from_utf8_lossy(name));
        }
        assert_eq!(q("clocale", b"x", false), "\"x\"");
        assert_eq!(q("locale", b"it's", false), "'it\\'s'");
    }

    /// The general loop in the escape style is what report::quote does, byte for byte.
    #[test]
    fn escape_is_report_quote() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 9) as usize;
            let bytes: Vec<u8> = (0..len).map(|k| (seed >> (k * 7)) as u8 | 1).collect();
            for utf8 in [false, true] {
                let general = restyled(&bytes, Style::Escape, false, None, utf8);
                let fast = crate::report::quote(&bytes, utf8).into_bytes();
                assert_eq!(general, fast, "{bytes:?} utf8 {utf8}");
            }
        }
    }

    #[test]
    fn quote_chars_and_bad_styles() {
        let quoting = Quoting::new(None, &[(true, b" a"), (false, b"a")]).unwrap();
        assert_eq!(quoting.quote(b"sp ace", false), b"sp\\ ace");
        assert!(Quoting::new(Some("bogus"), &[]).is_err());
    }
}
