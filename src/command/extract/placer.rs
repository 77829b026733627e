//! The routing state of `--spread` (policy/route.rs decides): the bytes each root was given
//! and where each spread file went (for hard links to it), carried at a resume point as
//! `mark::Placed` and started from again by the resumed run. With a library caller's routing
//! callback (`Restore::route`) the callback is asked instead and its answer checked
//! (`route::answered`); what a point carries is then the directories it sent to other roots.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::archive::Timestamp;
use crate::mark::Placed;
use crate::mark::record::Record;
use crate::plan::Entry;
use crate::policy::route::{
    Placement, Route, Shape, answered, answered_link, route, route_link, weight,
};
use crate::policy::safety::SafePath;
use crate::report::voice::MemberKind;
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

    /// Routes one member (of `kind`, for a routing callback) and counts it.
    pub fn place(&mut self, path: &SafePath, shape: Shape, kind: MemberKind) -> Route {
        if let Some(routed) = &self.plan.routed {
            return answered((routed.rule)(path.as_path(), kind), shape, routed);
        }
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
    /// With a routing callback, the link is asked for as a hard link and its target again as
    /// a regular file (the callback answers by path: a resumed run's targets are found the
    /// same way); both must be in one root (`route::answered_link`).
    pub fn place_link(
        &mut self,
        link: &SafePath,
        target: &SafePath,
    ) -> Result<(usize, SafePath, SafePath), Route> {
        if let Some(routed) = &self.plan.routed {
            let rule = &routed.rule;
            let (l, t) = (
                rule(link.as_path(), MemberKind::Hardlink),
                rule(target.as_path(), MemberKind::File),
            );
            return answered_link(l, t, routed);
        }
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
        let routed = route_link(&self.plan, link, target, target_root)
            .map_err(|why| Route::Refuse(why.into()))?;
        if routed.0 != 0 {
            self.roots.insert(key(link), routed.0 as u16);
        }
        Ok(routed)
    }

    /// Whether a directory routed `route` is one a resume point carries (`note_dir`): made in
    /// other roots than DIR, whose directories no carried state of DIR's writers holds.
    pub fn carries(&self, route: &Route) -> bool {
        match route {
            Route::Each { .. } => true,
            Route::To { root, .. } => *root != 0 && self.plan.routed.is_some(),
            _ => false,
        }
    }

    /// Where a directory a resume point carried (its path as the archive names it) is made
    /// again by the resumed run: the roots other than DIR (whose directories its writers'
    /// own carried state holds) and the path in each, routed as the interrupted run routed
    /// it (a routing callback is asked again; it answers by path).
    pub fn again(&self, path: &SafePath) -> Vec<(usize, SafePath)> {
        let route = match &self.plan.routed {
            Some(r) => answered((r.rule)(path.as_path(), MemberKind::Dir), Shape::Dir, r),
            None => route(&self.plan, path, Shape::Dir, &[], None),
        };
        let roots = match route {
            Route::Each { roots, path } => roots.into_iter().map(|r| (r, path.clone())).collect(),
            Route::To { root, path } => vec![(root, path)],
            _ => Vec::new(),
        };
        roots.into_iter().filter(|(r, _)| *r != 0).collect()
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
                match placer.place(&p(&format!("accounts/{i}")), Shape::Leaf(s), MemberKind::File) {
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
        placer.place(&p("accounts/a"), Shape::Leaf(10), MemberKind::File);
        let b = placer.place(&p("accounts/b"), Shape::Leaf(10), MemberKind::File);
        assert_eq!(b, Route::To { root: 2, path: p("b") });
        assert_eq!(placer.place_link(&p("accounts/l"), &p("accounts/b")), Ok((2, p("l"), p("b"))));
        // A link to the link is in that root too.
        let again = placer.place_link(&p("accounts/m"), &p("accounts/l"));
        assert_eq!(again, Ok((2, p("m"), p("l"))));
    }

    /// With a routing callback: its answers, checked; the directories it sent to other roots
    /// than DIR carried by a point and routed again the same way; hard links by its answers.
    #[test]
    fn a_callback_places_and_is_asked_again() {
        use crate::policy::route::fixture::routed;
        let routing = Placement { spreads: Vec::new(), routed: Some(routed()) };
        let mut placer = Placer::new(routing, None);
        let to = |root, path: &str| Route::To { root, path: p(path) };
        let file = placer.place(&p("accounts/3.1"), Shape::Leaf(1), MemberKind::File);
        assert_eq!(file, to(2, "3.1"));
        let each = placer.place(&p("each"), Shape::Dir, MemberKind::Dir);
        assert_eq!(each, Route::Each { roots: vec![0, 1, 2], path: p("e") });
        assert!(placer.carries(&each));
        assert_eq!(placer.again(&p("each")), vec![(1, p("e")), (2, p("e"))]);
        let in_one = placer.place(&p("ret/d"), Shape::Dir, MemberKind::Dir);
        assert_eq!(in_one, to(1, "d"));
        assert!(placer.carries(&in_one));
        assert_eq!(placer.again(&p("ret/d")), vec![(1, p("d"))]);
        let in_dir = placer.place(&p("snapshots"), Shape::Dir, MemberKind::Dir);
        assert_eq!(in_dir, to(0, "snapshots"));
        assert!(!placer.carries(&in_dir));
        assert_eq!(placer.again(&p("snapshots")), vec![]);
        assert_eq!(placer.again(&p("skip")), vec![]);
        let link = placer.place_link(&p("accounts/1.l"), &p("accounts/5.t"));
        assert_eq!(link, Ok((2, p("1.l"), p("5.t"))));
        assert!(matches!(
            placer.place_link(&p("accounts/1.l"), &p("accounts/2.t")),
            Err(Route::Refuse(_))
        ));
        // `--spread` carries only the directories it makes in every root.
        let spread = Placer::new(plan(), None);
        assert!(!spread.carries(&to(1, "x")));
        assert!(spread.carries(&Route::Each { roots: vec![1, 2, 3], path: p("x") }));
        assert_eq!(spread.again(&p("accounts/x")), vec![(1, p("x")), (2, p("x")), (3, p("x"))]);
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
