//! `-I PROG` (and `--lzip`, `--lzma`, `--lzop`, `-Z`): the archive is piped through an external
//! decompressor, `PROG -d`, as GNU tar does for every format. Its output is what the rest of
//! the pipeline reads; for formats fastuntar decodes itself the flag is not needed.
//!
//! The program's exit status is part of the input: when its output ends, a failure
//! (`lzip -d` on a damaged file exits 2) is the read's error, so a damaged archive fails the
//! run even when what came out so far parsed. When the reader stops early (the tar end marker,
//! an error) the program is killed on drop, so a program that writes forever or waits for a
//! terminal cannot hang the run; GNU tar likewise ignores a filter it stopped reading.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};

/// The program exited with a failure, said in GNU tar's words ("Child returned status N",
/// "Child died with signal N"), the program after them.
#[derive(Debug)]
pub struct ChildFailed {
    what: String,
    status: std::process::ExitStatus,
}

impl std::fmt::Display for ChildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::os::unix::process::ExitStatusExt;
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => write!(f, "Child returned status {code} ('{}')", self.what),
            (None, Some(sig)) => write!(f, "Child died with signal {sig} ('{}')", self.what),
            (None, None) => write!(f, "Child failed ({}; '{}')", self.status, self.what),
        }
    }
}

impl std::error::Error for ChildFailed {}

/// Whether `e` is a `ChildFailed`: said alone, without the reading it ended.
pub fn is_child_failed(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|x| x.is::<ChildFailed>())
}

pub struct Filter {
    child: Child,
    stdout: ChildStdout,
    /// The command line, for messages.
    what: String,
    /// The output ended and the status was checked.
    done: bool,
}

impl Filter {
    /// Starts `words` (program and arguments) reading `path` (None: our standard input).
    pub fn spawn(words: &[String], path: Option<&Path>) -> Result<Filter> {
        let what = words.join(" ");
        let Some((program, args)) = words.split_first().filter(|(p, _)| *p != "-d") else {
            bail!("-I: no program given");
        };
        let stdin = match path {
            None => Stdio::inherit(),
            Some(p) => {
                let f = File::open(p).with_context(|| format!("{}: Cannot open", p.display()))?;
                if f.metadata().is_ok_and(|m| m.is_dir()) {
                    bail!("{}: Cannot read: Is a directory", p.display());
                }
                Stdio::from(f)
            }
        };
        let mut child =
            Command::new(program).args(args).stdin(stdin).stdout(Stdio::piped()).spawn().map_err(
                |e| {
                    // GNU tar's words ("lzip: Cannot exec: ..."), the command line after them.
                    let why = crate::report::strerror(&e);
                    anyhow::anyhow!("{program}: Cannot exec: {why} ('{what}')")
                },
            )?;
        let stdout = child.stdout.take().expect("stdout was piped");
        Ok(Filter { child, stdout, what, done: false })
    }
}

impl Read for Filter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        let n = self.stdout.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.done = true;
            let status = self.child.wait()?;
            if !status.success() {
                return Err(io::Error::other(ChildFailed { what: self.what.clone(), status }));
            }
        }
        Ok(n)
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        if !self.done {
            // The program may still be writing, or waiting on its input: it is not needed.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn output_then_status() {
        let mut out = Vec::new();
        Filter::spawn(&words("echo hello"), None).unwrap().read_to_end(&mut out).unwrap();
        assert_eq!(out, b"hello\n");
        let mut f = Filter::spawn(&words("sh -c exit\t3"), None).unwrap();
        let e = f.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "Child returned status 3 ('sh -c exit\t3')");
        assert!(is_child_failed(&e));
        let mut f = Filter::spawn(&words("sh -c kill\t-9\t$$"), None).unwrap();
        let e = f.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "Child died with signal 9 ('sh -c kill\t-9\t$$')");
    }

    #[test]
    fn a_missing_program_is_one_line() {
        let e = Filter::spawn(&words("no-such-program-here -d"), None).err().unwrap();
        assert_eq!(
            format!("{e:#}"),
            "no-such-program-here: Cannot exec: No such file or directory \
             ('no-such-program-here -d')"
        );
        assert!(Filter::spawn(&words("-d"), None).is_err());
    }

    /// A program that would write forever, or wait forever, is stopped and reaped when the
    /// reader is done with it: afterwards its pid names no process, not even a zombie.
    #[test]
    fn dropped_early_kills_and_reaps_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let sleeper = dir.path().join("sleeper");
        std::fs::write(&sleeper, "#!/bin/sh\nexec sleep 1000\n").unwrap();
        std::fs::set_permissions(&sleeper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        for program in ["yes", sleeper.to_str().unwrap()] {
            let mut f = Filter::spawn(&words(program), None).unwrap();
            let pid = f.child.id() as libc::pid_t;
            if program == "yes" {
                let mut buf = [0u8; 4096];
                f.read_exact(&mut buf).unwrap();
            }
            let t = std::time::Instant::now();
            drop(f);
            assert!(t.elapsed() < std::time::Duration::from_secs(5), "{program}");
            // Safety: signal 0 only checks that the process exists.
            let r = unsafe { libc::kill(pid, 0) };
            let e = std::io::Error::last_os_error();
            assert!(r == -1 && e.raw_os_error() == Some(libc::ESRCH), "{program}: {r} {e}");
        }
    }
}
