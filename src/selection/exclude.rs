//! `--exclude PATTERN` with GNU tar 1.34's rules: gnulib's exclude.c with EXCLUDE_WILDCARDS and
//! FNM_LEADING_DIR, unanchored. A member is excluded when a pattern matches its name as stored
//! (a leading `/` or `./` kept, trailing `/` removed), or the part after any `/` in it, or
//! either of those cut before a later `/` (a matching directory excludes what is under it).
//!
//! - A pattern without wildcards (`*`, `?`, `[`, `]` not escaped by `\`) is compared as a
//!   string with its backslashes removed, at the start and after every `/` (gnulib's hash
//!   table path).
//! - A pattern with wildcards follows glibc's fnmatch without FNM_PATHNAME (`*` and `?` match
//!   `/`), tried at the start and after every `/` that is not followed by another `/`
//!   (gnulib's `exclude_fnmatch`).
//!
//! GNU tar calls fnmatch once per start, each call scanning the rest of the name: quadratic in
//! the name's length (a 1 MiB member name with 500,000 `/` took 95 s per pattern). Here a
//! wildcard pattern is split at its `*`s into runs of one-byte matchers. With no `*` the run is
//! tried at each start; with one or more, only the earliest start where the first run fits
//! counts (a later start can only leave less room), each middle run takes its leftmost fit,
//! and the last must end at the end of the name or before a `/`. That is O(name × pattern).
//! Bracket expressions are compiled to a 256-entry table by asking glibc's fnmatch about every
//! byte, so their meaning (ranges, classes, `!`/`^`) is glibc's; the few forms whose extent
//! this parser does not know for sure (an unterminated `[`, `[=` `=]`, `[.` `.]`) make the
//! pattern fall back to glibc's fnmatch per start, as GNU tar does.
//!
//! Matching is byte-wise, as in the C locale, except where GNU tar's would not be: in a UTF-8
//! locale (main sets LC_CTYPE from the environment, as GNU tar does) a `?` or a bracket
//! expression matches a whole character, so a non-ASCII name is matched by glibc's fnmatch
//! against such a pattern (within a budget of bytes scanned per name: `PER_CHAR_BUDGET`).

use std::ffi::CString;

use crate::selection::given::{Flags, Given};

/// FNM_LEADING_DIR from glibc's <fnmatch.h>: "PATTERN matches a leading dir of STRING".
const FNM_LEADING_DIR: libc::c_int = 1 << 3;
/// FNM_FILE_NAME (FNM_PATHNAME): wildcards do not match `/`.
const FNM_FILE_NAME: libc::c_int = 1 << 0;
/// FNM_CASEFOLD: compare without regard to case.
const FNM_CASEFOLD: libc::c_int = 1 << 4;

/// Longest `[:name:]` taken as a character class (the longest valid name, "alnum" and the
/// like, has 6 letters); a longer one makes the pattern fall back to fnmatch.
const MAX_CLASS_NAME: usize = 16;

#[derive(Default)]
pub struct Exclude {
    patterns: Vec<Matcher>,
}

/// A pattern with the default switches (the fast paths below), or with others.
pub(crate) enum Matcher {
    Default(Pattern),
    Flagged(Flagged),
}

impl Matcher {
    /// The matcher for `given`; `anchored_default`: GNU's default anchoring for its kind (a
    /// MEMBER is anchored, an exclude pattern not), the one the fast paths handle.
    pub(crate) fn new(given: &Given, anchored_default: bool) -> Matcher {
        if !given.flags.is_default(anchored_default) {
            return Matcher::Flagged(Flagged::new(given));
        }
        Matcher::Default(if given.wildcards {
            Pattern::compile(&given.text)
        } else {
            Pattern::Literal(given.text.clone())
        })
    }

    pub(crate) fn matches(&self, name: &[u8], anchored: bool) -> bool {
        match self {
            Matcher::Default(p) => p.matches(name, anchored),
            Matcher::Flagged(f) => f.matches(name),
        }
    }
}

/// A name or pattern after `--no-anchored`/`--anchored` (where not the default),
/// `--ignore-case`, `--no-wildcards-match-slash` or `--no-recursion`: gnulib's
/// `exclude_fnmatch` as GNU tar calls it, one fnmatch (or string comparison) per start. These
/// switches are rare; the quadratic cost the module doc speaks of is GNU tar's own here.
pub(crate) struct Flagged {
    /// A shell pattern for glibc's fnmatch, or a literal string (backslashes removed when
    /// `--wildcards` was on, as fnmatch would read them).
    text: CString,
    wildcards: bool,
    flags: Flags,
}

