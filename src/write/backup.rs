//! `--backup[=CONTROL]` and `--suffix=SUFFIX`, as GNU tar (its `maybe_backup_file`): what a
//! member would replace is renamed out of the way instead of removed, unless it is a
//! directory or nothing at all (a symlink is renamed itself, whatever it points to). CONTROL as
//! GNU's version control: `simple`/`never` (NAME + SUFFIX), `numbered`/`t` (NAME.~N~, one more
//! than the highest there), `existing`/`nil` (numbered where numbered backups exist, else
//! simple; the default, or `$VERSION_CONTROL`), `none`/`off` (no backups). SUFFIX defaults to
//! `$SIMPLE_BACKUP_SUFFIX`, else `~`. The options and the environment are settled by the
//! resolve step (cli/resolve/writer.rs `backup_wanted`); this only reads the CONTROL and SUFFIX it
//! is given.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::sync::Mutex;

use anyhow::{Result, bail};

use super::restart;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Simple,
    Numbered,
    Existing,
}

#[derive(Debug)]
pub struct Backup {
    control: Control,
    suffix: Vec<u8>,
    /// Per directory (device, inode), the highest N of each name's `NAME.~N~`: a directory is
    /// read once, not once per file (re-extracting 400,000 files of one directory with
    /// numbered backups would read it 400,000 times, as GNU tar does), and kept up to date
    /// with the backups made. Shared by the writer threads.
    numbered: Mutex<HashMap<(u64, u64), Highest>>,
}

/// The highest N of each name's `NAME.~N~` in one directory.
type Highest = HashMap<Vec<u8>, u64>;

impl Backup {
    /// Backups by CONTROL (empty: the default) and SUFFIX, as the resolve step settled them
    /// (`backup_wanted`); None when CONTROL makes none.
    pub fn new(control: &str, suffix: &str) -> Result<Option<Backup>> {
        let control = match control {
            "" | "existing" | "nil" => Control::Existing,
            "simple" | "never" => Control::Simple,
            "numbered" | "t" => Control::Numbered,
            "none" | "off" => return Ok(None),
            other => bail!(
                "--backup: invalid version control '{other}' (none, off, simple, never, \
                 existing, nil, numbered, t)"
            ),
        };
        if suffix.is_empty() || suffix.contains('/') {
            bail!("--suffix: '{suffix}' cannot name a backup (empty, or with a '/')");
        }
        let suffix = suffix.as_bytes().to_vec();
        Ok(Some(Backup { control, suffix, numbered: Mutex::default() }))
    }

    /// Renames what is at `name` in `dirfd` to its backup name: Some(backup name) when it did,
    /// None when there is nothing to keep (nothing there, or a directory).
    pub fn keep(&self, dirfd: RawFd, name: &CStr) -> io::Result<Option<Vec<u8>>> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        let flags = libc::AT_SYMLINK_NOFOLLOW;
        // Safety: valid dirfd and C string; st is written on success.
        if unsafe { libc::fstatat(dirfd, name.as_ptr(), st.as_mut_ptr(), flags) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                _ => Err(e),
            };
        }
        // Safety: fstatat succeeded.
        let st = unsafe { st.assume_init() };
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            return Ok(None);
        }
        let backup = self.name_for(dirfd, name.to_bytes())?;
        let to =
            CString::new(backup.clone()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // Safety: valid dirfds and C strings. renameat replaces a backup of that name (GNU
        // tar's simple backups do the same).
        if restart(|| unsafe { libc::renameat(dirfd, name.as_ptr(), dirfd, to.as_ptr()) }) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(backup))
    }

    fn name_for(&self, dirfd: RawFd, name: &[u8]) -> io::Result<Vec<u8>> {
        if self.control == Control::Simple {
            return Ok([name, &self.suffix].concat());
        }
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // Safety: dirfd is an open directory; st is written on success.
        if unsafe { libc::fstat(dirfd, st.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: fstat succeeded.
        let st = unsafe { st.assume_init() };
        let mut cache = self.numbered.lock().unwrap_or_else(|e| e.into_inner());
        let highest = match cache.entry((st.st_dev, st.st_ino)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(highest_numbered(dirfd)?),
        };
        let n = match (highest.get(name), self.control) {
            (Some(&n), _) => n + 1,
            (None, Control::Numbered) => 1,
            (None, _) => return Ok([name, &self.suffix].concat()),
        };
        highest.insert(name.to_vec(), n);
        Ok([name, format!(".~{n}~").as_bytes()].concat())
    }
}

/// The highest N of each name's `NAME.~N~` in the directory.
fn highest_numbered(dirfd: RawFd) -> io::Result<Highest> {
    let mut highest = Highest::new();
    for entry in super::names_in(dirfd)? {
        let Some(rest) = entry.as_bytes().strip_suffix(b"~") else { continue };
        let Some(at) = rest.windows(2).rposition(|w| w == b".~") else { continue };
        let digits = &rest[at + 2..];
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Some(n) = std::str::from_utf8(digits).ok().and_then(|d| d.parse::<u64>().ok()) else {
            continue;
        };
        let h = highest.entry(rest[..at].to_vec()).or_insert(0);
        *h = (*h).max(n);
    }
    Ok(highest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn dir_with(names: &[&str]) -> (tempfile::TempDir, std::fs::File) {
        let t = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(t.path().join(n), n).unwrap();
        }
        let f = std::fs::File::open(t.path()).unwrap();
        (t, f)
    }

    #[test]
    fn names_as_gnu_tar_gives_them() {
        let (_t, d) = dir_with(&["a", "a.~1~", "a.~7~", "a.~x~", "b"]);
        let fd = d.as_raw_fd();
        let with = |control, suffix: &[u8]| Backup {
            control,
            suffix: suffix.to_vec(),
            numbered: Mutex::default(),
        };
        let (simple, numbered) = (with(Control::Simple, b".bak"), with(Control::Numbered, b"~"));
        let existing = with(Control::Existing, b"~");
        assert_eq!(simple.name_for(fd, b"a").unwrap(), b"a.bak");
        assert_eq!(numbered.name_for(fd, b"a").unwrap(), b"a.~8~");
        assert_eq!(numbered.name_for(fd, b"b").unwrap(), b"b.~1~");
        // The directory is read once; the backups made count from then on.
        assert_eq!(numbered.name_for(fd, b"a").unwrap(), b"a.~9~");
        assert_eq!(existing.name_for(fd, b"a").unwrap(), b"a.~8~");
        assert_eq!(existing.name_for(fd, b"b").unwrap(), b"b~");
        assert_eq!(existing.name_for(fd, b"a.~1").unwrap(), b"a.~1~");
    }

    #[test]
    fn controls_and_suffixes() {
        assert!(Backup::new("off", "~").unwrap().is_none());
        assert_eq!(Backup::new("", "~").unwrap().unwrap().control, Control::Existing);
        assert_eq!(Backup::new("t", "~").unwrap().unwrap().control, Control::Numbered);
        assert_eq!(Backup::new("never", "~").unwrap().unwrap().control, Control::Simple);
        assert!(Backup::new("sometimes", "~").is_err());
        assert!(Backup::new("simple", "a/b").is_err());
        assert!(Backup::new("simple", "").is_err());
        assert_eq!(Backup::new("", ".old").unwrap().unwrap().suffix, b".old");
    }
}
