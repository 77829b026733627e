//! `--delay-directory-restore`, and GNU tar's automatic case (a directory member of an
//! incremental archive turns it on): directory metadata is applied at the end of the run, not
//! when the archive leaves the directory. GNU tar 1.34 then skips
//! `apply_nonancestor_delayed_set_stat` before each member and applies its whole list in
//! `extract_finish`. So a member under a directory the archive made read-only earlier still
//! extracts, and a directory whose files come after other members (`a a/b a/c a/b/f`) still
//! gets its archived time.
//!
//! What is applied, and in which order, is GNU tar's:
//! - **one stamp per directory, the last member's**: GNU tar keeps its list in a hash table by
//!   name, and a directory member met again (`a/` 0755, `a/f`, `a/` 0700: archives extended
//!   with `tar -r`, `-A`) updates the entry in place. Records of the same path are merged
//!   (`merge`): the newest wins. Until issue 40 each was applied, newest first, so the first
//!   member's mode and time were the ones left;
//! - **a directory after everything beneath it**: GNU tar's list runs newest made first, so a
//!   child before its parent, and a parent made unsearchable (0600, as a user) does not stop
//!   its children being stamped. Here records are applied in descending byte order of their
//!   paths, in which every path comes before its prefixes. (Until issue 40 they were applied
//!   last recorded first; a directory is recorded when the archive leaves it, after its
//!   children, so a 0600 parent was stamped first and its children silently kept 0700.)
//!
//! Any number of directories may wait, and memory stays bounded: each waits as a record
//! (path, mode, mtime, owner, inode, attributes), in memory up to `IN_MEMORY` bytes; past that
//! those in memory are sorted and appended, as one sorted **run**, to a temporary file no one
//! can see (O_TMPFILE, in DIR or else the temporary directory). At the end the runs and what
//! is in memory are merged (an external merge sort: each run read forward through a small
//! buffer, at most `FAN_IN` at once), and the records of each path merged as they meet.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
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

/// Bytes read from a run at a time while merging (a record longer than this is read whole).
const READ_BACK: usize = 16 << 10;

/// Runs merged at once: FAN_IN read buffers of READ_BACK, 1 MiB. More runs (over 64 MiB of
/// records, ~1.2 million directories) are first merged FAN_IN at a time into longer runs.
/// With 200,000 directories (12 runs) the peak RSS stayed what it was before the merge
/// (13.5-14.8 MB, scripts/rss-dirs.sh, docs/PERFORMANCE.md).
const FAN_IN: usize = 64;

/// The waiting records: sorted runs in `file` (oldest first), then `memory` in the order
/// pushed.
#[derive(Default)]
pub struct Delayed {
    memory: Vec<u8>,
    file: Option<File>,
    /// Bytes written to `file` (runs, and runs merged from them).
    spilled: u64,
    /// The live runs in `file`, oldest first: where each starts and its length.
    runs: Vec<(u64, u64)>,
    /// Where the file is made: DIR's descriptor (the file lives on DIR's filesystem).
    dir: Option<RawFd>,
    count: u64,
    /// Runs merged at once (0: FAN_IN; the tests take fewer).
    fan_in: usize,
}

/// The path of the record encoded at `bytes` (its first field).
fn path_of(bytes: &[u8]) -> &[u8] {
    let n = bytes.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4")) as usize);
    bytes.get(4..4 + n).unwrap_or(&[])
}

/// Where each record of `bytes` (records as `encode` appends them) lies, in the order
/// pushed, then sorted: paths in descending byte order, the same path in the order pushed.
fn sorted_spans(bytes: &[u8]) -> io::Result<Vec<(usize, usize)>> {
    let mut spans = Vec::new();
    let mut end = bytes.len();
    while end > 0 {
        let (_, start) = decode_last(&bytes[..end])?;
        spans.push((start, end));
        end = start;
    }
    spans.reverse();
    // Stable: records of one path stay oldest first.
    spans.sort_by(|a, b| path_of(&bytes[b.0..b.1]).cmp(path_of(&bytes[a.0..a.1])));
    Ok(spans)
}

/// Two records of the same path, `older` pushed before `newer`, as one: the newest member's
/// metadata (GNU tar's `delay_set_stat` overwrites its entry). A directory of the user's that
/// `--no-overwrite-dir` lent u+wx (`borrowed`) keeps the mode it had before the run: the
/// newer record of the same directory saw the lent mode.
pub fn merge(older: Record, mut newer: Record) -> Record {
    if older.borrowed && (older.dev, older.ino) == (newer.dev, newer.ino) && !newer.borrowed {
        newer.mode = older.mode;
        newer.borrowed = true;
    }
    newer
}

