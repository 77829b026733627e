//! The recorder thread (`Session::recorder`): `--writeback-every`'s syncfs, and the resume
//! points written as the state file each time another interval was written (src/resume/).

use super::*;

/// What the recorder needs to write states.
pub(super) struct Job {
    pub(super) fixed: Fixed,
    pub(super) options: [u8; 32],
    pub(super) dest: (u64, u64),
    /// The roots other than DIR, root 1 first (None: not opened, its probes left out).
    pub(super) roots: Vec<Option<OwnedFd>>,
    pub(super) shared: Arc<Shared>,
}

/// The recorder thread: each time another `every` bytes were written, a resume point is asked
/// for and written (its syncfs is the writeback's), or after MARK_WAIT without one, DIR's
/// filesystems are synced alone. Only this thread waits for the disk.
pub(super) fn record(
    stop: &std::sync::mpsc::Receiver<()>,
    every: u64,
    dir: &OwnedFd,
    syncs: &[OwnedFd],
    job: Option<&Job>,
    (shared, report): (&Shared, &Reporter),
) {
    let written = &report.tally.written;
    let mut last = written.load(Ordering::Relaxed);
    let mut due: Option<Instant> = None;
    loop {
        let wait = if due.is_some() { POLL_DUE } else { POLL };
        match stop.recv_timeout(wait) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let now = written.load(Ordering::Relaxed);
        if due.is_none() && now.saturating_sub(last) >= every {
            due = Some(Instant::now());
            if job.is_some() {
                shared.want.store(true, Ordering::Relaxed);
            }
        }
        let Some(since) = due else { continue };
        if let Some(job) = job
            && let Some(mark) = shared.frontier.take()
        {
            write(job, (dir, syncs), *mark, report);
            (last, due) = (now, None);
            continue;
        }
        if job.is_none() || since.elapsed() >= MARK_WAIT {
            // Errors are the final sync's (or the next run's) to report: this only starts
            // writeback, as before resume points.
            let _ = fsio::sync_all(syncs);
            (last, due) = (now, None);
        }
    }
}

/// Writes `mark` as the state file (fsio::write_state), with the probes looked at now, each
/// beneath its own root, and the run's skipped members (`report`).
fn write(job: &Job, (dir, syncs): (&OwnedFd, &[OwnedFd]), mark: Mark, report: &Reporter) {
    let mut rec = job.shared.recording.lock().unwrap_or_else(|e| e.into_inner());
    if rec.retired || rec.failed || rec.fatal.is_some() {
        return;
    }
    let probes = mark
        .probes
        .iter()
        .filter_map(|(root, path)| {
            let at = match *root {
                0 => dir,
                n => job.roots.get(usize::from(n) - 1)?.as_ref()?,
            };
            let st = fsio::stat_beneath(at, path).ok()?;
            (st.st_mode & libc::S_IFMT == libc::S_IFREG).then(|| Probe {
                root: *root,
                path: path.clone(),
                ino: st.st_ino,
                size: st.st_size as u64,
                mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            })
        })
        .collect();
    let written = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let Mark { point, mut counts, delay, dirs, globals, placed, .. } = mark;
    counts.skipped = report.skipped_count();
    // The archive file's bytes before the point; a state without them is not written (the
    // next one will try again).
    let sample = match (&job.fixed.file, &job.fixed.input) {
        (Some(f), InputId::File(id)) => {
            match sample::digest(f, sample::end(point.unit.compressed, id.size)) {
                Ok(d) => Some(d),
                Err(_) => return,
            }
        }
        _ => None,
    };
    let mut state = State {
        program: PROGRAM.into(),
        input: job.fixed.input.clone(),
        format: job.fixed.format,
        options: job.options,
        dest: job.dest,
        own_ino: 0,
        point,
        counts,
        delay,
        dirs,
        probes,
        globals,
        written,
        sample,
        placed,
    };
    if state.encode().len() > state::STATE_MAX {
        return;
    }
    match fsio::write_state(dir, syncs, &mut state) {
        Ok(()) => {
            job.shared.written.fetch_add(1, Ordering::Relaxed);
        }
        Err(fsio::WriteError::Sync(e)) => {
            rec.fatal = Some(format!("syncfs failed: {e}; the extraction cannot be trusted"));
        }
        Err(fsio::WriteError::State(e)) => {
            rec.failed = true;
            report.warn(format!(
                "cannot write the resume state ({e}); this run writes no more resume points"
            ));
        }
    }
}

/// The recorder thread; stopped (and joined) when dropped.
pub struct Recorder {
    pub(super) stop: Option<std::sync::mpsc::Sender<()>>,
    pub(super) thread: Option<thread::JoinHandle<()>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
