//! POSIX ACLs (`--acls`): the PAX records `SCHILY.acl.access` and `SCHILY.acl.default` that
//! GNU tar and bsdtar write, turned into the extended attributes the kernel takes,
//! `system.posix_acl_access` and `system.posix_acl_default` (for directories), which the
//! writer sets with the member's other attributes, through its own descriptor.
//!
//! The text is acl(5)'s: entries `TAG:QUALIFIER:PERMS` separated by newlines (GNU tar) or
//! commas (bsdtar), TAG `user`/`u`, `group`/`g`, `mask`/`m`, `other`/`o`, QUALIFIER empty,
//! a name or a number, PERMS of `r`, `w`, `x` and `-`; bsdtar adds the number as a fourth
//! field (`user:alice:r--:1000`), used where the name is not known here; `#` starts a
//! comment. A name is looked up on this system (getpwnam/getgrnam, through the run's cached
//! `Owners`) as GNU tar's `acl_from_text` does. The binary form (<linux/posix_acl_xattr.h>): a little-endian u32
//! version 2, then per entry u16 tag, u16 permissions, u32 id, sorted by tag and id, which is
//! the order the kernel checks.

use crate::archive::ACL_DEFAULT_KEY as DEFAULT_KEY;
use crate::metadata::owner::Owners;

/// The attributes they become.
const ACCESS_XATTR: &[u8] = b"system.posix_acl_access";
const DEFAULT_XATTR: &[u8] = b"system.posix_acl_default";

/// <linux/posix_acl_xattr.h>
const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const UNDEFINED_ID: u32 = u32::MAX;

/// The extended attribute for the ACL record `key` with text `text`: its name and value.
/// Err says what is wrong with the text (an unknown tag, user or group; bad permissions).
pub fn to_xattr(
    key: &[u8],
    text: &[u8],
    owners: &mut Owners,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let name = if key == DEFAULT_KEY { DEFAULT_XATTR } else { ACCESS_XATTR };
    if key == DEFAULT_KEY && text.iter().all(u8::is_ascii_whitespace) {
        // GNU tar writes `SCHILY.acl.default=` for a directory with an access ACL and no
        // default one: none, as when there is no record.
        return Ok(no_default());
    }
    let mut lookup = |name: &str, user: bool| {
        if user { owners.user(name.as_bytes()) } else { owners.group(name.as_bytes()) }
    };
    Ok((name.to_vec(), encode(&parse(text, &mut lookup)?)))
}

/// The access ACL of a member that has none, as GNU tar sets it (`perms2acl`): `user::`,
/// `group::` and `other::` from `mode`'s permission bits, which replaces what the file
/// inherited from its directory's default ACL (the kernel then keeps no ACL, only the mode).
pub fn from_mode(mode: u32) -> (Vec<u8>, Vec<u8>) {
    let bits = |shift: u32| ((mode >> shift) & 7) as u16;
    let entries = [
        (USER_OBJ, bits(6), UNDEFINED_ID),
        (GROUP_OBJ, bits(3), UNDEFINED_ID),
        (OTHER, bits(0), UNDEFINED_ID),
    ];
    (ACCESS_XATTR.to_vec(), encode(&entries))
}

/// A directory member without a default ACL: the attribute with an empty value, which the
/// kernel takes as "remove it" (setxattr with size 0), dropping what the directory inherited
/// (GNU tar's `acl_delete_def_file_at`).
pub fn no_default() -> (Vec<u8>, Vec<u8>) {
    (DEFAULT_XATTR.to_vec(), Vec::new())
}

/// One entry: tag, permission bits (r 4, w 2, x 1), id.
type AclEntry = (u16, u16, u32);

/// A name's id on this system: `lookup(name, true)` for a user, `false` for a group.
type Lookup<'a> = dyn FnMut(&str, bool) -> Option<u32> + 'a;

fn parse(text: &[u8], lookup: &mut Lookup) -> Result<Vec<AclEntry>, String> {
    let text = String::from_utf8_lossy(text);
    let mut entries = Vec::new();
    for raw in text.split(['\n', ',']) {
        let entry = raw.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        let fields: Vec<&str> = entry.split(':').collect();
        let (tag, qualifier, perms, id) = match fields[..] {
            [tag, qualifier, perms] => (tag, qualifier, perms, None),
            [tag, qualifier, perms, id] => (tag, qualifier, perms, Some(id)),
            // `other::r--` is also written `other:r--`, and `mask:r--`.
            [tag, perms] => (tag, "", perms, None),
            _ => return Err(format!("'{entry}' is not an ACL entry")),
        };
        let perm = perms_of(perms).ok_or_else(|| format!("'{perms}': bad permissions"))?;
        let named = !qualifier.is_empty();
        let (tag, id) = match (tag, named) {
            ("user" | "u", false) => (USER_OBJ, UNDEFINED_ID),
            ("user" | "u", true) => (USER, id_of(qualifier, id, true, lookup)?),
            ("group" | "g", false) => (GROUP_OBJ, UNDEFINED_ID),
            ("group" | "g", true) => (GROUP, id_of(qualifier, id, false, lookup)?),
            ("mask" | "m", false) => (MASK, UNDEFINED_ID),
            ("other" | "o", false) => (OTHER, UNDEFINED_ID),
            _ => return Err(format!("'{entry}' is not an ACL entry")),
        };
        entries.push((tag, perm, id));
    }
    entries.sort_by_key(|&(tag, _, id)| (tag, id));
    let has = |t: u16| entries.iter().any(|e| e.0 == t);
    if !(has(USER_OBJ) && has(GROUP_OBJ) && has(OTHER)) {
        return Err("an ACL needs user::, group:: and other:: entries".into());
    }
    if (has(USER) || has(GROUP)) && !has(MASK) {
        return Err("an ACL with named users or groups needs a mask:: entry".into());
    }
    if entries.windows(2).any(|w| (w[0].0, w[0].2) == (w[1].0, w[1].2)) {
        return Err("an ACL names one user or group twice".into());
    }
    Ok(entries)
}

