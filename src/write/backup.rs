//! `--backup[=CONTROL]` and `--suffix=SUFFIX`, as GNU tar (its `maybe_backup_file`): what a
//! member would replace is renamed out of the way instead of removed, unless it is a
//! directory or nothing at all (a symlink is renamed itself, whatever it points to). CONTROL as
//! GNU's version control: `simple`/`never` (NAME + SUFFIX), `numbered`/`t` (NAME.~N~, one more
//! than the highest there), `existing`/`nil` (numbered where numbered backups exist, else
//! simple; the default, or `$VERSION_CONTROL`), `none`/`off` (no backups). SUFFIX defaults to
//! `$SIMPLE_BACKUP_SUFFIX`, else `~`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use anyhow::{Result, bail};

use super::restart;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Simple,
    Numbered,
    Existing,
}

#[derive(Debug, Clone)]
pub struct Backup {
    control: Control,
    suffix: Vec<u8>,
}

impl Backup {
    /// From `--backup[=CONTROL]` (`control`: None when the option is absent, Some("") when
    /// given without a value) and `--suffix`; None when no backups are made.
    pub fn new(control: Option<&str>, suffix: Option<&str>) -> Result<Option<Backup>> {
        let Some(control) = control else {
            if suffix.is_some() {
                // GNU tar: --suffix alone turns backups on, as --backup without CONTROL.
                return Backup::new(Some(""), suffix);
            }
            return Ok(None);
        };
        let env = std::env::var("VERSION_CONTROL").unwrap_or_default();
        let control = if control.is_empty() { env.as_str() } else { control };
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
        let suffix = match suffix {
            Some(s) => s.to_string(),
            None => std::env::var("SIMPLE_BACKUP_SUFFIX").unwrap_or_else(|_| "~".into()),
        };
        if suffix.is_empty() || suffix.contains('/') {
            bail!("--suffix: '{suffix}' cannot name a backup (empty, or with a '/')");
        }
        Ok(Some(Backup { control, suffix: suffix.into_bytes() }))
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
        let highest = match self.control {
            Control::Simple => None,
            Control::Numbered | Control::Existing => highest_numbered(dirfd, name)?,
        };
        let numbered = self.control == Control::Numbered || highest.is_some();
        let mut out = name.to_vec();
        if numbered {
            out.extend_from_slice(format!(".~{}~", highest.unwrap_or(0) + 1).as_bytes());
        } else {
            out.extend_from_slice(&self.suffix);
        }
        Ok(out)
    }
}

/// The highest N of the `NAME.~N~` in the directory, if any.
fn highest_numbered(dirfd: RawFd, name: &[u8]) -> io::Result<Option<u64>> {
    let mut highest = None;
    for entry in super::dest::names_in(dirfd)? {
        let entry = entry.as_bytes();
        let n = entry
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix(b".~"))
            .and_then(|r| r.strip_suffix(b"~"))
            .filter(|d| !d.is_empty() && d.iter().all(u8::is_ascii_digit))
            .and_then(|d| std::str::from_utf8(d).ok()?.parse::<u64>().ok());
        if let Some(n) = n {
            highest = highest.max(Some(n));
        }
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
        let simple = Backup { control: Control::Simple, suffix: b".bak".to_vec() };
        let numbered = Backup { control: Control::Numbered, suffix: b"~".to_vec() };
        let existing = Backup { control: Control::Existing, suffix: b"~".to_vec() };
        assert_eq!(simple.name_for(fd, b"a").unwrap(), b"a.bak");
        assert_eq!(numbered.name_for(fd, b"a").unwrap(), b"a.~8~");
        assert_eq!(numbered.name_for(fd, b"b").unwrap(), b"b.~1~");
        assert_eq!(existing.name_for(fd, b"a").unwrap(), b"a.~8~");
        assert_eq!(existing.name_for(fd, b"b").unwrap(), b"b~");
    }

    #[test]
    fn controls_and_suffixes() {
        assert!(Backup::new(None, None).unwrap().is_none());
        assert!(Backup::new(Some("off"), None).unwrap().is_none());
        assert_eq!(Backup::new(Some("t"), None).unwrap().unwrap().control, Control::Numbered);
        assert_eq!(Backup::new(Some("never"), None).unwrap().unwrap().control, Control::Simple);
        assert!(Backup::new(Some("sometimes"), None).is_err());
        assert!(Backup::new(Some("simple"), Some("a/b")).is_err());
        assert_eq!(Backup::new(None, Some(".old")).unwrap().unwrap().suffix, b".old");
    }
}
