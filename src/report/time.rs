//! How times are shown, in listings and messages: GNU tar's `tartime`, in local time or UTC.

/// How times are shown: `--full-time`, `--utc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeStyle {
    pub full: bool,
    pub utc: bool,
}

/// GNU tar's `tartime`: "YYYY-MM-DD HH:MM" in local time (UTC with `--utc`), or with `full`
/// "YYYY-MM-DD HH:MM:SS" and the nanoseconds without trailing zeros (".5"); the number of
/// seconds where the time is out of the calendar's range. `secs` and `nanos`: since the epoch
/// (`archive::Timestamp`).
pub fn tartime(secs: i64, nanos: u32, full: bool, style: TimeStyle) -> String {
    let at = secs as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // Safety: valid pointers to a time_t and a tm buffer.
    let ok = !unsafe {
        if style.utc {
            libc::gmtime_r(&at, tm.as_mut_ptr())
        } else {
            libc::localtime_r(&at, tm.as_mut_ptr())
        }
    }
    .is_null();
    if !ok {
        return secs.to_string();
    }
    // Safety: localtime_r/gmtime_r succeeded.
    let tm = unsafe { tm.assume_init() };
    let date = format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        tm.tm_year as i64 + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min
    );
    if !full {
        return date;
    }
    format!("{date}:{:02}{}", tm.tm_sec, ns_fraction(nanos))
}

/// GNU tar's `code_ns_fraction`: `.` and the nanoseconds without trailing zeros; nothing for 0.
pub fn ns_fraction(ns: u32) -> String {
    if ns == 0 {
        return String::new();
    }
    let digits = format!("{ns:09}");
    format!(".{}", digits.trim_end_matches('0'))
}
