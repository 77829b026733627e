//! `--delay-directory-restore`, and GNU tar's automatic case (a directory member of an
//! incremental archive turns it on): directory metadata is applied at the end of the run, not
//! when the archive leaves the directory. GNU tar 1.34 then skips
//! `apply_nonancestor_delayed_set_stat` before each member and applies its whole list in
//! `extract_finish`, last directory first. So a member under a directory the archive made
//! read-only earlier still extracts, and a directory whose files come after other members
//! (`a a/b a/c a/b/f`) still gets its archived time.
//!
//! Any number of directories may wait, and memory stays bounded: each waits as a record
//! (path, mode, mtime, owner, inode, attributes), in memory up to `IN_MEMORY` bytes and past
//! that appended to a temporary file no one can see (O_TMPFILE, in DIR or else the temporary
//! directory), and the records are read back last first, as GNU tar's list runs (a
//! directory's children before it, so a parent made unsearchable does not stop them being
//! stamped).

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::FileExt;

use crate::mark::record::{Record, decode_last, encode};

/// Bytes of records kept in memory before they go to the file (a record is ~50 bytes and a
/// path: a million directories of `d0123/456` are ~55 MB of records). 1 MiB, ~20,000 such
/// directories, is small beside the 64 MiB pool, and each spill is one 1 MiB write: a million
/// directories peaked at 13.5 MB with the option, 10.9 MB without (scripts/rss-dirs.sh,
/// docs/PERFORMANCE.md).
const IN_MEMORY: usize = 1 << 20;

/// Bytes read back from the file at a time (a record longer than this is read whole).
const READ_BACK: usize = 1 << 20;

/// The waiting records: newest last, in `memory` after those in `file`.
#[derive(Default)]
pub struct Delayed {
    memory: Vec<u8>,
    file: Option<File>,
    /// Bytes of records in `file`.
    spilled: u64,
    /// Where the file is made: DIR's descriptor (the file lives on DIR's filesystem).
    dir: Option<RawFd>,
    count: u64,
}