/// One sorted source of records for the merge: a run in the file, or memory sorted.
enum Source<'a> {
    Run { file: &'a File, pos: u64, end: u64, buf: Vec<u8>, at: usize },
    Memory { bytes: &'a [u8], spans: std::vec::IntoIter<(usize, usize)> },
}

impl Source<'_> {
    /// The next record, or None at the source's end.
    fn next(&mut self) -> io::Result<Option<Record>> {
        match self {
            Source::Memory { bytes, spans } => match spans.next() {
                Some((s, e)) => Ok(Some(decode_last(&bytes[s..e])?.0)),
                None => Ok(None),
            },
            Source::Run { file, pos, end, buf, at } => {
                let have = |buf: &Vec<u8>, at: usize| buf.len() - at;
                let need = |buf: &Vec<u8>, at: usize| match have(buf, at) >= 4 {
                    true => 4 + u32::from_le_bytes(buf[at..at + 4].try_into().expect("4")) as usize,
                    false => 4,
                };
                if have(buf, *at) == 0 && *pos == *end {
                    return Ok(None);
                }
                while have(buf, *at) < need(buf, *at) {
                    let want = need(buf, *at).max(READ_BACK) as u64;
                    let n = want.min(*end - *pos) as usize;
                    if n == 0 {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "a cut run"));
                    }
                    buf.drain(..*at);
                    *at = 0;
                    let old = buf.len();
                    buf.resize(old + n, 0);
                    file.read_exact_at(&mut buf[old..], *pos)?;
                    *pos += n as u64;
                }
                let len = need(buf, *at) - 4;
                let r = decode_last(&buf[*at + 4..*at + 4 + len])?.0;
                *at += 4 + len;
                Ok(Some(r))
            }
        }
    }
}

/// The records of `sources` (each sorted) in one sorted stream, to `f`: paths in descending
/// byte order, and of one path the older source's first.
fn merge_sources(
    mut sources: Vec<Source>,
    mut f: impl FnMut(Record) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut heap = BinaryHeap::new();
    let mut heads: Vec<Option<Record>> = Vec::with_capacity(sources.len());
    for (i, s) in sources.iter_mut().enumerate() {
        let r = s.next()?;
        if let Some(r) = &r {
            heap.push((r.path.clone(), Reverse(i)));
        }
        heads.push(r);
    }
    while let Some((_, Reverse(i))) = heap.pop() {
        let r = heads[i].take().expect("a head for each heap entry");
        if let Some(next) = sources[i].next()? {
            heap.push((next.path.clone(), Reverse(i)));
            heads[i] = Some(next);
        }
        f(r)?;
    }
    Ok(())
}

