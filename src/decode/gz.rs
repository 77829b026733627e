//! Concatenated gzip members as `gzip -d` reads them (gzip 1.12, `get_method`): each member
//! is checked (CRC-32 and length); after the last one, zero bytes up to the end of the input
//! are ignored (tape and `dd` padding) and anything else is an error ("trailing garbage", which
//! `gzip -d` reports with exit 2, so GNU tar fails too). flate2's `GzDecoder` reads one member
//! and stops exactly after its trailer; this loops around it.

use std::io::{self, BufRead};

use flate2::bufread::GzDecoder;

use super::members::{Format, Members, Next};
use super::source::Source;

const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// gzip's rules between members.
#[derive(Default)]
pub struct Gzip;

pub type GzMembers<R> = Members<R, Gzip>;

fn garbage() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "trailing garbage after the last member")
}

impl<R: BufRead> Format<R> for Gzip {
    type Decoder = GzDecoder<Source<R>>;

    fn decoder(&self, src: Source<R>) -> io::Result<Self::Decoder> {
        Ok(GzDecoder::new(src))
    }

    fn input(d: Self::Decoder) -> Source<R> {
        d.into_inner()
    }

    fn between(src: &mut Source<R>, done: u64) -> io::Result<Next> {
        let head = src.peek(MAGIC.len())?;
        if head.is_empty() {
            return Ok(Next::End);
        }
        // The first member is decoded whatever it starts with: the decoder's own error says
        // what is wrong with it.
        if head == MAGIC || done == 0 {
            return Ok(Next::Member);
        }
        if head[0] != 0 {
            return Err(garbage());
        }
        // Zeros to the end are padding; zeros and then anything else are garbage.
        loop {
            let avail = src.fill_buf()?;
            if avail.is_empty() {
                return Ok(Next::End);
            }
            if avail.iter().any(|&b| b != 0) {
                return Err(garbage());
            }
            let n = avail.len();
            src.consume(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::io::Write;

    fn member(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(bytes: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        // A small buffer, so members and padding straddle refills.
        GzMembers::new(Source::with_capacity(7, bytes)).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn members_padding_and_garbage() {
        let mut two = member(b"hello ");
        two.extend(member(b"world"));
        assert_eq!(decode(&two).unwrap(), b"hello world");
        let mut padded = two.clone();
        padded.extend([0u8; 10240]);
        assert_eq!(decode(&padded).unwrap(), b"hello world");
        for tail in [&b"junk"[..], b"\0\0\0junk", b"\x1f", b"\x1f\x8b\x08"] {
            let mut bad = two.clone();
            bad.extend(tail);
            assert!(decode(&bad).is_err(), "{tail:?} after the last member");
        }
        let m = member(b"hello");
        assert!(decode(&m[..m.len() - 1]).is_err(), "a cut trailer");
        let mut crc = m.clone();
        let at = crc.len() - 8;
        crc[at] ^= 1;
        assert!(decode(&crc).is_err(), "a wrong CRC");
        assert!(decode(b"not gzip").is_err());
    }
}