impl Flagged {
    fn new(given: &Given) -> Flagged {
        let wildcards = given.wildcards && has_wildcards(&given.text);
        let text =
            if given.wildcards && !wildcards { unescape(&given.text) } else { given.text.clone() };
        let text = CString::new(text).expect("patterns have no NUL byte (checked by the caller)");
        Flagged { text, wildcards, flags: given.flags }
    }

    fn matches(&self, name: &[u8]) -> bool {
        let Ok(c_name) = CString::new(name) else { return false };
        let bytes = c_name.as_bytes_with_nul();
        starts(name, !self.wildcards, self.flags.anchored).any(|s| {
            if self.wildcards {
                let mut fnm = 0;
                if self.flags.recursion {
                    fnm |= FNM_LEADING_DIR;
                }
                if self.flags.ignore_case {
                    fnm |= FNM_CASEFOLD;
                }
                if !self.flags.slash {
                    fnm |= FNM_FILE_NAME;
                }
                let tail = bytes[s..].as_ptr().cast();
                // Safety: both are NUL-terminated (a suffix of a CString's bytes with its NUL)
                // and outlive the call.
                unsafe { libc::fnmatch(self.text.as_ptr(), tail, fnm) == 0 }
            } else {
                // gnulib's fnmatch_no_wildcards: the string, or with FNM_LEADING_DIR a
                // leading directory of the name; case folded byte by byte (the C locale).
                let (lit, tail) = (self.text.as_bytes(), &name[s..]);
                let same = |a: &[u8], b: &[u8]| {
                    if self.flags.ignore_case { a.eq_ignore_ascii_case(b) } else { a == b }
                };
                match tail.get(..lit.len()) {
                    Some(head) if same(head, lit) => {
                        tail.len() == lit.len() || (self.flags.recursion && tail[lit.len()] == b'/')
                    }
                    _ => false,
                }
            }
        })
    }
}

pub(crate) enum Pattern {
    /// No wildcards: the string itself (backslashes removed).
    Literal(Vec<u8>),
    /// Runs of one-byte matchers separated by `*` (so `runs.len()` is the number of `*` + 1),
    /// and, when a `?` or a bracket expression is among them, the pattern for glibc's fnmatch:
    /// in a UTF-8 locale those match a whole character of a non-ASCII name (see `matches`).
    Glob(Vec<Vec<Atom>>, Option<CString>),
    /// Left to glibc's fnmatch (see the module doc).
    Fnmatch(CString),
}

pub(crate) enum Atom {
    Byte(u8),
    /// `?`: any byte, `/` included.
    Any,
    /// A bracket expression: which bytes it matches.
    Set(Box<[bool; 256]>),
}

impl Atom {
    fn matches(&self, b: u8) -> bool {
        match self {
            Atom::Byte(c) => *c == b,
            Atom::Any => true,
            Atom::Set(set) => set[b as usize],
        }
    }
}

impl Exclude {
    /// `patterns` as given; a pattern without `wildcards` (after `--no-wildcards`) is a
    /// literal string, its backslashes kept (gnulib's hash path without EXCLUDE_WILDCARDS).
    pub fn new(patterns: &[Given]) -> anyhow::Result<Exclude> {
        let patterns = patterns
            .iter()
            .map(|p| {
                if p.text.contains(&0) {
                    anyhow::bail!("--exclude pattern contains a NUL byte");
                }
                Ok(Matcher::new(p, false))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Exclude { patterns })
    }

    /// True when the member name (as stored in the archive) is excluded.
    pub fn excludes(&self, name: &[u8]) -> bool {
        if self.patterns.is_empty() {
            return false;
        }
        let name = matched_name(name);
        self.patterns.iter().any(|p| p.matches(name, false))
    }
}

/// A member name as GNU tar matches it: a C string, a directory's without its trailing '/'.
pub(crate) fn matched_name(name: &[u8]) -> &[u8] {
    let mut name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    while let Some(rest) = name.strip_suffix(b"/") {
        name = rest;
    }
    name
}

/// gnulib's `fnmatch_pattern_has_wildcards` (without EXCLUDE_REGEX or FNM_EXTMATCH).
pub(crate) fn has_wildcards(p: &[u8]) -> bool {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'\\' => i += 2,
            b'?' | b'*' | b'[' | b']' => return true,
            _ => i += 1,
        }
    }
    false
}

