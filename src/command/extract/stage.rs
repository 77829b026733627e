//! One member of `-x` as ops: its path judged and admitted, what lands of it decided
//! (policy/member.rs), then by its type a directory, a link, a node, or a file and its data in
//! pool buffers: small files packed into shared buffers, large ones handed on in the decoder's
//! own buffers where they lie as the writer can write them (lend.rs).

use anyhow::anyhow;

use super::{Arrived, MemberError};
use crate::archive::{Kind, Member, Reader, Skip};
use crate::command::Plans;
use crate::command::member::{
    attributes, check_time, judge, judged, skip_continuation, warn_contiguous, warn_unknown_type,
};
use crate::lend;
use crate::metadata::owner::Owners;
use crate::plan::{Entry, Node, Op, Sink};
use crate::policy::admit::Admission;
use crate::policy::member;
use crate::policy::safety::{SafePath, Sanitizer, Verdict};
use crate::pool::{Pool, PoolBuf};
use crate::report::Reporter;
use crate::report::checkpoint;
use crate::report::voice::Skip as Skipped;
use crate::report::voice::{Fault, tag};
use crate::resume::Session;
use crate::selection::confirm::Confirm;
use crate::write::direct::DirectPolicy;
use crate::write::direct_policy::Gate;

use super::placer::{Placer, dir_record};
use crate::policy::route::{Route, Shape};

/// Files of at most this fraction of a pool buffer share buffers (`Packer`); larger ones get
/// whole buffers. 1/8 (128 KiB of a 1 MiB buffer) wastes at most that at a buffer's end.
const PACK_FRACTION: usize = 8;

pub(super) struct Stage<'a, 'b, R: Skip> {
    pub(super) plans: &'a Plans,
    pub(super) report: &'a Reporter,
    /// Our effective uid and gid (for the set-id rule).
    pub(super) ids: (u32, u32),
    pub(super) reader: &'a mut Reader<R>,
    /// `--checkpoint`, told after each chunk of data where the reader has got to.
    pub(super) checkpoints: &'a mut Option<checkpoint::Observer>,
    pub(super) sanitizer: &'a mut Sanitizer,
    /// `-G`: what the lists' renames may still walk (incremental.rs).
    pub(super) renames: &'a mut crate::policy::incremental::RenameBudget,
    pub(super) admission: &'a mut Admission,
    /// Owner names mapped to local ids, cached for the run.
    pub(super) owners: &'a mut Owners,
    pub(super) pool: &'a Pool,
    /// How the writers write each file: what a chunk handed on in the decoder's buffer must
    /// be like (lend.rs).
    pub(super) direct: DirectPolicy,
    /// Which files go direct (direct_policy.rs), from the files before.
    pub(super) gate: &'a mut Gate,
    pub(super) arrived: &'a Arrived,
    /// What -v prints (listing.rs).
    pub(super) lines: &'a mut crate::command::listing::Lines,
    /// The rest of the buffer small files are being packed into.
    pub(super) packer: &'a mut Option<PoolBuf>,
    /// `-w`: the questions asked before each member.
    pub(super) confirm: &'a mut Option<Confirm>,
    pub(super) out: &'a mut (dyn Sink + 'b),
    /// Resume points (src/resume/): the state file's own name is not overwritten.
    pub(super) session: &'a Session,
    /// The files resume points name as probes (None: no points this run).
    pub(super) probes: Option<&'a mut crate::resume::Probes>,
    /// The contiguous-file warning was said.
    pub(super) said_contiguous: &'a mut bool,
    /// `--spread`: which root each member lands in (placer.rs).
    pub(super) placer: &'a mut Placer,
}

impl<R: Skip> Stage<'_, '_, R> {
    fn send(&mut self, op: Op) -> Result<(), MemberError> {
        self.out.push(op).map_err(MemberError::from)
    }

    /// `-G`: the renames and removals of an incremental archive's directory `entry` before
    /// its `Dir` op, waited for, so that `-v`'s "Deleting" lines come before the names of the
    /// members after it (with one writer thread the op is applied on that thread).
    fn purge(&mut self, entry: &Entry, raw: Vec<u8>) -> Result<(), MemberError> {
        let list = crate::policy::incremental::plan(raw, self.sanitizer, self.renames);
        if let Some(note) = self.sanitizer.take_note() {
            self.report.warn(note);
        }
        let (done, applied) = std::sync::mpsc::sync_channel(1);
        let op = Op::Purge { entry: entry.clone(), list: Box::new(list), done: Some(done) };
        self.send(op)?;
        self.out.flush().map_err(MemberError::from)?;
        // An Err: the writer stopped without applying it (its error ends the run).
        let _ = applied.recv();
        Ok(())
    }

