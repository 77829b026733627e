//! The pipeline: a decoder thread turns the input into ops whose file data sits in pool
//! buffers; the calling thread hands the ops to the writer. Data flows one way; only used
//! buffers come back (by being dropped into the pool).

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use std::sync::Arc;

use crate::archive::{Kind, Member, Reader, Skip, Xattr};
use crate::budget::{self, Pools};
use crate::command::Plans;
use crate::decode;
use crate::lend;
use crate::metadata::owner::Owners;
use crate::plan::{Entry, Node, Op, Sink, Stop};
use crate::policy::admit::{Admission, FileCount, SNAPSHOT_DIR_MODE, SNAPSHOT_FILE_MODE};
use crate::policy::plan::MemberPlan;
use crate::policy::safety::SafePath;
use crate::policy::safety::{Sanitizer, Verdict};
use crate::pool::{Pool, PoolBuf};
use crate::reading::Reading;
use crate::report::checkpoint;
use crate::report::progress::Progress;
use crate::report::{self, Reporter};
use crate::resume::Session;
use crate::selection::confirm::Confirm;
use crate::write::direct::DirectPolicy;
use crate::write::{self, Stats};

/// Batches queued between the threads (the pool bounds the data they hold): 16 batches of up
/// to BATCH_OPS keep the writer busy through a run of directories and links.
const BATCH_QUEUE: usize = 16;

/// Ops sent together. One channel hand-off per op cost a futex wake-up per op; on 100,000
/// small files (three ops each) that was ~250,000 futex calls. 64 ops is ~20 small files.
const BATCH_OPS: usize = 64;

/// A batch holding this much file data is sent at once, so a large file's chunks reach the
/// disk without waiting for company: one pool buffer's worth.
const BATCH_BYTES: usize = 1 << 20;

pub struct Summary {
    pub stats: Stats,
    pub members: u64,
    /// From start to the last file closed and directory stamped.
    pub elapsed: Duration,
    /// Time `--sync` took to make it durable (syncfs), when asked.
    pub sync: Option<Duration>,
    pub decoding: decode::DecodeSummary,
    /// Bytes of the two buffer pools: file data, decoded frames (0 when one thread decoded).
    pub memory: (u64, u64),
    /// Writer threads, and how many of them write through io_uring.
    pub writers: (usize, usize),
    /// Which files were to be written direct, and why.
    pub direct: write::direct_policy::Plan,
    /// The download, when the archive was a URL.
    pub download: Option<DownloadSummary>,
    /// Where the run resumed, and the resume points it wrote (src/resume/).
    pub resume: crate::resume::Report,
}

/// Extracts as `plans` say; what the run says and counts goes to `report` (its exit status
/// too: `Reporter::status`).
pub fn run(plans: &Plans, report: &Arc<Reporter>) -> Result<Summary> {
    let (source, writer) = (&plans.input, &plans.writer);
    let start = Instant::now();
    let _umask = UmaskGuard::current();
    // `--direct-io` drops the archive's pages behind the reader from the start; auto from
    // when it has decided to write direct (below).
    let drop_behind = writer.direct == write::plan::DirectIo::Always;
    // What this run does about resuming is decided before anything is opened or written.
    let mut session = crate::resume::Session::prepare(&plans.resume, source, report)?;
    let input = crate::resume::open_input(source, &session, drop_behind)?;
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
    let incoming = write::Incoming { size: input.size, later_fds };
    let writers = write::create_n(writer, &pool, frames, files.clone(), incoming, events)?;
    let writer_counts = (writers.workers.len(), writers.uring);
    let direct = writers.direct;
    if direct.threshold.is_some() {
        input.drop_behind();
    }
    // Checkpoints, when asked for, are the progress display: no bar to draw over them.
    let net = input.download.as_ref().map(|d| d.stats.clone());
    let progress = Progress::start(
        !plans.report.quiet && plans.report.checkpoint.is_none(),
        input.size,
        input.consumed.clone(),
        net,
        report.clone(),
    );
    let decoded = input.decode(threads)?;
    let counters = decoded.counters();
    let stream_download = decoded.download.clone();

    let wanted = crate::selection::select::Wanted::new(&plans.selection)?;
    let stream = Stream { archive: session.reading(&plans.read, wanted, decoded)? };
    let (members, stats) = pipeline(plans, stream, &pool, writers, files, &session, report)?;
    progress.finish();
    session.complete()?;
    let elapsed = start.elapsed();
    let sync = if writer.sync { Some(sync_dest(&writer.dest)?) } else { None };
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
        direct,
        download,
        resume: session.report(),
    })
}

/// What a download did, for the summary.
#[derive(Clone, Debug)]
pub struct DownloadSummary {
    /// The address the archive came from, after redirects.
    pub url: String,
    pub length: Option<u64>,
    pub bytes: u64,
    /// The most connections open at once, all sources together.
    pub connections: usize,
    /// The most each source may have (`--connections`, within the open-file limit).
    pub ceiling: usize,
    pub retries: u64,
    pub refetched: u64,
    /// Copies of a late head piece asked from a faster source.
    pub copies: u64,
    /// Each source, in the order given.
    pub sources: Vec<SourceSummary>,
}

