//! The DATE of `-N/--newer/--after-date DATE` and `--newer-mtime DATE`: members whose mtime
//! is older are left out (select.rs `Wanted`). As GNU tar's `get_date_or_file`, a DATE that
//! starts with `/` or `.` names a file whose mtime is the date; anything else is read as GNU's
//! `parse_datetime` reads the forms people and scripts write:
//!
//! - `@SECONDS[.FRACTION]`: seconds since the epoch;
//! - a calendar date: `YYYY-MM-DD` (`YY-M-D` too: 69-99 are 19xx, 00-68 20xx), `YYYYMMDD`,
//!   `D MONTH [YYYY]`, `MONTH D[,] [YYYY]` (English month names or their first three letters);
//! - a time of day, after the date, a space or a `T`: `HH:MM[:SS[.FRACTION]]` (`,` too);
//! - a time zone after the time or the date: `Z`, `UTC`, `GMT`, `UT`, `+HH`, `+HHMM`, `+HH:MM`
//!   (or `-`);
//! - relative items, anywhere: `now`, `today`, `yesterday`, `tomorrow`, `[+|-]N UNIT` and
//!   `UNIT` (UNIT: year, month, fortnight, week, day, hour, minute or min, second or sec,
//!   singular or plural), each turned round by an `ago` after it.
//!
//! Without a date the day is today; without a time it is midnight, or now when the DATE holds
//! relative items only (`2 days ago`, `now`); without a zone, local time (`TZ`). A DATE in any
//! other form is refused: GNU tar warns and then compares with the earliest time there is, so
//! that everything is extracted, which is not what anyone giving a date asked for.

use anyhow::{Context, Result, bail};

use crate::archive::Timestamp;

/// Whether a DATE argument names a file (GNU tar's rule: it starts with `/` or `.`).
pub fn names_a_file(text: &str) -> bool {
    text.starts_with('/') || text.starts_with('.')
}

/// The date a DATE argument names; `now` is the run's start (for relative dates).
pub fn date_or_file(text: &str, now: Timestamp) -> Result<Timestamp> {
    if names_a_file(text) {
        let meta = std::fs::metadata(text)
            .with_context(|| format!("cannot stat the date sample file '{text}'"))?;
        use std::os::unix::fs::MetadataExt;
        return Ok(Timestamp { secs: meta.mtime(), nanos: meta.mtime_nsec() as u32 });
    }
    parse(text, now).with_context(|| {
        format!(
            "unknown date format '{text}' (give YYYY-MM-DD [HH:MM[:SS]] [ZONE], @SECONDS, \
             N UNITS ago, or a file name starting with / or .)"
        )
    })
}

/// The relative units, each as a slot of `Relative::by` and how many of it one is.
const UNITS: &[(&str, usize, i64)] = &[
    ("year", YEAR, 1),
    ("month", MONTH, 1),
    ("fortnight", DAY, 14),
    ("week", DAY, 7),
    ("day", DAY, 1),
    ("hour", HOUR, 1),
    ("minute", MINUTE, 1),
    ("min", MINUTE, 1),
    ("second", SECOND, 1),
    ("sec", SECOND, 1),
];
const YEAR: usize = 0;
const MONTH: usize = 1;
const DAY: usize = 2;
const HOUR: usize = 3;
const MINUTE: usize = 4;
const SECOND: usize = 5;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// What a DATE said, item by item.
#[derive(Default)]
struct Items {
    /// Year, month (1-12), day.
    date: Option<(i64, i64, i64)>,
    /// Hour, minute, second, nanoseconds.
    time: Option<(i64, i64, i64, u32)>,
    /// Seconds east of UTC.
    zone: Option<i64>,
    /// Years, months, days, hours, minutes, seconds to add.
    by: [i64; 6],
    /// A relative item was given (then a DATE without a date or time means now).
    relative: bool,
    /// The last relative item, for an `ago` after it.
    last: Option<(usize, i64)>,
}

