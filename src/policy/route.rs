//! Placement across several roots (issue 43, `--spread PREFIX=DIR1,DIR2,...`): which root a
//! member lands in, and under which path there. Decisions are pure (`route`, `route_link`);
//! `Placer` keeps what they read from one member to the next (the bytes each root was given,
//! where each file went, for hard links) and what a resume point carries of it.
//!
//! Roots are numbered: 0 is DIR, then the roots of each `--spread` in the order given. A member
//! under a spread's PREFIX lands in one of that spread's roots with PREFIX taken off its path
//! (`accounts/123.4` → `123.4` in `/mnt/nvme2/accounts`); every other member lands in DIR as
//! without the option. The root is the one given the fewest bytes so far (ties: the first),
//! weighed in 4 KiB blocks as the file will occupy them: a deterministic function of the
//! archive's order, so a resumed run (which starts from the loads its resume point recorded)
//! sends every member where the interrupted run sent it. Agave picks a root at random per
//! account file (`snapshots/src/hardened_unpack.rs`: `rng().random_range(0..account_paths
//! .len())`, the file at `<account_path>/accounts/<file>`), which is balanced only on average
//! and cannot be repeated by a resumed run.
//!
//! A directory under PREFIX is made in every root of its spread (`Route::Each`), so that the
//! files beneath it may go to any of them and each root holds the tree's shape with the
//! archive's modes and times. A hard link goes where its target went; one whose target lies
//! in another root (or another spread, or DIR) is refused: a hard link cannot cross
//! filesystems, and roots are meant to be on different ones.
//!
//! A library caller may route instead (`Restore::route`, src/api/route.rs): its callback is
//! asked for every member (`Rule`: the member's path after `--strip-components` and its kind)
//! and answers a root and a path within it (`Answer`); `answered` checks the answer as a
//! member's name is checked (plain components only, a root that exists) and turns it into a
//! `Route`. The callback is not second-guessed past that: where it puts a member beneath a
//! symlink, the writer refuses to pass through the symlink as it does in DIR.

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::safety::SafePath;
use crate::report::voice::MemberKind;

/// Roots one run may have, DIR included (the writers' root number is a u16; each root has a
/// writer thread, and 64 NVMe disks is past any machine this was measured on).
pub const MAX_ROOTS: usize = 64;

/// The unit a file's bytes are weighed in when choosing its root: the block it occupies on
/// ext4 and XFS, so that an empty file or a symlink weighs what its inode and block cost, and
/// ten thousand of them do not all go to one root.
const BLOCK: u64 = 4096;

/// One `--spread PREFIX=DIR1,DIR2,...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spread {
    /// The members spread: those under this path (plain components, not empty).
    pub prefix: SafePath,
    /// Where they go, absolute.
    pub roots: Vec<PathBuf>,
}

/// Every `--spread` of the run, or a library caller's routing callback (empty: everything
/// lands in DIR).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Placement {
    pub spreads: Vec<Spread>,
    /// `Restore::route`: every member is asked for (never with `spreads`).
    pub routed: Option<Routed>,
}

/// The resume digest (resume/options.rs) hashes this form: without a callback it is the one
/// runs before callbacks hashed, so their states still resume.
impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Placement");
        d.field("spreads", &self.spreads);
        if let Some(r) = &self.routed {
            d.field("routed", r);
        }
        d.finish()
    }
}

/// What a routing callback answers for a member (the library's `Route`, src/api/route.rs,
/// maps onto it one to one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    To { root: usize, path: PathBuf },
    Each { roots: Vec<usize>, path: PathBuf },
    Skip,
    Refuse(String),
}

/// A routing callback: the member's path (safe, after `--strip-components`) and its kind.
pub type Rule = dyn Fn(&Path, MemberKind) -> Answer + Send + Sync;

/// A library caller's routing: its roots (numbered from 1, absolute) and its callback.
#[derive(Clone)]
pub struct Routed {
    pub roots: Vec<PathBuf>,
    /// The roots that lie inside DIR, as paths beneath it: a member sent to DIR there is
    /// refused (it would land in a tree another root's writers write).
    pub inside: Vec<(usize, SafePath)>,
    pub rule: Arc<Rule>,
}

