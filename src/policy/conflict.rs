//! What a member does with what is already at its path: a pure decision, from the options
//! (`-k`, `--skip-old-files`, `--keep-newer-files`, `--no-overwrite-dir`, `-U`,
//! `--recursive-unlink`, `--backup`, `--keep-directory-symlink`, `-h`) and what is there.
//! `Dest` (write/dest.rs) looks at the disk, asks `decide`, and carries the answer out. The table
//! is GNU tar 1.34's (extract.c `maybe_recoverable`, `extract_dir`, `file_newer_p`), checked
//! against it by tests/suite/dropin.rs and the differential suites; `tests` here holds it as
//! vectors.

/// What to do with a member whose path exists already (`-k`, `--skip-old-files`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldFiles {
    /// Replace it: unlink what is there (an empty directory too) and create the member (GNU
    /// tar's default). An existing directory is kept and gets the member's metadata.
    Replace,
    /// `-k`: keep it and report the member (exit 2, "Cannot open: File exists"). An existing
    /// directory is kept silently, its metadata untouched, and so is a file where a directory
    /// member goes (GNU tar 1.34: the members beneath it fail on it).
    Keep,
    /// `--skip-old-files`: keep it without a word and without changing the exit status; with
    /// -v, "MEMBER: skipping existing file" (directories too), as GNU tar 1.34.
    Skip,
    /// `--keep-newer-files`: keep a non-directory whose mtime is the same as or later than the
    /// member's ("Current 'PATH' is newer or same age", exit status unchanged), replace an
    /// older one. A directory is never newer: a directory member removes an empty one and
    /// makes it anew, keeps a non-empty one as it is (no metadata), as GNU tar 1.34.
    KeepNewer,
    /// `--no-overwrite-dir`: as Replace, but a directory that exists (before the run or made
    /// earlier in it) keeps its mode and owner; it still gets the member's mtime (GNU tar 1.34
    /// sets it).
    NoOverwriteDir,
    /// `-U`: as Replace, but an existing directory in a directory member's way is removed too
    /// (when empty; a non-empty one stays, reported) and made anew, as GNU tar 1.34.
    UnlinkFirst,
}

/// The options that decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub old_files: OldFiles,
    /// `--recursive-unlink`: a directory in the way goes with everything in it.
    pub recursive_unlink: bool,
    /// `--backup`: what would be removed is renamed out of the way instead (where backup.rs
    /// finds a name for it).
    pub backup: bool,
    /// `--keep-directory-symlink`: a symlink to a directory inside DIR stands for it.
    pub keep_dir_symlinks: bool,
    /// `-h`: a directory member kept as such a symlink gives its directory its metadata.
    pub dereference: bool,
    /// `--overwrite -h` (`writes_through`): a file member whose path holds a symlink is
    /// written into the file the symlink leads to, inside DIR.
    pub write_through: bool,
}

/// Whether a file member writes through a symlink at its path (GNU tar 1.34's extract.c
/// `open_output_file`: with `--overwrite` it opens with O_TRUNC instead of O_EXCL, and `-h`
/// drops O_NOFOLLOW; its extrac13.at). Without `--overwrite` GNU tar's O_EXCL open fails on
/// the symlink, which is removed and the file made in its place, `-h` or not; with
/// `--overwrite` alone O_NOFOLLOW fails (ELOOP) and the symlink is removed likewise. The
/// other old-file options keep what is there before the question arises.
pub fn writes_through(old_files: OldFiles, overwrite: bool, dereference: bool) -> bool {
    overwrite && dereference && old_files == OldFiles::Replace
}

impl Policy {
    /// Whether `decide` needs `There::Other::newer`: only `--keep-newer-files` compares ages
    /// (so only then is what is there stat'ed for it).
    pub fn compares_age(&self) -> bool {
        self.old_files == OldFiles::KeepNewer
    }
}

