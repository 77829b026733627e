//! xz streams as `xz -d` reads them (XZ Utils 5.4, which decodes with `LZMA_CONCATENATED`):
//! streams one after another, stream padding (zero bytes in multiples of four) between and
//! after them, every block's check (CRC32, CRC64 or SHA-256) and the index verified; anything
//! else after a stream is an error ("Compressed data is corrupt": `xz -d` exits 1 and GNU tar
//! fails). liblzma decodes one stream at a time here and `Members` loops around it, so that the
//! multi-threaded decoder, which has no `LZMA_CONCATENATED`, reads concatenated streams too.
//!
//! Threads: a stream of several blocks (what `xz -T0` writes, the default since XZ Utils 5.6)
//! decodes its blocks in parallel on up to `--threads` threads (liblzma's
//! `lzma_stream_decoder_mt`, output in order); a single-block stream decodes on one.
//!
//! Memory: a stream's header says how large a dictionary its decoder needs (8 MiB at xz's
//! default level, 64 MiB at `-9`, up to 1.5 GiB for a hand-made one). The decoder refuses to
//! allocate more than `--max-window` (default 128 MiB, the zstd limit: enough for every preset)
//! plus its own state, so a 100-byte stream cannot make us allocate gigabytes. Threads buffer
//! whole blocks, in and out (3 × the dictionary at the presets: 24 MiB at `-6`; two threads of
//! a `-6` archive took 98 MB): all of them together get the memory zstd's decoded frames would
//! (`Config::pools`: 32 MiB per thread past the first, within an eighth of the machine's
//! memory, or what `--memory` leaves), and liblzma decodes on as many threads as fit in that;
//! under THREADS_MIN_MEMORY the single-threaded decoder runs (listing on 2 CPUs: 65 MiB).
//! liblzma also holds all threads together to the one-decoder limit (it clamps
//! `memlimit_threading` to `memlimit_stop`): at the default `--max-window` 144 MiB in all, two
//! threads of a `-6` stream, not more; a larger `--max-window` lets more run.

use std::io::{self, BufRead};

use liblzma::bufread::XzDecoder;
use liblzma::stream::{MtStreamBuilder, Stream};

use super::members::{Format, Members, Next};
use super::source::Source;

/// The stream header's magic.
pub const MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];

/// The decoder's own state besides the dictionary (liblzma's LZMA2 decoder needs ~30 KiB; its
/// index of a stream with many blocks more): what the memory limit allows on top of the window.
const STATE_BYTES: u64 = 16 << 20;

/// Least memory for the threads to be worth it: two threads of a `-6` stream took 98 MB; with
/// less, liblzma runs one thread that buffers whole blocks (73 MB of RSS listing /usr/share's
/// 178 MB `.tar.xz` with the 65 MiB `-t` gets on 2 CPUs, against 13 MB, and no faster), so
/// below this the single-threaded decoder runs.
const THREADS_MIN_MEMORY: u64 = 128 << 20;

/// How the streams are decoded.
pub struct Xz {
    /// Most memory one decoder may use (`--max-window` and STATE_BYTES): more is an error.
    memlimit: u64,
    /// Threads for a stream's blocks, at most (1: the single-threaded decoder).
    threads: u32,
    /// Memory all threads together may use: fewer threads (or one) where blocks need more.
    for_threads: u64,
}

pub type XzStreams<R> = Members<R, Xz>;

/// The threads `streams` lets liblzma use for `threads` and `for_threads` (liblzma may use
/// fewer where blocks need more memory than `for_threads` gives each).
pub fn threads(threads: usize, for_threads: u64) -> usize {
    if for_threads >= THREADS_MIN_MEMORY { threads.max(1) } else { 1 }
}

/// The xz streams in `src`, each needing at most a `1 << max_window_log` dictionary, blocks
/// decoded on up to `threads` threads within `for_threads` bytes in all.
pub fn streams<R: BufRead>(
    src: Source<R>,
    max_window_log: u32,
    threads: usize,
    for_threads: u64,
) -> XzStreams<R> {
    let memlimit = (1u64 << max_window_log) + STATE_BYTES;
    let threads = u32::try_from(self::threads(threads, for_threads)).unwrap_or(u32::MAX);
    Members::with(src, Xz { memlimit, threads, for_threads })
}

fn corrupt() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "data after a stream that is neither stream padding nor a stream (xz -d: Compressed data is corrupt)",
    )
}

impl<R: BufRead> Format<R> for Xz {
    type Decoder = XzDecoder<Source<R>>;

