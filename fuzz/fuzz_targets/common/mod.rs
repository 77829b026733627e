//! Shared by the fuzz targets: a tar header builder, and a driver that reads an archive to the
//! end through `fastuntar::__private::archive::Reader` while checking the reader's documented contract.
#![allow(dead_code)]

use fastuntar::__private::archive::{Kind, Reader};

pub const BLOCK: usize = 512;

/// A ustar header block with a correct checksum.
pub fn header(name: &[u8], flag: u8, size: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    let n = name.len().min(100);
    b[..n].copy_from_slice(&name[..n]);
    b[100..108].copy_from_slice(b"0000644\0");
    b[108..116].copy_from_slice(b"0001750\0");
    b[116..124].copy_from_slice(b"0001751\0");
    set_size(&mut b, size);
    b[136..148].copy_from_slice(b"14000000000\0");
    b[156] = flag;
    b[257..265].copy_from_slice(b"ustar\x0000");
    fix_checksum(&mut b);
    b
}

/// Octal when it fits the 11 digits, GNU base-256 otherwise.
pub fn set_size(b: &mut [u8; BLOCK], size: u64) {
    if size < 1 << 33 {
        b[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        b[124] = 0x80;
        b[125..128].fill(0);
        b[128..136].copy_from_slice(&size.to_be_bytes());
    }
}

pub fn fix_checksum(b: &mut [u8; BLOCK]) {
    b[148..156].fill(b' ');
    let sum: u32 = b.iter().map(|&x| u32::from(x)).sum();
    b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// Appends `d` and zero padding to the next block boundary.
pub fn push_padded(out: &mut Vec<u8>, d: &[u8]) {
    out.extend_from_slice(d);
    out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
}

/// One PAX record, `"%d key=value\n"`, with its length right.
pub fn record(line: &[u8]) -> Vec<u8> {
    let body = 1 + line.len() + 1; // " " + key=value + "\n"
    let mut len = body + 1;
    while len.to_string().len() + body != len {
        len += 1;
    }
    let mut r = len.to_string().into_bytes();
    r.push(b' ');
    r.extend_from_slice(line);
    r.push(b'\n');
    r
}

/// What reading an archive gave: per member (name, kind, size, hash of its data bytes, which
/// does not depend on the chunk size; 0 for a member cut short by the error), and the
/// error that ended it, if any.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub members: Vec<(Vec<u8>, Kind, u64, u64)>,
    pub error: Option<String>,
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// Reads every member and its data with a `chunk`-byte buffer, checking:
/// * it terminates on its own: every successful call consumes input, so more than
///   `2 * len + 64` calls is a loop (a bug, not a limit);
/// * errors are one line without control characters, and sticky (`next_member` and `read_data` repeat them), the end is
///   repeatable, `offset()` never passes the input length;
/// * chunks: 0 < n <= chunk; regular data is contiguous from 0, every chunk but the last
///   full, and adds up to the member size; sparse chunks lie inside one segment of the map,
///   in order, and the map lies inside the member size; members without data give none.
pub fn drain(data: &[u8], chunk: usize) -> Outcome {
    let mut r = Reader::new(data);
    let mut buf = vec![0u8; chunk];
    let mut out = Outcome { members: Vec::new(), error: None };
    let cap = 2 * data.len() + 64;
    let mut calls = 0usize;
    let mut tick = || {
        calls += 1;
        assert!(calls <= cap, "reader did not terminate: {calls} calls on {} bytes", data.len());
    };
    loop {
        tick();
        let m = match r.next_member() {
            Ok(None) => {
                assert!(r.next_member().unwrap().is_none(), "end is repeatable");
                assert_eq!(r.read_data(&mut buf).unwrap(), None, "no data after the end");
                assert!(r.offset() <= data.len() as u64);
                return out;
            }
            Err(e) => return failed(&mut r, &mut buf, out, e, data.len()),
            Ok(Some(m)) => m,
        };
        assert!(r.offset() <= data.len() as u64);
        let readable = matches!(m.kind, Kind::File | Kind::Other(_));
        if !readable {
            assert_eq!(m.size, 0, "a member without data has size 0");
        }
        if let Some(segs) = &m.sparse {
            let mut end = 0;
            for s in segs {
                assert!(s.len > 0, "zero-length segments are not kept");
                assert!(s.offset >= end, "segments in order, not overlapping: {segs:?}");
                end = s.offset.checked_add(s.len).expect("segment end overflows");
                assert!(end <= m.size, "segment {s:?} past the real size {}", m.size);
            }
        }
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let mut next = 0u64;
        let mut short = false;
        let mut seg = 0usize;
        loop {
            tick();
            match r.read_data(&mut buf) {
                Ok(Some((off, n))) => {
                    assert!(readable, "data from a member of kind {:?}", m.kind);
                    assert!(n > 0 && n <= chunk, "chunk of {n} bytes (buffer {chunk})");
                    assert!(r.offset() <= data.len() as u64);
                    match &m.sparse {
                        None => {
                            assert!(!short, "a short chunk that was not the last");
                            assert_eq!(off, next, "regular data is contiguous");
                            short = n < chunk;
                        }
                        Some(segs) => {
                            while segs.get(seg).is_some_and(|s| off >= s.offset + s.len) {
                                seg += 1;
                            }
                            let s = segs.get(seg).unwrap_or_else(|| {
                                panic!("chunk {off}+{n} outside the map {segs:?}")
                            });
                            assert!(
                                off >= s.offset && off + n as u64 <= s.offset + s.len,
                                "chunk {off}+{n} not inside one segment {s:?}"
                            );
                            assert!(off >= next, "sparse chunks in order");
                        }
                    }
                    next = off + n as u64;
                    fnv(&mut h, &buf[..n]);
                }
                Ok(None) => {
                    match &m.sparse {
                        None if readable => assert_eq!(next, m.size, "data adds up to the size"),
                        None => {}
                        Some(segs) => {
                            let end = segs.last().map_or(0, |s| s.offset + s.len);
                            assert_eq!(next, end, "every segment was delivered");
                        }
                    }
                    out.members.push((m.name.clone(), m.kind, m.size, h));
                    break;
                }
                Err(e) => {
                    // How much of a member was read before an error depends on the chunk size.
                    out.members.push((m.name.clone(), m.kind, m.size, 0));
                    return failed(&mut r, &mut buf, out, e, data.len());
                }
            }
        }
    }
}

fn failed(
    r: &mut Reader<&[u8]>,
    buf: &mut [u8],
    mut out: Outcome,
    e: anyhow::Error,
    len: usize,
) -> Outcome {
    let msg = format!("{e:#}");
    assert!(!msg.chars().any(char::is_control), "error is one line, no control chars: {msg:?}");
    assert!(!msg.is_empty());
    let again = r.next_member().expect_err("errors are sticky (next_member)");
    assert_eq!(format!("{again:#}"), msg, "the same error again");
    let again = r.read_data(buf).expect_err("errors are sticky (read_data)");
    assert_eq!(format!("{again:#}"), msg, "the same error again");
    assert!(r.offset() <= len as u64);
    out.error = Some(msg);
    out
}
