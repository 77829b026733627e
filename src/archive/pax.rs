//! PAX extended headers: the `"%d %s=%s\n"` record codec and the keys this reader acts on.
//!
//! [`Parser`] is a push parser: the reader feeds it the data area of an `x`/`g` header in
//! pieces, so a header of any size is parsed in constant memory. Only the values of the keys
//! used (`path`, `linkpath`, `size`, `mtime`, `uid`, `gid`, `GNU.sparse.*`, and with
//! `--xattrs` the extended attributes, `xattr.rs`) are kept, each capped; every other value
//! (ACLs, ...) is skipped as it streams past.
//!
//! Record syntax is checked as GNU tar 1.34 checks it (xheader.c `decode_record`): a length
//! that is missing, not followed by a blank, or longer than the data left, a record without
//! `=` before its end (a NUL in the keyword ends it there), or not ending in `\n`, is
//! malformed. As in GNU tar that is not fatal: the records before it stand, the rest of the
//! header is passed over, the member is read from what is left, and the run exits 2
//! (`Extended::malformed`, GNU tar's words). A NUL where a record would start ends the
//! records (padding). Numbers are checked by their value, not their digits (leading zeros are
//! no overflow); an invalid or out-of-range number is reported the same way and its record
//! ignored (GNU tar's `decode_num`). A path or link target is kept as it is, NUL bytes and
//! all: the member is refused later, where names are made safe (policy/safety.rs). What
//! stays an error: a kept value over its cap, and any fault of a sparse map (a
//! `GNU.sparse.map` record cut short too): the member's data cannot be laid out without it.
//!
//! Empty values are taken as GNU tar 1.34 (and Go's archive/tar) take them, not as POSIX's
//! "delete the key": an empty `path` or `linkpath` is an empty name, an empty number is
//! invalid. Each `g` header replaces the whole global set, as GNU tar's
//! `xheader_decode_global` does (POSIX would merge keyword by keyword; bsdtar and Go's
//! archive/tar apply none of it to later members); an `x` header wins over it.

use super::sparse::{self, PaxSparse};
use super::xattr::{self, Xattrs};
use crate::archive::Timestamp;

/// Longest kept value of a name-like key (`path`, `linkpath`, `GNU.sparse.name`).
pub(super) const MAX_NAME_VALUE: usize = 1 << 20;
/// Longest kept `GNU.dumpdir` (an incremental archive's list of a directory's names, read
/// with `-G`): 64 MiB holds two million names of 30 bytes; the list is held while its
/// directory is purged.
pub(crate) const MAX_DUMPDIR: usize = 64 << 20;
/// Longest kept value of a numeric key (a time with a long fraction is the longest).
const MAX_NUMBER_VALUE: usize = 1024;
/// Keys longer than this are none of ours: not stored, just skipped. An attribute name is at
/// most 255 bytes (XATTR_NAME_MAX); `LIBARCHIVE.xattr.` and its %-encoding make that 782.
const MAX_KEY: usize = 1024;
/// Malformed records reported for one header, at most: a header of a million bad numbers
/// says the first few and how many more.
const MAX_MALFORMED: usize = 8;
/// The largest uid and gid (`uid_t`, `gid_t`), as GNU tar bounds the PAX records.
const MAX_ID: u64 = u32::MAX as u64;

/// The member fields PAX records override (None: not set by this header).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Overrides {
    pub(super) path: Option<Vec<u8>>,
    pub(super) linkpath: Option<Vec<u8>>,
    pub(super) size: Option<u64>,
    pub(super) mtime: Option<Timestamp>,
    pub(super) uid: Option<u64>,
    pub(super) gid: Option<u64>,
    pub(super) uname: Option<Vec<u8>>,
    pub(super) gname: Option<Vec<u8>>,
}

/// The value of a field for a member: the local (`x`) setting if any, else the global one.
pub(super) fn pick<T: Clone>(local: &Option<T>, global: &Option<T>) -> Option<T> {
    local.as_ref().or(global.as_ref()).cloned()
}

