//! The routing state of `--spread` (policy/route.rs decides): the bytes each root was given
//! and where each spread file went (for hard links to it), carried at a resume point as
//! `mark::Placed` and started from again by the resumed run.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::archive::Timestamp;
use crate::mark::Placed;
use crate::mark::record::Record;
use crate::plan::Entry;
use crate::policy::route::{Placement, Route, Shape, route, route_link, weight};
use crate::policy::safety::SafePath;
use crate::write::tree::PassThrough;

/// Spread directories a resume point carries at most: past it, no more resume points are
/// taken (their roots' directories could not be stamped again by the resumed run). A
/// snapshot has one (`accounts/`).
pub const DIRS_MAX: usize = 4096;

/// FNV-1a of a path's bytes: the key of `Placer::placed` (a collision sends a hard link to the
/// root of another file, where creating it fails and is reported; it never leaves the roots).
fn key(path: &SafePath) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in std::os::unix::ffi::OsStrExt::as_bytes(path.as_path().as_os_str()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The routing state of one run.
pub struct Placer {
    plan: Placement,
    placed: Placed,
    /// Root of each spread leaf, by `key` of its path, for hard links to it.
    roots: HashMap<u64, u16, BuildHasherDefault<PassThrough>>,
    /// More spread directories than a resume point carries.
    too_many_dirs: bool,
    /// Started from a resume point: files placed before it are not in `roots`.
    resumed: bool,
}

impl Placer {
    /// `resumed`: what the interrupted run's resume point recorded.
    pub fn new(plan: Placement, resumed: Option<&Placed>) -> Placer {
        let mut placed = resumed.cloned().unwrap_or_default();
        placed.loads.resize(plan.root_count(), 0);
        let resumed = resumed.is_some();
        Placer { plan, placed, roots: HashMap::default(), too_many_dirs: false, resumed }
    }

    pub fn is_empty(&self) -> bool {
        self.plan.is_empty()
    }

    /// Routes one member and counts it.
    pub fn place(&mut self, path: &SafePath, shape: Shape) -> Route {
        let above = self.above(path);
        let route = route(&self.plan, path, shape, &self.placed.loads, above);
        if let (Route::To { root, .. }, Shape::Leaf(size)) = (&route, shape)
            && *root != 0
        {
            self.placed.loads[*root] = self.placed.loads[*root].saturating_add(weight(size));
            self.roots.insert(key(path), *root as u16);
        }
        route
    }

    /// The root of the nearest spread leaf (a symlink, a file) at a path above `path`.
    fn above(&self, path: &SafePath) -> Option<usize> {
        if self.roots.is_empty() {
            return None;
        }
        path.as_path().ancestors().skip(1).find_map(|a| {
            let a = SafePath(a.to_path_buf());
            self.roots.get(&key(&a)).map(|&r| usize::from(r))
        })
    }

    /// Routes a hard link (see `route_link`). A resumed run does not know where the files
    /// before its resume point went: it looks for the target in the roots of its spread (it
    /// landed before the point; only a lookup, the link is made beneath the root it names).
    pub fn place_link(
        &mut self,
        link: &SafePath,
        target: &SafePath,
    ) -> Result<(usize, SafePath, SafePath), &'static str> {
        let mut target_root = self.roots.get(&key(target)).map(|&r| usize::from(r));
        if target_root.is_none()
            && self.resumed
            && let Some((numbers, dirs, rest)) = self.plan.within(target)
            && !rest.is_root()
        {
            target_root = numbers.zip(dirs).find_map(|(n, d)| {
                let found = std::fs::symlink_metadata(d.join(rest.as_path()));
                found.is_ok_and(|m| !m.is_dir()).then_some(n)
            });
        }
        let routed = route_link(&self.plan, link, target, target_root)?;
        if routed.0 != 0 {
            self.roots.insert(key(link), routed.0 as u16);
        }
        Ok(routed)
    }

    /// A spread directory was made: the resumed run makes it again.
    pub fn note_dir(&mut self, record: Record) {
        if self.placed.dirs.len() >= DIRS_MAX {
            self.too_many_dirs = true;
            return;
        }
        if let Some(same) = self.placed.dirs.iter_mut().find(|d| d.path == record.path) {
            *same = record;
        } else {
            self.placed.dirs.push(record);
        }
    }

    /// What a resume point carries (None: too much; no point is taken).
    pub fn at_point(&self) -> Option<Placed> {
        match (self.plan.is_empty(), self.too_many_dirs) {
            (true, _) => Some(Placed::default()),
            (false, true) => None,
            (false, false) => Some(self.placed.clone()),
        }
    }

    /// The spread directories a resumed run makes again before any member.
    pub fn resumed_dirs(&self) -> &[Record] {
        &self.placed.dirs
    }

    pub fn plan(&self) -> &Placement {
        &self.plan
    }
}

