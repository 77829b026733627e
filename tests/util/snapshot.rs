//! A snapshot of a directory tree, taken with lstat only (symlinks are recorded, never
//! followed), keyed by raw relative path bytes, and a readable diff of two snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    CharDev,
    BlockDev,
    Socket,
}

impl Kind {
    /// The kind of a file of type `ft` (as lstat sees it).
    pub fn of(ft: fs::FileType) -> Kind {
        let kinds = [
            (ft.is_symlink(), Kind::Symlink),
            (ft.is_dir(), Kind::Dir),
            (ft.is_file(), Kind::File),
            (ft.is_fifo(), Kind::Fifo),
            (ft.is_char_device(), Kind::CharDev),
            (ft.is_block_device(), Kind::BlockDev),
        ];
        kinds.into_iter().find(|(is, _)| *is).map_or(Kind::Socket, |(_, k)| k)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// st_mode & 0o7777.
    pub mode: u32,
    pub mtime: (i64, i64),
    pub size: u64,
    /// FNV-1a 64 over the non-zero 64 KiB chunks and their offsets (regular files only; 0
    /// otherwise). See `hash_file`.
    pub hash: u64,
    /// Symlink target bytes.
    pub target: Option<Vec<u8>>,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    /// Bytes allocated on disk (st_blocks * 512); informational (sparse files).
    pub allocated: u64,
}

/// Relative path bytes → entry. The root itself is recorded as ".".
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub root: PathBuf,
    pub entries: BTreeMap<Vec<u8>, Entry>,
}

/// FNV-1a 64.
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Chunk size for content hashing.
const CHUNK: u64 = 1 << 16;

/// A hash of the contents that does not depend on how zeros are stored: the file is read in
/// 64 KiB chunks at fixed offsets, all-zero chunks are left out, and holes (found with
/// SEEK_DATA) are never read. So a sparse file and the same bytes written out hash alike, and a
/// 10 GiB sparse member costs only its data. (The size is compared separately.)
fn hash_file(p: &Path) -> u64 {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let Ok(f) = fs::File::open(p) else { return 1 };
    let Ok(len) = f.metadata().map(|m| m.len()) else { return 2 };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let mut buf = vec![0u8; CHUNK as usize];
    let mut off = 0u64;
    while off < len {
        // Safety: a valid open file descriptor and plain integer arguments.
        let data = unsafe { libc::lseek(f.as_raw_fd(), off as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            break; // ENXIO: only a hole remains (or SEEK_DATA unsupported: read on below)
        }
        let start = (data as u64) / CHUNK * CHUNK;
        off = off.max(start);
        let n = CHUNK.min(len - off) as usize;
        let got = match f.read_at(&mut buf[..n], off) {
            Ok(0) | Err(_) => break,
            Ok(g) => g,
        };
        if buf[..got].iter().any(|&b| b != 0) {
            feed(&off.to_le_bytes());
            feed(&buf[..got]);
        }
        off += got as u64;
    }
    h
}

fn entry(p: &Path, m: &fs::Metadata) -> Entry {
    let kind = Kind::of(m.file_type());
    Entry {
        kind,
        mode: m.mode() & 0o7777,
        mtime: (m.mtime(), m.mtime_nsec()),
        size: if kind == Kind::Dir { 0 } else { m.size() },
        // Never open FIFOs or devices: that could block.
        hash: if kind == Kind::File { hash_file(p) } else { 0 },
        target: if kind == Kind::Symlink {
            Some(fs::read_link(p).map(|t| t.as_os_str().as_bytes().to_vec()).unwrap_or_default())
        } else {
            None
        },
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev(),
        dev: m.dev(),
        ino: m.ino(),
        nlink: m.nlink(),
        allocated: m.blocks() * 512,
    }
}

/// Walks `root` with lstat. A missing root gives an empty snapshot.
pub fn snapshot(root: &Path) -> Snapshot {
    let mut entries = BTreeMap::new();
    if let Ok(m) = fs::symlink_metadata(root) {
        entries.insert(b".".to_vec(), entry(root, &m));
        if m.is_dir() {
            walk(root, &mut Vec::new(), &mut entries);
        }
    }
    Snapshot { root: root.to_path_buf(), entries }
}

fn walk(dir: &Path, rel: &mut Vec<u8>, out: &mut BTreeMap<Vec<u8>, Entry>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        let p = dir.join(&name);
        let Ok(m) = fs::symlink_metadata(&p) else { continue };
        let len = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.as_bytes());
        out.insert(rel.clone(), entry(&p, &m));
        if m.file_type().is_dir() {
            walk(&p, rel, out);
        }
        rel.truncate(len);
    }
}

