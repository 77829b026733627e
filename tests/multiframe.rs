//! Agave-shaped multi-frame zstd (issue 11): a tar stream of ~100 MiB cut into independent
//! frames of 32 MiB of tar each, as Agave writes snapshots (odd frames with their size in the
//! header as Agave's `ZSTD_compress2` writes them, which workers decode in place; even ones as
//! `zstd` reading a pipe writes them: `util::engine::frame_at`), with skippable frames between
//! some of them, extracted and listed under every decoder row
//! (`--threads 1`, the default, 4) from a file and from standard input, against GNU tar. The
//! small-frame framings (64 KiB, 1021 bytes) of every other suite are in the engine table;
//! these archives are the ones large enough for frames to be decoded ahead while the reader is
//! on another, so `--json` must show them.

mod util;

use util::engine::{DECODERS, ZSTD_32M};
use util::rawtar::{Header, Tar};
use util::snapshot::{Compare, assert_same, snapshot};
use util::{Cmd, Input, Rng, TestDir, have_tools};

/// Account files: ~100 MiB in all, sizes from 1 KiB to 9 MiB so members straddle the three
/// frame edges at various offsets; content compressible about 3x like account storage (a
/// random 32-byte key then mostly repeated bytes).
fn agave_tar() -> Vec<u8> {
    let mut t = Tar::new();
    t.member(&Header { mtime: util::rawtar::Num::Octal(0), ..Header::file("version") }, b"1.2.0");
    let mut rng = Rng::new(11);
    let mut total = 0usize;
    let mut id = 0;
    while total < 100 << 20 {
        let size = match id % 5 {
            0 => 1024,
            1 => 9 << 20,
            2 => 3 << 20,
            3 => 777_777,
            _ => 5 << 20,
        };
        let mut data = Vec::with_capacity(size);
        while data.len() < size {
            data.extend(rng.bytes(32));
            data.extend(std::iter::repeat_n((id % 251) as u8, 104));
        }
        data.truncate(size);
        t.file(format!("accounts/312345678.{id}"), &data);
        total += size;
        id += 1;
    }
    t.finish()
}

