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

use std::ops::Range;
use std::path::PathBuf;

use super::safety::SafePath;

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

/// Every `--spread` of the run (empty: everything lands in DIR).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    pub spreads: Vec<Spread>,
}

impl Placement {
    pub fn is_empty(&self) -> bool {
        self.spreads.is_empty()
    }

    /// Roots, DIR included.
    pub fn root_count(&self) -> usize {
        1 + self.spreads.iter().map(|s| s.roots.len()).sum::<usize>()
    }

    /// The spread roots, numbered from 1, in order.
    pub fn roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.spreads.iter().flat_map(|s| s.roots.iter())
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
    /// A directory made in each of `roots`, at `path` beneath each.
    Each { roots: Range<usize>, path: SafePath },
    /// Not extracted, nothing said (a library caller's choice; `--spread` skips nothing).
    // Only a library caller's routing callback gives it, and none is public yet (issue 43).
    #[allow(dead_code)]
    Skip,
    /// Not extracted: the member is reported as not restored, with this reason.
    Refuse(&'static str),
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
        Shape::Dir => Route::Each { roots, path: rest },
        Shape::Leaf(_) if rest.is_root() => {
            Route::Refuse("is a spread prefix, which must be a directory; skipped")
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{p, plan};
    use super::*;

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
                Route::Each { roots: 1..4, path: SafePath(PathBuf::new()) },
            ),
            ("accounts/sub", Shape::Dir, vec![], Route::Each { roots: 1..4, path: p("sub") }),
            ("snap/big/d", Shape::Dir, vec![], Route::Each { roots: 4..6, path: p("d") }),
            (
                "accounts",
                Shape::Leaf(0),
                vec![],
                Route::Refuse("is a spread prefix, which must be a directory; skipped"),
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