/// The member that finds its path taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Dir,
    /// A file, link or node: its creation found the name taken (EEXIST). What is there is not
    /// looked at beyond `newer`: removing it takes a file and an empty directory alike.
    Other,
}

/// What is at the member's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum There {
    /// Nothing: the directory member was made. The writers ask the table only once a
    /// creation found the name taken, so only the table's own tests give this row.
    #[cfg_attr(not(test), allow(dead_code))]
    Nothing,
    /// DIR itself (the member `./`): always there, never removed.
    Dest,
    /// A directory.
    Dir,
    /// Anything else (for `Member::Other`, whatever is there). `newer`: a non-directory whose
    /// mtime is the member's or later (asked only when `Policy::compares_age`); `dir_link`: a
    /// symlink to a directory inside DIR (asked only with `--keep-directory-symlink`).
    Other { newer: bool, dir_link: bool },
}

/// What `Dest` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing was in the way: the member is made (a directory: already made).
    Create,
    /// `-k`: the member fails, EEXIST ("Cannot open: File exists"), exit 2.
    Refuse,
    /// `--skip-old-files`: what is there stays; with -v the member is named.
    Skip,
    /// `--keep-newer-files`: what is there is as new as the member or newer, and stays.
    KeepNewer,
    /// What is there stays, silently, and the member changes nothing.
    Leave,
    /// What is there goes: renamed to its backup name (`backup`, where backup.rs finds one),
    /// else removed (a directory only when empty, unless `recursive`); then the member is made.
    Replace { backup: bool, recursive: bool },
    /// A directory member: the directory there is the member's, and gets its metadata (with
    /// `keep_mode`, `--no-overwrite-dir`, its mode and owner stay).
    Reuse { keep_mode: bool },
    /// A directory member, `-U` or `--recursive-unlink`: the directory there is removed (with
    /// what is in it when `recursive`; else only when empty, and the member fails) and made
    /// anew.
    Remake { recursive: bool },
    /// A directory member, `--keep-newer-files`: the directory there is removed and made anew
    /// when it is empty, else it stays as it is, its metadata too.
    RemakeIfEmpty,
}

/// The decision for `member` finding `there` at its path.
pub fn decide(p: &Policy, member: Member, there: There) -> Decision {
    use Decision::*;
    match (member, there) {
        (_, There::Nothing) => Create,
        (Member::Other, There::Other { newer, .. }) => clear(p, newer, p.recursive_unlink),
        // A non-directory member does not tell a directory from a file (`Member::Other`).
        (Member::Other, There::Dir | There::Dest) => clear(p, false, p.recursive_unlink),
        (Member::Dir, There::Dest) => existing_dir(p),
        (Member::Dir, There::Other { dir_link: true, .. }) if p.keep_dir_symlinks => {
            // The symlink stays; with -h the directory it leads to is the member's.
            if p.dereference { existing_dir(p) } else { Leave }
        }
        // `-k`: GNU tar 1.34's extract_dir takes the EEXIST of its mkdir as nothing to say
        // (`maybe_recoverable` keeps the file): the file stays, the member is passed over
        // without a word, and the members beneath it fail on it ("Not a directory").
        (Member::Dir, There::Other { .. }) if p.old_files == OldFiles::Keep => Leave,
        (Member::Dir, There::Other { newer, .. }) => clear(p, newer, false),
        (Member::Dir, There::Dir) => match p.old_files {
            _ if p.recursive_unlink => Remake { recursive: true },
            OldFiles::UnlinkFirst => Remake { recursive: false },
            OldFiles::KeepNewer => RemakeIfEmpty,
            _ => existing_dir(p),
        },
    }
}

