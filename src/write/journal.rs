//! Whether DIR is on an ext2, ext3 or ext4 filesystem without a journal. There, for every
//! inode it allocates, ext4 looks the inode's table block up in the block device's cache to
//! skip inodes deleted in the last half minute (`recently_deleted`, ialloc.c; with a journal
//! it does not). Files created by several threads at once make those lookups contend, and
//! right after `rm -rf` of a tree they skip many inodes each. Measured on this VM's root
//! filesystem (which has no journal), a tarball of /usr/share (43,204 files) extracted again
//! right after deleting the last extraction (docs/PERFORMANCE.md, 3 rounds): GNU tar
//! 1.19-1.21 s, two writer threads 1.41-1.72 s (25 % of all samples in `recently_deleted`),
//! one portable writer 1.13-1.17 s. On a fresh journal-less ext4 one portable writer is as
//! fast (1.30 against 1.26-1.29 s) or faster (smallfiles.tar.zst: 1.95-2.01 against 2.13 s).
//! So there the default is one writer thread, without io_uring for buffered files (its opens
//! run on io-wq workers, in parallel again); `--direct-io` keeps the ring (snapshot.tar.zst:
//! one io_uring writer 3.08-3.29 s, two 3.17-3.22 s, one portable 3.53-3.61 s).

use std::path::Path;

/// The filesystem type when DIR (or the nearest directory above it that exists) is an
/// ext2/3/4 filesystem with no journal. None when it has one, is something else, or it cannot
/// be told. ext4 says it in /sys/fs/ext4/DEVICE/journal_task (`<none>` exactly when it has no
/// journal, the condition its inode allocator tests); where that file is missing, the journals
/// the kernel lists under /proc/fs/jbd2 as `DEVICE-INODE` (`vda-8`, `loop0-8`; a journal on
/// another device is listed under that device's name) are looked through.
pub fn journal_less(dir: &Path) -> Option<String> {
    let (_, major, minor) = super::mount::device_of(dir)?;
    let fstype = super::mount::mount_type(major, minor)?;
    if !matches!(fstype.as_str(), "ext2" | "ext3" | "ext4") {
        return None;
    }
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    // jbd2 and ext4's sysfs write a `/` of a device's name as `!` (`cciss!c0d0`).
    let name = name.replace('/', "!");
    if let Ok(task) = std::fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task")) {
        return (task.trim() == "<none>").then_some(fstype);
    }
    let journals = std::fs::read_dir("/proc/fs/jbd2").ok()?;
    let prefix = format!("{name}-");
    let journaled = journals.flatten().any(|e| {
        e.file_name().to_str().is_some_and(|n| {
            n.strip_prefix(&prefix).is_some_and(|ino| ino.bytes().all(|b| b.is_ascii_digit()))
        })
    });
    (!journaled).then_some(fstype)
}
