//! GNU sparse maps: the old GNU format (type 'S', entries in the header and extension blocks)
//! and the PAX formats 0.0 (`GNU.sparse.offset`/`numbytes` records), 0.1 (`GNU.sparse.map`)
//! and 1.0 (a decimal map at the start of the data area).
//!
//! Every map goes through [`MapBuilder`], which checks segments as they arrive (in order, not
//! overlapping, no overflow, at most [`MAX_ENTRIES`]) and, at the end, against the real size
//! and the number of data bytes actually stored. Nothing is allocated from a declared count.

use super::Segment;
use super::format::{self, NumError};

/// Most map entries accepted for one member (each costs 16 bytes of memory). Real sparse
/// files have far fewer; an archive needing more is almost certainly hostile.
pub(super) const MAX_ENTRIES: u64 = 1 << 21;

/// Accumulates (offset, length) entries into a validated segment list.
#[derive(Clone, Debug, Default)]
pub(super) struct MapBuilder {
    segments: Vec<Segment>,
    /// Entries seen, including zero-length ones (which are not kept).
    entries: u64,
    /// End of the last entry: the next one may not start before it.
    end: u64,
    /// Sum of the entry lengths: the bytes the archive must store.
    stored: u64,
    /// An offset waiting for its length (formats that send numbers one at a time).
    offset: Option<u64>,
}

impl MapBuilder {
    /// Adds one entry. Zero-length entries (GNU writes one at the real size when a file ends
    /// in a hole) are checked but not kept.
    pub(super) fn push(&mut self, offset: u64, len: u64) -> Result<(), String> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(format!("sparse map has more than {MAX_ENTRIES} entries"));
        }
        if offset < self.end {
            return Err(format!(
                "sparse map entry at offset {offset} overlaps or precedes the previous one (which ends at {})",
                self.end
            ));
        }
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| format!("sparse map entry {offset}+{len} overflows"))?;
        self.stored =
            self.stored.checked_add(len).ok_or_else(|| "sparse map sizes overflow".to_string())?;
        self.end = end;
        if len > 0 {
            self.segments.push(Segment { offset, len });
        }
        Ok(())
    }

    /// Adds a number of a map that alternates offsets and lengths.
    pub(super) fn push_number(&mut self, n: u64) -> Result<(), String> {
        match self.offset.take() {
            None => {
                self.offset = Some(n);
                Ok(())
            }
            Some(offset) => self.push(offset, n),
        }
    }

    /// Adds an offset (PAX 0.0 `GNU.sparse.offset`): must not follow another offset.
    pub(super) fn push_offset(&mut self, n: u64) -> Result<(), String> {
        if self.offset.is_some() {
            return Err("GNU.sparse.offset without a GNU.sparse.numbytes".to_string());
        }
        self.offset = Some(n);
        Ok(())
    }

    /// Adds a length (PAX 0.0 `GNU.sparse.numbytes`): must follow an offset.
    pub(super) fn push_len(&mut self, n: u64) -> Result<(), String> {
        match self.offset.take() {
            Some(offset) => self.push(offset, n),
            None => Err("GNU.sparse.numbytes without a GNU.sparse.offset".to_string()),
        }
    }

    /// Entries pushed so far (including zero-length ones).
    pub(super) fn entries(&self) -> u64 {
        self.entries
    }

    /// Checks the complete map against the real file size and the bytes stored in the
    /// archive (`stored` may exceed what the map covers; the rest is to be skipped), and
    /// returns the non-empty segments in file order.
    pub(super) fn finish(self, realsize: u64, stored: u64) -> Result<Vec<Segment>, String> {
        if self.offset.is_some() {
            return Err("sparse map ends with an offset and no length".to_string());
        }
        if self.end > realsize {
            return Err(format!(
                "sparse map reaches offset {} beyond the file size {realsize}",
                self.end
            ));
        }
        // GNU tar skips stored bytes the map does not cover (an archive in libarchive's
        // test suite has one); a map that covers more than is stored is an error.
        if self.stored > stored {
            return Err(format!(
                "sparse map covers {} bytes but the member stores only {stored}",
                self.stored
            ));
        }
        Ok(self.segments)
    }
}

/// Incremental parser of decimal numbers each ended by `sep` (',' in a 0.1 map, '\n' in a
/// 1.0 map).
#[derive(Clone, Debug)]
pub(super) struct Numbers {
    sep: u8,
    value: u64,
    digits: usize,
}

