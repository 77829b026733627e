//! Which members may be extracted at all: `--snapshot` layout rules and the size/count limits.
//! Runs on each member before anything of it is written; a refusal here is fatal (the run
//! stops), unlike a path refusal in `safety.rs`, which skips one member.

use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::{Result, bail};

use crate::archive::{Kind, Member};

/// Limits in `--snapshot` mode when none is given: Agave's hardened unpack allows 5,000,000
/// files and 4 TiB of data (mainnet snapshots hold ~1M files and ~300 GB in 2026).
pub const SNAPSHOT_MAX_FILES: u64 = 5_000_000;
pub const SNAPSHOT_MAX_BYTES: u64 = 4 << 40;

/// Modes imposed in `--snapshot` mode (Agave's hardened unpack does the same).
pub const SNAPSHOT_FILE_MODE: u32 = 0o644;
pub const SNAPSHOT_DIR_MODE: u32 = 0o755;

#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub max_files: Option<u64>,
    pub max_bytes: Option<u64>,
    pub max_member_size: Option<u64>,
}

/// `--max-files` counts every member and every directory the writer creates on the way to one
/// (implied directories): the decoder thread counts members, the writer implied directories,
/// both against this one shared count.
#[derive(Debug, Default)]
pub struct FileCount {
    max: Option<u64>,
    used: AtomicU64,
    /// Held by a writer thread while it counts and makes an implied directory, when there is
    /// a limit (see `making_dirs`).
    making: Mutex<()>,
}

impl FileCount {
    pub fn new(max: Option<u64>) -> Arc<FileCount> {
        Arc::new(FileCount { max, used: AtomicU64::new(0), making: Mutex::new(()) })
    }

    /// With a limit, the lock under which implied directories are looked for again, counted
    /// and made (write/tree.rs `open_child`), so two writer threads that need the same one
    /// count it once. Without a limit nothing is counted and there is nothing to hold.
    pub fn making_dirs(&self) -> Option<MutexGuard<'_, ()>> {
        self.max?;
        Some(self.making.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Counts one more; Err (with the message) once that passes the limit.
    pub fn take(&self) -> Result<()> {
        let used = self.used.fetch_add(1, Ordering::Relaxed) + 1;
        match self.max {
            Some(max) if used > max => bail!(
                "more than {max} files and directories (--max-files); stopping before this one"
            ),
            _ => Ok(()),
        }
    }

    /// Undoes one `take` (a directory another writer thread made first, or one refused).
    pub fn give_back(&self) {
        self.used.fetch_sub(1, Ordering::Relaxed);
    }

    /// `take` for a directory the writer makes (implied, or `-G`'s temporary one): the refusal
    /// as its own type (`TooManyFiles`, which the writer's `MemberError` carries), and nothing
    /// counted then.
    pub fn take_dir(&self) -> Result<(), TooManyFiles> {
        self.take().map_err(|refused| {
            self.give_back();
            TooManyFiles(format!("{refused:#}"))
        })
    }
}

/// A directory the writer was to make refused by `--max-files` (its message): the run stops
/// there, wherever the directory was needed.
#[derive(Debug)]
pub struct TooManyFiles(pub String);

impl std::fmt::Display for TooManyFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TooManyFiles {}

pub struct Admission {
    snapshot: bool,
    limits: Limits,
    files: Arc<FileCount>,
    bytes: u64,
}

/// Member types written as regular files, with data: files, and the unknown types GNU tar
/// extracts as files (not volume labels or multi-volume continuations, which are skipped).
pub fn extracted_as_file(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::Dir
            | Kind::Symlink
            | Kind::Hardlink
            | Kind::Fifo
            | Kind::CharDev
            | Kind::BlockDev
            | Kind::Other(b'V' | b'M')
    )
}

impl Admission {
    pub fn new(snapshot: bool, limits: Limits, files: Arc<FileCount>) -> Admission {
        Admission { snapshot, limits, files, bytes: 0 }
    }

