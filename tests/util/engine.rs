//! The one table of engine configurations every suite runs under, and the runner that reruns a
//! case per configuration (in the manner of ripgrep's `rgtest!`, which reruns each test per
//! regex engine).
//!
//! A *run* is an input encoding × an engine; an engine is one row of each dimension table:
//!
//! | dimension | table | rows |
//! | --- | --- | --- |
//! | writer: backend × direct IO × threshold | `WRITER_CONFIGS` | 6 |
//! | zstd decoder threads | `DECODERS` | 4 (`--threads 1`, the default, `--threads 4`, and `--threads 4` reading the archive from a pipe in irregular reads) |
//! | writer threads (issue 12) | the default (one per CPU); scripts/test.sh reruns the writing suites with `FASTUNTAR_WRITER_THREADS` | 2 |
//! | input encoding | `Encoding` (`PLAIN_AND_ZSTD`, `ZSTD_FRAMINGS`) | plain, zstd in 1 frame, 32 MiB frames, 64 KiB frames, 1021-byte frames |
//!
//! Which rows meet which is decided in one place, `Engine::all`:
//! * a plain tar runs every writer row once: no decoder runs, so `--threads` changes nothing;
//! * a compressed input runs every decoder row, each with every writer row of `Set::All`, or
//!   with the two writers of `Set::Sweep` (suites that run hundreds of inputs; the reason is
//!   said where they choose it); the piped decoder row with one writer only (`PIPED_WRITER`):
//!   what it tests is in the decoder.
//!
//! Adding a row to a table adds it to every differential, hostile, corrupt and fault case.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::{Cmd, Input, WRITER_CONFIGS, WriterConfig, fastuntar};

/// One zstd decoder setting: a row of the decoder dimension.
#[derive(Debug, Clone, Copy)]
pub struct DecoderConfig {
    pub name: &'static str,
    pub args: &'static [&'static str],
    /// The archive reaches fastuntar on its standard input through a pipe, in reads that end
    /// inside frame headers (`piped_reads`), instead of as a file.
    pub piped: bool,
}

/// The decoder rows: the old single streaming decoder, the default (the CPUs we may run on),
/// and the frame-parallel decoder with 3 workers even on a 1- or 2-core machine, from a file
/// and from a pipe whose reads end inside frame headers (network reads end anywhere: a header
/// cut by a read once failed valid archives, issue 27).
pub const DECODERS: &[DecoderConfig] = &[
    DecoderConfig { name: "threads 1", args: &["--threads", "1"], piped: false },
    DecoderConfig { name: "threads default", args: &[], piped: false },
    DecoderConfig { name: "threads 4", args: &["--threads", "4"], piped: false },
    DecoderConfig { name: "threads 4, piped", args: &["--threads", "4"], piped: true },
];

/// The one writer row the piped decoder row runs with.
const PIPED_WRITER: &str = "portable";

/// Most places a piped run's reads are made to end at (`piped_reads`): each costs the pause.
const PIPED_CUTS: usize = 16;

/// How long the piped row's writer waits after each piece, so the reader's read ends there.
const PIPED_PAUSE: Duration = Duration::from_millis(1);

/// `archive` as the piped decoder row feeds it: its first 1-3 bytes alone (format detection
/// must wait for a magic number), then pieces that end inside the headers of zstd and
/// skippable frames (wherever their magic numbers are, a different depth into each, 1 to 17
/// bytes), at most PIPED_CUTS of them spread over the archive, with PIPED_PAUSE after each.
/// Cost (hostile, corrupt and differential, 2026-11-27): 237 runs, 4.3 s of CPU in all.
pub fn piped_reads(archive: &[u8]) -> Input {
    let starts: Vec<usize> = (0..archive.len().saturating_sub(3))
        .filter(|&i| {
            let m = &archive[i..i + 4];
            m == [0x28, 0xb5, 0x2f, 0xfd] || (m[0] & 0xf0 == 0x50 && m[1..] == [0x2a, 0x4d, 0x18])
        })
        .collect();
    let step = starts.len().div_ceil(PIPED_CUTS).max(1);
    let mut cuts = vec![1 + archive.len() % 3];
    cuts.extend(starts.iter().step_by(step).enumerate().map(|(i, s)| s + 1 + (i * 7) % 17));
    Input::cut(archive, &cuts, PIPED_PAUSE)
}

