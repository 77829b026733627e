//! `--totals`: GNU tar's "Total bytes read: N (SIZE, RATE/s)" line at the end of a run.
//!
//! N is what GNU tar 1.34 counts: the tar stream (decompressed) in whole records of the
//! blocking factor (20 blocks, 10240 bytes, unless `-b`/`--record-size`), up to the record
//! that holds the end of what was read (the end marker's second zero block, or the end of the
//! input). Checked with tar 1.34: a 6144-byte archive made with `-b 1`, a 1536-byte one with
//! no record padding and a 10240-byte one followed by 40 KiB of zeros all give 10240, plain,
//! on a pipe or zstd-compressed; with `-b 4` the 6144-byte one gives 6144 ("6.0KiB").

// The numbers, the run's start and the clock are the run's (`Reporter::totals_line`,
// `Reporter::stats`): here only how GNU tar writes them.

/// "Total bytes read: N (SIZE, RATE/s)", after `secs` seconds.
pub(crate) fn format_line(bytes: u64, secs: f64) -> String {
    format_stats("Total bytes read", bytes, secs)
}

/// GNU tar's `print_stats` for `bytes` read after `secs` seconds: "TEXT: N (SIZE, RATE/s)",
/// without the "TEXT: " when `text` is empty (the checkpoint actions' `totals` and `%T`).
pub(crate) fn format_stats(text: &str, bytes: u64, secs: f64) -> String {
    // GNU tar: the rate as an integer number of bytes per second, "?" without a duration.
    let rate =
        if secs > 0.0 { format!("{}/s", human(bytes as f64 / secs)) } else { "?/s".to_string() };
    let label = if text.is_empty() { String::new() } else { format!("{text}: ") };
    format!("{label}{bytes} ({}, {rate})", human_b(bytes))
}

fn human(x: f64) -> String {
    human_b(x as u64)
}

/// gnulib's `human_readable` with tar's options (autoscale, powers of 1024, SI letters, "B",
/// rounded up): one decimal below 10, none from 10 on; "10KiB", "3.1MiB", "512B".
fn human_b(n: u64) -> String {
    const LETTERS: &[u8] = b"KMGTPEZY";
    const BASE: u64 = 1024;
    let (mut amt, mut tenths, mut rounding) = (n, 0u64, 0u64);
    let mut exponent = 0;
    let mut decimal = None;
    if amt >= BASE {
        while amt >= BASE && exponent < LETTERS.len() {
            let r10 = (amt % BASE) * 10 + tenths;
            let r2 = (r10 % BASE) * 2 + (rounding >> 1);
            amt /= BASE;
            tenths = r10 / BASE;
            rounding = if r2 < BASE {
                u64::from(r2 + rounding != 0)
            } else {
                2 + u64::from(BASE < r2 + rounding)
            };
            exponent += 1;
        }
        if amt < 10 {
            if rounding > 0 {
                tenths += 1;
                rounding = 0;
                if tenths == 10 {
                    amt += 1;
                    tenths = 0;
                }
            }
            if amt < 10 {
                decimal = Some(tenths);
                tenths = 0;
                rounding = 0;
            }
        }
    }
    if tenths + rounding > 0 {
        amt += 1;
        if amt == BASE && exponent < LETTERS.len() {
            exponent += 1;
            amt = 1;
            decimal = Some(0);
        }
    }
    let number = match decimal {
        Some(t) => format!("{amt}.{t}"),
        None => amt.to_string(),
    };
    match exponent {
        0 => format!("{number}B"),
        e => format!("{number}{}iB", LETTERS[e - 1] as char),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values GNU tar 1.34 printed.
    #[test]
    fn like_gnu_tar() {
        assert_eq!(human_b(10240), "10KiB");
        assert_eq!(human_b(6144), "6.0KiB");
        assert_eq!(human_b(3153920), "3.1MiB");
        assert_eq!(human_b(512), "512B");
        assert_eq!(human_b(0), "0B");
        assert_eq!(human_b(1024 * 1024 - 1), "1.0MiB");
        assert_eq!(human_b(10 * 1024 - 1), "10KiB");
        assert_eq!(human_b(9 * 1024 + 1), "9.1KiB");
        assert_eq!(human_b(1023), "1023B");
        assert_eq!(format_line(10240, 0.0), "Total bytes read: 10240 (10KiB, ?/s)");
        assert_eq!(format_line(10240, 1.0), "Total bytes read: 10240 (10KiB, 10KiB/s)");
        assert_eq!(format_stats("R", 92160, 0.0), "R: 92160 (90KiB, ?/s)");
        assert_eq!(format_stats("", 0, 0.0), "0 (0B, ?/s)");
    }
}
