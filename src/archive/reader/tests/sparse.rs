//! Sparse members: old GNU maps with extension blocks, PAX 0.0, 0.1 and 1.0.

use super::*;

/// Expected contents of a sparse file built by these tests.
fn sparse_contents(realsize: u64, segs: &[(u64, u64)]) -> Vec<u8> {
    let mut v = vec![0u8; realsize as usize];
    let mut i = 0u64;
    for &(o, n) in segs {
        for k in 0..n {
            v[(o + k) as usize] = (i % 253) as u8 + 1;
            i += 1;
        }
    }
    v
}

fn seg_list(m: &Member) -> Vec<(u64, u64)> {
    m.sparse.as_ref().unwrap().iter().map(|s| (s.offset, s.len)).collect()
}

#[test]
fn sparse_old_gnu() {
    // 4 entries in the header, 21 in the first extension block, 3 in the second, with
    // a zero-length one in the middle and one marking the end of the file.
    let mut segs: Vec<(u64, u64)> = (0..26).map(|i| (i * 1000, 10 + i)).collect();
    segs.push((40_000, 0));
    segs.push((99_990, 10));
    segs.push((100_000, 0));
    let mut ar = Ar::new().start();
    ar.bytes.extend(old_gnu_sparse("sp", 100_000, &segs));
    let ar = ar.file("after", b"z").end();
    let got = read_ok(&ar);
    assert_eq!(got[0].m.kind, Kind::File);
    assert_eq!(got[0].m.size, 100_000);
    let nonempty: Vec<(u64, u64)> = segs.iter().copied().filter(|s| s.1 > 0).collect();
    assert_eq!(seg_list(&got[0].m), nonempty);
    assert_eq!(got[0].contents(), sparse_contents(100_000, &segs));
    assert_eq!(got[1].name(), "after");
    // A chunk never spans two segments.
    let (g, _) = read_with(&ar, 25);
    let chunks: Vec<(u64, usize)> = g[0].chunks.iter().map(|(o, c)| (*o, c.len())).collect();
    assert_eq!(&chunks[..5], [(0, 10), (1000, 11), (2000, 12), (3000, 13), (4000, 14)]);
    assert_eq!(&chunks[15..18], [(15_000, 25), (16_000, 25), (16_025, 1)]);
    // Invalid maps.
    for (segs, want) in [
        (&[(0u64, 10u64), (5, 10)][..], "overlaps"),
        (&[(0, 10), (200_000, 10)][..], "beyond the file size"),
    ] {
        let ar = [old_gnu_sparse("bad", 100_000, segs), vec![0; 1024]].concat();
        let e = read_err(&ar);
        assert!(e.starts_with("bad: ") && e.contains(want), "{e}");
    }
    // Extension blocks missing.
    let full = old_gnu_sparse("cut", 100_000, &segs);
    let e = read_err(&full[..512 + 256]);
    assert_eq!(e, "cut: unexpected end of archive (archive offset 768)");
}

#[test]
fn sparse_pax() {
    let segs: Vec<(u64, u64)> =
        (0..100).map(|i| (i * 1000, 7 + i % 5)).chain([(200_000, 0)]).collect();
    let nonempty: Vec<(u64, u64)> = segs.iter().copied().filter(|s| s.1 > 0).collect();
    let stored: u64 = segs.iter().map(|s| s.1).sum();
    let data: Vec<u8> = (0..stored).map(|i| (i % 253) as u8 + 1).collect();
    let numblocks = segs.len().to_string();
    let size0 = "200000";

    // 0.0: offset/numbytes pairs.
    let mut recs: Vec<(String, Vec<u8>)> = vec![
        ("GNU.sparse.size".into(), size0.into()),
        ("GNU.sparse.numblocks".into(), numblocks.clone().into()),
    ];
    for (o, n) in &segs {
        recs.push(("GNU.sparse.offset".into(), o.to_string().into()));
        recs.push(("GNU.sparse.numbytes".into(), n.to_string().into()));
    }
    let recs: Vec<(&str, &[u8])> = recs.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    let v00 = Ar::new().pax(b'x', &recs).block(header(b"s00", b'0', stored)).data(&data).bytes;

    // 0.1: one map record.
    let map01: Vec<String> = segs.iter().map(|(o, n)| format!("{o},{n}")).collect();
    let map01 = map01.join(",");
    let v01 = Ar::new()
        .pax(
            b'x',
            &[
                ("GNU.sparse.size", size0.as_bytes()),
                ("GNU.sparse.numblocks", numblocks.as_bytes()),
                ("GNU.sparse.name", b"s01"),
                ("GNU.sparse.map", map01.as_bytes()),
            ],
        )
        .block(header(b"GNUSparseFile.1/s01", b'0', stored))
        .data(&data)
        .bytes;

    // 1.0: map in the data area (more than one block of it).
    let v10 = pax_v1_sparse("s10", 200_000, &segs);

    let ar = [v00, v01, v10, Ar::new().file("after", b"!").end()].concat();
    let got = read_ok(&ar);
    let names: Vec<String> = got.iter().map(Got::name).collect();
    assert_eq!(names, ["s00", "s01", "s10", "after"]);
    let want = sparse_contents(200_000, &segs);
    for g in &got[..3] {
        assert_eq!(g.m.size, 200_000, "{}", g.name());
        assert_eq!(seg_list(&g.m), nonempty, "{}", g.name());
        assert_eq!(g.contents(), want, "{}", g.name());
    }
    assert_eq!(got[3].contents(), b"!");

    // Broken maps.
    let bad_version = Ar::new()
        .pax(b'x', &[("GNU.sparse.major", b"2"), ("GNU.sparse.minor", b"0")])
        .block(header(b"f", b'0', 0))
        .end();
    assert!(read_err(&bad_version).contains("unsupported GNU sparse format 2.0"));
    let too_much = pax_v1_sparse("over", 100, &[(0, 50), (60, 50)]);
    let e = read_err(&[too_much, vec![0; 1024]].concat());
    assert!(e.starts_with("over: sparse map reaches offset 110"), "{e}");
    let mut unterminated = Ar::new()
        .pax(b'x', &[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
        .block(header(b"f", b'0', 512));
    unterminated.bytes.extend([b'1'; 512]);
    let e = read_err(&unterminated.end());
    assert!(e.contains("number out of range"), "{e}");
    let mut no_room = Ar::new()
        .pax(b'x', &[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
        .block(header(b"f", b'0', 512));
    no_room.bytes.extend(Ar::new().data(format!("200\n{}", "0\n".repeat(254)).as_bytes()).bytes);
    let e = read_err(&no_room.end());
    assert!(e.contains("sparse map runs past the member data"), "{e}");
    // A huge declared count is refused before anything is allocated for it.
    let mut huge = Ar::new()
        .pax(b'x', &[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
        .block(header(b"f", b'0', 512));
    huge.bytes.extend(Ar::new().data(b"99999999999999\n").bytes);
    assert!(read_err(&huge.end()).contains("entries (limit"));
    // Stored data beyond what the map covers is skipped (GNU tar does the same).
    let extra = Ar::new()
        .pax(b'x', &[("GNU.sparse.size", b"100"), ("GNU.sparse.map", b"10,5")])
        .block(header(b"x", b'0', 700))
        .data(&[9; 700])
        .file("next", b"n")
        .end();
    let got = read_ok(&extra);
    assert_eq!(seg_list(&got[0].m), [(10, 5)]);
    assert_eq!(got[0].chunks, [(10, vec![9; 5])]);
    assert_eq!(got[1].name(), "next");
}
