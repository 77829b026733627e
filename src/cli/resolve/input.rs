//! The input plan: the archive, `-I`'s program, a URL's download, the decoder threads and
//! the memory budget.

use super::*;

/// Where the archive comes from, how it is decoded, and the memory for it.
pub(super) fn input_plan(
    args: &Args,
    archive: Option<PathBuf>,
    filter: Option<Vec<String>>,
    edge: &Edge,
) -> Result<InputPlan> {
    let memory =
        args.performance.memory.as_deref().map(parse_size).transpose().context("--memory")?;
    if let Some(m) = memory {
        crate::budget::pool_shape(m)?;
    }
    let max_window_log = window_log(parse_size(&args.limits.max_window).context("--max-window")?)?;
    let budget_memory = memory.or_else(|| tight_memory(edge.usable_memory));
    let url = url_plan(args, archive.as_deref(), filter.is_some(), budget_memory)?;
    let threads = match args.performance.threads {
        Some(0) => bail!("--threads: must be at least 1"),
        Some(n) => n.min(MAX_THREADS),
        None => default_threads(
            args.operation.list || args.operation.to_stdout || args.operation.to_command.is_some(),
            edge,
        ),
    };
    let budget = Budget {
        memory: budget_memory,
        explicit: memory.is_some(),
        usable: edge.usable_memory,
        window: url.as_ref().map_or(0, |u| u.window),
        reads_only: args.operation.list
            || args.operation.to_stdout
            || args.operation.to_command.is_some(),
    };
    Ok(InputPlan { archive, filter, url, max_window_log, threads, budget, reader: None })
}

/// The decompressing program the flags ask for, as `PROG -d` split at spaces: GNU tar's
/// `-I PROG` and the flags that name one. The rest of the pipeline sees its output as the
/// archive.
pub(super) fn filter(args: &Args) -> Result<Option<Vec<String>>> {
    let program = match () {
        _ if args.input.lzip => "lzip",
        _ if args.input.lzma => "lzma",
        _ if args.input.lzop => "lzop",
        _ if args.input.uncompress => "gzip",
        _ => match args.input.compress_program.as_deref() {
            Some(p) => p,
            None => return Ok(None),
        },
    };
    let mut words: Vec<String> = program.split_ascii_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        bail!("-I: no program given");
    }
    words.push("-d".to_string());
    Ok(Some(words))
}

/// The download settings when the archive is a URL (`decode::url::is_url`); the URL-only
/// flags are refused for a file, the tuning ones (`--connections`, `--stall-timeout`,
/// `--retries`, `--cacert`) are let be, as TAR_OPTIONS may set them for every run.
fn url_plan(
    args: &Args,
    archive: Option<&std::path::Path>,
    filter: bool,
    // The budget: `--memory`, or the default where memory is tight (`tight_memory`).
    memory: Option<u64>,
) -> Result<Option<crate::decode::url::Plan>> {
    use crate::decode::url;
    let Some(a) = archive.filter(|a| url::is_url(a.as_os_str())) else {
        if args.input.keep_archive.is_some() || args.input.checksum.is_some() {
            bail!("--keep-archive and --checksum apply to an archive read from a URL");
        }
        if args.input.no_sign_request {
            bail!("--no-sign-request applies to an archive read from an s3:// URL");
        }
        if !args.input.mirror.is_empty() || args.input.mirrors.is_some() {
            bail!("--mirror and --mirrors apply to an archive read from a URL");
        }
        return Ok(None);
    };
    if filter {
        bail!("-I/--use-compress-program cannot read a URL: fastuntar decodes its formats itself");
    }
    let connections = match args.input.connections {
        Some(0) => bail!("--connections: must be at least 1"),
        Some(n) if n > url::MAX_CONNECTIONS => {
            bail!("--connections: at most {}", url::MAX_CONNECTIONS)
        }
        Some(n) => n,
        None => url::DEFAULT_CONNECTIONS,
    };
    let stall = match args.input.stall_timeout {
        Some(0) => bail!("--stall-timeout: must be at least 1 second"),
        Some(s) => std::time::Duration::from_secs(s),
        None => url::DEFAULT_STALL,
    };
    let min_rate = match args.input.min_rate.as_deref() {
        Some(r) => parse_rate(r).context("--min-rate")?,
        None => url::DEFAULT_MIN_RATE,
    };
    let checksum = args
        .input
        .checksum
        .as_deref()
        .map(url::parse_checksum)
        .transpose()
        .context("--checksum")?;
    let mut mirrors = Vec::new();
    for m in &args.input.mirror {
        if !url::is_url(m.as_ref()) {
            bail!("--mirror {m}: not an http://, https:// or s3:// URL");
        }
        mirrors.push(m.clone());
    }
    if let Some(file) = &args.input.mirrors {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--mirrors {}: cannot read", file.display()))?;
        let listed = url::sources::parse_list(&text)
            .map_err(|e| anyhow::anyhow!("--mirrors {}: {e}", file.display()))?;
        mirrors.extend(listed);
    }
    // For every s3:// source: the archive's or a mirror's.
    let s3 = url::s3::is_s3(&a.to_string_lossy()) || mirrors.iter().any(|m| url::s3::is_s3(m));
    if args.input.no_sign_request && !s3 {
        bail!("--no-sign-request applies to an archive read from an s3:// URL");
    }
    let limit_rate = match args.input.limit_rate.as_deref() {
        None => None,
        Some(r) => match parse_rate(r).with_context(|| format!("--limit-rate {r}"))? {
            0 => bail!("--limit-rate {r}: must be more than 0"),
            n => Some(n),
        },
    };
    Ok(Some(url::Plan {
        url: a.to_string_lossy().into_owned(),
        mirrors,
        limit_rate,
        connections,
        stall,
        min_rate,
        retries: args.input.retries.unwrap_or(url::retry::DEFAULT_RETRIES),
        cacert: args.input.cacert.clone(),
        keep: args.input.keep_archive.clone(),
        checksum,
        window: url_window(memory, url::ranges::BLOCK),
        verbose: args.informative.verbose > 0,
        quiet: args.informative.quiet,
        no_sign_request: args.input.no_sign_request,
    }))
}

/// Most decoder threads: past the 64 cores of the biggest validators, more threads only add
/// frames in flight that the pool and the writer cannot use.
pub(super) const MAX_THREADS: usize = 256;

/// zstd decoder threads by default: the CPUs this process may run on (sched_getaffinity, and a
/// cgroup's CPU quota, through `available_parallelism`) when listing or with `-O`; one fewer when
/// extracting to disk, because the writer needs a CPU of its own. Measured on 2 CPUs (4 GB in 119
/// frames): `-t` took 0.57x the time with 2 threads, but extraction none less, to tmpfs, to
/// RAM-backed ext4 or to the disk: the writer's system time (2.4 s of copying into the page cache,
/// or the loop device's worker) already filled the second CPU, and a second decoder only added its
/// copying (docs/PERFORMANCE.md). One under `ulimit -v`.
pub(super) fn default_threads(listing: bool, edge: &Edge) -> usize {
    // Under `ulimit -v` one: every thread adds its zstd window, stack and read-ahead, and
    // `--threads 8` under `ulimit -v 196608` failed (in a different allocation each run).
    if edge.address_space_limited {
        return 1;
    }
    let spare = if listing { edge.cpus } else { edge.cpus.saturating_sub(1) };
    spare.clamp(1, MAX_THREADS)
}