fn perms_of(s: &str) -> Option<u16> {
    let mut bits = 0;
    for c in s.chars() {
        bits |= match c {
            'r' => 4,
            'w' => 2,
            'x' => 1,
            '-' => 0,
            _ => return None,
        };
    }
    (!s.is_empty()).then_some(bits)
}

/// A user (`user`) or group named by number, by a name known here, or by bsdtar's id field.
fn id_of(q: &str, id: Option<&str>, user: bool, lookup: &mut Lookup) -> Result<u32, String> {
    numeric(q)
        .or_else(|| lookup(q, user))
        .or_else(|| id.and_then(numeric))
        .ok_or_else(|| format!("unknown {} '{q}'", if user { "user" } else { "group" }))
}

fn numeric(s: &str) -> Option<u32> {
    s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse().ok()).flatten()
}

fn encode(entries: &[AclEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 8 * entries.len());
    out.extend_from_slice(&VERSION.to_le_bytes());
    for &(tag, perm, id) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::ACL_ACCESS_KEY as ACCESS_KEY;

    /// The names these tests use: root is 0 (user and group), nothing else is known.
    fn known(name: &str, _user: bool) -> Option<u32> {
        (name == "root").then_some(0)
    }

    fn entries(text: &str) -> Vec<AclEntry> {
        parse(text.as_bytes(), &mut known).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// GNU tar's form (newlines, names) and bsdtar's (commas, the id as a fourth field),
    /// sorted as the kernel wants them.
    #[test]
    fn both_spellings_give_the_same_entries() {
        let gnu = "user::rw-\nuser:1234:--x\nuser:root:rw-\ngroup::r--\ngroup:0:r--\nmask::rwx\nother::r--\n";
        let bsd = "user::rw-,group::r--,other::r--,mask::rwx,user:nosuchuser:rw-:0,user:1234:--x,group:root:r--:0";
        let want = vec![
            (USER_OBJ, 6, UNDEFINED_ID),
            (USER, 6, 0),
            (USER, 1, 1234),
            (GROUP_OBJ, 4, UNDEFINED_ID),
            (GROUP, 4, 0),
            (MASK, 7, UNDEFINED_ID),
            (OTHER, 4, UNDEFINED_ID),
        ];
        assert_eq!(entries(gnu), want);
        assert_eq!(entries(bsd), want);
        // acl_to_text's comments and the short tags.
        assert_eq!(
            entries("u::rwx\ng::r-x\t#effective:r--\no::---"),
            vec![
                (USER_OBJ, 7, UNDEFINED_ID),
                (GROUP_OBJ, 5, UNDEFINED_ID),
                (OTHER, 0, UNDEFINED_ID)
            ]
        );
    }

    #[test]
    fn the_binary_form_is_the_kernels() {
        let owners = &mut Owners::new(false);
        let (name, value) =
            to_xattr(ACCESS_KEY, b"user::rw-\ngroup::r--\nother::---\n", owners).unwrap();
        assert_eq!(name, b"system.posix_acl_access");
        assert_eq!(
            value,
            [
                2, 0, 0, 0, 1, 0, 6, 0, 255, 255, 255, 255, 4, 0, 4, 0, 255, 255, 255, 255, 32, 0,
                0, 0, 255, 255, 255, 255
            ]
        );
        assert_eq!(
            to_xattr(DEFAULT_KEY, b"u::rwx,g::rwx,o::rwx", owners).unwrap().0,
            DEFAULT_XATTR
        );
        // GNU tar's empty default ACL: removed.
        assert_eq!(to_xattr(DEFAULT_KEY, b"", owners).unwrap(), no_default());
        assert!(to_xattr(ACCESS_KEY, b"", owners).is_err());
        let (name, value) = from_mode(0o4751);
        assert_eq!(name, ACCESS_XATTR);
        assert_eq!(
            value,
            encode(&[
                (USER_OBJ, 7, UNDEFINED_ID),
                (GROUP_OBJ, 5, UNDEFINED_ID),
                (OTHER, 1, UNDEFINED_ID)
            ])
        );
    }

    #[test]
    fn broken_acls_are_refused() {
        for text in [
            "user::rw-",
            "user::rw-\ngroup::r--\nother::r--\nuser:1:r--",
            "user::rw-\ngroup::r--\nother::rwz",
            "user:nosuchuser-here:rw-\nuser::rw-\ngroup::r--\nmask::rw-\nother::r--",
            "bogus::rw-\nuser::rw-\ngroup::r--\nother::r--",
            "user::rw-\nuser::r--\ngroup::r--\nother::r--",
        ] {
            assert!(parse(text.as_bytes(), &mut known).is_err(), "{text:?} was taken");
        }
    }
}
