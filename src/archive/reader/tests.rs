//! The reader's tests: archives built block by block (`header`, `rec`, `Ar`) and read back
//! in chunks of every size (`read_with`); the damaged ones in damaged.rs, sparse members in
//! sparse.rs.

mod damaged;
mod sparse;

use super::*;
use crate::archive::format::{self, BLOCK, Block, BlockCheck};
use crate::archive::{Kind, Timestamp};

const MTIME: u64 = 1_000_000;

fn fix_checksum(b: &mut Block) {
    b[148..156].fill(b' ');
    let sum: u32 = b.iter().map(|&x| u32::from(x)).sum();
    b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// A ustar header block (name at most 100 bytes, size below 8 GiB).
fn header(name: &[u8], flag: u8, size: u64) -> Block {
    let (size, mtime) = (format!("{size:011o}\0"), format!("{MTIME:011o}\0"));
    // (offset, value): name, mode, uid, gid, size, mtime, type flag, magic and version.
    let fields: [(usize, &[u8]); 8] = [
        (0, name),
        (100, b"0000644\0"),
        (108, b"0001750\0"),
        (116, b"0001751\0"),
        (124, size.as_bytes()),
        (136, mtime.as_bytes()),
        (156, &[flag]),
        (257, b"ustar\x0000"),
    ];
    let mut b = [0u8; BLOCK];
    for (at, value) in fields {
        b[at..at + value.len()].copy_from_slice(value);
    }
    fix_checksum(&mut b);
    b
}

/// `header`, changed by `f`, with the checksum fixed afterwards.
fn header_with(name: &[u8], flag: u8, size: u64, f: impl FnOnce(&mut Block)) -> Block {
    let mut b = header(name, flag, size);
    f(&mut b);
    fix_checksum(&mut b);
    b
}

/// One PAX record with its length right.
fn rec(key: &str, value: &[u8]) -> Vec<u8> {
    let body = [b" ", key.as_bytes(), b"=", value, b"\n"].concat();
    let len = (body.len()..).find(|n| n.to_string().len() + body.len() == *n).unwrap();
    [len.to_string().as_bytes(), &body].concat()
}

/// An archive under construction; `starts` records where each member's first header is,
/// `boundaries` other places where the archive may end (after a global header).
#[derive(Default)]
struct Ar {
    bytes: Vec<u8>,
    starts: Vec<u64>,
    boundaries: Vec<u64>,
}

impl Ar {
    fn new() -> Self {
        Ar::default()
    }
    /// Marks the start of a member (call before its first header).
    fn start(mut self) -> Self {
        self.starts.push(self.bytes.len() as u64);
        self
    }
    fn boundary(mut self) -> Self {
        self.boundaries.push(self.bytes.len() as u64);
        self
    }
    fn block(mut self, b: Block) -> Self {
        self.bytes.extend_from_slice(&b);
        self
    }
    fn data(mut self, d: &[u8]) -> Self {
        self.bytes.extend_from_slice(d);
        let pad = format::padded(d.len() as u64).unwrap() as usize - d.len();
        self.bytes.resize(self.bytes.len() + pad, 0);
        self
    }
    fn file(self, name: &str, content: &[u8]) -> Self {
        let h = header(name.as_bytes(), b'0', content.len() as u64);
        self.start().block(h).data(content)
    }
    fn pax(self, flag: u8, records: &[(&str, &[u8])]) -> Self {
        let data: Vec<u8> = records.iter().flat_map(|(k, v)| rec(k, v)).collect();
        self.block(header(b"PaxHeader/x", flag, data.len() as u64)).data(&data)
    }
    fn end(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0; 2 * BLOCK]);
        self.bytes
    }
}

struct Got {
    m: Member,
    chunks: Vec<(u64, Vec<u8>)>,
    /// The failures the reader met on the way to the member (`take_failures`).
    said: Vec<String>,
}

impl Got {
    /// The extracted file: chunks written at their offsets, holes as zeros.
    fn contents(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.m.size as usize];
        for (off, c) in &self.chunks {
            v[*off as usize..*off as usize + c.len()].copy_from_slice(c);
        }
        v
    }
    fn name(&self) -> String {
        self.m.display_name()
    }
}

