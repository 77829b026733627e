//! The destination's tests: refilled modes, swapped names, what the sink is told, the deferred
//! directories' bounds.

use super::*;
use crate::archive::{Timestamp, Xattr};
use crate::plan::Entry;
use dirs::refill_mode;
use leaves::{made_as, open_path_nofollow};
use meta::set_xattrs;

#[test]
fn refill_gives_a_user_write_and_search_back() {
    assert_eq!(refill_mode(0o555, false), Some(0o755));
    assert_eq!(refill_mode(0o444, false), Some(0o744));
    assert_eq!(refill_mode(0o2550, false), Some(0o2750));
    assert_eq!(refill_mode(0o700, false), None);
    assert_eq!(refill_mode(0o755, false), None);
    assert_eq!(refill_mode(0o555, true), None);
}

/// What was just made, and only that, passes: a name that now holds a second link to
/// another inode (renamed over the new one) or another type is left alone.
#[test]
fn made_as_refuses_a_swapped_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink("t", d.join("link")).unwrap();
    std::fs::write(d.join("file"), b"x").unwrap();
    std::os::unix::fs::symlink("t", d.join("twice")).unwrap();
    std::fs::hard_link(d.join("twice"), d.join("twice2")).unwrap();
    let dirfd =
        open_path_nofollow(libc::AT_FDCWD, &cstr_io(d.as_os_str().as_bytes()).unwrap()).unwrap();
    let node = |name: &str| open_path_nofollow(dirfd.as_raw_fd(), &CString::new(name).unwrap());
    assert!(made_as(&node("link").unwrap(), libc::S_IFLNK).is_ok());
    assert!(made_as(&node("file").unwrap(), libc::S_IFLNK).is_err());
    assert!(made_as(&node("twice").unwrap(), libc::S_IFLNK).is_err());
}

fn dest(dir: &Path) -> Dest {
    dest_with(
        dir,
        OldFiles::Replace,
        None,
        Arc::new(super::super::events::Said::new(false, Default::default(), Arc::default())),
    )
}

fn dest_with(
    dir: &Path,
    old_files: OldFiles,
    backup: Option<Backup>,
    events: Arc<dyn Events>,
) -> Dest {
    let opts = DestOptions {
        old_files,
        events,
        exact: true,
        user_umask: 0o022,
        dir_fds: 8,
        files: FileCount::new(None),
        keep_dir_symlinks: false,
        dereference: false,
        write_through: false,
        delay_restore: false,
        recursive_unlink: false,
        backup: backup.map(Arc::new),
        one_file_system: false,
        removals: None,
        setgid: Arc::default(),
    };
    Dest::open(dir, opts).unwrap()
}

/// The writer says what it did through its sink, and prints nothing itself: `--backup`'s
/// rename, what `--skip-old-files` and `--keep-newer-files` kept, and a member it could
/// not restore (`member_failed`), which the sink counts for the exit status.
#[test]
fn what_is_done_goes_to_the_sink() {
    use super::super::events::Kept;
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("f"), "old").unwrap();
    let kept = Arc::new(Kept::default());
    let backup = Backup::new("simple", "~").unwrap();
    let mut d = dest_with(t.path(), OldFiles::Replace, backup, kept.clone());
    drop(d.create_file(&entry("f", 0o644, 0), 0).unwrap());
    assert_eq!(std::fs::read(t.path().join("f~")).unwrap(), b"old");

    for (old, secs) in [(OldFiles::Skip, 0), (OldFiles::KeepNewer, 0)] {
        let mut d = dest_with(t.path(), old, None, kept.clone());
        let e = entry("f", 0o644, secs);
        let err = d.create_file(&e, 0).unwrap_err();
        super::super::member_failed(&d, &e, "cannot create", err).unwrap();
    }
    let gone = io::Error::from_raw_os_error(libc::ENOENT);
    super::super::member_failed(&d, &entry("g", 0o644, 0), "cannot create", gone.into()).unwrap();
    let said = kept.0.lock().unwrap().clone();
    let not_restored = "not restored g: cannot create: No such file or directory";
    assert_eq!(said, ["renamed f f~", "skipped f", "kept newer f", not_restored]);
}

/// Attributes the kernel refuses are an event to the sink, one per member naming the
/// first refusal (escaped) and counting the rest; none when every one is set.
#[test]
fn attributes_not_set_go_to_the_sink() {
    use super::super::events::Kept;
    let kept = Kept::default();
    let x = |name: &[u8], value: Option<&[u8]>| Xattr {
        name: name.to_vec(),
        value: value.map(|v| v.to_vec()),
    };
    let refuse_b = |name: &CStr, _: &[u8]| match name.to_bytes().starts_with(b"user.b") {
        true => Err(io::Error::from_raw_os_error(libc::ENOTSUP)),
        false => Ok(()),
    };
    let all = [x(b"user.a", Some(b"1")), x(b"user.b\n", Some(b"2")), x(b"user.c", None)];
    set_xattrs("m", &all, &kept, refuse_b);
    set_xattrs("n", &all[..1], &kept, refuse_b);
    let said = kept.0.lock().unwrap().clone();
    let enotsup = crate::report::strerror(&io::Error::from_raw_os_error(libc::ENOTSUP));
    assert_eq!(said, [format!("xattrs not set m user.b\\n: {enotsup} +1")]);
}

fn entry(path: &str, mode: u32, secs: i64) -> Entry {
    Entry {
        name: path.to_string(),
        path: SafePath(path.into()),
        mode,
        mtime: Some(Timestamp { secs, nanos: 0 }),
        archived_mtime: Timestamp { secs, nanos: 0 },
        owner: None,
        offset: 0,
        xattrs: None,
        delay_restore: false,
        root: 0,
    }
}

#[test]
fn deferred_dirs_are_bounded_by_depth() {
    let t = tempfile::tempdir().unwrap();
    let mut d = dest(t.path());
    for i in 0..2000 {
        let e = entry(&format!("d{i}"), 0o755, 1000);
        d.enter(&e.path);
        d.mkdir(&e).unwrap();
        d.settle().unwrap();
        assert!(d.open.len() + d.closing.len() <= 2);
    }
    d.leave_all();
    d.settle().unwrap();
    assert_eq!(d.closing(), 0);
    let m = std::fs::metadata(t.path().join("d7")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::mtime(&m), 1000);
    // The tree keeps only cached fds and DIR.
    assert!(d.tree.len() <= 1 + 8);
}

#[test]
fn a_member_inside_a_closing_dir_waits_for_it() {
    let t = tempfile::tempdir().unwrap();
    let mut d = dest(t.path());
    let a = entry("a", 0o755, 1000);
    d.enter(&a.path);
    d.mkdir(&a).unwrap();
    let b = entry("b", 0o755, 2000);
    assert!(!d.enter(&b.path));
    assert!(d.enter(&entry("a/x", 0o644, 0).path));
    d.settle().unwrap();
    assert!(!d.enter(&entry("a/x", 0o644, 0).path));
}
