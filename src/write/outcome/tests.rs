//! The member outcome's case tables: every variant's verdict and words, the errnos that
//! concern one member, and what the library's observer is told of a kept file.

use super::*;

fn os(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// Each variant's name: a variant added without a row here fails to compile (the match), then
/// `every_variant_has_a_row` fails until the table has one.
fn variant(e: &MemberError) -> &'static str {
    match e {
        MemberError::Kept(_) => "Kept",
        MemberError::Io(_) => "Io",
        MemberError::Metadata(_) => "Metadata",
        MemberError::OwnerRefused { .. } => "OwnerRefused",
        MemberError::ThroughSymlink { .. } => "ThroughSymlink",
        MemberError::BeyondLink { .. } => "BeyondLink",
        MemberError::Refused(_) => "Refused",
        MemberError::TooManyFiles(_) => "TooManyFiles",
    }
}

const VARIANTS: [&str; 8] = [
    "Kept",
    "Io",
    "Metadata",
    "OwnerRefused",
    "ThroughSymlink",
    "BeyondLink",
    "Refused",
    "TooManyFiles",
];

#[derive(Debug, PartialEq)]
enum V {
    Kept,
    Report,
    Stop,
}

/// (error, DIR writable, verdict, GNU tar's words after the member's name with `what` =
/// "Cannot open"; None for a kept file, which is not a failure).
fn table() -> Vec<(MemberError, bool, V, Option<&'static str>)> {
    let link = || "a".to_string();
    vec![
        (MemberError::Kept(KeptExisting::Skipped), true, V::Kept, None),
        (MemberError::Kept(KeptExisting::Newer { path: "./f".into() }), false, V::Kept, None),
        (
            MemberError::Io(os(libc::ENOENT)),
            true,
            V::Report,
            Some("Cannot open: No such file or directory"),
        ),
        (
            MemberError::Io(os(libc::EACCES)),
            true,
            V::Report,
            Some("Cannot open: Permission denied"),
        ),
        (MemberError::Io(os(libc::EACCES)), false, V::Stop, Some("Cannot open: Permission denied")),
        (
            MemberError::Io(os(libc::ENOSPC)),
            true,
            V::Stop,
            Some("Cannot open: No space left on device"),
        ),
        (
            MemberError::Metadata(os(libc::EPERM)),
            true,
            V::Report,
            Some("cannot set metadata: Operation not permitted"),
        ),
        (
            MemberError::Metadata(os(libc::EROFS)),
            true,
            V::Stop,
            Some("cannot set metadata: Read-only file system"),
        ),
        (
            MemberError::owner_refused(4242, 4242, os(libc::EPERM)),
            true,
            V::Report,
            Some("Cannot change ownership to uid 4242, gid 4242: Operation not permitted"),
        ),
        (
            MemberError::owner_refused(1, 2, os(libc::EIO)),
            true,
            V::Stop,
            Some("Cannot change ownership to uid 1, gid 2: Input/output error"),
        ),
        (
            MemberError::ThroughSymlink { link: link(), source: os(libc::ENOTDIR) },
            true,
            V::Report,
            Some(
                "Cannot open: 'a' is a symlink; fastuntar does not extract through one \
                 (--keep-directory-symlink follows those inside DIR)",
            ),
        ),
        (
            MemberError::BeyondLink { link: link(), source: os(libc::ENOENT) },
            true,
            V::Report,
            Some(
                "Cannot open: No such file or directory (-h follows the symlink 'a' only \
                 inside DIR, as if DIR were /)",
            ),
        ),
        (
            MemberError::Refused("hard link to itself, and nothing is there"),
            false,
            V::Report,
            Some("Cannot open: hard link to itself, and nothing is there"),
        ),
        (
            MemberError::TooManyFiles("too many files".into()),
            true,
            V::Stop,
            Some("Cannot open: too many files"),
        ),
    ]
}

#[test]
fn every_variant_has_a_row() {
    let mut seen: Vec<&str> = table().iter().map(|(e, ..)| variant(e)).collect();
    seen.sort_unstable();
    seen.dedup();
    let mut all = VARIANTS.to_vec();
    all.sort_unstable();
    assert_eq!(seen, all);
}