/// Reads every member and its data with `chunk`-byte buffers. Stops at the end or at the
/// first error; the step count is bounded so a loop would fail the test.
fn read_with(archive: &[u8], chunk: usize) -> (Vec<Got>, Option<String>) {
    let mut r = Reader::new(archive);
    let mut buf = vec![0u8; chunk];
    let mut out = Vec::new();
    for _ in 0..archive.len() + 10 {
        match r.next_member() {
            Ok(None) => {
                assert!(r.next_member().unwrap().is_none(), "end is repeatable");
                assert_eq!(r.read_data(&mut buf).unwrap(), None);
                return (out, None);
            }
            Err(e) => {
                // Failures met on the way to the error: with the member before it, or
                // before the error when there is none.
                let said: Vec<String> =
                    r.take_failures().into_iter().map(|(w, s)| format!("{w}: {s}")).collect();
                let again = r.next_member().unwrap_err().to_string();
                assert_eq!(again, e.to_string(), "errors are sticky");
                assert!(r.read_data(&mut buf).is_err(), "errors are sticky");
                assert!(!e.to_string().contains('\n'), "one line: {e}");
                return match out.last_mut() {
                    Some(g) => {
                        g.said.extend(said);
                        (out, Some(e.to_string()))
                    }
                    None => (
                        out,
                        Some(
                            said.into_iter().chain([e.to_string()]).collect::<Vec<_>>().join("; "),
                        ),
                    ),
                };
            }
            Ok(Some(m)) => {
                let said = r.take_failures().into_iter().map(|(w, s)| format!("{w}: {s}"));
                let mut g = Got { m, chunks: Vec::new(), said: said.collect() };
                for _ in 0..archive.len() + 10 {
                    match r.read_data(&mut buf) {
                        Ok(Some((off, n))) => {
                            assert!(n > 0 && n <= chunk);
                            g.chunks.push((off, buf[..n].to_vec()));
                        }
                        Ok(None) => break,
                        Err(e) => {
                            out.push(g);
                            return (out, Some(e.to_string()));
                        }
                    }
                }
                out.push(g);
            }
        }
    }
    panic!("reader did not terminate");
}

fn read_ok(archive: &[u8]) -> Vec<Got> {
    let (got, err) = read_with(archive, 1 << 16);
    if let Some(e) = err {
        panic!("unexpected error: {e}");
    }
    let said: Vec<&String> = got.iter().flat_map(|g| &g.said).collect();
    assert!(said.is_empty(), "unexpected failures: {said:?}");
    // A tiny buffer gives the same result.
    let (small, err) = read_with(archive, 7);
    assert_eq!(err, None);
    assert_eq!(small.len(), got.len());
    for (a, b) in got.iter().zip(&small) {
        assert_eq!(a.contents(), b.contents(), "{}", a.name());
    }
    got
}

/// Reads `archive` to its end without a fatal error: the members, and every failure the
/// run goes on after (a malformed PAX header), as said.
fn read_said(archive: &[u8]) -> (Vec<Got>, Vec<String>) {
    let (got, err) = read_with(archive, 1 << 16);
    assert_eq!(err, None, "a fatal error");
    let said = got.iter().flat_map(|g| g.said.clone()).collect();
    (got, said)
}

fn read_err(archive: &[u8]) -> String {
    match read_with(archive, 1 << 16) {
        (_, Some(e)) => e,
        (got, None) => panic!("no error; read {} members", got.len()),
    }
}