/// gnulib's `unescape_pattern`: `\x` becomes `x`; a trailing `\` stays.
pub(crate) fn unescape(p: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        if p[i] == b'\\' && i + 1 < p.len() {
            i += 1;
        }
        out.push(p[i]);
        i += 1;
    }
    out
}

/// Where the bracket expression starting at `p[at] == '['` ends (the index after its `]`),
/// following glibc's parse; None for what this parser leaves to fnmatch (see the module doc).
fn bracket_end(p: &[u8], at: usize) -> Option<usize> {
    // glibc takes `^` as `!` unless POSIXLY_CORRECT is set.
    let caret_negates = std::env::var_os("POSIXLY_CORRECT").is_none();
    let mut j = at + 1;
    if p.get(j) == Some(&b'!') || (caret_negates && p.get(j) == Some(&b'^')) {
        j += 1;
    }
    let mut first = true;
    loop {
        let c = *p.get(j)?;
        if c == b']' && !first {
            return Some(j + 1);
        }
        first = false;
        match (c, p.get(j + 1)) {
            (b'\\', Some(_)) => j += 2,
            (b'\\', None) => return None,
            (b'[', Some(b'=' | b'.')) => return None,
            (b'[', Some(b':')) => {
                // glibc takes 'a'..='y' as letters of a class name (its test is `c >= 'z'`).
                let name = p[j + 2..].iter().take_while(|c| (b'a'..=b'y').contains(*c)).count();
                if p[j + 2 + name..].starts_with(b":]") {
                    if name > MAX_CLASS_NAME {
                        return None;
                    }
                    // A class never starts a range.
                    j += 2 + name + 2;
                    continue;
                }
                // Not a class: the `[` is an ordinary member.
                j += 1;
            }
            _ => j += 1,
        }
        // A range `c-e`: `-` followed by anything but `]` (glibc's `is_range`).
        if p.get(j) == Some(&b'-') && p.get(j + 1).is_some_and(|&e| e != b']') {
            match (p[j + 1], p.get(j + 2)) {
                (b'[', Some(b'.' | b'=' | b':')) => return None,
                (b'\\', Some(_)) => j += 3,
                (b'\\', None) => return None,
                _ => j += 2,
            }
        }
    }
}

/// The bytes a bracket expression matches, by asking glibc's fnmatch about each one.
fn bracket_set(expr: &[u8]) -> Box<[bool; 256]> {
    let pattern = CString::new(expr).expect("patterns have no NUL byte");
    let mut set = Box::new([false; 256]);
    for b in 1..=255u8 {
        let s = [b, 0];
        // Safety: both are NUL-terminated and outlive the call.
        set[b as usize] = unsafe { libc::fnmatch(pattern.as_ptr(), s.as_ptr().cast(), 0) } == 0;
    }
    set
}

impl Pattern {
    pub(crate) fn compile(p: &[u8]) -> Pattern {
        if !has_wildcards(p) {
            return Pattern::Literal(unescape(p));
        }
        let mut runs: Vec<Vec<Atom>> = vec![Vec::new()];
        let mut i = 0;
        while i < p.len() {
            let atom = match p[i] {
                b'*' => {
                    // `**` is `*`.
                    if !runs.last().is_some_and(Vec::is_empty) || runs.len() == 1 {
                        runs.push(Vec::new());
                    }
                    i += 1;
                    continue;
                }
                b'?' => Atom::Any,
                // glibc: "Trailing \ loses": the pattern matches nothing.
                b'\\' if i + 1 == p.len() => Atom::Set(Box::new([false; 256])),
                b'\\' => {
                    i += 1;
                    Atom::Byte(p[i])
                }
                b'[' => match bracket_end(p, i) {
                    Some(end) => {
                        let set = bracket_set(&p[i..end]);
                        i = end - 1;
                        Atom::Set(set)
                    }
                    None => {
                        return Pattern::Fnmatch(CString::new(p).expect("no NUL byte"));
                    }
                },
                c => Atom::Byte(c),
            };
            runs.last_mut().expect("never empty").push(atom);
            i += 1;
        }
        let per_char = runs.iter().flatten().any(|a| matches!(a, Atom::Any | Atom::Set(_)));
        Pattern::Glob(runs, per_char.then(|| CString::new(p).expect("no NUL byte")))
    }