/// Something the member would replace: kept under `-k`, `--skip-old-files`, or
/// `--keep-newer-files` when `newer`; otherwise moved out of the way.
fn clear(p: &Policy, newer: bool, recursive: bool) -> Decision {
    match p.old_files {
        OldFiles::Keep => Decision::Refuse,
        OldFiles::Skip => Decision::Skip,
        OldFiles::KeepNewer if newer => Decision::KeepNewer,
        _ => Decision::Replace { backup: p.backup, recursive },
    }
}

/// A directory that stays the member's: with `-k` and `--keep-newer-files` untouched (GNU tar
/// 1.34 sets no mode, owner or time), skipped with `--skip-old-files`, else given the
/// member's metadata.
fn existing_dir(p: &Policy) -> Decision {
    match p.old_files {
        OldFiles::Keep | OldFiles::KeepNewer => Decision::Leave,
        OldFiles::Skip => Decision::Skip,
        OldFiles::NoOverwriteDir => Decision::Reuse { keep_mode: true },
        OldFiles::Replace | OldFiles::UnlinkFirst => Decision::Reuse { keep_mode: false },
    }
}

#[cfg(test)]
mod tests {
    use super::Decision as D;
    use super::OldFiles as O;
    use super::*;

    const ALL: [OldFiles; 6] =
        [O::Replace, O::Keep, O::Skip, O::KeepNewer, O::NoOverwriteDir, O::UnlinkFirst];

    fn policy(old_files: OldFiles) -> Policy {
        Policy {
            old_files,
            recursive_unlink: false,
            backup: false,
            keep_dir_symlinks: false,
            dereference: false,
            write_through: false,
        }
    }

    /// `--overwrite -h` writes through a symlink at a file member's path; nothing else does.
    #[test]
    fn only_overwrite_with_dereference_writes_through() {
        for old in ALL {
            for (overwrite, deref) in [(false, false), (false, true), (true, false), (true, true)] {
                // clap refuses --overwrite with the other old-file options.
                let want = overwrite && deref && old == O::Replace;
                assert_eq!(
                    writes_through(old, overwrite, deref),
                    want,
                    "{old:?} {overwrite} {deref}"
                );
            }
        }
    }

    const FILE: There = There::Other { newer: false, dir_link: false };
    const NEWER: There = There::Other { newer: true, dir_link: false };
    const DIR_LINK: There = There::Other { newer: false, dir_link: true };
    const REPLACE: Decision = D::Replace { backup: false, recursive: false };
    const REUSE: Decision = D::Reuse { keep_mode: false };
    const KEEP_MODE: Decision = D::Reuse { keep_mode: true };

    /// Each row: the option, then the decision for each of `there` (GNU tar 1.34's behaviour,
    /// which tests/suite/dropin.rs checks end to end).
    #[test]
    fn a_file_member() {
        let there = [FILE, NEWER, There::Dir];
        let rows: [(OldFiles, [Decision; 3]); 6] = [
            (O::Replace, [REPLACE, REPLACE, REPLACE]),
            (O::Keep, [D::Refuse, D::Refuse, D::Refuse]),
            (O::Skip, [D::Skip, D::Skip, D::Skip]),
            (O::KeepNewer, [REPLACE, D::KeepNewer, REPLACE]),
            (O::NoOverwriteDir, [REPLACE, REPLACE, REPLACE]),
            (O::UnlinkFirst, [REPLACE, REPLACE, REPLACE]),
        ];
        for (old, want) in rows {
            for (t, w) in there.iter().zip(want) {
                assert_eq!(decide(&policy(old), Member::Other, *t), w, "{old:?} {t:?}");
            }
        }
    }