/// What one source did.
#[derive(Clone, Debug)]
pub struct SourceSummary {
    pub url: String,
    pub bytes: u64,
    /// The most connections it had open at once.
    pub connections: usize,
    /// "in use", "dropped", ...
    pub state: &'static str,
    /// Why it was dropped.
    pub dropped: Option<String>,
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

/// The writers apply modes themselves under umask 0; this gives the caller its umask back
/// however the run ends.
struct UmaskGuard(libc::mode_t);

impl UmaskGuard {
    fn current() -> UmaskGuard {
        // Safety: umask has no memory effects; this reads it and puts it back.
        let m = unsafe { libc::umask(0o022) };
        // Safety: as above.
        unsafe { libc::umask(m) };
        UmaskGuard(m)
    }
}

impl Drop for UmaskGuard {
    fn drop(&mut self) {
        // Safety: as above.
        unsafe { libc::umask(self.0) };
    }
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

/// Runs the decoder thread and the writer(s) until the archive ends or one side fails.
fn pipeline(
    plans: &Plans,
    input: Stream,
    pool: &Pool,
    mut writers: write::Writers,
    files: Arc<FileCount>,
    session: &Session,
    report: &Reporter,
) -> Result<(u64, Stats)> {
    let direct = writers.direct.policy();
    let pipe = Pipe { plans, pool, files, direct, session, report };
    let Some(dest) = writers.dest.take() else {
        let mut writer = writers.workers.pop().expect("one writer");
        return pipeline_one(pipe, input, &mut *writer);
    };
    pipeline_many(pipe, input, writers.workers, dest)
}

/// One writer, on this thread.
fn pipeline_one(
    pipe: Pipe<'_>,
    input: Stream,
    writer: &mut dyn write::Writer,
) -> Result<(u64, Stats)> {
    let (tx, rx) = sync_channel::<Vec<Op>>(BATCH_QUEUE);
    // Behind a lock so that the input is still here when the decoder thread cannot start
    // (never contended).
    let input = std::sync::Mutex::new(Some(input));
    let pipe_inline = pipe.clone();
    let threaded = thread::scope(|s| {
        let input = &input;
        // A user at RLIMIT_NPROC (`ulimit -u`, threads count) or at a cgroup's pids.max
        // cannot start a thread: then everything runs on this one (below).
        let producer = thread::Builder::new().spawn_scoped(s, move || {
            let input = input.lock().unwrap_or_else(|e| e.into_inner()).take().expect("input");
            // The channel closes when the producer ends: the sender is moved in here.
            let tx = tx;
            let mut out = Batcher { tx: &tx, ops: Vec::with_capacity(BATCH_OPS), bytes: 0 };
            produce(pipe, input, &mut out)
        });
        let producer = producer?;
        // Started only now: it is optional, and must not take the thread slot the decoder
        // needs under a low `ulimit -u`.
        let flusher = pipe_inline.session.recorder();
        let written = consume(writer, rx);
        // The writer is done with the channel (finished, or failed and dropped its receiver,
        // which makes the producer's next send fail); the producer stops either way.
        let produced = producer.join().unwrap_or_else(|_| Err(anyhow!("decoder thread panicked")));
        // No state is written from here on: the final directory pass may stamp DIR itself,
        // which a state's rename would move on.
        drop(flusher);
        let finished = writer.finish();
        Ok(match (produced, written, finished) {
            (Ok(members), Ok(()), Ok(stats)) => Ok((members, stats)),
            // A write failure is the root cause when both sides failed: the producer only
            // saw a closed channel.
            (_, Err(e), _) => Err(e),
            (Err(e), Ok(()), _) => Err(e),
            (Ok(_), Ok(()), Err(e)) => Err(e),
        })
    });
    match threaded {
        Ok(result) => result,
        Err(spawn) => {
            let input = input.into_inner().unwrap_or_else(|e| e.into_inner()).expect("not taken");
            pipeline_inline(pipe_inline, input, writer, &spawn)
        }
    }
}

/// No thread could be started (`ulimit -u` or pids.max at its limit: GNU tar, one process,
/// still works there): the decoder and the writer take turns on this thread. The writer lands
/// everything it holds whenever the decoder would wait for a buffer (`Sink::flush`), so
/// neither waits for what only the other could do.
fn pipeline_inline(
    pipe: Pipe<'_>,
    input: Stream,
    writer: &mut dyn write::Writer,
    spawn: &std::io::Error,
) -> Result<(u64, Stats)> {
    // EAGAIN: the process limit, or no address space left for a stack (ulimit -v).
    pipe.report.warn(format!(
        "cannot start a thread ({spawn}: ulimit -u or pids.max, or ulimit -v): decoding and \
         writing on one thread"
    ));
    let produced = produce(pipe, input, &mut Inline { writer: &mut *writer });
    let finished = writer.finish();
    match (produced, finished) {
        (Ok(members), Ok(stats)) => Ok((members, stats)),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    }
}

/// The writer as the decoder's sink, on the decoder's thread (`pipeline_inline`).
struct Inline<'a> {
    writer: &'a mut dyn write::Writer,
}

impl Sink for Inline<'_> {
    fn push(&mut self, op: Op) -> Result<(), Stop> {
        self.writer.apply(op).map_err(Stop::Fatal)
    }

    fn flush(&mut self) -> Result<(), Stop> {
        self.writer.submit().map_err(Stop::Fatal)?;
        // Everything in flight lands: its buffers go back to the pool.
        while self.writer.progress().map_err(Stop::Fatal)? {}
        Ok(())
    }
}

/// Several writer threads (`write/multi.rs`): the decoder thread dispatches, worker 0 runs on
/// this thread, the others on their own.
fn pipeline_many(
    pipe: Pipe<'_>,
    input: Stream,
    mut workers: Vec<Box<dyn write::Writer>>,
    dest: write::dest::Dest,
) -> Result<(u64, Stats)> {
    use write::multi::{Dispatch, QUEUE_BATCHES, Shared, run_worker};
    let shared = Arc::new(Shared::new(workers.len()));
    let (txs, mut rxs): (Vec<_>, Vec<_>) =
        (0..workers.len()).map(|_| sync_channel::<Vec<Op>>(QUEUE_BATCHES)).unzip();
    let dispatch_cell = std::sync::Mutex::new(Dispatch::new(txs, dest, shared.clone()));
    let (first, others) = workers.split_first_mut().expect("writers");
    let rx0 = rxs.remove(0);
    // Behind a lock so that the input is still here when a thread cannot start and the run
    // goes on with one writer (never contended).
    let input = std::sync::Mutex::new(Some(input));
    let pipe_for_one = pipe.clone();
    let scoped = thread::scope(|s| {
        // Writer threads first: when one cannot start (`ulimit -u`, pids.max), the others are
        // hung up on and the run goes on with one writer on this thread.
        let (handles, all_started) = spawn_writers(s, others, rxs, &shared);
        if !all_started {
            return hang_up(&dispatch_cell, handles);
        }
        // Behind a lock only so that this thread can hang up on the writers if the producer
        // cannot start (the closure that would have owned it is gone then); never contended.
        let cell = &dispatch_cell;
        let input = &input;
        let producer = thread::Builder::new().spawn_scoped(s, move || {
            let input = input.lock().unwrap_or_else(|e| e.into_inner()).take().expect("input");
            let mut dispatch = cell.lock().unwrap_or_else(|e| e.into_inner());
            let r = produce(pipe, input, &mut *dispatch);
            dispatch.close();
            r
        });
        let producer = match producer {
            Ok(p) => p,
            // The writer threads took the thread slots the decoder needed (`ulimit -u`):
            // hang up on them and go on with one writer, as when one of them cannot start.
            Err(_) => {
                drop(rx0);
                return hang_up(cell, handles);
            }
        };
        // Optional, so started after every thread the run needs (see pipeline_one).
        let flusher = pipe_for_one.session.recorder();
        let mut results = vec![run_worker(0, &mut **first, rx0, &shared)];
        for h in handles {
            results.push(h.join().unwrap_or_else(|_| Err(anyhow!("writer thread panicked"))));
        }
        let produced = producer.join().unwrap_or_else(|_| Err(anyhow!("decoder thread panicked")));
        drop(flusher);
        Some((produced, results))
    });
    let Some((produced, results)) = scoped else {
        let input = input.into_inner().unwrap_or_else(|e| e.into_inner()).expect("not consumed");
        return pipeline_one(pipe_for_one, input, &mut **first);
    };
    let dispatch = dispatch_cell.into_inner().unwrap_or_else(|e| e.into_inner());
    finish_many(dispatch, &shared, produced, results, pipe_for_one.report)
}

