//! `-G`: before a directory member of an incremental archive, the directories its list says
//! were renamed are renamed, and whatever the directory holds that the list does not name is
//! removed (GNU tar 1.34's `purge_directory`). The list was checked and its paths made safe on
//! the decoder side (`incremental.rs`); this runs in archive order with nothing in flight
//! (the io_uring writer drains, the dispatcher of several writers waits for all of them), so
//! no member races it, and every writer's directory cache forgets what it removes or moves.
//!
//! As in GNU tar: a directory that is not there is left alone, renames included (one that
//! cannot be opened, a file or a symlink, is reported, exit 2); a malformed list, or a rename that fails, stops that directory's purge (reported,
//! exit 2, the run goes on); what is removed is what the directory held before the renames,
//! looked at again (not followed if a symlink) when it is removed: a name the list does not
//! have, a directory where the list has a file ('Y'), a non-directory where it has a directory
//! ('D'). Removal is recursive (GNU tar's `remove_any_file` with RECURSIVE_REMOVE_OPTION),
//! through directory fds opened beneath DIR, so nothing outside it is touched. With -v each
//! removal is named on stdout (`fastuntar: Deleting 'src/f'`), with `--one-file-system`
//! nothing on another filesystem than DIR's is removed. The directories a purge makes (the
//! temporary one of a swap, a rename's missing parents) count against `--max-files`, whose
//! refusal stops the run as anywhere else.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use anyhow::Result;

use super::dest::{Dest, Removed, cstr_io, empty_tree, fstat, fstatat_nofollow};
use super::events::Event;
use super::names_in;
use super::outcome::MemberError;
use super::restart;
use crate::plan::Entry;
use crate::policy::incremental::{Dumpdir, Move};
use crate::policy::safety::SafePath;
use crate::report;

/// The letter the list gives each name the directory holds (`Y`, `N`, `D`; 0: not listed),
/// found in one pass over the list: memory as the directory's own names. The first entry for
/// a name counts.
fn letters<'a>(names: &'a [CString], list: &[u8]) -> HashMap<&'a [u8], u8> {
    let mut letters: HashMap<&[u8], u8> = names.iter().map(|n| (n.as_bytes(), 0)).collect();
    for e in crate::policy::incremental::entries(list) {
        if let (b'Y' | b'N' | b'D', Some(l)) = (e[0], letters.get_mut(&e[1..]))
            && *l == 0
        {
            *l = e[0];
        }
    }
    letters
}

/// Whether a name the directory holds stays, by the letter the list gives it (GNU tar 1.34's
/// `purge_directory`): `D` keeps a directory, `Y` a non-directory, `N` either; what the list
/// does not name goes.
fn stays(letter: u8, is_dir: bool) -> bool {
    match letter {
        b'D' => is_dir,
        b'Y' => !is_dir,
        0 => false,
        _ => true,
    }
}

