//! The member plan: safe paths (`strip_components`, `one_top_level`), the snapshot layout and
//! the limits, owners, times, attributes, `-G`.

use super::Options;
use crate::policy::admit::{SNAPSHOT_MAX_BYTES, SNAPSHOT_MAX_FILES};
use crate::policy::plan::MemberPlan;

/// What may land and how: the snapshot layout fills the limits not given with its own.
pub(super) fn member_plan(opts: &Options) -> MemberPlan {
    let mut limits = opts.limits.clone();
    if opts.snapshot {
        limits.max_files = limits.max_files.or(Some(SNAPSHOT_MAX_FILES));
        limits.max_bytes = limits.max_bytes.or(Some(SNAPSHOT_MAX_BYTES));
    }
    MemberPlan {
        strip_components: opts.strip_components,
        one_top_level: opts.one_top_level.clone(),
        snapshot: opts.snapshot,
        limits,
        same_owner: opts.same_owner,
        numeric_owner: opts.numeric_owner,
        touch: opts.touch,
        xattrs: opts.xattrs.clone(),
        acls: opts.acls,
        incremental: opts.incremental,
    }
}
