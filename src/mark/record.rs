//! A directory waiting for its metadata, as a value and as bytes: what write/delayed.rs
//! keeps (in memory, then spilled to a file) and what a resume point carries (`CarriedDir`,
//! written into the state file by src/resume/state.rs). Pure.

use std::io;
use std::sync::Arc;

use crate::archive::{Timestamp, Xattr};

/// One directory waiting for its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The sanitised path, relative to DIR.
    pub path: Vec<u8>,
    pub mode: u32,
    pub mtime: Option<Timestamp>,
    pub owner: Option<(u32, u32)>,
    pub dev: u64,
    pub ino: u64,
    /// `--no-overwrite-dir` as a user: the directory was lent u+wx (dest.rs).
    pub borrowed: bool,
    /// The member name, for messages about its attributes (empty without them).
    pub name: String,
    pub xattrs: Option<Arc<[Xattr]>>,
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends `r`, then its length (so records are read back from the end). Also the form a
/// resume point carries deferred directories in (`CarriedDir`, src/resume/state.rs).
pub fn encode(r: &Record, out: &mut Vec<u8>) {
    let start = out.len();
    put(out, &r.path);
    out.extend_from_slice(&r.mode.to_le_bytes());
    let flags = u8::from(r.mtime.is_some())
        | u8::from(r.owner.is_some()) << 1
        | u8::from(r.borrowed) << 2
        | u8::from(r.xattrs.is_some()) << 3;
    out.push(flags);
    if let Some(t) = r.mtime {
        out.extend_from_slice(&t.secs.to_le_bytes());
        out.extend_from_slice(&t.nanos.to_le_bytes());
    }
    if let Some((uid, gid)) = r.owner {
        out.extend_from_slice(&uid.to_le_bytes());
        out.extend_from_slice(&gid.to_le_bytes());
    }
    out.extend_from_slice(&r.dev.to_le_bytes());
    out.extend_from_slice(&r.ino.to_le_bytes());
    put(out, r.name.as_bytes());
    if let Some(xs) = &r.xattrs {
        out.extend_from_slice(&(xs.len() as u32).to_le_bytes());
        for x in xs.iter() {
            put(out, &x.name);
            match &x.value {
                Some(v) => {
                    out.push(1);
                    put(out, v);
                }
                None => out.push(0),
            }
        }
    }
    let len = (out.len() - start) as u32;
    out.extend_from_slice(&len.to_le_bytes());
}

/// The last record of `bytes` and where it starts. Every length is checked against the bytes
/// there, so a hostile record (a resume state file's) costs at most its own size.
pub fn decode_last(bytes: &[u8]) -> io::Result<(Record, usize)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "delayed directory record");
    let n = bytes.len();
    let len =
        u32::from_le_bytes(bytes.get(n.wrapping_sub(4)..n).ok_or_else(bad)?.try_into().expect("4"));
    let start = n.checked_sub(4 + len as usize).ok_or_else(bad)?;
    let mut cur = Cursor { b: &bytes[start..n - 4] };
    let path = cur.bytes().ok_or_else(bad)?.to_vec();
    let mode = cur.u32().ok_or_else(bad)?;
    let flags = cur.take(1).ok_or_else(bad)?[0];
    let mtime = match flags & 1 != 0 {
        true => Some(Timestamp {
            secs: cur.u64().ok_or_else(bad)? as i64,
            nanos: cur.u32().ok_or_else(bad)?,
        }),
        false => None,
    };
    let owner = match flags & 2 != 0 {
        true => Some((cur.u32().ok_or_else(bad)?, cur.u32().ok_or_else(bad)?)),
        false => None,
    };
    let dev = cur.u64().ok_or_else(bad)?;
    let ino = cur.u64().ok_or_else(bad)?;
    let name = String::from_utf8_lossy(cur.bytes().ok_or_else(bad)?).into_owned();
    let xattrs = match flags & 8 != 0 {
        true => {
            let count = cur.u32().ok_or_else(bad)?;
            let mut xs = Vec::with_capacity(count.min(4096) as usize);
            for _ in 0..count {
                let name = cur.bytes().ok_or_else(bad)?.to_vec();
                let value = match cur.take(1).ok_or_else(bad)?[0] {
                    0 => None,
                    _ => Some(cur.bytes().ok_or_else(bad)?.to_vec()),
                };
                xs.push(Xattr { name, value });
            }
            Some(xs.into())
        }
        false => None,
    };
    let borrowed = flags & 4 != 0;
    Ok((Record { path, mode, mtime, owner, dev, ino, borrowed, name, xattrs }, start))
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.b.get(..n)?, self.b.get(n..)?);
        self.b = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().expect("4")))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}
