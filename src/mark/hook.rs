//! Deterministic kill points for the kill tests (tests/resume.rs): the hidden option
//! `--debug-kill-at EVENT:N` makes the process SIGKILL itself at the N-th EVENT, so a test can
//! stop a run exactly between two steps of the protocol (after a state file is written and
//! before it is renamed, in the final directory pass, ...) on any machine, however loaded.
//! Unset (every real run), each event costs one atomic load. Production code reads no test
//! environment variable for this: a flag on the command line arms it (docs/TESTING.md).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The decoder has sent member N's ops (counted from 1, in this run).
    Member,
    /// A resume point was published: every member before it has landed.
    Published,
    /// The state's temporary file is written, not yet synced.
    Written,
    /// The filesystem was synced, the state not yet renamed into place.
    Synced,
    /// The state was renamed into place, DIR not yet synced.
    Renamed,
    /// A directory's deferred metadata was applied.
    Stamp,
    /// A directory's metadata was applied in the final pass, after the last member.
    FinalStamp,
    /// The final pass is over; the state file is not yet removed.
    End,
}

const NAMES: [(&str, Event); 8] = [
    ("member", Event::Member),
    ("published", Event::Published),
    ("written", Event::Written),
    ("synced", Event::Synced),
    ("renamed", Event::Renamed),
    ("stamp", Event::Stamp),
    ("final-stamp", Event::FinalStamp),
    ("end", Event::End),
];

/// The kill `--debug-kill-at` armed. Process-wide by nature (it kills the process) and set
/// once, from the command line; never set in a real run, nor in a test that extracts in its
/// own process.
static ARMED: OnceLock<Armed> = OnceLock::new();

struct Armed {
    event: Event,
    /// Occurrences of `event` left before the kill.
    left: AtomicU64,
    /// The kill is at the first occurrence of its event.
    first: bool,
    /// The run has reached its final directory pass (FinalStamp counts from there).
    final_pass: AtomicBool,
}

/// Parses `EVENT:N` (N ≥ 1).
pub fn parse(text: &str) -> Result<(Event, u64), String> {
    let (name, n) = text.split_once(':').ok_or("the form is EVENT:N")?;
    let event = NAMES.iter().find(|(k, _)| *k == name).map(|(_, e)| *e);
    let event = event.ok_or_else(|| format!("unknown event '{name}'"))?;
    match n.parse::<u64>() {
        Ok(n) if n > 0 => Ok((event, n)),
        _ => Err(format!("'{n}' is not a count from 1")),
    }
}

/// Arms the hook: the process dies at the `n`-th `event`.
pub fn arm(event: Event, n: u64) {
    let _ = ARMED.set(Armed {
        event,
        left: AtomicU64::new(n),
        first: n == 1,
        final_pass: AtomicBool::new(false),
    });
}

/// The run has reached its final directory pass (FinalStamp counts from here). Unarmed:
/// nothing.
pub fn final_pass() {
    if let Some(armed) = ARMED.get() {
        armed.final_pass.store(true, Ordering::Relaxed);
    }
}

/// The decoder has sent every member. A kill armed at the first step of the state protocol of
/// its kind (`published:1`, `written:1`, `synced:1`, `renamed:1`) that has not come yet is
/// waited for, up to 60 s: a test that needs a state in place gets one however slow the
/// disk's syncs (on a throttled disk a 3 MB run ended before its first syncfs, and the test
/// found no state). The first state always comes: the run wrote more than the test's
/// `--writeback-every`, and its members have landed. Later ones may not (a run that ends
/// first is what those kills expect), so they are not waited for. Unarmed: nothing.
/// `publish` is called while waiting: the writer publishes the points whose members have
/// landed when it is next driven, and nothing drives it once every member is sent. A run that
/// writes no resume points (`writes_points` false: `--no-resume`, standard input, `-k`, ...)
/// never gets there, and is not held: until issue 40 `--no-resume` with `renamed:1` waited
/// the full 60 s.
pub fn before_end(writes_points: bool, mut publish: impl FnMut()) {
    let Some(armed) = ARMED.get() else { return };
    if !writes_points {
        return;
    }
    let state_step =
        matches!(armed.event, Event::Published | Event::Written | Event::Synced | Event::Renamed);
    if !state_step || !armed.first {
        return;
    }
    let start = std::time::Instant::now();
    while armed.left.load(Ordering::SeqCst) > 0
        && start.elapsed() < std::time::Duration::from_secs(60)
    {
        publish();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// One `event` happened: dies if it is the armed one's N-th.
#[inline]
pub fn at(event: Event) {
    let Some(armed) = ARMED.get() else { return };
    let hit = |e: Event| e == armed.event && armed.left.fetch_sub(1, Ordering::SeqCst) == 1;
    let final_pass = || armed.final_pass.load(Ordering::Relaxed);
    if hit(event) || (event == Event::Stamp && final_pass() && hit(Event::FinalStamp)) {
        // Safety: raise has no memory effects; SIGKILL cannot be caught, so nothing runs after.
        unsafe { libc::raise(libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events() {
        assert_eq!(parse("member:3"), Ok((Event::Member, 3)));
        assert_eq!(parse("final-stamp:1"), Ok((Event::FinalStamp, 1)));
        assert!(parse("member:0").is_err());
        assert!(parse("member").is_err());
        assert!(parse("nothing:1").is_err());
    }
}
