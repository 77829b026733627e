//! The input plan: the archive, `-I`'s program, a URL's download, the decoder threads and
//! the memory budget.

use super::*;

/// `--memory`, `--max-window`, `--threads` and a URL's download flags into `opts`.
pub(super) fn input_options(args: &Args, opts: &mut Options) -> Result<()> {
    opts.memory =
        args.performance.memory.as_deref().map(parse_size).transpose().context("--memory")?;
    opts.max_window_log = window_log(parse_size(&args.limits.max_window).context("--max-window")?)?;
    opts.threads = args.performance.threads;
    opts.download = download(args, opts.archive.as_deref(), opts.filter.is_some())?;
    Ok(())
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

/// The download settings, used when the archive is a URL (`decode::url::is_url`); the
/// URL-only flags are refused for a file, the tuning ones (`--connections`,
/// `--stall-timeout`, `--retries`, `--cacert`) are let be, as TAR_OPTIONS may set them for
/// every run.
fn download(
    args: &Args,
    archive: Option<&std::path::Path>,
    filter: bool,
) -> Result<crate::options::Download> {
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
        return Ok(Default::default());
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
    Ok(crate::options::Download {
        mirrors,
        limit_rate,
        connections,
        stall,
        min_rate,
        retries: args.input.retries.unwrap_or(url::retry::DEFAULT_RETRIES),
        cacert: args.input.cacert.clone(),
        keep: args.input.keep_archive.clone(),
        checksum,
        no_sign_request: args.input.no_sign_request,
    })
}