    #[test]
    fn a_directory_member() {
        let there = [There::Nothing, There::Dest, There::Dir, FILE, NEWER, DIR_LINK];
        let rows: [(OldFiles, [Decision; 6]); 6] = [
            (O::Replace, [D::Create, REUSE, REUSE, REPLACE, REPLACE, REPLACE]),
            (O::Keep, [D::Create, D::Leave, D::Leave, D::Leave, D::Leave, D::Leave]),
            (O::Skip, [D::Create, D::Skip, D::Skip, D::Skip, D::Skip, D::Skip]),
            (O::KeepNewer, [D::Create, D::Leave, D::RemakeIfEmpty, REPLACE, D::KeepNewer, REPLACE]),
            (O::NoOverwriteDir, [D::Create, KEEP_MODE, KEEP_MODE, REPLACE, REPLACE, REPLACE]),
            (
                O::UnlinkFirst,
                [D::Create, REUSE, D::Remake { recursive: false }, REPLACE, REPLACE, REPLACE],
            ),
        ];
        for (old, want) in rows {
            for (t, w) in there.iter().zip(want) {
                assert_eq!(decide(&policy(old), Member::Dir, *t), w, "{old:?} {t:?}");
            }
        }
    }

    /// `--recursive-unlink` removes a directory in the way with what is in it, whatever the
    /// old-files option (even before `-k` keeps it, as GNU tar unlinks first); DIR itself
    /// stays.
    #[test]
    fn recursive_unlink() {
        for old in ALL {
            let p = Policy { recursive_unlink: true, ..policy(old) };
            let plain = |member, there| decide(&policy(old), member, there);
            assert_eq!(decide(&p, Member::Dir, There::Dir), D::Remake { recursive: true });
            assert_eq!(decide(&p, Member::Dir, There::Dest), plain(Member::Dir, There::Dest));
            let want = match old {
                O::Keep => D::Refuse,
                O::Skip => D::Skip,
                _ => D::Replace { backup: false, recursive: true },
            };
            assert_eq!(decide(&p, Member::Other, FILE), want, "{old:?}");
            // A directory member replaces a non-directory, which needs no recursion.
            assert_eq!(decide(&p, Member::Dir, FILE), plain(Member::Dir, FILE), "{old:?}");
        }
    }

    /// `--backup` renames instead of removing, wherever something would be replaced.
    #[test]
    fn backup() {
        for old in ALL {
            for member in [Member::Dir, Member::Other] {
                for there in [There::Nothing, There::Dest, There::Dir, FILE, NEWER, DIR_LINK] {
                    let plain = decide(&policy(old), member, there);
                    let backed = decide(&Policy { backup: true, ..policy(old) }, member, there);
                    let want = match plain {
                        D::Replace { recursive, .. } => D::Replace { backup: true, recursive },
                        other => other,
                    };
                    assert_eq!(backed, want, "{old:?} {member:?} {there:?}");
                }
            }
        }
    }

    /// `--keep-directory-symlink`: a symlink to a directory stays and the member changes
    /// nothing; with `-h` the directory it leads to is the member's, as DIR itself would be.
    /// Without the option the symlink is replaced like a file, and a file member always
    /// replaces it.
    #[test]
    fn directory_symlinks() {
        for old in ALL {
            let plain = |member, there| decide(&policy(old), member, there);
            let kept = Policy { keep_dir_symlinks: true, ..policy(old) };
            assert_eq!(decide(&kept, Member::Dir, DIR_LINK), D::Leave, "{old:?}");
            let deref = Policy { dereference: true, ..kept };
            assert_eq!(decide(&deref, Member::Dir, DIR_LINK), plain(Member::Dir, There::Dest));
            assert_eq!(plain(Member::Dir, DIR_LINK), plain(Member::Dir, FILE), "{old:?}");
            assert_eq!(decide(&kept, Member::Other, DIR_LINK), plain(Member::Other, FILE));
        }
    }

    #[test]
    fn only_keep_newer_compares_ages() {
        for old in ALL {
            assert_eq!(policy(old).compares_age(), old == O::KeepNewer);
            if old != O::KeepNewer {
                for member in [Member::Dir, Member::Other] {
                    let p = policy(old);
                    assert_eq!(decide(&p, member, NEWER), decide(&p, member, FILE), "{old:?}");
                }
            }
        }
    }
}
