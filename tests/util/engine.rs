//! The one matrix every suite runs under, and the one runner that reruns a case per row of it
//! and names the row on failure (in the manner of ripgrep's `rgtest!`, which reruns each test
//! per regex engine).
//!
//! A *run* is an input encoding × an engine; an engine is one row of each dimension:
//!
//! | dimension | table | rows |
//! | --- | --- | --- |
//! | writer: backend × direct IO × threshold | `WRITER_CONFIGS` (mod.rs) | 6 |
//! | writer threads | `WRITER_THREADS` | `writers default` (no flag: one per CPU, at most 8), `writers 1`, `writers 4` (`--writer-threads N`) |
//! | zstd decoder threads | `DECODERS` | 4 (`--threads 1`, the default, `--threads 4`, and `--threads 4` reading the archive from a pipe in irregular reads) |
//! | resource limits | `Limits` | none; `ulimit -n 64 -l 64` (a stock machine: 64 open files, 64 KiB locked) |
//! | input encoding | `Encoding` (`PLAIN_AND_SMALL_FRAMES`, `ZSTD_FRAMINGS`) | plain, compressed as built, zstd in 1 frame, 32 MiB, 64 KiB and 1021-byte frames |
//!
//! Every suite states which rows it runs over in one place, a `Matrix` constant at its top
//! (`const MATRIX: Matrix`), and passes it to `for_each_run` (or `for_each_config`, its plain-tar
//! form). Which rows meet, decided in one place, `Matrix::runs`, in two tiers
//! (`FASTUNTAR_TEST_TIER`, see `Tier`):
//!
//! * exhaustive (CI, `scripts/test.sh`): every writer row of the suite × every encoding; a plain
//!   tar with one decoder row (no decoder runs, so `--threads` changes nothing), a compressed one
//!   with every decoder row, under every writer row (`Set::All`) or the two of `Set::Sweep`, the
//!   piped decoder row with one writer only (`PIPED_WRITER`: what it tests is in the decoder).
//!   The suite's other writer-thread rows and the stock-limits row run with the first encoding
//!   and decoder row under one writer row per backend (`Matrix::crossing_writers`: `portable`
//!   and `uring+direct(threshold 0)` where the suite has them): they change what the writers
//!   do (threads, descriptors, locked buffers), not what the decoder hands them;
//! * quick (a developer's `scripts/test.sh --quick`): one row per dimension, one run per case,
//!   the row taken in turn from a hash of the case's name, so across a suite every row runs.
//!
//! Adding a row to a table adds it to every suite that runs over that dimension.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use std::cell::Cell;
use std::hash::{Hash, Hasher};

use super::{Cmd, EngineRow, Input, WRITER_CONFIGS, WriterConfig, fastuntar};

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

/// Which writer rows a compressed input meets (a plain one meets every writer row of its
/// suite).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// Every writer row of the suite.
    All,
    /// The plain portable writer and io_uring with every file direct: the two that share the
    /// least code. For suites that run hundreds of inputs per case.
    Sweep,
}

const SWEEP_WRITERS: &[&str] = &["portable", "uring+direct(threshold 0)"];

/// The writer-thread rows: the default (no flag: one writer per CPU we may run on, at most
/// 8; one on a 1-CPU machine) and explicit counts, which take the paths a count asked for
/// takes (the fd budget warns when it cuts one, `--keep-directory-symlink` says it uses one).
pub const WRITER_THREADS: &[EngineRow] = &[
    EngineRow { name: "writers default", args: &[] },
    EngineRow { name: "writers 1", args: &["--writer-threads", "1"] },
    EngineRow { name: "writers 4", args: &["--writer-threads", "4"] },
];

/// The default and one writer: the two shapes of the writer (one thread, or the dispatcher and
/// its workers; on a 1-CPU machine the default is one, and `writers 4` is the other shape).
pub const THREADS_DEFAULT_AND_ONE: &[&str] = &["writers default", "writers 1"];
/// One writer and several, for cases about how the writers split the members: explicit
/// counts, so the split happens on a 1-CPU machine too.
pub const THREADS_ONE_AND_MORE: &[&str] = &["writers 1", "writers 4"];
/// Every writer-thread row.
pub const THREADS_ALL: &[&str] = &["writers default", "writers 1", "writers 4"];

/// The resource limits the binary under test runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limits {
    /// The test process's own (root's, usually generous).
    None,
    /// A stock machine's: `ulimit -n 64` and `ulimit -l 64` (64 open files, 64 KiB of locked
    /// memory).
    Stock,
}

