//! The part of DIR the writer is working in, mirrored in memory: one node per path component,
//! holding the directory's open fd (a bounded cache) and how many files in flight sit at or
//! beneath it.
//!
//! Paths are walked one component at a time from DIR, so resolving a path costs O(its length)
//! in time and the tree O(length) in memory per live path, whatever the depth (a map keyed by
//! whole paths costs depth² for a deep one: 24,000 levels once took 713 MiB). Nodes live only
//! while something needs them — an open fd, a file in flight, a pin, or a child — so the tree
//! is bounded by the fd budget, the files in flight and the length of their paths, never by the
//! size of the archive.
//!
//! Directories are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` relative to
//! their parent's fd (O_NOFOLLOW | O_DIRECTORY where openat2 is missing, or refused by a
//! seccomp filter that predates it): a symlink anywhere in a member's parent path fails the
//! member instead of being followed. With `--keep-directory-symlink` such a symlink is followed
//! instead, but only inside DIR (`open_in_root`: DIR is `/` for it), and the node caches the
//! directory it leads to.
//!
//! With several writer threads each thread and the dispatcher have a tree of their own over
//! the same DIR. A directory one of them removes (an empty directory a later member replaces)
//! may still be cached, open, in another's: a file made through that fd would go into the
//! removed directory (ENOENT), and deferred metadata would be applied to it instead of to the
//! directory made at its path since. So removals are published (`Removals`), and each tree
//! forgets the published paths before its next walk.
//!
//! How one directory is opened beneath another is `beneath.rs`.

mod beneath;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::outcome::MemberError;
use super::restart;
use crate::policy::admit::FileCount;
use beneath::open_in_root;

pub use beneath::{is_out_of_fds, open_dir_beneath, open_file_in_root};

/// Whether a set-group-ID directory may hold files this run makes: DIR or a directory a walk
/// opened was one, or a directory member asks to become one (`note_mode`). A file made in
/// such a directory takes the directory's group, not the writer's. Until one is seen, a file
/// whose archived owner is the writer's own uid and gid already has that owner when it is
/// created, and `Dest::finish_file` leaves out the chown: root restoring a root-owned archive
/// (a snapshot; 100,000 small files: extract + sync 3.24 s with an fchown per file, 2.95 s
/// without, medians of 5 on RAM-backed ext4). One per run, shared by every writer thread's tree
/// and the dispatcher's, which all add to it; only ever set (a stale `true` only costs chowns).
#[derive(Debug, Default)]
pub struct SetgidDirs(AtomicBool);