impl Delayed {
    /// Records will spill into an O_TMPFILE in the directory `dir` (DIR), or the temporary
    /// directory where DIR's filesystem has none.
    pub fn new(dir: RawFd) -> Delayed {
        Delayed { dir: Some(dir), ..Delayed::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn push(&mut self, r: &Record) -> io::Result<()> {
        encode(r, &mut self.memory);
        self.count += 1;
        if self.memory.len() >= IN_MEMORY {
            let file = match &self.file {
                Some(f) => f,
                None => self.file.insert(spill_file(self.dir)?),
            };
            file.write_all_at(&self.memory, self.spilled)?;
            self.spilled += self.memory.len() as u64;
            self.memory.clear();
        }
        Ok(())
    }

    /// Every record, in the order pushed, without removing them (a resume point carries
    /// them: src/resume/); None past `cap` bytes of records, or when the spilled part cannot
    /// be read back.
    pub fn records(&self, cap: usize) -> Option<Vec<Record>> {
        let spilled = usize::try_from(self.spilled).ok()?;
        if spilled.saturating_add(self.memory.len()) > cap {
            return None;
        }
        let mut bytes = vec![0; spilled];
        if let Some(f) = &self.file {
            f.read_exact_at(&mut bytes, 0).ok()?;
        }
        bytes.extend_from_slice(&self.memory);
        let mut out = Vec::new();
        let mut end = bytes.len();
        while end > 0 {
            let (r, start) = decode_last(&bytes[..end]).ok()?;
            out.push(r);
            end = start;
        }
        out.reverse();
        Some(out)
    }

    /// Every record, last pushed first, each handed to `f`; the store is empty after.
    pub fn drain_newest_first(
        &mut self,
        mut f: impl FnMut(Record) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let memory = std::mem::take(&mut self.memory);
        let mut end = memory.len();
        while end > 0 {
            let (r, start) = decode_last(&memory[..end])?;
            self.count -= 1;
            f(r)?;
            end = start;
        }
        let (file, mut pos) = (self.file.take(), std::mem::take(&mut self.spilled));
        let Some(file) = file else { return Ok(()) };
        // A window of the file ending at `pos`, whose last complete records are decoded.
        let mut window: Vec<u8> = Vec::new();
        let mut window_start = pos;
        while pos > 0 {
            let have = (pos - window_start) as usize;
            let need = if have >= 4 {
                let len = u32::from_le_bytes(window[have - 4..have].try_into().expect("4"));
                len as usize + 4
            } else {
                4
            };
            if have < need {
                let want = need.max(READ_BACK) as u64;
                let start = pos.saturating_sub(want);
                let mut fresh = vec![0; (pos - start) as usize];
                file.read_exact_at(&mut fresh, start)?;
                window = fresh;
                window_start = start;
                continue;
            }
            let (r, start) = decode_last(&window[..have])?;
            self.count -= 1;
            f(r)?;
            window.truncate(start);
            pos = window_start + start as u64;
        }
        Ok(())
    }
}

/// An unlinked temporary file: O_TMPFILE in `dir`, else in the temporary directory.
fn spill_file(dir: Option<RawFd>) -> io::Result<File> {
    let flags = libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC;
    let open = |dirfd: RawFd, path: &std::ffi::CStr| {
        // Safety: a valid directory fd (or AT_FDCWD) and C string; the result is checked.
        let fd = unsafe { libc::openat(dirfd, path.as_ptr(), flags, 0o600) };
        // Safety: a fresh descriptor nothing else owns.
        (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
    };
    if let Some(f) = dir.and_then(|d| open(d, c".")) {
        return Ok(f);
    }
    let tmp = std::env::temp_dir();
    let path = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(tmp.as_os_str()))
        .map_err(io::Error::other)?;
    open(libc::AT_FDCWD, &path).ok_or_else(|| {
        let e = io::Error::last_os_error();
        io::Error::new(
            e.kind(),
            format!(
                "cannot make a file for delayed directories (in DIR or {}): {e}",
                tmp.display()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Timestamp, Xattr};

    fn record(i: u64) -> Record {
        Record {
            path: format!("d{i}/sub").into_bytes(),
            mode: 0o750,
            mtime: (!i.is_multiple_of(3)).then_some(Timestamp { secs: -(i as i64), nanos: 7 }),
            owner: (i.is_multiple_of(2)).then_some((i as u32, 5)),
            dev: 1,
            ino: i,
            borrowed: i.is_multiple_of(5),
            name: if i.is_multiple_of(4) { format!("d{i}/sub/") } else { String::new() },
            xattrs: (i.is_multiple_of(4)).then(|| {
                vec![
                    Xattr { name: b"user.a".to_vec(), value: Some(vec![0; (i % 700) as usize]) },
                    Xattr { name: b"user.big".to_vec(), value: None },
                ]
                .into()
            }),
        }
    }

    /// Records come back whole and newest first, from memory and from the spilled file,
    /// across read-back windows, with memory bounded by IN_MEMORY.
    #[test]
    fn records_come_back_newest_first() {
        let dir = std::env::temp_dir();
        let dirfd = File::open(&dir).unwrap();
        let mut d = Delayed::new(std::os::fd::AsRawFd::as_raw_fd(&dirfd));
        let n = 30_000;
        for i in 0..n {
            d.push(&record(i)).unwrap();
            assert!(d.memory.len() < IN_MEMORY, "memory is bounded");
        }
        assert!(d.spilled > 0, "spilled to the file");
        let mut want = n;
        d.drain_newest_first(|r| {
            want -= 1;
            assert_eq!(r, record(want));
            Ok(())
        })
        .unwrap();
        assert_eq!(want, 0);
        assert!(d.is_empty());
    }
}