/// The archive in 32 MiB frames, with a skippable frame after the first.
fn agave_zst(tar: &[u8]) -> Vec<u8> {
    let mut z = ZSTD_32M.encode(tar);
    let first = ZSTD_32M.frame_offsets(tar)[1];
    let skippable = [0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
    z.splice(first..first, skippable);
    z
}

/// `--threads 4` with the default `--memory`: the frames get a pool of their own with one of
/// Agave's 32 MiB frames per worker and the reader's extra buffer (97 MiB), file data keeps
/// 64 MiB, and workers decode the odd frames (their size in the header) in place. With one 64
/// MiB pool for both, each of 3 workers had a share of 10 buffers and no frame was decoded in
/// place. Where an eighth of the memory the process may use (RAM, a cgroup's limit,
/// RLIMIT_AS) is less than both pools, the frame pool is smaller: then only its bounds are
/// checked, with a note.
fn check_default_memory(json: &str, ctx: &str) {
    const MIB: u64 = 1 << 20;
    let files = util::json_number(json, "pool_bytes").expect("pool_bytes");
    let frames = util::json_number(json, "frame_pool_bytes").expect("frame_pool_bytes");
    assert_eq!(files, 64 * MIB, "{ctx} file data pool: {json}");
    assert!((33 * MIB..=97 * MIB).contains(&frames), "{ctx} frame pool: {json}");
    if frames < 97 * MIB {
        util::note(&format!("{ctx}: a frame pool of {} MiB (little memory?)", frames / MIB));
        return;
    }
    let in_place = util::json_number(json, "frames_in_place").unwrap_or(0);
    assert!(in_place >= 1, "{ctx} no frame decoded in place: {json}");
}

#[test]
fn agave_frames_extract_and_list_like_gnu_tar() {
    let test = "agave_frames_extract_and_list_like_gnu_tar";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let tar = agave_tar();
    let plain = td.write("agave.tar", &tar);
    let zst = td.write("agave.tar.zst", agave_zst(&tar));
    let frames = tar.len().div_ceil(32 << 20) as u64;
    assert!(frames >= 4, "the archive should have 4 frames or more, has {frames}");

    let gnu = td.fresh("gnu");
    let g = Cmd::new("tar").arg("-xf").arg(&plain).arg("-C").arg(&gnu).run();
    assert!(g.success(), "GNU tar failed\n{}", g.describe());
    let want = snapshot(&gnu);
    let started = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    let listed = Cmd::new("tar").arg("-tf").arg(&plain).run().stdout_str();

    let mut failed = Vec::new();
    for decoder in DECODERS {
        for stdin in [false, true] {
            let ctx = format!("[{}, {}]", decoder.name, if stdin { "stdin" } else { "file" });
            let r = std::panic::catch_unwind(|| {
                let dest = td.fresh("ours");
                let mut c = util::fastuntar();
                c.args(decoder.args).args(["--json", "--direct-io", "-C"]).arg(&dest);
                if stdin {
                    c.args(["-x", "-"]).stdin(Input::File(zst.clone()));
                } else {
                    c.arg("-xf").arg(&zst);
                }
                let out = c.run();
                out.expect_code(0);
                let ours = snapshot(&dest);
                assert_same(
                    &want,
                    "GNU tar",
                    &ours,
                    "fastuntar",
                    &Compare::extraction(started),
                    &ctx,
                );
                let json = out.stdout_str();
                let threads = util::json_number(&json, "decode_threads").expect("decode_threads");
                if decoder.args == ["--threads", "1"] {
                    assert_eq!(threads, 1, "{ctx} {json}");
                }
                if threads == 1 {
                    // --threads 1, or the default on a machine of 2 CPUs or fewer (one is
                    // left for the writer): the one streaming decoder, which counts nothing.
                    assert!(
                        json.contains("\"frames\":null"),
                        "{ctx} one streaming decoder: {json}"
                    );
                } else {
                    assert_eq!(util::json_number(&json, "frames"), Some(frames), "{ctx} {json}");
                    if decoder.args == ["--threads", "4"] {
                        assert_eq!(threads, 4, "{ctx} {json}");
                        // 3 workers: with every 4th frame the reader's, the rest were ahead.
                        let ahead = util::json_number(&json, "frames_ahead").unwrap_or(0);
                        assert!(ahead >= frames - frames.div_ceil(4), "{ctx} {json}");
                        let in_place = util::json_number(&json, "frames_in_place").unwrap_or(0);
                        assert!(in_place <= ahead, "{ctx} {json}");
                        check_default_memory(&json, &ctx);
                    }
                }
                // -t lists what GNU tar lists, through the same decoder.
                let mut l = util::fastuntar();
                l.args(decoder.args).arg("-t");
                if stdin {
                    l.arg("-").stdin(Input::File(zst.clone()));
                } else {
                    l.arg("-f").arg(&zst);
                }
                let out = l.run();
                out.expect_code(0);
                assert_eq!(out.stdout_str(), listed, "{ctx} -t");
            });
            if r.is_err() {
                failed.push(ctx);
            }
        }
    }
    assert!(failed.is_empty(), "{test} failed under {failed:?} (messages above)");
}

/// A frame in the middle of the 32 MiB framing cut short: one line naming the member being
/// written, the frame and its byte in the archive, "incomplete"; members before it complete,
/// none after it; under every decoder row.
#[test]
fn a_damaged_middle_frame_of_agave_framing() {
    let test = "a_damaged_middle_frame_of_agave_framing";
    let td = TestDir::new(test);
    let tar = agave_tar();
    let offsets = ZSTD_32M.frame_offsets(&tar);
    let mut z = ZSTD_32M.encode(&tar);
    // Frame 1 loses its last 1000 bytes (its last block and checksum): the stream then holds
    // frame 2's magic where frame 1's next block header should be.
    let end1 = offsets[2];
    z.drain(end1 - 1000..end1);
    let zst = td.write("cut.tar.zst", &z);
    let mut failed = Vec::new();
    for decoder in DECODERS {
        let ctx = decoder.name;
        let r = std::panic::catch_unwind(|| {
            let dest = td.fresh("ours");
            let out = util::fastuntar()
                .args(decoder.args)
                .arg("-xf")
                .arg(&zst)
                .arg("-C")
                .arg(&dest)
                .run();
            assert_eq!(out.code, Some(2), "[{ctx}] {}", out.describe());
            let diags = out.diagnostics();
            assert_eq!(diags.len(), 1, "[{ctx}] one line\n{}", out.describe());
            let line = &diags[0];
            assert!(line.contains("accounts/"), "[{ctx}] names the member: {line}");
            assert!(line.contains("incomplete"), "[{ctx}] says incomplete: {line}");
            if decoder.args == ["--threads", "4"] {
                assert!(line.contains("zstd frame 1 (byte "), "[{ctx}] names the frame: {line}");
            }
            // Nothing from frame 2 on: no member that starts after 64 MiB of tar exists.
            let mut at = 0usize;
            while at + 512 <= tar.len() && tar[at] != 0 {
                let name =
                    String::from_utf8_lossy(&tar[at..at + 100]).trim_end_matches('\0').to_string();
                let size = usize::from_str_radix(
                    String::from_utf8_lossy(&tar[at + 124..at + 135])
                        .trim_matches(|c| c == '\0' || c == ' '),
                    8,
                )
                .unwrap();
                if at >= 64 << 20 {
                    assert!(!dest.join(&name).exists(), "[{ctx}] {name} is after the bad frame");
                }
                at += 512 + size.div_ceil(512) * 512;
            }
        });
        if r.is_err() {
            failed.push(ctx);
        }
    }
    assert!(failed.is_empty(), "{test} failed under {failed:?} (messages above)");
}

/// Pages of `path` in the page cache (mincore over a mapping of it).
fn resident_bytes(path: &std::path::Path) -> u64 {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let page = 4096;
    // Safety: a fresh read-only shared mapping of an open file, unmapped below; mincore writes
    // one byte per page into a vector of that many bytes.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let mut vec = vec![0u8; len.div_ceil(page)];
        assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
        libc::munmap(p, len);
        vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page as u64
    }
}