impl SetgidDirs {
    /// Whether one was seen.
    pub fn seen(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// A directory has, or will be given, `mode`.
    pub fn note_mode(&self, mode: u32) {
        if mode & libc::S_ISGID != 0 {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A directory just opened: its mode is looked at until a set-group-ID one is seen.
    fn note_dir(&self, fd: &OwnedFd) {
        if self.seen() {
            return;
        }
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // Safety: fd is open; fstat fills `st` when it returns 0, and only then is it read.
        if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } == 0 {
            // Safety: initialised by the successful fstat above.
            self.note_mode(unsafe { st.assume_init() }.st_mode);
        } else {
            // Unknown: assume the worst.
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// The directories the trees of one run removed, in order, for each tree to forget before
/// its next walk (see the module comment). Removals are rare (a directory replaced by a later
/// member), so a mutex is enough; the log keeps the last `REMOVALS_KEPT`, and a tree that fell
/// further behind forgets every cached fd instead (its nodes stay, walks reopen what they
/// need).
#[derive(Default)]
pub struct Removals {
    /// Removals published so far (the sequence number of the last one).
    seq: AtomicU64,
    log: Mutex<RemovalLog>,
}

#[derive(Default)]
struct RemovalLog {
    /// The sequence number before the first path kept.
    base: u64,
    /// Paths, components joined with `/`.
    paths: VecDeque<Box<[u8]>>,
}

/// Removals kept for trees that have not caught up: past this a tree that lags forgets all
/// its cached fds (one reopen per directory it walks again), and the log stays bounded however
/// many directories a hostile archive replaces (4 MiB at most, paths of PATH_MAX). Trees catch
/// up at every walk, so only an idle one falls this far behind.
const REMOVALS_KEPT: usize = 1024;

pub type NodeId = u32;

/// DIR itself.
pub const ROOT: NodeId = 0;

/// End of a hash chain.
pub(super) const NONE: NodeId = NodeId::MAX;

struct Node {
    parent: NodeId,
    name: Box<[u8]>,
    /// The bucket this node is filed under, and the next node in it.
    hash: u64,
    chain: NodeId,
    /// Child nodes (a node with children stays: they point to it).
    children: u32,
    /// The open directory, when cached. Shared: an operation in flight keeps the fd alive even
    /// if the cache lets go of it.
    fd: Option<Arc<OwnedFd>>,
    /// Tick of the last use of `fd`, for eviction.
    used: u64,
    /// Files in flight at this path.
    busy: u32,
    /// Files in flight strictly beneath this node.
    busy_below: u32,
    /// Holders outside the tree (deferred directory metadata).
    pins: u32,
    /// A directory whose metadata waits to be applied (see `dest.rs`, `closing`).
    marked: bool,
    /// Detached (the directory was removed): no longer found by lookups.
    detached: bool,
}

/// A hasher for keys that already are hashes (here: of a (parent, name) pair, computed once
/// with SipHash; in multi.rs: of a path): the map only needs to pass them through.
#[derive(Default)]
pub struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub struct Tree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    buckets: HashMap<u64, NodeId, BuildHasherDefault<PassThrough>>,
    /// Directory fds the cache holds (DIR's own not counted).
    fds: usize,
    /// Most directory fds to hold.
    fd_budget: usize,
    tick: u64,
    /// `--keep-directory-symlink`: a symlink on a walk is followed, within DIR (`open_in_root`).
    follow: bool,
    /// Shared with the other trees of the run (several writer threads), and how many of its
    /// removals this tree has forgotten.
    removals: Option<Arc<Removals>>,
    removals_seen: u64,
    /// The run's set-group-ID directories (`SetgidDirs`).
    setgid: Arc<SetgidDirs>,
}

/// Whether a walk may create the directories it does not find, and with which mode.
#[derive(Clone, Copy)]
pub enum Create {
    No,
    /// mkdir missing components with this mode.
    With(u32),
}

impl Tree {
    /// A tree rooted at the open directory `root`, caching at most `fd_budget` more fds;
    /// `setgid`: the run's, which the directories it opens are noted in.
    pub fn new(root: OwnedFd, fd_budget: usize, setgid: Arc<SetgidDirs>) -> Tree {
        setgid.note_dir(&root);
        let root = Node {
            parent: NONE,
            name: Box::new([]),
            hash: 0,
            chain: NONE,
            children: 0,
            fd: Some(Arc::new(root)),
            used: 0,
            busy: 0,
            busy_below: 0,
            pins: 1,
            marked: false,
            detached: false,
        };
        Tree {
            nodes: vec![root],
            free: Vec::new(),
            buckets: HashMap::default(),
            fds: 0,
            fd_budget: fd_budget.max(1),
            tick: 0,
            follow: false,
            removals: None,
            removals_seen: 0,
            setgid,
        }
    }

    /// Shares `removals` with the other trees over the same DIR (several writer threads).
    /// The run's set-group-ID directories seen.
    pub fn setgid(&self) -> &SetgidDirs {
        &self.setgid
    }

    pub fn share_removals(&mut self, removals: Arc<Removals>) {
        self.removals_seen = removals.seq.load(Ordering::Acquire);
        self.removals = Some(removals);
    }

    /// Forgets what the other trees removed since the last call (before a walk uses a cached
    /// fd). A removal is published before its writer reports the op done, and an op that
    /// depends on it reaches this tree only after that (multi.rs waits), so it is seen here.
    fn catch_up(&mut self) {
        let Some(r) = &self.removals else { return };
        if r.seq.load(Ordering::Acquire) == self.removals_seen {
            return;
        }
        let r = r.clone();
        let log = r.log.lock().unwrap_or_else(|e| e.into_inner());
        if self.removals_seen < log.base {
            for id in 1..self.nodes.len() as NodeId {
                self.drop_fd(id);
            }
        } else {
            let skip = (self.removals_seen - log.base) as usize;
            for p in log.paths.iter().skip(skip) {
                self.forget(p.split(|&b| b == b'/'));
            }
        }
        self.removals_seen = log.base + log.paths.len() as u64;
    }

    /// `--keep-directory-symlink`: walks follow symlinks to directories instead of failing on
    /// them, resolved inside DIR as if it were `/` (`open_in_root`).
    pub fn follow_symlinks(&mut self) {
        self.follow = true;
    }

    /// Whether walks follow symlinks (`follow_symlinks`).
    pub fn follows(&self) -> bool {
        self.follow
    }

    /// The path of node `id` from DIR.
    fn path_of(&self, mut id: NodeId) -> Vec<u8> {
        let mut names = Vec::new();
        while id != ROOT {
            let n = &self.nodes[id as usize];
            names.push(&n.name[..]);
            id = n.parent;
        }
        names.reverse();
        names.join(&b'/')
    }

    pub fn root_fd(&self) -> &Arc<OwnedFd> {
        self.nodes[ROOT as usize].fd.as_ref().expect("DIR stays open")
    }

    fn key(parent: NodeId, name: &[u8]) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        h.write_u32(parent);
        h.write(name);
        h.finish()
    }

    /// The child `name` of `parent`, if the tree has it.
    fn find(&self, parent: NodeId, name: &[u8]) -> Option<NodeId> {
        let hash = Self::key(parent, name);
        let mut at = *self.buckets.get(&hash)?;
        while at != NONE {
            let n = &self.nodes[at as usize];
            if n.parent == parent && *n.name == *name {
                return Some(at);
            }
            at = n.chain;
        }
        None
    }

    fn find_or_insert(&mut self, parent: NodeId, name: &[u8]) -> NodeId {
        debug_assert!(
            parent == ROOT || self.nodes[parent as usize].parent != NONE,
            "node {parent} is used as a parent after it was freed"
        );
        if let Some(id) = self.find(parent, name) {
            return id;
        }
        let hash = Self::key(parent, name);
        let chain = self.buckets.get(&hash).copied().unwrap_or(NONE);
        let node = Node {
            parent,
            name: name.into(),
            hash,
            chain,
            children: 0,
            fd: None,
            used: 0,
            busy: 0,
            busy_below: 0,
            pins: 0,
            marked: false,
            detached: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        };
        self.buckets.insert(hash, id);
        self.nodes[parent as usize].children += 1;
        id
    }

    /// Takes `id` out of its bucket so lookups no longer find it.
    fn unlink_hash(&mut self, id: NodeId) {
        let hash = self.nodes[id as usize].hash;
        let next = self.nodes[id as usize].chain;
        let Some(&head) = self.buckets.get(&hash) else { return };
        if head == id {
            if next == NONE {
                self.buckets.remove(&hash);
            } else {
                self.buckets.insert(hash, next);
            }
            return;
        }
        let mut at = head;
        while at != NONE {
            if self.nodes[at as usize].chain == id {
                self.nodes[at as usize].chain = next;
                return;
            }
            at = self.nodes[at as usize].chain;
        }
    }

    /// Frees `id` and then its ancestors for as long as nothing needs them.
    fn prune(&mut self, mut id: NodeId) {
        while id != ROOT && id != NONE {
            let n = &self.nodes[id as usize];
            if n.fd.is_some()
                || n.busy > 0
                || n.busy_below > 0
                || n.pins > 0
                || n.marked
                || n.children > 0
            {
                return;
            }
            let parent = n.parent;
            if !n.detached {
                self.unlink_hash(id);
            }
            let n = &mut self.nodes[id as usize];
            n.name = Box::new([]);
            n.parent = NONE;
            self.free.push(id);
            self.nodes[parent as usize].children -= 1;
            id = parent;
        }
    }

    fn set_fd(&mut self, id: NodeId, fd: Arc<OwnedFd>) {
        if self.fds >= self.fd_budget {
            self.shrink();
        }
        self.tick += 1;
        let n = &mut self.nodes[id as usize];
        n.used = self.tick;
        if n.fd.replace(fd).is_none() {
            self.fds += 1;
        }
    }

    fn drop_fd(&mut self, id: NodeId) {
        if id != ROOT && self.nodes[id as usize].fd.take().is_some() {
            self.fds -= 1;
        }
    }

    /// Closes the least recently used half of the cached directory fds (an fd an operation in
    /// flight still holds closes when that operation lets go of it). Returns false when the
    /// cache held none.
    pub fn shrink(&mut self) -> bool {
        let mut cached: Vec<(u64, NodeId)> = (1..self.nodes.len() as NodeId)
            .filter(|&id| self.nodes[id as usize].fd.is_some())
            .map(|id| (self.nodes[id as usize].used, id))
            .collect();
        if cached.is_empty() {
            return false;
        }
        // The older half (at least one): `select_nth_unstable` puts them first.
        let drop = cached.len() - cached.len() / 2;
        cached.select_nth_unstable(drop - 1);
        for &(_, id) in &cached[..drop] {
            self.drop_fd(id);
            self.prune(id);
        }
        true
    }

    /// Runs `open`; on EMFILE/ENFILE closes cached fds and tries again while there are any.
    pub fn retry_emfile<T>(&mut self, mut open: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        loop {
            match open() {
                Err(e) if is_out_of_fds(&e) && self.shrink() => continue,
                other => return other,
            }
        }
    }

    /// Opens (creating with `create`) the directory reached by `comps` from DIR. Starts from the
    /// deepest directory on the way whose fd is cached. Each directory made counts against
    /// `files` (`--max-files`), which may refuse it. The node returned lives only until the next
    /// call that may evict (`dir`, `retry_emfile`, `shrink`): `pin` it or `begin_file` in it
    /// first (its id may otherwise be freed and handed out again).
    pub fn dir<'a, I>(
        &mut self,
        comps: I,
        create: Create,
        files: &FileCount,
    ) -> Result<(NodeId, Arc<OwnedFd>), MemberError>
    where
        I: IntoIterator<Item = &'a [u8]>,
        I::IntoIter: Clone,
    {
        self.catch_up();
        let comps = comps.into_iter();
        // Find the deepest cached directory among the nodes the tree already has.
        let (mut node, mut depth, mut start) = (ROOT, 0usize, (ROOT, 0usize));
        for c in comps.clone() {
            match self.find(node, c) {
                Some(id) => {
                    node = id;
                    depth += 1;
                    if self.nodes[id as usize].fd.is_some() {
                        start = (id, depth);
                    }
                }
                None => break,
            }
        }
        let (mut node, skip) = start;
        self.tick += 1;
        let n = &mut self.nodes[node as usize];
        n.used = self.tick;
        let mut fd = n.fd.clone().expect("start has an fd");
        for c in comps.skip(skip) {
            let child = self.find_or_insert(node, c);
            // Pinned until it holds its fd: opening it and caching the fd may evict others
            // (`shrink`), and pruning an evicted node beneath `child` (an existing node may be
            // kept only by its children) must not free `child` and the walk's nodes above it
            // while the walk stands there: the next node would get a freed id, perhaps its
            // parent's, and be its own parent.
            self.pin(child);
            let mut opened = self.open_child(fd.as_raw_fd(), c, create, files);
            if self.follow
                && let Err(MemberError::Io(e)) = &opened
                && matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR))
            {
                // Names hold no NUL (open_child made C strings of them).
                if let Ok(path) = CString::new(self.path_of(child)) {
                    let root = self.root_fd().clone();
                    opened = self
                        .retry_emfile(|| open_in_root(root.as_raw_fd(), &path))
                        .map_err(MemberError::Io);
                }
            }
            let opened = opened.map(Arc::new);
            if let Ok(f) = &opened {
                self.setgid.note_dir(f);
                self.set_fd(child, f.clone());
            }
            // Holding its fd now, or (on failure) pruned with whatever it alone kept.
            self.unpin(child);
            fd = opened?;
            node = child;
        }
        Ok((node, fd))
    }

