//! The frame-parallel decoder's tests: multi-frame archives decoded on several threads
//! against the sequential decoder, damaged frames, cancellation, memory bounds.

use std::io::Read;

use super::*;
use crate::archive::{Ahead, Lendable, Skip};
use crate::decode::frames::{Event, Walker};
use crate::pool::Pool;

/// Frames of `parts`: even ones with a checksum and no size (as `zstd` writes from a
/// pipe), odd ones with their size and no checksum (as Agave writes them), which workers
/// decode in place when they fit.
fn frames<P: AsRef<[u8]>>(parts: &[P]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in parts.iter().map(AsRef::as_ref).enumerate() {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(i % 2 == 0).unwrap();
        if i % 2 == 1 {
            e.set_pledged_src_size(Some(p.len() as u64)).unwrap();
        }
        std::io::Write::write_all(&mut e, p).unwrap();
        out.extend_from_slice(&e.finish().unwrap());
        if i % 3 == 1 {
            // A skippable frame now and then.
            out.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9]);
        }
    }
    out
}

/// Where each frame of `data` starts.
fn frame_starts(data: &[u8]) -> Vec<usize> {
    let mut ev = Vec::new();
    Walker::new(1 << 31).feed(data, &mut ev).unwrap();
    ev.iter()
        .filter_map(|e| match e {
            Event::Start { offset, .. } => Some(*offset as usize),
            _ => None,
        })
        .collect()
}

/// Returns `data` in reads that end at each of `cuts` (and wherever the caller's buffer
/// ends), as a pipe returns what its writer wrote.
struct Reads {
    data: Vec<u8>,
    cuts: Vec<usize>,
    at: usize,
}

impl Reads {
    fn new(data: Vec<u8>, mut cuts: Vec<usize>) -> Reads {
        cuts.sort_unstable();
        Reads { data, cuts, at: 0 }
    }
}

impl Read for Reads {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let stop = self.cuts.iter().copied().find(|&c| c > self.at);
        let end = stop.unwrap_or(self.data.len()).min(self.data.len()).min(self.at + buf.len());
        let n = end - self.at;
        buf[..n].copy_from_slice(&self.data[self.at..end]);
        self.at = end;
        Ok(n)
    }
}

/// A decoder of `input` with `workers` workers and a frame pool of `buffers` 64 KiB
/// buffers (`ahead_cap` all but one), reading 2 MiB ahead, and its counters.
fn decoder(
    input: impl Read + Send + 'static,
    workers: usize,
    buffers: usize,
) -> (ParallelZstd, Arc<DecodeStats>) {
    let opts = Options {
        workers,
        max_window_log: 27,
        ahead_cap: ahead_cap(buffers),
        input_budget: 2 << 20,
        piece: PIECE_STREAM,
        start: UnitStart::START,
    };
    decoder_with(input, opts, buffers)
}

/// `decoder` with these options.
fn decoder_with(
    input: impl Read + Send + 'static,
    opts: Options,
    buffers: usize,
) -> (ParallelZstd, Arc<DecodeStats>) {
    let stats = Arc::new(DecodeStats::default());
    let pool = Pool::new(64 << 10, buffers);
    let d = ParallelZstd::new(Box::new(input), opts, pool, stats.clone()).unwrap();
    (d, stats)
}

/// One part of `content` per size, seeded by its index.
fn parts(sizes: impl Iterator<Item = usize>) -> Vec<Vec<u8>> {
    sizes.enumerate().map(|(i, n)| content(n, i as u64)).collect()
}

fn content(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 3 == 0 { x as u8 } else { (i / 7) as u8 }
        })
        .collect()
}

/// Decodes `data` with `workers` workers and a pool of `buffers`, the reader pausing after
/// its first byte, so that the workers decode ahead whatever the machine's load (a reader
/// that reaches every frame first, on a busy machine, leaves them nothing).
fn decode_after_a_pause(
    data: Vec<u8>,
    workers: usize,
    buffers: usize,
) -> (Vec<u8>, Arc<DecodeStats>) {
    let (mut d, stats) = decoder(io::Cursor::new(data), workers, buffers);
    let mut got = vec![0];
    d.read_exact(&mut got).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    d.read_to_end(&mut got).unwrap();
    (got, stats)
}

