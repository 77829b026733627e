//! Extended attributes in PAX `x` headers (`--xattrs`).
//!
//! Two spellings: `SCHILY.xattr.NAME=VALUE` (GNU tar and bsdtar write it; the value is the
//! raw bytes, NUL and newline included: the record is length-prefixed) and bsdtar's
//! `LIBARCHIVE.xattr.NAME=VALUE` (NAME %-encoded, VALUE base64). bsdtar writes both for every
//! attribute; a LIBARCHIVE record counts only where no SCHILY record of the header gives the
//! same name (GNU tar 1.34 ignores LIBARCHIVE records, with a warning we do not print).
//!
//! Memory and time: a member without attributes costs nothing (an empty `Vec`). One value is
//! kept up to `MAX_VALUE` bytes (the kernel's XATTR_SIZE_MAX: no filesystem takes more); a
//! member's records are charged `RECORD_COST` each plus their names and values against
//! `MAX_TOTAL`. An attribute whose value does not fit is kept as a name without a value,
//! which the writer reports as not restored; once the budget is spent, the next record is kept
//! that way and no later one at all. So one header holds at most MAX_TOTAL / RECORD_COST
//! (4,096) attributes however many records it has (ten million empty records once took
//! 560 MB), and the LIBARCHIVE/SCHILY check is a hash lookup per record (it was a scan of
//! every name: 100,000 records of each took 29 s).

/// The kernel's limit on one value (XATTR_SIZE_MAX).
pub const MAX_VALUE: usize = 64 * 1024;
/// A member's names and values together (ext4 keeps at most a 4 KiB block of them unless it
/// has `ea_inode`; tmpfs and XFS take more).
pub const MAX_TOTAL: usize = 256 * 1024;
/// What each kept record is charged besides its name and value: about its list entry and
/// the two allocations (56 bytes of entry and allocator overhead).
const RECORD_COST: usize = 64;
/// The longest record value kept while parsing: `MAX_VALUE` base64-encoded.
pub(super) const MAX_RECORD_VALUE: usize = MAX_VALUE.div_ceil(3) * 4;

const SCHILY: &[u8] = b"SCHILY.xattr.";
const LIBARCHIVE: &[u8] = b"LIBARCHIVE.xattr.";

/// The PAX keys of the two ACLs, kept as attributes under these names (metadata/acl.rs turns
/// them into the kernel's).
pub const ACL_ACCESS_KEY: &[u8] = b"SCHILY.acl.access";
pub const ACL_DEFAULT_KEY: &[u8] = b"SCHILY.acl.default";

/// Whether a kept PAX record (`Xattr` name) is an ACL rather than an attribute.
pub fn is_acl_record(name: &[u8]) -> bool {
    name == ACL_ACCESS_KEY || name == ACL_DEFAULT_KEY
}

/// One extended attribute of a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xattr {
    /// The full name, namespace included (`user.mime_type`).
    pub name: Vec<u8>,
    /// None: larger than `MAX_VALUE`, or past the member's `MAX_TOTAL`; not kept.
    pub value: Option<Vec<u8>>,
}

/// Bytes of names and values `xs` holds (what queues and deferred directories count).
pub fn held(xs: &[Xattr]) -> usize {
    xs.iter().map(|x| x.name.len() + x.value.as_ref().map_or(0, Vec::len)).sum()
}

/// The attributes one `x` header gives, in record order.
#[derive(Clone, Debug, Default)]
pub(super) struct Xattrs {
    /// Each with whether it came from a LIBARCHIVE record.
    list: Vec<(Xattr, bool)>,
    total: usize,
    /// The budget is spent: later records are not kept.
    full: bool,
}

/// Whether a PAX key is an extended attribute record, or an ACL record, which is
/// kept the same way under its own key as the name.
pub(super) fn is_key(key: &[u8]) -> bool {
    key.starts_with(SCHILY) || key.starts_with(LIBARCHIVE) || is_acl_record(key)
}

impl Xattrs {
    /// A whole record: `key` as `is_key` accepted it.
    pub(super) fn record(&mut self, key: &[u8], value: Vec<u8>) {
        let (name, value, libarchive) = if let Some(name) = key.strip_prefix(SCHILY) {
            (schily_decode(name), value, false)
        } else if is_acl_record(key) {
            (key.to_vec(), value, false)
        } else {
            let name = key.strip_prefix(LIBARCHIVE).unwrap_or(key);
            // A record that does not decode is passed over, as libarchive does.
            let (Some(name), Some(value)) = (percent_decode(name), base64_decode(&value)) else {
                return;
            };
            (name, value, true)
        };
        let value = (value.len() <= MAX_VALUE).then_some(value);
        self.keep(Xattr { name, value }, libarchive);
    }

    /// A record whose value was too large to be kept.
    pub(super) fn too_large(&mut self, key: &[u8]) {
        let name = match key.strip_prefix(SCHILY) {
            Some(name) => Some(schily_decode(name)),
            None if is_acl_record(key) => Some(key.to_vec()),
            None => percent_decode(key.strip_prefix(LIBARCHIVE).unwrap_or(key)),
        };
        if let Some(name) = name {
            self.keep(Xattr { name, value: None }, key.starts_with(LIBARCHIVE));
        }
    }

