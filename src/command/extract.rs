//! `-x`: a decoder thread turns the input into ops whose file data sits in pool buffers; the
//! calling thread hands the ops to the writer. Data flows one way; only used buffers come back
//! (by being dropped into the pool). This file starts a run and ends it (the summary, the
//! umask, `--sync`); `pipeline.rs` runs the threads and the channel between them,
//! `produce.rs` the member loop on the decoder's side, `stage.rs` one member's ops and data.

mod pipeline;
mod placer;
mod produce;
mod stage;

use pipeline::pipeline;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use crate::budget::{self, Pools};
use crate::command::Plans;
use crate::decode;
use crate::plan::Stop;
use crate::policy::admit::FileCount;
use crate::pool::Pool;
use crate::reading::Reading;
use crate::report::Reporter;
use crate::report::progress::Progress;
use crate::report::summary::{Direct, DownloadSummary, SourceSummary, Summary};
use crate::report::voice::{Fault, tag};
use crate::resume::Session;
use crate::write;
use crate::write::direct::DirectPolicy;
use crate::write::direct_policy::Gate;

/// Extracts as `plans` say; what the run says and counts goes to `report` (its exit status
/// too: `Reporter::status`).
pub fn run(plans: &Plans, report: &Arc<Reporter>) -> Result<Summary> {
    let (source, writer) = (&plans.input, &plans.writer);
    let dest_fault = || Fault::Destination { path: writer.dest.clone() };
    let start = Instant::now();
    // `--direct-io` drops the archive's pages behind the reader from the start; auto from
    // when it has decided to write direct (below).
    let drop_behind = writer.direct == write::plan::DirectIo::Always;
    // What this run does about resuming is decided before anything is opened or written.
    let mut session = crate::resume::Session::prepare(&plans.resume, source, report)
        .map_err(|e| tag(e, dest_fault()))?;
    let input_fault = || match &source.url {
        Some(u) => Fault::Network { url: decode::url::shown(&u.url) },
        None => Fault::Input {
            name: source.archive.as_ref().map_or("-".into(), |p| p.display().to_string()),
        },
    };
    let input = crate::resume::open_input(source, &session, drop_behind)
        .map_err(|e| tag(e, input_fault()))?;
    session.opened(&input)?;
    let pools = source.pools(input.workers(source.threads))?;
    let count = pool_count(pools, input.size, input.format);
    let pool = crate::pool::allocate(pools.buf_size, count)?;
    let threads = input.threads(source.threads, pools, source.budget.explicit)?;
    let memory = (pool.count() as u64 * pools.buf_size as u64, threads.pool_bytes());
    let files = FileCount::new(plans.policy.limits.max_files);
    let frames = threads.frame_pool();
    // What the writers did goes to the run's reporter, said as the writer plan says.
    let events =
        Arc::new(write::events::Said::new(writer.verbose, writer.warnings, report.clone()));
    let later_fds = input.download.as_ref().map_or(0, |d| d.later_fds());
    let arrival =
        write::direct_policy::Arrival::new(input.format, input.size, input.first_frame_size());
    let incoming = write::Incoming { arrival, later_fds };
    let writers = write::create_n(writer, &pool, frames, files.clone(), incoming, events)
        .map_err(|e| tag(e, dest_fault()))?;
    let writer_counts = (writers.workers.len() + writers.lanes.len(), writers.uring);
    let direct = writers.direct;
    if direct.threshold.is_some() && direct.start == write::direct_policy::Start::Now {
        input.drop_behind();
    }
    // A plan that starts buffered drops them once its first file goes direct.
    let arrived = Arrived { consumed: input.consumed.clone(), dropper: input.dropper() };
    // Checkpoints, when asked for, are the progress display: no bar to draw over them; nor
    // over `-w`'s questions, which wait for an answer on the line they end.
    let net = input.download.as_ref().map(|d| d.stats.clone());
    let progress = Progress::start(
        !plans.report.quiet && plans.report.checkpoint.is_none() && !plans.selection.interactive,
        input.size,
        input.consumed.clone(),
        net,
        report.clone(),
    );
    let decoded = input.decode(threads).map_err(|e| tag(e, input_fault()))?;
    let counters = decoded.counters();
    let stream_download = decoded.download.clone();

    let wanted = crate::selection::select::Wanted::new(&plans.selection)?;
    let stream = Stream { archive: session.reading(&plans.read, wanted, decoded)?, arrived };
    let (members, stats) = pipeline(plans, stream, &pool, writers, files, &session, report)
        .map_err(|e| tag(e, dest_fault()))?;
    // Every writer is done: nothing can take the kept copy's names any more (keep.rs).
    if let Some(d) = &stream_download {
        d.keep_copy()?;
    }
    progress.finish();
    session.complete()?;
    let elapsed = start.elapsed();
    let sync = match writer.sync {
        // DIR and each `--spread` root: timed together.
        true => Some(
            std::iter::once(&writer.dest)
                .chain(writer.placement.roots())
                .map(|d| sync_dest(d))
                .sum::<Result<Duration>>()
                .map_err(|e| tag(e, dest_fault()))?,
        ),
        false => None,
    };
    let decoding = counters.summary();
    let download = download_summary(stream_download.as_deref());
    Ok(Summary {
        stats,
        members,
        elapsed,
        sync,
        decoding,
        memory,
        writers: writer_counts,
        direct: Direct { words: direct.describe(), json: direct.json() },
        download,
        resume: session.report(),
    })
}