/// The roots are what a resume state can record of a routing; the callback's rule it cannot
/// (src/api/route.rs says it must be the same function of the path and kind on a rerun).
impl std::fmt::Debug for Routed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routed").field("roots", &self.roots).finish_non_exhaustive()
    }
}

impl PartialEq for Routed {
    fn eq(&self, other: &Routed) -> bool {
        self.roots == other.roots
            && self.inside == other.inside
            && Arc::ptr_eq(&self.rule, &other.rule)
    }
}

impl Eq for Routed {}

impl Placement {
    pub fn is_empty(&self) -> bool {
        self.spreads.is_empty() && self.routed.is_none()
    }

    /// Roots, DIR included.
    pub fn root_count(&self) -> usize {
        1 + self.roots().count()
    }

    /// The spread (or routed) roots, numbered from 1, in order.
    pub fn roots(&self) -> impl Iterator<Item = &PathBuf> {
        let routed = self.routed.iter().flat_map(|r| r.roots.iter());
        self.spreads.iter().flat_map(|s| s.roots.iter()).chain(routed)
    }

    /// The root numbers of spread `i`.
    fn range(&self, i: usize) -> Range<usize> {
        let start = 1 + self.spreads[..i].iter().map(|s| s.roots.len()).sum::<usize>();
        start..start + self.spreads[i].roots.len()
    }

    /// The roots of the spread `path` is under (numbers, and their directories), and the path
    /// within them (empty: the prefix itself).
    pub fn within(&self, path: &SafePath) -> Option<(Range<usize>, &[PathBuf], SafePath)> {
        let (i, rest) = self.split(path)?;
        Some((self.range(i), &self.spreads[i].roots, rest))
    }

    /// The spread `path` is under and the path within its roots (empty: the prefix itself).
    fn split(&self, path: &SafePath) -> Option<(usize, SafePath)> {
        self.spreads.iter().enumerate().find_map(|(i, s)| {
            let rest = path.as_path().strip_prefix(s.prefix.as_path()).ok()?;
            Some((i, SafePath(rest.to_path_buf())))
        })
    }
}

/// What a member is, as far as placement goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Dir,
    /// A file, symlink, FIFO or device node of `size` bytes.
    Leaf(u64),
}

/// Where a member lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// In root `root` (0: DIR), at `path` beneath it.
    To { root: usize, path: SafePath },
    /// A directory made in each of `roots` (in order, no root twice), at `path` beneath each.
    Each { roots: Vec<usize>, path: SafePath },
    /// Not extracted by a routing callback's choice: told as such, not counted as a failure
    /// (`--spread` skips nothing).
    Skip,
    /// Not extracted: the member is reported as not restored, with this reason.
    Refuse(Cow<'static, str>),
    /// Not extracted: the path a routing callback gave is not a safe relative path (reported
    /// as an unsafe name is).
    Unsafe(String),
    /// A routing callback's answer no member can have (a root that does not exist, `Each` for
    /// a non-directory): the run stops, as for a bad option.
    Broken(String),
}

/// A leaf's weight when balancing: its bytes in whole blocks, at least one.
pub fn weight(size: u64) -> u64 {
    size.div_ceil(BLOCK).max(1).saturating_mul(BLOCK)
}

/// Where the member at `path` (safe, relative to DIR) lands, given the bytes each root was
/// given so far (`loads`, indexed by root number) and the root of the nearest non-directory
/// above it (`above`: a symlink or file the archive put where this member's parent would be).
/// A member beneath one goes to its root, where the writer refuses to pass through it as it
/// does in DIR; elsewhere it would make a directory of that name in another root. Pure.
pub fn route(
    plan: &Placement,
    path: &SafePath,
    shape: Shape,
    loads: &[u64],
    above: Option<usize>,
) -> Route {
    let Some((i, rest)) = plan.split(path) else {
        return Route::To { root: 0, path: path.clone() };
    };
    let roots = plan.range(i);
    if let Some(root) = above.filter(|r| roots.contains(r)) {
        return Route::To { root, path: rest };
    }
    match shape {
        Shape::Dir => Route::Each { roots: roots.collect(), path: rest },
        Shape::Leaf(_) if rest.is_root() => {
            Route::Refuse("is a spread prefix, which must be a directory; skipped".into())
        }
        Shape::Leaf(_) => {
            let load = |r: &usize| loads.get(*r).copied().unwrap_or(0);
            let root = roots.clone().min_by_key(load).unwrap_or(roots.start);
            Route::To { root, path: rest }
        }
    }
}