impl Items {
    fn set_date(&mut self, year: i64, month: i64, day: i64) -> Result<()> {
        if self.date.is_some() {
            bail!("two dates");
        }
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            bail!("no such day");
        }
        self.date = Some((year, month, day));
        Ok(())
    }

    fn set_zone(&mut self, east: i64) -> Result<()> {
        if self.zone.replace(east).is_some() {
            bail!("two time zones");
        }
        Ok(())
    }

    fn add(&mut self, unit: &str, n: i64) {
        let &(_, slot, times) = UNITS.iter().find(|(name, _, _)| *name == unit).unwrap();
        let n = n.saturating_mul(times);
        self.by[slot] = self.by[slot].saturating_add(n);
        self.relative = true;
        self.last = Some((slot, n));
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A unit's name, singular or plural.
fn unit(word: &str) -> Option<&'static str> {
    let single = word.strip_suffix('s').unwrap_or(word);
    UNITS.iter().map(|(name, _, _)| *name).find(|name| *name == single || *name == word)
}

/// A month's number, by its name or its first three letters (`sept` too).
fn month(word: &str) -> Option<i64> {
    if word == "sept" {
        return Some(9);
    }
    let i = MONTHS.iter().position(|m| word == *m || (word.len() == 3 && m.starts_with(word)))?;
    Some(i as i64 + 1)
}

/// A cursor over the DATE's bytes.
struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    fn digit_at(&self, k: usize) -> bool {
        self.peek_at(k).is_some_and(|c| c.is_ascii_digit())
    }

    fn eat(&mut self, c: u8) -> bool {
        let yes = self.peek() == Some(c);
        self.i += yes as usize;
        yes
    }

    /// Spaces and commas between items.
    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace() || c == b',') {
            self.i += 1;
        }
    }

    /// A run of digits: its value and length.
    fn number(&mut self) -> Result<(i64, usize)> {
        let start = self.i;
        while self.digit_at(0) {
            self.i += 1;
        }
        let digits = &self.s[start..self.i];
        if digits.is_empty() || digits.len() > 18 {
            bail!("a number expected");
        }
        Ok((digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')), digits.len()))
    }

    /// The nanoseconds of a fraction's digits (after its `.`): the first nine count.
    fn fraction(&mut self) -> Result<u32> {
        let start = self.i;
        let (_, len) = self.number()?;
        let digits = &self.s[start..start + len.min(9)];
        let ns = digits.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        Ok(ns * 10u32.pow(9 - digits.len() as u32))
    }

    /// A run of letters, lower-cased.
    fn word(&mut self) -> String {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).to_ascii_lowercase()
    }

    /// The rest of `HH:MM[:SS[.F]]` after its hour and at its first `:`.
    fn time(&mut self, hour: i64, items: &mut Items) -> Result<()> {
        self.eat(b':');
        let (minute, _) = self.number()?;
        let (mut second, mut ns) = (0, 0);
        if self.eat(b':') {
            second = self.number()?.0;
            if self.peek().is_some_and(|c| c == b'.' || c == b',') && self.digit_at(1) {
                self.i += 1;
                ns = self.fraction()?;
            }
        }
        if hour > 23 || minute > 59 || second > 60 || items.time.is_some() {
            bail!("no such time");
        }
        items.time = Some((hour, minute, second, ns));
        // `12:00:00Z`
        if matches!(self.peek(), Some(b'z' | b'Z'))
            && !self.peek_at(1).is_some_and(|c| c.is_ascii_alphabetic())
        {
            self.i += 1;
            items.set_zone(0)?;
        }
        Ok(())
    }

    /// A zone's offset after its sign: `HH`, `HHMM` or `HH:MM`.
    fn offset(&mut self, sign: i64, items: &mut Items) -> Result<()> {
        let (n, len) = self.number()?;
        let (hours, minutes) = match len {
            1 | 2 if self.peek() == Some(b':') && self.digit_at(1) => {
                self.i += 1;
                (n, self.number()?.0)
            }
            1 | 2 => (n, 0),
            4 => (n / 100, n % 100),
            _ => bail!("no such zone"),
        };
        if hours > 24 || minutes > 59 {
            bail!("no such zone");
        }
        items.set_zone(sign * (hours * 3600 + minutes * 60))
    }
}

