//! `--transform` / `--xform`: GNU tar 1.34's sed-like `s/REGEX/REPL/FLAGS` name rewriting
//! (its src/transform.c), reproduced quirk for quirk; our own code.
//!
//! Syntax, as GNU tar reads each option's argument:
//! - Expressions follow each other, separated by `;` after their flags (a `;` inside the regex
//!   or the replacement is part of it). `flags=FLAGS` instead of an expression sets the
//!   default `r/R s/S h/H` flags of every later expression, in this and later options (the
//!   initial default is `rsh`: all three kinds of name).
//! - The delimiter is the byte after `s`; a `\` escapes the next byte while the parts are cut.
//!   The regex is then given to regcomp as written (escapes included): POSIX basic, or extended
//!   with `x`; `i` adds REG_ICASE.
//! - Flags: `g` (every match), a number N (the Nth match; with `g`, the Nth and later; read by
//!   `strtoul(.., 0)`, so `010` is 8 and `0x2` is 2, and kept modulo 2^32), `r/R` member
//!   names, `s/S` symlink targets, `h/H` hard link targets (lower case on, upper case off).
//! - Replacement: `&` and `\0` the match, `\1`...`\N` groups (a group number above the
//!   regex's count is refused), `\\` `\&` `\a` `\b` `\f` `\n` `\r` `\t` `\v`, `\` + the
//!   delimiter gives the delimiter, any other `\c` stays as the two bytes `\c`. Case control:
//!   `\U` `\L` until `\E`, `\u` `\l` for the first byte of the next piece (a run of literal
//!   text, one escape, or one group), with bytewise `toupper`/`tolower` from <ctype.h>.
//!
//! GNU quirks kept (each pinned by a test here or in tests/transform.rs):
//! - A regex whose first byte is `^` or last byte is `$` acts as if `g` were absent
//!   (`s/a\|b$/X/g` on `aab` gives `Xab`).
//! - After a match the search restarts on the rest of the name as a new string, so `^` can
//!   match again: `s/^a/X/2` on `aab` gives `aXb`.
//! - A match skipped because of N copies the text before it twice: `s/b/X/2` on `abab` gives
//!   `aabaX`.
//! - Case control carries over from one match to the next (`s/\(a\)/\1\U/g` on `aa` gives
//!   `aA`); `\u` after `\L` leaves the rest of the piece as is (`s/.*/\L\u&/` on `ABC` gives
//!   `ABC`); `\u` then `\L` is plain `\L`.
//! - An empty name is left alone (`s/^/x/` does nothing to it).
//!
//! Where GNU tar 1.34 misbehaves we choose:
//! - A `g` expression whose match is empty where the search restarts (`s/x*/-/g`,
//!   `s/\</X/g`) makes GNU tar loop forever, growing the name until memory runs out. We
//!   apply that replacement once and copy the rest of the name (`s/x*/-/g` on `abc` gives
//!   `-abc`). An empty match that is only counted towards N does end in GNU tar (the same
//!   match repeats until it is the Nth), and is reproduced: `s/x*/-/3` on `x y` gives `x- y`.
//! - An empty regex (`s//x/`) makes GNU read the byte before it for the `$` test; we take it
//!   as not ending in `$`. A `\u` or `\l` consumed by an empty group can crash GNU; here it is
//!   simply used up.
//! - GNU stops reading an option at a NUL byte, and so do we.
//!
//! Matching is glibc's POSIX regex (GNU tar links gnulib's copy of the same engine) in the
//! process's locale, as are `toupper`/`tolower`. fastuntar does not call setlocale, so it runs
//! in the C locale: matching and case conversion are bytewise, as GNU tar's under LC_ALL=C.
//! The static build for musl (scripts/package.sh) matches with musl's regex instead, an
//! engine of its own (TRE's): POSIX's syntax is the same, GNU's extensions may not be (the
//! differential tests run the glibc build).

use std::ffi::{CStr, CString, c_int};

use anyhow::{Result, anyhow, bail};

#[cfg(not(all(target_os = "linux", any(target_env = "gnu", target_env = "musl"))))]
compile_error!(
    "src/transform.rs reads re_nsub from glibc's or musl's regex_t; port it to this libc"
);

