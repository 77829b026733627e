//! The resolve step: the low arguments clap parsed (`Args`) become the run's typed options
//! (`options::Options`), as ripgrep's `LowArgs` become `HiArgs`; `Options::plans` then makes
//! one narrow plan per stage of them (src/options/), as for a program's `Restore`. What is
//! the command line's alone is decided here, by pure functions of the arguments and of what
//! the edge read once from the environment (`Edge`: `$TAPE`, whether stdin is a terminal,
//! `$VERSION_CONTROL`, and the `Machine`): sizes as written (`64K`), GNU tar's meaning of
//! each option, the options that cannot go together and their words, and what only the
//! command line shows (the report and the listing, `Shown`); the stages never see a flag.
//!
//! This file holds `Edge` and `resolve`; the options of each concern are read in a file of
//! their own (`input.rs`, `selection.rs`, `member.rs`, `writer.rs`, `reading.rs`), sizes and
//! rates by `units.rs`.

mod input;
mod member;
mod reading;
mod selection;
#[cfg(test)]
pub(crate) mod tests;
mod units;
mod writer;

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use crate::archive::Timestamp;
use crate::cli::operands::{self, Selection};
use crate::cli::{Args, Ordered};
use crate::command::Command;
#[cfg(test)]
use crate::command::Plans;
use crate::command::listing::ListingPlan;
use crate::options::{Machine, Options, Shown, Spreading};
use crate::policy::admit::Limits;
use crate::policy::conflict::OldFiles;
use crate::report::Warnings;
use crate::report::checkpoint::CheckpointPlan;
use crate::report::plan::ReportPlan;
use crate::resume::Flag;
use crate::write::plan::{Backend, DirectIo, RingProbe};
use input::{filter, input_options};
use member::{member_options, top_level};
use reading::pax_delete;
use selection::selection_options;
use units::window_log;
use writer::writer_options;

pub use units::{parse_rate, parse_size};

/// What the resolve step needs of the process's surroundings, read once at the edge
/// (`Edge::read`, in main) and passed in as values, so that `resolve` is a pure function of
/// its inputs.
#[derive(Debug, Clone)]
pub struct Edge {
    /// What the plans need (CPUs, memory, limits, root, the start).
    pub machine: Machine,
    /// `$TAPE`, when set and not empty: the archive without `-f`.
    pub tape: Option<PathBuf>,
    /// Standard input is a terminal (never read an archive from one).
    pub stdin_tty: bool,
    /// `$VERSION_CONTROL`: the kind of backups `--backup` without CONTROL makes.
    pub version_control: Option<String>,
    /// `$SIMPLE_BACKUP_SUFFIX`: the backups' suffix without `--suffix`.
    pub backup_suffix: Option<String>,
}

impl Edge {
    /// Reads the surroundings, once; `started`: when the run started (`Reporter::started_at`).
    pub fn read(started: std::time::SystemTime) -> Result<Edge> {
        use std::io::IsTerminal;
        Ok(Edge {
            machine: Machine::read(started)?,
            tape: std::env::var_os("TAPE").filter(|t| !t.is_empty()).map(PathBuf::from),
            stdin_tty: std::io::stdin().is_terminal(),
            version_control: std::env::var("VERSION_CONTROL").ok(),
            backup_suffix: std::env::var("SIMPLE_BACKUP_SUFFIX").ok(),
        })
    }
}

/// The archive, the `-f` option's, else the first operand, else `$TAPE` (as GNU tar, which
/// would take the operand for a MEMBER); None for standard input (`-` or nothing), but never a
/// terminal.
fn archive_source(args: &Args, edge: &Edge) -> Result<Option<PathBuf>> {
    let first_operand = args.selection.ordered.iter().find_map(|o| match o {
        Ordered::Operand(text) if args.input.file.is_none() => Some(PathBuf::from(text)),
        _ => None,
    });
    match args.input.file.clone().or(first_operand).or(edge.tape.clone()) {
        Some(p) if p.as_os_str() != "-" => Ok(Some(p)),
        _ if edge.stdin_tty => {
            bail!("refusing to read the archive from a terminal (missing -f option?)")
        }
        _ => Ok(None),
    }
}

