//! xz streams as `xz -d` reads them (XZ Utils 5.4, which decodes with `LZMA_CONCATENATED`):
//! streams one after another, stream padding (zero bytes in multiples of four) between and
//! after them, every block's check (CRC32, CRC64 or SHA-256) and the index verified; anything
//! else after a stream is an error ("Compressed data is corrupt": `xz -d` exits 1 and GNU tar
//! fails). liblzma's own multi-stream decoder does exactly this, so there is no loop of ours
//! around it as for gzip members and bzip2 streams.
//!
//! Memory: a stream's header says how large a dictionary its decoder needs (8 MiB at xz's
//! default level, 64 MiB at `-9`, up to 1.5 GiB for a hand-made one). The decoder refuses to
//! allocate more than `--max-window` (default 128 MiB, the zstd limit: enough for every preset)
//! plus the decoder's own state, so a 100-byte stream cannot make us allocate gigabytes.

use std::io::{self, BufRead};

use liblzma::bufread::XzDecoder;
use liblzma::stream::{CONCATENATED, Stream};

/// The decoder's own state besides the dictionary (liblzma's LZMA2 decoder needs ~30 KiB; its
/// index of a stream with many blocks more): what the memory limit allows on top of the window.
const STATE_BYTES: u64 = 16 << 20;

/// A decoder of the xz streams in `src`, needing at most a `1 << max_window_log` dictionary.
pub fn decoder<R: BufRead>(src: R, max_window_log: u32) -> io::Result<XzDecoder<R>> {
    let memlimit = (1u64 << max_window_log) + STATE_BYTES;
    let stream = Stream::new_stream_decoder(memlimit, CONCATENATED).map_err(io::Error::other)?;
    Ok(XzDecoder::new_stream(src, stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn stream(data: &[u8], dict: u32) -> Vec<u8> {
        let mut opts = liblzma::stream::LzmaOptions::new_preset(1).unwrap();
        opts.dict_size(dict);
        let mut filters = liblzma::stream::Filters::new();
        filters.lzma2(&opts);
        let s = Stream::new_stream_encoder(&filters, liblzma::stream::Check::Crc64).unwrap();
        let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), s);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(bytes: &[u8], max_window_log: u32) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(bytes, max_window_log)?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn streams_and_what_may_follow_them() {
        let mut two = stream(b"hello ", 1 << 20);
        two.extend(stream(b"world", 1 << 20));
        assert_eq!(decode(&two, 27).unwrap(), b"hello world");
        // Stream padding: zeros in multiples of four, between streams and at the end.
        let padded =
            [&stream(b"a", 1 << 20)[..], &[0; 8], &stream(b"b", 1 << 20), &[0; 12]].concat();
        assert_eq!(decode(&padded, 27).unwrap(), b"ab");
        for tail in [&b"junk"[..], &[0; 10], b"\xfd7zXZ"] {
            let t = [&two[..], tail].concat();
            assert!(decode(&t, 27).is_err(), "{tail:?} after the last stream");
        }
        assert!(decode(&two[..two.len() - 1], 27).is_err(), "a cut stream");
        let mut bad = two.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x40;
        assert!(decode(&bad, 27).is_err(), "a damaged stream");
    }

    #[test]
    fn a_dictionary_over_the_window_limit_is_refused() {
        let s = stream(b"small data, large dictionary", 64 << 20);
        assert_eq!(decode(&s, 27).unwrap(), b"small data, large dictionary");
        let e = decode(&s, 20).unwrap_err();
        assert!(e.to_string().contains("memory"), "{e}");
    }
}