impl Limits {
    pub fn name(self) -> &'static str {
        match self {
            Limits::None => "no limits",
            Limits::Stock => "ulimit -n 64 -l 64",
        }
    }

    /// Sets the limits on `cmd`.
    pub fn apply(self, cmd: &mut Cmd) {
        if self == Limits::Stock {
            cmd.rlimit(libc::RLIMIT_NOFILE, 64, 64).rlimit(
                libc::RLIMIT_MEMLOCK,
                64 << 10,
                64 << 10,
            );
        }
    }
}

thread_local! {
    /// The limits of the run the runner is in on this thread: `util::fastuntar()` applies them,
    /// so every run of the binary a case makes (not only `Run::cmd`'s) meets the row.
    static CURRENT_LIMITS: Cell<Limits> = const { Cell::new(Limits::None) };
}

/// The limits of the run in progress on this thread (`Limits::None` outside a runner).
pub fn current_limits() -> Limits {
    CURRENT_LIMITS.with(Cell::get)
}

/// Which tier of the matrix runs: `FASTUNTAR_TEST_TIER=exhaustive` (what CI runs:
/// `scripts/test.sh`) or `quick` (one row per dimension: `scripts/test.sh --quick`). Unset:
/// exhaustive under CI (`CI=true`), quick otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Quick,
    Exhaustive,
}

/// The environment variable that picks the tier.
pub const TIER_VAR: &str = "FASTUNTAR_TEST_TIER";

pub fn tier() -> Tier {
    match std::env::var(TIER_VAR).as_deref() {
        Ok("exhaustive") => Tier::Exhaustive,
        Ok("quick") => Tier::Quick,
        Ok(other) => panic!("{TIER_VAR}={other}: say quick or exhaustive"),
        Err(_) if super::in_ci() => Tier::Exhaustive,
        Err(_) => Tier::Quick,
    }
}

/// Which rows of the matrix a suite runs over: its one statement of them (`const MATRIX` at
/// the top of the suite, with the reasons for what it leaves out).
#[derive(Debug, Clone, Copy)]
pub struct Matrix {
    /// The writer rows (names in `WRITER_CONFIGS`); None: every row.
    pub writers: Option<&'static [&'static str]>,
    /// Which of those a compressed input meets, under each decoder row.
    pub compressed: Set,
    /// The writer-thread rows (names in `WRITER_THREADS`); the first is the one the other
    /// dimensions run with.
    pub threads: &'static [&'static str],
    /// Whether the stock-limits row runs too.
    pub limits: bool,
    /// The decoder rows a compressed input meets (names in `DECODERS`); None: every row.
    pub decoders: Option<&'static [&'static str]>,
}

impl Matrix {
    /// Every writer row, the default writer threads, no limits: a suite that crosses nothing
    /// else.
    pub const WRITERS: Matrix = Matrix {
        writers: None,
        compressed: Set::All,
        threads: &["writers default"],
        limits: false,
        decoders: None,
    };

    /// Every writer row, compressed inputs under every decoder row with the two sweep writers,
    /// the default writer count and one, the stock limits: the suites that read untrusted or
    /// damaged archives (differential, hostile, corrupt).
    pub const SWEEP: Matrix = Matrix {
        writers: None,
        compressed: Set::Sweep,
        threads: THREADS_DEFAULT_AND_ONE,
        limits: true,
        decoders: None,
    };