/// The end of `pipeline_many`, every thread joined: DIR's last directories stamped, the
/// writers' stats added up, and the run's error chosen.
fn finish_many(
    mut dispatch: write::multi::Dispatch,
    shared: &write::multi::Shared,
    produced: Result<u64>,
    results: Vec<Result<Stats>>,
    report: &Reporter,
) -> Result<(u64, Stats)> {
    // Every worker has landed its files: stamp the directories the archive left last.
    let dest = &mut dispatch.dest;
    dest.leave_all();
    // As with one writer: stamped unless a writer failed (its files may not have landed).
    let stamped = if shared.first_failed().is_none() { dest.settle() } else { Ok(()) };
    let (stats, errors) =
        outcome(std::mem::take(&mut dispatch.stats), shared.first_failed(), results);
    let mut errors = errors.into_iter();
    // A write failure is the root cause when both sides failed: the producer only saw a
    // worker gone. Another writer's failure is the run's error; this one's member failed too
    // (a full disk fails the files in flight on every writer): it is named as well.
    if let Some(e) = errors.next() {
        for also in errors {
            report.diagnostic(&format!("fastuntar: {also:#}"));
        }
        return Err(e);
    }
    let members = produced?;
    stamped?;
    Ok((members, stats))
}

/// The writer threads of `pipeline_many` but the first (which runs on the calling thread),
/// each with its queue; and whether all of them started.
fn spawn_writers<'scope>(
    s: &'scope thread::Scope<'scope, '_>,
    others: &'scope mut [Box<dyn write::Writer>],
    rxs: Vec<Receiver<Vec<Op>>>,
    shared: &'scope write::multi::Shared,
) -> (Vec<thread::ScopedJoinHandle<'scope, Result<Stats>>>, bool) {
    let mut handles = Vec::new();
    for (i, (w, rx)) in others.iter_mut().zip(rxs).enumerate() {
        let worker = move || write::multi::run_worker(i + 1, &mut **w, rx, shared);
        match thread::Builder::new().spawn_scoped(s, worker) {
            Ok(h) => handles.push(h),
            Err(_) => return (handles, false),
        }
    }
    (handles, true)
}

/// A thread of `pipeline_many` could not start: the writer threads that did are hung up on
/// (their queues closed) and waited for; the run goes on with one writer (None).
fn hang_up<T, U>(
    dispatch: &std::sync::Mutex<write::multi::Dispatch>,
    handles: Vec<thread::ScopedJoinHandle<'_, T>>,
) -> Option<U> {
    dispatch.lock().unwrap_or_else(|e| e.into_inner()).close();
    for h in handles {
        let _ = h.join();
    }
    None
}

/// What the writers of `pipeline_many` did together: their stats added to the dispatcher's
/// (`stats`), and their errors, the run's first: the one of the writer that failed first
/// (`first_failed`, as the writers noted it), else the first in writer order.
fn outcome(
    mut stats: Stats,
    first_failed: Option<usize>,
    mut results: Vec<Result<Stats>>,
) -> (Stats, Vec<anyhow::Error>) {
    let mut errors = Vec::new();
    if let Some(Err(e)) = first_failed
        .and_then(|i| results.get_mut(i))
        .map(|r| std::mem::replace(r, Ok(Stats::default())))
    {
        errors.push(e);
    }
    for r in results {
        match r {
            Ok(s) => {
                stats.files += s.files;
                stats.files_direct += s.files_direct;
                stats.dirs += s.dirs;
                stats.links += s.links;
                stats.bytes += s.bytes;
            }
            Err(e) => errors.push(e),
        }
    }
    (stats, errors)
}

/// Feeds ops to the writer, a batch at a time, and has it submit after each batch. While no
/// batch is waiting, the writer reaps completions instead of blocking: the producer may be
/// waiting for a pool buffer that only a reaped write returns.
fn consume(writer: &mut dyn write::Writer, rx: Receiver<Vec<Op>>) -> Result<()> {
    let apply = |batch: Vec<Op>, writer: &mut dyn write::Writer| -> Result<()> {
        for op in batch {
            writer.apply(op)?;
        }
        writer.submit()
    };
    loop {
        match rx.try_recv() {
            Ok(batch) => apply(batch, writer)?,
            Err(TryRecvError::Empty) => {
                if !writer.progress()? {
                    match rx.recv() {
                        Ok(batch) => apply(batch, writer)?,
                        Err(_) => return Ok(()),
                    }
                }
            }
            Err(TryRecvError::Disconnected) => return Ok(()),
        }
    }
}

/// Marks a send to a writer that has stopped: the writer's own error explains why.
struct WriterGone;

