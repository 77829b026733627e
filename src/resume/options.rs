//! The digest of the options that change what lands in DIR (pure): a state file is resumed
//! only by a run whose digest is the same, so a resumed run never extracts the members before
//! its resume point one way and those after it another.
//!
//! Hashed: selection (MEMBERs and `-T` names as resolved, with their switches, `-K`,
//! `--occurrence`, `--no-recursion`), exclusion (`--exclude`, `-X`, the VCS and backup lists),
//! names (`--transform`, `--pax-option delete=`, `--strip-components`, `--one-top-level`, `-i`),
//! writing (`-U`, `--recursive-unlink`, `--keep-directory-symlink`, `-h`, `-m`), metadata
//! (`-p`, `--same-owner`, `--numeric-owner`, `--xattrs` and its filter, `--acls`, the umask,
//! the effective uid and gid), the limits (`--snapshot`, `--max-*`, `--max-window`) and
//! `--delay-directory-restore`, `-V`, `--spread`. Not hashed, since they change only speed or what is said:
//! `--threads`, `--writer-threads`, `--io`, `--direct-io*`, `--memory`, `--writeback-every`,
//! `-v`, `-q`, `--json`, `--sync`, `--quoting-style`, `-R`, `--index-file`, `--totals`,
//! `--checkpoint*`, `--show-*`, `--full-time`, the URL's connections and timeouts.
//!
//! The text hashed is the options' `Debug` form, so a state is tied to the fastuntar that
//! wrote it (the state records the version, and another version is refused by name).

use sha2::{Digest, Sha256};

use crate::decode::plan::InputPlan;
use crate::policy::plan::MemberPlan;
use crate::reading::ReadPlan;
use crate::selection::plan::SelectionPlan;
use crate::write::plan::WriterPlan;

/// The digest of the options that change what lands; `transforms` are the `--transform`
/// arguments as given (the compiled expressions keep no text).
pub fn digest(
    input: &InputPlan,
    selection: &SelectionPlan,
    policy: &MemberPlan,
    writer: &WriterPlan,
    read: &ReadPlan,
    transforms: &[String],
) -> [u8; 32] {
    let umask = crate::resources::process_umask();
    // Safety: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut h = Sha256::new();
    let mut field = |name: &str, value: String| {
        h.update((name.len() as u32).to_le_bytes());
        h.update(name.as_bytes());
        h.update((value.len() as u64).to_le_bytes());
        h.update(value.as_bytes());
    };
    field("members", format!("{:?}", selection.members));
    field("starting_file", format!("{:?}", selection.starting_file));
    field("occurrence", format!("{:?}", selection.occurrence));
    field("recursion", format!("{:?}", selection.recursion));
    field("exclude", format!("{:?}", selection.exclude));
    field("transform", format!("{transforms:?}"));
    field("pax_delete", format!("{:?}", read.pax_delete));
    field("strip_components", format!("{:?}", policy.strip_components));
    field("one_top_level", format!("{:?}", policy.one_top_level));
    field("ignore_zeros", format!("{:?}", read.ignore_zeros));
    field("old_files", format!("{:?}", writer.old_files));
    field("recursive_unlink", format!("{:?}", writer.recursive_unlink));
    field("keep_directory_symlink", format!("{:?}", writer.keep_directory_symlink));
    field("dereference", format!("{:?}", writer.dereference));
    if writer.write_through {
        // Only when on: the states of runs without it keep their digest.
        field("write_through", "true".to_string());
    }
    field("touch", format!("{:?}", policy.touch));
    field("preserve_permissions", format!("{:?}", writer.exact_modes));
    field("same_owner", format!("{:?}", policy.same_owner));
    field("numeric_owner", format!("{:?}", policy.numeric_owner));
    field("xattrs", format!("{:?}", policy.xattrs));
    field("acls", format!("{:?}", policy.acls));
    field("ids", format!("{umask:o} {uid} {gid}"));
    field("snapshot", format!("{:?}", policy.snapshot));
    field("limits", format!("{:?}", policy.limits));
    field("max_window_log", format!("{:?}", input.max_window_log));
    field("delay_directory_restore", format!("{:?}", writer.delay_restore));
    field("label", format!("{:?}", read.label));
    field("filter", format!("{:?}", input.filter));
    // `--spread`: the prefixes and the roots (absolute): a rerun with other roots would put
    // the members after the point elsewhere than those before it.
    field("spread", format!("{:?}", writer.placement));
    h.finalize().into()
}

/// `digest` with a library caller's routing (`Restore::route`) added to it: that a callback
/// routes, and over which roots (`Placement`'s `Debug`). The callback's rule cannot be
/// hashed: a rerun must route by the same rule (src/api/route.rs says so).
pub fn with_placement(digest: [u8; 32], placement: &crate::policy::route::Placement) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(digest);
    h.update(format!("{placement:?}").as_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    fn digest_of(extra: &[&str]) -> [u8; 32] {
        let mut argv: Vec<std::ffi::OsString> =
            ["fastuntar", "-x", "-f", "a.tar.zst", "-C", "/nonexistent-dir"].map(Into::into).into();
        argv.extend(extra.iter().map(Into::into));
        let edge = crate::cli::resolve::tests::edge();
        let plans = crate::cli::resolve::resolve(crate::cli::parse(argv), &edge, &mut Vec::new());
        plans.unwrap().resume.options
    }

    /// What changes what lands changes the digest; what changes only speed or what is said
    /// does not.
    #[test]
    fn the_options_that_decide_what_lands() {
        let base = digest_of(&[]);
        assert_eq!(base, digest_of(&[]));
        for same in [
            &["--threads", "4"][..],
            &["--writer-threads", "2"],
            &["--io", "portable"],
            &["--direct-io"],
            &["-v"],
            &["--json"],
            &["--writeback-every", "64M"],
            &["--memory", "128M"],
        ] {
            assert_eq!(digest_of(same), base, "{same:?}");
        }
        for other in [
            &["--strip-components", "1"][..],
            &["--transform", "s/a/b/"],
            &["--exclude", "x"],
            &["--snapshot"],
            &["-m"],
            &["--max-files", "10"],
            &["src"],
            &["--delay-directory-restore"],
            &["--one-top-level=top"],
        ] {
            assert_ne!(digest_of(other), base, "{other:?}");
        }
        assert_ne!(digest_of(&["--transform", "s/a/c/"]), digest_of(&["--transform", "s/a/b/"]));
    }
}
