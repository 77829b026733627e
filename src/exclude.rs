//! `--exclude PATTERN` with GNU tar's defaults for exclusion: shell wildcards where `*` also
//! matches `/`, unanchored (the pattern may match after any `/` in the name), and a match on a
//! leading directory excludes everything beneath it.

use std::ffi::CString;

/// FNM_LEADING_DIR from glibc's <fnmatch.h>: "PATTERN matches a leading dir of STRING".
const FNM_LEADING_DIR: libc::c_int = 1 << 3;

#[derive(Default)]
pub struct Exclude {
    patterns: Vec<CString>,
}

impl Exclude {
    pub fn new(patterns: &[String]) -> anyhow::Result<Exclude> {
        let patterns = patterns
            .iter()
            .map(|p| {
                CString::new(p.as_str())
                    .map_err(|_| anyhow::anyhow!("--exclude pattern contains a NUL byte"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Exclude { patterns })
    }

    /// True when the member name (as in the archive, leading `/` and `./` ignored) is excluded.
    pub fn excludes(&self, name: &[u8]) -> bool {
        if self.patterns.is_empty() {
            return false;
        }
        // GNU tar matches a directory's name without its trailing '/'.
        let mut name = name;
        while let Some(rest) = name.strip_suffix(b"/") {
            name = rest;
        }
        loop {
            if let Some(rest) = name.strip_prefix(b"/") {
                name = rest;
            } else if let Some(rest) = name.strip_prefix(b"./") {
                name = rest;
            } else {
                break;
            }
        }
        let Ok(full) = CString::new(name) else { return false };
        let bytes = full.as_bytes_with_nul();
        // Every suffix that starts the name or follows a '/'.
        let starts = std::iter::once(0)
            .chain(bytes.iter().enumerate().filter(|(_, b)| **b == b'/').map(|(i, _)| i + 1));
        for start in starts {
            let tail = &bytes[start..];
            if tail.len() <= 1 {
                continue;
            }
            for p in &self.patterns {
                // Safety: both are NUL-terminated (tail is a suffix of a CString's bytes with its NUL).
                if unsafe { libc::fnmatch(p.as_ptr(), tail.as_ptr().cast(), FNM_LEADING_DIR) } == 0
                {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gnu_like_matching() {
        let e = Exclude::new(&["*.o".into(), "cache".into(), "a/b".into()]).unwrap();
        assert!(e.excludes(b"x.o"));
        assert!(e.excludes(b"dir/sub/x.o"));
        assert!(e.excludes(b"cache"));
        assert!(e.excludes(b"cache/file"));
        assert!(e.excludes(b"top/cache/file"));
        assert!(e.excludes(b"./a/b/c"));
        assert!(!e.excludes(b"cachex"));
        assert!(!e.excludes(b"x.c"));
        assert!(!e.excludes(b"a/bc"));
        // A directory entry is matched without its trailing '/', as GNU tar does.
        let inside = Exclude::new(&["*/cache/*".into()]).unwrap();
        assert!(!inside.excludes(b"top/cache/"));
        assert!(inside.excludes(b"top/cache/f"));
        assert!(!Exclude::default().excludes(b"x"));
    }
}