/// Reads a DATE that is not a file name (see the module's comment).
pub fn parse(text: &str, now: Timestamp) -> Result<Timestamp> {
    let text = text.trim();
    if let Some(epoch) = text.strip_prefix('@') {
        return seconds(epoch);
    }
    let mut sc = Scan { s: text.as_bytes(), i: 0 };
    let mut items = Items::default();
    // The last item was a time: a signed number after it is its zone.
    let mut zone_may_follow = false;
    loop {
        sc.skip_space();
        let Some(c) = sc.peek() else { break };
        let after_time = std::mem::replace(&mut zone_may_follow, false);
        if c.is_ascii_digit() {
            zone_may_follow = number_item(&mut sc, &mut items, now)?;
        } else if (c == b'+' || c == b'-') && sc.digit_at(1) {
            signed_item(&mut sc, &mut items, c, after_time)?;
        } else if c.is_ascii_alphabetic() {
            word_item(&mut sc, &mut items, now)?;
        } else {
            bail!("unexpected '{}'", c as char);
        }
    }
    Ok(resolve(&items, now))
}

/// An item that starts with a digit: a date (`YYYY-MM-DD`, perhaps with `T` and a time;
/// `YYYYMMDD`), a time (`HH:MM`), `D MONTH [YEAR]`, or `N UNIT`. Whether it was a time (a zone
/// may follow).
fn number_item(sc: &mut Scan, items: &mut Items, now: Timestamp) -> Result<bool> {
    let (n, len) = sc.number()?;
    if sc.peek() == Some(b'-') && sc.digit_at(1) && len <= 4 {
        // YYYY-MM-DD or YY-MM-DD, then perhaps `T` and the time.
        sc.i += 1;
        let (m, _) = sc.number()?;
        if !sc.eat(b'-') {
            bail!("a day expected");
        }
        let (d, _) = sc.number()?;
        let year = match (len, n) {
            (1 | 2, 69..) => 1900 + n,
            (1 | 2, _) => 2000 + n,
            _ => n,
        };
        items.set_date(year, m, d)?;
        if matches!(sc.peek(), Some(b'T' | b't')) && sc.digit_at(1) {
            sc.i += 1;
            let (hour, _) = sc.number()?;
            if sc.peek() != Some(b':') {
                bail!("a time expected");
            }
            sc.time(hour, items)?;
            return Ok(true);
        }
    } else if sc.peek() == Some(b':') && len <= 2 {
        sc.time(n, items)?;
        return Ok(true);
    } else if len == 8 && !sc.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
        items.set_date(n / 10000, n / 100 % 100, n % 100)?;
    } else {
        sc.skip_space();
        let word = sc.word();
        if let Some(m) = month(&word) {
            let year = year_after(sc)?;
            items.set_date(year.unwrap_or_else(|| this_year(now)), m, n)?;
        } else if let Some(unit) = unit(&word) {
            items.add(unit, n);
        } else {
            bail!("a unit expected after {n}");
        }
    }
    Ok(false)
}

/// An item that starts with a sign (`c`) and a digit: `+N UNIT`, `-N UNIT`, or right after a
/// time (`after_time`) its zone offset.
fn signed_item(sc: &mut Scan, items: &mut Items, c: u8, after_time: bool) -> Result<()> {
    let sign = if c == b'-' { -1 } else { 1 };
    sc.i += 1;
    let start = sc.i;
    let (n, _) = sc.number()?;
    sc.skip_space();
    if let Some(unit) = unit(&sc.word()) {
        items.add(unit, sign * n);
    } else if after_time {
        sc.i = start;
        sc.offset(sign, items)?;
    } else {
        bail!("a unit expected after {}{n}", c as char);
    }
    Ok(())
}

