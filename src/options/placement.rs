//! The spreads asked for (`Spreading`: `--spread PREFIX=DIR1,DIR2,...`, `Restore::spread`)
//! into the run's `Placement` (policy/route.rs). Pure but for the current directory, which a
//! relative DIR is taken from (as `-C`'s is).
//!
//! One PREFIX each: a snapshot needs one (`accounts/`), and a second costs the router nothing.
//! Refused, each with one line naming the spread as `--spread` spells it: an empty or `..`
//! PREFIX, a PREFIX
//! under another, an empty DIR, a DIR given twice, a DIR that is, holds or lies in another
//! root or DIR (where both would write the same names), and more roots than MAX_ROOTS. A root
//! inside DIR is allowed only where DIR's own tree would have put PREFIX (`-C /ledger
//! --spread accounts=/ledger/accounts,/mnt/b/accounts`): no member of DIR's lands there,
//! since every member under PREFIX is spread and a non-directory named PREFIX is refused.
//! Paths are compared as written, made absolute and with `.` and `..` folded; a symlink that
//! makes two of them one directory is not seen through.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};

use super::Spreading;
use crate::command::Plans;
use crate::policy::route::{MAX_ROOTS, Placement, Routed, Rule, Spread};
use crate::policy::safety::SafePath;

/// The spreads given, against DIR (`dest`).
pub(super) fn placement(given: &[Spreading], dest: &Path) -> Result<Placement> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    resolve(given, dest, &cwd)
}

fn resolve(given: &[Spreading], dest: &Path, cwd: &Path) -> Result<Placement> {
    let dest = absolute(dest, cwd);
    let mut plan = Placement::default();
    let mut seen: Vec<PathBuf> = Vec::new();
    for spreading in given {
        let dirs: Vec<String> =
            spreading.roots.iter().map(|r| r.to_string_lossy().into_owned()).collect();
        let value = format!("{}={}", spreading.prefix, dirs.join(","));
        let fail = |why: String| anyhow::anyhow!("--spread '{value}': {why}");
        let prefix = prefix_path(&spreading.prefix).map_err(|w| fail(w.into()))?;
        if let Some(other) = plan.spreads.iter().find(|s| {
            s.prefix.as_path().starts_with(prefix.as_path())
                || prefix.as_path().starts_with(s.prefix.as_path())
        }) {
            let other = other.prefix.as_path().display();
            return Err(fail(format!("PREFIX overlaps another --spread's ({other}/)")));
        }
        let mut roots = Vec::new();
        for dir in &dirs {
            if dir.is_empty() {
                return Err(fail("an empty DIR (DIRs are separated by single commas)".into()));
            }
            let root = absolute(Path::new(dir), cwd);
            if root == dest || dest.starts_with(&root) {
                return Err(fail(format!("{dir} holds DIR ({})", dest.display())));
            }
            if root.starts_with(&dest) && root != dest.join(prefix.as_path()) {
                return Err(fail(format!(
                    "{dir} lies in DIR, where members of DIR's own would land: give a \
                     directory outside DIR, or DIR/{} itself",
                    prefix.as_path().display()
                )));
            }
            if let Some(other) = seen.iter().find(|o| o.starts_with(&root) || root.starts_with(o)) {
                let what = if *other == root { "is given twice" } else { "overlaps another root" };
                return Err(fail(format!("{dir} {what} ({})", other.display())));
            }
            seen.push(root.clone());
            roots.push(root);
        }
        if 1 + seen.len() > MAX_ROOTS {
            return Err(fail(format!("more than {} roots in all", MAX_ROOTS - 1)));
        }
        plan.spreads.push(Spread { prefix, roots });
    }
    Ok(plan)
}

