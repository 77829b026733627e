//! The plans made of typed options: thread counts, the writers' layout, limits, placement.

use super::input::MAX_THREADS;
use super::writer::{DEFAULT_MAX_WRITERS, writer_threads};
use super::*;

/// A machine with 4 CPUs, 16 GiB, no limits, not root.
pub(crate) fn machine() -> Machine {
    Machine {
        root: false,
        cpus: 4,
        address_space_limited: false,
        nproc_limit: None,
        usable_memory: 16 << 30,
        now: Timestamp { secs: 1_800_000_000, nanos: 0 },
    }
}

/// Decoder threads: all CPUs when only reading, one fewer when writing, one under
/// `ulimit -v`; writer threads: the CPUs up to 8, one under a low RLIMIT_NPROC (not for
/// root), a given count kept (at most MAX_WRITERS).
#[test]
fn thread_counts() {
    let m = |cpus, limited, nproc, root| Machine {
        cpus,
        address_space_limited: limited,
        nproc_limit: nproc,
        root,
        ..machine()
    };
    for (machine, listing, want) in [
        (m(4, false, None, false), true, 4),
        (m(4, false, None, false), false, 3),
        (m(1, false, None, false), false, 1),
        (m(4, true, None, false), true, 1),
        (m(1000, false, None, false), true, MAX_THREADS),
    ] {
        assert_eq!(default_threads(listing, &machine), want, "{machine:?} {listing}");
    }
    for (given, machine, want) in [
        (None, m(4, false, None, false), Some((4, false))),
        (None, m(32, false, None, false), Some((DEFAULT_MAX_WRITERS, false))),
        (None, m(4, false, Some(100), false), Some((1, false))),
        (None, m(4, false, Some(100), true), Some((4, false))),
        (None, m(4, false, Some(4096), false), Some((4, false))),
        (None, m(4, true, None, false), Some((1, false))),
        (Some(2), m(1, false, Some(100), false), Some((2, true))),
        (Some(100_000), m(4, false, None, false), Some((crate::write::multi::MAX_WRITERS, true))),
        (Some(0), m(4, false, None, false), None),
    ] {
        assert_eq!(writer_threads(given, &machine).ok(), want, "{given:?} {machine:?}");
    }
    // Through the plans: decoder threads as given (at most MAX_THREADS), 0 refused.
    for (given, want) in [(None, Some(3)), (Some(2), Some(2)), (Some(9999), Some(MAX_THREADS))] {
        let opts = Options { threads: given, ..Options::new("/d".into()) };
        assert_eq!(opts.plans(&machine()).ok().map(|p| p.input.threads), want, "{given:?}");
    }
    let zero = Options { threads: Some(0), ..Options::new("/d".into()) };
    assert!(format!("{:#}", zero.plans(&machine()).unwrap_err()).contains("at least 1"));
}

/// create_n's six conditions: a given count, unlinking first or recursively, keeping
/// directory symlinks, names without case, an ext4 without a journal.
#[test]
fn writer_layouts() {
    let caseless = DestFs { caseless: Some("vfat".into()), journal_less: None };
    let no_journal = DestFs { caseless: None, journal_less: Some("ext4".into()) };
    let plain = DestFs::default();
    // (writer threads, unlink first, recursive unlink, keep directory symlinks)
    type Asked = (Option<usize>, bool, bool, bool);
    let layout = |(threads, unlink, recursive, keep): Asked, fs: &DestFs, verbose| {
        let mut opts = Options::new("/d".into());
        opts.writer_threads = threads;
        opts.old_files = if unlink { OldFiles::UnlinkFirst } else { OldFiles::Replace };
        opts.recursive_unlink = recursive;
        opts.keep_directory_symlink = keep;
        opts.shown.report.verbose = u8::from(verbose);
        writer_layout(&opts.plans(&machine()).unwrap().writer, fs)
    };
    let none = (None, false, false, false);
    // (asked, filesystem, -v) -> (threads, serial, journal-less, notes)
    for (asked, fs, verbose, want) in [
        (none, &plain, false, (4, false, false, 0)),
        ((Some(2), false, false, false), &plain, false, (2, false, false, 0)),
        (none, &caseless, false, (1, true, false, 0)),
        (none, &caseless, true, (1, true, false, 1)),
        ((Some(2), false, false, false), &caseless, false, (2, true, false, 0)),
        (none, &no_journal, false, (1, false, true, 0)),
        ((Some(3), false, false, false), &no_journal, false, (3, false, true, 0)),
        ((Some(3), true, false, false), &plain, false, (1, false, false, 0)),
        ((None, false, true, false), &plain, false, (1, false, false, 0)),
        ((None, false, false, true), &plain, false, (1, true, false, 0)),
        ((Some(4), false, false, true), &plain, false, (1, true, false, 1)),
        ((Some(4), true, false, true), &plain, false, (1, true, false, 0)),
    ] {
        let l = layout(asked, fs, verbose);
        let got = (l.threads, l.serial, l.journal_less, l.notes.len());
        assert_eq!(got, want, "{asked:?} {fs:?} -v {verbose}: {:?}", l.notes);
    }
    let note = &layout(none, &caseless, true).notes[0];
    assert!(note.starts_with("/d: names are compared without case here (vfat)"), "{note}");
}

/// The snapshot layout fills the limits not given with its own; those given stay.
#[test]
fn snapshot_limits() {
    use crate::policy::admit::{SNAPSHOT_MAX_BYTES, SNAPSHOT_MAX_FILES};
    // (snapshot, max files, max bytes) -> (max files, max bytes)
    for (snapshot, files, bytes, want) in [
        (false, None, None, (None, None)),
        (true, None, None, (Some(SNAPSHOT_MAX_FILES), Some(SNAPSHOT_MAX_BYTES))),
        (true, Some(10), None, (Some(10), Some(SNAPSHOT_MAX_BYTES))),
        (false, Some(10), Some(20), (Some(10), Some(20))),
    ] {
        let mut opts = Options::new("/d".into());
        opts.snapshot = snapshot;
        opts.limits.max_files = files;
        opts.limits.max_bytes = bytes;
        let limits = opts.plans(&machine()).unwrap().policy.limits;
        assert_eq!((limits.max_files, limits.max_bytes), want, "{snapshot} {files:?} {bytes:?}");
    }
}