/// An item that starts with a letter: `ago`, `now`, `today`, `yesterday`, `tomorrow`, a
/// zone (`UTC`), `MONTH D [YEAR]`, or a unit alone (one of it).
fn word_item(sc: &mut Scan, items: &mut Items, now: Timestamp) -> Result<()> {
    let word = sc.word();
    match word.as_str() {
        "ago" => match items.last.take() {
            Some((slot, n)) => items.by[slot] = items.by[slot].saturating_sub(n.saturating_mul(2)),
            None => bail!("'ago' after no unit"),
        },
        "now" | "today" => items.relative = true,
        "yesterday" => items.add("day", -1),
        "tomorrow" => items.add("day", 1),
        "utc" | "gmt" | "ut" | "z" => items.set_zone(0)?,
        w => {
            if let Some(m) = month(w) {
                sc.skip_space();
                let (day, _) = sc.number()?;
                let year = year_after(sc)?;
                items.set_date(year.unwrap_or_else(|| this_year(now)), m, day)?;
            } else if let Some(unit) = unit(w) {
                items.add(unit, 1);
            } else {
                bail!("unknown word '{w}'");
            }
        }
    }
    Ok(())
}

/// The year after `MONTH D` or `D MONTH`, if one follows (a number that does not start a time).
fn year_after(sc: &mut Scan) -> Result<Option<i64>> {
    let save = sc.i;
    sc.skip_space();
    if !sc.digit_at(0) {
        sc.i = save;
        return Ok(None);
    }
    let start = sc.i;
    let (year, _) = sc.number()?;
    if sc.peek() == Some(b':') {
        sc.i = start;
        return Ok(None);
    }
    Ok(Some(year))
}

/// `@SECONDS[.FRACTION]`, negative too (`@-1.5` is 1.5 s before the epoch).
fn seconds(text: &str) -> Result<Timestamp> {
    let mut sc = Scan { s: text.as_bytes(), i: 0 };
    let negative = sc.eat(b'-');
    if !negative {
        sc.eat(b'+');
    }
    let (secs, _) = sc.number()?;
    let mut ns = 0;
    if sc.peek().is_some_and(|c| c == b'.' || c == b',') && sc.digit_at(1) {
        sc.i += 1;
        ns = sc.fraction()?;
    }
    if sc.i != sc.s.len() {
        bail!("trailing characters");
    }
    Ok(match (negative, ns) {
        (false, _) => Timestamp { secs, nanos: ns },
        (true, 0) => Timestamp { secs: -secs, nanos: 0 },
        (true, _) => Timestamp { secs: -secs - 1, nanos: 1_000_000_000 - ns },
    })
}

/// The local broken-down time of `t`.
fn local(t: Timestamp) -> libc::tm {
    let secs = t.secs as libc::time_t;
    // Safety: an all-zero tm is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // Safety: valid pointers to a time_t and a tm. On failure tm stays zeroed (1900-01-00).
    unsafe { libc::localtime_r(&secs, &mut tm) };
    tm
}

fn this_year(now: Timestamp) -> i64 {
    i64::from(local(now).tm_year) + 1900
}