/// A library caller's routing (`Restore::route`, `Restore::roots`) put into resolved `plans`:
/// the roots checked against DIR, the writers' placement, the roots the resume points sync,
/// and the resume digest (which records that a callback routes and over which roots; its
/// rule it cannot). Not with `--spread`: the callback places every member.
pub(super) fn route(plans: &mut Plans, roots: &[PathBuf], rule: Arc<Rule>) -> Result<()> {
    if !plans.writer.placement.spreads.is_empty() {
        bail!(
            "spread and route cannot be used together: the routing callback places every \
             member (spread by a rule of your own in it)"
        );
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let routed = routed(roots, &plans.writer.dest, &cwd, rule)?;
    let placement = &mut plans.writer.placement;
    placement.routed = Some(routed);
    plans.resume.roots = placement.roots().cloned().collect();
    plans.resume.options = crate::resume::options::with_placement(plans.resume.options, placement);
    Ok(())
}

/// The roots of a routing, numbered from 1, against DIR (`dest`): refused, each in one line,
/// an empty one, one that is or holds DIR, one given twice or lying in another, more than
/// MAX_ROOTS in all. A root inside DIR is allowed (a validator's account paths often lie
/// under its ledger directory); the router keeps DIR's members out of it (route.rs `in_dir`).
fn routed(roots: &[PathBuf], dest: &Path, cwd: &Path, rule: Arc<Rule>) -> Result<Routed> {
    let dest = absolute(dest, cwd);
    if 1 + roots.len() > MAX_ROOTS {
        bail!("roots: more than {} roots", MAX_ROOTS - 1);
    }
    let (mut seen, mut inside): (Vec<PathBuf>, _) = (Vec::new(), Vec::new());
    for (i, given) in roots.iter().enumerate() {
        let fail = |why: String| anyhow!("roots: {}: {why}", given.display());
        if given.as_os_str().is_empty() {
            return Err(fail("an empty path".into()));
        }
        let root = absolute(given, cwd);
        if root == dest || dest.starts_with(&root) {
            return Err(fail(format!("is or holds the destination ({})", dest.display())));
        }
        if let Some(other) = seen.iter().find(|o| o.starts_with(&root) || root.starts_with(o)) {
            let what = if *other == root { "is given twice" } else { "overlaps another root" };
            return Err(fail(format!("{what} ({})", other.display())));
        }
        if let Ok(rel) = root.strip_prefix(&dest) {
            inside.push((i + 1, SafePath(rel.to_path_buf())));
        }
        seen.push(root);
    }
    Ok(Routed { roots: seen, inside, rule })
}

/// PREFIX as plain components (`/` and `.` dropped, as member names are).
fn prefix_path(given: &str) -> Result<SafePath, &'static str> {
    let mut p = PathBuf::new();
    for c in given.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("PREFIX may not hold '..'"),
            c => p.push(c),
        }
    }
    if p.as_os_str().is_empty() {
        return Err("an empty PREFIX (every member would be spread: give DIRs to -C instead)");
    }
    Ok(SafePath(p))
}