/// Which name a transformation is applied to (GNU's XFORM_REGFILE, XFORM_SYMLINK, XFORM_LINK;
/// the r/R, s/S, h/H flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    Member,
    SymlinkTarget,
    HardlinkTarget,
}

// GNU's bits (src/common.h).
const XFORM_REGFILE: u8 = 0x01;
const XFORM_LINK: u8 = 0x02;
const XFORM_SYMLINK: u8 = 0x04;
const XFORM_ALL: u8 = XFORM_REGFILE | XFORM_LINK | XFORM_SYMLINK;

impl NameKind {
    fn bit(self) -> u8 {
        match self {
            NameKind::Member => XFORM_REGFILE,
            NameKind::SymlinkTarget => XFORM_SYMLINK,
            NameKind::HardlinkTarget => XFORM_LINK,
        }
    }
}

/// Applies one of `r R s S h H` to `kinds`; false for any other byte.
fn set_kind_flag(kinds: &mut u8, c: u8) -> bool {
    match c {
        b'r' => *kinds |= XFORM_REGFILE,
        b'R' => *kinds &= !XFORM_REGFILE,
        b's' => *kinds |= XFORM_SYMLINK,
        b'S' => *kinds &= !XFORM_SYMLINK,
        b'h' => *kinds |= XFORM_LINK,
        b'H' => *kinds &= !XFORM_LINK,
        _ => return false,
    }
    true
}

/// The leading fields of glibc's `regex_t` (<regex.h>, `struct re_pattern_buffer`) up to
/// `re_nsub`, which POSIX defines but the libc crate keeps private. glibc cannot reorder them
/// without breaking every program built against it.
#[cfg(target_env = "gnu")]
#[repr(C)]
struct RegexHead {
    buffer: *mut std::ffi::c_void,
    allocated: usize,
    used: usize,
    syntax: std::ffi::c_ulong,
    fastmap: *mut std::ffi::c_char,
    translate: *mut std::ffi::c_char,
    re_nsub: usize,
}

/// musl's `regex_t` (its <regex.h>) starts with `re_nsub`, for the same reason fixed.
#[cfg(target_env = "musl")]
#[repr(C)]
struct RegexHead {
    re_nsub: usize,
}

const _: () = assert!(size_of::<RegexHead>() < size_of::<libc::regex_t>());
const _: () = assert!(align_of::<RegexHead>() == align_of::<libc::regex_t>());

/// glibc's regerror texts (posix/regcomp.c, `__re_error_msgid`), by error code, which musl
/// numbers the same: GNU tar's words for a bad regex, where musl's regerror has its own.
#[cfg(target_env = "musl")]
const GLIBC_REGERROR: [&str; 17] = [
    "Success",
    "No match",
    "Invalid regular expression",
    "Invalid collation character",
    "Invalid character class name",
    "Trailing backslash",
    "Invalid back reference",
    "Unmatched [, [^, [:, [., or [=",
    "Unmatched ( or \\(",
    "Unmatched \\{",
    "Invalid content of \\{\\}",
    "Invalid range end",
    "Memory exhausted",
    "Invalid preceding regular expression",
    "Premature end of regular expression",
    "Regular expression too big",
    "Unmatched ) or \\)",
];

/// A compiled POSIX regex, freed on drop. Boxed so it never moves after regcomp.
struct Regex {
    re: Box<libc::regex_t>,
    /// Number of parenthesised groups (`re_nsub`).
    nsub: usize,
}

// Safety: a compiled regex_t has no tie to the thread that built it, and glibc's regexec
// (MT-Safe in its manual) takes a lock inside the compiled pattern for the state it updates.
unsafe impl Send for Regex {}
// Safety: as above; `&Regex` only allows regexec.
unsafe impl Sync for Regex {}

