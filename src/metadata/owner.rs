//! A member's owner as GNU tar 1.34 restores it (`decode_header` in list.c): the ustar header's
//! user and group names are mapped to this system's ids where they exist here (getpwnam,
//! getgrnam), each on its own, and the header's numbers stand where a name is empty or unknown
//! here, or a PAX `uid`/`gid` record gives the number (`Member::uid_name`); `--numeric-owner`
//! takes the numbers only. Checked against GNU tar 1.34 on GNU, ustar and PAX archives
//! (tests/cli.rs `same_owner_maps_names_like_gnu_tar`).
//!
//! Names are looked up once each: a snapshot has 400,000 members and one or two owners, and a
//! passwd lookup can be a round trip to a directory service. The cache is bounded
//! (`MAX_NAMES`), so an archive naming a million users costs lookups, not memory.

use std::collections::HashMap;
use std::ffi::{CString, c_char};

use crate::archive::Member;

/// Names remembered per kind; past this the cache starts again (header names are at most 32
/// bytes, so this is a few hundred KiB at most).
const MAX_NAMES: usize = 4096;

/// Largest buffer a passwd or group entry may need (a group with thousands of members): past
/// it the name counts as unknown.
const MAX_ENTRY_BUF: usize = 1 << 20;

/// Name → local id lookups for one run, cached.
pub struct Owners {
    numeric: bool,
    users: HashMap<Vec<u8>, Option<u32>>,
    groups: HashMap<Vec<u8>, Option<u32>>,
}

impl Owners {
    /// `numeric`: `--numeric-owner`, names are never looked up.
    pub fn new(numeric: bool) -> Owners {
        Owners { numeric, users: HashMap::new(), groups: HashMap::new() }
    }

    /// The uid GNU tar gives `m`.
    pub fn uid(&mut self, m: &Member) -> u64 {
        if self.numeric || m.uid_name.is_empty() {
            return m.uid;
        }
        cached(&mut self.users, &m.uid_name, user_id).map_or(m.uid, u64::from)
    }

    /// The gid GNU tar gives `m`.
    pub fn gid(&mut self, m: &Member) -> u64 {
        if self.numeric || m.gid_name.is_empty() {
            return m.gid;
        }
        cached(&mut self.groups, &m.gid_name, group_id).map_or(m.gid, u64::from)
    }

    /// The uid of user `name` on this system, if it has one (cached like the members' names;
    /// `--acls` looks up the users an ACL names).
    pub fn user(&mut self, name: &[u8]) -> Option<u32> {
        cached(&mut self.users, name, user_id)
    }

    /// The gid of group `name` on this system, if it has one.
    pub fn group(&mut self, name: &[u8]) -> Option<u32> {
        cached(&mut self.groups, name, group_id)
    }

    /// `uid` and `gid` as the ids a chown takes (an id past u32 becomes u32::MAX - 1, never -1,
    /// which chown reads as "leave it").
    pub fn ids(&mut self, m: &Member) -> (u32, u32) {
        let id = |v: u64| u32::try_from(v).unwrap_or(u32::MAX - 1);
        (id(self.uid(m)), id(self.gid(m)))
    }
}

fn cached(
    cache: &mut HashMap<Vec<u8>, Option<u32>>,
    name: &[u8],
    lookup: fn(&CString) -> Option<u32>,
) -> Option<u32> {
    if let Some(&id) = cache.get(name) {
        return id;
    }
    // A header name ends at its first NUL, so this only fails for names no system has.
    let id = CString::new(name).ok().and_then(|c| lookup(&c));
    if cache.len() >= MAX_NAMES {
        cache.clear();
    }
    cache.insert(name.to_vec(), id);
    id
}

/// Calls `call(buf, len)`, a getpwnam_r/getgrnam_r wrapper returning its error number, with a
/// buffer that grows while the entry does not fit (ERANGE) and retries on EINTR.
fn with_buffer(mut call: impl FnMut(*mut c_char, usize) -> libc::c_int) -> bool {
    let mut buf: Vec<c_char> = vec![0; 1024];
    loop {
        match call(buf.as_mut_ptr(), buf.len()) {
            0 => return true,
            libc::EINTR => {}
            libc::ERANGE if buf.len() < MAX_ENTRY_BUF => buf.resize(buf.len() * 2, 0),
            _ => return false,
        }
    }
}

/// The uid of user `name` on this system (getpwnam_r).
fn user_id(name: &CString) -> Option<u32> {
    let mut id = None;
    with_buffer(|buf, len| {
        let mut pwd = std::mem::MaybeUninit::<libc::passwd>::uninit();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // Safety: `name` is NUL-terminated, `pwd` and `found` point to writable memory of their
        // types, `buf` is `len` writable bytes that live until this closure returns, and
        // getpwnam_r keeps no pointer to any of them after it returns. `found` is either null
        // or `pwd`, which getpwnam_r then filled.
        let r = unsafe { libc::getpwnam_r(name.as_ptr(), pwd.as_mut_ptr(), buf, len, &mut found) };
        if r == 0 && !found.is_null() {
            // Safety: non-null `found` points to the `pwd` getpwnam_r initialised.
            id = Some(unsafe { (*found).pw_uid });
        }
        r
    });
    id
}

/// The gid of group `name` on this system (getgrnam_r).
fn group_id(name: &CString) -> Option<u32> {
    let mut id = None;
    with_buffer(|buf, len| {
        let mut grp = std::mem::MaybeUninit::<libc::group>::uninit();
        let mut found: *mut libc::group = std::ptr::null_mut();
        // Safety: as in `user_id`, for getgrnam_r and a `group`.
        let r = unsafe { libc::getgrnam_r(name.as_ptr(), grp.as_mut_ptr(), buf, len, &mut found) };
        if r == 0 && !found.is_null() {
            // Safety: non-null `found` points to the `grp` getgrnam_r initialised.
            id = Some(unsafe { (*found).gr_gid });
        }
        r
    });
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(uid_name: &[u8], gid_name: &[u8]) -> Member {
        Member {
            name: b"f".to_vec(),
            kind: crate::archive::Kind::File,
            mode: 0o644,
            uid: 500,
            gid: 600,
            uname: uid_name.to_vec(),
            gname: gid_name.to_vec(),
            uid_name: uid_name.to_vec(),
            gid_name: gid_name.to_vec(),
            format: crate::archive::Format::Gnu,
            type_flag: b'0',
            ..Member::volume_header(Vec::new(), Default::default())
        }
    }

    #[test]
    fn names_map_each_on_its_own() {
        let mut o = Owners::new(false);
        // root is uid 0 and group 0 everywhere.
        assert_eq!(o.ids(&member(b"root", b"root")), (0, 0));
        assert_eq!(o.ids(&member(b"root", b"no such group here")), (0, 600));
        assert_eq!(o.ids(&member(b"no such user here", b"root")), (500, 0));
        assert_eq!(o.ids(&member(b"", b"")), (500, 600));
        assert_eq!(Owners::new(true).ids(&member(b"root", b"root")), (500, 600));
        // Cached: the answer is the same the second time, without a lookup.
        assert_eq!(o.users.get(&b"root"[..]), Some(&Some(0)));
        assert_eq!(o.ids(&member(b"root", b"root")), (0, 0));
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut o = Owners::new(false);
        for i in 0..MAX_NAMES + 10 {
            o.uid(&member(format!("nobody-{i}").as_bytes(), b""));
        }
        assert!(o.users.len() <= MAX_NAMES);
    }
}