/// Renders path bytes readably (non-UTF-8 and control bytes escaped).
pub fn show(p: &[u8]) -> String {
    let s = p.escape_ascii().to_string();
    if s.len() > 160 {
        format!("{}...{} ({} bytes)", &s[..80], &s[s.len() - 60..], p.len())
    } else {
        s
    }
}

impl Snapshot {
    pub fn get(&self, rel: &str) -> Option<&Entry> {
        self.entries.get(rel.as_bytes())
    }

    /// Paths sharing an inode, as sets of paths (only groups of two or more).
    pub fn link_groups(&self) -> BTreeSet<BTreeSet<Vec<u8>>> {
        let mut by_ino: BTreeMap<(u64, u64), BTreeSet<Vec<u8>>> = BTreeMap::new();
        for (p, e) in &self.entries {
            if e.kind != Kind::Dir {
                by_ino.entry((e.dev, e.ino)).or_default().insert(p.clone());
            }
        }
        by_ino.into_values().filter(|s| s.len() > 1).collect()
    }

    /// All inodes in the tree.
    pub fn inodes(&self) -> BTreeSet<(u64, u64)> {
        self.entries.values().map(|e| (e.dev, e.ino)).collect()
    }

    /// A copy with `f` applied to every path (None drops the entry).
    pub fn map_paths(&self, mut f: impl FnMut(&[u8]) -> Option<Vec<u8>>) -> Snapshot {
        Snapshot {
            root: self.root.clone(),
            entries: self
                .entries
                .iter()
                .filter_map(|(p, e)| f(p).map(|q| (q, e.clone())))
                .collect(),
        }
    }

    /// A one-line-per-entry listing, for messages.
    pub fn listing(&self) -> String {
        let mut s = String::new();
        for (p, e) in &self.entries {
            let _ = write!(s, "  {:?} {:o} {} {}", e.kind, e.mode, e.size, show(p));
            if let Some(t) = &e.target {
                let _ = write!(s, " -> {}", show(t));
            }
            s.push('\n');
        }
        s
    }
}

/// What `diff` compares.
#[derive(Debug, Clone)]
pub struct Compare {
    /// Compare uid/gid (only meaningful for --same-owner extractions).
    pub owner: bool,
    /// Compare the mtimes of directories. When `recent` is set, two directory mtimes that are
    /// both at or after it count as equal: both were set by the extraction's own activity
    /// (directories the archive implies but does not contain, or the extraction root).
    pub dir_mtime: bool,
    pub recent: Option<SystemTime>,
    /// Compare symlink mtimes.
    pub symlink_mtime: bool,
    /// Compare the root's own mode and mtime.
    pub root: bool,
}

impl Default for Compare {
    fn default() -> Compare {
        Compare { owner: false, dir_mtime: true, recent: None, symlink_mtime: true, root: true }
    }
}

impl Compare {
    /// Everything, exactly: what a sentinel tree that nothing may touch needs.
    pub fn exact() -> Compare {
        Compare { owner: true, ..Compare::default() }
    }

    /// The comparison between two extractions that started after `recent`.
    pub fn extraction(recent: SystemTime) -> Compare {
        Compare { recent: Some(recent), ..Compare::default() }
    }
}

fn secs(t: SystemTime) -> (i64, i64) {
    let d = t.duration_since(UNIX_EPOCH).unwrap();
    (d.as_secs() as i64, i64::from(d.subsec_nanos()))
}