    /// Whether the pattern matches `name` or a leading directory of it, at its start and,
    /// unless `anchored`, after a `/` in it (see `starts`).
    pub(crate) fn matches(&self, name: &[u8], anchored: bool) -> bool {
        match self {
            Pattern::Literal(lit) => starts(name, true, anchored)
                .any(|s| name[s..].starts_with(lit) && is_end(name, s + lit.len())),
            // In a UTF-8 locale glibc's `?` and brackets take a whole character: for a
            // non-ASCII name, fnmatch decides, as for GNU tar. Within a budget: fnmatch per
            // start costs the name's length per `/` (module doc), which a hostile archive
            // could make quadratic.
            Pattern::Glob(_, Some(p))
                if !name.is_ascii()
                    && crate::report::locale::utf8_locale()
                    && per_start_cost(name, anchored) <= PER_CHAR_BUDGET =>
            {
                fnmatch_at_starts(p, name, anchored)
            }
            Pattern::Glob(runs, _) => glob_matches(runs, name, anchored),
            Pattern::Fnmatch(p) => fnmatch_at_starts(p, name, anchored),
        }
    }
}

/// The most bytes fnmatch may scan for one name in a UTF-8 locale (starts x length): a 4096-
/// byte name (PATH_MAX) with 15 `/`, or a 255-byte one with 255. Beyond it the name is matched
/// byte by byte, as in the C locale.
const PER_CHAR_BUDGET: usize = 1 << 16;

/// What fnmatch at every start of `name` may scan: its length once per start.
fn per_start_cost(name: &[u8], anchored: bool) -> usize {
    let starts = if anchored { 1 } else { 1 + name.iter().filter(|&&b| b == b'/').count() };
    starts.saturating_mul(name.len())
}

/// glibc's fnmatch with FNM_LEADING_DIR at each start of `name` (see `starts`).
fn fnmatch_at_starts(p: &CString, name: &[u8], anchored: bool) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    let bytes = name.as_bytes_with_nul();
    starts(name.as_bytes(), false, anchored).any(|s| {
        let tail = bytes[s..].as_ptr().cast();
        // Safety: both are NUL-terminated (a suffix of a CString's bytes with its NUL) and
        // outlive the call.
        unsafe { libc::fnmatch(p.as_ptr(), tail, FNM_LEADING_DIR) == 0 }
    })
}

/// Where a match may start: 0, and unless `anchored` after each `/` (for wildcard patterns,
/// only a `/` not followed by another).
fn starts(name: &[u8], every_slash: bool, anchored: bool) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0).chain(
        name.iter()
            .enumerate()
            .filter(move |&(i, &b)| {
                !anchored && b == b'/' && (every_slash || name.get(i + 1) != Some(&b'/'))
            })
            .map(|(i, _)| i + 1),
    )
}

/// Whether a match may end at `e`: the end of the name or before a `/` (FNM_LEADING_DIR).
fn is_end(name: &[u8], e: usize) -> bool {
    e == name.len() || name.get(e) == Some(&b'/')
}

/// Whether `run` matches `name` at `at`.
fn fits(run: &[Atom], name: &[u8], at: usize) -> bool {
    name.len() - at.min(name.len()) >= run.len()
        && run.iter().zip(&name[at..]).all(|(a, &b)| a.matches(b))
}