    fn decoder(&self, src: Source<R>) -> io::Result<Self::Decoder> {
        let stream = if self.threads > 1 {
            MtStreamBuilder::new()
                .threads(self.threads)
                .timeout_ms(0)
                .memlimit_stop(self.memlimit)
                .memlimit_threading(self.for_threads)
                .decoder()
        } else {
            Stream::new_stream_decoder(self.memlimit, 0)
        };
        Ok(XzDecoder::new_stream(src, stream.map_err(io::Error::other)?))
    }

    fn input(d: Self::Decoder) -> Source<R> {
        d.into_inner()
    }

    fn between(src: &mut Source<R>, done: u64) -> io::Result<Next> {
        if done == 0 {
            // Whatever the first stream starts with, its decoder says what is wrong with it.
            return Ok(if src.peek(1)?.is_empty() { Next::End } else { Next::Member });
        }
        // Stream padding: zeros, a multiple of four of them, then the end or another stream.
        let mut zeros = 0u64;
        loop {
            let avail = src.fill_buf()?;
            let n = avail.iter().take_while(|&&b| b == 0).count();
            let more = n > 0 && n == avail.len();
            src.consume(n);
            zeros += n as u64;
            if !more {
                break;
            }
        }
        let head = src.peek(MAGIC.len())?;
        if !zeros.is_multiple_of(4) {
            return Err(corrupt());
        }
        if head.is_empty() {
            return Ok(Next::End);
        }
        if head == MAGIC {
            return Ok(Next::Member);
        }
        Err(corrupt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::io::Write;

    fn stream(data: &[u8], dict: u32, block: Option<u64>) -> Vec<u8> {
        let mut opts = liblzma::stream::LzmaOptions::new_preset(1).unwrap();
        opts.dict_size(dict);
        let mut filters = liblzma::stream::Filters::new();
        filters.lzma2(&opts);
        let s = match block {
            None => Stream::new_stream_encoder(&filters, liblzma::stream::Check::Crc64).unwrap(),
            Some(b) => MtStreamBuilder::new()
                .threads(2)
                .block_size(b)
                .filters(filters)
                .check(liblzma::stream::Check::Crc32)
                .encoder()
                .unwrap(),
        };
        let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), s);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode_with(bytes: &[u8], max_window_log: u32, threads: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let src = Source::with_capacity(7, bytes);
        streams(src, max_window_log, threads, 256 << 20).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn streams_and_what_may_follow_them() {
        for threads in [1, 2] {
            let decode = |b: &[u8]| decode_with(b, 27, threads);
            let mut two = stream(b"hello ", 1 << 20, None);
            two.extend(stream(b"world", 1 << 20, None));
            assert_eq!(decode(&two).unwrap(), b"hello world");
            // Stream padding: zeros in multiples of four, between streams and at the end.
            let a = stream(b"a", 1 << 20, None);
            let padded = [&a[..], &[0; 8], &stream(b"b", 1 << 20, None), &[0; 12]].concat();
            assert_eq!(decode(&padded).unwrap(), b"ab");
            for tail in [&b"junk"[..], &[0; 10], &MAGIC[..5], &[0, 0, 0, 0, 1]] {
                let t = [&two[..], tail].concat();
                assert!(decode(&t).is_err(), "{tail:?} after the last stream ({threads} threads)");
            }
            assert!(decode(&two[..two.len() - 1]).is_err(), "a cut stream");
            let mut bad = two.clone();
            let n = bad.len();
            bad[n / 2] ^= 0x40;
            assert!(decode(&bad).is_err(), "a damaged stream");
            assert_eq!(decode(b"").unwrap(), b"");
        }
    }

    #[test]
    fn blocks_decode_on_threads_in_order() {
        // 40 blocks of 64 KiB, not all compressible alike.
        let data: Vec<u8> = (0..40 * 65536u32).map(|i| ((i / 7) ^ (i >> 12)) as u8).collect();
        let s = stream(&data, 1 << 16, Some(64 << 10));
        for threads in [1, 2, 4] {
            assert!(decode_with(&s, 27, threads).unwrap() == data, "{threads} threads");
        }
        let mut bad = s.clone();
        bad[s.len() / 2] ^= 1;
        assert!(decode_with(&bad, 27, 4).is_err(), "a damaged block");
        assert!(decode_with(&s[..s.len() / 2], 27, 4).is_err(), "cut in the middle");
    }

    #[test]
    fn a_dictionary_over_the_window_limit_is_refused() {
        let s = stream(b"small data, large dictionary", 64 << 20, None);
        for threads in [1, 2] {
            assert_eq!(decode_with(&s, 27, threads).unwrap(), b"small data, large dictionary");
            let e = decode_with(&s, 20, threads).unwrap_err();
            assert!(e.to_string().contains("memory limit"), "{e}");
        }
    }
}
