//! `-O/--to-stdout`: the data of every member that would be extracted as a regular file
//! (`admit::extracted_as_file`), written to standard output in archive order as `tar -xOf`
//! writes it; a GNU sparse file at its full size, its holes as zeros. Directories, links,
//! FIFOs and devices write nothing, and nothing is created on disk (`-C` is not used).
//!
//! Members are judged as extraction judges them (`extract::judge`: `--strip-components`, the
//! safety rules, `--snapshot`, the limits), so `-O` writes exactly the files `-x` would create.
//! `-v` names go to stderr, keeping stdout the data alone, as GNU tar does with `-O`; there is
//! no progress bar or summary line (they would draw over a pager reading the pipe).
//!
//! `--to-command=COMMAND` (GNU tar's) is the same stage with another destination: each such
//! member's data goes to its own `/bin/sh -c COMMAND`, which finds the member described in
//! `TAR_*` environment variables (`Piped::env`); `-v` names go to stdout then, as GNU tar
//! prints them. A command that stops reading gets no more of its member (GNU tar ignores the
//! EPIPE too); one that exits non-zero is reported, `PID: Child returned status N`, and the run
//! exits 2 at its end unless `--ignore-command-error`; one killed by a signal is a warning.
//!
//! Standard output closed early (`fastuntar -xOf A | head -c 10`) ends the run quietly with
//! exit 0, as `-t | head` does: the reader has what it wanted. GNU tar dies of SIGPIPE there
//! (status 141 in the shell). Any other failed write (a full disk) is fatal, exit 2.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result, anyhow, bail};

use crate::archive::{Format, Kind, Member, Reader, Skip};
use crate::budget::CHUNK_SIZE;
use crate::command::listing;
use crate::command::member::{judge, skip_continuation, warn_unknown_type};
use crate::command::{Command as Run, Plans};
use crate::policy::admit::{Admission, FileCount, extracted_as_file};
use crate::policy::member::gnu_file_name;
use crate::policy::safety::SafePath;
use crate::policy::safety::Sanitizer;
use crate::reading;
use crate::report::Reporter;
use crate::report::{checkpoint, locale, time};

/// Bytes gathered before one write(2) to stdout: file data is read straight into this buffer,
/// and small files share one write.
const OUT_BUF: usize = CHUNK_SIZE;

/// The buffer for a `--to-command` pipe: a pipe holds 64 KiB by default, so larger writes
/// would only wait for the command anyway.
const PIPE_BUF: usize = 64 << 10;

/// Writes the files' data to stdout; returns the number of members read. What the run says
/// and counts goes to `report`.
pub fn run(plans: &Plans, report: &Arc<Reporter>) -> Result<u64> {
    let mut archive = reading::open(&plans.input, &plans.selection, &plans.read, report)?;
    let (policy, verbose) = (&plans.policy, plans.report.verbose);
    let beside_data = beside_data(&plans.command);
    // A duplicate of fd 1, written without Stdout's line buffering (which would look for
    // newlines in every chunk of data).
    let stdout = io::stdout().as_fd().try_clone_to_owned().context("cannot use stdout")?;
    let mut out = Out { file: File::from(stdout), buf: vec![0; OUT_BUF], filled: 0 };
    let mut sanitizer = Sanitizer::new(policy.strip_components, policy.one_top_level.as_deref());
    let files = FileCount::new(policy.limits.max_files);
    let mut admission = Admission::new(policy.snapshot, policy.limits.clone(), files);
    let utf8 = locale::utf8_locale();
    let mut scratch = Vec::new();
    // -v: names, -vv: GNU tar's long lines.
    let mut lines = listing::Lines::new(&plans.listing, verbose > 1);
    let selection = &plans.selection;
    let mut confirm = selection
        .interactive
        .then(|| crate::selection::confirm::Confirm::new(selection.stdin_taken, beside_data));
    let mut members = 0;
    // The member whose data was written last, for a write that fails at the end.
    let mut last = String::new();
    loop {
        let next = archive.next_member();
        // -R's lines for zero blocks, beside the data as the names.
        let _ = archive.say_ends(&mut |line| report.list_line(line, beside_data));
        let mut m = match next {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => return Err(out.flush_before(e)),
        };
        members += 1;
        if !archive.wants(&mut m) {
            continue;
        }
        let name = m.display_name();
        let judged = judge(policy, &mut sanitizer, &mut admission, (&m, &name), report);
        let Some(path) = judged.map_err(|e| out.flush_before(e))? else { continue };
        if let Some(confirm) = confirm.as_mut() {
            let asked = crate::selection::confirm::asked_name(policy.renames(), &m.name, &path);
            if !confirm.ask("extract", &asked, report).map_err(|e| out.flush_before(e))? {
                continue;
            }
        }
        if verbose > 0 {
            let listed = lines.of(&m, &plans.listing, archive.reader.volume_label());
            // Beside the data on stdout: on stderr (or in the index file).
            let _ = report.list_line(&listed, beside_data);
        }
        match m.kind {
            Kind::Other(b'M') => skip_continuation(&name, report),
            Kind::Other(b'V') => {}
            Kind::Other(flag) => warn_unknown_type((plans.report.warnings, report), &name, flag),
            _ => {}
        }
        // Directories, links, FIFOs, devices: nothing to write, as in GNU tar.
        if !extracted_as_file(m.kind) {
            continue;
        }
        if let Run::ToCommand { command, ignore_errors } = &plans.command {
            let (m, path, name, ignore_errors) = (&m, &path, &name, *ignore_errors);
            let run = Piped { plans, report, command, ignore_errors, m, path, name };
            run.feed(&mut archive.reader, &mut archive.checkpoints, &mut scratch)?;
            continue;
        }
        match data(&mut archive.reader, &mut archive.checkpoints, &m, &mut out, &mut scratch) {
            Ok(()) => last = name,
            Err(Failure::Write(e)) => return stopped(members, &name, e),
            Err(Failure::Read(e)) => {
                let e = anyhow!("{e:#}; the data of {name} on stdout is incomplete");
                return Err(out.flush_before(e));
            }
        }
    }
    if let Err(e) = out.flush() {
        return stopped(members, &last, e);
    }
    archive.finish(utf8)?;
    Ok(members)
}

