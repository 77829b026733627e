//! The selection plan: MEMBER operands, `-T`, `--exclude` in command-line order, `-K`,
//! `--occurrence`, `-N`'s date, `--transform`, `-w`.

use super::*;

/// Which members, under which names, into `opts`: MEMBER operands, `-T` and `--exclude` read
/// in command-line order (operands.rs).
pub(super) fn selection_options(
    args: &Args,
    edge: &Edge,
    notes: &mut Vec<String>,
    opts: &mut Options,
) -> Result<()> {
    // Checked here for its words; the plans compile them (options/mod.rs).
    crate::selection::transform::Transforms::parse(&args.names.transform).context("--transform")?;
    let stdin_archive = opts.archive.is_none();
    let Selection { members, exclude, recursion, read_stdin } = operands::resolve(
        &args.selection.ordered,
        args.input.file.is_none(),
        stdin_archive,
        notes,
    )?;
    let occurrence = match args.selection.occurrence {
        None => 0,
        Some(n) if n > 0 && members.is_empty() => {
            bail!("--occurrence is meaningless without a file list (MEMBER operands or -T)")
        }
        // GNU tar: 0 is "every occurrence", as without the option.
        Some(n) => n,
    };
    let newer = newer_than(args, edge.machine.now, notes)?;
    if let Some(level) = &args.compat.level {
        let level = incremental_level(level).context("Invalid incremental level value")?;
        // GNU tar's "no level" is -1; any other without -g is warned about.
        if args.operation.listed_incremental.is_none() && level != -1 {
            notes.push("--level is meaningless without --listed-incremental".into());
        }
    }
    opts.members = members;
    opts.exclude = exclude;
    opts.recursion = recursion;
    opts.starting_file = args.selection.starting_file.last().map(|n| n.as_bytes().to_vec());
    opts.occurrence = occurrence;
    opts.newer = newer;
    opts.transform = args.names.transform.clone();
    opts.interactive = args.informative.interactive;
    opts.stdin_read = read_stdin;
    Ok(())
}

/// `-N/--newer/--after-date DATE` or `--newer-mtime DATE` (dates.rs), relative dates counted
/// from the run's start (`now`). With `-v` a DATE given as text is said back as read, as GNU
/// tar does ("Option --after-date: Treating date 'yesterday' as 2026-11-23 10:00:00.5"),
/// unless it reads the same.
fn newer_than(args: &Args, now: Timestamp, notes: &mut Vec<String>) -> Result<Option<Timestamp>> {
    use crate::selection::dates;
    let (option, text) = match (&args.selection.newer, &args.selection.newer_mtime) {
        (Some(text), _) => ("--after-date", text),
        (None, Some(text)) => ("--newer-mtime", text),
        (None, None) => return Ok(None),
    };
    let at = dates::date_or_file(text, now).with_context(|| option.to_string())?;
    let style = crate::report::time::TimeStyle { full: false, utc: args.informative.utc };
    let said = crate::report::time::tartime(at.secs, at.nanos, true, style);
    if args.informative.verbose > 0 && !dates::names_a_file(text) && said != *text {
        notes.push(format!("Option {option}: Treating date '{text}' as {said}"));
    }
    Ok(Some(at))
}

/// GNU tar 1.34's `--level=NUMBER` (for creating with -g; checked and ignored when reading):
/// strtoul(3)'s number (leading blanks, a sign, decimal digits; the empty string is 0, a
/// number past the range is ULONG_MAX, a `-` negates it modulo 2^64) kept in an int, as GNU
/// tar keeps it (so `-1`, `-01` and 4294967295 are all -1). None where GNU tar says "Invalid
/// incremental level value".
pub(super) fn incremental_level(text: &str) -> Option<i32> {
    if text.is_empty() {
        return Some(0);
    }
    let rest = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value =
        digits.bytes().try_fold(0u64, |n, b| n.checked_mul(10)?.checked_add(u64::from(b - b'0')));
    let value = match (value, negative) {
        (None, _) => u64::MAX,
        (Some(v), true) => v.wrapping_neg(),
        (Some(v), false) => v,
    };
    Some(value as u32 as i32)
}