impl Regex {
    /// Compiles `pattern` (no NUL in it) with `cflags`; Err is regerror's text.
    fn compile(pattern: &[u8], cflags: c_int) -> Result<Regex, String> {
        let pattern = CString::new(pattern).map_err(|_| "NUL in regex".to_string())?;
        // Safety: regex_t is pointers and integers, for which all-zero bytes are a valid value.
        let mut re: Box<libc::regex_t> = Box::new(unsafe { std::mem::zeroed() });
        // Safety: `re` is a writable regex_t; `pattern` is NUL-terminated and outlives the call.
        let rc = unsafe { libc::regcomp(&mut *re, pattern.as_ptr(), cflags) };
        if rc != 0 {
            // glibc and musl free what a failed regcomp allocated: nothing to regfree.
            #[cfg(target_env = "musl")]
            if let Some(msg) = usize::try_from(rc).ok().and_then(|i| GLIBC_REGERROR.get(i)) {
                return Err(msg.to_string());
            }
            let mut buf = [0u8; 512];
            // Safety: `buf` is writable for its length, which regerror is told (it writes at
            // most that much, NUL included); `re` is a valid regex_t.
            unsafe { libc::regerror(rc, &*re, buf.as_mut_ptr().cast(), buf.len()) };
            let msg = CStr::from_bytes_until_nul(&buf).map(|s| s.to_string_lossy().into_owned());
            return Err(msg.unwrap_or_default());
        }
        let head: *const RegexHead = (&*re as *const libc::regex_t).cast();
        // Safety: RegexHead mirrors the start of glibc's regex_t (size and alignment checked
        // above), and a successful regcomp has set re_nsub.
        let nsub = unsafe { (*head).re_nsub };
        Ok(Regex { re, nsub })
    }

    /// Runs regexec on `terminated` but its last byte, a NUL (no other NUL in it), as one
    /// string; fills `m` (nsub + 1 entries) with offsets from its start. With glibc,
    /// REG_STARTEND gives regexec the length, so it does not look for the NUL: without it each
    /// search measured the rest of the name first, and a `g` transform of a 1 MiB name with a
    /// match every byte took 6 s (issue 27). musl has no REG_STARTEND; its regexec reads up to
    /// the NUL as it matches.
    fn exec(&self, terminated: &[u8], m: &mut [libc::regmatch_t]) -> bool {
        assert_eq!(terminated.last(), Some(&0), "exec needs the NUL after the subject");
        let len = terminated.len() - 1;
        m[0] = libc::regmatch_t { rm_so: 0, rm_eo: len as libc::regoff_t };
        #[cfg(target_env = "gnu")]
        let flags = libc::REG_STARTEND;
        #[cfg(target_env = "musl")]
        let flags = 0;
        // Safety: regexec reads `terminated` from m[0].rm_so to m[0].rm_eo only (glibc,
        // REG_STARTEND) or up to its NUL (musl), all of it in bounds, and writes `m.len()` (at
        // least 1) entries of `m`; both outlive the call, and `self.re` was compiled by
        // regcomp.
        unsafe {
            libc::regexec(&*self.re, terminated.as_ptr().cast(), m.len(), m.as_mut_ptr(), flags)
                == 0
        }
    }
}

impl Drop for Regex {
    fn drop(&mut self) {
        // Safety: `self.re` was compiled by a successful regcomp and is freed only here.
        unsafe { libc::regfree(&mut *self.re) };
    }
}

/// GNU's case conversion state (`enum case_ctl_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CaseCtl {
    Stop,
    UpNext,
    LoNext,
    Up,
    Lo,
}

/// One piece of a replacement, as GNU splits it (the split matters to `\u` and `\l`).
#[derive(Debug, PartialEq, Eq)]
enum Segment {
    Literal(Vec<u8>),
    Group(usize),
    Case(CaseCtl),
}

struct Transform {
    /// `g` (and the regex is not anchored by a leading `^` or trailing `$`).
    global: bool,
    /// XFORM_* bits: the names this applies to.
    kinds: u8,
    /// N: replace from the Nth match on; 0 for none.
    match_number: u32,
    regex: Regex,
    repl: Vec<Segment>,
}

/// Every `--transform` expression, in command-line order.
#[derive(Default)]
pub struct Transforms {
    list: Vec<Transform>,
}

impl std::fmt::Debug for Transforms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transforms").field("expressions", &self.list.len()).finish()
    }
}