/// How the tar stream reaches fastuntar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The tar stream as it is.
    Plain,
    /// An archive the case compressed itself (a peer-corpus `.tar.zst`, `zstd --long`), as it
    /// is: compressed, so it meets the decoder rows.
    AsBuilt,
    /// zstd level 3; `frame` bytes of tar stream per independent frame (the way Agave writes
    /// snapshots), or one frame. Frames take turns between two shapes (see `frame_at`).
    Zstd { frame: Option<usize> },
}

/// Agave's frames: 32 MiB of tar stream each.
pub const ZSTD_32M: Encoding = Encoding::Zstd { frame: Some(32 << 20) };
/// Small frames: every header, PAX record and member straddles a frame edge somewhere.
pub const ZSTD_64K: Encoding = Encoding::Zstd { frame: Some(64 << 10) };
/// Frames smaller than a tar record and not a multiple of 512, for archives of a few KiB: the
/// edges fall at every offset within a header block across the archive.
pub const ZSTD_1021: Encoding = Encoding::Zstd { frame: Some(1021) };
/// One frame.
pub const ZSTD_1: Encoding = Encoding::Zstd { frame: None };

/// Every framing a compressed case runs in.
pub const ZSTD_FRAMINGS: &[Encoding] = &[ZSTD_1, ZSTD_32M, ZSTD_64K, ZSTD_1021];
/// For small hand-made archives (a few KiB, where 32 MiB and 64 KiB frames are one frame): the
/// plain archive and the archive in frames smaller than a record.
pub const PLAIN_AND_SMALL_FRAMES: &[Encoding] = &[Encoding::Plain, ZSTD_1021];

impl Encoding {
    pub fn name(&self) -> String {
        match self {
            Encoding::Plain => "plain".into(),
            Encoding::AsBuilt => "compressed as built".into(),
            Encoding::Zstd { frame: None } => "zstd 1 frame".into(),
            Encoding::Zstd { frame: Some(n) } if n % (1 << 20) == 0 => {
                format!("zstd {} MiB frames", n >> 20)
            }
            Encoding::Zstd { frame: Some(n) } if n % 1024 == 0 => {
                format!("zstd {} KiB frames", n >> 10)
            }
            Encoding::Zstd { frame: Some(n) } => format!("zstd {n}-byte frames"),
        }
    }

    /// The file-name suffix an archive in this encoding gets.
    pub fn suffix(&self) -> &'static str {
        match self {
            Encoding::Plain => ".tar",
            Encoding::AsBuilt => ".archive",
            Encoding::Zstd { .. } => ".tar.zst",
        }
    }

    /// `tar` (the tar stream) in this encoding.
    pub fn encode(&self, tar: &[u8]) -> Vec<u8> {
        match *self {
            Encoding::Plain | Encoding::AsBuilt => tar.to_vec(),
            Encoding::Zstd { frame } => {
                let piece = frame.unwrap_or(usize::MAX).max(1);
                let mut out = Vec::new();
                for (i, chunk) in tar.chunks(piece).enumerate() {
                    out.extend(frame_at(i, chunk));
                }
                if tar.is_empty() {
                    out.extend(zstd_frame(&[], 3));
                }
                out
            }
        }
    }

    /// Where each frame starts in `encode(tar)` (empty for a plain tar).
    pub fn frame_offsets(&self, tar: &[u8]) -> Vec<usize> {
        let Encoding::Zstd { frame } = *self else { return Vec::new() };
        let mut offsets = Vec::new();
        let mut at = 0;
        for (i, chunk) in tar.chunks(frame.unwrap_or(usize::MAX).max(1)).enumerate() {
            offsets.push(at);
            at += frame_at(i, chunk).len();
        }
        offsets
    }
}

/// The encodings a differential case runs `archive` in: a tar stream as it is and in small
/// zstd frames (64 KiB, or 1021 bytes for an archive under 128 KiB, so that frame edges fall
/// inside it); anything else (compressed by the case) as built.
pub fn encodings_of(archive: &[u8]) -> &'static [Encoding] {
    let is_tar = archive.len() >= 512 && archive[257..262] == *b"ustar";
    if !is_tar {
        &[Encoding::AsBuilt]
    } else if archive.len() >= 128 << 10 {
        &[Encoding::Plain, ZSTD_64K]
    } else {
        PLAIN_AND_SMALL_FRAMES
    }
}

