//! The member loop on the decoder's side of `-x`: each member read, a resume point before it
//! when one is due, selected, judged and handed to `stage.rs` for its ops.

use anyhow::Result;

use super::placer::{Placer, dir_entry};
use super::stage::Stage;
use super::{MemberError, Pipe, Stream, WriterGone};
use crate::archive::Member;
use crate::command::Plans;
use crate::metadata::owner::Owners;
use crate::plan::{Op, Sink, Stop};
use crate::policy::admit::{Admission, FileCount};
use crate::policy::safety::Sanitizer;
use crate::pool::PoolBuf;
use crate::reading::Reading;
use crate::report::Reporter;
use crate::report::voice::{Fault, tag};
use crate::resume::Session;
use crate::selection::confirm::Confirm;
use crate::write::direct_policy::Gate;
use std::sync::Arc;

/// What the member loop keeps from one member to the next.
struct Kept {
    sanitizer: Sanitizer,
    /// `-G`: what the lists' renames may still walk (incremental.rs).
    renames: crate::policy::incremental::RenameBudget,
    admission: Admission,
    owners: Owners,
    lines: crate::command::listing::Lines,
    packer: Option<PoolBuf>,
    confirm: Option<Confirm>,
    probes: crate::resume::Probes,
    /// The contiguous-file warning was said (once per run).
    said_contiguous: bool,
    /// Which files go direct: the bytes of files seen so far (direct_policy.rs).
    gate: Gate,
    /// `--spread`: which root each member lands in.
    placer: Placer,
}

impl Kept {
    fn new(plans: &Plans, files: Arc<FileCount>, gate: Gate, session: &Session) -> Kept {
        let policy = &plans.policy;
        let selection = &plans.selection;
        Kept {
            sanitizer: Sanitizer::new(policy.strip_components, policy.one_top_level.as_deref()),
            renames: crate::policy::incremental::RenameBudget::default(),
            admission: Admission::new(policy.snapshot, policy.limits.clone(), files),
            owners: Owners::new(policy.numeric_owner),
            lines: crate::command::listing::Lines::new(&plans.listing, plans.report.verbose > 1),
            packer: None,
            confirm: selection.interactive.then(|| Confirm::new(selection.stdin_taken, false)),
            probes: crate::resume::Probes::default(),
            said_contiguous: false,
            gate,
            placer: Placer::new(plans.writer.placement.clone(), session.resumed_placed()),
        }
    }
}

/// The members read when the writer stopped (`Stop::Gone`: its own error says why), or the
/// sink's own failure.
fn stopped(members: u64, stop: Stop) -> Result<u64> {
    match stop {
        Stop::Gone => Ok(members),
        Stop::Fatal(e) => Err(e),
    }
}

/// Where a resumed run starts: the members before its resume point and their admission
/// counts, and the directories still waiting for their metadata there, which wait again
/// before any member (the Err: the members, and why the sink took no more). 0 for a run from
/// the start.
fn resumed(
    session: &Session,
    (admission, placer): (&mut Admission, &Placer),
    out: &mut dyn Sink,
) -> Result<u64, (u64, Stop)> {
    let mut members = 0;
    if let Some((counts, n)) = session.resumed_counts() {
        admission.restore(counts.bytes, counts.files);
        members = n;
    }
    match session.carried_dirs() {
        Some(carried) => out.push(Op::Restore(Box::new(carried))).map_err(|e| (members, e)),
        None => Ok(()),
    }?;
    // The directories made in other roots than DIR before the point (`--spread`'s, or those
    // a routing callback sent there) are made again there, so that they get their metadata
    // when the archive has left them, as the interrupted run's would.
    for record in placer.resumed_dirs() {
        let Some(entry) = dir_entry(record, 0) else { continue };
        for (root, path) in placer.again(&entry.path) {
            let mut e = entry.clone();
            (e.root, e.path) = (root as u16, path);
            out.push(Op::Dir(e)).map_err(|e| (members, e))?;
        }
    }
    Ok(members)
}

/// The next member of `archive`, None at its end. On an error, the members decoded before it
/// are still written.
fn next_member(
    archive: &mut Reading,
    out: &mut dyn Sink,
    report: &Reporter,
) -> Result<Option<Member>> {
    let next = archive.next_member();
    // -R's lines for zero blocks; a failed write is said at the end (report.rs).
    let _ = archive.say_ends(&mut |line| report.list_line(line, false));
    next.inspect_err(|_| {
        let _ = out.flush();
    })
}

/// Reads members, judges their paths and sends the ops. Returns the number of members. With
/// `--spread` the ops go through the spread roots' sink (write/roots.rs) first.
pub(super) fn produce(pipe: Pipe<'_>, input: Stream, out: &mut dyn Sink) -> Result<u64> {
    let Some((txs, shared)) = pipe.lanes.and_then(|l| Some((l.take()?, l.shared.clone()))) else {
        return produce_into(pipe, input, out);
    };
    let mut roots = crate::write::roots::Roots::new(out, txs, shared);
    let produced = produce_into(pipe, input, &mut roots);
    roots.close();
    produced
}