fn decode(data: Vec<u8>, workers: usize, buffers: usize, read: usize) -> io::Result<Vec<u8>> {
    decode_skipping(data, workers, buffers, read, 0).map(|(out, _, _)| out)
}

/// Decodes `data`, each read of up to `read` bytes followed by a skip of `skip` (in place
/// where the stream can, else read into a scratch buffer, as the tar reader does); returns
/// what was read with zeros where bytes were skipped, which bytes were read, and the stats.
fn decode_skipping(
    data: Vec<u8>,
    workers: usize,
    buffers: usize,
    read: usize,
    skip: usize,
) -> io::Result<(Vec<u8>, Vec<bool>, Arc<DecodeStats>)> {
    let (mut d, stats) = decoder(io::Cursor::new(data), workers, buffers);
    let (mut out, mut was_read) = (Vec::new(), Vec::new());
    let mut buf = vec![0; read.max(skip)];
    loop {
        match d.read(&mut buf[..read])? {
            0 => return Ok((out, was_read, stats)),
            n => {
                out.extend_from_slice(&buf[..n]);
                was_read.resize(out.len(), true);
            }
        }
        let mut left = skip;
        while left > 0 {
            let n = match d.skip_in_place(left as u64)? as usize {
                0 => d.read(&mut buf[..left])?,
                n => n,
            };
            if n == 0 {
                return Ok((out, was_read, stats));
            }
            out.resize(out.len() + n, 0);
            was_read.resize(out.len(), false);
            left -= n;
        }
    }
}

#[test]
fn frames_with_their_size_decode_in_place_and_skip_without_copying() {
    let parts = parts((0..10).map(|i| 200_000 + i * 50_000));
    let want: Vec<u8> = parts.concat();
    let data = frames(&parts);
    // 64 buffers of 64 KiB: every odd frame (at most 10 buffers) fits in `ahead_cap`.
    for workers in [1, 3] {
        let (got, stats) = decode_after_a_pause(data.clone(), workers, 64);
        assert!(got == want, "workers {workers}");
        let in_place = stats.frames_in_place.load(Ordering::Relaxed);
        let ahead = stats.frames_ahead.load(Ordering::Relaxed);
        assert!(in_place > 0 && in_place <= ahead, "{in_place} of {ahead} in place");
        // Skipping: what was read is where it belongs; skipped bytes are zeros here.
        for (read, skip) in [(512, 100_000), (7, 65_536), (100_000, 1)] {
            let (got, was_read, _) =
                decode_skipping(data.clone(), workers, 64, read, skip).unwrap();
            assert_eq!(got.len(), want.len(), "reads of {read}, skips of {skip}");
            assert!(was_read.iter().any(|r| !r), "something was skipped");
            let wrong = (0..want.len()).find(|&i| was_read[i] && got[i] != want[i]);
            assert_eq!(wrong, None, "reads of {read}, skips of {skip}");
        }
    }
    // 4 buffers: no frame fits in `ahead_cap` (3); all stream, and still in order.
    let (got, _, stats) = decode_skipping(data, 1, 4, 4096, 0).unwrap();
    assert!(got == want);
    assert_eq!(stats.frames_in_place.load(Ordering::Relaxed), 0);
}

/// Where the next bytes lie when a worker's buffer holds them (`Skip::ahead`).
fn lendable(d: &mut ParallelZstd) -> Option<Lendable> {
    match d.ahead().unwrap() {
        Ahead::Lend(at) => Some(at),
        Ahead::Read(_) => None,
    }
}