/// `strtoul(s, &end, radix)` on a string that starts with a digit: the value (`u64::MAX` on
/// overflow, as glibc's `ULONG_MAX`) and the number of bytes read. `auto_radix` is base 0:
/// `0x` + hex digit is hexadecimal, a leading `0` octal.
fn strtoul(s: &[u8], auto_radix: bool) -> (u64, usize) {
    let (radix, start) = match s {
        [b'0', b'x' | b'X', h, ..] if auto_radix && h.is_ascii_hexdigit() => (16, 2),
        [b'0', ..] if auto_radix => (8, 0),
        _ => (10, 0),
    };
    let (mut value, mut overflow, mut k) = (0u64, false, start);
    while let Some(d) = s.get(k).and_then(|&c| char::from(c).to_digit(radix)) {
        match value.checked_mul(u64::from(radix)).and_then(|v| v.checked_add(u64::from(d))) {
            Some(v) => value = v,
            None => overflow = true,
        }
        k += 1;
    }
    (if overflow { u64::MAX } else { value }, k)
}

/// An expression or byte for an error message: one line, quoted.
fn shown(b: &[u8]) -> String {
    let text = String::from_utf8_lossy(b);
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect();
    format!("'{one_line}'")
}

impl Transforms {
    /// Parses the arguments of every --transform option, in command-line order; each may hold
    /// several expressions separated by ';' (as GNU tar reads them). Errors are one line, like
    /// GNU tar's ("Invalid transform expression", "Unknown flag in transform expression: 'q'",
    /// "Invalid transform replacement: back reference out of range", regex compile errors with
    /// regerror's text...), naming the expression.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Transforms> {
        let mut kinds = XFORM_ALL;
        let mut list = Vec::new();
        for arg in args {
            let arg = arg.as_ref().as_bytes();
            let mut rest = &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())];
            while !rest.is_empty() {
                rest = parse_expr(rest, &mut kinds, &mut list)?;
            }
        }
        Ok(Transforms { list })
    }

    /// True when no expression was given (`flags=` alone gives none).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Applies every expression whose flags include `kind`, each to the previous one's output.
    /// Returns None when nothing changed (cheap common case), Some(new name) otherwise.
    ///
    /// GNU tar transforms a member name without its trailing `/`s (its read_header strips
    /// them: `s,$,X,` on the directory `d/` gives `dX`) and a link target as stored; then it
    /// takes a leading `/` or `../` off a new member name or hard link target as off any name
    /// (not off a symlink target). Both are the caller's part.
    pub fn apply(&self, name: &[u8], kind: NameKind) -> Option<Vec<u8>> {
        let bit = kind.bit();
        let mut todo = self.list.iter().filter(|t| t.kinds & bit != 0).peekable();
        todo.peek()?;
        if name.contains(&0) {
            return None;
        }
        let mut cur = name.to_vec();
        let mut next = Vec::with_capacity(cur.len());
        for t in todo {
            next.clear();
            t.run(&cur, &mut next);
            std::mem::swap(&mut cur, &mut next);
        }
        (cur != name).then_some(cur)
    }
}

/// Parses the expression at the start of `e` (not empty) into `list`; returns what follows
/// it (after its `;`). `kinds` is the default set by `flags=`.
fn parse_expr<'a>(e: &'a [u8], kinds: &mut u8, list: &mut Vec<Transform>) -> Result<&'a [u8]> {
    let end = |from: usize| e[from..].iter().position(|&c| c == b';').map_or(e.len(), |k| from + k);
    let after = |k: usize| &e[(k + 1).min(e.len())..];
    if e[0] != b's' {
        if e.starts_with(b"flags=") {
            let stop = end(6);
            *kinds = 0;
            for &c in &e[6..stop] {
                if !set_kind_flag(kinds, c) {
                    bail!("Unknown transform flag: {} (in {})", shown(&[c]), shown(&e[..stop]));
                }
            }
            return Ok(after(stop));
        }
        match end(0) {
            0 => bail!("Invalid transform expression '' (nothing before a ';')"),
            stop => bail!("Invalid transform expression {}", shown(&e[..stop])),
        }
    }
    let invalid = || anyhow!("Invalid transform expression {}", shown(e));
    let delim = *e.get(1).ok_or_else(invalid)?;
    // Finds the next unescaped delimiter from `from`.
    let cut = |from: usize| {
        let mut k = from;
        while k < e.len() && e[k] != delim {
            k += if e[k] == b'\\' && k + 1 < e.len() { 2 } else { 1 };
        }
        (k < e.len()).then_some(k)
    };
    let i = cut(2).ok_or_else(invalid)?;
    let j = cut(i + 1).ok_or_else(invalid)?;
    let stop = end(j + 1);
    let text = shown(&e[..stop]);

    let (mut global, mut cflags, mut tkinds, mut match_number) = (false, 0, *kinds, 0u32);
    let mut p = j + 1;
    while p < stop {
        match e[p] {
            b'g' => global = true,
            b'i' => cflags |= libc::REG_ICASE,
            b'x' => cflags |= libc::REG_EXTENDED,
            b'0'..=b'9' => {
                let (n, len) = strtoul(&e[p..stop], true);
                match_number = n as u32; // C's conversion to `unsigned`: modulo 2^32
                p += len;
                continue;
            }
            c => {
                if !set_kind_flag(&mut tkinds, c) {
                    bail!("Unknown flag in transform expression: {} (in {text})", shown(&[c]));
                }
            }
        }
        p += 1;
    }

    let pattern = &e[2..i];
    let regex = Regex::compile(pattern, cflags)
        .map_err(|msg| anyhow!("Invalid transform expression: {msg} (in {text})"))?;
    if pattern.first() == Some(&b'^') || pattern.last() == Some(&b'$') {
        global = false;
    }
    let repl = parse_replacement(&e[i + 1..j], delim, regex.nsub)
        .map_err(|msg| anyhow!("{msg} (in {text})"))?;
    list.push(Transform { global, kinds: tkinds, match_number, regex, repl });
    Ok(after(stop))
}