fn download_summary(d: Option<&decode::url::Download>) -> Option<DownloadSummary> {
    let d = d?;
    let s = &d.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    let sources = s
        .sources
        .iter()
        .map(|src| SourceSummary {
            url: src.name.clone(),
            bytes: load(&src.bytes),
            connections: src.most.load(relaxed),
            state: src.state_word(),
            dropped: src.why_dropped(),
        })
        .collect();
    let ceiling = s.sockets.load(relaxed) / s.sources.len().max(1);
    Some(DownloadSummary {
        url: decode::url::shown(&d.identity().url),
        length: d.identity().length,
        bytes: load(&s.downloaded),
        connections: s.most.load(relaxed).max(1),
        ceiling,
        retries: load(&s.retries),
        refetched: load(&s.refetched),
        copies: load(&s.copies),
        sources,
    })
}

/// The decoded tar stream.
struct Stream {
    archive: Reading,
    arrived: Arrived,
}

/// How far the archive has been read, and the hand that drops its pages behind the reader:
/// for the direct-IO gate (`Kept::gate`).
struct Arrived {
    /// Bytes of the archive read so far (`Input::consumed`).
    consumed: Arc<std::sync::atomic::AtomicU64>,
    dropper: decode::Dropper,
}

/// Buffers worth having for an archive of `size` bytes: a small archive cannot fill a 64 MiB
/// pool, and registering (pinning) one costs ~50 ms and its RSS at start-up. Compressed
/// archives are assumed to expand at most COMPRESSED_EXPANSION times; beyond that only speed,
/// never correctness, depends on the pool size.
fn pool_count(pools: Pools, size: Option<u64>, format: decode::Format) -> usize {
    /// zstd -1 on snapshot data gives ~2x, text archives ~5-10x.
    const COMPRESSED_EXPANSION: u64 = 16;
    let Some(size) = size else { return pools.files };
    let expanded = match format {
        decode::Format::Plain => size,
        _ => size.saturating_mul(COMPRESSED_EXPANSION),
    };
    let needed = usize::try_from(expanded.div_ceil(pools.buf_size as u64)).unwrap_or(usize::MAX);
    needed.saturating_add(1).clamp(budget::MIN_BUFFERS.min(pools.files), pools.files)
}

fn sync_dest(dest: &std::path::Path) -> Result<Duration> {
    let t = Instant::now();
    let dir = std::fs::File::open(dest)
        .with_context(|| format!("{}: cannot open for --sync", dest.display()))?;
    // Safety: the fd is open for the duration of the call.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(anyhow!("{}: syncfs failed: {e}", dest.display()));
    }
    Ok(t.elapsed())
}

/// What every way of running the pipeline (one writer, several, or all on one thread) hands
/// on to the member loop: the plans, the file-data pool, the `--max-files` count, which files
/// go direct, the resume session that takes points between members, and the run's reporter.
#[derive(Clone)]
struct Pipe<'s> {
    plans: &'s Plans,
    pool: &'s Pool,
    files: Arc<FileCount>,
    direct: DirectPolicy,
    /// Which files go direct, file by file (direct_policy.rs), as it starts.
    gate: Gate,
    session: &'s Session,
    report: &'s Reporter,
    /// `--spread`: the spread roots' writers (None without it).
    lanes: Option<&'s pipeline::LaneSet>,
}

/// Marks a send to a writer that has stopped: the writer's own error explains why.
struct WriterGone;

/// Why one member's ops stopped short: the writer is gone, the archive could not be read, or
/// the sink failed an op.
enum MemberError {
    Gone(WriterGone),
    Read(anyhow::Error),
    /// The sink failed the op itself (the dispatcher's directory or link).
    Fatal(anyhow::Error),
}

impl From<Stop> for MemberError {
    fn from(s: Stop) -> Self {
        match s {
            Stop::Gone => MemberError::Gone(WriterGone),
            Stop::Fatal(e) => MemberError::Fatal(e),
        }
    }
}

impl From<anyhow::Error> for MemberError {
    fn from(e: anyhow::Error) -> Self {
        MemberError::Read(e)
    }
}
