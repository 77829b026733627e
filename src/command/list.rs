//! `-t/--list`: member names like `tar -tf`, and with `-v` lines like `tar -tvf`.

use std::io::{self, Write};
use std::sync::Arc;

use anyhow::Result;

use crate::command::Plans;
use crate::command::listing::Lines;
use crate::reading::open;
use crate::report::Reporter;
use crate::report::locale::utf8_locale;

/// Lists as `plans` say; what the run says and counts goes to `report`.
pub fn run(plans: &Plans, report: &Arc<Reporter>) -> Result<u64> {
    let mut archive = open(&plans.input, &plans.selection, &plans.read, report)?;
    let verbose = plans.report.verbose;
    let mut out = io::BufWriter::new(report.listing());
    let utf8 = utf8_locale();
    let mut lines = Lines::new(&plans.listing, verbose > 0);
    // Checkpoints and "Omitting" lines print straight to stdout and stderr: each line goes out
    // before them.
    let line_by_line = archive.checkpoints.is_some() || plans.read.show_omitted_dirs;
    let mut members = 0;
    loop {
        // The ends met before an error are said before it, as GNU tar does.
        let next = archive.next_member();
        if let Err(e) = archive.say_ends(&mut |line| writeln!(out, "{line}")) {
            return stopped(members, e, report);
        }
        let Some(mut m) = next? else { break };
        if !archive.wants(&mut m) {
            continue;
        }
        members += 1;
        let line = lines.of(&m, &plans.listing, archive.reader.volume_label());
        let mut written = out.write_all(&line).and_then(|()| out.write_all(b"\n"));
        if let Some(raw) = m.dumpdir.as_deref().filter(|_| verbose > 1) {
            written =
                written.and_then(|()| out.write_all(&crate::policy::incremental::listing(raw)));
        }
        if let Err(e) = written.and_then(|()| if line_by_line { out.flush() } else { Ok(()) }) {
            return stopped(members, e, report);
        }
    }
    if let Err(e) = out.flush() {
        return stopped(members, e, report);
    }
    archive.finish(utf8)?;
    Ok(members)
}

/// Listing ends at the first failed write. A closed pipe (`fastuntar -t A | head`) ends it
/// quietly: nobody is reading, and reading the rest of the archive would be wasted. Any other
/// failure (a full disk) is reported at the end of the run, exit 2, like GNU tar's "stdout:
/// write error".
fn stopped(members: u64, e: io::Error, report: &Reporter) -> Result<u64> {
    if e.kind() != io::ErrorKind::BrokenPipe {
        report.stdout_failed(&e);
    }
    Ok(members)
}