/// The items as one time: the date (today's), the time (midnight, or now for a DATE of
/// relative items only), years, months and days added in the calendar, in the zone (local
/// time without one), then hours, minutes and seconds added.
fn resolve(items: &Items, now: Timestamp) -> Timestamp {
    let today = local(now);
    let (year, month, day) = items.date.unwrap_or((
        i64::from(today.tm_year) + 1900,
        i64::from(today.tm_mon) + 1,
        i64::from(today.tm_mday),
    ));
    let (hour, minute, second, nanos) = match items.time {
        Some(t) => t,
        None if items.date.is_none() && items.relative => {
            (i64::from(today.tm_hour), i64::from(today.tm_min), i64::from(today.tm_sec), now.nanos)
        }
        None => (0, 0, 0, 0),
    };
    let field = |n: i64| n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    // Safety: all-zero is a valid tm; every field that matters is set below.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = field((year - 1900).saturating_add(items.by[YEAR]));
    tm.tm_mon = field((month - 1).saturating_add(items.by[MONTH]));
    tm.tm_mday = field(day.saturating_add(items.by[DAY]));
    tm.tm_hour = field(hour);
    tm.tm_min = field(minute);
    tm.tm_sec = field(second);
    tm.tm_isdst = -1;
    // Safety: tm is a valid, initialised tm; both normalise it in place.
    let secs = match items.zone {
        Some(east) => (unsafe { libc::timegm(&mut tm) } as i64) - east,
        None => unsafe { libc::mktime(&mut tm) as i64 },
    };
    let clock = items.by[HOUR]
        .saturating_mul(3600)
        .saturating_add(items.by[MINUTE].saturating_mul(60))
        .saturating_add(items.by[SECOND]);
    Timestamp { secs: secs.saturating_add(clock), nanos }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp { secs: 1_795_000_000, nanos: 123 };

    fn at(text: &str) -> (i64, u32) {
        let t = parse(text, NOW).unwrap_or_else(|e| panic!("{text}: {e}"));
        (t.secs, t.nanos)
    }

    /// The zone-independent forms (a zone given, or seconds), each checked with GNU tar 1.34
    /// (`tar -tv -N DATE`, which says "Treating date ... as"): 1654084800 is
    /// 2022-06-01 12:00:00 UTC.
    #[test]
    fn dates_with_a_zone_or_in_seconds() {
        for (text, want) in [
            ("@1654084800", (1_654_084_800, 0)),
            ("@1.5", (1, 500_000_000)),
            ("@-5", (-5, 0)),
            ("@-1.5", (-2, 500_000_000)),
            ("2022-06-01T12:00:00Z", (1_654_084_800, 0)),
            ("2022-06-01 12:00:00 UTC", (1_654_084_800, 0)),
            ("2022-06-01 12:00 utc", (1_654_084_800, 0)),
            ("2022-06-01T12:00:00.25+05:30", (1_654_084_800 - 19_800, 250_000_000)),
            ("2022-06-01 12:00:00 +0200", (1_654_084_800 - 7_200, 0)),
            ("2022-06-01 12:00:00 +2", (1_654_084_800 - 7_200, 0)),
            ("2022-06-01 12:00:00,5 -01:30", (1_654_084_800 + 5_400, 500_000_000)),
            ("2022-06-01 UTC", (1_654_041_600, 0)),
            ("20220601 UTC", (1_654_041_600, 0)),
            ("22-6-1 UTC", (1_654_041_600, 0)),
            ("1 Jun 2022 UTC", (1_654_041_600, 0)),
            ("June 1, 2022 12:00 GMT", (1_654_084_800, 0)),
            ("2022-06-01 UTC +1 day", (1_654_128_000, 0)),
            ("2022-06-01 UTC 2 hours ago", (1_654_034_400, 0)),
            ("2022-03-31 UTC 1 month", (1_651_363_200, 0)),
            ("2022-06-01 UTC 1 week 1 fortnight ago", (1_654_041_600 - 7 * 86_400, 0)),
        ] {
            assert_eq!(at(text), want, "{text}");
        }
    }

    /// Relative items only: from now, nanoseconds kept.
    #[test]
    fn relative_dates_count_from_now() {
        assert_eq!(at("now"), (NOW.secs, NOW.nanos));
        assert_eq!(at("3 hours ago"), (NOW.secs - 10_800, NOW.nanos));
        assert_eq!(at("-90 sec"), (NOW.secs - 90, NOW.nanos));
        assert_eq!(at("1 day ago 2 hours").0, at("-1 day").0 + 7_200);
        assert_eq!(at("yesterday").0, at("1 day ago").0);
        assert_eq!(at("tomorrow").0, at("day").0);
    }

    #[test]
    fn other_forms_are_refused() {
        for text in [
            "bogus",
            "2022-06-01 -02",
            "2022-06-01 24:00",
            "2022-02-30",
            "2022-13-01",
            "monday",
            "ago",
            "5",
            "2022-06-01 2022-06-02",
            "12:00 UTC UTC",
            "@",
            "@1x",
            "1:2:3:4",
            "1234567890123456789 days",
        ] {
            assert!(parse(text, NOW).is_err(), "{text} was taken");
        }
    }

    /// Numbers at the edges give some time (mktime's -1 where it cannot say), never a panic.
    #[test]
    fn huge_numbers_do_not_overflow() {
        for text in [
            "999999999999999999 years ago",
            "-999999999999999999 days ago 999999999999999999 seconds",
            "999999999999999999 fortnights ago ago",
            "@999999999999999999.999999999",
            "@-999999999999999999.5",
            "9999-12-31 23:59:60 +24:59 999999999999999999 months",
        ] {
            let _ = parse(text, NOW);
        }
    }
}