/// Everything one `x` or `g` header says.
#[derive(Clone, Debug, Default)]
pub(super) struct Extended {
    pub(super) overrides: Overrides,
    /// GNU sparse records (ignored in `g` headers).
    pub(super) sparse: PaxSparse,
    /// Extended attributes (`x` headers only, and only when asked for: `Parser::new`).
    pub(super) xattrs: Xattrs,
    /// `GNU.dumpdir`: a POSIX-format incremental archive's list of the directory's names
    /// (`x` headers only, and only when asked for: `Parser::keep_dumpdir`).
    pub(super) dumpdir: Option<Vec<u8>>,
    /// A `GNU.dumpdir` record was there (kept or not): the member is an incremental archive's
    /// directory (GNU tar's `is_dumpdir`).
    pub(super) is_dumpdir: bool,
    /// `GNU.volume.label`: a POSIX-format archive's volume label (`tar -V LABEL -c`), which
    /// GNU tar writes in a `g` header.
    pub(super) volume_label: Option<Vec<u8>>,
    /// What was malformed, in GNU tar's words (`Malformed extended header: missing newline`),
    /// at most MAX_MALFORMED lines: each one makes the run exit 2, and the header stands as
    /// far as it was read (module doc).
    pub(super) malformed: Vec<String>,
}

/// What to do with the value of the record being parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// Collect it (at most this many bytes) and apply it at the end of the record.
    Keep(usize),
    /// Stream it into the sparse map parser (`GNU.sparse.map`).
    Map,
    /// An extended attribute's value (`xattr.rs`): kept up to its cap, dropped beyond it.
    Xattr,
    Skip,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Where a record starts (leading blanks allowed).
    Start,
    /// In the length digits.
    Length,
    /// In the blanks after the length.
    Blanks,
    Key,
    /// In the value (`left` bytes of it to go), then the newline.
    Value,
    /// After a NUL where a record would start: the rest is padding.
    Padding,
    /// After a malformed record: the rest of the data area is passed over (GNU tar stops
    /// decoding the header there).
    Broken,
}

/// Push parser for the data area of one `x` or `g` header.
#[derive(Debug)]
pub(super) struct Parser {
    global: bool,
    /// Whether extended attribute records are kept (`--xattrs`).
    xattrs: bool,
    /// Whether a `GNU.dumpdir` record is kept (`-G`).
    dumpdir: bool,
    /// `--pax-option delete=PATTERN`: records whose keyword matches are skipped.
    deleted: std::sync::Arc<[std::ffi::CString]>,
    /// Bytes of the data area not yet fed.
    left: u64,
    state: State,
    /// Record length and the bytes of the record consumed so far.
    rec_len: u64,
    rec_used: u64,
    key: Vec<u8>,
    key_too_long: bool,
    value: Vec<u8>,
    value_kind: Value,
    /// Value bytes still to come (the newline excluded).
    value_left: u64,
    ext: Extended,
    /// Malformed records past the MAX_MALFORMED reported.
    malformed_more: u64,
}

impl Parser {
    /// A parser for a data area of `size` bytes; `global` for a `g` header; `xattrs` keeps
    /// extended attribute records (never in a `g` header: GNU tar 1.34 ignores them there).
    pub(super) fn new(size: u64, global: bool, xattrs: bool) -> Self {
        Parser {
            global,
            xattrs: xattrs && !global,
            dumpdir: false,
            deleted: std::sync::Arc::new([]),
            left: size,
            state: State::Start,
            rec_len: 0,
            rec_used: 0,
            key: Vec::new(),
            key_too_long: false,
            value: Vec::new(),
            value_kind: Value::Skip,
            value_left: 0,
            ext: Extended::default(),
            malformed_more: 0,
        }
    }

    /// Skips the records whose keyword matches one of `patterns` (fnmatch, GNU tar's
    /// `xheader_keyword_deleted_p`).
    pub(super) fn delete(&mut self, patterns: &std::sync::Arc<[std::ffi::CString]>) {
        self.deleted = patterns.clone();
    }

    /// Keeps the `GNU.dumpdir` record of an `x` header (`Extended::dumpdir`).
    pub(super) fn keep_dumpdir(&mut self, on: bool) {
        self.dumpdir = on && !self.global;
    }

    /// Feeds the next bytes of the data area (never more than the size given to `new`).
    pub(super) fn feed(&mut self, mut data: &[u8]) -> Result<(), String> {
        if data.len() as u64 > self.left {
            return Err("PAX header: more data than its size".to_string());
        }
        while !data.is_empty() {
            if self.state == State::Value {
                // Bulk path: most of a large header is values.
                let n = data.len().min(usize::try_from(self.value_left).unwrap_or(usize::MAX));
                let (chunk, rest) = data.split_at(n);
                self.value_chunk(chunk)?;
                self.consume(n as u64);
                data = rest;
                if self.value_left == 0 {
                    let Some((&b, rest)) = data.split_first() else {
                        continue; // the newline comes in the next piece
                    };
                    self.consume(1);
                    data = rest;
                    self.end_record(b)?;
                }
                continue;
            }
            if matches!(self.state, State::Padding | State::Broken) {
                self.consume(data.len() as u64);
                return Ok(());
            }
            let Some((&b, rest)) = data.split_first() else {
                break;
            };
            data = rest;
            self.byte(b)?;
        }
        Ok(())
    }