/// A run's bytes: each record framed by its length, forward.
fn run_bytes(bytes: &[u8], spans: &[(usize, usize)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 4 * spans.len());
    for &(s, e) in spans {
        out.extend_from_slice(&((e - s) as u32).to_le_bytes());
        out.extend_from_slice(&bytes[s..e]);
    }
    out
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
            let spans = sorted_spans(&self.memory)?;
            let run = run_bytes(&self.memory, &spans);
            self.append_run(&run)?;
            self.memory.clear();
        }
        Ok(())
    }

    /// Appends `run` to the file as the newest run.
    fn append_run(&mut self, run: &[u8]) -> io::Result<()> {
        let file = match &self.file {
            Some(f) => f,
            None => self.file.insert(spill_file(self.dir)?),
        };
        file.write_all_at(run, self.spilled)?;
        self.runs.push((self.spilled, run.len() as u64));
        self.spilled += run.len() as u64;
        Ok(())
    }

    fn run_source(&self, (pos, len): (u64, u64)) -> Option<Source<'_>> {
        let file = self.file.as_ref()?;
        Some(Source::Run { file, pos, end: pos + len, buf: Vec::new(), at: 0 })
    }

    /// Every record, without removing them (a resume point carries them: src/resume/), in an
    /// order in which records of one path come oldest first, so that pushed again in that
    /// order they merge as they would have; None past `cap` bytes of records, or when the
    /// spilled part cannot be read back.
    pub fn records(&self, cap: usize) -> Option<Vec<Record>> {
        let spilled: u64 = self.runs.iter().map(|r| r.1).sum();
        if usize::try_from(spilled).ok()?.saturating_add(self.memory.len()) > cap {
            return None;
        }
        let mut out = Vec::new();
        for &run in &self.runs {
            let mut source = self.run_source(run)?;
            while let Some(r) = source.next().ok()? {
                out.push(r);
            }
        }
        let mut end = self.memory.len();
        let mut memory = Vec::new();
        while end > 0 {
            let (r, start) = decode_last(&self.memory[..end]).ok()?;
            memory.push(r);
            end = start;
        }
        out.extend(memory.into_iter().rev());
        Some(out)
    }

    /// Every directory once, to `f`: the records of each path merged (`merge`), paths in
    /// descending byte order (a directory after everything beneath it). The store is empty
    /// after.
    pub fn drain(&mut self, mut f: impl FnMut(Record) -> anyhow::Result<()>) -> anyhow::Result<()> {
        // More runs than can be read at once: the oldest merged into one longer run first,
        // written out as it is made.
        let fan_in = if self.fan_in == 0 { FAN_IN } else { self.fan_in };
        while self.runs.len() > fan_in {
            let file = self.file.as_ref().expect("runs are in the file");
            let sources: Vec<Source> =
                self.runs[..fan_in].iter().filter_map(|&r| self.run_source(r)).collect();
            let (start, mut pos, mut buf) = (self.spilled, self.spilled, Vec::new());
            merge_sources(sources, |r| {
                let mut rec = Vec::new();
                encode(&r, &mut rec);
                buf.extend_from_slice(&(rec.len() as u32).to_le_bytes());
                buf.extend_from_slice(&rec);
                if buf.len() >= IN_MEMORY {
                    file.write_all_at(&buf, pos)?;
                    pos += buf.len() as u64;
                    buf.clear();
                }
                Ok(())
            })?;
            file.write_all_at(&buf, pos)?;
            pos += buf.len() as u64;
            self.spilled = pos;
            self.runs.splice(..fan_in, [(start, pos - start)]);
        }
        let memory = std::mem::take(&mut self.memory);
        let spans = sorted_spans(&memory)?;
        let mut sources: Vec<Source> =
            self.runs.iter().filter_map(|&r| self.run_source(r)).collect();
        sources.push(Source::Memory { bytes: &memory, spans: spans.into_iter() });
        let mut group: Option<Record> = None;
        merge_sources(sources, |r| {
            group = Some(match group.take() {
                Some(g) if g.path == r.path => merge(g, r),
                Some(g) => {
                    f(g)?;
                    r
                }
                None => r,
            });
            Ok(())
        })?;
        if let Some(g) = group {
            f(g)?;
        }
        self.count = 0;
        self.file = None;
        self.runs.clear();
        self.spilled = 0;
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

    /// Every directory comes back once, merged, a path before its prefixes, from memory and
    /// from many spilled runs (more than FAN_IN: merged in two passes), with memory bounded by
    /// IN_MEMORY; `records` gives every record, a path's oldest first.
    #[test]
    fn records_come_back_sorted_and_merged() {
        let dir = std::env::temp_dir();
        let dirfd = File::open(&dir).unwrap();
        let mut d = Delayed::new(std::os::fd::AsRawFd::as_raw_fd(&dirfd));
        // Pushed as a run leaves directories: children first. Every 7th path comes again
        // later with another mode (a repeated directory member).
        let n = 30_000u64;
        let mut want = std::collections::BTreeMap::new();
        for i in 0..n {
            d.push(&record(i)).unwrap();
            want.insert(record(i).path, record(i));
            assert!(d.memory.len() < IN_MEMORY, "memory is bounded");
        }
        for i in (0..n).step_by(7) {
            let mut again = record(i);
            again.mode = 0o700;
            again.mtime = Some(Timestamp { secs: 7, nanos: 0 });
            d.push(&again).unwrap();
            want.insert(again.path.clone(), again);
        }
        assert!(d.runs.len() > 1, "spilled into runs");
        let all = d.records(usize::MAX).unwrap();
        assert_eq!(all.len() as u64, n + n.div_ceil(7));
        let mut got = Vec::new();
        d.drain(|r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
        let want: Vec<Record> = want.into_values().rev().collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "sorted descending, each path once, its newest record");
        assert!(d.is_empty());
        // Pushed again in `records`' order, they merge the same way.
        for r in &all {
            d.push(r).unwrap();
        }
        let mut again = Vec::new();
        d.drain(|r| {
            again.push(r);
            Ok(())
        })
        .unwrap();
        assert!(again == want, "records() keeps a path's records oldest first");
    }

    /// More runs than the fan-in: merged first into longer runs (here in several passes), the
    /// result the same.
    #[test]
    fn many_runs_are_merged_in_passes() {
        let dir = std::env::temp_dir();
        let dirfd = File::open(&dir).unwrap();
        let mut d = Delayed::new(std::os::fd::AsRawFd::as_raw_fd(&dirfd));
        d.fan_in = 3;
        let big = |i: u64| Record {
            path: format!("p{:05}/{}", i % 5000, "x".repeat(400)).into_bytes(),
            mode: (i % 512) as u32,
            ..record(i)
        };
        let n = 30_000;
        for i in 0..n {
            d.push(&big(i)).unwrap();
        }
        assert!(d.runs.len() > 3 * 3, "{} runs", d.runs.len());
        let mut got: Vec<Record> = Vec::new();
        d.drain(|r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), 5000);
        assert!(got.windows(2).all(|w| w[0].path > w[1].path));
        // Of each path, the last pushed.
        for r in &got {
            let i: u64 = std::str::from_utf8(&r.path[1..6]).unwrap().parse().unwrap();
            let last = (0..n).rev().find(|j| j % 5000 == i).unwrap();
            assert_eq!(r.mode, (last % 512) as u32);
        }
    }

    #[test]
    fn a_lent_directory_keeps_its_own_mode() {
        let lent = Record { borrowed: true, mode: 0o500, ..record(1) };
        let again = Record { borrowed: false, mode: 0o700, ..record(1) };
        let m = merge(lent.clone(), again.clone());
        assert!(m.borrowed && m.mode == 0o500);
        let other = Record { ino: 99, ..again.clone() };
        assert_eq!(merge(lent, other.clone()), other);
    }
}
