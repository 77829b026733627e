//! Damaged input: bad numbers and checksums, data and archives cut short at every block
//! edge, random and mutated bytes, read errors; each a clean, sticky error, never a panic.

use super::*;

#[test]
fn base256_and_bad_sizes() {
    // A 10-byte file whose size is written in base-256.
    let ar = Ar::new()
        .start()
        .block(header_with(b"big", b'0', 0, |b| {
            b[124..136].copy_from_slice(b"\x80\0\0\0\0\0\0\0\0\0\0\x0a");
            b[136..148].copy_from_slice(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xfe");
            b[108..116].copy_from_slice(b"\x80\0\0\0\xff\xff\xff\xfe");
        }))
        .data(b"0123456789")
        .end();
    let got = read_ok(&ar);
    assert_eq!(got[0].contents(), b"0123456789");
    assert_eq!(got[0].m.mtime.secs, -2);
    assert_eq!(got[0].m.uid, 0xffff_fffe);

    let cases: &[(Block, &str)] = &[
        (
            header_with(b"neg", b'0', 0, |b| b[124..136].fill(0xff)),
            "neg: negative size (archive offset 0)",
        ),
        (
            header_with(b"huge", b'0', 0, |b| {
                b[124..136].copy_from_slice(b"\x80\0\0\0\x80\0\0\0\0\0\0\0")
            }),
            "huge: bad size field (out of range) (archive offset 0)",
        ),
        (
            header_with(b"garbage", b'0', 0, |b| b[124..136].copy_from_slice(b"0000000001x\0")),
            "garbage: bad size field (not a number)",
        ),
        (
            header_with(b"blank", b'0', 0, |b| b[124..136].fill(b' ')),
            "blank: bad size field (blank)",
        ),
        (
            header_with(b"mode", b'0', 0, |b| b[100..108].copy_from_slice(b"0030816\0")),
            "mode: bad mode field",
        ),
        (header_with(b"neguid", b'0', 0, |b| b[108..116].fill(0xff)), "neguid: negative uid"),
    ];
    for (h, want) in cases {
        let bytes = Ar::new().block(*h).end();
        let e = read_err(&bytes);
        assert!(e.contains(want), "{e}");
    }
    // PAX size beyond 2^63, negative, not a number: said (GNU tar's words), the record
    // ignored, the header's size read.
    for (v, want) in [
        (&b"9223372036854775808"[..], "Extended header size=9223372036854775808 is out of range"),
        (b"-1", "Extended header size=-1 is out of range 0..9223372036854775807"),
        (b"1e3", "Malformed extended header: invalid size=1e3"),
    ] {
        let bytes = Ar::new().pax(b'x', &[("size", v)]).file("f", b"ab").end();
        let (got, said) = read_said(&bytes);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("archive offset 0: "), "{said:?}");
        assert!(said[0].contains(want), "{said:?}");
        assert_eq!(got[0].contents(), b"ab");
    }
}

#[test]
fn data_shorter_than_declared() {
    let mut ar = Ar::new().file("ok", b"x").file("short", &[7; 5000]).end();
    ar.truncate(512 * 2 + 512 + 3000);
    let (got, err) = read_with(&ar, 1024);
    assert_eq!(got.len(), 2);
    assert_eq!(err.unwrap(), "short: unexpected end of archive (archive offset 4536)");
    // What arrived is handed on, the last chunk short (GNU tar writes it too), and the
    // error comes with the next call; `check` has it from then on.
    let lens: Vec<usize> = got[1].chunks.iter().map(|c| c.1.len()).collect();
    assert_eq!(lens, [1024, 1024, 952]);
    assert!(got[1].chunks.iter().all(|c| c.1.iter().all(|&b| b == 7)));
    let mut r = Reader::new(&ar[..]);
    r.next_member().unwrap();
    r.next_member().unwrap();
    let mut buf = vec![0; 4096];
    assert_eq!(r.read_data(&mut buf).unwrap(), Some((0, 3000)));
    let e = r.check().unwrap_err().to_string();
    assert_eq!(e, "short: unexpected end of archive (archive offset 4536)");
    assert_eq!(r.read_data(&mut buf).unwrap_err().to_string(), e);
    // Also when the data is skipped rather than read.
    let mut r = Reader::new(&ar[..]);
    r.next_member().unwrap();
    r.next_member().unwrap();
    let e = r.next_member().unwrap_err().to_string();
    assert_eq!(e, "short: unexpected end of archive (archive offset 4536)");
}

