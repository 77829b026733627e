//! Sizes and rates as the flags write them (`64K`, `1.5G`, curl's `50M`), and the zstd
//! window they allow.

use super::*;

/// The zstd window log for a --max-window size: 2^10 (zstd's minimum) to 2^31 (its maximum),
/// rounded down to a power of two.
pub(super) fn window_log(size: u64) -> Result<u32> {
    if !(1 << 10..=1 << 31).contains(&size) {
        bail!("--max-window must be between 1K and 2G");
    }
    Ok(63 - size.leading_zeros())
}

/// `123`, `64K`, `64KiB`, `1M`, `2G` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64> {
    scaled(s, "size")
}

/// A rate in bytes per second (`--min-rate`, and issue 42's `--limit-rate`), spelt as curl's
/// `--limit-rate` takes it: a whole number with an optional K, M, G, T or P, 1024-based, in
/// either case (`50M` is 52,428,800 bytes/s); as a size, `KB`/`KiB` and a `B` are taken too.
pub fn parse_rate(s: &str) -> Result<u64> {
    scaled(s, "rate")
}

/// A whole number with an optional binary multiple; `what` names it in errors.
fn scaled(s: &str, what: &str) -> Result<u64> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().with_context(|| format!("invalid {what} '{s}'"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        "P" | "PB" | "PIB" => 50,
        _ => bail!("invalid {what} '{s}' (use a number with an optional K, M, G, T or P)"),
    };
    n.checked_mul(1 << shift).with_context(|| format!("{what} '{s}' is too large"))
}