#[test]
fn every_type_flag() {
    let mut ar = Ar::new().file("f0", b"hello");
    for (name, flag) in [
        ("nul", 0u8),
        ("contig", b'7'),
        ("hard", b'1'),
        ("sym", b'2'),
        ("chr", b'3'),
        ("blk", b'4'),
        ("dir/", b'5'),
        ("fifo", b'6'),
        ("label", b'V'),
        ("unknown", b'A'),
    ] {
        ar = ar.start().block(header_with(name.as_bytes(), flag, 0, |b| {
            b[157..163].copy_from_slice(b"target");
        }));
    }
    let ar = ar
        .start()
        .block(header(b"dumpdir", b'D', 12))
        .data(b"Ya\0Yb\0\0\0\0\0\0\0")
        .start()
        .block(header(b"multi", b'M', 3))
        .data(b"abc")
        .start()
        .block(header(b"old/dir/", b'0', 0))
        .end();
    let got = read_ok(&ar);
    let kinds: Vec<(String, Kind, u64)> =
        got.iter().map(|g| (g.name(), g.m.kind, g.m.size)).collect();
    let want = [
        ("f0", Kind::File, 5),
        ("nul", Kind::File, 0),
        ("contig", Kind::File, 0),
        ("hard", Kind::Hardlink, 0),
        ("sym", Kind::Symlink, 0),
        ("chr", Kind::CharDev, 0),
        ("blk", Kind::BlockDev, 0),
        ("dir/", Kind::Dir, 0),
        ("fifo", Kind::Fifo, 0),
        ("label", Kind::Other(b'V'), 0),
        ("unknown", Kind::Other(b'A'), 0),
        ("dumpdir", Kind::Dir, 0),
        ("multi", Kind::Other(b'M'), 3),
        ("old/dir/", Kind::Dir, 0),
    ];
    let want: Vec<(String, Kind, u64)> =
        want.iter().map(|(n, k, s)| (n.to_string(), *k, *s)).collect();
    assert_eq!(kinds, want);
    assert_eq!(got[0].contents(), b"hello");
    assert_eq!(got[3].m.link_name, b"target");
    assert_eq!(got[4].m.link_name, b"target");
    assert!(got[11].chunks.is_empty(), "dumpdir data is skipped");
    assert_eq!(got[12].contents(), b"abc");
    let m = &got[0].m;
    assert_eq!((m.mode, m.uid, m.gid), (0o644, 0o1750, 0o1751));
    assert_eq!(m.mtime, Timestamp { secs: MTIME as i64, nanos: 0 });
    assert_eq!(m.sparse, None);
}

#[test]
fn member_offsets_and_reader_offset() {
    let ar = Ar::new()
        .file("a", &[1; 600])
        .start()
        .pax(b'x', &[("path", b"b")])
        .block(header(b"ignored", b'0', 1))
        .data(b"x")
        .file("c", b"");
    let starts = ar.starts.clone();
    let bytes = ar.end();
    let mut r = Reader::new(&bytes[..]);
    let mut offs = Vec::new();
    while let Some(m) = r.next_member().unwrap() {
        offs.push(m.offset);
    }
    assert_eq!(offs, starts);
    assert_eq!(r.offset(), bytes.len() as u64);
    // Nothing after the end marker is read; the caller gets it back.
    let mut padded = bytes.clone();
    padded.extend_from_slice(b"trailing");
    let mut r = Reader::new(&padded[..]);
    while r.next_member().unwrap().is_some() {}
    assert_eq!(r.into_inner(), b"trailing");
}

#[test]
fn chunking() {
    let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let ar = Ar::new().file("f", &content).end();
    let (got, err) = read_with(&ar, 4096);
    assert_eq!(err, None);
    let offs: Vec<(u64, usize)> = got[0].chunks.iter().map(|(o, c)| (*o, c.len())).collect();
    assert_eq!(offs, [(0, 4096), (4096, 4096), (8192, 1808)]);
    assert_eq!(got[0].contents(), content);
}

#[test]
fn long_names_gnu() {
    let long100 = "d/".repeat(60) + "file";
    let long300 = "e".repeat(300);
    let target = "t/".repeat(200);
    let mut b = tar::Builder::new(Vec::new());
    for name in [&long100, &long300] {
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_mode(0o600);
        b.append_data(&mut h, name, &b"abc"[..]).unwrap();
    }
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "link", &target).unwrap();
    let bytes = b.into_inner().unwrap();
    let got = read_ok(&bytes);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].name(), long100);
    assert_eq!(got[1].name(), long300);
    assert_eq!(got[1].contents(), b"abc");
    assert_eq!(got[1].m.mode, 0o600);
    assert_eq!(got[2].name(), "link");
    assert_eq!(got[2].m.kind, Kind::Symlink);
    assert_eq!(String::from_utf8_lossy(&got[2].m.link_name), target);
    assert_eq!(got[0].m.offset, 0);
    assert!(got[1].m.offset > 1024);

    // Hand-built: L data without a trailing NUL, and a redundant L (the last one wins).
    let ar = Ar::new()
        .start()
        .block(header(b"././@LongLink", b'L', 5))
        .data(b"first")
        .block(header(b"././@LongLink", b'L', 7))
        .data(b"second\0")
        .block(header(b"././@LongLink", b'K', 3))
        .data(b"tgt")
        .block(header(b"short", b'1', 0))
        .end();
    let got = read_ok(&ar);
    assert_eq!(got[0].name(), "second");
    assert_eq!(got[0].m.link_name, b"tgt");
    assert_eq!(got[0].m.kind, Kind::Hardlink);
}

