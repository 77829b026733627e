//! Non-fatal problems: one reporting helper that prints `fastuntar: MEMBER: message` and
//! remembers that something was skipped, so the exit code is decided in one place (main.rs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static SKIPPED: AtomicU64 = AtomicU64::new(0);
static QUIET_WARNINGS: AtomicBool = AtomicBool::new(false);

/// A member was skipped or only partly restored; the run will exit 1.
pub fn skipped(member: &str, msg: impl std::fmt::Display) {
    SKIPPED.fetch_add(1, Ordering::Relaxed);
    eprintln!("fastuntar: {member}: {msg}");
}

/// Something worth saying that does not change the exit code (e.g. a stripped leading `/`).
pub fn warn(msg: impl std::fmt::Display) {
    if !QUIET_WARNINGS.load(Ordering::Relaxed) {
        eprintln!("fastuntar: {msg}");
    }
}

pub fn skipped_count() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}