impl Numbers {
    pub(super) fn new(sep: u8) -> Self {
        Numbers { sep, value: 0, digits: 0 }
    }

    /// Feeds one byte; returns a number when `b` is the separator that ends it.
    pub(super) fn push(&mut self, b: u8) -> Result<Option<u64>, String> {
        if b == self.sep {
            return self.take().map(Some);
        }
        if !b.is_ascii_digit() {
            return Err(format!("unexpected byte '{}' in sparse map", b.escape_ascii()));
        }
        // The value counts, not the digits: leading zeros are fine (checked_mul catches
        // an overflow).
        self.digits += 1;
        self.value = self
            .value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| "number out of range in sparse map".to_string())?;
        Ok(None)
    }

    /// Ends the number being parsed (end of a 0.1 map value), if any digits were seen.
    pub(super) fn finish(&mut self) -> Result<Option<u64>, String> {
        if self.digits == 0 {
            return Ok(None);
        }
        self.take().map(Some)
    }

    fn take(&mut self) -> Result<u64, String> {
        if self.digits == 0 {
            return Err("empty number in sparse map".to_string());
        }
        let v = self.value;
        self.value = 0;
        self.digits = 0;
        Ok(v)
    }
}

/// The GNU sparse records of one member's PAX header (formats 0.0, 0.1, 1.0).
#[derive(Clone, Debug, Default)]
pub(super) struct PaxSparse {
    major: Option<u64>,
    minor: Option<u64>,
    /// `GNU.sparse.name`: the real name (wins over `path`).
    pub(super) name: Option<Vec<u8>>,
    /// `GNU.sparse.realsize` (1.0) or `GNU.sparse.size` (0.x).
    realsize: Option<u64>,
    /// `GNU.sparse.numblocks` (0.x): the number of entries the map must have.
    numblocks: Option<u64>,
    /// Entries from 0.0 offset/numbytes records or the 0.1 map.
    map: MapBuilder,
    /// Some record (0.0 pair or 0.1 map) carried map entries.
    has_map: bool,
    /// A `GNU.sparse.map` value is being parsed.
    map_numbers: Option<Numbers>,
    map_seen: bool,
}

/// The sparse PAX format a member uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PaxVersion {
    /// 0.0 or 0.1: the map is in the PAX header.
    V0,
    /// 1.0: the map is at the start of the data area.
    V1,
}

impl PaxSparse {
    /// Whether `key` is one of the GNU sparse keys (all of them start like this).
    pub(super) fn is_sparse_key(key: &[u8]) -> bool {
        key.starts_with(b"GNU.sparse.")
    }