/// The plans for a run: the options (`options`), then their plans (`Options::plans`); for
/// the tests of the rooms below, which read what the flags lead to.
#[cfg(test)]
pub(crate) fn resolve(args: Args, edge: &Edge, notes: &mut Vec<String>) -> Result<Plans> {
    options(args, edge, notes)?.plans(&edge.machine)
}

/// The typed options the flags ask for. `notes`: warnings to say (in order) whether or not the
/// run goes on (`--level` without `-g`, `-N`'s date as read with `-v`).
pub fn options(args: Args, edge: &Edge, notes: &mut Vec<String>) -> Result<Options> {
    refuse_unsupported(&args)?;
    let chars: Vec<(bool, &[u8])> =
        args.informative.quote_chars_ordered.iter().map(|(on, s)| (*on, s.as_bytes())).collect();
    let quoting =
        crate::report::quoting::Quoting::new(args.informative.quoting_style.as_deref(), &chars)
            .context("--quoting-style")?;
    let record_size = record_size(&args)?;
    let totals = match args.informative.totals.as_deref() {
        None => false,
        Some("") => true,
        Some(sig) => bail!(
            "--totals={sig} is not supported: fastuntar prints the totals at the end only \
             (use --totals)"
        ),
    };
    let mut opts = Options::new(PathBuf::from("."));
    opts.filter = filter(&args)?;
    opts.archive = archive_source(&args, edge)?;
    // GNU tar looks at the first record of an archive file named without -I or a
    // compression flag, to learn its compression (checkpoint.rs).
    let sniffs =
        opts.archive.is_some() && opts.filter.is_none() && args.input.compression_flag == 0;
    let checkpoint =
        crate::report::checkpoint::Checkpoints::new(&args.informative.checkpoints, sniffs)?;
    opts.one_top_level = match args.overwrite.one_top_level.as_deref() {
        Some(dir) => top_level(dir.as_ref(), opts.archive.as_deref())?,
        None => None,
    };
    let warnings = Warnings::parse(&args.informative.warning)?;
    selection_options(&args, edge, notes, &mut opts)?;
    refuse_json(&args)?;
    input_options(&args, &mut opts)?;
    member_options(&args, edge, &mut opts)?;
    writer_options(&args, edge, &mut opts)?;
    opts.command = command(&args);
    let checkpoint = checkpoint.map(|spec| CheckpointPlan {
        spec,
        record: record_size,
        plain_file: opts.archive.clone().filter(|_| opts.filter.is_none()),
        ignore_zeros: args.input.ignore_zeros,
        dots_to_stderr: args.operation.to_stdout,
        env: crate::options::tar_env(opts.archive.as_deref(), record_size),
        subcommand: if args.operation.list { "-t" } else { "-x" },
    });
    opts.ignore_zeros = args.input.ignore_zeros;
    opts.pax_delete = pax_delete(&args.input.pax_option)?;
    opts.label = args.input.label.clone();
    opts.resume = match (args.resume.resume, args.resume.no_resume) {
        (_, true) => Flag::Off,
        (true, false) => Flag::Resume,
        (false, false) => Flag::Auto,
    };
    opts.writeback = parse_size(&args.resume.writeback_every).context("--writeback-every")?;
    opts.debug_kill = args.resume.debug_kill_at.clone();
    let report = ReportPlan {
        verbose: args.informative.verbose,
        quiet: args.informative.quiet,
        json: args.informative.json,
        totals,
        record_size,
        index_file: args.informative.index_file.clone(),
        warnings,
        checkpoint,
    };
    let listing = listing_plan(&args, quoting, &opts);
    opts.shown = Shown {
        report,
        listing,
        block_numbers: args.informative.block_number,
        show_omitted_dirs: args.informative.show_omitted_dirs,
    };
    Ok(opts)
}