/// Frame `i` of a stream: the two shapes multi-frame archives come in, taking turns, so every
/// suite meets both in every decoder row: odd frames as Agave writes them (`ZSTD_compress2`
/// with the whole frame in hand: its size in the header, no checksum), which the decoder's
/// workers decode in place; even frames, and a single frame, as `zstd` reading a pipe writes
/// them (no size, a checksum), which they decode buffer by buffer.
fn frame_at(i: usize, data: &[u8]) -> Vec<u8> {
    if i.is_multiple_of(2) {
        return zstd_frame(data, 3);
    }
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    enc.set_pledged_src_size(Some(data.len() as u64)).unwrap();
    enc.include_contentsize(true).unwrap();
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// One zstd frame of `data`, with a content checksum.
pub fn zstd_frame(data: &[u8], level: i32) -> Vec<u8> {
    let mut enc = zstd::stream::Encoder::new(Vec::new(), level).unwrap();
    enc.include_checksum(true).unwrap();
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// Which writer rows a compressed input meets (a plain one always meets all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// Every writer row.
    All,
    /// The plain portable writer and io_uring with every file direct: the two that share the
    /// least code. For suites that run hundreds of inputs per case.
    Sweep,
}

const SWEEP_WRITERS: &[&str] = &["portable", "uring+direct(threshold 0)"];

/// One configuration of the engine.
#[derive(Debug, Clone, Copy)]
pub struct Engine {
    pub writer: &'static WriterConfig,
    pub decoder: &'static DecoderConfig,
}

impl Engine {
    /// The engines `encoding` runs under (see the module comment).
    pub fn all(set: Set, encoding: Encoding) -> Vec<Engine> {
        let writers: Vec<&'static WriterConfig> = WRITER_CONFIGS
            .iter()
            .filter(|w| {
                encoding == Encoding::Plain || set == Set::All || SWEEP_WRITERS.contains(&w.name)
            })
            .collect();
        let decoders = if encoding == Encoding::Plain { &DECODERS[..1] } else { DECODERS };
        let mut v = Vec::new();
        for decoder in decoders {
            for &writer in &writers {
                if !decoder.piped || writer.name == PIPED_WRITER {
                    v.push(Engine { writer, decoder });
                }
            }
        }
        v
    }

    pub fn name(&self) -> String {
        format!("{}, {}", self.writer.name, self.decoder.name)
    }

    pub fn args(&self) -> Vec<&'static str> {
        self.writer.args.iter().chain(self.decoder.args).copied().collect()
    }

    /// The binary under test with this engine's flags.
    pub fn cmd(&self) -> Cmd {
        let mut c = fastuntar();
        c.args(self.args());
        c
    }

    /// The binary under test with this engine's flags, reading `archive`: `-f ARCHIVE`, or
    /// under the piped decoder row `-f -` with the archive on a pipe (`piped_reads`).
    pub fn cmd_on(&self, archive: &Path) -> Cmd {
        let mut c = self.cmd();
        if self.decoder.piped {
            c.args(["-f", "-"]).stdin(piped_reads(&super::read(archive)));
        } else {
            c.arg("-f").arg(archive);
        }
        c
    }
}

/// One run of a case: an input encoding under one engine.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub encoding: Encoding,
    pub engine: Engine,
}

impl Run {
    /// `plain; portable, threads 1` — how a failure names the configuration.
    pub fn name(&self) -> String {
        format!("{}; {}", self.encoding.name(), self.engine.name())
    }

    /// The binary under test with this run's flags.
    pub fn cmd(&self) -> Cmd {
        self.engine.cmd()
    }

    /// The binary under test with this run's flags, reading `archive` (`Engine::cmd_on`).
    pub fn cmd_on(&self, archive: &Path) -> Cmd {
        self.engine.cmd_on(archive)
    }
}

/// Every run of `encodings` under the engines of `set`.
pub fn runs(set: Set, encodings: &[Encoding]) -> Vec<Run> {
    encodings
        .iter()
        .flat_map(|&encoding| {
            Engine::all(set, encoding).into_iter().map(move |engine| Run { encoding, engine })
        })
        .collect()
}

/// Runs `case` once per run of `encodings` under `set`. A failure under one run does not stop
/// the others; at the end the test fails naming the case and every run that failed.
pub fn for_each_run(test: &str, set: Set, encodings: &[Encoding], mut case: impl FnMut(&Run)) {
    let mut failed = Vec::new();
    for run in runs(set, encodings) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&run)));
        if r.is_err() {
            // The panic hook has printed the message already.
            eprintln!("--- {test}: FAILED under [{}] (message above)", run.name());
            failed.push(run.name());
        }
    }
    assert!(failed.is_empty(), "{test}: failed under {failed:#?} (see messages above)");
}