#[test]
fn long_names_pax_and_ustar_prefix() {
    let long = "p/".repeat(150) + "name";
    let ar = Ar::new()
        .start()
        .pax(b'x', &[("path", long.as_bytes()), ("linkpath", b"L".repeat(500).as_slice())])
        .block(header(b"truncated", b'2', 0))
        .start()
        .block(header_with(b"name", b'0', 0, |b| b[345..348].copy_from_slice(b"pre")))
        // GNU magic: the prefix field is not a prefix.
        .start()
        .block(header_with(b"gnu", b'0', 0, |b| {
            b[257..265].copy_from_slice(b"ustar  \0");
            b[345..348].copy_from_slice(b"pre");
        }))
        // PAX path wins over a GNU long name.
        .start()
        .pax(b'x', &[("path", b"from-pax")])
        .block(header(b"././@LongLink", b'L', 6))
        .data(b"from-L")
        .block(header(b"hdr", b'0', 0))
        // An empty PAX path is an empty name, as for GNU tar 1.34 and Go.
        .start()
        .pax(b'x', &[("path", b"")])
        .block(header(b"p3", b'0', 0))
        .end();
    let got = read_ok(&ar);
    let names: Vec<String> = got.iter().map(Got::name).collect();
    assert_eq!(names, [long.as_str(), "pre/name", "gnu", "from-pax", ""]);
    assert_eq!(got[0].m.link_name, b"L".repeat(500));
    // tar crate PAX extensions.
    let mut b = tar::Builder::new(Vec::new());
    b.append_pax_extensions([("path", long.as_bytes())]).unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_size(2);
    h.set_path("short").unwrap();
    h.set_cksum();
    b.append(&h, &b"hi"[..]).unwrap();
    let got = read_ok(&b.into_inner().unwrap());
    assert_eq!(got[0].name(), long);
    assert_eq!(got[0].contents(), b"hi");
}

#[test]
fn pax_overrides_and_globals() {
    let ar = Ar::new()
        .start()
        .pax(b'g', &[("mtime", b"5.25"), ("uid", b"77"), ("comment", b"x")])
        .block(header(b"a", b'0', 0))
        // Local beats global.
        .start()
        .pax(b'x', &[("mtime", b"-1.5"), ("uid", b"0"), ("gid", b"4294967295")])
        .block(header(b"b", b'0', 0))
        .file("c", b"")
        // A later global header replaces the whole set, as in GNU tar: uid is 8, and the
        // mtime is the header's again.
        .start()
        .pax(b'g', &[("uid", b"8")])
        .pax(b'x', &[("size", b"3"), ("mtime", b"1700000000.123456789123")])
        .block(header(b"d", b'0', 0))
        .data(b"xyz")
        .file("e", b"")
        // One that sets nothing clears the set.
        .start()
        .pax(b'g', &[("comment", b"reset")])
        .file("f", b"")
        .end();
    let got = read_ok(&ar);
    let t = |g: &Got| (g.m.mtime.secs, g.m.mtime.nanos, g.m.uid, g.m.gid);
    let header_time = 1_000_000;
    assert_eq!(t(&got[0]), (5, 250_000_000, 77, 0o1751));
    assert_eq!(t(&got[1]), (-2, 500_000_000, 0, u64::from(u32::MAX)));
    assert_eq!(t(&got[2]), (5, 250_000_000, 77, 0o1751));
    assert_eq!(t(&got[3]), (1_700_000_000, 123_456_789, 8, 0o1751));
    assert_eq!(t(&got[4]), (header_time, 0, 8, 0o1751));
    assert_eq!(t(&got[5]), (header_time, 0, 0o1750, 0o1751));
    assert_eq!(got[3].contents(), b"xyz");
    assert_eq!(got[3].m.offset, got[2].m.offset + 512);
}

/// A resumed run's reader begins at a member boundary, from an earlier unit's start, with
/// the archive's own offsets; a PAX global value or a volume label is carried across every
/// boundary after it, so none of those may be resumed at.
#[test]
fn resumed_at_a_member_boundary() {
    let ar = Ar::new().file("a", b"one").file("b", &[7; 700]).file("c", b"three").end();
    let plain = read_ok(&ar);
    let c = plain[2].m.offset;
    let none = Globals::default();
    for from in [0, plain[1].m.offset, c] {
        let mut r = Reader::resume(&ar[from as usize..], c, from, &none).unwrap();
        let m = r.next_member().unwrap().unwrap();
        assert_eq!((m.name.as_slice(), m.offset), (&b"c"[..], c), "from {from}");
        assert_eq!(r.carried(), Some(&none));
    }
    assert!(Reader::resume(&ar[..], c + 1, 0, &none).is_err(), "not a block boundary");
    assert!(Reader::resume(&ar[..], 512, 1024, &none).is_err(), "before its unit");
    assert!(Reader::resume(&ar[..], 100 * 512, 0, &none).is_err(), "past the end");
}