/// A hard link at `link` to `target` (both safe, relative to DIR), whose target went to root
/// `target_root` (None: not extracted by this run): where the link lands and its target's
/// path within that root, or why it is refused. Pure.
pub fn route_link(
    plan: &Placement,
    link: &SafePath,
    target: &SafePath,
    target_root: Option<usize>,
) -> Result<(usize, SafePath, SafePath), &'static str> {
    match (plan.split(link), plan.split(target)) {
        (None, None) => Ok((0, link.clone(), target.clone())),
        (Some((i, rest)), Some((j, target_rest))) if i == j => match target_root {
            Some(r) if plan.range(i).contains(&r) && !rest.is_root() => Ok((r, rest, target_rest)),
            _ => Err("hard link to a file this run did not extract in a spread root; skipped"),
        },
        _ => Err("hard link across spread roots (they may be different filesystems); skipped"),
    }
}

/// A routing callback's `answer` for a member of `shape`, checked and made a `Route`: its
/// roots must exist (else `Broken`: the run stops, the callback and `Restore::roots` disagree),
/// its path must be plain names (else `Unsafe`, as for an unsafe member name), not empty for a
/// non-directory (the root itself), `Each` is for directories (else `Broken`), and a member
/// sent to DIR may not land at or beneath a root that lies inside DIR, nor replace the
/// directory holding one (else `Refuse`: that tree is the root's writers'). Pure.
pub fn answered(answer: Answer, shape: Shape, routed: &Routed) -> Route {
    checked(answer, shape, routed).unwrap_or_else(|refused| refused)
}

fn checked(answer: Answer, shape: Shape, routed: &Routed) -> Result<Route, Route> {
    let count = 1 + routed.roots.len();
    let root_exists = |root: usize| match root < count {
        true => Ok(root),
        false => Err(Route::Broken(format!(
            "the routing callback answered root {root}, but the roots are 0 to {} (0 the \
             destination, then those of Restore::roots in order)",
            count - 1
        ))),
    };
    let path_of = |path: &Path| {
        let unsafe_path = |why: &str| {
            let shown = crate::report::printable(path.as_os_str().as_encoded_bytes());
            Route::Unsafe(format!("the routing callback's path '{shown}' {why}; skipped"))
        };
        match SafePath::plain(path) {
            None => Err(unsafe_path("is not a relative path of plain names")),
            Some(p) if p.is_root() && shape != Shape::Dir => {
                Err(unsafe_path("is the root itself, which only a directory may be"))
            }
            Some(p) => Ok(p),
        }
    };
    match answer {
        Answer::Skip => Ok(Route::Skip),
        Answer::Refuse(why) => Ok(Route::Refuse(why.into())),
        Answer::To { root, path } => {
            let root = root_exists(root)?;
            let path = path_of(&path)?;
            if root == 0 {
                in_dir(&path, shape, &routed.inside)?;
            }
            Ok(Route::To { root, path })
        }
        Answer::Each { mut roots, path } => {
            if shape != Shape::Dir {
                let why = "the routing callback answered Route::Each, which is for directories, \
                           for a member that is not one";
                return Err(Route::Broken(why.into()));
            }
            if roots.is_empty() {
                return Err(Route::Broken(
                    "the routing callback answered Route::Each with no root".into(),
                ));
            }
            for &r in &roots {
                root_exists(r)?;
            }
            roots.sort_unstable();
            roots.dedup();
            let path = path_of(&path)?;
            if roots[0] == 0 {
                in_dir(&path, shape, &routed.inside)?;
            }
            Ok(Route::Each { roots, path })
        }
    }
}

/// A member sent to DIR at `path`: refused where it would land at or beneath a root inside
/// DIR, or replace (as a non-directory) a directory holding one.
fn in_dir(path: &SafePath, shape: Shape, inside: &[(usize, SafePath)]) -> Result<(), Route> {
    for (n, r) in inside {
        let beneath = path.as_path().starts_with(r.as_path());
        if beneath || (shape != Shape::Dir && path.is_ancestor_of(r)) {
            return Err(Route::Refuse(Cow::Owned(format!(
                "the routing callback sent it to the destination at {}, where root {n} ({}) \
                 has writers of its own; skipped",
                path.display(),
                r.display()
            ))));
        }
    }
    Ok(())
}

