//! `-w`/`--interactive`/`--confirmation`: GNU tar 1.34's `confirm` (misc.c). Before each
//! member that would be extracted, `extract 'NAME'?` is written where the listing goes
//! (stdout, stderr with `-O`, or `--index-file`'s FILE) and a line is read: from standard
//! input, or from /dev/tty when standard input is the archive or a `-T -`/`-X -` list. An
//! answer starting with `y` or `Y` extracts the member (rpmatch in the C locale); anything
//! else, and every question after the input ended (each then closed by a newline), skips it
//! without a message or a change to the exit code.

use std::fs::File;
use std::io::{self, BufRead, BufReader};

use anyhow::{Result, anyhow};

use crate::report;

/// The name a question shows, as GNU tar's `file_name`: the member's (transformed) name less
/// leading and trailing `/` (`./dot/f` stays so), or with `--strip-components` or
/// `--one-top-level` the path it is extracted to.
pub fn asked_name(renamed: bool, name: &[u8], path: &crate::policy::safety::SafePath) -> String {
    if renamed {
        return path.shown(crate::report::locale::utf8_locale());
    }
    let start = name.iter().position(|&b| b != b'/').unwrap_or(name.len());
    let end = name.iter().rposition(|&b| b != b'/').map_or(start, |e| e + 1).max(start);
    match &name[start..end] {
        b"" => ".".to_string(),
        n => report::quote(n, crate::report::locale::utf8_locale()),
    }
}

pub struct Confirm {
    /// Where the answers come from, opened at the first question (as GNU tar does, so an
    /// archive with nothing to extract never opens /dev/tty).
    answers: Option<Box<dyn BufRead + Send>>,
    /// Standard input is the archive's or a list's: answers come from /dev/tty.
    stdin_taken: bool,
    /// The input of answers ended: every later question is answered no.
    ended: bool,
    /// `-O`: the questions go to stderr, stdout carrying data.
    beside_data: bool,
}

impl Confirm {
    pub fn new(stdin_taken: bool, beside_data: bool) -> Confirm {
        Confirm { answers: None, stdin_taken, ended: false, beside_data }
    }

    /// Asks whether to `action` (`extract`) the member shown as `name` (escaped already).
    /// Err only when /dev/tty is needed and cannot be opened (fatal, as in GNU tar). The
    /// question goes to the listing, through `to`.
    pub fn ask(&mut self, action: &str, name: &str, to: &report::Reporter) -> Result<bool> {
        if self.answers.is_none() {
            self.answers = Some(if self.stdin_taken {
                let tty =
                    File::open("/dev/tty").map_err(|e| anyhow!("/dev/tty: Cannot open: {e}"))?;
                Box::new(BufReader::new(tty))
            } else {
                Box::new(BufReader::new(io::stdin()))
            });
        }
        let quoted = report::in_locale_quotes(name, crate::report::locale::utf8_locale());
        let _ = to.list_bytes(format!("{action} {quoted}?").as_bytes(), self.beside_data);
        let mut yes = false;
        if !self.ended {
            let mut line = Vec::new();
            let answers = self.answers.as_mut().expect("opened above");
            match answers.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => self.ended = true,
                Ok(_) => yes = matches!(line.first(), Some(b'y' | b'Y')),
            }
        }
        if self.ended {
            let _ = to.list_bytes(b"\n", self.beside_data);
        }
        Ok(yes)
    }
}