/// PAX global headers apply to every member after them: a reader resumed past them reads
/// the carried ones again and returns the members an uninterrupted reader returns. Each
/// replaces the whole set (GNU tar), so what is carried is the header that last set the
/// volume label and the last one, when it set a value or cleared what was set; one that
/// changes nothing (`git archive`'s comment) is not carried; more than GLOBALS_MAX of
/// them leave no resume point.
#[test]
fn globals_are_carried_to_a_resumed_reader() {
    let ar = Ar::new()
        .start()
        .pax(b'g', &[("comment", &b"0123abcd"[..])])
        .pax(b'g', &[("uid", &b"8"[..]), ("uname", &b"eight"[..]), ("mtime", &b"1600000000.5"[..])])
        .file("a", b"one")
        .pax(b'g', &[("GNU.volume.label", &b"vol"[..]), ("uid", &b"9"[..])])
        .file("b", &[7; 700])
        .pax(b'g', &[("comment", &b"reset"[..])])
        .file("c", b"three")
        .pax(b'g', &[("gid", &b"10"[..])])
        .file("d", b"four")
        .pax(b'g', &[("comment", &b"again"[..])])
        .pax(b'g', &[("comment", &b"nothing to clear"[..])])
        .file("e", b"five")
        .end();
    let whole = read_ok(&ar);
    let mut r = Reader::new(&ar[..]);
    let mut carried = Vec::new();
    while let Some(m) = r.next_member().unwrap() {
        carried.push((m.offset, r.carried().cloned().unwrap()));
    }
    let kept = |i: usize| {
        let g: &Globals = &carried[i].1;
        g.headers
            .iter()
            .map(|h| String::from_utf8_lossy(&h.records).into_owned())
            .collect::<Vec<String>>()
    };
    let text = |k: &str, v: &str| String::from_utf8(rec(k, v.as_bytes())).unwrap();
    let label = text("GNU.volume.label", "vol") + &text("uid", "9");
    let reset = text("comment", "reset");
    let again = text("comment", "again");
    assert_eq!(
        kept(0),
        [text("uid", "8") + &text("uname", "eight") + &text("mtime", "1600000000.5")]
    );
    assert_eq!(kept(1), std::slice::from_ref(&label));
    assert_eq!(kept(2), [label.clone(), reset]);
    assert_eq!(kept(3), [label.clone(), text("gid", "10")]);
    assert_eq!(kept(4), [label, again]);
    // What the headers gave each member: a replaced set, the label kept.
    let ids: Vec<(u64, u64)> = whole.iter().map(|g| (g.m.uid, g.m.gid)).collect();
    assert_eq!(ids, [(8, 0o1751), (9, 0o1751), (0o1750, 0o1751), (0o1750, 10), (0o1750, 0o1751)]);
    for (i, (at, globals)) in carried.iter().enumerate() {
        let mut r = Reader::resume(&ar[*at as usize..], *at, *at, globals).unwrap();
        let mut rest = vec![r.next_member().unwrap().unwrap()];
        // The label is the carried one from the first member on (`-v`'s lines show it).
        let label = r.volume_label().map(|(l, t)| (l.to_vec(), t));
        assert_eq!(label, (i > 0).then(|| (b"vol".to_vec(), 1_000_000)), "at member {i}");
        while let Some(m) = r.next_member().unwrap() {
            rest.push(m);
        }
        // Every field a carried header may set, and the offsets.
        let seen = |m: &Member| format!("{m:?}");
        let want: Vec<_> = whole[i..].iter().map(|e| seen(&e.m)).collect();
        assert_eq!(rest.iter().map(seen).collect::<Vec<_>>(), want, "resumed at member {i}");
    }
    // A carried header the parser refuses (a forged state): an error, not a guess. One it
    // finds malformed is read as the interrupted run read it (the records before the
    // malformed one), which said so then.
    let records = rec("path", &vec![b'p'; pax::MAX_NAME_VALUE + 1]);
    let bad = Globals { headers: vec![GlobalHeader { mtime: 0, records }] };
    assert!(Reader::resume(&ar[..], 0, 0, &bad).is_err());
    let records = [rec("uid", b"7"), b"9 uid=8".to_vec()].concat();
    let cut = Globals { headers: vec![GlobalHeader { mtime: 0, records }] };
    let plain = Ar::new().file("z", b"").end();
    let mut r = Reader::resume(&plain[..], 0, 0, &cut).unwrap();
    assert_eq!(r.next_member().unwrap().unwrap().uid, 7);
    assert!(r.take_failures().is_empty());
    // Past GLOBALS_MAX: nothing can be carried; a large one that sets nothing is no bar.
    let big = vec![b'x'; GLOBALS_MAX];
    for (key, carried) in [("path", false), ("comment", true)] {
        let ar = Ar::new().start().pax(b'g', &[(key, &big[..])]).file("a", b"").end();
        let mut r = Reader::new(&ar[..]);
        r.next_member().unwrap();
        assert_eq!(r.carried().is_some(), carried, "{key}");
    }
}

