//! `--xattrs`, `--xattrs-include`, `--xattrs-exclude`: which of a member's extended attributes
//! are restored. GNU tar 1.34's rule (xattrs.c `xattrs_kw_included`, `xattrs_kw_excluded`):
//! with include patterns, an attribute must match one of them; without, only the `user.`
//! namespace is restored (root included); an attribute matching an exclude pattern is not.
//! Patterns are glibc fnmatch(3) patterns with no flags, over the whole name: `*` matches
//! dots, case counts, `\` quotes.

use std::ffi::CString;
use std::sync::Arc;

use anyhow::{Result, bail};

use crate::archive::Xattr;

#[derive(Clone, Debug)]
pub struct XattrFilter {
    include: Vec<CString>,
    exclude: Vec<CString>,
}

impl XattrFilter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<XattrFilter> {
        let c = |list: &[String], flag: &str| -> Result<Vec<CString>> {
            list.iter()
                .map(|p| match CString::new(p.as_bytes()) {
                    Ok(c) => Ok(c),
                    Err(_) => bail!("{flag}: a pattern holds a NUL byte"),
                })
                .collect()
        };
        Ok(XattrFilter {
            include: c(include, "--xattrs-include")?,
            exclude: c(exclude, "--xattrs-exclude")?,
        })
    }

    /// Whether the attribute `name` is restored.
    pub fn wants(&self, name: &[u8]) -> bool {
        // A name holding a NUL matches nothing (the kernel could not take it either).
        let Ok(name) = CString::new(name) else { return false };
        let matches = |patterns: &[CString]| {
            // Safety: both are valid C strings.
            patterns.iter().any(|p| unsafe { libc::fnmatch(p.as_ptr(), name.as_ptr(), 0) } == 0)
        };
        let included = if self.include.is_empty() {
            name.as_bytes().starts_with(b"user.")
        } else {
            matches(&self.include)
        };
        included && !matches(&self.exclude)
    }

    /// The member's attributes to restore, in archive order; None when there are none (no
    /// allocation for a member without attributes).
    pub fn select(&self, list: Vec<Xattr>) -> Option<Arc<[Xattr]>> {
        if list.is_empty() {
            return None;
        }
        let kept: Vec<Xattr> = list.into_iter().filter(|x| self.wants(&x.name)).collect();
        (!kept.is_empty()).then(|| kept.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(include: &[&str], exclude: &[&str]) -> XattrFilter {
        let s = |l: &[&str]| l.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        XattrFilter::new(&s(include), &s(exclude)).unwrap()
    }

    #[test]
    fn gnu_rules() {
        // Without include patterns: user.* only.
        let d = f(&[], &[]);
        assert!(d.wants(b"user.a"));
        assert!(!d.wants(b"trusted.a") && !d.wants(b"security.capability"));
        assert!(!d.wants(b"user") && !d.wants(b"USER.a"));
        let all = f(&["*"], &[]);
        assert!(all.wants(b"trusted.a") && all.wants(b"com.apple.quarantine"));
        let cap = f(&["security.capability"], &[]);
        assert!(cap.wants(b"security.capability") && !cap.wants(b"security.selinux"));
        assert!(!cap.wants(b"user.a"));
        let two = f(&["trusted.*", "user.a"], &["*bin"]);
        assert!(two.wants(b"trusted.x") && two.wants(b"user.a") && !two.wants(b"user.b"));
        assert!(!two.wants(b"trusted.bin"));
        assert!(!f(&[], &["user.a"]).wants(b"user.a"));
        assert!(f(&[], &["user.a"]).wants(b"user.ab"));
        assert!(f(&["user.[ab]*"], &[]).wants(b"user.bin"));
        assert!(f(&["user\\.a"], &[]).wants(b"user.a"));
        assert!(!d.wants(b"user.a\0b"));
    }
}