/// Drops `path`'s clean pages from the page cache.
fn evict(path: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // Safety: the fd is open; a hint that takes no pointers.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// An archive file that is not in the page cache is read by the frame-parallel decoder with
/// O_DIRECT (decode/archive_file.rs): the extraction is the same as from a cached archive, and
/// the archive is not left in the page cache (only the first read, for format detection, goes
/// through it). A cached archive is read from the cache and stays there.
#[test]
fn uncached_archives_are_read_direct() {
    let test = "uncached_archives_are_read_direct";
    let td = TestDir::new(test);
    let tar = agave_tar();
    let zst = td.write("agave.tar.zst", agave_zst(&tar));
    let started = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    use std::os::unix::fs::OpenOptionsExt;
    if std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&zst).is_err() {
        eprintln!("{test}: skipped: the test directory's filesystem refuses O_DIRECT");
        return;
    }
    let extract = |name: &str| {
        let dest = td.fresh(name);
        util::fastuntar()
            .args(["--threads", "2", "--direct-io", "-C"])
            .arg(&dest)
            .arg("-xf")
            .arg(&zst)
            .run()
            .expect_code(0);
        snapshot(&dest)
    };
    evict(&zst);
    let before = resident_bytes(&zst);
    if before > 1 << 20 {
        eprintln!("{test}: skipped: {before} bytes of the archive stay cached after eviction");
        return;
    }
    let uncached = extract("uncached");
    let after = resident_bytes(&zst);
    let size = std::fs::metadata(&zst).unwrap().len();
    assert!(
        after <= 2 << 20,
        "{after} of the archive's {size} bytes were left in the page cache: not read direct"
    );
    // Now cached: read through the cache, the same files.
    std::fs::read(&zst).unwrap();
    let cached = extract("cached");
    assert!(resident_bytes(&zst) >= size - 4096, "a cached archive stays cached");
    assert_same(&cached, "cached", &uncached, "uncached", &Compare::extraction(started), test);
}