    /// Applies a record other than `GNU.sparse.map` (see [`PaxSparse::map_start`]).
    /// Unknown `GNU.sparse.*` keys are ignored; an empty number is an error (GNU tar).
    pub(super) fn record(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let num = |v: &[u8]| -> Result<u64, String> {
            decimal(v).ok_or_else(|| {
                format!("invalid {}={}", crate::report::printable(key), crate::report::printable(v))
            })
        };
        match key {
            b"GNU.sparse.major" => self.major = Some(num(value)?),
            b"GNU.sparse.minor" => self.minor = Some(num(value)?),
            b"GNU.sparse.realsize" | b"GNU.sparse.size" => self.realsize = Some(num(value)?),
            b"GNU.sparse.numblocks" => self.numblocks = Some(num(value)?),
            // Kept with any NUL bytes, as a `path` record is (pax.rs): the member is refused
            // where names are made safe.
            b"GNU.sparse.name" => self.name = Some(value.to_vec()),
            b"GNU.sparse.offset" => {
                let n = num(value)?;
                self.has_map = true;
                self.map.push_offset(n)?;
            }
            b"GNU.sparse.numbytes" => {
                let n = num(value)?;
                self.has_map = true;
                self.map.push_len(n)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Starts a `GNU.sparse.map` value (0.1): "offset,size,offset,size,...".
    pub(super) fn map_start(&mut self) -> Result<(), String> {
        if self.map_seen {
            return Err("repeated GNU.sparse.map".to_string());
        }
        self.map_seen = true;
        self.has_map = true;
        self.map_numbers = Some(Numbers::new(b','));
        Ok(())
    }

    /// Feeds part of the `GNU.sparse.map` value.
    pub(super) fn map_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        let Some(numbers) = self.map_numbers.as_mut() else {
            return Ok(());
        };
        for &b in bytes {
            if let Some(n) = numbers.push(b)? {
                self.map.push_number(n)?;
            }
        }
        Ok(())
    }

    /// Ends the `GNU.sparse.map` value.
    pub(super) fn map_end(&mut self) -> Result<(), String> {
        if let Some(mut numbers) = self.map_numbers.take()
            && let Some(n) = numbers.finish()?
        {
            self.map.push_number(n)?;
        }
        Ok(())
    }

    /// Which sparse format the records describe, if any (None: not a sparse member).
    pub(super) fn version(&self) -> Result<Option<PaxVersion>, String> {
        match (self.major, self.minor) {
            (Some(0), Some(0 | 1)) | (Some(0), None) => Ok(Some(PaxVersion::V0)),
            (Some(1), Some(0)) | (Some(1), None) => Ok(Some(PaxVersion::V1)),
            (None, None) if self.has_map || self.numblocks.is_some() => Ok(Some(PaxVersion::V0)),
            (None, None) => Ok(None),
            (major, minor) => Err(format!(
                "unsupported GNU sparse format {}.{}",
                major.map_or("?".to_string(), |v| v.to_string()),
                minor.map_or("?".to_string(), |v| v.to_string()),
            )),
        }
    }

    /// The real size, if a record gave it.
    pub(super) fn realsize(&self) -> Option<u64> {
        self.realsize
    }

    /// Finishes a 0.0/0.1 map: `stored` is the member's data size in the archive.
    pub(super) fn finish_v0(self, realsize: u64, stored: u64) -> Result<Vec<Segment>, String> {
        if let Some(n) = self.numblocks
            && n != self.map.entries()
        {
            return Err(format!(
                "GNU.sparse.numblocks={n} but the map has {} entries",
                self.map.entries()
            ));
        }
        self.map.finish(realsize, stored)
    }
}

/// Incremental reader of a PAX 1.0 map: decimal lines `count`, then `count` pairs of
/// offset and length, padded with anything to a block boundary.
#[derive(Clone, Debug)]
pub(super) struct MapV1 {
    numbers: Numbers,
    /// The entry count, once its line has been read.
    count: Option<u64>,
    /// Numbers read after the count.
    read: u64,
    map: MapBuilder,
}

impl Default for MapV1 {
    fn default() -> Self {
        MapV1 { numbers: Numbers::new(b'\n'), count: None, read: 0, map: MapBuilder::default() }
    }
}

impl MapV1 {
    /// Feeds one block of the data area; returns true once the map is complete (the rest of
    /// that block is padding).
    pub(super) fn feed(&mut self, block: &[u8]) -> Result<bool, String> {
        if self.is_done() {
            return Ok(true);
        }
        for &b in block {
            let Some(n) = self.numbers.push(b)? else {
                continue;
            };
            match self.count {
                None => {
                    if n > MAX_ENTRIES {
                        return Err(format!("sparse map has {n} entries (limit {MAX_ENTRIES})"));
                    }
                    self.count = Some(n);
                }
                Some(_) => {
                    self.read += 1;
                    self.map.push_number(n)?;
                }
            }
            if self.is_done() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn is_done(&self) -> bool {
        self.count.is_some_and(|c| self.read == 2 * c)
    }

    /// Checks the complete map (see [`MapBuilder::finish`]).
    pub(super) fn finish(self, realsize: u64, stored: u64) -> Result<Vec<Segment>, String> {
        if !self.is_done() {
            return Err("incomplete sparse map".to_string());
        }
        self.map.finish(realsize, stored)
    }
}

/// Decodes one old GNU sparse entry (24 bytes) into `map`. Returns false for an empty entry
/// (GNU tar ends the map at the first entry whose numbytes field starts with NUL).
pub(super) fn old_gnu_entry(map: &mut MapBuilder, entry: &[u8]) -> Result<bool, String> {
    let (offset, numbytes) = format::split_sparse_entry(entry);
    if numbytes.first().is_none_or(|&b| b == 0) {
        return Ok(false);
    }
    let field = |f: &[u8], what: &str| -> Result<u64, String> {
        match format::parse_numeric(f) {
            Ok(v) => u64::try_from(v).map_err(|_| format!("negative {what} in sparse map")),
            Err(e @ (NumError::Blank | NumError::Garbage | NumError::Overflow)) => {
                Err(format!("bad {what} field in sparse map ({e}: \"{}\")", f.escape_ascii()))
            }
        }
    };
    let offset = field(offset, "offset")?;
    let len = field(numbytes, "numbytes")?;
    map.push(offset, len)?;
    Ok(true)
}

/// A non-negative decimal number: digits only, at most `i64::MAX` (sizes and offsets are
/// `off_t` in GNU tar). Its value counts, not its digits: leading zeros are fine.
pub(super) fn decimal(v: &[u8]) -> Option<u64> {
    decimal_value(v).filter(|&n| n <= i64::MAX as u64)
}

/// Digits only (at least one) as a u64; None past it.
pub(super) fn decimal_value(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, len: u64) -> Segment {
        Segment { offset, len }
    }

    #[test]
    fn builder_validates() {
        // (entries, realsize, stored, expected)
        type Case = (&'static [(u64, u64)], u64, u64, Result<Vec<Segment>, &'static str>);
        let cases: &[Case] = &[
            (&[], 0, 0, Ok(vec![])),
            (
                &[(0, 512), (1024, 512), (4096, 0)],
                4096,
                1024,
                Ok(vec![seg(0, 512), seg(1024, 512)]),
            ),
            (&[(0, 0), (1279, 0)], 1279, 0, Ok(vec![])),
            (&[(0, 512), (100, 512)], 4096, 1024, Err("overlaps")),
            (&[(1024, 512), (0, 512)], 4096, 1024, Err("overlaps")),
            (&[(0, 512)], 100, 512, Err("beyond the file size")),
            (&[(0, 512)], 4096, 1024, Ok(vec![seg(0, 512)])),
            (&[(0, 512), (1024, 512)], 4096, 1000, Err("covers 1024 bytes")),
            (&[(u64::MAX, 1)], u64::MAX, 1, Err("overflows")),
            (&[(i64::MAX as u64, 1)], u64::MAX, 1, Err("overflows")),
        ];
        for (entries, realsize, stored, want) in cases {
            let mut b = MapBuilder::default();
            let mut res = Ok(());
            for &(o, l) in *entries {
                res = res.and_then(|()| b.push(o, l));
            }
            let got = res.and_then(|()| b.finish(*realsize, *stored));
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(&g, w, "{entries:?}"),
                (Err(g), Err(w)) => assert!(g.contains(w), "{entries:?}: {g}"),
                (g, w) => panic!("{entries:?}: got {g:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn entry_limit() {
        let mut b = MapBuilder::default();
        for i in 0..MAX_ENTRIES {
            b.push(i, 0).unwrap();
        }
        assert!(b.push(MAX_ENTRIES, 0).unwrap_err().contains("more than"));
    }

    #[test]
    fn pax_0_0_and_0_1() {
        let mut s = PaxSparse::default();
        for (k, v) in [
            ("GNU.sparse.size", "3145728"),
            ("GNU.sparse.numblocks", "3"),
            ("GNU.sparse.offset", "999936"),
            ("GNU.sparse.numbytes", "512"),
            ("GNU.sparse.offset", "1999872"),
            ("GNU.sparse.numbytes", "512"),
            ("GNU.sparse.offset", "3145728"),
            ("GNU.sparse.numbytes", "0"),
        ] {
            s.record(k.as_bytes(), v.as_bytes()).unwrap();
        }
        assert_eq!(s.version().unwrap(), Some(PaxVersion::V0));
        assert_eq!(s.realsize(), Some(3145728));
        let map = s.finish_v0(3145728, 1024).unwrap();
        assert_eq!(map, vec![seg(999936, 512), seg(1999872, 512)]);

        let mut s = PaxSparse::default();
        s.record(b"GNU.sparse.numbytes", b"1").unwrap_err();
        s.record(b"GNU.sparse.offset", b"1").unwrap();
        s.record(b"GNU.sparse.offset", b"2").unwrap_err();
        s.record(b"GNU.sparse.offset", b"-2").unwrap_err();

        // 0.1, fed in awkward pieces.
        let mut s = PaxSparse::default();
        s.record(b"GNU.sparse.numblocks", b"3").unwrap();
        s.map_start().unwrap();
        for piece in ["99", "9936,512,1999", "872,512,3145728,", "0"] {
            s.map_bytes(piece.as_bytes()).unwrap();
        }
        s.map_end().unwrap();
        let map = s.clone().finish_v0(3145728, 1024).unwrap();
        assert_eq!(map, vec![seg(999936, 512), seg(1999872, 512)]);
        s.map_start().unwrap_err();
        // numblocks must agree with the map.
        let mut s2 = PaxSparse::default();
        s2.record(b"GNU.sparse.numblocks", b"2").unwrap();
        s2.map_start().unwrap();
        s2.map_bytes(b"0,1").unwrap();
        s2.map_end().unwrap();
        assert!(s2.finish_v0(1, 1).unwrap_err().contains("numblocks=2"));
        for bad in ["1,,2", "1,x", ",1", "99999999999999999999999,1"] {
            let mut s = PaxSparse::default();
            s.map_start().unwrap();
            let r = s.map_bytes(bad.as_bytes()).and_then(|()| s.map_end());
            assert!(r.is_err(), "{bad}");
        }
        // Odd number of map numbers.
        let mut s = PaxSparse::default();
        s.map_start().unwrap();
        s.map_bytes(b"0,1,5").unwrap();
        s.map_end().unwrap();
        assert!(s.finish_v0(10, 1).unwrap_err().contains("no length"));
    }

    #[test]
    fn versions() {
        let v = |major: &str, minor: &str| {
            let mut s = PaxSparse::default();
            s.record(b"GNU.sparse.major", major.as_bytes()).unwrap();
            s.record(b"GNU.sparse.minor", minor.as_bytes()).unwrap();
            s.version()
        };
        assert_eq!(v("1", "0"), Ok(Some(PaxVersion::V1)));
        assert_eq!(v("0", "1"), Ok(Some(PaxVersion::V0)));
        assert!(v("2", "0").is_err());
        assert!(v("1", "1").is_err());
        assert_eq!(PaxSparse::default().version(), Ok(None));
    }

    #[test]
    fn map_v1() {
        let mut m = MapV1::default();
        let mut block = [0u8; 512];
        let text = b"3\n999936\n512\n1999872\n512\n3145728\n0\n";
        block[..text.len()].copy_from_slice(text);
        assert!(m.feed(&block).unwrap());
        assert_eq!(m.finish(3145728, 1024).unwrap(), vec![seg(999936, 512), seg(1999872, 512)]);
        // Split across blocks.
        let mut m = MapV1::default();
        assert!(!m.feed(b"2\n0\n1").unwrap());
        assert!(m.feed(b"0\n20\n5\n\0\0garbage").unwrap());
        assert_eq!(m.finish(100, 15).unwrap(), vec![seg(0, 10), seg(20, 5)]);
        // Incomplete, garbage, huge counts.
        let mut m = MapV1::default();
        assert!(!m.feed(b"2\n0\n1\n").unwrap());
        assert!(m.finish(100, 1).is_err());
        assert!(MapV1::default().feed(b"#!gnu-sparse-format\n").is_err());
        assert!(MapV1::default().feed(b"99999999999\n").is_err());
        assert!(MapV1::default().feed(b"\n").is_err());
    }

    #[test]
    fn old_gnu_entries() {
        let mut m = MapBuilder::default();
        let mut e = [0u8; 24];
        assert!(!old_gnu_entry(&mut m, &e).unwrap());
        e[..12].copy_from_slice(b"00000001000\0");
        e[12..].copy_from_slice(b"00000001000\0");
        assert!(old_gnu_entry(&mut m, &e).unwrap());
        e[12..].copy_from_slice(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff");
        assert!(old_gnu_entry(&mut m, &e).unwrap_err().contains("negative"));
        e[12..].copy_from_slice(b"0000000100x\0");
        assert!(old_gnu_entry(&mut m, &e).unwrap_err().contains("bad numbytes"));
        assert_eq!(m.finish(1024, 512).unwrap(), vec![seg(512, 512)]);
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal(b"0"), Some(0));
        assert_eq!(decimal(b"9223372036854775807"), Some(i64::MAX as u64));
        assert_eq!(decimal(b"9223372036854775808"), None);
        assert_eq!(decimal(b""), None);
        assert_eq!(decimal(b"-1"), None);
        assert_eq!(decimal(b"+1"), None);
        assert_eq!(decimal(b"1 "), None);
        // Leading zeros are no overflow (Go's archive/tar writes none, but accepts them).
        assert_eq!(decimal(format!("{}5", "0".repeat(40)).as_bytes()), Some(5));
        assert_eq!(decimal_value(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal_value(b"18446744073709551616"), None);
    }
}