/// A hard link whose own path the callback answered `link` for and whose target's path it
/// answered `target` for (asked again, as a regular file): the root both are in, the link's
/// path and the target's there; else the route it takes instead (refused across roots, or
/// where the target was not placed; the link's own `Skip`, `Refuse`, `Unsafe`, `Broken`).
/// Pure.
pub fn answered_link(
    link: Answer,
    target: Answer,
    routed: &Routed,
) -> Result<(usize, SafePath, SafePath), Route> {
    let (root, path) = match answered(link, Shape::Leaf(0), routed) {
        Route::To { root, path } => (root, path),
        other => return Err(other),
    };
    match answered(target, Shape::Leaf(0), routed) {
        Route::To { root: r, path: target } if r == root => Ok((root, path, target)),
        Route::To { .. } => Err(Route::Refuse(
            "hard link across roots (they may be different filesystems); skipped".into(),
        )),
        Route::Broken(why) => Err(Route::Broken(why)),
        _ => Err(Route::Refuse(
            "hard link to a file the routing callback did not place; skipped".into(),
        )),
    }
}

/// The plan the router's and the placer's case tables share (command/extract/placer.rs).
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    pub fn p(s: &str) -> SafePath {
        SafePath(PathBuf::from(s))
    }

    /// `accounts` over /a, /b, /c and `snap/big` over /d, /e.
    pub fn plan() -> Placement {
        Placement {
            spreads: vec![
                Spread {
                    prefix: p("accounts"),
                    roots: vec!["/a".into(), "/b".into(), "/c".into()],
                },
                Spread { prefix: p("snap/big"), roots: vec!["/d".into(), "/e".into()] },
            ],
            routed: None,
        }
    }

    /// A callback's routing over /a, /b and DIR/deep/in (root 3, inside DIR): `accounts/ID.N` to
    /// root 1 + ID % 2 without the prefix, `skip*` skipped, `no*` refused, `bad/ROOT` to root
    /// ROOT, `each` everywhere, `ret/PATH` to root 1 at PATH as written; the rest to DIR.
    pub fn routed() -> Routed {
        let rule = |path: &Path, _kind: MemberKind| {
            let s = path.to_str().unwrap();
            if let Some(file) = s.strip_prefix("accounts/") {
                let id: usize = file.split('.').next().unwrap().parse().unwrap_or(0);
                return Answer::To { root: 1 + id % 2, path: file.into() };
            }
            if let Some(root) = s.strip_prefix("bad/") {
                return Answer::To { root: root.parse().unwrap(), path: "x".into() };
            }
            if let Some(path) = s.strip_prefix("ret/") {
                return Answer::To { root: 1, path: path.into() };
            }
            match s {
                s if s.starts_with("skip") => Answer::Skip,
                s if s.starts_with("no") => Answer::Refuse(format!("{s} is not wanted")),
                "each" => Answer::Each { roots: vec![2, 0, 1, 2], path: "e".into() },
                _ => Answer::To { root: 0, path: path.into() },
            }
        };
        Routed {
            roots: vec!["/a".into(), "/b".into(), "/w/dest/deep/in".into()],
            inside: vec![(3, p("deep/in"))],
            rule: Arc::new(rule),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{p, plan, routed};
    use super::*;

    /// A callback's answers as the router takes them: where they are good, as given; an
    /// unsafe path skips the member, a root that does not exist or `Each` for a file stops
    /// the run, DIR's paths at or beneath (or a file over) a root inside DIR are refused.
    #[test]
    fn a_callbacks_answers_are_checked() {
        let r = routed();
        let ask = |path: &str, shape: Shape| {
            let kind = if shape == Shape::Dir { MemberKind::Dir } else { MemberKind::File };
            answered((r.rule)(Path::new(path), kind), shape, &r)
        };
        let to = |root, path: &str| Route::To { root, path: p(path) };
        let (file, dir) = (Shape::Leaf(1), Shape::Dir);
        let cases: Vec<(&str, Shape, Route)> = vec![
            ("accounts/7.1", file, to(2, "7.1")),
            ("accounts/8.1", file, to(1, "8.1")),
            ("version", file, to(0, "version")),
            ("accounts", dir, to(0, "accounts")),
            ("skip/me", file, Route::Skip),
            ("nope", file, Route::Refuse("nope is not wanted".into())),
            ("bad/3", file, to(3, "x")),
            ("bad/0", file, to(0, "x")),
            ("each", dir, Route::Each { roots: vec![0, 1, 2], path: p("e") }),
            ("ret/a/./b", file, to(1, "a/b")),
            ("ret/", dir, to(1, "")),
            ("deep", dir, to(0, "deep")),
            ("deep/other", file, to(0, "deep/other")),
        ];
        for (path, shape, want) in cases {
            assert_eq!(ask(path, shape), want, "{path} {shape:?}");
        }
        // (path, shape, the variant, words it says)
        let refused: Vec<(&str, Shape, &str, &str)> = vec![
            ("bad/4", file, "Broken", "answered root 4, but the roots are 0 to 3"),
            ("each", file, "Broken", "Route::Each, which is for directories"),
            ("ret/../x", file, "Unsafe", "'../x' is not a relative path of plain names"),
            ("ret//etc/passwd", file, "Unsafe", "'/etc/passwd' is not a relative path"),
            ("ret/", file, "Unsafe", "is the root itself"),
            ("deep/in", file, "Refuse", "where root 3 (deep/in) has writers of its own"),
            ("deep/in", dir, "Refuse", "root 3"),
            ("deep/in/x", file, "Refuse", "root 3"),
            ("deep", file, "Refuse", "root 3"),
        ];
        for (path, shape, variant, says) in refused {
            let got = ask(path, shape);
            let (v, words) = match &got {
                Route::Broken(w) => ("Broken", w.to_string()),
                Route::Unsafe(w) => ("Unsafe", w.to_string()),
                Route::Refuse(w) => ("Refuse", w.to_string()),
                _ => ("", String::new()),
            };
            assert_eq!(v, variant, "{path} {shape:?}: {got:?}");
            assert!(words.contains(says), "{path}: {words}");
        }
        let each = |roots: Vec<usize>| Answer::Each { roots, path: "e".into() };
        assert!(matches!(answered(each(vec![]), dir, &r), Route::Broken(_)));
        assert!(matches!(answered(each(vec![1, 9]), dir, &r), Route::Broken(_)));
        let inside = Answer::Each { roots: vec![0], path: "deep/in/x".into() };
        assert!(matches!(answered(inside, dir, &r), Route::Refuse(_)));
    }

    /// A hard link lands where the callback put both it and its target, or is refused.
    #[test]
    fn a_callbacks_hard_links_stay_in_one_root() {
        let r = routed();
        let ask = |path: &str| (r.rule)(Path::new(path), MemberKind::File);
        let link = |l: &str, t: &str| answered_link(ask(l), ask(t), &r);
        assert_eq!(link("accounts/1.l", "accounts/3.t"), Ok((2, p("1.l"), p("3.t"))));
        assert_eq!(link("version", "x/y"), Ok((0, p("version"), p("x/y"))));
        let refused = |got: Result<_, Route>, says: &str| match got {
            Err(Route::Refuse(w)) => assert!(w.contains(says), "{w}"),
            other => panic!("{other:?}"),
        };
        refused(link("accounts/1.l", "accounts/2.t"), "across roots");
        refused(link("accounts/1.l", "version"), "across roots");
        refused(link("version", "skip/t"), "did not place");
        refused(link("version", "nope"), "did not place");
        refused(link("version", "ret/../x"), "did not place");
        assert_eq!(link("skip/l", "version"), Err(Route::Skip));
        assert!(matches!(link("version", "bad/9"), Err(Route::Broken(_))));
        assert!(matches!(link("bad/9", "version"), Err(Route::Broken(_))));
        assert!(matches!(link("ret/../l", "version"), Err(Route::Unsafe(_))));
    }

    #[test]
    fn members_are_routed_by_prefix_and_load() {
        let to = |root, path: &str| Route::To { root, path: p(path) };
        // (path, shape, loads by root) -> route
        let cases: Vec<(&str, Shape, Vec<u64>, Route)> = vec![
            ("version", Shape::Leaf(5), vec![], to(0, "version")),
            ("snapshots/1/1", Shape::Leaf(5), vec![], to(0, "snapshots/1/1")),
            // Components, not bytes: `accountsX` and `account` are not under `accounts`.
            ("accountsX/1", Shape::Leaf(5), vec![], to(0, "accountsX/1")),
            ("account", Shape::Leaf(5), vec![], to(0, "account")),
            ("accounts/1.1", Shape::Leaf(5), vec![0, 0, 0, 0], to(1, "1.1")),
            ("accounts/1.1", Shape::Leaf(5), vec![0, 9, 0, 0], to(2, "1.1")),
            ("accounts/1.1", Shape::Leaf(5), vec![0, 9, 9, 3], to(3, "1.1")),
            ("accounts/1.1", Shape::Leaf(5), vec![0, 9, 2, 2], to(2, "1.1")),
            // Loads not yet counted are 0.
            ("accounts/x/y", Shape::Leaf(5), vec![0, 9], to(2, "x/y")),
            ("snap/big/f", Shape::Leaf(1), vec![0, 0, 0, 0, 7, 6], to(5, "f")),
            ("snap/bigger", Shape::Leaf(1), vec![], to(0, "snap/bigger")),
            ("snap", Shape::Dir, vec![], to(0, "snap")),
            (
                "accounts",
                Shape::Dir,
                vec![],
                Route::Each { roots: vec![1, 2, 3], path: SafePath(PathBuf::new()) },
            ),
            (
                "accounts/sub",
                Shape::Dir,
                vec![],
                Route::Each { roots: vec![1, 2, 3], path: p("sub") },
            ),
            ("snap/big/d", Shape::Dir, vec![], Route::Each { roots: vec![4, 5], path: p("d") }),
            (
                "accounts",
                Shape::Leaf(0),
                vec![],
                Route::Refuse("is a spread prefix, which must be a directory; skipped".into()),
            ),
        ];
        for (path, shape, loads, want) in cases {
            let got = route(&plan(), &p(path), shape, &loads, None);
            assert_eq!(got, want, "{path} {shape:?} {loads:?}");
        }
        // Beneath a non-directory placed in a root (a symlink): that root, whatever the loads.
        for (path, shape, above, want) in [
            ("accounts/l/f", Shape::Leaf(5), Some(3), to(3, "l/f")),
            ("accounts/l/d", Shape::Dir, Some(2), to(2, "l/d")),
            // Not a root of this spread: ignored.
            ("accounts/l/f", Shape::Leaf(5), Some(5), to(1, "l/f")),
            ("version", Shape::Leaf(5), Some(2), to(0, "version")),
        ] {
            assert_eq!(route(&plan(), &p(path), shape, &[], above), want, "{path}");
        }
        // Without a spread everything is DIR's.
        let none = Placement::default();
        assert_eq!(route(&none, &p("accounts/1"), Shape::Leaf(1), &[], None), to(0, "accounts/1"));
        assert_eq!(plan().root_count(), 6);
    }

    #[test]
    fn hard_links_go_where_their_targets_went() {
        let ok = |r, l: &str, t: &str| Ok((r, p(l), p(t)));
        // (link, target, target's root) -> where
        let cross = "hard link across spread roots (they may be different filesystems); skipped";
        let unknown = "hard link to a file this run did not extract in a spread root; skipped";
        let cases: Vec<(&str, &str, Option<usize>, Result<_, &str>)> = vec![
            ("a", "b", Some(0), ok(0, "a", "b")),
            ("a", "b", None, ok(0, "a", "b")),
            ("accounts/l", "accounts/t", Some(2), ok(2, "l", "t")),
            ("accounts/l", "accounts/t", None, Err(unknown)),
            // A root of another spread: never.
            ("accounts/l", "accounts/t", Some(4), Err(unknown)),
            ("accounts/l", "version", Some(0), Err(cross)),
            ("version", "accounts/t", Some(1), Err(cross)),
            ("snap/big/l", "accounts/t", Some(1), Err(cross)),
            ("accounts", "accounts/t", Some(1), Err(unknown)),
        ];
        for (link, target, root, want) in cases {
            assert_eq!(route_link(&plan(), &p(link), &p(target), root), want, "{link} {target}");
        }
    }
}
