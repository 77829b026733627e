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

/// `123`, `64K`, `64KiB`, `1M`, `1.5G` (binary multiples; a fraction rounds down to a byte).
pub fn parse_size(s: &str) -> Result<u64> {
    scaled(s, "size")
}

/// A rate in bytes per second (`--min-rate`, `--limit-rate`), spelt as curl's `--limit-rate`
/// takes it: a number with an optional K, M, G, T or P, 1024-based, in either case (`50M` is
/// 52,428,800 bytes/s), and a fraction as curl takes one since 8.19 (`1.5M`, `0.5G`; curl
/// 7.88 refuses them), rounded down to a byte; as a size, `KB`/`KiB` and a `B` are taken too,
/// where curl takes one letter.
pub fn parse_rate(s: &str) -> Result<u64> {
    scaled(s, "rate")
}

/// Digits of a fraction taken at most (a byte's precision at P needs 16).
const FRACTION_DIGITS: usize = 18;

/// A number (whole, or with a fraction after a `.`) with an optional binary multiple; `what`
/// names it in errors.
fn scaled(s: &str, what: &str) -> Result<u64> {
    let t = s.trim();
    let number = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(number);
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    let bad = || format!("invalid {what} '{s}'");
    if num.ends_with('.') || fraction.contains('.') || fraction.len() > FRACTION_DIGITS {
        bail!(bad());
    }
    let n: u64 = whole.parse().with_context(bad)?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        "P" | "PB" | "PIB" => 50,
        _ => bail!("invalid {what} '{s}' (use a number with an optional K, M, G, T or P)"),
    };
    let too_large = || format!("{what} '{s}' is too large");
    let whole = n.checked_mul(1 << shift).with_context(too_large)?;
    // The fraction's bytes, rounded down: digits / 10^len of the multiple, in u128 (at most
    // 10^18 * 2^50 < 2^110).
    let part = match fraction {
        "" => 0,
        f => {
            let digits: u128 = f.parse().with_context(bad)?;
            (digits << shift) / 10u128.pow(f.len() as u32)
        }
    };
    let total = whole.checked_add(part as u64).with_context(too_large)?;
    // A fraction that rounds down to nothing is not the `0` that turns a floor or the resume
    // points off (`--min-rate 0.5`, `--writeback-every 0.5`): refused, as less than a byte.
    if total == 0 && num.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        bail!("{what} '{s}' is less than one byte");
    }
    Ok(total)
}