/// A failed write to stdout: a closed pipe ends the run quietly (nobody reads what would
/// follow, and decoding the rest of the archive would be wasted); anything else is fatal.
fn stopped(members: u64, name: &str, e: io::Error) -> Result<u64> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return Ok(members);
    }
    bail!("{name}: stdout: write error: {e}")
}

/// One member's data piped into its own run of `--to-command`.
struct Piped<'a> {
    plans: &'a Plans,
    report: &'a Reporter,
    /// `--ignore-command-error`.
    ignore_errors: bool,
    command: &'a str,
    m: &'a Member,
    path: &'a SafePath,
    name: &'a str,
}

impl Piped<'_> {
    /// Runs the command, writes the data into its standard input, closes it and waits. The
    /// command's failure is reported (exit 2 at the end) and the run goes on; the archive's is
    /// the run's.
    fn feed<R: Skip>(
        &self,
        reader: &mut Reader<R>,
        checkpoints: &mut Option<checkpoint::Observer>,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(self.command)
            .env_remove("TAR_MINOR")
            .env_remove("TAR_MAJOR")
            .env_remove("TAR_LINKNAME")
            .env_remove("TAR_UNAME")
            .env_remove("TAR_GNAME")
            .envs(self.env())
            .stdin(Stdio::piped())
            .spawn()
            .with_context(|| format!("{}: cannot run /bin/sh -c {}", self.name, self.command))?;
        let pid = child.id();
        let stdin = child.stdin.take().expect("stdin was piped");
        let mut pipe =
            Out { file: File::from(OwnedFd::from(stdin)), buf: vec![0; PIPE_BUF], filled: 0 };
        let fed = data(reader, checkpoints, self.m, &mut pipe, scratch)
            .and_then(|()| pipe.flush().map_err(Failure::Write));
        // End of its input: the command finishes.
        drop(pipe);
        let status = child.wait().with_context(|| format!("{}: waiting for {pid}", self.name))?;
        match fed {
            Ok(()) => {}
            // The command stopped reading: it gets no more (and the reader skips the rest).
            Err(Failure::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => {}
            Err(Failure::Write(e)) => {
                self.report.failed(self.name, format!("cannot write to {pid}: {e}"))
            }
            Err(Failure::Read(e)) => {
                return Err(anyhow!("{e:#}; {} got its data incomplete", self.name));
            }
        }
        if let Some(code) = status.code() {
            if code != 0 && !self.ignore_errors {
                self.report.failed(&pid.to_string(), format!("Child returned status {code}"));
            }
        } else if let Some(signal) = status.signal() {
            self.report.warn(format!("{pid}: Child terminated on signal {signal}"));
        }
        Ok(())
    }

    /// GNU tar's `stat_to_env` for a regular file.
    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let (plans, m) = (self.plans, self.m);
        let os = |b: &[u8]| OsStr::from_bytes(b).to_os_string();
        let time = |secs: i64, nanos: u32| -> std::ffi::OsString {
            format!("{secs}{}", time::ns_fraction(nanos)).into()
        };
        // TAR_ATIME and TAR_CTIME: GNU tar gives its start time for members without them.
        let start = self.report.started_at();
        let start = start.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let start = time(start.as_secs() as i64, start.subsec_nanos());
        let file = os(gnu_file_name(&plans.policy, m, self.path));
        let mut env = plans.tar_env.to_vec();
        env.extend([
            ("TAR_VOLUME", "1".into()),
            ("TAR_FORMAT", m.format.name().into()),
            ("TAR_FILETYPE", "f".into()),
            ("TAR_MODE", format!("0{:o}", m.mode & 0o7777).into()),
            ("TAR_FILENAME", file.clone()),
            ("TAR_REALNAME", file),
            ("TAR_ATIME", start.clone()),
            ("TAR_MTIME", time(m.mtime.secs, m.mtime.nanos)),
            ("TAR_CTIME", start),
            ("TAR_SIZE", m.size.to_string().into()),
            ("TAR_UID", m.uid.to_string().into()),
            ("TAR_GID", m.gid.to_string().into()),
        ]);
        // A V7 header has no owner names: GNU tar leaves them unset.
        if m.format != Format::V7 {
            env.push(("TAR_UNAME", os(&m.uname)));
            env.push(("TAR_GNAME", os(&m.gname)));
        }
        env
    }
}

