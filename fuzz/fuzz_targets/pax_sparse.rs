//! Header-level fuzzing: the archive module exposes only `Reader`, and random bytes rarely
//! carry a valid header checksum, so this target builds the headers around the input and
//! fixes their checksums. Byte 0 picks the shape, bytes 1..3 (little-endian) where the rest
//! is split into `a` and `b`:
//!
//! 0. `x` header with data `a` (raw PAX records), then a regular file whose data area is `b`.
//! 1. the same with records made from the lines of `a` (`key=value`, lengths computed), so
//!    `GNU.sparse.*` keys (0.0, 0.1, 1.0 maps; `b` holds the 1.0 map) are reached at once.
//! 2. `g` header with records from the lines of `a`, then an `x` header with the same lines
//!    reversed, then the file `b`, then a second file: globals and resets across members.
//! 3. old GNU sparse `S`: header bytes 345..512 (sparse entries, isextended, realsize) from
//!    `a`, size from `a` too; `b` follows (extension blocks, data).
//! 4. raw header: the first 512 bytes of `a` with the checksum fixed, then `b`.
//! 5. records from the lines of `a`, then a raw header from the first 512 bytes of `b` (checksum
//!    fixed), then the rest of `b`.
//! 6. GNU `L` long name / `K` long link with data `a`, then a file `b`.
//!
//! Then two zero blocks. Everything goes through `common::drain` (the reader's contract).
#![no_main]

mod common;

use common::{BLOCK, fix_checksum, header, push_padded, record};
use libfuzzer_sys::fuzz_target;

fn lines_to_records(a: &[u8]) -> Vec<u8> {
    a.split(|&c| c == b'\n').filter(|l| !l.is_empty()).flat_map(record).collect()
}

fn raw_header(bytes: &[u8]) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let n = bytes.len().min(BLOCK);
    h[..n].copy_from_slice(&bytes[..n]);
    fix_checksum(&mut h);
    h
}

fn ext(out: &mut Vec<u8>, flag: u8, data: &[u8]) {
    out.extend_from_slice(&header(b"././@PaxHeader", flag, data.len() as u64));
    push_padded(out, data);
}

fn file(out: &mut Vec<u8>, name: &[u8], data: &[u8]) {
    out.extend_from_slice(&header(name, b'0', data.len() as u64));
    push_padded(out, data);
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let mode = data[0] % 7;
    let split = usize::from(u16::from_le_bytes([data[1], data[2]]));
    let rest = &data[3..];
    let (a, b) = rest.split_at(split.min(rest.len()));
    let mut ar = Vec::new();
    match mode {
        0 => {
            ext(&mut ar, b'x', a);
            file(&mut ar, b"f", b);
        }
        1 => {
            ext(&mut ar, b'x', &lines_to_records(a));
            file(&mut ar, b"f", b);
        }
        2 => {
            ext(&mut ar, b'g', &lines_to_records(a));
            let mut rev: Vec<&[u8]> = a.split(|&c| c == b'\n').collect();
            rev.reverse();
            ext(&mut ar, b'x', &lines_to_records(&rev.join(&b'\n')));
            file(&mut ar, b"f", b);
            file(&mut ar, b"g", b"second");
        }
        3 => {
            let mut h = header(b"sparse", b'S', b.len() as u64);
            let n = a.len().min(BLOCK - 345);
            h[345..345 + n].copy_from_slice(&a[..n]);
            if let Some(size) = a.get(n..n + 12) {
                h[124..136].copy_from_slice(size);
            }
            fix_checksum(&mut h);
            ar.extend_from_slice(&h);
            push_padded(&mut ar, b);
        }
        4 => {
            ar.extend_from_slice(&raw_header(a));
            push_padded(&mut ar, b);
        }
        5 => {
            ext(&mut ar, b'x', &lines_to_records(a));
            ar.extend_from_slice(&raw_header(b));
            push_padded(&mut ar, b.get(BLOCK..).unwrap_or_default());
        }
        _ => {
            let flag = if b.first().is_some_and(|c| c & 1 == 1) { b'K' } else { b'L' };
            ext(&mut ar, flag, a);
            file(&mut ar, b"f", b);
        }
    }
    ar.extend_from_slice(&[0; 2 * BLOCK]);
    let big = common::drain(&ar, 64 << 10);
    let small = common::drain(&ar, 509);
    assert_eq!(big, small, "the chunk size changed what was read");
});