/// What every way of running the pipeline (one writer, several, or all on one thread) hands
/// on to the member loop: the plans, the file-data pool, the `--max-files` count, which files
/// go direct, the resume session that takes points between members, and the run's reporter.
#[derive(Clone)]
struct Pipe<'s> {
    plans: &'s Plans,
    pool: &'s Pool,
    files: Arc<FileCount>,
    direct: DirectPolicy,
    session: &'s Session,
    report: &'s Reporter,
}

/// What the member loop keeps from one member to the next.
struct Kept {
    sanitizer: Sanitizer,
    /// `-G`: what the lists' renames may still walk (incremental.rs).
    renames: crate::policy::incremental::RenameBudget,
    admission: Admission,
    owners: Owners,
    lines: crate::command::listing::Lines,
    packer: Option<PoolBuf>,
    confirm: Option<Confirm>,
    probes: crate::resume::Probes,
    /// The contiguous-file warning was said (once per run).
    said_contiguous: bool,
}

impl Kept {
    fn new(plans: &Plans, files: Arc<FileCount>) -> Kept {
        let policy = &plans.policy;
        let selection = &plans.selection;
        Kept {
            sanitizer: Sanitizer::new(policy.strip_components, policy.one_top_level.as_deref()),
            renames: crate::policy::incremental::RenameBudget::default(),
            admission: Admission::new(policy.snapshot, policy.limits.clone(), files),
            owners: Owners::new(policy.numeric_owner),
            lines: crate::command::listing::Lines::new(&plans.listing, plans.report.verbose > 1),
            packer: None,
            confirm: selection.interactive.then(|| Confirm::new(selection.stdin_taken, false)),
            probes: crate::resume::Probes::default(),
            said_contiguous: false,
        }
    }
}

/// The members read when the writer stopped (`Stop::Gone`: its own error says why), or the
/// sink's own failure.
fn stopped(members: u64, stop: Stop) -> Result<u64> {
    match stop {
        Stop::Gone => Ok(members),
        Stop::Fatal(e) => Err(e),
    }
}

/// Where a resumed run starts: the members before its resume point and their admission
/// counts, and the directories still waiting for their metadata there, which wait again
/// before any member (the Err: the members, and why the sink took no more). 0 for a run from
/// the start.
fn resumed(
    session: &Session,
    admission: &mut Admission,
    out: &mut dyn Sink,
) -> Result<u64, (u64, Stop)> {
    let mut members = 0;
    if let Some((counts, n)) = session.resumed_counts() {
        admission.restore(counts.bytes, counts.files);
        members = n;
    }
    match session.carried_dirs() {
        Some(carried) => out.push(Op::Restore(Box::new(carried))).map_err(|e| (members, e)),
        None => Ok(()),
    }
    .map(|()| members)
}

/// The next member of `archive`, None at its end. On an error, the members decoded before it
/// are still written.
fn next_member(
    archive: &mut Reading,
    out: &mut dyn Sink,
    report: &Reporter,
) -> Result<Option<Member>> {
    let next = archive.next_member();
    // -R's lines for zero blocks; a failed write is said at the end (report.rs).
    let _ = archive.say_ends(&mut |line| report.list_line(line, false));
    next.inspect_err(|_| {
        let _ = out.flush();
    })
}

/// Reads members, judges their paths and sends the ops. Returns the number of members.
fn produce(pipe: Pipe<'_>, input: Stream, out: &mut dyn Sink) -> Result<u64> {
    let Pipe { plans, pool, files, direct, session, report } = pipe;
    let Stream { mut archive } = input;
    let mut kept = Kept::new(plans, files);
    let utf8 = crate::report::locale::utf8_locale();
    // Safety: geteuid/getegid have no preconditions.
    let ids = unsafe { (libc::geteuid(), libc::getegid()) };
    let keep_probes = session.keeps_probes();
    let mut members = match resumed(session, &mut kept.admission, out) {
        Ok(members) => members,
        Err((members, stop)) => return stopped(members, stop),
    };
    let says_renaming = plans.report.verbose > 0 && plans.writer.backup.is_some();
    loop {
        let Some(mut member) = next_member(&mut archive, out, report)? else { break };
        // A resume point before this member, when the recorder asked for one.
        let (wanted, admission, probes) = (archive.wanted(), &kept.admission, &kept.probes);
        if let Some(mark) =
            session.mark(&archive.reader, &member, members, wanted, admission, probes)
            && let Err(e) = out.push(Op::Mark(mark))
        {
            return stopped(members, e);
        }
        members += 1;
        report.tally.members.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !archive.wants(&mut member) {
            continue;
        }
        let mut stage = Stage {
            plans,
            report,
            ids,
            reader: &mut archive.reader,
            checkpoints: &mut archive.checkpoints,
            sanitizer: &mut kept.sanitizer,
            renames: &mut kept.renames,
            admission: &mut kept.admission,
            owners: &mut kept.owners,
            pool,
            direct,
            lines: &mut kept.lines,
            packer: &mut kept.packer,
            confirm: &mut kept.confirm,
            out: &mut *out,
            session,
            probes: keep_probes.then_some(&mut kept.probes),
            said_contiguous: &mut kept.said_contiguous,
        };
        match stage.member(member).and_then(|()| match says_renaming {
            true => stage.landed(),
            false => Ok(()),
        }) {
            Ok(()) => crate::mark::hook::at(crate::mark::hook::Event::Member),
            Err(MemberError::Gone(WriterGone)) => return Ok(members),
            // What was decoded before the error is still written.
            Err(MemberError::Fatal(e) | MemberError::Read(e)) => {
                let _ = out.flush();
                return Err(e);
            }
        }
    }
    if let Err(e) = flush_at_end(out) {
        return stopped(members, e);
    }
    archive.finish(utf8)?;
    Ok(members)
}

/// Sends what the sink holds after the last member. Its failure is the sink's own: the
/// dispatcher's directory or link, or on one thread the writer's last writes, closes and
/// metadata, which only the flush lands. A kill test armed at the first state waits here
/// for it (mark/hook.rs `before_end`), the sink flushed meanwhile so points get published.
fn flush_at_end(out: &mut dyn Sink) -> Result<(), Stop> {
    let mut flushed = out.flush();
    crate::mark::hook::before_end(|| {
        if flushed.is_ok() {
            flushed = out.flush();
        }
    });
    flushed
}

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

