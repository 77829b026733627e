//! A member's decisions (policy/member.rs) carried out where `-x` and `-O` share them: the
//! member judged and admitted, the warnings its attributes, time and type are worth said
//! through the run's reporter.

use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Result, anyhow};

use crate::archive::{Member, Timestamp, Xattr};
use crate::command::Plans;
use crate::metadata::owner::Owners;
use crate::policy::admit::Admission;
use crate::policy::member::{self, Implausible, Place};
use crate::policy::plan::MemberPlan;
use crate::policy::safety::{SafePath, Sanitizer, Verdict};
use crate::report::voice::{Fault, Skip, tag};
use crate::report::{self, Reporter};

/// What extraction and `-O` decide about a member before anything of it is written: where it
/// would be extracted after `--strip-components` and the safety rules (None: nothing to do,
/// with a warning where the member is skipped: `member::place`), and whether `--snapshot`'s
/// layout and the limits admit it (Err: the run stops, before any of it is written).
pub(crate) fn judge(
    policy: &MemberPlan,
    sanitizer: &mut Sanitizer,
    admission: &mut Admission,
    (m, name): (&Member, &str),
    report: &Reporter,
) -> Result<Option<SafePath>> {
    let path = match member::place(policy, judged(sanitizer, &m.name, report), m.kind) {
        Place::Extract(p) => p,
        Place::Nothing => return Ok(None),
        Place::Stop(why) => {
            let e = anyhow!("{name}: {why} (--snapshot stops here)");
            return Err(tag(e, Fault::Limit));
        }
        Place::Skip(why) => {
            report.skipped(name, Skip::Unsafe, why);
            return Ok(None);
        }
    };
    admission.admit(m, path.as_path()).map_err(|e| tag(anyhow!("{name}: {e:#}"), Fault::Limit))?;
    Ok(Some(path))
}

/// `sanitizer`'s verdict on `raw` (a name, a link target, a dumpdir's name), with the
/// warning it made due said to `report`.
pub(crate) fn judged(sanitizer: &mut Sanitizer, raw: &[u8], report: &Reporter) -> Verdict {
    let verdict = sanitizer.judge(raw);
    if let Some(note) = sanitizer.take_note() {
        report.warn(note);
    }
    verdict
}

/// The extended attributes to restore on `m` (`member::attributes`), an ACL that cannot be
/// read said as GNU tar says it (acl_from_text, acl_set_file_at: a warning, exit 0).
pub(crate) fn attributes(
    policy: &MemberPlan,
    m: &mut Member,
    name: &str,
    owners: &mut Owners,
    (warnings, report): (report::Warnings, &Reporter),
) -> Option<Arc<[Xattr]>> {
    let (kept, unreadable) = member::attributes(policy, m, owners);
    for e in unreadable {
        report.warning(
            warnings,
            report::Warning::XattrWrite,
            format!("{name}: cannot restore its ACL: {e}"),
        );
    }
    kept
}

/// GNU tar's `check_time` (extract.c), for a member whose time is set: a time before 1970
/// ("implausibly old time stamp") or after now ("time stamp ... is N s in the future") is
/// worth a warning (`member::implausible`; `--warning=no-timestamp` silences it; the exit
/// status stays). The name is the one GNU tar uses: as extracted, relative to DIR, without a
/// trailing `/`.
pub(crate) fn check_time(
    (plans, report): (&Plans, &Reporter),
    m: &Member,
    path: &SafePath,
    t: Timestamp,
) {
    let Some(implausible) = member::implausible(t, report.started_at(), SystemTime::now) else {
        return;
    };
    let name = report::printable(member::gnu_file_name(&plans.policy, m, path));
    let when = crate::report::time::tartime(t.secs, t.nanos, true, plans.listing.times);
    let said = match implausible {
        Implausible::Old => format!("{name}: implausibly old time stamp {when}"),
        Implausible::Future { secs, nanos } => {
            let ahead = format!("{secs}{}", crate::report::time::ns_fraction(nanos));
            format!("{name}: time stamp {when} is {ahead} s in the future")
        }
    };
    plans.report.warnings.warn(report, report::Warning::Timestamp, said);
}

/// A member of an unknown type is extracted as a regular file, as GNU tar does, with its
/// warning.
pub(crate) fn warn_unknown_type(
    (warnings, report): (report::Warnings, &Reporter),
    name: &str,
    flag: u8,
) {
    warnings.warn(
        report,
        report::Warning::UnknownCast,
        format!("{name}: unknown file type '{}', extracted as a regular file", flag.escape_ascii()),
    );
}

/// A contiguous file (type `7`) is extracted as a regular file; GNU tar 1.34 says so once per
/// run, as it creates the first (`open_output_file`; not with -O or --to-command).
pub(crate) fn warn_contiguous((warnings, report): (report::Warnings, &Reporter), said: &mut bool) {
    if !std::mem::replace(said, true) {
        let said = "Extracting contiguous files as regular files";
        warnings.warn(report, report::Warning::ContiguousCast, said);
    }
}

/// A multi-volume continuation (`M`) is the rest of a file begun in another volume: skipped.
pub(crate) fn skip_continuation(name: &str, report: &Reporter) {
    report.skipped(name, Skip::Continuation, "continued from another volume; skipped");
}

/// A member's kind as a program is told it (and a routing callback is asked with).
pub fn kind_of(kind: crate::archive::Kind) -> crate::report::voice::MemberKind {
    use crate::archive::Kind;
    use crate::report::voice::MemberKind as K;
    match kind {
        Kind::File => K::File,
        Kind::Dir => K::Dir,
        Kind::Symlink => K::Symlink,
        Kind::Hardlink => K::Hardlink,
        Kind::Fifo => K::Fifo,
        Kind::CharDev | Kind::BlockDev => K::Device,
        // A label or a multi-volume continuation; any other type is extracted as a file.
        Kind::Other(b'V' | b'M') => K::Other,
        Kind::Other(_) => K::File,
    }
}