/// The tar stage's way with a worker's buffers (`lend`): pieces of every length handed
/// on, mixed with reads and skips, each piece held a while by another thread (a writer)
/// before it is dropped. Every byte comes where it belongs, read or lent; the frames' buffers
/// all come back to the pool once the pieces are dropped; and with a frame's worth of room
/// for the pieces held, workers go on decoding in place (they wait for a run rather than
/// stream, `run_for`).
#[test]
fn lent_pieces_hold_their_bytes_and_their_buffers_come_back() {
    let parts = parts((0..12).map(|i| 200_000 + i * 41_000));
    let want: Vec<u8> = parts.concat();
    let data = frames(&parts);
    for (workers, buffers) in [(1, 64), (3, 64), (1, 12), (3, 6)] {
        let ctx = format!("{workers} workers, {buffers} buffers");
        let (mut d, stats) = decoder(io::Cursor::new(data.clone()), workers, buffers);
        let pool = d.pool.clone();
        let (tx, rx) = std::sync::mpsc::channel::<PoolBuf>();
        let writer = std::thread::spawn(move || {
            for piece in rx {
                std::thread::sleep(Duration::from_micros(200));
                drop(piece);
            }
        });
        let (mut pos, mut step, mut buf) = (1, 0usize, vec![0; 70_000]);
        // Time for the workers to decode ahead whatever the machine's load (see
        // `decode_after_a_pause`).
        d.read_exact(&mut buf[..1]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        while pos < want.len() {
            step += 1;
            match (step % 5, lendable(&mut d)) {
                (0..=2, Some(at)) => {
                    let n = at.len.min([1, 511, 4096, 65_536, 100_000][step % 5 + step % 3]);
                    let piece = d.lend(n).unwrap();
                    assert_eq!(piece.as_ptr() as usize, at.addr, "{ctx}");
                    assert!(piece.data() == &want[pos..pos + n], "{ctx}: at {pos}");
                    pos += n;
                    tx.send(piece).unwrap();
                }
                (3, _) => {
                    let n = d.read(&mut buf[..(step * 7919) % 70_000 + 1]).unwrap();
                    assert!(buf[..n] == want[pos..pos + n], "{ctx}: at {pos}");
                    pos += n;
                }
                _ => {
                    let n = d.skip_in_place(3000).unwrap() as usize;
                    let n = match n {
                        0 => d.read(&mut buf[..3000]).unwrap(),
                        n => n,
                    };
                    pos += n;
                }
            }
        }
        assert_eq!(d.read(&mut buf).unwrap(), 0, "{ctx}");
        drop(tx);
        writer.join().unwrap();
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert!(count(&stats.lent) > 0, "{ctx}: {stats:?}");
        drop(d);
        assert!(pool.try_get_run(buffers).is_some(), "{ctx}: a buffer was not given back");
    }
    // Everything a worker decoded handed on, the last 6 pieces held: the odd frames (those
    // with a size) that a worker decoded are still decoded in place.
    let (mut d, stats) = decoder(io::Cursor::new(data.clone()), 1, 24);
    let (mut held, mut got, mut buf) = (VecDeque::new(), vec![0], vec![0; 100_000]);
    d.read_exact(&mut got).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    loop {
        let Some(at) = lendable(&mut d) else {
            // The reader's own frame: read.
            match d.read(&mut buf).unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
            continue;
        };
        let piece = d.lend(at.len).unwrap();
        got.extend_from_slice(piece.data());
        held.push_back(piece);
        if held.len() > 6 {
            held.pop_front();
        }
    }
    assert!(got == want);
    assert!(stats.frames_in_place.load(Ordering::Relaxed) > 0, "{stats:?}");
}

#[test]
fn multi_frame_in_order_at_any_thread_count() {
    let parts = parts((0..12).map(|i| 100_000 + i * 37_000));
    let want: Vec<u8> = parts.concat();
    let data = frames(&parts);
    // 2 buffers, the smallest frame pool (`budget::divide`): `ahead_cap` 1, and with 4
    // workers a share of none, so every frame streams.
    for workers in [0, 1, 2, 4] {
        for (buffers, read) in [(2, 512), (4, 512), (16, 100_000), (64, 7)] {
            let got = decode(data.clone(), workers, buffers, read).unwrap();
            assert!(got == want, "workers {workers}, {buffers} buffers, reads of {read}");
        }
    }
    // One frame, and no frames at all.
    assert_eq!(decode(frames(&[&want]), 2, 8, 4096).unwrap(), want);
    assert_eq!(decode(Vec::new(), 2, 8, 4096).unwrap(), b"");
}

/// Frame headers cut by the reads anywhere: reads of every size from 1 to 32 bytes over
/// each frame's and each skippable frame's start, workers or not. Until frames.rs gave the
/// bytes of a header that began in an earlier read, such a frame's decoder got a stream
/// without its magic ("Unknown frame descriptor") or without its data.
#[test]
fn headers_cut_by_the_reads_anywhere() {
    let parts = parts((0..9).map(|i| 3_000 + i * 7_777));
    let want: Vec<u8> = parts.concat();
    let data = frames(&parts);
    let mut starts = frame_starts(&data);
    // The skippable frames `frames` puts after every third frame.
    let skippable: Vec<usize> = starts.iter().map(|s| s.saturating_sub(10)).collect();
    starts.extend(skippable.into_iter().filter(|&s| data[s] == 0x50));
    assert!(starts.len() > 10);
    for read in 1..=32 {
        let cuts: Vec<usize> = starts
            .iter()
            .flat_map(|&s| (s.saturating_sub(20)..s + 24).step_by(read))
            .filter(|&c| c > 0 && c < data.len())
            .collect();
        for workers in [0, 1, 3] {
            let (mut d, _) = decoder(Reads::new(data.clone(), cuts.clone()), workers, 8);
            let mut got = Vec::new();
            let r = d.read_to_end(&mut got);
            assert!(r.is_ok() && got == want, "reads of {read}, {workers} workers: {r:?}");
        }
    }
}

/// Frames of `parts`, each with its size in the header and a checksum: a run of them
/// decodes in place in one job.
fn sized_frames<P: AsRef<[u8]>>(parts: &[P]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts.iter().map(AsRef::as_ref) {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(true).unwrap();
        e.set_pledged_src_size(Some(p.len() as u64)).unwrap();
        std::io::Write::write_all(&mut e, p).unwrap();
        out.extend_from_slice(&e.finish().unwrap());
    }
    out
}

/// Small frames share jobs (runs of them found in one read, BATCH_BYTES at most), decoded
/// in order by the reader and the workers, in place when every header gives its size, and
/// however the reads cut them.
#[test]
fn small_frames_share_jobs() {
    let parts = parts((0..3000).map(|i| i % 300));
    let want: Vec<u8> = parts.concat();
    for (data, shape) in [(frames(&parts), "mixed"), (sized_frames(&parts), "sized")] {
        for (workers, buffers, read) in [(0, 8, 4096), (1, 8, 100), (3, 64, 7), (3, 2, 65_536)] {
            let ctx = format!("{shape}, {workers} workers, {buffers} buffers, reads of {read}");
            let (got, _, stats) = decode_skipping(data.clone(), workers, buffers, read, 0).unwrap();
            assert!(got == want, "{ctx}");
            let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
            assert_eq!(count(&stats.frames), 3000, "{ctx}");
            assert!(count(&stats.jobs) * 50 < 3000, "{ctx}: {} jobs", count(&stats.jobs));
        }
        // Reads that cut every frame: a frame begun in an earlier read is a job of its own.
        let cuts = (0..data.len()).step_by(13).collect();
        let (mut d, _) = decoder(Reads::new(data.clone(), cuts), 2, 8);
        let mut got = Vec::new();
        d.read_to_end(&mut got).unwrap();
        assert!(got == want, "{shape}, reads of 13");
    }
    // Workers that decode ahead do it in place.
    let (got, stats) = decode_after_a_pause(sized_frames(&parts), 3, 64);
    assert!(got == want);
    assert!(stats.frames_in_place.load(Ordering::Relaxed) > 100, "{stats:?}");
}

/// A damaged frame in a job of many is the one reported, in its turn, with its own number
/// and place: its checksum, its declared size, its block headers.
#[test]
fn a_bad_frame_among_small_ones_is_named() {
    let parts = parts((0..400).map(|i| 200 + i % 50));
    let data = sized_frames(&parts);
    let starts = frame_starts(&data);
    let bad = 237;
    let (at, len) = (starts[bad], starts[bad + 1] - starts[bad]);
    let mut damaged = Vec::new();
    // The checksum (its last 4 bytes); a size 1 more than it is (the frames are
    // single-segment, with a 1-byte size after the descriptor); its block's header made a
    // raw block of 100 bytes, so the walker finds the frame's end elsewhere.
    let mut d = data.clone();
    d[at + len - 2] ^= 0x40;
    damaged.push(d);
    let mut d = data.clone();
    assert_eq!(d[at + 4] & 0xe0, 0x20, "single segment, 1-byte size");
    d[at + 5] = d[at + 5].wrapping_add(1);
    damaged.push(d);
    let mut d = data.clone();
    let block = at + 6;
    d[block..block + 3].copy_from_slice(&[(100 << 3) as u8 | 1, 100 >> 5, 0]);
    damaged.push(d);
    // A reserved block type: the walker's own words, not a truncation its decoder saw
    // first.
    let mut d = data.clone();
    d[block] |= 0b110;
    damaged.push(d);
    for (i, d) in damaged.into_iter().enumerate() {
        for workers in [0, 1, 3] {
            let err = decode(d.clone(), workers, 64, 4096).unwrap_err().to_string();
            // The walker names the block it could not walk.
            let byte = if i == 3 { block } else { starts[bad] };
            let want = format!("zstd frame {bad} (byte {byte} of the archive)");
            assert!(err.starts_with(&want), "damage {i}, {workers} workers: {err}");
            if i == 3 {
                assert!(err.contains("reserved block type"), "{workers} workers: {err}");
            }
        }
    }
}

/// However many frames the input holds and however the reads cut them, at most
/// JOBS_PER_DECODER jobs per decoder wait for a reader that does not read. Each job waited
/// in the queue before, with two channels: 1.2 million 7-byte frames took 1.46 GB.
#[test]
fn jobs_waiting_for_the_reader_are_bounded() {
    let parts = parts((0..20_000).map(|_| 7));
    let data = frames(&parts);
    for cut in [None, Some(11)] {
        let cuts = cut.map_or(Vec::new(), |c| (0..data.len()).step_by(c).collect());
        // As much read ahead as 64 reads (each reserves a whole piece, however few bytes
        // it returns): the bound on jobs is what holds them.
        let opts = Options {
            workers: 3,
            max_window_log: 27,
            ahead_cap: ahead_cap(8),
            input_budget: 64 << 20,
            piece: PIECE_STREAM,
            start: UnitStart::START,
        };
        let (mut d, _) = decoder_with(Reads::new(data.clone(), cuts), opts, 8);
        let mut first = [0u8; 1];
        d.read_exact(&mut first).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let waiting = d.shared.lock().queue.len();
        assert!(waiting <= 4 * JOBS_PER_DECODER, "reads cut at {cut:?}: {waiting} jobs wait");
        assert!(waiting >= 2, "reads cut at {cut:?}: the test waited too little");
        let mut rest = Vec::new();
        d.read_to_end(&mut rest).unwrap();
        assert_eq!(rest.len() + 1, 7 * 20_000);
    }
}

#[test]
fn a_corrupt_frame_fails_in_its_turn() {
    let parts = parts(std::iter::repeat_n(200_000, 8));
    let mut data = frames(&parts);
    // Corrupt frame 4 (it has a checksum) in the middle: later frames decode fine and may
    // finish first.
    let starts = frame_starts(&data);
    let mid = (starts[4] + starts[5]) / 2;
    for b in &mut data[mid..mid + 16] {
        *b ^= 0x5a;
    }
    for workers in [0, 1, 3] {
        let opts = Options {
            workers,
            max_window_log: 27,
            ahead_cap: 8,
            input_budget: 4 << 20,
            piece: PIECE_STREAM,
            start: UnitStart::START,
        };
        let (mut d, _) = decoder_with(io::Cursor::new(data.clone()), opts, 16);
        let mut got = Vec::new();
        let err = loop {
            let mut buf = vec![0; 8192];
            match d.read(&mut buf) {
                Ok(0) => panic!("no error"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        let msg = err.to_string();
        let want = format!("zstd frame 4 (byte {} of the archive)", starts[4]);
        assert!(msg.starts_with(&want), "{msg}");
        // Everything before the bad frame came out, nothing after it.
        assert_eq!(&got[..4 * 200_000], &parts[..4].concat()[..]);
        assert!(got.len() <= 5 * 200_000);
        // The error is sticky.
        assert!(d.read(&mut [0; 10]).is_err());
    }
}

/// A frame whose header declares a size other than what it decodes to fails in its turn,
/// decoded in place or streamed, with nothing of it delivered when decoded in place.
#[test]
fn a_frame_of_another_size_than_declared() {
    let parts = parts(std::iter::repeat_n(150_000, 6));
    let data = frames(&parts);
    let starts = frame_starts(&data);
    // Frame 3 (odd: it has a size): descriptor, no window byte if single-segment, no
    // dictionary, then 4 bytes of size for 150,000.
    let fhd = data[starts[3] + 4];
    assert_eq!(fhd >> 6, 2, "a 4-byte content size");
    let at = starts[3] + 5 + usize::from(fhd & 0x20 == 0);
    for delta in [-4096i64, 4096] {
        let mut bad = data.clone();
        let size = u32::from_le_bytes(bad[at..at + 4].try_into().unwrap());
        bad[at..at + 4].copy_from_slice(&((size as i64 + delta) as u32).to_le_bytes());
        for workers in [0, 1, 3] {
            let err = decode(bad.clone(), workers, 64, 4096).unwrap_err().to_string();
            let want = format!("zstd frame 3 (byte {} of the archive)", starts[3]);
            assert!(err.starts_with(&want), "size {delta:+}, {workers} workers: {err}");
        }
    }
}

/// A streamed frame whose output ends exactly at a buffer's end, with its last bytes (the
/// checksum) in the next read: the empty buffer the worker had taken for more output is
/// given back. Left counted, two of them stopped the one worker of a 4-buffer pool for good.
#[test]
fn no_buffer_is_left_counted() {
    let parts = parts(std::iter::repeat_n(2 << 16, 40));
    let want: Vec<u8> = parts.concat();
    // Every frame with a checksum and no size, so the worker streams them.
    let mut data = Vec::new();
    for p in &parts {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut e, p).unwrap();
        data.extend_from_slice(&e.finish().unwrap());
    }
    let mut ends = frame_starts(&data);
    ends.remove(0);
    ends.push(data.len());
    // Reads that end 2 bytes before each frame's end.
    let cuts = ends.iter().map(|e| e - 2).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut d, _) = decoder(Reads::new(data, cuts), 1, 4);
        let mut got = Vec::new();
        d.read_to_end(&mut got).unwrap();
        let unread = d.shared.lock().unread;
        let _ = tx.send((got, unread));
    });
    let (got, unread) = rx.recv_timeout(Duration::from_secs(60)).expect("no hang");
    assert!(got == want);
    assert_eq!(unread, 0, "buffers left counted as unread");
}

#[test]
fn truncated_and_garbage() {
    let parts = parts(std::iter::repeat_n(150_000, 4));
    let data = frames(&parts);
    for workers in [0, 2] {
        let cut = data[..data.len() - 10].to_vec();
        let err = decode(cut, workers, 8, 4096).unwrap_err();
        assert!(err.to_string().contains("frame 3"), "{err}");
        assert!(err.to_string().contains("ends inside the frame"), "{err}");
        let mut junk = data.clone();
        junk.extend_from_slice(b"not zstd");
        let err = decode(junk, workers, 8, 4096).unwrap_err();
        assert!(err.to_string().contains("unknown magic"), "{err}");
    }
}