/// libarchive's rule for set-id bits (its SUID/SGID checks): keep S_ISUID only when the file
/// will belong (`owner`, its final owner) to the archive's owner (`archived`, as `owner.rs`
/// resolves it: by name unless `--numeric-owner`), S_ISGID only for the archive's group.
/// Without `--same-owner` a root extraction owns everything, so a set-uid member of uid 1000
/// would otherwise become set-uid root. (GNU tar keeps the bit there; we deliberately do not.)
fn setid_checked(mode: u32, archived: (u32, u32), owner: (u32, u32)) -> u32 {
    let mut mode = mode;
    if archived.0 != owner.0 {
        mode &= !0o4000;
    }
    if archived.1 != owner.1 {
        mode &= !0o2000;
    }
    mode
}

/// What extraction and `-O` decide about a member before anything of it is written: where it
/// would be extracted after `--strip-components` and the safety rules (None: nothing to do,
/// with a warning where the member is skipped), and whether `--snapshot`'s layout and the
/// limits admit it (Err: the run stops, before any of it is written).
pub(crate) fn judge(
    policy: &MemberPlan,
    sanitizer: &mut Sanitizer,
    admission: &mut Admission,
    (m, name): (&Member, &str),
    report: &Reporter,
) -> Result<Option<SafePath>> {
    let path = match judged(sanitizer, &m.name, report) {
        Verdict::Extract(p) => p,
        Verdict::Nothing => return Ok(None),
        Verdict::Refuse(why) if policy.snapshot => {
            return Err(anyhow!("{name}: {why} (--snapshot stops here)"));
        }
        Verdict::Refuse(why) => {
            report.skipped(name, why);
            return Ok(None);
        }
    };
    if path.as_path().as_os_str().is_empty() && m.kind != Kind::Dir {
        report.skipped(name, "member name is empty; skipped");
        return Ok(None);
    }
    // A `./` member is DIR itself. GNU tar gives DIR its mode and mtime (as root, or with -p),
    // and so do we; but a snapshot never holds one (Agave writes no directory entries), and
    // DIR is the operator's: a 0700 ledger directory stays 0700.
    if policy.snapshot && path.is_root() {
        return Ok(None);
    }
    admission.admit(m, path.as_path()).map_err(|e| anyhow!("{name}: {e:#}"))?;
    Ok(Some(path))
}

/// `sanitizer`'s verdict on `raw` (a name, a link target, a dumpdir's name), with the
/// warning it made due said to `report`.
pub(crate) fn judged(sanitizer: &mut Sanitizer, raw: &[u8], report: &Reporter) -> Verdict {
    let verdict = sanitizer.judge(raw);
    if let Some(note) = sanitizer.take_note() {
        report.warn(note);
    }
    verdict
}

/// The extended attributes to restore on `m`: those `--xattrs` selects, then with `--acls`
/// its ACLs as `system.posix_acl_*` attributes (acl.rs), set on files and directories (a
/// default ACL on directories only), as GNU tar does. An ACL that cannot be read (an unknown
/// user or group; names are looked up through `owners`, cached for the run) is reported and
/// the member extracted without it. With `--acls` a file or directory without ACL records
/// gets GNU tar's reset (an access ACL from its mode; a directory, no default ACL). None when
/// there are none (no allocation for a member without attributes).
fn attributes(
    policy: &MemberPlan,
    m: &mut Member,
    name: &str,
    owners: &mut Owners,
    (warnings, report): (report::Warnings, &Reporter),
) -> Option<Arc<[Xattr]>> {
    let resets = policy.acls && matches!(m.kind, Kind::File | Kind::Dir);
    if m.xattrs.is_empty() && !resets {
        return None;
    }
    let (acls, plain): (Vec<Xattr>, Vec<Xattr>) = std::mem::take(&mut m.xattrs)
        .into_iter()
        .partition(|x| crate::archive::is_acl_record(&x.name));
    if !resets {
        return policy.xattrs.as_ref().and_then(|filter| filter.select(plain));
    }
    let mut kept: Vec<Xattr> = match &policy.xattrs {
        Some(filter) => filter.select(plain).map(|x| x.to_vec()).unwrap_or_default(),
        None => Vec::new(),
    };
    // GNU tar's `xattrs_acls_set`: a member without an access ACL (an empty record is none)
    // gets one from its mode, a directory without a default ACL loses the one it inherited.
    let empty = |x: &Xattr| x.value.as_ref().is_some_and(|v| v.is_empty());
    let (mut access, mut default) = (false, false);
    for x in acls {
        if x.name == crate::archive::ACL_ACCESS_KEY && empty(&x) {
            continue;
        }
        if x.name == crate::archive::ACL_DEFAULT_KEY && m.kind != Kind::Dir {
            continue;
        }
        access |= x.name == crate::archive::ACL_ACCESS_KEY;
        default |= x.name == crate::archive::ACL_DEFAULT_KEY;
        let converted = match x.value {
            Some(text) => crate::metadata::acl::to_xattr(&x.name, &text, owners),
            None => Err("too large to be kept".to_string()),
        };
        match converted {
            Ok((name, value)) => kept.push(Xattr { name, value: Some(value) }),
            // GNU tar warns (acl_from_text, acl_set_file_at) and exits 0.
            Err(e) => report.warning(
                warnings,
                report::Warning::XattrWrite,
                format!("{name}: cannot restore its ACL: {e}"),
            ),
        }
    }
    let mut reset = Vec::new();
    if !access {
        reset.push(crate::metadata::acl::from_mode(m.mode));
    }
    if m.kind == Kind::Dir && !default {
        reset.push(crate::metadata::acl::no_default());
    }
    kept.extend(reset.into_iter().map(|(name, value)| Xattr { name, value: Some(value) }));
    (!kept.is_empty()).then(|| kept.into())
}