    fn consume(&mut self, n: u64) {
        self.left -= n;
        self.rec_used += n;
    }

    /// One byte outside a value.
    fn byte(&mut self, b: u8) -> Result<(), String> {
        let start_left = self.left;
        self.consume(1);
        match self.state {
            State::Start => match b {
                b' ' | b'\t' => {}
                0 => self.state = State::Padding,
                b'0'..=b'9' => {
                    self.state = State::Length;
                    self.rec_len = u64::from(b - b'0');
                }
                _ => self.broken(malformed("missing length")),
            },
            State::Length => match b {
                b'0'..=b'9' => {
                    // The value counts, not the digits: leading zeros are no overflow, and a
                    // length past u64 is past any data area.
                    self.rec_len =
                        self.rec_len.saturating_mul(10).saturating_add(u64::from(b - b'0'));
                }
                _ => {
                    // The record must fit in what is left of the data area, counted from its
                    // first byte (GNU tar checks this before the blank).
                    let record_left = start_left + self.rec_used - 1;
                    if self.rec_len > record_left {
                        let len = self.rec_len;
                        self.broken(format!("Extended header length {len} is out of range"));
                    } else if b != b' ' && b != b'\t' {
                        self.broken(malformed("missing blank after length"));
                    } else {
                        self.state = State::Blanks;
                        self.check_room();
                    }
                }
            },
            State::Blanks | State::Key => {
                if self.state == State::Blanks && (b == b' ' || b == b'\t') {
                    self.check_room();
                    return Ok(());
                }
                self.state = State::Key;
                match b {
                    b'=' => return self.start_value(),
                    // GNU tar looks for the '=' with strchr: a NUL in the keyword ends it.
                    0 => self.broken(malformed("missing equal sign")),
                    _ if !self.check_room() => {}
                    _ if self.key.len() < MAX_KEY => self.key.push(b),
                    _ => self.key_too_long = true,
                }
            }
            // `feed` handles these itself.
            State::Value | State::Padding | State::Broken => {
                return Err("malformed PAX header: internal parser state".to_string());
            }
        }
        Ok(())
    }

    /// In the key: the byte just consumed may not be the record's last (its newline). False
    /// (the header broken off) when it was.
    fn check_room(&mut self) -> bool {
        if self.rec_used >= self.rec_len {
            self.broken(malformed("missing equal sign"));
            return false;
        }
        true
    }

    /// A malformed record (`what`, GNU tar's words): noted, and the rest of the header passed
    /// over.
    fn broken(&mut self, what: String) {
        self.note(what);
        self.state = State::Broken;
        self.key.clear();
        self.value = Vec::new();
    }

    /// Notes a malformed record or value (`Extended::malformed`).
    fn note(&mut self, what: String) {
        if self.ext.malformed.len() < MAX_MALFORMED {
            self.ext.malformed.push(what);
        } else {
            self.malformed_more += 1;
        }
    }

    /// The '=' has just been consumed.
    fn start_value(&mut self) -> Result<(), String> {
        if self.rec_used >= self.rec_len {
            self.broken(malformed("missing newline"));
            return Ok(());
        }
        self.value_left = self.rec_len - self.rec_used - 1;
        self.value.clear();
        self.value_kind = self.value_kind_for_key();
        if !self.global && self.key == b"GNU.dumpdir" {
            self.ext.is_dumpdir = true;
        }
        if let Value::Keep(cap) = self.value_kind
            && self.value_left > cap as u64
        {
            return Err(bad(&format!(
                "{} value too long ({} bytes)",
                crate::report::printable(&self.key),
                self.value_left
            )));
        }
        if self.value_kind == Value::Map {
            self.ext.sparse.map_start()?;
        }
        self.state = State::Value;
        Ok(())
    }

