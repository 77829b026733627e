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

use anyhow::Result;

use super::Spreading;
use crate::policy::route::{MAX_ROOTS, Placement, Spread};
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
        // As the command line splits `--spread`'s value (cli/resolve.rs `spreads`).
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
}