/// The operations and options of GNU tar that fastuntar does not have: one line each.
fn refuse_unsupported(args: &Args) -> Result<()> {
    let operations = [
        (args.operation.create, "-c (--create)"),
        (args.operation.append, "-r (--append)"),
        (args.operation.update, "-u (--update)"),
        (args.operation.catenate, "-A (--catenate)"),
        (args.operation.delete, "--delete"),
        (args.operation.diff, "-d (--diff, --compare)"),
        (args.operation.test_label, "--test-label"),
    ];
    if let Some((_, op)) = operations.iter().find(|(given, _)| *given) {
        bail!(
            "{op} is not supported: fastuntar extracts (-x) and lists (-t) archives; use tar \
             to create, change or compare them"
        );
    }
    if args.overwrite.verify {
        bail!("-W (--verify) is not supported: fastuntar does not write archives");
    }
    let volumes = [
        (args.compat.multi_volume, "-M (--multi-volume)"),
        (args.compat.tape_length.is_some(), "-L (--tape-length)"),
        (args.compat.info_script.is_some(), "-F (--info-script)"),
    ];
    if let Some((_, op)) = volumes.iter().find(|(given, _)| *given) {
        bail!("{op} is not supported: fastuntar reads single-volume archives");
    }
    if args.selection.absolute_names {
        bail!(
            "-P (--absolute-names) is not supported: members are always extracted inside the \
             destination (a leading '/' is removed, a '..' component refused)"
        );
    }
    Ok(())
}

/// `--json` prints its object on stdout, which `-O` and `--to-command` cannot share.
fn refuse_json(args: &Args) -> Result<()> {
    if args.operation.to_command.is_some() && args.informative.json {
        bail!("--json cannot be used with --to-command");
    }
    if args.operation.to_stdout && args.informative.json {
        bail!("--json cannot be used with -O/--to-stdout: standard output carries the files' data");
    }
    Ok(())
}

fn command(args: &Args) -> Command {
    match (&args.operation.to_command, args.operation.list, args.operation.to_stdout) {
        (_, true, _) => Command::List,
        (Some(command), false, _) => Command::ToCommand {
            command: command.clone(),
            ignore_errors: args.operation.ignore_command_error,
        },
        (None, false, true) => Command::ToStdout,
        (None, false, false) => Command::Extract,
    }
}

/// How `-t` and `-v` lines look.
fn listing_plan(
    args: &Args,
    quoting: crate::report::quoting::Quoting,
    opts: &Options,
) -> ListingPlan {
    ListingPlan {
        block_past: args.informative.block_number.then_some(u64::from(!args.operation.list)),
        numeric_owner: args.attributes.numeric_owner,
        label_given: args.input.label.is_some(),
        show_transformed: args.informative.show_transformed_names > 0,
        strip_components: args.names.strip_components,
        one_top_level: opts.one_top_level.clone(),
        quoting,
        times: crate::report::time::TimeStyle {
            full: args.informative.full_time,
            utc: args.informative.utc,
        },
        xattrs: opts.xattrs.clone(),
        acls: args.attributes.acls_on,
    }
}

/// Bytes of a tar record: `-b N` blocks of 512 or `--record-size` bytes (a multiple of 512),
/// else GNU tar's default of 20 blocks.
fn record_size(args: &Args) -> Result<u64> {
    if let Some(b) = &args.compat.blocking {
        return match b.parse::<u64>() {
            Ok(n) if n > 0 && n <= 1 << 21 => Ok(n * 512),
            // Accepted as before (the value was not read) when it is a word: only --totals
            // needs it.
            _ if args.informative.totals.is_none()
                && b.bytes().all(|c| c.is_ascii_alphanumeric()) =>
            {
                Ok(20 * 512)
            }
            _ => bail!("--blocking-factor: invalid number {b:?}"),
        };
    }
    if let Some(r) = &args.compat.record_size {
        let n = parse_size(r).context("--record-size")?;
        if n == 0 || n % 512 != 0 {
            bail!("--record-size: {r}: not a multiple of 512");
        }
        return Ok(n);
    }
    Ok(20 * 512)
}