    fn value_kind_for_key(&self) -> Value {
        if self.key_too_long || (!self.deleted.is_empty() && deleted(&self.deleted, &self.key)) {
            return Value::Skip;
        }
        match self.key.as_slice() {
            b"path" | b"linkpath" => Value::Keep(MAX_NAME_VALUE),
            b"uname" | b"gname" => Value::Keep(MAX_NUMBER_VALUE),
            b"size" | b"mtime" | b"uid" | b"gid" => Value::Keep(MAX_NUMBER_VALUE),
            b"GNU.volume.label" => Value::Keep(MAX_NAME_VALUE),
            _ if self.global => Value::Skip,
            b"GNU.dumpdir" if self.dumpdir => Value::Keep(MAX_DUMPDIR),
            k if self.xattrs && xattr::is_key(k) => Value::Xattr,
            b"GNU.sparse.map" => Value::Map,
            b"GNU.sparse.name" => Value::Keep(MAX_NAME_VALUE),
            k if PaxSparse::is_sparse_key(k) => Value::Keep(MAX_NUMBER_VALUE),
            _ => Value::Skip,
        }
    }

    fn value_chunk(&mut self, chunk: &[u8]) -> Result<(), String> {
        self.value_left -= chunk.len() as u64;
        match self.value_kind {
            Value::Keep(_) => self.value.extend_from_slice(chunk),
            Value::Map => self.ext.sparse.map_bytes(chunk)?,
            Value::Xattr => {
                if self.value.len() + chunk.len() <= xattr::MAX_RECORD_VALUE {
                    self.value.extend_from_slice(chunk);
                } else {
                    // Too large to be kept: marked, and the bytes go by.
                    self.value_kind = Value::Skip;
                    self.ext.xattrs.too_large(&self.key);
                    self.value = Vec::new();
                }
            }
            Value::Skip => {}
        }
        Ok(())
    }

    /// `b` is the record's last byte.
    fn end_record(&mut self, b: u8) -> Result<(), String> {
        if b != b'\n' {
            // GNU tar applies no part of such a record; a sparse map streams into the member's
            // map as it comes, and the member's data cannot be laid out without it: an error,
            // as every other fault of a map is.
            if self.value_kind == Value::Map {
                return Err(bad("GNU.sparse.map: missing newline"));
            }
            self.broken(malformed("missing newline"));
            return Ok(());
        }
        match self.value_kind {
            Value::Keep(_) => {
                let value = std::mem::take(&mut self.value);
                self.apply(&value)?;
            }
            Value::Map => self.ext.sparse.map_end()?,
            Value::Xattr => {
                let value = std::mem::take(&mut self.value);
                self.ext.xattrs.record(&self.key, value);
            }
            Value::Skip => {}
        }
        self.state = State::Start;
        self.rec_used = 0;
        self.rec_len = 0;
        self.key.clear();
        self.key_too_long = false;
        Ok(())
    }

    fn apply(&mut self, value: &[u8]) -> Result<(), String> {
        let key = self.key.as_slice();
        let o = &mut self.ext.overrides;
        // A number that is not one, or out of its type's range: reported, its record ignored
        // (the header's field stands), as GNU tar's `decode_num` and `decode_time` do.
        let number = match key {
            b"size" => Some(number(key, value, 0, i64::MAX as u64).map(|n| o.size = Some(n))),
            b"uid" => Some(number(key, value, 0, MAX_ID).map(|n| o.uid = Some(n))),
            b"gid" => Some(number(key, value, 0, MAX_ID).map(|n| o.gid = Some(n))),
            b"mtime" => Some(time(key, value).map(|t| o.mtime = Some(t))),
            _ => None,
        };
        if let Some(result) = number {
            if let Err(what) = result {
                self.note(what);
            }
            return Ok(());
        }
        match key {
            // Kept as they are, NUL bytes too: a name with one is refused where names are
            // made safe, and the member alone is skipped (module doc).
            b"path" => o.path = Some(value.to_vec()),
            b"linkpath" => o.linkpath = Some(value.to_vec()),
            b"uname" => o.uname = Some(value.to_vec()),
            b"gname" => o.gname = Some(value.to_vec()),
            b"GNU.dumpdir" => self.ext.dumpdir = Some(value.to_vec()),
            b"GNU.volume.label" => self.ext.volume_label = Some(value.to_vec()),
            _ => self.ext.sparse.record(key, value).map_err(|e| format!("PAX header: {e}"))?,
        }
        Ok(())
    }

