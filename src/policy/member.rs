//! What lands of one member, decided before any of it is written: whether it lands and where
//! (`place`, from safety.rs's verdict on its name), its owner and mode (`ownership`, with
//! libarchive's set-id rule: `setid_checked`), the extended attributes and ACLs restored on it
//! (`attributes`), whether its time is worth a warning (`implausible`), and the name GNU tar
//! gives it in messages (`gnu_file_name`). Pure functions of the member and the member plan;
//! command/extract.rs and command/to_stdout.rs carry the decisions out and say their words.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::admit::{SNAPSHOT_DIR_MODE, SNAPSHOT_FILE_MODE};
use super::plan::MemberPlan;
use super::safety::{SafePath, Verdict};
use crate::archive::{Kind, Member, Timestamp, Xattr};
use crate::metadata::owner::Owners;

/// Where a member lands, if it does.
#[derive(Debug, PartialEq, Eq)]
pub enum Place {
    /// At this path (an empty one is DIR itself).
    Extract(SafePath),
    /// Nothing to do, nothing said.
    Nothing,
    /// Skipped with this warning; the run goes on.
    Skip(&'static str),
    /// `--snapshot`: the run stops here, for this reason.
    Stop(&'static str),
}

/// Where a member of `kind` lands, from safety.rs's `verdict` on its name (after
/// `--strip-components`, `--one-top-level`): a name refused is skipped, or under `--snapshot`
/// stops the run; an empty path is only DIR itself for a directory.
pub fn place(policy: &MemberPlan, verdict: Verdict, kind: Kind) -> Place {
    let path = match verdict {
        Verdict::Extract(p) => p,
        Verdict::Nothing => return Place::Nothing,
        Verdict::Refuse(why) if policy.snapshot => return Place::Stop(why),
        Verdict::Refuse(why) => return Place::Skip(why),
    };
    if path.as_path().as_os_str().is_empty() && kind != Kind::Dir {
        return Place::Skip("member name is empty; skipped");
    }
    // A `./` member is DIR itself. GNU tar gives DIR its mode and mtime (as root, or with -p),
    // and so do we; but a snapshot never holds one (Agave writes no directory entries), and
    // DIR is the operator's: a 0700 ledger directory stays 0700.
    if policy.snapshot && path.is_root() {
        return Place::Nothing;
    }
    Place::Extract(path)
}

/// Whether the archive's owner of a member of `mode` matters, so that its names are looked
/// up (owner.rs): ownership is restored, or set-id bits depend on it.
pub fn wants_owner(policy: &MemberPlan, mode: u32) -> bool {
    !policy.snapshot && (policy.same_owner || mode & 0o6000 != 0)
}

/// The owner restored on a member (None: it belongs to whoever creates it) and the mode it
/// lands with: `--snapshot`'s fixed modes, else its permission bits with the set-id rule,
/// where its archive owner `archived` was looked up (`wants_owner`); `ids` are ours.
pub fn ownership(
    policy: &MemberPlan,
    (kind, mode): (Kind, u32),
    archived: Option<(u32, u32)>,
    ids: (u32, u32),
) -> (Option<(u32, u32)>, u32) {
    let owner = archived.filter(|_| policy.same_owner);
    let mode = match (policy.snapshot, kind, archived) {
        (true, Kind::Dir, _) => SNAPSHOT_DIR_MODE,
        (true, _, _) => SNAPSHOT_FILE_MODE,
        (false, _, Some(a)) => setid_checked(mode & 0o7777, a, owner.unwrap_or(ids)),
        (false, _, None) => mode & 0o7777,
    };
    (owner, mode)
}

/// libarchive's rule for set-id bits (its SUID/SGID checks): keep S_ISUID only when the file
/// will belong (`owner`, its final owner) to the archive's owner (`archived`, as `owner.rs`
/// resolves it: by name unless `--numeric-owner`), S_ISGID only for the archive's group.
/// Without `--same-owner` a root extraction owns everything, so a set-uid member of uid 1000
/// would otherwise become set-uid root. (GNU tar keeps the bit there; we deliberately do not.)
pub fn setid_checked(mode: u32, archived: (u32, u32), owner: (u32, u32)) -> u32 {
    let mut mode = mode;
    if archived.0 != owner.0 {
        mode &= !0o4000;
    }
    if archived.1 != owner.1 {
        mode &= !0o2000;
    }
    mode
}

/// The extended attributes to restore on `m`: those `--xattrs` selects, then with `--acls`
/// its ACLs as `system.posix_acl_*` attributes (acl.rs), set on files and directories (a
/// default ACL on directories only), as GNU tar does. An ACL that cannot be read (an unknown
/// user or group; names are looked up through `owners`, cached for the run) is left out, and
/// why is in the second value: the member is extracted without it. With `--acls` a file or
/// directory without ACL records gets GNU tar's reset (an access ACL from its mode; a
/// directory, no default ACL). None when there are none (no allocation for a member without
/// attributes).
pub fn attributes(
    policy: &MemberPlan,
    m: &mut Member,
    owners: &mut Owners,
) -> (Option<Arc<[Xattr]>>, Vec<String>) {
    let resets = policy.acls && matches!(m.kind, Kind::File | Kind::Dir);
    if m.xattrs.is_empty() && !resets {
        return (None, Vec::new());
    }
    let (acls, plain): (Vec<Xattr>, Vec<Xattr>) = std::mem::take(&mut m.xattrs)
        .into_iter()
        .partition(|x| crate::archive::is_acl_record(&x.name));
    if !resets {
        return (policy.xattrs.as_ref().and_then(|filter| filter.select(plain)), Vec::new());
    }
    let mut kept: Vec<Xattr> = match &policy.xattrs {
        Some(filter) => filter.select(plain).map(|x| x.to_vec()).unwrap_or_default(),
        None => Vec::new(),
    };
    let mut unreadable = Vec::new();
    // GNU tar's `xattrs_acls_set`: a member without an access ACL (an empty record is none)
    // gets one from its mode, a directory without a default ACL loses the one it inherited.
    let empty = |x: &Xattr| x.value.as_ref().is_some_and(|v| v.is_empty());
    let (mut access, mut default) = (false, false);
    for x in acls {
        if x.name == crate::archive::ACL_ACCESS_KEY && empty(&x) {
            continue;
        }
        if x.name == crate::archive::ACL_DEFAULT_KEY && m.kind != Kind::Dir {
            continue;
        }
        access |= x.name == crate::archive::ACL_ACCESS_KEY;
        default |= x.name == crate::archive::ACL_DEFAULT_KEY;
        let converted = match x.value {
            Some(text) => crate::metadata::acl::to_xattr(&x.name, &text, owners),
            None => Err("too large to be kept".to_string()),
        };
        match converted {
            Ok((name, value)) => kept.push(Xattr { name, value: Some(value) }),
            // GNU tar warns (acl_from_text, acl_set_file_at) and exits 0.
            Err(e) => unreadable.push(e),
        }
    }
    let mut reset = Vec::new();
    if !access {
        reset.push(crate::metadata::acl::from_mode(m.mode));
    }
    if m.kind == Kind::Dir && !default {
        reset.push(crate::metadata::acl::no_default());
    }
    kept.extend(reset.into_iter().map(|(name, value)| Xattr { name, value: Some(value) }));
    ((!kept.is_empty()).then(|| kept.into()), unreadable)
}

/// Whether a time set on a member is worth GNU tar's `check_time` warning (extract.c).
#[derive(Debug, PartialEq, Eq)]
pub enum Implausible {
    /// Before 1970: "implausibly old time stamp".
    Old,
    /// After now, by this much: "time stamp ... is N s in the future".
    Future { secs: i64, nanos: u32 },
}

/// GNU tar's `check_time`: a time `t` before 1970 or after now is implausible. Nearly every
/// time is before the run `started`: the clock (`now`) is read only for the others.
pub fn implausible(
    t: Timestamp,
    started: SystemTime,
    now: impl FnOnce() -> SystemTime,
) -> Option<Implausible> {
    let since_epoch = |at: SystemTime| {
        let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        (d.as_secs() as i64, d.subsec_nanos())
    };
    if t.secs >= 0 && (t.secs, t.nanos) <= since_epoch(started) {
        return None;
    }
    let (now_s, now_ns) = since_epoch(now());
    if (t.secs, t.nanos) > (now_s, now_ns) {
        let (mut secs, mut nanos) = (t.secs - now_s, i64::from(t.nanos) - i64::from(now_ns));
        if nanos < 0 {
            nanos += 1_000_000_000;
            secs -= 1;
        }
        return Some(Implausible::Future { secs, nanos: nanos as u32 });
    }
    (t.secs < 0).then_some(Implausible::Old)
}

/// The name GNU tar gives the file made of `m` in its messages and `--to-command`'s
/// TAR_FILENAME (its `file_name` after `safer_name_suffix`): as extracted, relative to DIR,
/// with a leading `./` kept and trailing `/`s dropped.
pub fn gnu_file_name<'a>(policy: &MemberPlan, m: &'a Member, path: &'a SafePath) -> &'a [u8] {
    if policy.renames() {
        return std::os::unix::ffi::OsStrExt::as_bytes(path.as_path().as_os_str());
    }
    let n = &m.name;
    let mut n = &n[n.iter().position(|&b| b != b'/').unwrap_or(n.len())..];
    while n.len() > 1
        && let Some(rest) = n.strip_suffix(b"/")
    {
        n = rest;
    }
    n
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::safety::Sanitizer;

    fn plan(snapshot: bool, same_owner: bool) -> MemberPlan {
        MemberPlan {
            strip_components: 0,
            one_top_level: None,
            snapshot,
            limits: Default::default(),
            same_owner,
            numeric_owner: false,
            touch: false,
            xattrs: None,
            acls: false,
            incremental: false,
        }
    }

    fn member(name: &[u8], kind: Kind, mode: u32) -> Member {
        let mut m = Member::volume_header(name.to_vec(), Timestamp::default());
        (m.kind, m.mode, m.type_flag) = (kind, mode, b'0');
        m
    }

    /// A place as the tables write it.
    fn shown(p: Place) -> String {
        match p {
            Place::Extract(p) => format!("extract {:?}", p.as_path()),
            Place::Nothing => "nothing".into(),
            Place::Skip(why) => format!("skip: {why}"),
            Place::Stop(why) => format!("stop: {why}"),
        }
    }

    #[test]
    fn where_a_member_lands() {
        // (name, --strip-components, --snapshot, kind) -> place
        let rows: &[(&[u8], usize, bool, Kind, &str)] = &[
            (b"a/b", 0, false, Kind::File, r#"extract "a/b""#),
            (b"/a/b", 0, false, Kind::File, r#"extract "a/b""#),
            (b"a/b", 0, true, Kind::File, r#"extract "a/b""#),
            (b"a/b", 2, false, Kind::File, "nothing"),
            (b"a/b", 2, true, Kind::Dir, "nothing"),
            (b"../a", 0, false, Kind::File, "skip: member name contains '..'; skipped"),
            (b"../a", 0, true, Kind::File, "stop: member name contains '..'; skipped"),
            (b"a\0b", 0, false, Kind::Symlink, "skip: member name contains a NUL byte; skipped"),
            (b"a\0b", 0, true, Kind::File, "stop: member name contains a NUL byte; skipped"),
            // `./` is DIR itself: a directory gives it its mode and time, except in a snapshot.
            (b"./", 0, false, Kind::Dir, r#"extract """#),
            (b"./", 0, true, Kind::Dir, "nothing"),
            // Anything else needs a name.
            (b".", 0, false, Kind::File, "skip: member name is empty; skipped"),
            (b"./", 0, true, Kind::Symlink, "skip: member name is empty; skipped"),
        ];
        for &(name, strip, snapshot, kind, want) in rows {
            let verdict = Sanitizer::new(strip, None).judge(name);
            let got = shown(place(&plan(snapshot, false), verdict, kind));
            let name = name.escape_ascii();
            assert_eq!(got, want, "{name} strip {strip} snapshot {snapshot} {kind:?}");
        }
    }

    #[test]
    fn owner_and_mode() {
        const ME: (u32, u32) = (0, 0);
        // (--snapshot, --same-owner, kind, mode, archived owner) -> (owner, mode)
        type Row = (bool, bool, Kind, u32, Option<(u32, u32)>, Option<(u32, u32)>, u32);
        let rows: &[Row] = &[
            // The permission bits, without the file type's.
            (false, false, Kind::File, 0o100644, None, None, 0o644),
            (false, false, Kind::Dir, 0o40755, None, None, 0o755),
            // --snapshot: fixed modes, no owner (none is looked up: `wants_owner`).
            (true, false, Kind::File, 0o4777, None, None, 0o644),
            (true, true, Kind::Dir, 0o700, None, None, 0o755),
            (true, false, Kind::Symlink, 0o777, None, None, 0o644),
            // Set-id bits stay only for the owner they were meant for.
            (false, false, Kind::File, 0o6755, Some((1000, 1000)), None, 0o755),
            (false, false, Kind::File, 0o6755, Some((0, 1000)), None, 0o4755),
            (false, false, Kind::File, 0o6755, Some((1000, 0)), None, 0o2755),
            (false, false, Kind::File, 0o6755, Some(ME), None, 0o6755),
            // --same-owner: the archive's owner is restored, its set-id bits with it.
            (false, true, Kind::File, 0o6755, Some((1000, 1000)), Some((1000, 1000)), 0o6755),
            (false, true, Kind::Dir, 0o1777, Some((7, 8)), Some((7, 8)), 0o1777),
        ];
        for &(snapshot, same_owner, kind, mode, archived, owner, landed) in rows {
            let policy = plan(snapshot, same_owner);
            let got = ownership(&policy, (kind, mode), archived, ME);
            assert_eq!(got, (owner, landed), "{snapshot} {same_owner} {kind:?} {mode:o}");
        }
    }

    #[test]
    fn owners_are_looked_up_only_when_they_matter() {
        // (--snapshot, --same-owner, mode) -> looked up
        let rows = [
            (false, false, 0o644, false),
            (false, false, 0o4755, true),
            (false, false, 0o2755, true),
            (false, false, 0o1777, false),
            (false, true, 0o644, true),
            (true, true, 0o4755, false),
            (true, false, 0o4755, false),
        ];
        for (snapshot, same_owner, mode, want) in rows {
            let got = wants_owner(&plan(snapshot, same_owner), mode);
            assert_eq!(got, want, "{snapshot} {same_owner} {mode:o}");
        }
    }

    #[test]
    fn setid_bits_follow_the_owner() {
        // (mode, archived, owner) -> mode
        let rows = [
            (0o4755, (1, 1), (1, 1), 0o4755),
            (0o4755, (1, 1), (0, 1), 0o755),
            (0o2755, (1, 1), (1, 0), 0o755),
            (0o6755, (1, 2), (1, 3), 0o4755),
            (0o6755, (1, 2), (3, 2), 0o2755),
            (0o1777, (1, 2), (3, 4), 0o1777),
            (0o644, (1, 2), (3, 4), 0o644),
        ];
        for (mode, archived, owner, want) in rows {
            let got = setid_checked(mode, archived, owner);
            assert_eq!(got, want, "{mode:o} {archived:?} {owner:?}");
        }
    }

    #[test]
    fn attributes_and_acls() {
        let x =
            |name: &[u8], value: &[u8]| Xattr { name: name.to_vec(), value: Some(value.to_vec()) };
        let user = x(b"user.a", b"1");
        let trusted = x(b"trusted.b", b"2");
        let access = x(crate::archive::ACL_ACCESS_KEY, b"user::rw-,group::r--,other::r--");
        let default = x(crate::archive::ACL_DEFAULT_KEY, b"user::rwx,group::r-x,other::---");
        let empty_access = x(crate::archive::ACL_ACCESS_KEY, b"");
        let bad = x(crate::archive::ACL_ACCESS_KEY, b"user:no-such-user-here:rw-");
        let too_large = Xattr { name: crate::archive::ACL_ACCESS_KEY.to_vec(), value: None };
        const ACCESS: &str = "system.posix_acl_access";
        const DEFAULT: &str = "system.posix_acl_default";
        // (--xattrs, --acls, kind, records) -> (attributes set, ACLs that could not be read)
        type Row<'a> = (bool, bool, Kind, Vec<Xattr>, &'a [&'a str], usize);
        let rows: Vec<Row> = vec![
            (false, false, Kind::File, vec![], &[], 0),
            (false, false, Kind::File, vec![user.clone(), access.clone()], &[], 0),
            // --xattrs takes user.* by default, never the ACL records themselves.
            (true, false, Kind::File, vec![user.clone(), trusted.clone()], &["user.a"], 0),
            (true, false, Kind::File, vec![access.clone()], &[], 0),
            // --acls: the records become the kernel's attributes; a file without one gets
            // an access ACL from its mode, a directory also loses its inherited default.
            (false, true, Kind::File, vec![], &[ACCESS], 0),
            (false, true, Kind::Dir, vec![], &[ACCESS, DEFAULT], 0),
            (false, true, Kind::Symlink, vec![], &[], 0),
            (false, true, Kind::File, vec![access.clone()], &[ACCESS], 0),
            (false, true, Kind::File, vec![default.clone()], &[ACCESS], 0),
            (false, true, Kind::Dir, vec![access.clone(), default.clone()], &[ACCESS, DEFAULT], 0),
            (false, true, Kind::File, vec![empty_access], &[ACCESS], 0),
            (true, true, Kind::File, vec![user.clone(), access.clone()], &["user.a", ACCESS], 0),
            // An access ACL that cannot be read is left out, and said; none stands in.
            (false, true, Kind::File, vec![bad.clone()], &[], 1),
            (false, true, Kind::File, vec![too_large], &[], 1),
            (false, true, Kind::Dir, vec![bad.clone(), default.clone()], &[DEFAULT], 1),
        ];
        for (xattrs, acls, kind, records, want, unread) in rows {
            let mut policy = plan(false, false);
            policy.acls = acls;
            policy.xattrs =
                xattrs.then(|| crate::metadata::xattrs::XattrFilter::new(&[], &[]).unwrap());
            let mut m = member(b"f", kind, 0o644);
            m.xattrs = records.clone();
            let (got, failed) = attributes(&policy, &mut m, &mut Owners::new(false));
            let names: Vec<String> = got
                .iter()
                .flat_map(|a| a.iter())
                .map(|x| String::from_utf8_lossy(&x.name).into_owned())
                .collect();
            let records: Vec<_> =
                records.iter().map(|r| r.name.escape_ascii().to_string()).collect();
            assert_eq!(names, want, "{xattrs} {acls} {kind:?} {records:?}");
            assert_eq!(failed.len(), unread, "{xattrs} {acls} {kind:?} {records:?}: {failed:?}");
        }
    }

    #[test]
    fn implausible_times() {
        let at = |secs: u64, nanos: u32| UNIX_EPOCH + Duration::new(secs, nanos);
        let t = |secs: i64, nanos: u32| Timestamp { secs, nanos };
        // (time, run started, now) -> warning
        let rows = [
            (t(0, 0), at(1000, 0), at(1000, 0), None),
            (t(999, 5), at(1000, 0), at(1000, 0), None),
            (t(-1, 0), at(1000, 0), at(1000, 0), Some(Implausible::Old)),
            (t(-1, 999_999_999), at(1000, 0), at(1000, 0), Some(Implausible::Old)),
            // After the start but not after now (the clock moved on): fine.
            (t(1001, 0), at(1000, 0), at(1002, 0), None),
            (t(1002, 0), at(1000, 0), at(1002, 0), None),
            (t(1005, 0), at(1000, 0), at(1002, 0), Some(Implausible::Future { secs: 3, nanos: 0 })),
            (
                t(1005, 100),
                at(1000, 0),
                at(1002, 200),
                Some(Implausible::Future { secs: 2, nanos: 999_999_900 }),
            ),
        ];
        for (time, started, now, want) in rows {
            assert_eq!(implausible(time, started, || now), want, "{time:?}");
        }
        // A time before the start never reads the clock.
        let got = implausible(t(5, 0), at(1000, 0), || panic!("the clock was read"));
        assert_eq!(got, None);
    }

    #[test]
    fn names_in_messages_are_gnu_tars() {
        // (name, --strip-components) -> GNU tar's file_name
        let rows: &[(&[u8], usize, &[u8])] = &[
            (b"a/b", 0, b"a/b"),
            (b"/a/b", 0, b"a/b"),
            (b"///a/b/", 0, b"a/b"),
            (b"./a/", 0, b"./a"),
            (b"dir//", 0, b"dir"),
            // Renamed: the path as extracted.
            (b"top/a/b/", 1, b"a/b"),
        ];
        for &(name, strip, want) in rows {
            let mut policy = plan(false, false);
            policy.strip_components = strip;
            let m = member(name, Kind::File, 0o644);
            let Verdict::Extract(path) = Sanitizer::new(strip, None).judge(name) else {
                panic!("{} is not extracted", name.escape_ascii())
            };
            let got = gnu_file_name(&policy, &m, &path);
            assert_eq!(got.escape_ascii().to_string(), want.escape_ascii().to_string());
        }
    }
}