    /// `-v --backup`: waits until the member just sent has landed, so that the writer's
    /// `Renaming` line for it is said before the next member's name (GNU tar's order).
    pub(super) fn landed(&mut self) -> Result<(), MemberError> {
        let (done, landed) = std::sync::mpsc::sync_channel(1);
        self.send(Op::Barrier(done))?;
        self.out.flush().map_err(MemberError::from)?;
        // An Err: the writer stopped (its error ends the run).
        let _ = landed.recv();
        Ok(())
    }

    /// A pool buffer; sends the pending batch first if it would have to wait (the writer can
    /// only free buffers it has been sent).
    fn buffer(&mut self) -> Result<PoolBuf, MemberError> {
        self.report.check_cancel().map_err(MemberError::Read)?;
        if let Some(b) = self.pool.try_get() {
            return Ok(b);
        }
        // The packing buffer's rest is useless to whoever needs a whole one.
        *self.packer = None;
        self.out.flush().map_err(MemberError::from)?;
        Ok(self.pool.get())
    }

    /// Room for `n` bytes of a small file: a piece of the packing buffer (a fresh one when the
    /// rest is too small), so thousands of small files fit in the pool at once.
    fn piece(&mut self, n: usize) -> Result<PoolBuf, MemberError> {
        if self.packer.as_ref().is_none_or(|b| b.capacity() < n) {
            *self.packer = None;
            let b = self.buffer()?;
            *self.packer = Some(b);
        }
        Ok(self.packer.as_mut().expect("just filled").split_to(n))
    }

    /// One member: judge its path, admit it, send its ops (and data).
    pub(super) fn member(&mut self, mut m: Member) -> Result<(), MemberError> {
        let plans = self.plans;
        let name = m.display_name();
        let Some(path) =
            judge(&plans.policy, self.sanitizer, self.admission, (&m, &name), self.report)?
        else {
            return Ok(());
        };
        // A member named like the state file: no more resume points, and the state goes first.
        self.session.retire_if_ours(&path);
        if let Some(confirm) = self.confirm.as_mut() {
            let asked =
                crate::selection::confirm::asked_name(plans.policy.renames(), &m.name, &path);
            if !confirm.ask("extract", &asked, self.report)? {
                return Ok(());
            }
        }
        if plans.report.verbose > 0 {
            // As `tar -xv` prints it: quoted for the locale, `-xvv` GNU tar's long lines. A
            // failed write stops the names, not the extraction; main.rs reports it at the end
            // (exit 2), as GNU tar does.
            let line = self.lines.of(&m, &plans.listing, self.reader.volume_label());
            let _ = self.report.list_line(&line, false);
        }
        let entry = self.entry(&mut m, name, path);
        self.send_member(entry, m)
    }

    /// What lands of `m` at `path`: its owner, mode, time and attributes as the member policy
    /// restores them.
    fn entry(&mut self, m: &mut Member, name: String, path: SafePath) -> Entry {
        let policy = &self.plans.policy;
        // The archive's owner, as GNU tar restores it (names looked up only when it matters:
        // ownership is restored, or set-id bits depend on it).
        let archived = member::wants_owner(policy, m.mode).then(|| self.owners.ids(m));
        let (owner, mode) = member::ownership(policy, (m.kind, m.mode), archived, self.ids);
        // `-m` (also with --snapshot: it only concerns times): no time is set at all.
        let mtime = (!policy.touch).then_some(m.mtime);
        let xattrs =
            attributes(policy, m, &name, self.owners, (self.plans.report.warnings, self.report));
        // GNU tar checks the times it sets: not a hard link's (it has its target's), not
        // what it skips.
        if let Some(t) = mtime
            && !matches!(m.kind, Kind::Hardlink | Kind::Other(b'V' | b'M'))
        {
            check_time((self.plans, self.report), m, &path, t);
        }
        Entry {
            name,
            path,
            mode,
            mtime,
            archived_mtime: m.mtime,
            owner,
            offset: m.offset,
            xattrs,
            delay_restore: m.is_dumpdir,
            root: 0,
        }
    }

