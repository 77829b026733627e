//! What the destination filesystem does with O_DIRECT: its alignment, and whether new files
//! there skip data checksums (btrfs).
//!
//! statx(STATX_DIOALIGN) (Linux ≥ 6.1) says what the filesystem needs; before that, the
//! logical block size of the backing block device is the rule (open(2), "O_DIRECT"); failing
//! both, 4096, which every Linux filesystem accepts.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// STATX_DIOALIGN from <linux/stat.h> (not exported by every libc version we build against).
const STATX_DIOALIGN: u32 = 0x2000;

/// Used when neither statx nor sysfs can tell: the conservative value from open(2).
const FALLBACK_ALIGN: usize = 4096;

/// FS_NOCOW_FL, <linux/fs.h>: btrfs's NODATACOW, which implies NODATASUM.
const FS_NOCOW_FL: libc::c_long = 0x0080_0000;

/// What a new file in DIR would get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewFile {
    /// Offset/length and memory alignment for O_DIRECT, or None when the filesystem says it
    /// does not support direct IO for such a file (ext4 with `data=journal`, for one).
    pub align: Option<usize>,
    /// It would be created NOCOW (`chattr +C` on DIR, or btrfs mounted `nodatacow`), so
    /// without data checksums.
    pub nocow: bool,
}

/// Asks about a new file in the directory `dirfd`. Filesystems answer STATX_DIOALIGN for
/// regular files only (ext4, XFS and btrfs leave it out for a directory), and a new file
/// inherits DIR's NOCOW flag, so the questions are put to an unnamed O_TMPFILE file in DIR,
/// which vanishes when closed; where O_TMPFILE is refused, DIR itself is asked.
pub fn new_file(dirfd: RawFd) -> NewFile {
    // Safety: dirfd is open and "." a valid C string; the new fd, if any, is owned below.
    let tmp =
        unsafe { libc::openat(dirfd, c".".as_ptr(), libc::O_TMPFILE | libc::O_WRONLY, 0o600) };
    if tmp >= 0 {
        // Safety: openat returned a new fd that nothing else owns.
        let tmp = unsafe { OwnedFd::from_raw_fd(tmp) };
        let fd = tmp.as_raw_fd();
        return NewFile { align: alignment_of(fd), nocow: nocow(fd) };
    }
    NewFile { align: alignment_of(dirfd), nocow: nocow(dirfd) }
}

fn nocow(fd: RawFd) -> bool {
    let mut flags: libc::c_long = 0;
    // Safety: FS_IOC_GETFLAGS writes one long through the pointer, which is valid; the fd is
    // open for the call. Filesystems without the ioctl (or an O_PATH fd) answer an error.
    let r = unsafe { libc::ioctl(fd, libc::FS_IOC_GETFLAGS, &mut flags) };
    r == 0 && flags & FS_NOCOW_FL != 0
}

fn alignment_of(fd: RawFd) -> Option<usize> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    let empty = c"";
    // Safety: fd is open, the path is a valid empty C string used with AT_EMPTY_PATH, and
    // stx points to writable memory of the right size.
    let r = unsafe {
        libc::statx(
            fd,
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_DIOALIGN | libc::STATX_BASIC_STATS,
            stx.as_mut_ptr(),
        )
    };
    if r == 0 {
        // Safety: statx succeeded and the buffer was zero-initialised.
        let stx = unsafe { stx.assume_init() };
        if stx.stx_mask & STATX_DIOALIGN != 0 {
            if stx.stx_dio_offset_align == 0 {
                return None;
            }
            return Some(stx.stx_dio_offset_align.max(stx.stx_dio_mem_align) as usize);
        }
        if let Some(b) = logical_block_size(stx.stx_dev_major, stx.stx_dev_minor) {
            return Some(b);
        }
    }
    Some(FALLBACK_ALIGN)
}

fn logical_block_size(major: u32, minor: u32) -> Option<usize> {
    let p = format!("/sys/dev/block/{major}:{minor}/queue/logical_block_size");
    let s = std::fs::read_to_string(p).ok()?;
    s.trim().parse().ok().filter(|&n: &usize| n.is_power_of_two())
}