    /// Ends the data area: a record it cuts short is malformed, as GNU tar finds it (its
    /// buffer ends in a NUL).
    pub(super) fn finish(mut self) -> Result<Extended, String> {
        if self.left != 0 {
            return Err("PAX header: data missing".to_string());
        }
        match self.state {
            State::Start | State::Padding | State::Broken => {}
            // Digits to the end: the length is past what is left, or has no blank after it.
            State::Length if self.rec_len > self.rec_used => {
                let len = self.rec_len;
                self.broken(format!("Extended header length {len} is out of range"));
            }
            State::Length => self.broken(malformed("missing blank after length")),
            // The record lengths are checked against the data left, so a record ends inside it.
            State::Blanks | State::Key | State::Value => self.broken(malformed("truncated record")),
        }
        if self.malformed_more > 0 {
            let more = self.malformed_more;
            self.ext
                .malformed
                .push(format!("Malformed extended header: {more} more malformed records"));
        }
        self.ext.xattrs.finish();
        Ok(self.ext)
    }
}

/// Whether `key` matches one of `patterns` (fnmatch without flags).
fn deleted(patterns: &[std::ffi::CString], key: &[u8]) -> bool {
    patterns.iter().any(|p| keyword_matches(p, key))
}

/// Whether the PAX keyword `key` matches `pattern` (fnmatch without flags, as GNU tar's
/// `--pax-option delete=`).
pub(super) fn keyword_matches(pattern: &std::ffi::CStr, key: &[u8]) -> bool {
    let Ok(key) = std::ffi::CString::new(key) else { return false };
    // Safety: two NUL-terminated strings that live across the call.
    unsafe { libc::fnmatch(pattern.as_ptr(), key.as_ptr(), 0) == 0 }
}

fn bad(what: &str) -> String {
    format!("malformed PAX header: {what}")
}

/// GNU tar's words for a malformed record.
fn malformed(what: &str) -> String {
    format!("Malformed extended header: {what}")
}

/// GNU tar's words for a value that is not a number of its kind.
fn invalid(key: &[u8], value: &[u8]) -> String {
    let (key, value) = (crate::report::printable(key), crate::report::printable(value));
    malformed(&format!("invalid {key}={value}"))
}

/// GNU tar's words for a number outside `min..=max`.
fn out_of_range(key: &[u8], value: &[u8], min: impl std::fmt::Display, max: u64) -> String {
    let (key, value) = (crate::report::printable(key), crate::report::printable(value));
    format!("Extended header {key}={value} is out of range {min}..{max}")
}

/// A decimal number in `min..=max` (size, uid, gid), by its value: leading zeros are fine.
/// Digits with a leading `-` are a number out of range, as GNU tar's `strtosysint` finds.
fn number(key: &[u8], v: &[u8], min: u64, max: u64) -> Result<u64, String> {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid(key, v));
    }
    let n = sparse::decimal_value(digits);
    match n {
        Some(n) if v[0] != b'-' && (min..=max).contains(&n) => Ok(n),
        Some(0) if v[0] == b'-' && min == 0 => Ok(0),
        _ => Err(out_of_range(key, v, min, max)),
    }
}

/// A PAX time (`parse_time`), or why not in GNU tar's words (`decode_time`): out of range
/// when it is all digits, invalid otherwise.
fn time(key: &[u8], v: &[u8]) -> Result<Timestamp, String> {
    parse_time(v).ok_or_else(|| {
        let body = v.strip_prefix(b"-").unwrap_or(v);
        let (secs, frac) = match body.iter().position(|&b| b == b'.') {
            Some(dot) => (&body[..dot], &body[dot + 1..]),
            None => (body, &[][..]),
        };
        if !secs.is_empty() && secs.iter().chain(frac).all(u8::is_ascii_digit) {
            out_of_range(key, v, i64::MIN, i64::MAX as u64)
        } else {
            invalid(key, v)
        }
    })
}