    /// Sends the ops of `m`, whose `entry` is decided, by its type.
    fn send_member(&mut self, mut entry: Entry, mut m: Member) -> Result<(), MemberError> {
        let placed =
            !self.placer.is_empty() && !matches!(m.kind, Kind::Hardlink | Kind::Other(b'V' | b'M'));
        if placed {
            let shape = match m.kind {
                Kind::Dir => Shape::Dir,
                _ => Shape::Leaf(m.size),
            };
            let route =
                self.placer.place(&entry.path, shape, crate::command::member::kind_of(m.kind));
            if shape == Shape::Dir && self.placer.carries(&route) {
                self.placer.note_dir(dir_record(&entry));
            }
            match route {
                Route::To { root, path } => {
                    entry.root = root as u16;
                    entry.path = path;
                    // A routing callback may give DIR another name: not the state file's.
                    if root == 0 {
                        self.session.retire_if_ours(&entry.path);
                    }
                }
                Route::Each { roots, path } => {
                    for root in roots {
                        let mut e = entry.clone();
                        (e.root, e.path) = (root as u16, path.clone());
                        if root == 0 {
                            self.session.retire_if_ours(&e.path);
                        }
                        self.send(Op::Dir(e))?;
                    }
                    return Ok(());
                }
                other => return self.not_placed(&entry.name, other),
            }
        }
        match m.kind {
            Kind::Dir => {
                if self.plans.policy.incremental
                    && let Some(raw) = m.dumpdir.take()
                {
                    self.purge(&entry, raw)?;
                }
                self.send(Op::Dir(entry))
            }
            // A target is written as it is, but a NUL byte cannot be (GNU tar cuts it there).
            Kind::Symlink if m.link_name.contains(&0) => {
                self.report.skipped(
                    &entry.name,
                    Skipped::Unsafe,
                    "symlink target contains a NUL byte; skipped",
                );
                Ok(())
            }
            Kind::Symlink => self.send(Op::Symlink { entry, target: m.link_name }),
            Kind::Hardlink => match judged(self.sanitizer, &m.link_name, self.report) {
                Verdict::Extract(target) if !target.as_path().as_os_str().is_empty() => {
                    if self.placer.is_empty() {
                        return self.send(Op::Hardlink { entry, target });
                    }
                    match self.placer.place_link(&entry.path, &target) {
                        Ok((root, path, target)) => {
                            (entry.root, entry.path) = (root as u16, path);
                            if root == 0 {
                                self.session.retire_if_ours(&entry.path);
                            }
                            self.send(Op::Hardlink { entry, target })
                        }
                        Err(route) => self.not_placed(&entry.name, route),
                    }
                }
                _ => {
                    let why = "hard link target is unsafe or empty; skipped";
                    self.report.skipped(&entry.name, Skipped::Unsafe, why);
                    Ok(())
                }
            },
            Kind::Fifo => self.send(Op::Special { entry, node: Node::Fifo }),
            // As GNU tar and bsdtar: made where the kernel lets us (root, CAP_MKNOD); elsewhere
            // mknodat's EPERM is reported and the member skipped.
            Kind::CharDev => {
                let node = Node::Char { major: m.dev_major, minor: m.dev_minor };
                self.send(Op::Special { entry, node })
            }
            Kind::BlockDev => {
                let node = Node::Block { major: m.dev_major, minor: m.dev_minor };
                self.send(Op::Special { entry, node })
            }
            // A GNU volume label names the archive, not a file: GNU tar ignores it.
            Kind::Other(b'V') => Ok(()),
            Kind::Other(b'M') => {
                skip_continuation(&entry.name, self.report);
                Ok(())
            }
            Kind::Other(flag) => {
                warn_unknown_type((self.plans.report.warnings, self.report), &entry.name, flag);
                self.file(entry, &m)
            }
            Kind::File => {
                if m.type_flag == b'7' {
                    warn_contiguous(
                        (self.plans.report.warnings, self.report),
                        self.said_contiguous,
                    );
                }
                self.file(entry, &m)
            }
        }
    }

    /// A member placement did not place (`route`: not `To` or `Each`): told why, or, for a
    /// routing callback's answer no member can have, the end of the run (`Error::Options`).
    fn not_placed(&mut self, name: &str, route: Route) -> Result<(), MemberError> {
        match route {
            Route::Skip => {
                self.report.kept(name, Skipped::Routed, "skipped by the routing callback");
            }
            Route::Refuse(why) => self.report.skipped(name, Skipped::Refused, why),
            Route::Unsafe(why) => self.report.skipped(name, Skipped::Unsafe, why),
            Route::Broken(why) => {
                return Err(MemberError::Fatal(tag(anyhow!("{name}: {why}"), Fault::Options)));
            }
            Route::To { .. } | Route::Each { .. } => {}
        }
        Ok(())
    }

