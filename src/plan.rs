//! The hand-off between the archive side and the writer: what to create, in archive order.
//!
//! A regular file arrives as `File`, then zero or more `Data` chunks (ascending offsets;
//! contiguous from 0 unless the member is sparse), then `End`. Everything else is one op.
//! Paths are already safe (see `safety.rs`): relative, made of plain components only.

use std::sync::Arc;

use crate::archive::{Timestamp, Xattr, xattr_bytes};
use crate::policy::incremental::Dumpdir;
use crate::policy::safety::SafePath;
use crate::pool::PoolBuf;

/// What every op needs to know about its member besides data.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The member name as the archive spells it (lossy UTF-8), for messages.
    pub name: String,
    pub path: SafePath,
    /// Permission bits (07777) to apply.
    pub mode: u32,
    /// None with `-m`: the member keeps the time it was created, and no time is set.
    pub mtime: Option<Timestamp>,
    /// The member's mtime as archived, `-m` or not: what `--keep-newer-files` compares.
    pub archived_mtime: Timestamp,
    /// Some((uid, gid)) only when ownership is to be restored (`--same-owner`).
    pub owner: Option<(u32, u32)>,
    /// Offset of the member's first header block in the decoded archive stream.
    pub offset: u64,
    /// Extended attributes to restore (`--xattrs`, after `--xattrs-include/-exclude`); None
    /// when there are none, so a member without them allocates nothing.
    pub xattrs: Option<Arc<[Xattr]>>,
    /// A directory member of an incremental archive (GNU tar's `is_dumpdir`): from it on,
    /// directory metadata waits for the end of the run, as `--delay-directory-restore`.
    pub delay_restore: bool,
    /// The root `path` is beneath: 0 for DIR, else a `--spread` root (policy/route.rs), whose
    /// own writer lands it (write/roots.rs).
    pub root: u16,
}

impl Entry {
    /// The path as GNU tar names it in messages: as extracted, but the member's own name where
    /// that is the path with a leading `./` (`./src/f`, `./` for DIR; `/` and trailing `/`s
    /// set aside).
    pub fn shown_path(&self) -> String {
        let path = self.path.display();
        let name = self.name.trim_start_matches('/').trim_end_matches('/');
        match name.strip_prefix("./") {
            Some(rest) if rest == path => name.to_string(),
            _ if name == "." && self.path.is_root() => name.to_string(),
            _ => path,
        }
    }
}

pub enum Op {
    Dir(Entry),
    /// A regular file of `size` bytes (its final length; for sparse files the real size).
    File {
        entry: Entry,
        size: u64,
        /// Data chunks may be non-contiguous and unaligned; holes are left unwritten.
        sparse: bool,
        /// Written with O_DIRECT, as the decoder decided (direct_policy.rs `Gate`) and sent
        /// its chunks for (lend.rs): the writer opens it so unless the destination has
        /// refused O_DIRECT before (`DirectPolicy::refused`).
        direct: bool,
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
    /// A FIFO or a device node.
    Special {
        entry: Entry,
        node: Node,
    },
    /// `-G`: before the directory member `entry` (its `Dir` op follows), the renames its
    /// incremental archive lists, and the removal of what the directory holds that the
    /// archive's list does not (`write/purge.rs`). Everything before it lands first.
    Purge {
        entry: Entry,
        list: Box<Dumpdir>,
        /// Told when the purge is done (or dropped unsent if it never runs): the decoder waits
        /// for it, so that `-v`'s "Deleting" lines come before the names of the members after
        /// the directory, as in GNU tar (the dispatcher of several writers applies it at once).
        done: Option<std::sync::mpsc::SyncSender<()>>,
    },
    /// `-v --backup`: told once everything sent before it has landed. The decoder waits for
    /// it after each member, so the writer's `Renaming` line comes right after the member's
    /// name and before the next one's, as in GNU tar, with any number of writers.
    Barrier(std::sync::mpsc::SyncSender<()>),
    /// A resume point before the next member (src/mark/, src/resume/): whoever applies directory
    /// metadata fills in the directories still waiting, and publishes the point once every
    /// member before it has landed.
    Mark(Box<crate::mark::Mark>),
    /// A resumed run's first op: the directories whose metadata was still to be applied at
    /// the resume point (`Dest::restore_carried`), and whether directories are delayed.
    Restore(Box<(bool, Vec<crate::mark::CarriedDir>)>),
}

/// What a `Special` op makes (mknodat's type and device number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Fifo,
    Char { major: u64, minor: u64 },
    Block { major: u64, minor: u64 },
}

impl Op {
    /// The member the op creates (None for Data and End, which belong to the last File).
    pub fn entry(&self) -> Option<&Entry> {
        match self {
            Op::Dir(e) | Op::Special { entry: e, .. } | Op::Purge { entry: e, .. } => Some(e),
            Op::File { entry, .. } | Op::Symlink { entry, .. } | Op::Hardlink { entry, .. } => {
                Some(entry)
            }
            Op::Data { .. } | Op::End | Op::Barrier(_) | Op::Mark(_) | Op::Restore(_) => None,
        }
    }

    /// Bytes of memory the op holds besides itself: file data, and extended attributes
    /// (`--xattrs`, up to 256 KiB a member), which batches count against their byte limit so
    /// that queued ops stay within it.
    pub fn held_bytes(&self) -> usize {
        match self {
            Op::Data { buf, .. } => buf.len(),
            op => op.entry().and_then(|e| e.xattrs.as_deref()).map_or(0, xattr_bytes),
        }
    }
}

/// Where the decoder thread sends ops: one writer's channel (`extract::Batcher`), or the
/// dispatcher in front of several writer threads (`write::multi::Dispatch`).
pub trait Sink {
    /// Queues one op (sending a batch when one is full).
    fn push(&mut self, op: Op) -> Result<(), Stop>;
    /// Sends whatever is queued (before the decoder may wait for a pool buffer: the writers
    /// can only free buffers they have been sent).
    fn flush(&mut self) -> Result<(), Stop>;
}

/// Why a `Sink` took no more ops.
#[derive(Debug)]
pub enum Stop {
    /// A writer has stopped; its own error explains why.
    Gone,
    /// The op itself failed fatally (a directory or link the dispatcher made: disk full, ...).
    Fatal(anyhow::Error),
}
