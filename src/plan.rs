//! The hand-off between the archive side and the writer: what to create, in archive order.
//!
//! A regular file arrives as `File`, then zero or more `Data` chunks (ascending offsets;
//! contiguous from 0 unless the member is sparse), then `End`. Everything else is one op.
//! Paths are already safe (see `safety.rs`): relative, made of plain components only.

use std::path::{Path, PathBuf};

use crate::pool::PoolBuf;

/// A relative path whose components are all plain names (no `/` root, `.`, `..`, or NUL).
/// Only `safety.rs` constructs one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SafePath(pub(crate) PathBuf);

impl SafePath {
    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

/// Seconds and nanoseconds since the epoch, as a tar header or PAX record gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timestamp {
    pub secs: i64,
    pub nanos: u32,
}

/// What every op needs to know about its member besides data.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The member name as the archive spells it (lossy UTF-8), for messages.
    pub name: String,
    pub path: SafePath,
    /// Permission bits (07777) to apply.
    pub mode: u32,
    pub mtime: Timestamp,
    /// Some((uid, gid)) only when ownership is to be restored (`--same-owner`).
    pub owner: Option<(u32, u32)>,
    /// Offset of the member's first header block in the decoded archive stream.
    pub offset: u64,
}

pub enum Op {
    Dir(Entry),
    /// A regular file of `size` bytes (its final length; for sparse files the real size).
    File {
        entry: Entry,
        size: u64,
        /// Data chunks may be non-contiguous and unaligned; holes are left unwritten.
        sparse: bool,
    },
    /// `buf.len()` bytes of the current file, at `offset` in it.
    Data {
        offset: u64,
        buf: PoolBuf,
    },
    /// The current file has all its data.
    End,
    Symlink {
        entry: Entry,
        target: Vec<u8>,
    },
    /// A hard link at `entry.path` to the already-extracted `target`.
    Hardlink {
        entry: Entry,
        target: SafePath,
    },
    Fifo(Entry),
}