/// GNU tar's `check_time` (extract.c), for a member whose time is set: a time before 1970
/// ("implausibly old time stamp") or after now ("time stamp ... is N s in the future") is
/// worth a warning (`--warning=no-timestamp` silences it; the exit status stays). The name is
/// the one GNU tar uses: as extracted, relative to DIR, without a trailing `/`.
fn check_time(
    (plans, report): (&Plans, &Reporter),
    m: &Member,
    path: &SafePath,
    t: crate::archive::Timestamp,
) {
    let since_epoch = |at: std::time::SystemTime| {
        let d = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        (d.as_secs() as i64, d.subsec_nanos())
    };
    // Nearly every time is before the run started: no clock is read for those.
    if t.secs >= 0 && (t.secs, t.nanos) <= since_epoch(report.started_at()) {
        return;
    }
    let future = || {
        let (now_s, now_ns) = since_epoch(std::time::SystemTime::now());
        if (t.secs, t.nanos) <= (now_s, now_ns) {
            return None;
        }
        let (mut secs, mut nanos) = (t.secs - now_s, i64::from(t.nanos) - i64::from(now_ns));
        if nanos < 0 {
            nanos += 1_000_000_000;
            secs -= 1;
        }
        Some(format!("{secs}{}", crate::report::time::ns_fraction(nanos as u32)))
    };
    let ahead = future();
    if t.secs >= 0 && ahead.is_none() {
        return;
    }
    let name = report::printable(gnu_file_name(&plans.policy, m, path));
    let when = crate::report::time::tartime(t.secs, t.nanos, true, plans.listing.times);
    let said = match ahead {
        None => format!("{name}: implausibly old time stamp {when}"),
        Some(ahead) => format!("{name}: time stamp {when} is {ahead} s in the future"),
    };
    plans.report.warnings.warn(report, report::Warning::Timestamp, said);
}

/// The name GNU tar gives the file made of `m` in its messages and `--to-command`'s
/// TAR_FILENAME (its `file_name` after `safer_name_suffix`): as extracted, relative to DIR,
/// with a leading `./` kept and trailing `/`s dropped.
pub(crate) fn gnu_file_name<'a>(
    policy: &MemberPlan,
    m: &'a Member,
    path: &'a SafePath,
) -> &'a [u8] {
    if policy.renames() {
        return std::os::unix::ffi::OsStrExt::as_bytes(path.as_path().as_os_str());
    }
    let n = &m.name;
    let mut n = &n[n.iter().position(|&b| b != b'/').unwrap_or(n.len())..];
    while n.len() > 1
        && let Some(rest) = n.strip_suffix(b"/")
    {
        n = rest;
    }
    n
}

/// A member of an unknown type is extracted as a regular file, as GNU tar does, with its
/// warning.
pub(crate) fn warn_unknown_type(
    (warnings, report): (report::Warnings, &Reporter),
    name: &str,
    flag: u8,
) {
    warnings.warn(
        report,
        report::Warning::UnknownCast,
        format!("{name}: unknown file type '{}', extracted as a regular file", flag.escape_ascii()),
    );
}

/// A contiguous file (type `7`) is extracted as a regular file; GNU tar 1.34 says so once per
/// run, as it creates the first (`open_output_file`; not with -O or --to-command).
fn warn_contiguous((warnings, report): (report::Warnings, &Reporter), said: &mut bool) {
    if !std::mem::replace(said, true) {
        let said = "Extracting contiguous files as regular files";
        warnings.warn(report, report::Warning::ContiguousCast, said);
    }
}

/// A multi-volume continuation (`M`) is the rest of a file begun in another volume: skipped.
pub(crate) fn skip_continuation(name: &str, report: &Reporter) {
    report.skipped(name, "continued from another volume; skipped");
}

/// Collects ops into batches for the channel.
struct Batcher<'a> {
    tx: &'a SyncSender<Vec<Op>>,
    ops: Vec<Op>,
    /// File data in `ops`.
    bytes: usize,
}

impl Sink for Batcher<'_> {
    fn push(&mut self, op: Op) -> Result<(), Stop> {
        self.bytes += op.held_bytes();
        self.ops.push(op);
        if self.ops.len() >= BATCH_OPS || self.bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Stop> {
        if self.ops.is_empty() {
            return Ok(());
        }
        self.bytes = 0;
        let batch = std::mem::replace(&mut self.ops, Vec::with_capacity(BATCH_OPS));
        self.tx.send(batch).map_err(|_| Stop::Gone)
    }
}

/// Files of at most this fraction of a pool buffer share buffers (`Packer`); larger ones get
/// whole buffers. 1/8 (128 KiB of a 1 MiB buffer) wastes at most that at a buffer's end.
const PACK_FRACTION: usize = 8;

struct Stage<'a, 'b, R: Skip> {
    plans: &'a Plans,
    report: &'a Reporter,
    /// Our effective uid and gid (for the set-id rule).
    ids: (u32, u32),
    reader: &'a mut Reader<R>,
    /// `--checkpoint`, told after each chunk of data where the reader has got to.
    checkpoints: &'a mut Option<checkpoint::Observer>,
    sanitizer: &'a mut Sanitizer,
    /// `-G`: what the lists' renames may still walk (incremental.rs).
    renames: &'a mut crate::policy::incremental::RenameBudget,
    admission: &'a mut Admission,
    /// Owner names mapped to local ids, cached for the run.
    owners: &'a mut Owners,
    pool: &'a Pool,
    /// How the writers write each file: what a chunk handed on in the decoder's buffer must
    /// be like (lend.rs).
    direct: DirectPolicy,
    /// What -v prints (listing.rs).
    lines: &'a mut crate::command::listing::Lines,
    /// The rest of the buffer small files are being packed into.
    packer: &'a mut Option<PoolBuf>,
    /// `-w`: the questions asked before each member.
    confirm: &'a mut Option<Confirm>,
    out: &'a mut (dyn Sink + 'b),
    /// Resume points (src/resume/): the state file's own name is not overwritten.
    session: &'a Session,
    /// The files resume points name as probes (None: no points this run).
    probes: Option<&'a mut crate::resume::Probes>,
    /// The contiguous-file warning was said.
    said_contiguous: &'a mut bool,
}

impl<R: Skip> Stage<'_, '_, R> {
    fn send(&mut self, op: Op) -> Result<(), MemberError> {
        self.out.push(op).map_err(MemberError::from)
    }

