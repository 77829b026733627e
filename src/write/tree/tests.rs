//! The tree's tests: the fd budget, deep paths, busy nodes, evictions and removals seen by other
//! trees.

use super::*;

fn tree(budget: usize) -> (tempfile::TempDir, Tree) {
    let t = tempfile::tempdir().unwrap();
    let root: OwnedFd = std::fs::File::open(t.path()).unwrap().into();
    (t, Tree::new(root, budget, Arc::default()))
}

fn comps(p: &str) -> Vec<&[u8]> {
    p.split('/').filter(|c| !c.is_empty()).map(str::as_bytes).collect()
}

#[test]
fn creates_and_caches_within_budget() {
    let (t, mut tree) = tree(4);
    for i in 0..20 {
        let p = format!("a/b{i}/c");
        tree.dir(comps(&p), Create::With(0o755), &FileCount::default()).unwrap();
        assert!(tree.cached_fds() <= 4, "{} fds cached", tree.cached_fds());
    }
    assert!(t.path().join("a/b19/c").is_dir());
    // Nodes without fds, pins or files in flight are gone.
    assert!(tree.len() <= 1 + 4 * 3, "{} nodes", tree.len());
    assert!(tree.dir(comps("x/y"), Create::No, &FileCount::default()).is_err());
    assert!(tree.len() <= 1 + 4 * 3);
}

#[test]
fn deep_paths_are_linear() {
    let (_t, mut tree) = tree(8);
    let deep: Vec<&[u8]> = std::iter::repeat_n(&b"d"[..], 2000).collect();
    tree.dir(deep.iter().copied(), Create::With(0o700), &FileCount::default()).unwrap();
    // Every component has a node (they are each other's parents), nothing more.
    assert!(tree.len() <= 2001);
    let (parent, _) = tree.dir(deep.iter().copied(), Create::No, &FileCount::default()).unwrap();
    let f = tree.begin_file(parent, b"f");
    assert!(tree.busy(deep.iter().copied()));
    assert!(tree.busy(deep[..1].iter().copied()));
    assert!(!tree.busy(comps("other")));
    tree.end_file(f);
    assert!(!tree.busy(deep.iter().copied()));
}

#[test]
fn busy_files_and_ancestors() {
    let (_t, mut tree) = tree(16);
    let (d, _) = tree.dir(comps("a/b"), Create::With(0o755), &FileCount::default()).unwrap();
    let f = tree.begin_file(d, b"f");
    assert!(tree.busy(comps("a/b/f")));
    assert!(tree.busy(comps("a/b/f/g")));
    assert!(tree.busy(comps("a")));
    assert!(!tree.busy(comps("a/c")));
    assert!(!tree.busy(comps("a/b/g")));
    tree.end_file(f);
    assert!(!tree.busy(comps("a")));
}

impl Tree {
    /// Every live node's parent is live, the walk up from it reaches DIR within `len()`
    /// steps, and each node's `children` counts the live nodes that name it.
    fn check(&self) {
        let free: std::collections::HashSet<NodeId> = self.free.iter().copied().collect();
        assert_eq!(free.len(), self.free.len(), "an id freed twice");
        let mut children = vec![0u32; self.nodes.len()];
        for id in 1..self.nodes.len() as NodeId {
            if free.contains(&id) {
                continue;
            }
            let parent = self.nodes[id as usize].parent;
            assert!(!free.contains(&parent), "node {id}'s parent {parent} is free");
            children[parent as usize] += 1;
            let (mut at, mut steps) = (id, 0);
            while at != ROOT {
                at = self.nodes[at as usize].parent;
                steps += 1;
                assert!(steps <= self.len(), "node {id} is on a cycle");
            }
        }
        for (id, n) in self.nodes.iter().enumerate() {
            if !free.contains(&(id as NodeId)) {
                assert_eq!(n.children, children[id], "children of node {id}");
            }
        }
    }
}

#[test]
fn a_directory_on_the_walk_outlives_the_eviction_it_causes() {
    // a/b stays in the tree without an fd of its own while a/b/d holds one; opening a
    // evicts d, and pruning d used to free b and a while the walk was at a: the next
    // node then got a's freed id and was its own parent (a writer looped forever in
    // begin_file under `ulimit -n 64`).
    let (t, mut tree) = tree(2);
    let none = FileCount::default();
    tree.dir(comps("a/b/d"), Create::With(0o755), &none).unwrap();
    tree.check();
    tree.dir(comps("x"), Create::With(0o755), &none).unwrap();
    tree.check();
    let (c, _) = tree.dir(comps("a/b/c"), Create::With(0o755), &none).unwrap();
    tree.check();
    let f = tree.begin_file(c, b"f");
    tree.check();
    assert!(tree.busy(comps("a/b/c/f")));
    tree.end_file(f);
    tree.check();
    assert!(t.path().join("a/b/c").is_dir());
}