/// Splits a replacement into GNU's segments (literal runs, escapes, groups, case controls).
fn parse_replacement(r: &[u8], delim: u8, nsub: usize) -> Result<Vec<Segment>, &'static str> {
    fn literal(segs: &mut Vec<Segment>, s: &[u8]) {
        if !s.is_empty() {
            segs.push(Segment::Literal(s.to_vec()));
        }
    }
    let mut segs = Vec::new();
    let (mut beg, mut cur) = (0, 0);
    while cur < r.len() {
        match r[cur] {
            b'\\' => {
                literal(&mut segs, &r[beg..cur]);
                cur += 1;
                // Cutting the expression paired every `\` with a following byte.
                let Some(&c) = r.get(cur) else {
                    literal(&mut segs, b"\\");
                    beg = cur;
                    break;
                };
                cur += 1;
                let byte = |b: u8| Segment::Literal(vec![b]);
                segs.push(match c {
                    b'0'..=b'9' => {
                        let (n, len) = strtoul(&r[cur - 1..], false);
                        cur += len - 1;
                        if n > nsub as u64 {
                            return Err(
                                "Invalid transform replacement: back reference out of range",
                            );
                        }
                        Segment::Group(n as usize)
                    }
                    b'\\' => byte(b'\\'),
                    b'a' => byte(0x07),
                    b'b' => byte(0x08),
                    b'f' => byte(0x0c),
                    b'n' => byte(b'\n'),
                    b'r' => byte(b'\r'),
                    b't' => byte(b'\t'),
                    b'v' => byte(0x0b),
                    b'&' => byte(b'&'),
                    b'L' => Segment::Case(CaseCtl::Lo),
                    b'l' => Segment::Case(CaseCtl::LoNext),
                    b'U' => Segment::Case(CaseCtl::Up),
                    b'u' => Segment::Case(CaseCtl::UpNext),
                    b'E' => Segment::Case(CaseCtl::Stop),
                    c if c == delim => byte(c),
                    c => Segment::Literal(vec![b'\\', c]),
                });
                beg = cur;
            }
            b'&' => {
                literal(&mut segs, &r[beg..cur]);
                segs.push(Segment::Group(0));
                cur += 1;
                beg = cur;
            }
            _ => cur += 1,
        }
    }
    literal(&mut segs, &r[beg..cur]);
    Ok(segs)
}

fn to_upper(b: u8) -> u8 {
    // Safety: toupper is defined for every unsigned char value and only reads the locale.
    unsafe { libc::toupper(c_int::from(b)) as u8 }
}

fn to_lower(b: u8) -> u8 {
    // Safety: as for toupper.
    unsafe { libc::tolower(c_int::from(b)) as u8 }
}

/// GNU's case conversion state while one name is rewritten (kept across matches).
struct CaseState {
    ctl: CaseCtl,
    /// What `ctl` goes back to after a `\u` or `\l` is used.
    saved: CaseCtl,
}