impl Dest {
    /// Carries out `list`'s renames and removals in the directory member `entry` names (its
    /// `Dir` op comes next). Problems are reported here, and stop only this directory's
    /// purge; Err only when `--max-files` refuses a directory it would make (the run stops).
    pub fn purge(&mut self, entry: &Entry, list: &Dumpdir) -> Result<()> {
        // What it holds now, before the renames (GNU tar's `savedir`). Not there: nothing to
        // purge. Not a directory, or not to be opened (a symlink, which GNU tar's opendir does
        // not follow either): reported, exit 2, as GNU tar's "Cannot open".
        let listed = self
            .dir(entry.path.components(), false)
            .and_then(|(_, dir)| Ok(names_in(dir.as_raw_fd())?));
        let names = match listed {
            Ok(names) => names,
            Err(MemberError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => {
                let why = match self.type_at(&entry.path) == Some(libc::S_IFLNK) {
                    true => format!("'{}' is a symlink; not followed", entry.path.display()),
                    false => self.explain(&entry.path, e).to_string(),
                };
                self.failed(&entry.name, &format!("cannot purge: {why}"));
                return Ok(());
            }
        };
        if let Some(why) = &list.malformed {
            self.failed(&entry.name, why);
            return Ok(());
        }
        if !self.moves(entry, &list.moves)? {
            return Ok(());
        }
        // Looked up again: a rename may have moved what the path named.
        let Ok((_, dir)) = self.dir(entry.path.components(), false) else { return Ok(()) };
        let root_dev = match self.one_file_system() {
            true => fstat(self.root_fd()).ok().map(|st| st.st_dev),
            false => None,
        };
        if list.unused_temp {
            self.warned(&format!("{}: Malformed dumpdir: 'X' never used", entry.name));
        }
        let letters = letters(&names, &list.list);
        self.remove_unlisted(entry, dir.as_raw_fd(), &names, &letters, root_dev);
        Ok(())
    }

    /// `-G`'s `name` failed for `why`: said, and the run exits 2.
    fn failed(&self, name: &str, why: &str) {
        self.events().event(Event::Failed { name, why });
    }

    fn warned(&self, what: &str) {
        self.events().event(Event::Warned { what });
    }

    /// Removes what the directory `dir` (member `entry`'s) holds and the list does not keep
    /// (`stays`), each said (`Event::Deleting`) and any failure reported. With
    /// `--one-file-system` (`root_dev`) nothing on another device is removed.
    fn remove_unlisted(
        &mut self,
        entry: &Entry,
        dir: RawFd,
        names: &[CString],
        letters: &HashMap<&[u8], u8>,
        root_dev: Option<libc::dev_t>,
    ) {
        // As GNU tar names what it removes: `src/f`, `./src/f` for `./src/`, `./f` for `./`.
        let shown = format!("{}/", entry.shown_path());
        for name in names {
            let bytes = name.as_bytes();
            let what = format!("{shown}{}", report::printable(bytes));
            let st = match fstatat_nofollow(dir, name) {
                Ok(st) => st,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => {
                    self.failed(&what, &format!("Cannot stat: {e}"));
                    self.warned(&format!("{what}: Not purging directory: unable to stat"));
                    continue;
                }
            };
            let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            if stays(letters.get(bytes).copied().unwrap_or(0), is_dir) {
                continue;
            }
            if root_dev.is_some_and(|d| d != st.st_dev) {
                self.warned(&format!("{what}: directory is on a different device: not purging"));
                continue;
            }
            self.events().event(Event::Deleting { path: &what });
            if let Err(e) = remove_all(dir, name) {
                self.failed(&what, &format!("Cannot remove: {e}"));
            }
            if is_dir {
                let child = entry.path.as_path().join(std::ffi::OsStr::from_bytes(bytes));
                self.tree().detach(child.components().map(|c| c.as_os_str().as_bytes()));
            }
        }
    }

    /// The renames, in order; false (reported) at the first that fails, as GNU tar stops; Err
    /// when `--max-files` refuses a directory one would make.
    fn moves(&mut self, entry: &Entry, moves: &[Move]) -> Result<bool> {
        let mut temp: Option<SafePath> = None;
        let fatal = |e: &MemberError| -> Result<()> {
            match e {
                MemberError::TooManyFiles(_) => Err(anyhow::anyhow!("{}: {e}", entry.name)),
                _ => Ok(()),
            }
        };
        for m in moves {
            match m {
                Move::TempDir(parent) => match self.temp_dir(parent) {
                    Ok(t) => temp = Some(t),
                    Err(e) => {
                        fatal(&e)?;
                        let template = format!("{}/tar.XXXXXX", parent.display());
                        self.failed(
                            &entry.name,
                            &format!(
                                "Cannot create temporary directory using template '{template}': {e}"
                            ),
                        );
                        return Ok(false);
                    }
                },
                Move::Rename { from, to } => {
                    let (Some(from), Some(to)) =
                        (from.as_ref().or(temp.as_ref()), to.as_ref().or(temp.as_ref()))
                    else {
                        // The check on the decoder side lets no empty name through without
                        // an 'X' before it.
                        self.failed(&entry.name, "Malformed dumpdir: no temporary directory");
                        return Ok(false);
                    };
                    if let Err(e) = self.rename_dir(from, to) {
                        fatal(&e)?;
                        self.failed(
                            &entry.name,
                            &format!(
                                "Cannot rename '{}' to '{}': {e}",
                                from.display(),
                                to.display()
                            ),
                        );
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Renames the directory `from` to `to` (both beneath DIR, never through a symlink),
    /// making `to`'s missing parents as GNU tar does.
    fn rename_dir(&mut self, from: &SafePath, to: &SafePath) -> Result<(), MemberError> {
        let (_, src) = self.dir(from.parent_components(), false)?;
        let src_name = cstr_io(from.file_name())?;
        let dst = self.slot(to)?;
        // Safety: both fds are open directories, both names valid C strings.
        let r = restart(|| unsafe {
            libc::renameat(src.as_raw_fd(), src_name.as_ptr(), dst.dirfd(), dst.name.as_ptr())
        });
        if r != 0 {
            return Err(io::Error::last_os_error().into());
        }
        self.tree().detach(from.components());
        self.tree().detach(to.components());
        Ok(())
    }

    /// Makes `parent/tar.XXXXXX` (mode 0700, a name not taken) and returns its path. It counts
    /// against `--max-files` like any directory made (a list of 20,000 swaps once made 20,000
    /// of them under `--max-files 10`).
    fn temp_dir(&mut self, parent: &SafePath) -> Result<SafePath, MemberError> {
        let (_, dir) = self.dir(parent.components(), false)?;
        let files = self.files.clone();
        files.take_dir()?;
        for _ in 0..100 {
            let name = format!("tar.{}", random_suffix());
            let c = CString::new(name.as_bytes()).expect("no NUL");
            // Safety: an open directory fd and a valid C string.
            if restart(|| unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) }) == 0 {
                return Ok(SafePath(parent.as_path().join(name)));
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                files.give_back();
                return Err(e.into());
            }
        }
        files.give_back();
        Err(io::Error::from_raw_os_error(libc::EEXIST).into())
    }
}

/// Removes `name` in `dir`, with everything in it if it is a directory.
fn remove_all(dir: libc::c_int, name: &CString) -> io::Result<()> {
    match super::dest::remove_entry(dir, name)? {
        Removed::Entry | Removed::Dir => Ok(()),
        Removed::Full(_) => empty_tree(dir, name),
    }
}

/// Six characters for a temporary name, as mkdtemp's X's (from the kernel's random pool).
fn random_suffix() -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 6];
    // Safety: getrandom writes at most `bytes.len()` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        // No random pool (very old kernels): the clock and the pid are unique enough, and a
        // name taken is tried again.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        bytes = t.to_le_bytes()[..6].try_into().expect("6 bytes");
    }
    bytes.iter().map(|b| CHARS[*b as usize % CHARS.len()] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GNU tar 1.34's rule: `D` keeps a directory, `Y` a non-directory, `N` either; what the
    /// list does not name goes; the first entry for a name counts.
    #[test]
    fn what_a_list_keeps() {
        let names: Vec<CString> = ["d", "f", "n", "gone"].map(|n| CString::new(n).unwrap()).into();
        let letters = letters(&names, b"Dd\0Yf\0Nn\0Nd\0Yx\0");
        let letter = |n: &str| letters[n.as_bytes()];
        assert_eq!([letter("d"), letter("f"), letter("n"), letter("gone")], [b'D', b'Y', b'N', 0]);
        let keeps = |n: &str| [stays(letter(n), true), stays(letter(n), false)];
        assert_eq!(keeps("d"), [true, false]);
        assert_eq!(keeps("f"), [false, true]);
        assert_eq!(keeps("n"), [true, true]);
        assert_eq!(keeps("gone"), [false, false]);
    }
}