    /// `-G`: the renames and removals of an incremental archive's directory `entry` before
    /// its `Dir` op, waited for, so that `-v`'s "Deleting" lines come before the names of the
    /// members after it (with one writer thread the op is applied on that thread).
    fn purge(&mut self, entry: &Entry, raw: Vec<u8>) -> Result<(), MemberError> {
        let list = crate::policy::incremental::plan(raw, self.sanitizer, self.renames);
        if let Some(note) = self.sanitizer.take_note() {
            self.report.warn(note);
        }
        let (done, applied) = std::sync::mpsc::sync_channel(1);
        let op = Op::Purge { entry: entry.clone(), list: Box::new(list), done: Some(done) };
        self.send(op)?;
        self.out.flush().map_err(MemberError::from)?;
        // An Err: the writer stopped without applying it (its error ends the run).
        let _ = applied.recv();
        Ok(())
    }

    /// `-v --backup`: waits until the member just sent has landed, so that the writer's
    /// `Renaming` line for it is said before the next member's name (GNU tar's order).
    fn landed(&mut self) -> Result<(), MemberError> {
        let (done, landed) = std::sync::mpsc::sync_channel(1);
        self.send(Op::Barrier(done))?;
        self.out.flush().map_err(MemberError::from)?;
        // An Err: the writer stopped (its error ends the run).
        let _ = landed.recv();
        Ok(())
    }

    /// A pool buffer; sends the pending batch first if it would have to wait (the writer can
    /// only free buffers it has been sent).
    fn buffer(&mut self) -> Result<PoolBuf, MemberError> {
        if let Some(b) = self.pool.try_get() {
            return Ok(b);
        }
        // The packing buffer's rest is useless to whoever needs a whole one.
        *self.packer = None;
        self.out.flush().map_err(MemberError::from)?;
        Ok(self.pool.get())
    }

    /// Room for `n` bytes of a small file: a piece of the packing buffer (a fresh one when the
    /// rest is too small), so thousands of small files fit in the pool at once.
    fn piece(&mut self, n: usize) -> Result<PoolBuf, MemberError> {
        if self.packer.as_ref().is_none_or(|b| b.capacity() < n) {
            *self.packer = None;
            let b = self.buffer()?;
            *self.packer = Some(b);
        }
        Ok(self.packer.as_mut().expect("just filled").split_to(n))
    }

    /// One member: judge its path, admit it, send its ops (and data).
    fn member(&mut self, mut m: Member) -> Result<(), MemberError> {
        let plans = self.plans;
        let name = m.display_name();
        let Some(path) =
            judge(&plans.policy, self.sanitizer, self.admission, (&m, &name), self.report)?
        else {
            return Ok(());
        };
        // A member named like the state file: no more resume points, and the state goes first.
        self.session.retire_if_ours(&path);
        if let Some(confirm) = self.confirm.as_mut() {
            let asked =
                crate::selection::confirm::asked_name(plans.policy.renames(), &m.name, &path);
            if !confirm.ask("extract", &asked, self.report)? {
                return Ok(());
            }
        }
        if plans.report.verbose > 0 {
            // As `tar -xv` prints it: quoted for the locale, `-xvv` GNU tar's long lines. A
            // failed write stops the names, not the extraction; main.rs reports it at the end
            // (exit 2), as GNU tar does.
            let line = self.lines.of(&m, &plans.listing, self.reader.volume_label());
            let _ = self.report.list_line(&line, false);
        }
        let entry = self.entry(&mut m, name, path);
        self.send_member(entry, m)
    }

    /// What lands of `m` at `path`: its owner, mode, time and attributes as the member policy
    /// restores them.
    fn entry(&mut self, m: &mut Member, name: String, path: SafePath) -> Entry {
        let policy = &self.plans.policy;
        // The archive's owner, as GNU tar restores it (names looked up only when it matters:
        // ownership is restored, or set-id bits depend on it).
        let archived = (!policy.snapshot && (policy.same_owner || m.mode & 0o6000 != 0))
            .then(|| self.owners.ids(m));
        let owner = archived.filter(|_| policy.same_owner);
        let mode = match (policy.snapshot, m.kind, archived) {
            (true, Kind::Dir, _) => SNAPSHOT_DIR_MODE,
            (true, _, _) => SNAPSHOT_FILE_MODE,
            (false, _, Some(a)) => setid_checked(m.mode & 0o7777, a, owner.unwrap_or(self.ids)),
            (false, _, None) => m.mode & 0o7777,
        };
        // `-m` (also with --snapshot: it only concerns times): no time is set at all.
        let mtime = (!policy.touch).then_some(m.mtime);
        let xattrs =
            attributes(policy, m, &name, self.owners, (self.plans.report.warnings, self.report));
        // GNU tar checks the times it sets: not a hard link's (it has its target's), not
        // what it skips.
        if let Some(t) = mtime
            && !matches!(m.kind, Kind::Hardlink | Kind::Other(b'V' | b'M'))
        {
            check_time((self.plans, self.report), m, &path, t);
        }
        Entry {
            name,
            path,
            mode,
            mtime,
            archived_mtime: m.mtime,
            owner,
            offset: m.offset,
            xattrs,
            delay_restore: m.is_dumpdir,
        }
    }

    /// Sends the ops of `m`, whose `entry` is decided, by its type.
    fn send_member(&mut self, entry: Entry, mut m: Member) -> Result<(), MemberError> {
        match m.kind {
            Kind::Dir => {
                if self.plans.policy.incremental
                    && let Some(raw) = m.dumpdir.take()
                {
                    self.purge(&entry, raw)?;
                }
                self.send(Op::Dir(entry))
            }
            // A target is written as it is, but a NUL byte cannot be (GNU tar cuts it there).
            Kind::Symlink if m.link_name.contains(&0) => {
                self.report.skipped(&entry.name, "symlink target contains a NUL byte; skipped");
                Ok(())
            }
            Kind::Symlink => self.send(Op::Symlink { entry, target: m.link_name }),
            Kind::Hardlink => match judged(self.sanitizer, &m.link_name, self.report) {
                Verdict::Extract(target) if !target.as_path().as_os_str().is_empty() => {
                    self.send(Op::Hardlink { entry, target })
                }
                _ => {
                    let why = "hard link target is unsafe or empty; skipped";
                    self.report.skipped(&entry.name, why);
                    Ok(())
                }
            },
            Kind::Fifo => self.send(Op::Special { entry, node: Node::Fifo }),
            // As GNU tar and bsdtar: made where the kernel lets us (root, CAP_MKNOD); elsewhere
            // mknodat's EPERM is reported and the member skipped.
            Kind::CharDev => {
                let node = Node::Char { major: m.dev_major, minor: m.dev_minor };
                self.send(Op::Special { entry, node })
            }
            Kind::BlockDev => {
                let node = Node::Block { major: m.dev_major, minor: m.dev_minor };
                self.send(Op::Special { entry, node })
            }
            // A GNU volume label names the archive, not a file: GNU tar ignores it.
            Kind::Other(b'V') => Ok(()),
            Kind::Other(b'M') => {
                skip_continuation(&entry.name, self.report);
                Ok(())
            }
            Kind::Other(flag) => {
                warn_unknown_type((self.plans.report.warnings, self.report), &entry.name, flag);
                self.file(entry, &m)
            }
            Kind::File => {
                if m.type_flag == b'7' {
                    warn_contiguous(
                        (self.plans.report.warnings, self.report),
                        self.said_contiguous,
                    );
                }
                self.file(entry, &m)
            }
        }
    }

