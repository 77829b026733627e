//! The threads of `-x` and the channel between them: one writer on the calling thread, several
//! writer threads (`write/multi.rs`), or, where no thread can start, the decoder and the writer
//! taking turns on one; the ops go in batches (`Batcher`).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread;

use anyhow::{Result, anyhow};

use super::produce::produce;
use super::{Pipe, Stream};
use crate::command::Plans;
use crate::plan::{Op, Sink, Stop};
use crate::policy::admit::FileCount;
use crate::pool::Pool;
use crate::report::Reporter;
use crate::resume::Session;
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

/// Runs the decoder thread and the writer(s) until the archive ends or one side fails.
pub(super) fn pipeline(
    plans: &Plans,
    input: Stream,
    pool: &Pool,
    mut writers: write::Writers,
    files: Arc<FileCount>,
    session: &Session,
    report: &Reporter,
) -> Result<(u64, Stats)> {
    let direct = writers.direct.policy();
    let gate = write::direct_policy::Gate::new(&writers.direct);
    let pipe = Pipe { plans, pool, files, direct, gate, session, report, lanes: None };
    let lanes = std::mem::take(&mut writers.lanes);
    if lanes.is_empty() {
        return pipeline_dir(pipe, input, writers);
    }
    with_lanes(pipe, input, writers, lanes)
}

/// The writers of the spread roots (`--spread`, write/roots.rs): the decoder's side, taken by
/// the member loop (`produce`), which puts `write::roots::Roots` in front of DIR's sink.
pub(super) struct LaneSet {
    txs: std::sync::Mutex<Option<Vec<SyncSender<Vec<Op>>>>>,
    pub(super) shared: Arc<write::multi::Shared>,
}

impl LaneSet {
    /// The lanes' queues, once (None after).
    pub(super) fn take(&self) -> Option<Vec<SyncSender<Vec<Op>>>> {
        self.txs.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// DIR's writers as without `--spread`, and a writer thread per spread root beside them; the
/// run's error is a root writer's when one failed (the decoder only saw it gone).
fn with_lanes(
    mut pipe: Pipe<'_>,
    input: Stream,
    writers: write::Writers,
    mut lanes: Vec<Box<dyn write::Writer>>,
) -> Result<(u64, Stats)> {
    use write::multi::{QUEUE_BATCHES, Shared, run_worker};
    let shared = Arc::new(Shared::new(lanes.len()));
    let (txs, rxs): (Vec<_>, Vec<_>) =
        (0..lanes.len()).map(|_| sync_channel::<Vec<Op>>(QUEUE_BATCHES)).unzip();
    let set = LaneSet { txs: std::sync::Mutex::new(Some(txs)), shared: shared.clone() };
    thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, (w, rx)) in lanes.iter_mut().zip(rxs).enumerate() {
            let shared = &shared;
            let lane = move || run_worker(i, &mut **w, rx, shared);
            match thread::Builder::new().name(format!("root{}", i + 1)).spawn_scoped(s, lane) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    drop(set.take());
                    handles.into_iter().for_each(|h| drop(h.join()));
                    return Err(anyhow!(
                        "cannot start a writer thread for a --spread root ({e}: ulimit -u or \
                         pids.max)"
                    ));
                }
            }
        }
        pipe.lanes = Some(&set);
        let home = pipeline_dir(pipe, input, writers);
        // Taken and dropped by the member loop; not if it never ran.
        drop(set.take());
        let mut results: Vec<Result<Stats>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("writer thread panicked"))))
            .collect();
        if let Some(Err(e)) = shared
            .first_failed()
            .and_then(|i| results.get_mut(i))
            .map(|r| std::mem::replace(r, Ok(Stats::default())))
        {
            return Err(e);
        }
        let (members, stats) = home?;
        let (stats, errors) = outcome(stats, None, results);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok((members, stats)),
        }
    })
}

/// DIR's writers: one, or several behind the dispatcher.
fn pipeline_dir(
    pipe: Pipe<'_>,
    input: Stream,
    mut writers: write::Writers,
) -> Result<(u64, Stats)> {
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
            report.diagnostic(&crate::report::said(crate::report::chain(&also)));
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
    // The calling thread, back to its own policy when this returns.
    let _aside = crate::aside::Aside::enter();
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