/// A PAX time: `[-]seconds[.fraction]`, the fraction truncated to nanoseconds. Negative
/// times count back from the epoch: `-1.5` is 1.5 s before it (secs -2, nanos 500000000).
/// Like GNU tar, whatever follows the digits is ignored ("1.5s" is 1.5); at least one
/// digit of seconds is required.
pub(super) fn parse_time(v: &[u8]) -> Option<Timestamp> {
    let (negative, v) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let secs = &v[..digits(v)];
    let frac = match v.get(secs.len()) {
        Some(b'.') => {
            let rest = &v[secs.len() + 1..];
            &rest[..digits(rest)]
        }
        _ => &[][..],
    };
    if secs.is_empty() {
        return None;
    }
    let secs =
        secs.iter().try_fold(0i64, |n, &b| n.checked_mul(10)?.checked_add(i64::from(b - b'0')))?;
    let mut nanos: u32 = 0;
    for i in 0..9 {
        nanos = nanos * 10 + frac.get(i).map_or(0, |&b| u32::from(b - b'0'));
    }
    if !negative {
        return Some(Timestamp { secs, nanos });
    }
    if nanos == 0 {
        return Some(Timestamp { secs: -secs, nanos: 0 });
    }
    // -(secs + nanos/1e9) = -(secs + 1) + (1e9 - nanos)/1e9
    let secs = (-secs).checked_sub(1)?;
    Some(Timestamp { secs, nanos: 1_000_000_000 - nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds correctly sized records.
    fn rec(key: &str, value: &str) -> Vec<u8> {
        let body = format!(" {key}={value}\n");
        let mut len = body.len() + 1;
        while format!("{len}").len() + body.len() != len {
            len += 1;
        }
        format!("{len}{body}").into_bytes()
    }

    fn parse_in_pieces(data: &[u8], global: bool, piece: usize) -> Result<Extended, String> {
        let mut p = Parser::new(data.len() as u64, global, true);
        for chunk in data.chunks(piece.max(1)) {
            p.feed(chunk)?;
        }
        p.finish()
    }

    fn parse(data: &[u8]) -> Result<Extended, String> {
        // Every piece size gives the same answer.
        let whole = parse_in_pieces(data, false, data.len());
        for piece in [1, 2, 3, 7, 512] {
            let got = parse_in_pieces(data, false, piece);
            assert_eq!(
                format!("{got:?}"),
                format!("{whole:?}"),
                "piece {piece} of {}",
                data.escape_ascii()
            );
        }
        whole
    }

    #[test]
    fn records() {
        let mut data = rec("path", "a/b\nc=d");
        data.extend(rec("linkpath", "target"));
        data.extend(rec("size", "12345678901"));
        data.extend(rec("mtime", "1310411683.041408671"));
        data.extend(rec("uid", "4294967295"));
        data.extend(rec("gid", "7"));
        data.extend(rec("SCHILY.acl.ace", &"x".repeat(3000)));
        data.extend(rec(&"k".repeat(200), "v"));
        data.extend(rec("atime", "garbage is not looked at"));
        let e = parse(&data).unwrap();
        let o = &e.overrides;
        assert_eq!(o.path, Some(b"a/b\nc=d".to_vec()));
        assert_eq!(o.linkpath, Some(b"target".to_vec()));
        assert_eq!(o.size, Some(12345678901));
        assert_eq!(o.mtime, Some(Timestamp { secs: 1310411683, nanos: 41408671 }));
        assert_eq!(o.uid, Some(u64::from(u32::MAX)));
        assert_eq!(o.gid, Some(7));
        // Trailing NUL padding ends the records.
        let mut padded = rec("path", "p");
        padded.extend([0u8; 100]);
        assert_eq!(parse(&padded).unwrap().overrides.path, Some(b"p".to_vec()));
        // Leading blanks and tabs around the length (GNU tar accepts them).
        let e = parse(b" 12\t path=x\n").unwrap();
        assert_eq!(e.overrides.path, Some(b"x".to_vec()));
        // Empty values: an empty name (GNU tar 1.34 and Go agree), an invalid number.
        let e = parse(&rec("path", "")).unwrap();
        assert_eq!(e.overrides.path, Some(vec![]));
        for key in ["mtime", "size", "uid", "gid"] {
            let said = parse(&rec(key, "")).unwrap().malformed;
            assert_eq!(said, [format!("Malformed extended header: invalid {key}=")]);
        }
        assert_eq!(parse(b"").unwrap().overrides, Overrides::default());
    }

    /// The records before a malformed one stand, the rest is passed over, and GNU tar 1.34's
    /// words say what was wrong (checked with `tar -xf` on each, xheader.c `decode_record`).
    #[test]
    fn malformed_records() {
        let cases: &[(&[u8], &str)] = &[
            (b"0 path=x\n", "Malformed extended header: missing equal sign"),
            (b"x path=x\n", "Malformed extended header: missing length"),
            (b"99 path=x\n", "Extended header length 99 is out of range"),
            (b"99path=x\n", "Extended header length 99 is out of range"),
            (b"10path=xx\n", "Malformed extended header: missing blank after length"),
            (b"9 path=x\0", "Malformed extended header: missing newline"),
            (b"4 x=", "Malformed extended header: missing newline"),
            (b"9 pathxxx\n", "Malformed extended header: missing equal sign"),
            (b"3 x", "Malformed extended header: missing equal sign"),
            (b"2 ", "Malformed extended header: missing equal sign"),
            (b"12", "Extended header length 12 is out of range"),
            (b"1", "Malformed extended header: missing blank after length"),
            (b"99999999999999999999999 a=b\n", "Extended header length 18446744073709551615 is"),
            // A NUL in the keyword ends it there, before the '=' (GNU tar's strchr).
            (b"12 pa\0th=xy\n", "Malformed extended header: missing equal sign"),
            (b"9 size=x\n", "Malformed extended header: invalid size=x"),
            (b"11 size=-1\n", "Extended header size=-1 is out of range 0..9223372036854775807"),
            (b"28 size=9223372036854775808\n", "size=9223372036854775808 is out of range"),
            (b"11 mtime=x\n", "Malformed extended header: invalid mtime=x"),
            (b"30 mtime=99999999999999999999\n", "mtime=99999999999999999999 is out of range"),
            (b"9 uid=-1\n", "Extended header uid=-1 is out of range 0..4294967295"),
            (b"18 gid=4294967296\n", "Extended header gid=4294967296 is out of range"),
            (b"6 a=b\n5 a=", "Extended header length 5 is out of range"),
        ];
        for (data, want) in cases {
            let got = parse(data).unwrap().malformed;
            assert_eq!(got.len(), 1, "{}: {got:?}", data.escape_ascii());
            assert!(got[0].contains(want), "{}: {got:?}", data.escape_ascii());
        }
        // Before the malformed record: kept. After it: not read.
        let mut data = rec("mtime", "1500000000");
        data.extend(b"11 path=bad\0");
        data.extend(rec("uid", "5"));
        let e = parse(&data).unwrap();
        assert_eq!(e.overrides.mtime, Some(Timestamp { secs: 1_500_000_000, nanos: 0 }));
        assert_eq!((e.overrides.path, e.overrides.uid), (None, None));
        assert_eq!(e.malformed, ["Malformed extended header: missing newline"]);
        // A bad number is its record alone: the records after it are read.
        let mut data = rec("size", "x");
        data.extend(rec("uid", "5"));
        let e = parse(&data).unwrap();
        assert_eq!((e.overrides.size, e.overrides.uid), (None, Some(5)));
        assert_eq!(e.malformed.len(), 1);
        // A header of many bad numbers says the first few and how many more.
        let data: Vec<u8> = (0..20).flat_map(|_| rec("gid", "-")).collect();
        let said = parse(&data).unwrap().malformed;
        assert_eq!(said.len(), MAX_MALFORMED + 1);
        assert_eq!(said[MAX_MALFORMED], "Malformed extended header: 12 more malformed records");
        // A sparse map record cut short is an error: the member cannot be laid out.
        let mut map = rec("GNU.sparse.map", "0,3,2000,4");
        *map.last_mut().unwrap() = 0;
        assert!(parse(&map).unwrap_err().contains("GNU.sparse.map: missing newline"));
        // A NUL in a name is kept: the member is refused where names are made safe.
        let e = parse(b"12 path=a\0b\n").unwrap();
        assert_eq!(e.overrides.path, Some(b"a\0b".to_vec()));
        assert!(e.malformed.is_empty());
        // A kept value over its cap is refused before it is buffered (fatal: a resource cap).
        let big = rec("path", &"p".repeat(MAX_NAME_VALUE + 1));
        assert!(parse_in_pieces(&big, false, 4096).unwrap_err().contains("too long"));
        // Feeding more than the declared size is refused.
        let mut p = Parser::new(3, false, false);
        assert!(p.feed(b"abcd").is_err());
    }

    /// Numbers count by their value, not their digits: Go's archive/tar and GNU tar accept
    /// leading zeros, and so do record lengths.
    #[test]
    fn leading_zeros() {
        let zeros = "0".repeat(30);
        let mut data = rec("size", &format!("{zeros}5"));
        data.extend(rec("uid", &format!("{zeros}123")));
        data.extend(rec("gid", &format!("{zeros}7")));
        data.extend(rec("mtime", &format!("{zeros}1500000000.5")));
        let body = " path=longzero\n";
        let len = 40 + body.len();
        data.extend(format!("{len:040}{body}").into_bytes());
        let e = parse(&data).unwrap();
        assert!(e.malformed.is_empty(), "{:?}", e.malformed);
        let o = &e.overrides;
        assert_eq!((o.size, o.uid, o.gid), (Some(5), Some(123), Some(7)));
        assert_eq!(o.mtime, Some(Timestamp { secs: 1_500_000_000, nanos: 500_000_000 }));
        assert_eq!(o.path, Some(b"longzero".to_vec()));
        assert_eq!(number(b"uid", b"-0", 0, MAX_ID), Ok(0));
        assert_eq!(number(b"uid", b"4294967295", 0, MAX_ID), Ok(u64::from(u32::MAX)));
    }

    #[test]
    fn global_headers_skip_sparse_keys() {
        let mut data = rec("GNU.sparse.map", "0,1");
        data.extend(rec("GNU.sparse.numblocks", "1"));
        data.extend(rec("path", "g"));
        let g = parse_in_pieces(&data, true, 5).unwrap();
        assert_eq!(g.sparse.version(), Ok(None));
        assert_eq!(g.overrides.path, Some(b"g".to_vec()));
        let x = parse_in_pieces(&data, false, 5).unwrap();
        assert_eq!(x.sparse.version().unwrap(), Some(sparse::PaxVersion::V0));
    }

    #[test]
    fn xattr_records() {
        // Raw bytes, NUL and newline included (the record is length-prefixed).
        let mut data = rec("SCHILY.xattr.user.bin", "a\0b\nc");
        data.extend(rec("LIBARCHIVE.xattr.user.lib", "bGli"));
        data.extend(rec("SCHILY.xattr.user.big", &"v".repeat(xattr::MAX_RECORD_VALUE + 1)));
        data.extend(rec("path", "p"));
        let list = |e: Extended| e.xattrs.into_list();
        let got = list(parse(&data).unwrap());
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].name.as_slice(), got[0].value.as_deref()),
            (&b"user.bin"[..], Some(&b"a\0b\nc"[..]))
        );
        assert_eq!(got[1].value.as_deref(), Some(&b"lib"[..]));
        assert_eq!((got[2].name.as_slice(), got[2].value.as_deref()), (&b"user.big"[..], None));
        // Not asked for, or in a global header (GNU tar 1.34 ignores them there): nothing kept.
        let mut p = Parser::new(data.len() as u64, false, false);
        p.feed(&data).unwrap();
        let e = p.finish().unwrap();
        assert_eq!(e.overrides.path, Some(b"p".to_vec()));
        assert!(list(e).is_empty());
        assert!(list(parse_in_pieces(&data, true, 7).unwrap()).is_empty());
    }

    #[test]
    fn picking() {
        let global = Overrides { path: Some(b"g".to_vec()), uid: Some(6), ..Default::default() };
        let local = Overrides { path: Some(vec![]), gid: Some(1), ..Default::default() };
        assert_eq!(pick(&local.path, &global.path), Some(vec![]));
        assert_eq!(pick(&local.gid, &global.gid), Some(1));
        assert_eq!(pick(&local.uid, &global.uid), Some(6));
        assert_eq!(pick(&local.mtime, &global.mtime), None);
        let none = Overrides::default();
        assert_eq!(pick(&none.path, &global.path), Some(b"g".to_vec()));
    }

    #[test]
    fn times() {
        let t = |s: &str| parse_time(s.as_bytes()).map(|t| (t.secs, t.nanos));
        assert_eq!(t("0"), Some((0, 0)));
        assert_eq!(t("1.5"), Some((1, 500_000_000)));
        assert_eq!(t("1."), Some((1, 0)));
        assert_eq!(t("1.0000000019999"), Some((1, 1)));
        assert_eq!(t("-1"), Some((-1, 0)));
        assert_eq!(t("-1.5"), Some((-2, 500_000_000)));
        assert_eq!(t("-0.25"), Some((-1, 750_000_000)));
        assert_eq!(t("-2147483648"), Some((-2147483648, 0)));
        assert_eq!(t("9223372036854775807"), Some((i64::MAX, 0)));
        assert_eq!(t("-9223372036854775807.5"), Some((i64::MIN, 500_000_000)));
        assert_eq!(t("9223372036854775808"), None);
        assert_eq!(t("1748089464.951928467a"), Some((1748089464, 951928467)));
        assert_eq!(t("1e3"), Some((1, 0)));
        assert_eq!(t("1.2.3"), Some((1, 200_000_000)));
        assert_eq!(t("1.x"), Some((1, 0)));
        for bad in ["", "-", ".5", "-.5", "+1", " 1", "--1", "x", "99999999999999999999"] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }
}