    /// A regular file: the File op, its data in pool buffers, End.
    fn file(&mut self, entry: Entry, m: &Member) -> Result<(), MemberError> {
        let name = entry.name.clone();
        if let Some(p) = self.probes.as_deref_mut() {
            p.note(&entry.path);
        }
        self.send(Op::File { entry, size: m.size, sparse: m.sparse.is_some() })?;
        let small = m.sparse.is_none() && m.size <= (self.pool.buf_size() / PACK_FRACTION) as u64;
        if small {
            if m.size > 0 {
                let mut buf = self.piece(m.size as usize)?;
                let got = self.reader.read_data(buf.full_mut());
                checkpoint::data_read(self.checkpoints, self.reader.offset(), self.reader.format());
                let got = got.map_err(|e| anyhow!("{e:#}; {name} is left incomplete"))?;
                if let Some((offset, n)) = got {
                    buf.set_len(n);
                    self.send(Op::Data { offset, buf })?;
                }
                // The input ended inside the data: what arrived is sent, not the End.
                self.reader.check().map_err(|e| anyhow!("{e:#}; {name} is left incomplete"))?;
            }
            return self.send(Op::End);
        }
        if m.sparse.is_none() {
            let lent = self.data(&name, lend::Rule::for_file(&self.direct, m.size))?;
            self.send(Op::End)?;
            if lent {
                // A direct file's last lent piece (its buffered tail) is held by the writer
                // until the End: sent now, so that no decoder buffer waits on a batch this
                // thread holds while it waits for the decoder.
                self.out.flush().map_err(MemberError::from)?;
            }
            return Ok(());
        }
        loop {
            let mut buf = self.buffer()?;
            let got = self.reader.read_data(buf.full_mut());
            checkpoint::data_read(self.checkpoints, self.reader.offset(), self.reader.format());
            let got = got.map_err(|e| anyhow!("{e:#}; {name} is left incomplete"))?;
            let Some((offset, n)) = got else { break };
            buf.set_len(n);
            self.send(Op::Data { offset, buf })?;
        }
        self.send(Op::End)
    }

    /// A large member's data, chunk by chunk: handed on in the decoder's own buffer where it
    /// lies there as the writer can write it (`lend::take` under `rule`), else read into a
    /// file buffer. Whether any chunk was handed on.
    fn data(&mut self, name: &str, rule: lend::Rule) -> Result<bool, MemberError> {
        let incomplete = |e: anyhow::Error| anyhow!("{e:#}; {name} is left incomplete");
        let mut handed = false;
        loop {
            let ahead = self.reader.data_ahead();
            let Some(ahead) = ahead.map_err(incomplete)? else { return Ok(handed) };
            let (offset, left) = (ahead.offset, ahead.left);
            match lend::take(offset, left, ahead.ahead, rule, self.pool.buf_size()) {
                lend::Take::Lend(n) => {
                    let lent = self.reader.lend_data(n);
                    checkpoint::data_read(
                        self.checkpoints,
                        self.reader.offset(),
                        self.reader.format(),
                    );
                    let (offset, buf) = lent.map_err(incomplete)?;
                    self.send(Op::Data { offset, buf })?;
                    handed = true;
                    // Sent at once: while a batch holds a decoder buffer, the decoder may wait
                    // for that buffer, and this thread for the decoder.
                    self.out.flush().map_err(MemberError::from)?;
                }
                lend::Take::Straddle(rest) => {
                    let mut buf = self.buffer()?;
                    let got = self.reader.read_data(&mut buf.full_mut()[..rest]);
                    let got = got.map_err(incomplete)?;
                    let Some((offset, mut len)) = got else { return Ok(handed) };
                    // The reader has moved past its buffer: where the next bytes lie. Where
                    // the input ends before them, what was read is sent all the same, and the
                    // reader's error (sticky) ends the loop at the next `data_ahead`.
                    let next = match len == rest {
                        true => self.reader.data_ahead().ok().flatten(),
                        false => None,
                    };
                    let want = match (next, rule) {
                        (Some(next), lend::Rule::Direct { unit, .. }) => {
                            let size = self.pool.buf_size();
                            lend::straddle_len(rest, left, next.ahead, unit, size)
                        }
                        _ => rest,
                    };
                    if want > rest
                        && let Ok(Some((_, more))) =
                            self.reader.read_data(&mut buf.full_mut()[rest..want])
                    {
                        len += more;
                    }
                    checkpoint::data_read(
                        self.checkpoints,
                        self.reader.offset(),
                        self.reader.format(),
                    );
                    buf.set_len(len);
                    self.send(Op::Data { offset, buf })?;
                }
                lend::Take::Copy(n) => {
                    let mut buf = self.buffer()?;
                    let got = self.reader.read_data(&mut buf.full_mut()[..n]);
                    checkpoint::data_read(
                        self.checkpoints,
                        self.reader.offset(),
                        self.reader.format(),
                    );
                    let got = got.map_err(incomplete)?;
                    let Some((offset, n)) = got else { return Ok(handed) };
                    buf.set_len(n);
                    self.send(Op::Data { offset, buf })?;
                }
            }
        }
    }
}