    /// A regular file: the File op, its data in pool buffers, End.
    fn file(&mut self, entry: Entry, m: &Member) -> Result<(), MemberError> {
        let name = entry.name.clone();
        // A probe is looked at in the root the file is placed in (0: DIR).
        if let Some(p) = self.probes.as_deref_mut() {
            p.note(entry.root, &entry.path);
        }
        let sparse = m.sparse.is_some();
        let consumed = self.arrived.consumed.load(std::sync::atomic::Ordering::Relaxed);
        let way = self.gate.file(m.size, sparse, consumed);
        if way.opened {
            self.arrived.dropper.drop_behind();
        }
        self.send(Op::File { entry, size: m.size, sparse, direct: way.direct })?;
        let small = m.sparse.is_none() && m.size <= (self.pool.buf_size() / PACK_FRACTION) as u64;
        if small {
            if m.size > 0 {
                let mut buf = self.piece(m.size as usize)?;
                let got = self.reader.read_data(buf.full_mut());
                checkpoint::data_read(self.checkpoints, self.reader.offset(), self.reader.format());
                let got = got.map_err(|e| anyhow!("{e:#}; {name} is left incomplete"))?;
                if let Some((offset, n)) = got {
                    buf.set_len(n);
                    self.send(Op::Data { offset, buf })?;
                }
                // The input ended inside the data: what arrived is sent, not the End.
                self.reader.check().map_err(|e| anyhow!("{e:#}; {name} is left incomplete"))?;
            }
            return self.send(Op::End);
        }
        if m.sparse.is_none() {
            let lent = self.data(&name, lend::Rule::for_file(&self.direct, way.direct))?;
            self.send(Op::End)?;
            if lent {
                // A direct file's last lent piece (its buffered tail) is held by the writer
                // until the End: sent now, so that no decoder buffer waits on a batch this
                // thread holds while it waits for the decoder.
                self.out.flush().map_err(MemberError::from)?;
            }
            return Ok(());
        }
        loop {
            let mut buf = self.buffer()?;
            let got = self.reader.read_data(buf.full_mut());
            checkpoint::data_read(self.checkpoints, self.reader.offset(), self.reader.format());
            let got = got.map_err(|e| anyhow!("{e:#}; {name} is left incomplete"))?;
            let Some((offset, n)) = got else { break };
            buf.set_len(n);
            self.send(Op::Data { offset, buf })?;
        }
        self.send(Op::End)
    }

    /// A large member's data, chunk by chunk: handed on in the decoder's own buffer where it
    /// lies there as the writer can write it (`lend::take` under `rule`), else read into a
    /// file buffer. Whether any chunk was handed on.
    fn data(&mut self, name: &str, rule: lend::Rule) -> Result<bool, MemberError> {
        let incomplete = |e: anyhow::Error| anyhow!("{e:#}; {name} is left incomplete");
        let mut handed = false;
        loop {
            // A large file is cancelled between its chunks, not only between members.
            self.report.check_cancel().map_err(MemberError::Read)?;
            let ahead = self.reader.data_ahead();
            let Some(ahead) = ahead.map_err(incomplete)? else { return Ok(handed) };
            let (offset, left) = (ahead.offset, ahead.left);
            match lend::take(offset, left, ahead.ahead, rule, self.pool.buf_size()) {
                lend::Take::Lend(n) => {
                    let lent = self.reader.lend_data(n);
                    checkpoint::data_read(
                        self.checkpoints,
                        self.reader.offset(),
                        self.reader.format(),
                    );
                    let (offset, buf) = lent.map_err(incomplete)?;
                    self.send(Op::Data { offset, buf })?;
                    handed = true;
                    // Sent at once: while a batch holds a decoder buffer, the decoder may wait
                    // for that buffer, and this thread for the decoder.
                    self.out.flush().map_err(MemberError::from)?;
                }
                lend::Take::Straddle(rest) => {
                    let mut buf = self.buffer()?;
                    let got = self.reader.read_data(&mut buf.full_mut()[..rest]);
                    let got = got.map_err(incomplete)?;
                    let Some((offset, mut len)) = got else { return Ok(handed) };
                    // The reader has moved past its buffer: where the next bytes lie. Where
                    // the input ends before them, what was read is sent all the same, and the
                    // reader's error (sticky) ends the loop at the next `data_ahead`.
                    let next = match len == rest {
                        true => self.reader.data_ahead().ok().flatten(),
                        false => None,
                    };
                    let want = match (next, rule) {
                        (Some(next), lend::Rule::Direct { unit, .. }) => {
                            let size = self.pool.buf_size();
                            lend::straddle_len(rest, left, next.ahead, unit, size)
                        }
                        _ => rest,
                    };
                    if want > rest
                        && let Ok(Some((_, more))) =
                            self.reader.read_data(&mut buf.full_mut()[rest..want])
                    {
                        len += more;
                    }
                    checkpoint::data_read(
                        self.checkpoints,
                        self.reader.offset(),
                        self.reader.format(),
                    );
                    buf.set_len(len);
                    self.send(Op::Data { offset, buf })?;
                }
                lend::Take::Copy(n) => {
                    let mut buf = self.buffer()?;
                    let got = self.reader.read_data(&mut buf.full_mut()[..n]);
                    checkpoint::data_read(
                        self.checkpoints,
                        self.reader.offset(),
                        self.reader.format(),
                    );
                    let got = got.map_err(incomplete)?;
                    let Some((offset, n)) = got else { return Ok(handed) };
                    buf.set_len(n);
                    self.send(Op::Data { offset, buf })?;
                }
            }
        }
    }
}