/// The differences between `a` (labelled `la`) and `b`, one per line; empty when equal.
pub fn diff(a: &Snapshot, la: &str, b: &Snapshot, lb: &str, cmp: &Compare) -> Vec<String> {
    let mut out = Vec::new();
    let recent = cmp.recent.map(secs);
    let keys: BTreeSet<&Vec<u8>> = a.entries.keys().chain(b.entries.keys()).collect();
    for k in keys {
        let name = show(k);
        let (x, y) = match (a.entries.get(k), b.entries.get(k)) {
            (Some(x), Some(y)) => (x, y),
            (Some(x), None) => {
                out.push(format!("{name}: only in {la} ({:?})", x.kind));
                continue;
            }
            (None, Some(y)) => {
                out.push(format!("{name}: only in {lb} ({:?})", y.kind));
                continue;
            }
            (None, None) => unreachable!(),
        };
        if x.kind != y.kind {
            out.push(format!("{name}: type {:?} in {la}, {:?} in {lb}", x.kind, y.kind));
            continue;
        }
        let is_root = k.as_slice() == b".";
        if is_root && !cmp.root {
            continue;
        }
        if x.kind != Kind::Symlink && x.mode != y.mode {
            out.push(format!("{name}: mode {:04o} in {la}, {:04o} in {lb}", x.mode, y.mode));
        }
        let check_mtime = match x.kind {
            Kind::Dir => cmp.dir_mtime && !recent.is_some_and(|r| x.mtime >= r && y.mtime >= r),
            Kind::Symlink => cmp.symlink_mtime,
            _ => true,
        };
        if check_mtime && x.mtime != y.mtime {
            out.push(format!(
                "{name}: mtime {}.{:09} in {la}, {}.{:09} in {lb}",
                x.mtime.0, x.mtime.1, y.mtime.0, y.mtime.1
            ));
        }
        if x.kind == Kind::File {
            if x.size != y.size {
                out.push(format!("{name}: size {} in {la}, {} in {lb}", x.size, y.size));
            } else if x.hash != y.hash {
                out.push(format!("{name}: contents differ (same size {})", x.size));
            }
        }
        if x.target != y.target {
            out.push(format!(
                "{name}: symlink target {} in {la}, {} in {lb}",
                show(x.target.as_deref().unwrap_or_default()),
                show(y.target.as_deref().unwrap_or_default())
            ));
        }
        if matches!(x.kind, Kind::CharDev | Kind::BlockDev) && x.rdev != y.rdev {
            out.push(format!("{name}: device {:x} in {la}, {:x} in {lb}", x.rdev, y.rdev));
        }
        if cmp.owner && (x.uid, x.gid) != (y.uid, y.gid) {
            out.push(format!(
                "{name}: owner {}:{} in {la}, {}:{} in {lb}",
                x.uid, x.gid, y.uid, y.gid
            ));
        }
    }
    let (ga, gb) = (a.link_groups(), b.link_groups());
    for g in ga.difference(&gb) {
        out.push(format!("hard-link group only in {la}: {}", show_group(g)));
    }
    for g in gb.difference(&ga) {
        out.push(format!("hard-link group only in {lb}: {}", show_group(g)));
    }
    out
}

fn show_group(g: &BTreeSet<Vec<u8>>) -> String {
    let v: Vec<String> = g.iter().map(|p| show(p)).collect();
    format!("{{{}}}", v.join(", "))
}

/// Panics with a readable diff when the snapshots differ.
pub fn assert_same(a: &Snapshot, la: &str, b: &Snapshot, lb: &str, cmp: &Compare, context: &str) {
    let d = diff(a, la, b, lb, cmp);
    if !d.is_empty() {
        let shown: Vec<&String> = d.iter().take(40).collect();
        let more =
            if d.len() > 40 { format!("\n  ... and {} more", d.len() - 40) } else { String::new() };
        panic!(
            "{context}\ntrees differ ({} vs {}): {} difference(s):\n  {}{more}",
            a.root.display(),
            b.root.display(),
            d.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
        );
    }
}