    /// Keeps `x` within the budget (see the module doc).
    fn keep(&mut self, mut x: Xattr, libarchive: bool) {
        if self.full {
            return;
        }
        let name_cost = RECORD_COST + x.name.len();
        let cost = name_cost + x.value.as_ref().map_or(0, Vec::len);
        if self.total + cost > MAX_TOTAL {
            x.value = None;
            if self.total + name_cost > MAX_TOTAL {
                // The last one kept, to be reported; the name is what a PAX key holds at most.
                self.full = true;
            }
        }
        self.total += RECORD_COST + x.name.len() + x.value.as_ref().map_or(0, Vec::len);
        self.list.push((x, libarchive));
    }

    /// The header has ended: LIBARCHIVE records that a SCHILY record names too are dropped.
    pub(super) fn finish(&mut self) {
        if !self.list.iter().any(|(_, libarchive)| *libarchive) {
            return;
        }
        let schily: std::collections::HashSet<Vec<u8>> =
            self.list.iter().filter(|(_, lib)| !lib).map(|(x, _)| x.name.clone()).collect();
        self.list.retain(|(x, libarchive)| !libarchive || !schily.contains(&x.name));
    }

    /// The attributes, in record order.
    pub(super) fn into_list(self) -> Vec<Xattr> {
        self.list.into_iter().map(|(x, _)| x).collect()
    }
}

/// The attribute a `SCHILY.xattr.NAME` key names, as GNU tar's `xattr_decode_keyword`: `%3D`
/// is `=` (which a PAX key cannot hold) and `%25` is `%`; nothing else is decoded (`%3d`,
/// `%41` stay as they are). GNU tar writes `user.=NAME%3D=` as `user.%3DNAME%253D%3D`.
fn schily_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match &s[i..] {
            [b'%', b'3', b'D', ..] => out.push(b'='),
            [b'%', b'2', b'5', ..] => out.push(b'%'),
            _ => {
                out.push(s[i]);
                i += 1;
                continue;
            }
        }
        i += 3;
    }
    out
}

/// libarchive's %-encoding of names (`%XX` for bytes it escapes); None when malformed.
fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Standard base64, `=` padding optional (libarchive writes none); None when malformed.
fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let s = s.strip_suffix(b"==").or_else(|| s.strip_suffix(b"=")).unwrap_or(s);
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs() {
        assert_eq!(base64_decode(b"YQBiCmM").unwrap(), b"a\0b\nc");
        assert_eq!(base64_decode(b"dmE").unwrap(), b"va");
        assert_eq!(base64_decode(b"dmE=").unwrap(), b"va");
        assert_eq!(base64_decode(b"").unwrap(), b"");
        assert_eq!(base64_decode(b"YWJj").unwrap(), b"abc");
        assert_eq!(base64_decode(b"YWJjZA").unwrap(), b"abcd");
        assert_eq!(base64_decode(b"Y"), None);
        assert_eq!(base64_decode(b"Y*==").map(|_| ()), None);
        assert_eq!(percent_decode(b"user.a%3Db%25").unwrap(), b"user.a=b%");
        assert_eq!(percent_decode(b"user.%3"), None);
        assert_eq!(percent_decode(b"user.%zz"), None);
        assert_eq!(schily_decode(b"user.%3DNAME%253D%3D"), b"user.=NAME%3D=");
        assert_eq!(schily_decode(b"user.%3d%41%2%"), b"user.%3d%41%2%");
        assert_eq!(schily_decode(b"user.%25%"), b"user.%%");
    }

    #[test]
    fn schily_wins_over_libarchive_and_caps_hold() {
        let mut x = Xattrs::default();
        x.record(b"LIBARCHIVE.xattr.user.dup", b"bGli".to_vec());
        x.record(b"LIBARCHIVE.xattr.user.only", b"bGli".to_vec());
        x.record(b"SCHILY.xattr.user.dup", b"schily".to_vec());
        x.record(b"SCHILY.xattr.user.big", vec![7; MAX_VALUE + 1]);
        x.too_large(b"SCHILY.xattr.user.huge");
        x.finish();
        let got = x.into_list();
        let names: Vec<_> = got.iter().map(|x| (x.name.as_slice(), x.value.as_deref())).collect();
        assert_eq!(
            names,
            [
                (&b"user.only"[..], Some(&b"lib"[..])),
                (b"user.dup", Some(b"schily")),
                (b"user.big", None),
                (b"user.huge", None),
            ]
        );
        let mut x = Xattrs::default();
        for i in 0..5 {
            x.record(format!("SCHILY.xattr.user.{i}").as_bytes(), vec![0; MAX_VALUE]);
        }
        let kept = x.into_list().iter().filter(|x| x.value.is_some()).count();
        assert_eq!(kept, MAX_TOTAL / (RECORD_COST + MAX_VALUE + 6));
    }

    /// Many records, empty or not, cost a bounded list and linear time: the reviewer's ten
    /// million empty records took 560 MB, 100,000 SCHILY and LIBARCHIVE records each 29 s.
    #[test]
    fn many_records_are_bounded() {
        let mut x = Xattrs::default();
        for _ in 0..1_000_000 {
            x.record(b"SCHILY.xattr.", Vec::new());
        }
        assert!(x.list.len() <= MAX_TOTAL / RECORD_COST + 1, "{}", x.list.len());
        assert!(x.list.last().unwrap().0.value.is_none(), "the last kept is reported");
        let t = std::time::Instant::now();
        let mut x = Xattrs::default();
        for i in 0..100_000 {
            x.record(format!("SCHILY.xattr.user.{i}").as_bytes(), b"v".to_vec());
            x.record(format!("LIBARCHIVE.xattr.user.{i}").as_bytes(), b"dg".to_vec());
        }
        x.finish();
        assert!(x.list.len() <= MAX_TOTAL / RECORD_COST + 1);
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