fn produce_into(pipe: Pipe<'_>, input: Stream, out: &mut dyn Sink) -> Result<u64> {
    let Pipe { plans, pool, files, direct, gate, session, report, lanes: _ } = pipe;
    let Stream { mut archive, arrived } = input;
    // `--keep-archive`'s copy is named in `run`, once no member can land any more.
    archive.copy_named_later = true;
    let mut kept = Kept::new(plans, files, gate, session);
    let utf8 = crate::report::locale::utf8_locale();
    // Safety: geteuid/getegid have no preconditions.
    let ids = unsafe { (libc::geteuid(), libc::getegid()) };
    let keep_probes = session.keeps_probes();
    let mut members = match resumed(session, (&mut kept.admission, &kept.placer), out) {
        Ok(members) => members,
        Err((members, stop)) => return stopped(members, stop),
    };
    let mut last_name = Vec::new();
    let says_renaming = plans.report.verbose > 0 && plans.writer.backup.is_some();
    loop {
        if report.cancelled() {
            // What was sent lands; the resume state stays at its last point, as after a kill.
            let _ = out.flush();
            return Err(crate::report::voice::cancelled());
        }
        let next = next_member(&mut archive, out, report);
        let at = archive.reader.offset();
        let Some(mut member) =
            next.map_err(|e| tag(e, Fault::Archive { offset: at, member: None }))?
        else {
            break;
        };
        // A resume point before this member, when the recorder asked for one.
        let (wanted, admission, probes) = (archive.wanted(), &kept.admission, &kept.probes);
        // With more spread directories than a point carries, none is taken.
        if let Some(mut mark) =
            session.mark(&archive.reader, &member, members, wanted, admission, probes)
            && let Some(placed) = kept.placer.at_point()
        {
            mark.placed = placed;
            if let Err(e) = out.push(Op::Mark(mark)) {
                return stopped(members, e);
            }
        }
        members += 1;
        report.tally.members.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !archive.wants(&mut member) {
            continue;
        }
        report.started(&member.name, crate::command::member::kind_of(member.kind), member.size);
        // For the error that may end the run in this member (no allocation once it has grown).
        last_name.clear();
        last_name.extend_from_slice(&member.name);
        let mut stage = Stage {
            plans,
            report,
            ids,
            reader: &mut archive.reader,
            checkpoints: &mut archive.checkpoints,
            sanitizer: &mut kept.sanitizer,
            renames: &mut kept.renames,
            admission: &mut kept.admission,
            owners: &mut kept.owners,
            pool,
            direct,
            gate: &mut kept.gate,
            arrived: &arrived,
            lines: &mut kept.lines,
            packer: &mut kept.packer,
            confirm: &mut kept.confirm,
            out: &mut *out,
            session,
            probes: keep_probes.then_some(&mut kept.probes),
            said_contiguous: &mut kept.said_contiguous,
            placer: &mut kept.placer,
        };
        match stage.member(member).and_then(|()| match says_renaming {
            true => stage.landed(),
            false => Ok(()),
        }) {
            Ok(()) => crate::mark::hook::at(crate::mark::hook::Event::Member),
            Err(MemberError::Gone(WriterGone)) => return Ok(members),
            // What was decoded before the error is still written.
            Err(MemberError::Fatal(e)) => {
                let _ = out.flush();
                return Err(e);
            }
            Err(MemberError::Read(e)) => {
                let _ = out.flush();
                let member = Some(String::from_utf8_lossy(&last_name).into_owned());
                return Err(tag(e, Fault::Archive { offset: archive.reader.offset(), member }));
            }
        }
    }
    if let Err(e) = flush_at_end(out, session.writes_points()) {
        return stopped(members, e);
    }
    let at = archive.reader.offset();
    archive.finish(utf8).map_err(|e| tag(e, Fault::Archive { offset: at, member: None }))?;
    Ok(members)
}

/// Sends what the sink holds after the last member. Its failure is the sink's own: the
/// dispatcher's directory or link, or on one thread the writer's last writes, closes and
/// metadata, which only the flush lands. A kill test armed at the first state waits here
/// for it (mark/hook.rs `before_end`), the sink flushed meanwhile so points get published;
/// only when this run `writes_points` (with `--no-resume` none ever comes).
fn flush_at_end(out: &mut dyn Sink, writes_points: bool) -> Result<(), Stop> {
    let mut flushed = out.flush();
    crate::mark::hook::before_end(writes_points, || {
        if flushed.is_ok() {
            flushed = out.flush();
        }
    });
    flushed
}