#[test]
fn random_walks_keep_the_tree_whole() {
    // Walks, files in flight, pins, detaches and evictions in a random order over a small
    // name space with a 2-fd budget, checking the tree's links after every step.
    let (_t, mut tree) = tree(2);
    let none = FileCount::default();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let names: [&[u8]; 3] = [b"a", b"b", b"c"];
    let (mut files, mut pins) = (Vec::new(), Vec::new());
    for _ in 0..4_000 {
        let path: Vec<&[u8]> = (0..1 + next(4)).map(|_| names[next(3) as usize]).collect();
        match next(8) {
            0..=2 => {
                let (d, _) = tree.dir(path.iter().copied(), Create::With(0o755), &none).unwrap();
                files.push(tree.begin_file(d, b"f"));
            }
            3 if !files.is_empty() => {
                let f = files.swap_remove(next(files.len() as u64) as usize);
                tree.end_file(f);
            }
            4 => {
                let (d, _) = tree.dir(path.iter().copied(), Create::With(0o755), &none).unwrap();
                tree.pin(d);
                pins.push(d);
            }
            5 if !pins.is_empty() => {
                let d = pins.swap_remove(next(pins.len() as u64) as usize);
                tree.unpin(d);
            }
            6 => tree.detach(path.iter().copied()),
            _ => {
                tree.shrink();
            }
        }
        tree.check();
        assert!(tree.cached_fds() <= 2);
    }
    for f in files {
        tree.end_file(f);
    }
    for d in pins {
        tree.unpin(d);
    }
    tree.check();
    assert!(tree.len() <= 1 + 2 * 4, "{} nodes left", tree.len());
}

#[test]
fn a_file_in_flight_stays_busy_when_a_directory_at_its_path_goes() {
    // The file's open found an empty directory at its path, which was removed and
    // detached: the file's node is that path's node, and it must stay findable.
    let (_t, mut tree) = tree(4);
    let none = FileCount::default();
    let (d, _) = tree.dir(comps("p"), Create::With(0o755), &none).unwrap();
    let f = tree.begin_file(d, b"x");
    tree.detach(comps("p/x"));
    tree.check();
    assert!(tree.busy(comps("p/x")));
    tree.end_file(f);
    tree.check();
    assert!(!tree.busy(comps("p/x")));
    // The same where the directory was a cached node before the file came.
    tree.dir(comps("x"), Create::With(0o755), &none).unwrap();
    let f = tree.begin_file(ROOT, b"x");
    tree.detach(comps("x"));
    tree.check();
    assert!(tree.busy(comps("x")));
    assert!(tree.cached_fd(f).is_none(), "the removed directory's fd stays cached");
    tree.end_file(f);
    tree.check();
}

#[test]
fn detached_directories_are_reopened() {
    let (t, mut tree) = tree(16);
    tree.dir(comps("a/b"), Create::With(0o755), &FileCount::default()).unwrap();
    std::fs::remove_dir(t.path().join("a/b")).unwrap();
    std::fs::remove_dir(t.path().join("a")).unwrap();
    tree.detach(comps("a"));
    tree.dir(comps("a/b"), Create::With(0o755), &FileCount::default()).unwrap();
    assert!(t.path().join("a/b").is_dir());
}

/// Two trees over one DIR (a writer thread and the dispatcher): a directory one of them
/// removes and makes again is the new one in the other's next walk, also after more
/// removals than the log keeps (then every cached fd goes).
#[test]
fn removals_reach_the_other_trees() {
    let (t, mut a) = tree(16);
    let root: OwnedFd = std::fs::File::open(t.path()).unwrap().into();
    let mut b = Tree::new(root, 16, Arc::default());
    let shared = Arc::new(Removals::default());
    a.share_removals(shared.clone());
    b.share_removals(shared);
    let files = FileCount::default();
    a.dir(comps("x/y"), Create::With(0o755), &files).unwrap();
    for round in 0..2 {
        std::fs::remove_dir(t.path().join("x/y")).unwrap();
        b.detach(comps("x/y"));
        if round == 1 {
            for i in 0..REMOVALS_KEPT + 3 {
                b.detach(comps(&format!("other{i}")));
            }
        }
        std::fs::create_dir(t.path().join("x/y")).unwrap();
        let (_, fd) = a.dir(comps("x/y"), Create::No, &files).unwrap();
        // A file made through the fd lands in the directory at x/y now (through the
        // removed one's fd it would fail: ENOENT).
        let name = CString::new(format!("probe{round}")).unwrap();
        // Safety: fd is an open directory, name a valid C string.
        let f = unsafe {
            libc::openat(fd.as_raw_fd(), name.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644)
        };
        assert!(f >= 0, "round {round}: {}", io::Error::last_os_error());
        // Safety: f was just opened and is closed once.
        unsafe { libc::close(f) };
        assert!(t.path().join(format!("x/y/probe{round}")).exists());
        std::fs::remove_file(t.path().join(format!("x/y/probe{round}"))).unwrap();
    }
    assert!(shared_len(&a) <= REMOVALS_KEPT);
}

fn shared_len(t: &Tree) -> usize {
    t.removals.as_ref().unwrap().log.lock().unwrap().paths.len()
}
