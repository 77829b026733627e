//! Concatenated gzip members as `gzip -d` reads them (gzip 1.12, `get_method`): each member
//! is checked (CRC-32 and length); after the last one, zero bytes up to the end of the input
//! are ignored (tape and `dd` padding) and anything else is an error ("trailing garbage", which
//! `gzip -d` reports with exit 2, so GNU tar fails too). flate2's `GzDecoder` reads one member
//! and stops exactly after its trailer; this loops around it.

use std::io::{self, BufRead, Read};

use flate2::bufread::GzDecoder;

use super::source::Source;

const MAGIC: [u8; 2] = [0x1f, 0x8b];

enum State<R> {
    /// At a member boundary.
    Between(Source<R>),
    In(Box<GzDecoder<Source<R>>>),
    Done,
    /// Only transiently, while moving between states.
    Poisoned,
}

pub struct GzMembers<R> {
    state: State<R>,
    /// Members read to their end.
    members: u64,
}

impl<R: Read> GzMembers<R> {
    pub fn new(input: Source<R>) -> GzMembers<R> {
        GzMembers { state: State::Between(input), members: 0 }
    }
}

fn garbage() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "trailing garbage after the last member")
}

impl<R: Read> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, State::Poisoned) {
                State::Done => {
                    self.state = State::Done;
                    return Ok(0);
                }
                State::Poisoned => {
                    return Err(io::Error::other("an earlier error stopped the decoder"));
                }
                State::In(mut d) => {
                    let n = d.read(buf)?;
                    if n > 0 || buf.is_empty() {
                        self.state = State::In(d);
                        return Ok(n);
                    }
                    self.members += 1;
                    self.state = State::Between(d.into_inner());
                }
                State::Between(mut src) => {
                    let head = src.peek(MAGIC.len())?;
                    if head.is_empty() {
                        self.state = State::Done;
                        return Ok(0);
                    }
                    // The first member is decoded whatever it starts with: the decoder's own
                    // error says what is wrong with it.
                    if head == MAGIC || self.members == 0 {
                        self.state = State::In(Box::new(GzDecoder::new(src)));
                        continue;
                    }
                    if head[0] != 0 {
                        return Err(garbage());
                    }
                    // Zeros to the end are padding; zeros and then anything else are garbage.
                    loop {
                        let avail = src.fill_buf()?;
                        if avail.is_empty() {
                            self.state = State::Done;
                            return Ok(0);
                        }
                        if avail.iter().any(|&b| b != 0) {
                            return Err(garbage());
                        }
                        let n = avail.len();
                        src.consume(n);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