    /// This matrix with only the writer rows `names` (a case's subset: it says why).
    pub const fn only(self, names: &'static [&'static str]) -> Matrix {
        Matrix { writers: Some(names), ..self }
    }

    /// This matrix with the writer-thread rows `names` (the first one is the base).
    pub const fn threads(self, names: &'static [&'static str]) -> Matrix {
        Matrix { threads: names, ..self }
    }

    /// This matrix with only the decoder rows `names`.
    pub const fn decoders(self, names: &'static [&'static str]) -> Matrix {
        Matrix { decoders: Some(names), ..self }
    }

    /// The decoder rows a compressed input meets.
    fn decoder_rows(&self) -> Vec<&'static DecoderConfig> {
        DECODERS
            .iter()
            .filter(|d| self.decoders.is_none_or(|names| names.contains(&d.name)))
            .collect()
    }

    /// This matrix with `set` for compressed inputs.
    pub const fn compressed(self, set: Set) -> Matrix {
        Matrix { compressed: set, ..self }
    }

    /// The writer rows of this matrix.
    pub fn writer_rows(&self) -> Vec<&'static WriterConfig> {
        match self.writers {
            None => WRITER_CONFIGS.iter().collect(),
            Some(names) => super::writer_rows(names),
        }
    }

    /// The writer rows the other writer-thread rows and the stock-limits row run with: one per
    /// backend among the suite's rows, the one in `SWEEP_WRITERS` where the suite has it
    /// (`portable`, `uring+direct(threshold 0)`: between them buffered and direct writes,
    /// registered buffers under `ulimit -l`, a descriptor per file in flight under `ulimit
    /// -n`), else the backend's first. Crossed with all six writer rows instead, these two
    /// dimensions were 12 of the 18 runs of every plain input, for paths the writer rows
    /// already meet at the base row (docs/TESTING.md, "What each tier runs").
    pub fn crossing_writers(&self) -> Vec<&'static WriterConfig> {
        let rows = self.writer_rows();
        let mut out: Vec<&'static WriterConfig> = Vec::new();
        for backend in ["portable", "uring"] {
            let of = |w: &&&WriterConfig| w.args.get(1) == Some(&backend);
            let pick = rows
                .iter()
                .filter(of)
                .find(|w| SWEEP_WRITERS.contains(&w.name))
                .or_else(|| rows.iter().find(of));
            out.extend(pick.copied());
        }
        out
    }

    fn thread_rows(&self) -> Vec<&'static EngineRow> {
        let row = |n: &&str| {
            WRITER_THREADS.iter().find(|r| r.name == *n).unwrap_or_else(|| panic!("no row {n:?}"))
        };
        assert!(!self.threads.is_empty(), "a matrix needs a writer-thread row");
        self.threads.iter().map(row).collect()
    }

    /// Every engine of the exhaustive tier for `encoding` at the base thread row and no limits.
    fn base(&self, encoding: Encoding) -> Vec<Engine> {
        let threads = self.thread_rows()[0];
        let writers: Vec<&'static WriterConfig> = self
            .writer_rows()
            .into_iter()
            .filter(|w| {
                encoding == Encoding::Plain
                    || self.compressed == Set::All
                    || SWEEP_WRITERS.contains(&w.name)
            })
            .collect();
        let decoders = match encoding {
            Encoding::Plain => vec![&DECODERS[0]],
            _ => self.decoder_rows(),
        };
        // The piped row's one writer: PIPED_WRITER, or the suite's first.
        let piped = writers.iter().find(|w| w.name == PIPED_WRITER).unwrap_or(&writers[0]).name;
        let mut v = Vec::new();
        for decoder in decoders {
            for &writer in &writers {
                if !decoder.piped || writer.name == piped {
                    v.push(Engine { writer, decoder, threads, limits: Limits::None });
                }
            }
        }
        v
    }

    /// The runs of `encodings` in the current tier, for the case `test` (the quick tier takes
    /// its rows from a hash of the name).
    pub fn runs(&self, test: &str, encodings: &[Encoding]) -> Vec<Run> {
        assert!(!encodings.is_empty(), "{test}: no encoding");
        match tier() {
            Tier::Exhaustive => self.exhaustive(encodings),
            Tier::Quick => vec![self.quick(test, encodings)],
        }
    }

    /// Every run of the exhaustive tier (see the module comment).
    pub fn exhaustive(&self, encodings: &[Encoding]) -> Vec<Run> {
        let mut v: Vec<Run> = encodings
            .iter()
            .flat_map(|&encoding| {
                self.base(encoding).into_iter().map(move |engine| Run { encoding, engine })
            })
            .collect();
        let encoding = encodings[0];
        let first = self.base(encoding)[0].decoder;
        let writers = self.crossing_writers();
        let threads = self.thread_rows();
        for &t in &threads[1..] {
            for &writer in &writers {
                let engine = Engine { writer, decoder: first, threads: t, limits: Limits::None };
                v.push(Run { encoding, engine });
            }
        }
        if self.limits {
            for &writer in &writers {
                let engine =
                    Engine { writer, decoder: first, threads: threads[0], limits: Limits::Stock };
                v.push(Run { encoding, engine });
            }
        }
        v
    }

    /// The one run of the quick tier: one row of each dimension, picked by `test`'s hash.
    pub fn quick(&self, test: &str, encodings: &[Encoding]) -> Run {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        test.hash(&mut h);
        let mut h = h.finish();
        let mut pick = |n: usize| {
            let i = (h % n as u64) as usize;
            h /= n as u64;
            i
        };
        let encoding = encodings[pick(encodings.len())];
        let engines = self.base(encoding);
        let mut engine = engines[pick(engines.len())];
        let threads = self.thread_rows();
        engine.threads = threads[pick(threads.len())];
        if self.limits && pick(2) == 1 {
            engine.limits = Limits::Stock;
        }
        Run { encoding, engine }
    }
}

/// One configuration of the engine.
#[derive(Debug, Clone, Copy)]
pub struct Engine {
    pub writer: &'static WriterConfig,
    pub decoder: &'static DecoderConfig,
    pub threads: &'static EngineRow,
    pub limits: Limits,
}

impl Engine {
    pub fn name(&self) -> String {
        let mut s = format!("{}, {}, {}", self.writer.name, self.decoder.name, self.threads.name);
        if self.limits != Limits::None {
            s.push_str(", ");
            s.push_str(self.limits.name());
        }
        s
    }