enum Failure {
    /// The archive could not be read (the reader's error names the member).
    Read(anyhow::Error),
    /// Stdout could not be written.
    Write(io::Error),
}

/// Writes one member's data. A regular member's data is read straight into the output buffer;
/// a sparse member's segments through `scratch`, with zeros for the holes before, between and
/// after them, to its full size.
fn data<R: Skip>(
    reader: &mut Reader<R>,
    checkpoints: &mut Option<checkpoint::Observer>,
    m: &Member,
    out: &mut Out,
    scratch: &mut Vec<u8>,
) -> Result<(), Failure> {
    if m.sparse.is_none() {
        loop {
            let spare = out.spare().map_err(Failure::Write)?;
            let got = reader.read_data(spare);
            checkpoint::data_read(checkpoints, reader.offset(), reader.format());
            match got.map_err(Failure::Read)? {
                Some((_, n)) => out.filled += n,
                None => return Ok(()),
            }
        }
    }
    scratch.resize(OUT_BUF, 0);
    let mut pos = 0;
    loop {
        let got = reader.read_data(scratch);
        checkpoint::data_read(checkpoints, reader.offset(), reader.format());
        let Some((offset, n)) = got.map_err(Failure::Read)? else { break };
        // The reader checked the map (in order, no overlaps, within the size); a chunk before
        // what was written already would corrupt the output, so it is not trusted blindly.
        if offset < pos {
            return Err(Failure::Read(anyhow!("{}: sparse data out of order", m.display_name())));
        }
        out.zeros(offset - pos).map_err(Failure::Write)?;
        out.write(&scratch[..n]).map_err(Failure::Write)?;
        pos = offset + n as u64;
    }
    out.zeros(m.size.saturating_sub(pos)).map_err(Failure::Write)
}

/// Stdout behind a buffer of OUT_BUF bytes, written with write(2) only when full (and at the
/// end), so a 1 GB file is a thousand writes and ten thousand small files a few.
struct Out {
    file: File,
    buf: Vec<u8>,
    /// Bytes of `buf` waiting to be written.
    filled: usize,
}

impl Out {
    /// The free rest of the buffer (never empty: a full buffer is written out first).
    fn spare(&mut self) -> io::Result<&mut [u8]> {
        if self.filled == self.buf.len() {
            self.flush()?;
        }
        Ok(&mut self.buf[self.filled..])
    }

    fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let spare = self.spare()?;
            let n = spare.len().min(data.len());
            spare[..n].copy_from_slice(&data[..n]);
            self.filled += n;
            data = &data[n..];
        }
        Ok(())
    }

    fn zeros(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            let spare = self.spare()?;
            let k = usize::try_from(n).unwrap_or(usize::MAX).min(spare.len());
            spare[..k].fill(0);
            self.filled += k;
            n -= k as u64;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.file.write_all(&self.buf[..self.filled]);
        self.filled = 0;
        r
    }

    /// Writes out what was read before `e` (as extraction lands the members decoded before an
    /// error), then gives `e` back: the archive's error is the run's.
    fn flush_before(&mut self, e: anyhow::Error) -> anyhow::Error {
        let _ = self.flush();
        e
    }
}

/// Whether stdout carries the members' data, so the listing goes to stderr (not with
/// `--to-command`, whose commands get the data).
fn beside_data(command: &Run) -> bool {
    !matches!(command, Run::ToCommand { .. })
}