    fn open_child(
        &mut self,
        parent: RawFd,
        name: &[u8],
        create: Create,
        files: &FileCount,
    ) -> Result<OwnedFd, MemberError> {
        let name = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        match self.retry_emfile(|| open_dir_beneath(parent, &name)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let Create::With(mode) = create else { return Err(e.into()) };
                // With a limit, one writer thread at a time looks again, counts and makes: a
                // directory two of them need at once is made and counted by one, and the other
                // finds it. (Both counted it, and an archive exactly at `--max-files` was
                // refused with several writers.)
                let one = files.making_dirs();
                if one.is_some()
                    && let Ok(made) = self.retry_emfile(|| open_dir_beneath(parent, &name))
                {
                    return Ok(made);
                }
                files.take_dir()?;
                // Safety: parent is an open directory fd, name a valid C string.
                if restart(|| unsafe { libc::mkdirat(parent, name.as_ptr(), mode) }) < 0 {
                    let e = io::Error::last_os_error();
                    // Not made by us (EEXIST: made by another writer thread without a limit
                    // to count against, or by an explicit directory member).
                    files.give_back();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(e.into());
                    }
                }
                drop(one);
                Ok(self.retry_emfile(|| open_dir_beneath(parent, &name))?)
            }
            other => Ok(other?),
        }
    }

    /// The node for `name` in directory `parent` (a file about to be written), counted busy
    /// (with all its ancestors) until `end_file`.
    pub fn begin_file(&mut self, parent: NodeId, name: &[u8]) -> NodeId {
        let id = self.find_or_insert(parent, name);
        self.nodes[id as usize].busy += 1;
        let mut at = parent;
        while at != NONE {
            self.nodes[at as usize].busy_below += 1;
            at = self.nodes[at as usize].parent;
        }
        id
    }

    pub fn end_file(&mut self, id: NodeId) {
        self.nodes[id as usize].busy -= 1;
        let mut at = self.nodes[id as usize].parent;
        while at != NONE {
            self.nodes[at as usize].busy_below -= 1;
            at = self.nodes[at as usize].parent;
        }
        self.prune(id);
    }

    /// True when a file in flight sits at `comps`, at one of its ancestors, or beneath it: an
    /// operation on `comps` must wait for it to keep archive order.
    pub fn busy<'a>(&self, comps: impl IntoIterator<Item = &'a [u8]>) -> bool {
        let mut node = ROOT;
        if self.nodes[ROOT as usize].busy_below == 0 {
            return false;
        }
        for c in comps {
            match self.find(node, c) {
                Some(id) => {
                    if self.nodes[id as usize].busy > 0 {
                        return true;
                    }
                    node = id;
                }
                None => return false,
            }
        }
        node != ROOT && self.nodes[node as usize].busy_below > 0
    }

    /// Keeps `id` in the tree until `unpin`.
    pub fn pin(&mut self, id: NodeId) {
        self.nodes[id as usize].pins += 1;
    }

    pub fn unpin(&mut self, id: NodeId) {
        self.nodes[id as usize].pins -= 1;
        self.prune(id);
    }

    pub fn set_marked(&mut self, id: NodeId, marked: bool) {
        self.nodes[id as usize].marked = marked;
    }

    /// True when `comps` or one of its ancestors is marked.
    pub fn marked<'a>(&self, comps: impl IntoIterator<Item = &'a [u8]>) -> bool {
        let mut node = ROOT;
        if self.nodes[ROOT as usize].marked {
            return true;
        }
        for c in comps {
            match self.find(node, c) {
                Some(id) if self.nodes[id as usize].marked => return true,
                Some(id) => node = id,
                None => return false,
            }
        }
        false
    }

    /// Files in flight at or beneath `id`.
    pub fn busy_at(&self, id: NodeId) -> bool {
        let n = &self.nodes[id as usize];
        n.busy > 0 || n.busy_below > 0
    }

    /// The cached fd of `id`, if it is still the directory at its path (not detached).
    pub fn cached_fd(&self, id: NodeId) -> Option<Arc<OwnedFd>> {
        let n = &self.nodes[id as usize];
        if n.detached { None } else { n.fd.clone() }
    }

    /// The directory at `comps` was removed or replaced: forget it (and, through it, anything
    /// cached beneath it), and tell the other trees of the run. Lookups of the path build a
    /// fresh node from then on.
    pub fn detach<'a>(&mut self, comps: impl IntoIterator<Item = &'a [u8]>) {
        let comps: Vec<&[u8]> = comps.into_iter().collect();
        self.forget(comps.iter().copied());
        let Some(r) = &self.removals else { return };
        let mut log = r.log.lock().unwrap_or_else(|e| e.into_inner());
        log.paths.push_back(comps.join(&b'/').into_boxed_slice());
        if log.paths.len() > REMOVALS_KEPT {
            log.paths.pop_front();
            log.base += 1;
        }
        let seq = log.base + log.paths.len() as u64;
        r.seq.store(seq, Ordering::Release);
        // Its own removal is forgotten already (unless others' wait before it).
        if self.removals_seen + 1 == seq {
            self.removals_seen = seq;
        }
    }

    /// `detach` for this tree alone.
    fn forget<'a>(&mut self, comps: impl IntoIterator<Item = &'a [u8]>) {
        let mut node = ROOT;
        for c in comps {
            match self.find(node, c) {
                Some(id) => node = id,
                None => return,
            }
        }
        if node == ROOT {
            return;
        }
        if self.nodes[node as usize].busy > 0 {
            // A file in flight at the path replaced the directory (its open found the
            // directory, `remove_existing` removed it): the node is the file's too and stays
            // findable, so that a later member at the path still waits for the file (a symlink
            // there was made first and the file then took its place). Only the fd goes.
            self.drop_fd(node);
            return;
        }
        self.unlink_hash(node);
        self.nodes[node as usize].detached = true;
        self.drop_fd(node);
        self.prune(node);
    }

    /// Live nodes (for tests and memory checks).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    #[cfg(test)]
    pub fn cached_fds(&self) -> usize {
        self.fds
    }
}