#[test]
fn hard_link_data() {
    // A hard link declaring data that is present (pax allows it): skipped.
    let ar = Ar::new()
        .file("a", b"data")
        .start()
        .block(header_with(b"h", b'1', 600, |b| b[157] = b'a'))
        .data(&[b'X'; 600])
        .file("b", b"bee")
        .end();
    let got = read_ok(&ar);
    let names: Vec<String> = got.iter().map(Got::name).collect();
    assert_eq!(names, ["a", "h", "b"]);
    assert_eq!(got[1].m.size, 0);
    assert!(got[1].chunks.is_empty());
    assert_eq!(got[2].contents(), b"bee");
    // A size but no data (old writers): the next block is a header, so nothing is skipped.
    let ar = Ar::new()
        .file("a", b"data")
        .start()
        .block(header_with(b"h", b'1', 600, |b| b[157] = b'a'))
        .file("b", b"bee")
        .end();
    let names: Vec<String> = read_ok(&ar).iter().map(Got::name).collect();
    assert_eq!(names, ["a", "h", "b"]);
    // Likewise at the very end of an archive without end blocks.
    let ar =
        Ar::new().file("a", b"data").block(header_with(b"h", b'1', 600, |b| b[157] = b'a')).bytes;
    assert_eq!(read_ok(&ar).len(), 2);
    // Directories and symlinks with data are handled the same way.
    let ar = Ar::new()
        .block(header(b"d/", b'5', 10))
        .data(b"0123456789")
        .block(header(b"s", b'2', 1))
        .block(header(b"f", b'0', 0))
        .end();
    let names: Vec<String> = read_ok(&ar).iter().map(Got::name).collect();
    assert_eq!(names, ["d/", "s", "f"]);
    // An old-style directory (regular type, trailing slash) declaring a size it does not
    // store (libarchive's test_compat_tar_directory_1.tar); and one that does store it.
    let ar = Ar::new()
        .block(header(b"directory1/", 0, 1))
        .block(header(b"directory2/", 0, 3))
        .data(b"xyz")
        .block(header(b"f", b'0', 0))
        .end();
    let got = read_ok(&ar);
    let kinds: Vec<(String, Kind)> = got.iter().map(|g| (g.name(), g.m.kind)).collect();
    let want = [("directory1/", Kind::Dir), ("directory2/", Kind::Dir), ("f", Kind::File)];
    assert_eq!(kinds, want.map(|(n, k)| (n.to_string(), k)));
}

/// Several members of every kind the reader has to parse, and where each begins.
fn mixed_archive() -> Ar {
    let mut ar = Ar::new()
        .file("plain", &[1; 700])
        .start()
        .block(header(b"././@LongLink", b'L', 200))
        .data(&[b'n'; 200])
        .block(header(b"short", b'0', 3))
        .data(b"abc")
        .start()
        .pax(b'g', &[("uid", b"5")])
        .boundary()
        .pax(b'x', &[("path", b"pax/name"), ("mtime", b"1.5")])
        .block(header(b"p", b'0', 1024))
        .data(&[2; 1024])
        .start();
    ar.bytes.extend(pax_v1_sparse("sparse1", 100_000, &[(0, 600), (50_000, 10), (100_000, 0)]));
    ar = ar.start();
    let segs: Vec<(u64, u64)> = (0..30).map(|i| (i * 3, 1)).collect();
    ar.bytes.extend(old_gnu_sparse("sparse0", 100, &segs));
    ar.start()
        .block(header_with(b"link", b'1', 0, |b| b[157] = b'p'))
        .start()
        .block(header(b"dir/", b'5', 0))
        .file("last", b"end")
}