#[test]
fn checksums_and_not_tar() {
    let text = b"this is not a tar archive, just some text\n".repeat(30);
    let e = read_err(&text);
    assert_eq!(e, "archive offset 0: not a tar archive (bad header checksum)");
    let mut lz = b"LZIP\x01".to_vec();
    lz.resize(2048, 7);
    assert_eq!(
        read_err(&lz),
        "archive offset 0: not a tar archive: it starts like lzip-compressed data, which \
         fastuntar does not read, but --lzip reads it through lzip -d"
    );
    let mut zip = b"PK\x03\x04".to_vec();
    zip.resize(105, 0);
    assert_eq!(
        read_err(&zip),
        "archive offset 0: not a tar archive: it starts like a zip archive, which fastuntar \
         does not read"
    );
    assert_eq!(read_err(b"hello\n"), "archive offset 0: not a tar archive (only 6 bytes)");
    assert_eq!(read_err(b""), "archive offset 0: not a tar archive (empty input)");
    let mut ar = Ar::new().file("foo", b"abc").file("bar", b"").end();
    ar[1024 + 10] ^= 1;
    assert_eq!(read_err(&ar), "archive offset 1024 (after 'foo'): bad header checksum");
    // The historical signed checksum is accepted.
    let mut h = header(b"\xe9t\xe9", b'0', 0);
    h[148..156].fill(b' ');
    let signed: i32 = h.iter().map(|&x| i32::from(x as i8)).sum();
    h[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
    let got = read_ok(&Ar::new().block(h).end());
    assert_eq!(got[0].m.name, b"\xe9t\xe9");
}

#[test]
fn pax_errors() {
    let bad_len = Ar::new()
        .file("first", b"")
        .block(header(b"PaxHeader/x", b'x', 11))
        .data(b"99 path=ab\n")
        .block(header(b"f", b'0', 0))
        .end();
    // Malformed: said, and the member read from its own header, as GNU tar does.
    let (got, said) = read_said(&bad_len);
    assert_eq!(
        said,
        ["archive offset 512 (after 'first'): Extended header length 99 is out of range"]
    );
    assert_eq!(got[1].name(), "f");
    // The records before a malformed one stand; a `g` header the same.
    let partial = Ar::new()
        .start()
        .pax(b'g', &[("uid", b"3")])
        .data(b"")
        .block(header(b"PaxHeader/x", b'x', 40))
        .data(b"17 path=from-pax\n11 path=bad\x0012 gid=99\n")
        .block(header(b"h", b'0', 0))
        .end();
    let (got, said) = read_said(&partial);
    assert_eq!(said, ["archive offset 1024: Malformed extended header: missing newline"]);
    assert_eq!((got[0].name(), got[0].m.uid, got[0].m.gid), ("from-pax".into(), 3, 0o1751));
    // Huge records that are skipped are fine (libarchive's pax_large_attr has 8 MB).
    let big = vec![b'a'; 3 << 20];
    let ar = Ar::new()
        .start()
        .pax(b'x', &[("SCHILY.xattr.user.big", &big), ("path", b"p")])
        .block(header(b"f", b'0', 0))
        .end();
    assert_eq!(read_ok(&ar)[0].name(), "p");
    // A kept value over its cap is an error.
    let long = vec![b'a'; pax::MAX_NAME_VALUE + 1];
    let ar = Ar::new().pax(b'x', &[("path", &long)]).block(header(b"f", b'0', 0)).end();
    assert!(read_err(&ar).contains("path value too long"));
}

#[test]
fn oversized_long_name() {
    let ar = Ar::new()
        .file("before", b"")
        .block(header(b"././@LongLink", b'L', MAX_LONG_NAME + 1))
        .end();
    assert_eq!(
        read_err(&ar),
        format!(
            "archive offset 512 (after 'before'): GNU long name of {} bytes (limit {MAX_LONG_NAME})",
            MAX_LONG_NAME + 1
        )
    );
    let ar = Ar::new().block(header(b"././@LongLink", b'K', 0o77777777777)).end();
    assert!(read_err(&ar).contains("GNU long link name of"));
}

#[test]
fn end_of_archive_variants() {
    let one = Ar::new().file("a", b"1").end();
    let body = &one[..1024];
    // Two zero blocks, trailing garbage after them not read.
    let mut with_garbage = one.clone();
    with_garbage.extend_from_slice(b"garbage after the end");
    // (archive, members, offset at the end)
    let cases: Vec<(Vec<u8>, usize, u64)> = vec![
        (one.clone(), 1, 2048),
        (with_garbage, 1, 2048),
        (body.to_vec(), 1, 1024),
        ([body, &[0u8; 512][..]].concat(), 1, 1536),
        ([body, &[0u8; 100][..]].concat(), 1, 1124),
        ([body, &[0u8; 700][..]].concat(), 1, 1724),
        // A lone zero block followed by something else: GNU tar warns and stops.
        ([body, &[0u8; 512][..], &header(b"b", b'0', 0)[..]].concat(), 1, 2048),
        (vec![0u8; 1024], 0, 1024),
        (vec![0u8; 10240], 0, 1024),
        (vec![0u8; 512], 0, 512),
    ];
    for (i, (ar, n, end)) in cases.iter().enumerate() {
        let mut r = Reader::new(&ar[..]);
        let mut count = 0;
        while r.next_member().unwrap().is_some() {
            count += 1;
        }
        assert_eq!((count, r.offset()), (*n, *end), "case {i}");
    }
    // Truncated non-zero block where a header would start.
    let cut = [body, &header(b"b", b'0', 0)[..100]].concat();
    assert_eq!(read_err(&cut), "archive offset 1124 (after 'a'): unexpected end of archive");
    // Extension headers with nothing after them.
    let dangling = Ar::new().pax(b'x', &[("path", b"p")]).bytes;
    assert!(read_err(&dangling).contains("end of archive after an extended header"));
    let dangling = Ar::new().pax(b'x', &[("path", b"p")]).end();
    assert!(read_err(&dangling).contains("end of archive after an extended header"));
    // A global header alone is fine.
    assert!(read_ok(&Ar::new().pax(b'g', &[("mtime", b"1")]).end()).is_empty());
}

#[test]
fn read_truncation() {
    let ar = mixed_archive();
    let starts = ar.starts.clone();
    let boundaries = ar.boundaries.clone();
    let end_at = ar.bytes.len();
    let full = ar.end();
    assert_eq!(read_ok(&full).len(), starts.len());
    let mut cuts: Vec<usize> = Vec::new();
    for edge in (0..=full.len()).step_by(BLOCK) {
        for delta in [0usize, 1, 100, 511] {
            if edge + delta <= full.len() {
                cuts.push(edge + delta);
            }
        }
    }
    for cut in cuts {
        let (got, err) = read_with(&full[..cut], 333);
        let at_member_start =
            cut > 0 && (starts.contains(&(cut as u64)) || boundaries.contains(&(cut as u64)));
        let in_end_blocks = cut >= end_at;
        match err {
            None => {
                assert!(at_member_start || in_end_blocks, "cut {cut} read without error");
                // Members that end at or before the cut.
                let ends = starts.iter().skip(1).copied().chain([end_at as u64]);
                let complete = ends.filter(|&e| e <= cut as u64).count();
                assert_eq!(got.len(), complete, "cut {cut}");
            }
            Some(e) => {
                assert!(!in_end_blocks && !at_member_start, "cut {cut}: {e}");
                assert!(
                    e.contains("unexpected end of archive") || e.contains("not a tar archive"),
                    "cut {cut}: {e}"
                );
                assert!(
                    e.contains(&format!("archive offset {}", cut)) || cut < BLOCK,
                    "cut {cut}: {e}"
                );
            }
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for len in [0usize, 1, 100, 511, 512, 513, 1024, 1536, 4096, 10_000, 100_000] {
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let (_, err) = read_with(&bytes, 1000);
            assert!(err.is_some(), "random input of {len} bytes read as an archive");
        }
    }
    // A valid header in front of random data: deeper paths, still no panic.
    for flag in [b'0', b'x', b'g', b'L', b'S', b'1'] {
        for _ in 0..20 {
            let size = rng.next() % 5000;
            let mut bytes = header(b"r", flag, size).to_vec();
            bytes.extend((0..rng.next() % 6000).map(|_| rng.next() as u8));
            read_with(&bytes, 512);
        }
    }
}

#[test]
fn mutated_archives_never_panic() {
    let ar = mixed_archive();
    let full = ar.end();
    // Blocks that are headers in the original, to re-checksum after mutation so that the
    // mutated fields get parsed instead of failing the checksum.
    let headers: Vec<usize> = (0..full.len() / BLOCK)
        .filter(|i| {
            let b: &Block = full[i * BLOCK..(i + 1) * BLOCK].try_into().unwrap();
            format::check(b) == BlockCheck::Header
        })
        .collect();
    let mut rng = XorShift(42);
    for round in 0..3000 {
        let mut m = full.clone();
        for _ in 0..1 + rng.next() % 6 {
            let i = (rng.next() as usize) % m.len();
            m[i] = match rng.next() % 4 {
                0 => rng.next() as u8,
                1 => 0,
                2 => b'0' + (rng.next() % 10) as u8,
                _ => 0xff,
            };
        }
        if round % 2 == 0 {
            for &h in &headers {
                let b: &mut Block = (&mut m[h * BLOCK..(h + 1) * BLOCK]).try_into().unwrap();
                fix_checksum(b);
            }
        }
        read_with(&m, 1 + (rng.next() % 2000) as usize);
    }
}

#[test]
fn io_errors_are_wrapped() {
    /// Gives `data` up to `fail_at`, then an error.
    struct Failing {
        data: Vec<u8>,
        pos: usize,
        fail_at: usize,
    }
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.fail_at {
                return Err(io::Error::other("zstd: corrupted block"));
            }
            let n = buf.len().min(self.fail_at - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }
    impl Skip for Failing {}
    let data = Ar::new().file("foo", &[3; 5000]).end();
    let mut r = Reader::new(Failing { data, pos: 0, fail_at: 3000 });
    let m = r.next_member().unwrap().unwrap();
    assert_eq!(m.display_name(), "foo");
    let mut buf = vec![0; 8192];
    // Not a clean end: what the decoder gave before its error is not handed on.
    let e = r.read_data(&mut buf).unwrap_err().to_string();
    assert_eq!(e, "foo: zstd: corrupted block (archive offset 3000)");
    assert_eq!(r.next_member().unwrap_err().to_string(), e);
}