/// `p` from `cwd`, with `.` and `..` folded as written.
fn absolute(p: &Path, cwd: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(p).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spreads(given: &[&str]) -> Result<Vec<(String, Vec<String>)>, String> {
        // As the command line splits `--spread`'s value (cli/resolve/writer.rs `spreads`).
        let given: Vec<Spreading> = given
            .iter()
            .map(|v| v.split_once('=').expect("PREFIX=DIRS"))
            .map(|(prefix, dirs)| Spreading {
                prefix: prefix.into(),
                roots: dirs.split(',').map(PathBuf::from).collect(),
            })
            .collect();
        resolve(&given, Path::new("ledger"), Path::new("/w"))
            .map(|p| {
                p.spreads
                    .into_iter()
                    .map(|s| {
                        let roots = s.roots.iter().map(|r| r.display().to_string()).collect();
                        (s.prefix.as_path().display().to_string(), roots)
                    })
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn values_resolve_or_are_refused_in_one_line() {
        let ok = |prefix: &str, roots: &[&str]| {
            Ok(vec![(prefix.to_string(), roots.iter().map(|r| r.to_string()).collect())])
        };
        assert_eq!(spreads(&["accounts/=/a,/b"]), ok("accounts", &["/a", "/b"]));
        assert_eq!(spreads(&["./accounts//=/a"]), ok("accounts", &["/a"]));
        assert_eq!(spreads(&["/x/y=/a,rel/b"]), ok("x/y", &["/a", "/w/rel/b"]));
        // DIR/PREFIX itself may be a root.
        assert_eq!(
            spreads(&["accounts=/w/ledger/accounts,/b"]),
            ok("accounts", &["/w/ledger/accounts", "/b"])
        );
        let two = spreads(&["accounts=/a", "snaps=/b,/c"]).unwrap();
        assert_eq!(two.len(), 2);
        for (given, says) in [
            (&["=/a"][..], "an empty PREFIX"),
            (&["/=/a"], "an empty PREFIX"),
            (&["a/../b=/a"], "may not hold '..'"),
            (&["a=/x,,/y"], "an empty DIR"),
            (&["a="], "an empty DIR"),
            (&["a=/x,/x"], "/x is given twice"),
            (&["a=/x,/x/y"], "overlaps another root"),
            (&["a=/x", "b=/x/"], "is given twice"),
            (&["a=/x", "a/b=/y"], "overlaps another --spread's (a/)"),
            (&["a/b=/x", "a=/y"], "overlaps another --spread's"),
            (&["a=/w/ledger"], "holds DIR"),
            (&["a=/w"], "holds DIR"),
            (&["a=ledger/../ledger"], "holds DIR"),
            (&["a=/w/ledger/b"], "lies in DIR"),
        ] {
            let got = spreads(given).expect_err(&format!("{given:?}"));
            assert!(got.contains(says), "{given:?}: {got}");
            assert!(got.starts_with("--spread '"), "{got}");
            assert!(!got.contains('\n'), "{got}");
        }
        let many: Vec<String> = (0..MAX_ROOTS).map(|i| format!("/r{i}")).collect();
        let too_many = format!("a={}", many.join(","));
        assert!(spreads(&[&too_many]).unwrap_err().contains("more than 63 roots"));
    }

    /// A routing callback's roots: absolute from the current directory, numbered from 1,
    /// those inside DIR noted; refused in one line as `--spread`'s DIRs are.
    #[test]
    fn routed_roots_resolve_or_are_refused_in_one_line() {
        use crate::policy::route::Answer;
        let rule: Arc<Rule> = Arc::new(|_: &Path, _| Answer::Skip);
        let roots = |given: &[&str]| {
            let given: Vec<PathBuf> = given.iter().map(PathBuf::from).collect();
            routed(&given, Path::new("ledger"), Path::new("/w"), rule.clone())
                .map(|r| (r.roots, r.inside))
                .map_err(|e| e.to_string())
        };
        let (got, inside) = roots(&["/a", "b/./c", "ledger/acc", "/w/ledger/x/../y"]).unwrap();
        let want: Vec<PathBuf> =
            ["/a", "/w/b/c", "/w/ledger/acc", "/w/ledger/y"].iter().map(PathBuf::from).collect();
        assert_eq!(got, want);
        let p = |s: &str| SafePath(PathBuf::from(s));
        assert_eq!(inside, vec![(3, p("acc")), (4, p("y"))]);
        assert_eq!(roots(&[]).unwrap().0, Vec::<PathBuf>::new());
        for (given, says) in [
            (&[""][..], "an empty path"),
            (&["/w/ledger"], "is or holds the destination"),
            (&["ledger/."], "is or holds the destination"),
            (&["/w"], "is or holds the destination"),
            (&["/a", "/a/"], "/a/: is given twice (/a)"),
            (&["/a", "/a/b"], "overlaps another root"),
            (&["/a/b", "/a"], "overlaps another root"),
        ] {
            let got = roots(given).expect_err(&format!("{given:?}"));
            assert!(got.contains(says), "{given:?}: {got}");
            assert!(got.starts_with("roots: "), "{got}");
        }
        let many: Vec<String> = (0..MAX_ROOTS).map(|i| format!("/r{i}")).collect();
        let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
        assert!(roots(&many).unwrap_err().contains("more than 63 roots"));
        assert!(roots(&many[1..]).is_ok());
    }
}
