//! Whether DIR is on a filesystem that ignores the case of names (FAT and exFAT on a USB
//! stick, an SMB share, HFS+, an ext4 or f2fs directory with the casefold attribute). There,
//! `F0001` and `f0001` are one file, but the writer orders its work by names as bytes: two
//! writer threads could write both at once, and the io_uring writer could replace the first
//! while it is still open. Measured on exFAT through FUSE (exfat-fuse 1.3.0), an archive of
//! 800 such pairs: with 4 writer threads one file kept the earlier member's data (GNU tar: the
//! later member wins, every time); with the io_uring writer the daemon died ("BUG: unable to
//! cleanup a node with 1 references") on the first unlink of a file we still held open. One
//! portable writer does one file after the other, as GNU tar does.

use std::path::Path;

use super::mount::{device_of, mount_type};

/// Filesystem types (as /proc/self/mountinfo names them) that compare names without case:
/// FAT (`vfat`, `msdos`), `exfat`, SMB (`cifs`, `smb3`), `hfsplus` and `hfs`, and `fuseblk`
/// (a FUSE filesystem on a block device: exfat-fuse, fusefat; ntfs-3g, which is not, only
/// loses the parallel writers).
const CASELESS: &[&str] = &["vfat", "msdos", "exfat", "cifs", "smb3", "hfsplus", "hfs", "fuseblk"];

/// FS_CASEFOLD_FL, <linux/fs.h>: the directory's names are compared case-folded.
const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;

/// What makes DIR (or, when it does not exist yet, the nearest directory above it that does,
/// where it will be made) compare names without case: the filesystem's type, or `casefold`.
/// None when nothing says so, or when it cannot be told.
pub fn caseless(dir: &Path) -> Option<String> {
    let (dir, major, minor) = device_of(dir)?;
    if let Some(t) = mount_type(major, minor).filter(|t| CASELESS.contains(&t.as_str())) {
        return Some(t);
    }
    casefolded(dir).then(|| "casefold".to_string())
}

/// Whether `dir` has the casefold attribute (ext4, f2fs).
fn casefolded(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(dir) else { return false };
    let mut flags: libc::c_long = 0;
    // Safety: FS_IOC_GETFLAGS writes one long through the pointer, which is valid; the fd is
    // open for the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) };
    r == 0 && flags & FS_CASEFOLD_FL != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root filesystem of this machine (ext4, overlay in a container) is not caseless,
    /// and a directory that does not exist is judged by the one above it.
    #[test]
    fn an_ordinary_directory_is_not_caseless() {
        let tmp = std::env::temp_dir();
        let fstype = mount_type_of(&tmp);
        if fstype.as_deref().is_some_and(|t| CASELESS.contains(&t)) {
            return;
        }
        assert_eq!(caseless(&tmp), None, "{fstype:?}");
        assert_eq!(caseless(&tmp.join("no/such/dir")), None);
        assert!(fstype.is_some(), "mountinfo has no line for {}", tmp.display());
    }

    fn mount_type_of(p: &Path) -> Option<String> {
        let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(p).ok()?);
        mount_type(libc::major(dev), libc::minor(dev))
    }
}
