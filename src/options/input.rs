//! The input plan: the archive, a URL's download, the decoder threads and the memory budget.

use anyhow::{Result, bail};

use super::{Machine, Options};
use crate::budget::{Budget, tight_memory, url_window};
use crate::decode::plan::InputPlan;

/// Where the archive comes from, how it is decoded, and the memory for it.
pub(super) fn input_plan(opts: &Options, machine: &Machine) -> Result<InputPlan> {
    if let Some(m) = opts.memory {
        crate::budget::pool_shape(m)?;
    }
    let budget_memory = opts.memory.or_else(|| tight_memory(machine.usable_memory));
    let url = url_plan(opts, budget_memory);
    let threads = match opts.threads {
        Some(0) => bail!("--threads: must be at least 1"),
        Some(n) => n.min(MAX_THREADS),
        None => default_threads(opts.reads_only(), machine),
    };
    let budget = Budget {
        memory: budget_memory,
        explicit: opts.memory.is_some(),
        usable: machine.usable_memory,
        window: url.as_ref().map_or(0, |u| u.window),
        reads_only: opts.reads_only(),
    };
    Ok(InputPlan {
        archive: opts.archive.clone(),
        filter: opts.filter.clone(),
        url,
        max_window_log: opts.max_window_log,
        threads,
        budget,
        reader: opts.reader.clone(),
    })
}

/// The download when the archive is a URL (`decode::url::is_url`); `memory`: the budget
/// (`--memory`, or the default where memory is tight), a share of which is the reorder window.
fn url_plan(opts: &Options, memory: Option<u64>) -> Option<crate::decode::url::Plan> {
    use crate::decode::url;
    let a = opts.archive.as_ref().filter(|a| url::is_url(a.as_os_str()))?;
    let d = &opts.download;
    Some(url::Plan {
        url: a.to_string_lossy().into_owned(),
        mirrors: d.mirrors.clone(),
        limit_rate: d.limit_rate,
        connections: d.connections,
        stall: d.stall,
        min_rate: d.min_rate,
        retries: d.retries,
        cacert: d.cacert.clone(),
        keep: d.keep.clone(),
        checksum: d.checksum,
        window: url_window(memory, url::ranges::BLOCK),
        verbose: opts.shown.report.verbose > 0,
        quiet: opts.shown.report.quiet,
        no_sign_request: d.no_sign_request,
    })
}

/// Most decoder threads: past the 64 cores of the biggest validators, more threads only add
/// frames in flight that the pool and the writer cannot use.
pub const MAX_THREADS: usize = 256;

/// zstd decoder threads by default: the CPUs this process may run on (sched_getaffinity, and a
/// cgroup's CPU quota, through `available_parallelism`) when listing or with `-O`; one fewer when
/// extracting to disk, because the writer needs a CPU of its own. Measured on 2 CPUs (4 GB in 119
/// frames): `-t` took 0.57x the time with 2 threads, but extraction none less, to tmpfs, to
/// RAM-backed ext4 or to the disk: the writer's system time (2.4 s of copying into the page cache,
/// or the loop device's worker) already filled the second CPU, and a second decoder only added its
/// copying (docs/PERFORMANCE.md). One under `ulimit -v`.
pub fn default_threads(listing: bool, machine: &Machine) -> usize {
    // Under `ulimit -v` one: every thread adds its zstd window, stack and read-ahead, and
    // `--threads 8` under `ulimit -v 196608` failed (in a different allocation each run).
    if machine.address_space_limited {
        return 1;
    }
    let spare = if listing { machine.cpus } else { machine.cpus.saturating_sub(1) };
    spare.clamp(1, MAX_THREADS)
}