impl CaseState {
    /// Appends `piece` converted as `ctl` says (`run_case_conv` and `CASE_CTL_RESET`).
    fn push(&mut self, out: &mut Vec<u8>, piece: &[u8]) {
        let start = out.len();
        out.extend_from_slice(piece);
        let converted = &mut out[start..];
        match self.ctl {
            CaseCtl::Stop => {}
            CaseCtl::Up => converted.iter_mut().for_each(|b| *b = to_upper(*b)),
            CaseCtl::Lo => converted.iter_mut().for_each(|b| *b = to_lower(*b)),
            CaseCtl::UpNext | CaseCtl::LoNext => {
                if let Some(b) = converted.first_mut() {
                    *b = if self.ctl == CaseCtl::UpNext { to_upper(*b) } else { to_lower(*b) };
                }
                self.ctl = self.saved;
                self.saved = CaseCtl::Stop;
            }
        }
    }

    fn set(&mut self, ctl: CaseCtl) {
        if matches!(ctl, CaseCtl::UpNext | CaseCtl::LoNext)
            && matches!(self.saved, CaseCtl::Stop | CaseCtl::Up | CaseCtl::Lo)
        {
            self.saved = self.ctl;
        }
        self.ctl = ctl;
    }
}

impl Transform {
    /// Rewrites `input` (no NUL in it) into `out`, as GNU's
    /// `_single_transform_name_to_obstack`, in time linear in its length for a regex that
    /// finds each match in time linear in the distance to it.
    fn run(&self, input: &[u8], out: &mut Vec<u8>) {
        let len = input.len();
        let mut m = vec![libc::regmatch_t { rm_so: -1, rm_eo: -1 }; self.regex.nsub + 1];
        let (mut pos, mut nmatches) = (0, 0u64);
        let mut case = CaseState { ctl: CaseCtl::Stop, saved: CaseCtl::Stop };
        // The name with a NUL after it, once: every search is on a suffix of it.
        let terminated = [input, &[0]].concat();
        while pos < len {
            // Each search sees the rest of the name as a whole string (no REG_NOTBOL).
            let rest = &input[pos..];
            if !self.regex.exec(&terminated[pos..], &mut m) {
                out.extend_from_slice(rest);
                return;
            }
            let (so, eo) = (m[0].rm_so as usize, m[0].rm_eo as usize);
            out.extend_from_slice(&rest[..so]);
            nmatches += 1;
            if self.match_number != 0 && nmatches < u64::from(self.match_number) {
                // GNU copies the text before the match a second time, with the match.
                out.extend_from_slice(&rest[..eo]);
                if eo == 0 {
                    // GNU finds this same empty match again until it is the Nth; each
                    // round adds nothing, so go straight to the last.
                    nmatches = u64::from(self.match_number) - 1;
                }
                pos += eo;
                continue;
            }
            for segm in &self.repl {
                match segm {
                    Segment::Literal(s) => case.push(out, s),
                    Segment::Group(n) => {
                        let g = m[*n];
                        if g.rm_so != -1 && g.rm_eo != -1 {
                            case.push(out, &rest[g.rm_so as usize..g.rm_eo as usize]);
                        }
                    }
                    Segment::Case(ctl) => case.set(*ctl),
                }
            }
            pos += eo;
            // An empty match with `g` would repeat forever in GNU tar 1.34 (see the module
            // doc); we stop after it as if `g` were absent.
            if !self.global || eo == 0 {
                out.extend_from_slice(&input[pos..len]);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str], name: &str, kind: NameKind) -> String {
        let x = Transforms::parse(args).unwrap();
        let out = x.apply(name.as_bytes(), kind).unwrap_or_else(|| name.as_bytes().to_vec());
        String::from_utf8(out).unwrap()
    }

    fn m(expr: &str, name: &str) -> String {
        t(&[expr], name, NameKind::Member)
    }

    fn err(args: &[&str]) -> String {
        match Transforms::parse(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn parse_errors() {
        assert_eq!(err(&["x"]), "Invalid transform expression 'x'");
        assert_eq!(err(&["s/a/b/;x;s/a/b/"]), "Invalid transform expression 'x'");
        assert_eq!(err(&["s/a/b/;;"]), "Invalid transform expression '' (nothing before a ';')");
        for e in ["s", "s/", "s/a", "s/a/b", "s/a/b\\/", "s/a\\/b/"] {
            assert!(err(&[e]).starts_with("Invalid transform expression '"), "{e}");
        }
        assert_eq!(
            err(&["s/a/b/gq;s/c/d/"]),
            "Unknown flag in transform expression: 'q' (in 's/a/b/gq')"
        );
        assert_eq!(err(&["flags=rz"]), "Unknown transform flag: 'z' (in 'flags=rz')");
        assert_eq!(
            err(&["s/a/\\1/"]),
            "Invalid transform replacement: back reference out of range (in 's/a/\\1/')"
        );
        assert!(err(&["s/\\(a\\)\\(b\\)/\\3/"]).contains("out of range"));
        assert!(err(&["s/\\(a\\)/\\10/"]).contains("out of range"));
        assert!(err(&["s/\\(a\\)/\\99999999999999999999999/"]).contains("out of range"));
        assert_eq!(
            err(&["s/\\(a/b/"]),
            "Invalid transform expression: Unmatched ( or \\( (in 's/\\(a/b/')"
        );
        assert!(err(&["s/(/b/x"]).starts_with("Invalid transform expression: Unmatched ( or"));
        // The flags are read before the regex is compiled.
        assert!(err(&["s/[/b/q"]).starts_with("Unknown flag"));
        // One line, even for a newline in the expression.
        assert!(!err(&["s/\n/b/q"]).contains('\n'));
    }

    #[test]
    fn parse_accepts() {
        for e in ["", "s/a/b/;", "s/a/b/g;s,c,d,2xi", "s/a;b/c;d/", "flags=;s/a/b/", "flags=rSh"] {
            assert!(Transforms::parse(&[e]).is_ok(), "{e}");
        }
        assert!(Transforms::parse(&[""]).unwrap().is_empty());
        assert!(Transforms::parse(&["flags=r"]).unwrap().is_empty());
        assert!(!Transforms::parse(&["s/a/b/"]).unwrap().is_empty());
        // `\1` with one group, `\0` always; the regex's escapes count its groups.
        assert!(Transforms::parse(&["s/\\(a\\)/\\1\\0/"]).is_ok());
        assert!(Transforms::parse(&["s/(a)/\\1/"]).is_err());
        assert!(Transforms::parse(&["s/(a)/\\1/x"]).is_ok());
    }

    #[test]
    fn replacement_segments() {
        use Segment::*;
        let lit = |s: &str| Literal(s.as_bytes().to_vec());
        let segs = parse_replacement(br"ab\&c&\2\q\,\u\n", b',', 2).unwrap();
        let want = [
            lit("ab"),
            lit("&"),
            lit("c"),
            Group(0),
            Group(2),
            lit("\\q"),
            lit(","),
            Case(CaseCtl::UpNext),
            lit("\n"),
        ];
        assert_eq!(segs, want);
    }

    #[test]
    fn basic_results() {
        assert_eq!(m("s/a/X/", "abab"), "Xbab");
        assert_eq!(m("s/a/X/g", "abab"), "XbXb");
        assert_eq!(m("s,^[^/]*,new,", "top/a/b"), "new/a/b");
        assert_eq!(m("s/^/pre\\//", "a/b"), "pre/a/b");
        assert_eq!(m("s/\\(a*\\)\\(b\\)/<\\2\\1>/g", "aabab"), "<baa><ba>");
        assert_eq!(m("s/(x|b+)/[&]/gx", "abbxb"), "a[bb][x][b]");
        assert_eq!(m("s/A/z/gi", "aAb"), "zzb");
        assert_eq!(m("s/a/\\t\\n\\\\\\&\\q/", "a"), "\t\n\\&\\q");
        assert_eq!(m("s/a/b/;s/b/c/", "a"), "c");
        assert_eq!(t(&["s/a/b/", "s/b/c/"], "a", NameKind::Member), "c");
        assert_eq!(m("s/.*/\\U&/", "abc"), "ABC");
        assert_eq!(m("s/\\(.\\)\\(.*\\)/\\u\\1\\2/", "abc"), "Abc");
        assert_eq!(m("s/.*/\\U&\\E-&/", "ab"), "AB-ab");
        // N counted in the default base: 010 is 8, 0x2 is 2 (and `x` after 0x is REG_EXTENDED).
        assert_eq!(m("s/a/X/010", "aaaaaaaaaa"), "aaaaaaaXaa");
        assert_eq!(m("s/a/X/0x2", "aaa"), "aXa");
        assert_eq!(m("s/(a)/X/0x", "a"), "X");
        assert_eq!(m("s/a/X/4294967297", "aa"), "Xa"); // modulo 2^32: 1
        assert_eq!(m("s/a/X/2g", "aaaa"), "aXXX");
    }

    #[test]
    fn gnu_quirks() {
        // Prefix copied twice for a skipped match.
        assert_eq!(m("s/b/X/2", "abab"), "aabaX");
        // `^` matches again on the rest of the name.
        assert_eq!(m("s/^a/X/2", "aab"), "aXb");
        assert_eq!(m("s/^a/X/2", "abab"), "abab");
        // Leading `^` or trailing `$` turns `g` off.
        assert_eq!(m("s/a\\|b$/X/g", "aab"), "Xab");
        assert_eq!(m("s/a\\$/X/g", "a$a$"), "Xa$");
        // Case control carries over from one match to the next.
        assert_eq!(m("s/\\(a\\)/\\1\\U/g", "aa"), "aA");
        assert_eq!(m("s/.*/\\L\\u&/", "ABC"), "ABC");
        assert_eq!(m("s/.*/\\u\\L&/", "ABC"), "abc");
        // `\u\u` uppercases the first byte of two pieces.
        assert_eq!(m("s/\\(.\\)\\(.\\)/\\u\\u\\1\\2/", "ab"), "AB");
        // Empty names are left alone; empty regexes match the empty string.
        assert_eq!(m("s/^/x/", ""), "");
        assert_eq!(m("s//x/", "ab"), "xab");
        // Empty matches counted towards N end (GNU repeats the same match).
        assert_eq!(m("s/x*/-/3", "x y"), "x- y");
        assert_eq!(m("s/x*/-/3", "abab"), "-abab");
    }

    #[test]
    fn empty_global_matches_terminate() {
        // GNU tar 1.34 loops forever on these; we replace once and copy the rest.
        assert_eq!(m("s/x*/-/g", "abc"), "-abc");
        assert_eq!(m("s/a*/X/g", "aab"), "XXb");
        assert_eq!(m("s/\\</X/g", "ab cd"), "Xab cd");
        assert_eq!(m("s/x*/-/2g", "abc"), "-abc");
        // Empty matches after the start do advance.
        assert_eq!(m("s/\\>/X/g", "ab cd"), "abX cdX");
    }

    #[test]
    fn kinds_and_flags() {
        use NameKind::*;
        assert_eq!(t(&["s/a/b/"], "a", SymlinkTarget), "b");
        assert_eq!(t(&["s/a/b/S"], "a", SymlinkTarget), "a");
        assert_eq!(t(&["s/a/b/S"], "a", HardlinkTarget), "b");
        assert_eq!(t(&["s/a/b/H"], "a", HardlinkTarget), "a");
        assert_eq!(t(&["s/a/b/R"], "a", Member), "a");
        assert_eq!(t(&["s/a/b/RSHs"], "a", SymlinkTarget), "b");
        // flags= sets the default for later expressions, in later options too.
        assert_eq!(t(&["flags=s;s/a/b/", "s/a/c/"], "a", Member), "a");
        assert_eq!(t(&["flags=s;s/a/b/", "s/b/c/"], "a", SymlinkTarget), "c");
        assert_eq!(t(&["flags=s", "s/a/b/r"], "a", Member), "b");
        assert!(Transforms::parse(&["s/a/b/R"]).unwrap().apply(b"a", Member).is_none());
    }

    #[test]
    fn apply_returns_none_when_unchanged() {
        let x = Transforms::parse(&["s/a/a/g"]).unwrap();
        assert_eq!(x.apply(b"aaa", NameKind::Member), None);
        assert_eq!(x.apply(b"a\0b", NameKind::Member), None);
        assert_eq!(Transforms::default().apply(b"a", NameKind::Member), None);
        let x = Transforms::parse(&["s/b/\\n/"]).unwrap();
        assert_eq!(x.apply(b"a\xffb", NameKind::Member), Some(b"a\xff\n".to_vec()));
    }
}