    /// The flags of this engine (the writer's, the writer threads', the decoder's).
    pub fn args(&self) -> Vec<&'static str> {
        self.writer.args.iter().chain(self.threads.args).chain(self.decoder.args).copied().collect()
    }

    /// The binary under test with this engine's flags and limits.
    pub fn cmd(&self) -> Cmd {
        let mut c = fastuntar();
        c.args(self.args());
        self.limits.apply(&mut c);
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
    /// `plain; portable, threads 1, writers default` — how a failure names the row.
    pub fn name(&self) -> String {
        format!("{}; {}", self.encoding.name(), self.engine.name())
    }

    /// The binary under test with this run's flags and limits.
    pub fn cmd(&self) -> Cmd {
        self.engine.cmd()
    }

    /// The binary under test with this run's flags, reading `archive` (`Engine::cmd_on`).
    pub fn cmd_on(&self, archive: &Path) -> Cmd {
        self.engine.cmd_on(archive)
    }
}

/// Every run of `encodings` under `matrix` in the current tier, for the case `test`.
pub fn runs(test: &str, matrix: &Matrix, encodings: &[Encoding]) -> Vec<Run> {
    matrix.runs(test, encodings)
}

/// Runs `case` once per run of `encodings` under `matrix` (the one runner). A failure under
/// one run does not stop the others; at the end the test fails naming the case and every run
/// that failed. While a run is in progress, `util::fastuntar()` on this thread applies its
/// limits.
pub fn for_each_run(
    test: &str,
    matrix: &Matrix,
    encodings: &[Encoding],
    mut case: impl FnMut(&Run),
) {
    let mut failed = Vec::new();
    for run in matrix.runs(test, encodings) {
        CURRENT_LIMITS.with(|l| l.set(run.engine.limits));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&run)));
        CURRENT_LIMITS.with(|l| l.set(Limits::None));
        if r.is_err() {
            // The panic hook has printed the message already.
            eprintln!("--- {test}: FAILED under [{}] (message above)", run.name());
            failed.push(run.name());
        }
    }
    assert!(failed.is_empty(), "{test}: failed under {failed:#?} (see messages above)");
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: Matrix = Matrix::SWEEP;

    fn names(runs: &[Run]) -> Vec<String> {
        runs.iter().map(Run::name).collect()
    }

    #[test]
    fn crossing_writers_are_one_per_backend() {
        let n = |m: Matrix| m.crossing_writers().iter().map(|w| w.name).collect::<Vec<_>>();
        assert_eq!(n(FULL), ["portable", "uring+direct(threshold 0)"]);
        assert_eq!(n(FULL.only(&["uring", "portable"])), ["portable", "uring"]);
        assert_eq!(n(FULL.only(&["uring+direct"])), ["uring+direct"]);
    }

    #[test]
    fn exhaustive_rows_of_a_plain_input() {
        let runs = FULL.exhaustive(&[Encoding::Plain]);
        let names = names(&runs);
        // Six writer rows at the base; one writer and the stock limits under one row a backend.
        assert_eq!(runs.len(), 6 + 2 + 2, "{names:#?}");
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a run twice: {names:#?}");
        let stock: Vec<_> = runs.iter().filter(|r| r.engine.limits == Limits::Stock).collect();
        assert_eq!(stock.len(), 2);
        assert!(names.contains(&"plain; uring+direct(threshold 0), threads 1, writers 1".into()));
    }

    #[test]
    fn exhaustive_rows_of_a_compressed_input() {
        let runs = FULL.exhaustive(&[ZSTD_1021]);
        // Three file decoder rows under the two sweep writers, the piped row under one; then
        // writers 1 and the stock limits under one row a backend.
        assert_eq!(runs.len(), 3 * 2 + 1 + 2 + 2, "{:#?}", names(&runs));
        assert_eq!(runs.iter().filter(|r| r.engine.decoder.piped).count(), 1);
    }

    #[test]
    fn quick_is_one_run_and_every_row_turns_up() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..400 {
            let run = FULL.quick(&format!("case {i}"), &[Encoding::Plain, ZSTD_1021]);
            seen.insert(run.encoding.name());
            seen.insert(run.engine.writer.name.to_string());
            seen.insert(run.engine.decoder.name.to_string());
            seen.insert(run.engine.threads.name.to_string());
            seen.insert(run.engine.limits.name().to_string());
        }
        for row in WRITER_CONFIGS.iter().map(|w| w.name).chain(DECODERS.iter().map(|d| d.name)) {
            assert!(seen.contains(row), "{row} never picked: {seen:?}");
        }
        for row in ["writers default", "writers 1", "ulimit -n 64 -l 64", "no limits", "plain"] {
            assert!(seen.contains(row), "{row} never picked: {seen:?}");
        }
    }
}
