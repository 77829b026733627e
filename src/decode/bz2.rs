//! Concatenated bzip2 streams as `bzip2 -d` reads them (bzip2 1.0.8, `uncompressStream`): each
//! stream is checked (block and stream CRCs); after the first, data that does not start with a
//! stream header ("BZh1".."BZh9") ends the input: `bzip2 -d` says "trailing garbage after EOF
//! ignored" and exits 0, and GNU tar succeeds. A stream with a valid header but bad data is
//! still an error. The `bzip2` crate's `BzDecoder` reads one stream and stops exactly after it;
//! this loops around it.
//!
//! An empty stream (14 bytes: header, end-of-stream marker, CRC 0) is stepped over without a
//! decoder: libbz2-rs allocates and zeroes the level's block buffer (3.6 MB for "BZh9") for
//! every stream, so a run of empty streams cost 47 µs per 14 bytes (4.7 s for 1.4 MB) where
//! `bzip2 -d` takes 2.6 µs.

use std::io::{self, BufRead};

use bzip2::bufread::BzDecoder;

use super::members::{Format, Members, Next};
use super::source::Source;

/// bzip2's rules between streams.
#[derive(Default)]
pub struct Bzip2;

pub type BzStreams<R> = Members<R, Bzip2>;

/// The end-of-stream marker (0x177245385090) and a combined CRC of 0: what follows the
/// 4-byte header in a stream with no blocks.
const EMPTY_REST: [u8; 10] = [0x17, 0x72, 0x45, 0x38, 0x50, 0x90, 0, 0, 0, 0];

/// Whether `head` (4 bytes, or fewer at the end of the input) can start a bzip2 stream. A cut
/// header ("BZ" at the end) is decoded, so it fails as a cut stream, as `bzip2 -d` fails it.
fn stream_header(head: &[u8]) -> bool {
    match head {
        [b'B', b'Z', b'h', level, ..] => (b'1'..=b'9').contains(level),
        short => b"BZh".starts_with(short),
    }
}

impl<R: BufRead> Format<R> for Bzip2 {
    type Decoder = BzDecoder<Source<R>>;

    fn decoder(&self, src: Source<R>) -> io::Result<Self::Decoder> {
        Ok(BzDecoder::new(src))
    }

    fn input(d: Self::Decoder) -> Source<R> {
        d.into_inner()
    }

    fn between(src: &mut Source<R>, done: u64) -> io::Result<Next> {
        let head = src.peek(4 + EMPTY_REST.len())?;
        if head.is_empty() || (done > 0 && !stream_header(head)) {
            return Ok(Next::End);
        }
        if stream_header(head) && head.get(4..) == Some(&EMPTY_REST[..]) {
            src.consume(4 + EMPTY_REST.len());
            return Ok(Next::Skipped);
        }
        Ok(Next::Member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::io::Write;

    fn stream(data: &[u8]) -> Vec<u8> {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(bytes: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        BzStreams::new(Source::with_capacity(5, bytes)).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn streams_and_what_may_follow_them() {
        let mut two = stream(b"hello ");
        two.extend(stream(b"world"));
        assert_eq!(decode(&two).unwrap(), b"hello world");
        for tail in [&[0u8; 10240][..], b"junk", b"BZh0", b"BZx"] {
            let mut t = two.clone();
            t.extend(tail);
            assert_eq!(
                decode(&t).unwrap(),
                b"hello world",
                "{:?} after the last stream",
                &tail[..4.min(tail.len())]
            );
        }
        for tail in [&b"BZh9garbage"[..], b"BZ", b"BZh"] {
            let mut t = two.clone();
            t.extend(tail);
            assert!(decode(&t).is_err(), "{tail:?} after the last stream");
        }
        let s = stream(b"hello");
        assert!(decode(&s[..s.len() - 1]).is_err(), "a cut stream");
        // Empty streams, stepped over, before, between and after.
        let empty = stream(b"");
        assert_eq!(&empty[4..], EMPTY_REST);
        let mut t = [&empty[..], &empty, &two, &empty, &empty].concat();
        assert_eq!(decode(&t).unwrap(), b"hello world");
        t.extend(&empty[..13]);
        assert!(decode(&t).is_err(), "a cut empty stream");
        assert!(decode(b"junk").is_err(), "not bzip2 at all");
    }
}