/// Data skipped in place (a source that can, as the frame-parallel decoder can for a
/// worker's frames) reads the same members as data read into the scratch buffer, and an
/// in-place skip past the end is an error like a short read.
#[test]
fn skipping_in_place() {
    /// Skips in place on every other call, at most 700 bytes at a time.
    struct InPlace<'a> {
        data: &'a [u8],
        calls: usize,
    }
    impl Read for InPlace<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.data.read(buf)
        }
    }
    impl Skip for InPlace<'_> {
        fn skip_in_place(&mut self, n: u64) -> io::Result<u64> {
            self.calls += 1;
            if self.calls.is_multiple_of(2) {
                return Ok(0);
            }
            let k = (n as usize).min(700).min(self.data.len());
            self.data = &self.data[k..];
            Ok(k as u64)
        }
    }
    let ar = mixed_archive().end();
    fn names<R: Skip>(r: &mut Reader<R>) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        while let Some(m) = r.next_member().unwrap() {
            v.push((m.display_name(), r.offset()));
        }
        v
    }
    let mut plain = Reader::new(&ar[..]);
    let mut in_place = Reader::new(InPlace { data: &ar, calls: 0 });
    let want = names(&mut plain);
    assert_eq!(names(&mut in_place), want);
    assert!(in_place.into_inner().calls > 4, "skipped in place");
    // Data cut short inside a member that is skipped.
    let data_of_p = ar.windows(1024).position(|w| w == [2; 1024]).unwrap();
    let cut = &ar[..data_of_p + 100];
    let mut r = Reader::new(InPlace { data: cut, calls: 0 });
    fn first_error<R: Skip>(r: &mut Reader<R>) -> String {
        loop {
            match r.next_member() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error"),
                Err(e) => return e.to_string(),
            }
        }
    }
    assert_eq!(first_error(&mut r), first_error(&mut Reader::new(cut)));
}

#[test]
fn peer_corpus() {
    let dir = std::path::Path::new("/work/shared/corpus/peer");
    if !dir.is_dir() {
        eprintln!("skipping peer_corpus: {} is missing", dir.display());
        return;
    }
    // Archives GNU tar 1.34 fails on, and what this reader says: the error that ends it,
    // or a failure it reads on after (GNU tar's "Malformed extended header" lines).
    const GNU_FAILS: &[(&str, &str)] = &[
        ("test_read_format_gtar_sparse_1_17_posix10_modified.tar", "malformed sparse map"),
        ("test_read_format_tar_V_negative_size.tar", "bad size field (out of range)"),
        ("test_read_format_tar_acl_oob_read.tar", "Malformed extended header: missing newline"),
        ("test_read_format_tar_invalid_pax_size.tar", "size=-19769411113659727436 is out of"),
        ("test_read_format_tar_pax_g_large.tar", "unexpected end of archive"),
        ("test_read_pax_empty_val_no_nl.tar", "Malformed extended header: missing newline"),
    ];
    // GNU tar fails on these for reasons outside the reader (member names with "..").
    const FAILS_AFTER_READING: &[&str] = &["test_patterns_4.tar"];

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("tar" | "pax")))
        .collect();
    entries.sort();
    assert!(!entries.is_empty());
    for path in entries {
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let gnu_fails = readme.contains(&format!("| `{file}` | fails |"));
        let expected = GNU_FAILS.iter().find(|(f, _)| *f == file).map(|(_, e)| *e);
        assert_eq!(
            gnu_fails,
            expected.is_some() || FAILS_AFTER_READING.contains(&file.as_str()),
            "{file}: README verdict not reflected here"
        );
        let bytes = std::fs::read(&path).unwrap();
        let (got, err) = read_with(&bytes, 1 << 16);
        for g in &got {
            let read: usize = g.chunks.iter().map(|c| c.1.len()).sum();
            println!(
                "{file}: {:?} {} size={} read={read} sparse={:?}",
                g.m.kind,
                g.name(),
                g.m.size,
                g.m.sparse.as_ref().map(Vec::len)
            );
        }
        let said: Vec<String> = got.iter().flat_map(|g| g.said.clone()).collect();
        match (expected, err) {
            (None, None) => assert!(said.is_empty(), "{file}: GNU tar reads it: {said:?}"),
            (None, Some(e)) => panic!("{file}: GNU tar reads it, we fail: {e}"),
            (Some(want), e) => {
                let all: Vec<&String> = said.iter().chain(&e).collect();
                assert!(all.iter().any(|l| l.contains(want)), "{file}: {all:?}");
            }
        }
    }
    // Spot checks of the sparse formats against what GNU tar extracts.
    let members = |f: &str| read_with(&std::fs::read(dir.join(f)).unwrap(), 1 << 16).0;
    for f in [
        "test_read_format_gtar_sparse_1_13.tar",
        "test_read_format_gtar_sparse_1_17.tar",
        "test_read_format_gtar_sparse_1_17_posix00.tar",
        "test_read_format_gtar_sparse_1_17_posix01.tar",
        "test_read_format_gtar_sparse_1_17_posix10.tar",
    ] {
        let got = members(f);
        let summary: Vec<(String, u64, usize)> = got
            .iter()
            .map(|g| (g.name(), g.m.size, g.m.sparse.as_ref().map_or(0, Vec::len)))
            .collect();
        assert_eq!(summary[0].0, "sparse", "{f}");
        assert_eq!(summary[0].1, 3_145_728, "{f}");
        assert_eq!(summary[1].0, "sparse2", "{f}");
        assert_eq!(summary[1].1, 99_000_001, "{f}");
        assert_eq!(summary[1].2, 99, "{f}");
        assert_eq!(summary[2], ("non-sparse".to_string(), 0, 0), "{f}");
    }
    let got = members("test_read_format_tar_pax_negative_time.tar");
    assert_eq!(got[0].m.mtime, Timestamp { secs: -2_146_608_000, nanos: 0 });
    let got = members("test_compat_solaris_pax_sparse_1.pax");
    assert_eq!((got[0].m.size, got[0].m.sparse.is_none()), (819_207, true));
}