fn glob_matches(runs: &[Vec<Atom>], name: &[u8], anchored: bool) -> bool {
    let (first, rest) = runs.split_first().expect("at least one run");
    let Some((last, middle)) = rest.split_last() else {
        // No `*`: the run must span a start to an end.
        return starts(name, false, anchored)
            .any(|s| fits(first, name, s) && is_end(name, s + first.len()));
    };
    // The earliest start leaves the most room for the rest, so it is the only one to try.
    let Some(s) = starts(name, false, anchored).find(|&s| fits(first, name, s)) else {
        return false;
    };
    let mut at = s + first.len();
    for run in middle {
        match (at..=name.len()).find(|&q| fits(run, name, q)) {
            Some(q) => at = q + run.len(),
            None => return false,
        }
    }
    if last.is_empty() {
        return true;
    }
    // The last run ends at the end of the name or before a `/`, after `at`.
    let ends = name.iter().enumerate().filter(|(_, b)| **b == b'/').map(|(i, _)| i);
    ends.chain([name.len()]).any(|e| e >= at + last.len() && fits(last, name, e - last.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Patterns as `--exclude` gives them (wildcards on).
    fn of(patterns: &[&str]) -> Exclude {
        let given: Vec<Given> =
            patterns.iter().map(|p| Given::new(p.as_bytes(), true, false)).collect();
        Exclude::new(&given).unwrap()
    }

    /// After `--no-wildcards`: a literal, tried at the start and after every `/`, with its
    /// backslashes (GNU tar 1.34: `tar -t --no-wildcards --exclude='src/a*'` excludes nothing
    /// from an archive without such a name).
    #[test]
    fn literal_patterns_after_no_wildcards() {
        let e = Exclude::new(&[Given::new(b"src/a*", false, false)]).unwrap();
        assert!(!e.excludes(b"src/ab") && e.excludes(b"top/src/a*/f"));
        let e = Exclude::new(&[Given::new(b"a\\b", false, false)]).unwrap();
        assert!(e.excludes(b"a\\b") && !e.excludes(b"ab"));
    }

    #[test]
    fn gnu_like_matching() {
        let e = of(&["*.o", "cache", "a/b"]);
        assert!(e.excludes(b"x.o"));
        assert!(e.excludes(b"dir/sub/x.o"));
        assert!(e.excludes(b"cache"));
        assert!(e.excludes(b"cache/file"));
        assert!(e.excludes(b"top/cache/file"));
        assert!(e.excludes(b"./a/b/c"));
        assert!(!e.excludes(b"cachex"));
        assert!(!e.excludes(b"x.c"));
        assert!(!e.excludes(b"a/bc"));
        // A directory entry is matched without its trailing '/', as GNU tar does.
        let inside = of(&["*/cache/*"]);
        assert!(!inside.excludes(b"top/cache/"));
        assert!(inside.excludes(b"top/cache/f"));
        assert!(!Exclude::default().excludes(b"x"));
    }

    /// Cases where GNU tar 1.34's answer (checked with `tar -xv --exclude`) depends on the two
    /// paths of gnulib's exclude.c and on the name as stored.
    #[test]
    fn gnu_tar_corners() {
        let ex = |p: &str, name: &[u8]| of(&[p]).excludes(name);
        // Leading `/` and `./` are part of the name.
        assert!(ex("/abs", b"/abs/p"));
        assert!(ex("abs", b"/abs/p"));
        assert!(ex("./dot", b"./dot/p"));
        assert!(ex(".", b"./dot/p"));
        assert!(ex("./*", b"z/./w"));
        assert!(ex("/*", b"/abs/p"));
        assert!(!ex("/*", b"x//y"));
        // A literal is tried after every '/', a wildcard pattern not after the first of "//".
        assert!(ex("/y1", b"x//y1"));
        assert!(!ex("/y?", b"x//y1"));
        assert!(ex("", b"x//y1"));
        assert!(!ex("", b"x/y1"));
        assert!(ex("x/", b"x//y1"));
        // Backslashes: removed from a literal (a trailing one kept); escapes in a wildcard
        // pattern; a trailing one in a wildcard pattern never matches.
        assert!(ex("a\\", b"a\\"));
        assert!(ex("a\\*b", b"a*b"));
        assert!(!ex("a\\*b", b"axb"));
        assert!(ex("a*b", b"a\\*b"));
        assert!(!ex("*\\", b"a\\"));
        // Brackets, and an unterminated one (left to fnmatch: a literal '[').
        assert!(ex("*.[oa]", b"lib/x.a"));
        assert!(!ex("*.[!oa]", b"lib/x.a"));
        assert!(ex("[[:digit:]]*", b"7up"));
        assert!(ex("q[", b"q["));
        assert!(!ex("q[", b"q"));
        assert!(ex("[]]", b"]"));
        // `?` and `*` match '/'.
        assert!(ex("a?b", b"a/b"));
        assert!(ex("top*f", b"top/x/f"));
    }

    /// GNU tar's own algorithm, literally: gnulib's hash path for literals and
    /// `exclude_fnmatch` (glibc's fnmatch at every start) for the rest.
    fn reference(pattern: &[u8], name: &[u8], anchored: bool) -> bool {
        let mut name = name;
        while let Some(rest) = name.strip_suffix(b"/") {
            name = rest;
        }
        if !has_wildcards(pattern) {
            let lit = unescape(pattern);
            return starts(name, true, anchored).any(|s| {
                let mut buf = &name[s..];
                loop {
                    if buf == lit.as_slice() {
                        return true;
                    }
                    match buf.iter().rposition(|&b| b == b'/') {
                        Some(i) => buf = &buf[..i],
                        None => return false,
                    }
                }
            });
        }
        let p = CString::new(pattern).unwrap();
        let n = CString::new(name).unwrap();
        let bytes = n.as_bytes_with_nul();
        let mut starts = vec![0];
        for (i, &b) in name.iter().enumerate() {
            if !anchored && b == b'/' && bytes[i + 1] != b'/' {
                starts.push(i + 1);
            }
        }
        starts.into_iter().any(|s| {
            // Safety: NUL-terminated, alive for the call.
            let r =
                unsafe { libc::fnmatch(p.as_ptr(), bytes[s..].as_ptr().cast(), FNM_LEADING_DIR) };
            r == 0
        })
    }

    /// Random patterns and names over an alphabet rich in special characters: the fast
    /// matcher agrees with the reference on every one.
    #[test]
    fn agrees_with_fnmatch_on_random_cases() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let pattern_bits: &[&[u8]] = &[
            b"a",
            b"b",
            b"/",
            b"*",
            b"?",
            b"[",
            b"]",
            b"!",
            b"^",
            b"-",
            b"\\",
            b":",
            b".",
            b"[:alpha:]",
            b"[:digit:]",
            b"[:foo:]",
            b"[=a=]",
            b"[.a.]",
            b"ab",
            b"//",
        ];
        let name_bits: &[&[u8]] = &[b"a", b"b", b"/", b"//", b"-", b"]", b"[", b".", b"\\", b"1"];
        // Patterns compiled as literals, as globs with a bracket set, and left to fnmatch.
        let mut kinds = [0; 3];
        for _ in 0..30_000 {
            let pattern: Vec<u8> = (0..1 + next(7))
                .flat_map(|_| pattern_bits[next(pattern_bits.len())].to_vec())
                .collect();
            let compiled = Pattern::compile(&pattern);
            match &compiled {
                Pattern::Literal(_) => kinds[0] += 1,
                Pattern::Glob(runs, _)
                    if runs.iter().flatten().any(|a| matches!(a, Atom::Set(_))) =>
                {
                    kinds[1] += 1
                }
                Pattern::Glob(..) => {}
                Pattern::Fnmatch(_) => kinds[2] += 1,
            }
            for _ in 0..8 {
                let name: Vec<u8> =
                    (0..next(9)).flat_map(|_| name_bits[next(name_bits.len())].to_vec()).collect();
                let mut trimmed = name.as_slice();
                while let Some(rest) = trimmed.strip_suffix(b"/") {
                    trimmed = rest;
                }
                for anchored in [false, true] {
                    assert_eq!(
                        compiled.matches(trimmed, anchored),
                        reference(&pattern, &name, anchored),
                        "pattern {:?} name {:?} anchored {anchored}",
                        String::from_utf8_lossy(&pattern),
                        String::from_utf8_lossy(&name)
                    );
                }
            }
        }
        assert!(kinds.iter().all(|&k| k > 1000), "too few of a kind: {kinds:?}");
    }

    /// The red-team case: a 1 MiB name with 500,000 '/' (GNU tar's algorithm: 95 s a pattern).
    #[test]
    fn long_names_are_linear() {
        let mut name = b"a/".repeat(500_000);
        name.extend_from_slice(b"end");
        let e = of(&["*.log", "cache", "*/tmp/*", "a?[!a]x"]);
        let t = std::time::Instant::now();
        assert!(!e.excludes(&name));
        name.extend_from_slice(b".log");
        assert!(e.excludes(&name));
        let took = t.elapsed();
        // Well under a second in a release build; debug builds are ~10x slower.
        assert!(took < std::time::Duration::from_secs(2), "took {took:?}");
    }
}