/// A spread directory as a resume point carries it: its path as the archive names it (after
/// `--strip-components` and the like) and the metadata it is given.
pub fn dir_record(e: &Entry) -> Record {
    Record {
        path: std::os::unix::ffi::OsStrExt::as_bytes(e.path.as_path().as_os_str()).to_vec(),
        mode: e.mode,
        mtime: e.mtime,
        owner: e.owner,
        dev: 0,
        ino: 0,
        borrowed: false,
        name: e.name.clone(),
        xattrs: e.xattrs.clone(),
    }
}

/// The directory member a resumed run makes again from `r` (`dir_record`), at `offset`.
pub fn dir_entry(r: &Record, offset: u64) -> Option<Entry> {
    let path = crate::resume::state::safe_path(&r.path).ok()?;
    Some(Entry {
        name: r.name.clone(),
        path,
        mode: r.mode,
        mtime: r.mtime,
        archived_mtime: r.mtime.unwrap_or(Timestamp { secs: 0, nanos: 0 }),
        owner: r.owner,
        offset,
        xattrs: r.xattrs.clone(),
        delay_restore: false,
        root: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::route::fixture::{p, plan};

    /// Greedy by weight keeps every root within a few files' weight of the others, and the
    /// same archive order gives the same roots (what resume relies on), also when routing
    /// starts again from the loads of a point.
    #[test]
    fn placer_balances_bytes_and_repeats_itself() {
        let sizes: Vec<u64> = (0..3000u64).map(|i| (i * 7919) % 300_000 + 1).collect();
        let run = |from: usize, resumed: Option<&Placed>| {
            let mut placer = Placer::new(plan(), resumed);
            let mut roots = Vec::new();
            let mut at = None;
            for (i, &s) in sizes.iter().enumerate().skip(from) {
                if i == 1000 {
                    at = placer.at_point();
                }
                match placer.place(&p(&format!("accounts/{i}")), Shape::Leaf(s)) {
                    Route::To { root, .. } => roots.push(root),
                    r => panic!("{r:?}"),
                }
            }
            (roots, placer.placed.loads.clone(), at)
        };
        let (all, loads, at) = run(0, None);
        let even = loads[1..4].iter().sum::<u64>() / 3;
        for l in &loads[1..4] {
            assert!(l.abs_diff(even) < 300_000, "{loads:?}");
        }
        let (rest, _, _) = run(1000, at.as_ref());
        assert_eq!(&all[1000..], &rest[..]);
    }

    #[test]
    fn hard_links_follow_the_placer() {
        let mut placer = Placer::new(plan(), None);
        placer.place(&p("accounts/a"), Shape::Leaf(10));
        let b = placer.place(&p("accounts/b"), Shape::Leaf(10));
        assert_eq!(b, Route::To { root: 2, path: p("b") });
        assert_eq!(placer.place_link(&p("accounts/l"), &p("accounts/b")), Ok((2, p("l"), p("b"))));
        // A link to the link is in that root too.
        let again = placer.place_link(&p("accounts/m"), &p("accounts/l"));
        assert_eq!(again, Ok((2, p("m"), p("l"))));
    }

    #[test]
    fn a_point_carries_the_dirs_up_to_a_bound() {
        let rec = |path: &str| Record {
            path: path.as_bytes().to_vec(),
            mode: 0o755,
            mtime: None,
            owner: None,
            dev: 0,
            ino: 0,
            borrowed: false,
            name: String::new(),
            xattrs: None,
        };
        let mut placer = Placer::new(plan(), None);
        placer.note_dir(rec("accounts"));
        placer.note_dir(rec("accounts"));
        assert_eq!(placer.at_point().map(|p| p.dirs.len()), Some(1));
        for i in 0..DIRS_MAX {
            placer.note_dir(rec(&format!("accounts/{i}")));
        }
        assert_eq!(placer.at_point(), None);
        let none = Placer::new(Placement::default(), None);
        assert_eq!(none.at_point(), Some(Placed::default()));
    }
}