/// Old GNU sparse header: four entries in the header, then 21 per extension block.
fn old_gnu_sparse(name: &str, realsize: u64, segs: &[(u64, u64)]) -> Vec<u8> {
    let stored: u64 = segs.iter().map(|s| s.1).sum();
    let entry = |b: &mut [u8], (o, n): (u64, u64)| {
        b[..12].copy_from_slice(format!("{o:011o}\0").as_bytes());
        b[12..24].copy_from_slice(format!("{n:011o}\0").as_bytes());
    };
    let (head, rest) = segs.split_at(segs.len().min(4));
    let h = header_with(name.as_bytes(), b'S', stored, |b| {
        b[257..265].copy_from_slice(b"ustar  \0");
        for (i, &s) in head.iter().enumerate() {
            entry(&mut b[386 + 24 * i..], s);
        }
        b[482] = u8::from(!rest.is_empty());
        b[483..495].copy_from_slice(format!("{realsize:011o}\0").as_bytes());
    });
    let mut out = h.to_vec();
    let chunks: Vec<&[(u64, u64)]> = rest.chunks(format::SPARSES_IN_EXTENSION).collect();
    for (i, c) in chunks.iter().enumerate() {
        let mut x = [0u8; BLOCK];
        for (j, &s) in c.iter().enumerate() {
            entry(&mut x[24 * j..], s);
        }
        x[504] = u8::from(i + 1 < chunks.len());
        out.extend_from_slice(&x);
    }
    let data: Vec<u8> = (0..stored).map(|i| (i % 253) as u8 + 1).collect();
    out.extend(Ar::new().data(&data).bytes);
    out
}

fn pax_v1_sparse(name: &str, realsize: u64, segs: &[(u64, u64)]) -> Vec<u8> {
    let mut map = format!("{}\n", segs.len());
    for (o, n) in segs {
        map += &format!("{o}\n{n}\n");
    }
    let map = Ar::new().data(map.as_bytes()).bytes;
    let stored: u64 = segs.iter().map(|s| s.1).sum();
    let data: Vec<u8> = (0..stored).map(|i| (i % 253) as u8 + 1).collect();
    let real = realsize.to_string();
    let mut ar = Ar::new()
        .pax(
            b'x',
            &[
                ("GNU.sparse.major", b"1"),
                ("GNU.sparse.minor", b"0"),
                ("GNU.sparse.name", name.as_bytes()),
                ("GNU.sparse.realsize", real.as_bytes()),
            ],
        )
        .block(header(b"GNUSparseFile.0/x", b'0', map.len() as u64 + stored));
    ar.bytes.extend(map);
    ar.data(&data).bytes
}