    /// Accepts the member (counting it against the limits) or says why the run must stop.
    /// `path` is the member's path after sanitising, relative to the destination.
    /// What a resume point carries of the limits (src/resume/): `--max-bytes`' count and the
    /// files and directories counted so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.bytes, self.files.used.load(Ordering::Relaxed))
    }

    /// The counts a resume point carried (`counts`): the resumed run goes on from them.
    pub fn restore(&mut self, bytes: u64, files: u64) {
        self.bytes = bytes;
        self.files.used.store(files, Ordering::Relaxed);
    }

    pub fn admit(&mut self, m: &Member, path: &Path) -> Result<()> {
        if self.snapshot {
            snapshot_layout(m.kind, path)?;
        }
        self.files.take()?;
        if extracted_as_file(m.kind) {
            if let Some(max) = self.limits.max_member_size
                && m.size > max
            {
                bail!("member size {} exceeds --max-member-size {max}", m.size);
            }
            self.bytes = self.bytes.saturating_add(m.size);
            if let Some(max) = self.limits.max_bytes
                && self.bytes > max
            {
                bail!(
                    "members total more than {max} bytes (--max-bytes); stopping before this one"
                );
            }
        }
        Ok(())
    }
}

/// The ledger snapshot layout: `version`, `snapshots/`, `snapshots/<slot>/`,
/// `snapshots/<slot>/<slot>`, `snapshots/status_cache`, `accounts/`, `accounts/<slot>.<id>`;
/// regular files and directories only.
fn snapshot_layout(kind: Kind, path: &Path) -> Result<()> {
    let parts: Vec<&[u8]> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(std::os::unix::ffi::OsStrExt::as_bytes(s)),
            _ => None,
        })
        .collect();
    let ok = match kind {
        // `[]` is `./`, the destination itself (archives made with `tar -C dir -cf x .`).
        Kind::Dir => {
            matches!(parts.as_slice(), [] | [b"snapshots"] | [b"accounts"])
                || matches!(parts.as_slice(), [b"snapshots", slot] if digits(slot))
        }
        Kind::File => match parts.as_slice() {
            [b"version"] => true,
            [b"snapshots", b"status_cache"] => true,
            [b"snapshots", a, b] => digits(a) && a == b,
            [b"accounts", f] => account_file(f),
            _ => false,
        },
        _ => bail!("not a regular file or directory; --snapshot accepts only those"),
    };
    if !ok {
        bail!("not part of the ledger snapshot layout (--snapshot)");
    }
    Ok(())
}

fn digits(s: &[u8]) -> bool {
    !s.is_empty() && s.len() <= 20 && s.iter().all(u8::is_ascii_digit)
}

fn account_file(s: &[u8]) -> bool {
    match s.iter().position(|&b| b == b'.') {
        Some(dot) => digits(&s[..dot]) && digits(&s[dot + 1..]),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(kind: Kind, p: &str) -> bool {
        snapshot_layout(kind, Path::new(p)).is_ok()
    }

    #[test]
    fn snapshot_layout_rules() {
        assert!(ok(Kind::File, "version"));
        assert!(ok(Kind::Dir, "snapshots"));
        assert!(ok(Kind::Dir, ""));
        assert!(!ok(Kind::File, ""));
        assert!(ok(Kind::Dir, "snapshots/123"));
        assert!(ok(Kind::File, "snapshots/123/123"));
        assert!(ok(Kind::File, "snapshots/status_cache"));
        assert!(ok(Kind::Dir, "accounts"));
        assert!(ok(Kind::File, "accounts/123.456"));
        assert!(!ok(Kind::File, "accounts/123.456.7"));
        assert!(!ok(Kind::File, "accounts/123"));
        assert!(!ok(Kind::File, "accounts/.1"));
        assert!(!ok(Kind::File, "snapshots/123/124"));
        assert!(!ok(Kind::File, "snapshots/abc/abc"));
        assert!(!ok(Kind::File, "other"));
        assert!(!ok(Kind::Symlink, "version"));
        assert!(!ok(Kind::Hardlink, "accounts/1.2"));
        assert!(!ok(Kind::Dir, "version"));
        assert!(!ok(Kind::File, "accounts/1.2/x"));
    }
}