#[test]
fn verdicts_and_words_by_variant() {
    for (e, writable, want, words) in table() {
        let got = match judge(&e, writable) {
            Verdict::Kept(k) => {
                assert!(matches!(&e, MemberError::Kept(kept) if kept == k), "{e:?}");
                V::Kept
            }
            Verdict::Report => V::Report,
            Verdict::Stop => V::Stop,
        };
        assert_eq!(got, want, "{e:?}, DIR writable {writable}");
        if let Some(words) = words {
            assert_eq!(e.words("Cannot open"), words, "{e:?}");
        }
    }
}

/// The system's errors that concern one member, the others the run stops for.
#[test]
fn errnos_that_concern_one_member() {
    let members = [
        libc::ENOTDIR,
        libc::ELOOP,
        libc::EEXIST,
        libc::ENOTEMPTY,
        libc::EISDIR,
        libc::ENAMETOOLONG,
        libc::EXDEV,
        libc::ENOENT,
        libc::EMLINK,
        libc::EINVAL,
        libc::EPERM,
        libc::ENOSYS,
        libc::EOPNOTSUPP,
        libc::EILSEQ,
    ];
    for errno in members {
        assert!(errno_is_members(&os(errno), false), "{errno}");
    }
    for errno in [libc::EIO, libc::ENOSPC, libc::EROFS, libc::EDQUOT, libc::EMFILE, libc::EBADF] {
        assert!(!errno_is_members(&os(errno), true), "{errno}");
    }
    assert!(errno_is_members(&os(libc::EACCES), true));
    assert!(!errno_is_members(&os(libc::EACCES), false));
    assert!(errno_is_members(&io::Error::new(io::ErrorKind::InvalidInput, "ours"), false));
    assert!(!errno_is_members(&io::Error::other("anything else"), true));
}

/// `--overwrite -h`'s failed open names the link only where the system's words would puzzle;
/// a failed chmod or time of a member made is `Metadata`, a refused chown stays itself.
#[test]
fn constructors_pick_their_variant() {
    for (errno, beyond) in [
        (libc::ENOENT, true),
        (libc::ENOTDIR, true),
        (libc::EXDEV, true),
        (libc::ELOOP, true),
        (libc::EACCES, false),
        (libc::ENOSPC, false),
    ] {
        let e = MemberError::beyond_link("l".into(), os(errno));
        assert_eq!(variant(&e), if beyond { "BeyondLink" } else { "Io" }, "{errno}");
        assert_eq!(e.errno(), Some(errno));
    }
    assert_eq!(variant(&MemberError::Io(os(libc::EPERM)).of_metadata()), "Metadata");
    let owner = MemberError::owner_refused(1, 1, os(libc::EPERM)).of_metadata();
    assert_eq!(variant(&owner), "OwnerRefused");
    let refused = MemberError::Refused("x");
    assert_eq!(variant(&refused.of_metadata()), "Refused");
    assert!(MemberError::Refused("x").into_cause().is_err());
    let limit = MemberError::from(TooManyFiles("limit".into()));
    assert_eq!(variant(&limit), "TooManyFiles");
    assert_eq!(limit.to_string(), "limit");
}

/// What the library's observer is told of a kept file (`SkipReason`, the member shown, the
/// message), and the command line's words for it.
#[test]
fn kept_files_as_the_observer_is_told() {
    let newer = KeptExisting::Newer { path: "./d/f".into() };
    let rows = [
        (
            KeptExisting::Skipped,
            Skip::Existing,
            "d/f",
            "existing file kept",
            "skipping existing file",
        ),
        (
            newer,
            Skip::KeptNewer,
            "./d/f",
            "newer file kept",
            "Current './d/f' is newer or same age",
        ),
    ];
    for (kept, reason, shown, summary, words) in rows {
        assert_eq!(kept.reason(), reason);
        assert_eq!(kept.shown("d/f"), shown);
        assert_eq!(kept.summary(), summary);
        assert_eq!(kept.to_string(), words);
    }
}
