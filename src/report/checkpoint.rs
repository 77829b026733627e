//! `--checkpoint[=N]` and `--checkpoint-action=ACTION`: GNU tar's hooks every Nth record read.
//!
//! GNU tar 1.34 counts a checkpoint each time it reads a record of the archive
//! (`checkpoint_run` at the start of buffer.c's `simple_flush_read`, before the read): a record
//! is the blocking factor times 512 bytes of the tar stream as tar reads it, decompressed
//! (10240 bytes by default, `-b`, `--record-size`). At every Nth (`--checkpoint=N`; 10 without
//! N, or with only `--checkpoint-action`) it runs the actions in command-line order
//! (checkpoint.c): `.`/`dot`, `bell`, `echo[=STRING]`, `ttyout=STRING`, `sleep=SECONDS`,
//! `exec=COMMAND`, `totals`; "Read checkpoint N" on stderr when none is given.
//!
//! fastuntar reads the stream in larger pieces, so the count follows the reader's offset
//! (`Reader::offset`): `Reading::next_member` (reading.rs) reports after each header, and the
//! three consumers' data loops (extract.rs, to_stdout.rs) after each chunk of data, and every
//! record the reader has reached by then is counted, in order. So checkpoints come during a
//! big member's data (a burst per chunk of up to 1 MiB), on the reader thread, and before the
//! name of the member whose header they reached is printed, as GNU tar prints them. Three
//! habits of GNU tar's reading that show in its count are kept:
//! - A regular, uncompressed archive file is seekable: the data of a member tar does not read
//!   (every member with `-t`, a member not extracted) is passed over with lseek, whole records
//!   at a time (`seek_archive`), and those records count no checkpoint (though `%T` and
//!   `totals` count them as read, as GNU tar does).
//! - A compressed archive file named without `-I` or a compression flag has its first record
//!   read once to learn its format before the decompressor reads it
//!   (`check_compressed_archive`): one checkpoint more, the first.
//! - With `-i` the reader goes on to the end of the input, and the read that finds it counts
//!   as a record.
//!
//! Output: dots on standard output (standard error with `-O`, where GNU tar's listing goes),
//! with no newline, as GNU tar; `echo` lines on standard error as "fastuntar: TEXT"; `bell`
//! and `ttyout` to /dev/tty. They are printed with `-q` too: they were asked for (and no
//! progress bar is drawn over them). When checkpoints are off the readers pay one branch per
//! header and per chunk (the run's `Reading` holds no `Observer`).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};

use crate::report::quoting::unquote;
use crate::report::{Reporter, totals};

/// GNU tar's `DEFAULT_CHECKPOINT`: records between checkpoints without a number.
const DEFAULT_EVERY: u32 = 10;

/// The `echo` action's text without `=STRING` (GNU tar's, for reading).
const DEFAULT_ECHO: &[u8] = b"Read checkpoint %u";

/// What `%c` stands for (checkpoint.c `def_format`).
const DEFAULT_FORMAT: &[u8] = b"%{%Y-%m-%d %H:%M:%S}t: %ds, %{read,wrote}T%*\r";

/// One of the two options, as given (`cli::parse` keeps them in command-line order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `--checkpoint=N` (`--checkpoint` alone is GNU tar's `--checkpoint=10`).
    Every(String),
    /// `--checkpoint-action=ACTION`.
    Action(String),
}

/// The checkpoint settings: how often, what to do, and whether the first read is doubled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoints {
    /// The actions run at every `every`th read (GNU tar's `checkpoint_option`, an unsigned
    /// int).
    every: u32,
    actions: Vec<Action>,
    /// A compressed archive file would have its first record read once more, to find its
    /// format (see the module doc): the archive is a file, with no `-I` and no compression
    /// flag (those name the program, and GNU tar then does not look).
    sniffs: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Dot,
    Bell,
    /// The text (`echo=STRING`, unquoted), or None for "Read checkpoint %u".
    Echo(Option<Vec<u8>>),
    TtyOut(Vec<u8>),
    Sleep(u64),
    Exec(Vec<u8>),
    Totals,
}

impl Checkpoints {
    /// The settings `args` give, as GNU tar 1.34 reads them (tar.c `CHECKPOINT_OPTION`,
    /// checkpoint.c `checkpoint_compile_action` and `checkpoint_finish_compile`): N is read as
    /// strtoul with base 0 (`0x10`, `010`), the last one given counts, and a leading `.` adds
    /// a dot action where it stands; actions run in the order given. N of 0 with no action (or
    /// neither option) is None: no checkpoints. Actions without N come every 10; N without
    /// actions echoes. A bad N or action is GNU tar's fatal error, in one line.
    pub fn new(args: &[Arg], sniffs: bool) -> Result<Option<Checkpoints>> {
        let mut every = 0;
        let mut actions = Vec::new();
        for arg in args {
            match arg {
                Arg::Every(text) => {
                    let number = match text.strip_prefix('.') {
                        Some(rest) => {
                            actions.push(Action::Dot);
                            rest
                        }
                        None => text,
                    };
                    every = strtoul(number, 0)
                        .ok_or_else(|| anyhow!("--checkpoint value is not an integer"))?
                        as u32;
                }
                Arg::Action(text) => actions.push(Action::parse(text)?),
            }
        }
        if every == 0 && actions.is_empty() {
            return Ok(None);
        }
        if every == 0 {
            every = DEFAULT_EVERY;
        }
        if actions.is_empty() {
            actions.push(Action::Echo(None));
        }
        Ok(Some(Checkpoints { every, actions, sniffs }))
    }
}

impl Action {
    fn parse(text: &str) -> Result<Action> {
        let value = |prefix: &str| text.strip_prefix(prefix).map(unquoted);
        Ok(match text {
            "." | "dot" => Action::Dot,
            "bell" => Action::Bell,
            "echo" => Action::Echo(None),
            "totals" => Action::Totals,
            _ => {
                if let Some(v) = value("echo=") {
                    Action::Echo(Some(v))
                } else if let Some(v) = value("exec=") {
                    Action::Exec(v)
                } else if let Some(v) = value("ttyout=") {
                    Action::TtyOut(v)
                } else if let Some(n) = text.strip_prefix("sleep=") {
                    match strtoul(n, 10) {
                        Some(n) => Action::Sleep(n),
                        None => bail!("{text}: not a valid timeout"),
                    }
                } else {
                    bail!("{text}: unknown checkpoint action")
                }
            }
        })
    }
}

/// GNU tar's `copy_string_unquote`: one pair of matching quotes around the whole string
/// removed (`echo='"a b"'`), then C escapes decoded (`quoting::unquote`: `\t`, `\n`, `\033`,
/// ...). A lone quote character becomes empty (GNU tar 1.34 overruns its buffer there).
fn unquoted(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    match b {
        [q @ (b'"' | b'\''), inner @ .., l] if q == l => unquote(inner),
        [b'"' | b'\''] => Vec::new(),
        _ => unquote(b),
    }
}

/// C's strtoul as GNU tar calls it, where the whole text must be the number: leading white
/// space, an optional sign (a minus negates, modulo 2^64), base 0 (`0x` hex, `0` octal) or
/// 10; a value past 2^64-1 is 2^64-1. Empty text is 0 (no digits, nothing left over). None
/// when something other than the number is there.
fn strtoul(text: &str, base: u32) -> Option<u64> {
    let b = text.as_bytes();
    let mut i = b.iter().take_while(|c| matches!(c, b' ' | b'\t'..=b'\r')).count();
    let negative = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let hex_prefix = b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
    let radix = match base {
        0 if hex_prefix => {
            i += 2;
            16
        }
        0 if b.get(i) == Some(&b'0') => 8,
        0 => 10,
        _ => base,
    };
    let digits = b[i..].iter().take_while(|c| (**c as char).is_digit(radix)).count();
    if digits == 0 {
        // No number: strtoul points back at the start, which must then be the end.
        return text.is_empty().then_some(0);
    }
    if i + digits != b.len() {
        return None;
    }
    let value = b[i..i + digits].iter().try_fold(0u64, |v, &c| {
        let d = u64::from((c as char).to_digit(radix).unwrap_or(0));
        v.checked_mul(u64::from(radix))?.checked_add(d)
    });
    Some(match value {
        None => u64::MAX,
        Some(v) if negative => v.wrapping_neg(),
        Some(v) => v,
    })
}

/// C's strtol of `%{N}*`'s N: leading digits (after blanks and a sign), 0 without any.
fn strtol(text: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(text);
    let s = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    let v = digits.parse::<i64>().unwrap_or(if digits.is_empty() { 0 } else { i64::MAX });
    if negative { -v } else { v }
}

/// `--checkpoint`'s spec and what it needs to know of the run (checkpoint.rs `start`).
#[derive(Debug, Clone)]
pub struct CheckpointPlan {
    pub spec: Checkpoints,
    /// Bytes of a tar record.
    pub record: u64,
    /// The archive file read as it is (no `-I`), whose data GNU tar would seek over when it
    /// is a regular file; None for standard input, a URL or a filter.
    pub plain_file: Option<PathBuf>,
    /// `-i`: zero blocks are read past.
    pub ignore_zeros: bool,
    /// Dots go to stderr (`-O`: stdout carries data).
    pub dots_to_stderr: bool,
    /// For `exec`: the run's TAR_* variables, and `-x` or `-t`.
    pub env: [(&'static str, OsString); 3],
    pub subcommand: &'static str,
}

/// The checkpoints of one run, watching its reader: `Reading` (reading.rs) holds it and
/// tells it where the reader has got to, after each header and each chunk of data.
pub struct Observer {
    spec: Checkpoints,
    /// Bytes of a record.
    record: u64,
    /// Reads so far (GNU tar's `checkpoint` counter).
    count: u64,
    /// Records read or passed over so far (GNU tar's `records_read`): the stream up to
    /// `records * record` is accounted for.
    records: u64,
    /// The archive is a regular, uncompressed file that GNU tar would seek in.
    seekable: bool,
    /// `-i`: the reader reads on to the end of the input.
    ignore_zeros: bool,
    /// The end of the archive was reached (and with `-i` counted).
    ended: bool,
    /// The current member's data, as (offset where it starts, bytes), until the next header
    /// shows whether it was read.
    unread: Option<(u64, u64)>,
    /// Dots go to stderr (`-O`: stdout carries data).
    dots_to_stderr: bool,
    /// For `exec`: the run's TAR_* variables (`Plans::tar_env`), and `-x` or `-t`.
    env: [(&'static str, OsString); 3],
    subcommand: &'static str,
    /// /dev/tty, for `bell` and `ttyout`, once opened.
    tty: Option<File>,
    /// A `\r` was printed: dropping the observer blanks the `ttyout` line.
    tty_cleanup: bool,
    /// Where dots and lines go, and the run's clock (`%d`, `%T`).
    report: Arc<Reporter>,
}

/// What a header read found (`Observer::headers_read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A member, with the bytes of data GNU tar would pass over if it did not read them
    /// (None: a member without data).
    Member { data: Option<u64> },
    /// The end of the archive.
    End,
    /// The read failed.
    Failed,
}

impl Observer {
    /// The checkpoints `cfg` asks for: `Reading::new` starts them as the archive is opened.
    /// `compressed`: the stream is decoded (or filtered) from the archive, not read as it is.
    /// A compressed file's first record counts its first checkpoint now, as GNU tar's look at
    /// it.
    pub fn start(cfg: &CheckpointPlan, compressed: bool, report: Arc<Reporter>) -> Observer {
        let spec = &cfg.spec;
        let seekable = !compressed
            && cfg
                .plain_file
                .as_deref()
                .is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()));
        let mut run = Observer {
            spec: spec.clone(),
            record: cfg.record,
            count: 0,
            records: 0,
            seekable,
            ignore_zeros: cfg.ignore_zeros,
            ended: false,
            unread: None,
            dots_to_stderr: cfg.dots_to_stderr,
            env: cfg.env.clone(),
            subcommand: cfg.subcommand,
            tty: None,
            tty_cleanup: false,
            report,
        };
        if spec.sniffs && compressed {
            // Read before the decompressor starts: no record of the tar stream yet.
            run.read("gnu");
        }
        run
    }

    /// A resumed run (src/resume/) begins reading at `offset`: the records before it count
    /// as read by the interrupted run, and no burst of actions fires for them.
    pub fn skip_to(&mut self, offset: u64) {
        self.records = offset / self.record;
    }

    /// After a header read that started at `from` under `format` (the reader's offset and
    /// format then) and left the reader at `to`, finding `got`: the records it reached count,
    /// under the format before it (GNU tar reads a header's record before it decodes the
    /// header). A previous member whose data was not read at all was passed over as GNU tar's
    /// lseek would pass it; with `-i`, the end of the archive is the read that found the end
    /// of the input.
    pub fn headers_read(&mut self, (from, format): (u64, &'static str), to: u64, got: Header) {
        if let Some((start, size)) = self.unread.take()
            && self.seekable
            && from == start
        {
            self.pass_over(start, size);
        }
        self.reach(to, format);
        match got {
            Header::Member { data } => self.unread = data.map(|n| (to, n)),
            Header::End if !self.ended => {
                self.ended = true;
                if self.ignore_zeros {
                    self.read_record(format);
                }
            }
            Header::End | Header::Failed => {}
        }
    }

    /// After a chunk of member data was read (or failed), the reader at `offset` under
    /// `format`: the records reached by then count.
    pub fn data_read(&mut self, offset: u64, format: &'static str) {
        self.reach(offset, format);
    }
}

/// `Observer::data_read` for the data loops, where checkpoints may be off (None).
pub fn data_read(observer: &mut Option<Observer>, offset: u64, format: &'static str) {
    if let Some(o) = observer {
        o.data_read(offset, format);
    }
}

/// At the end of the run, before `--totals` (GNU tar's `checkpoint_finish`): a `ttyout`
/// line ended by `\r` is blanked on the terminal.
impl Drop for Observer {
    fn drop(&mut self) {
        let ttyouts = self.spec.actions.iter().filter(|a| matches!(a, Action::TtyOut(_))).count();
        if let Some(tty) = &mut self.tty
            && self.tty_cleanup
        {
            let mut blank = vec![b' '; width(tty)];
            blank.push(b'\r');
            for _ in 0..ttyouts {
                let _ = tty.write_all(&blank);
            }
        }
    }
}

impl Observer {
    /// The stream up to `offset` was read: one read per record reached since the last call.
    fn reach(&mut self, offset: u64, format: &'static str) {
        while self.records < offset.div_ceil(self.record) {
            self.read_record(format);
        }
    }

    fn read_record(&mut self, format: &'static str) {
        self.read(format);
        self.records += 1;
    }

    /// GNU tar's `seek_archive` over `size` bytes of data starting at `start`: after the
    /// rest of the current record, the whole records within the data are not read.
    fn pass_over(&mut self, start: u64, size: u64) {
        let rest = start.div_ceil(self.record) * self.record - start;
        if size > rest {
            self.records += (size - rest) / self.record;
        }
    }

    /// One read of the archive (`checkpoint_run`): every `every`th runs the actions.
    fn read(&mut self, format: &'static str) {
        self.count += 1;
        if self.count.is_multiple_of(u64::from(self.spec.every)) {
            let actions = std::mem::take(&mut self.spec.actions);
            for action in &actions {
                self.act(action, format);
            }
            self.spec.actions = actions;
        }
    }

    fn act(&mut self, action: &Action, format: &'static str) {
        match action {
            Action::Dot => {
                self.report.list_dot(self.dots_to_stderr);
            }
            Action::Bell => self.write_tty(b"\x07"),
            Action::Echo(text) => {
                let mut line = super::said("").into_bytes();
                let text = text.as_deref().unwrap_or(DEFAULT_ECHO);
                let len = line.len();
                self.expand(&mut line, len, text, libc::STDERR_FILENO);
                self.report.diagnostic(&String::from_utf8_lossy(&line));
            }
            Action::TtyOut(text) => {
                if self.open_tty() {
                    let mut out = Vec::new();
                    let fd = self.tty.as_ref().map_or(-1, std::os::fd::AsRawFd::as_raw_fd);
                    self.expand(&mut out, 0, text, fd);
                    self.write_tty(&out);
                }
            }
            Action::Sleep(secs) => std::thread::sleep(Duration::from_secs(*secs)),
            Action::Exec(command) => self.exec(command, format),
            Action::Totals => {
                let said = self.report.stats("Total bytes read", self.records * self.record);
                self.report.diagnostic(&said)
            }
        }
    }

    /// Opens /dev/tty for writing if it is not open (tried again each time, as GNU tar).
    fn open_tty(&mut self) -> bool {
        if self.tty.is_none() {
            self.tty = std::fs::OpenOptions::new().write(true).open("/dev/tty").ok();
        }
        self.tty.is_some()
    }

    fn write_tty(&mut self, bytes: &[u8]) {
        if self.open_tty()
            && let Some(tty) = &mut self.tty
        {
            let _ = tty.write_all(bytes);
        }
    }

    /// GNU tar's `sys_exec_checkpoint_script`: `/bin/sh -c COMMAND` with the TAR_* variables
    /// it sets, waited for; its exit status does not matter. `TAR_VERSION` is fastuntar's.
    fn exec(&self, command: &[u8], format: &str) {
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(OsStr::from_bytes(command))
            .envs(self.env.iter().cloned())
            .env("TAR_CHECKPOINT", self.count.to_string())
            .env("TAR_SUBCOMMAND", self.subcommand)
            .env("TAR_FORMAT", format)
            .status();
        if let Err(e) = status {
            let command = String::from_utf8_lossy(command);
            self.report.diagnostic(&super::said(format_args!(
                "{command}: Cannot exec: {}",
                super::strerror(&e)
            )));
        }
    }

    /// Appends `input` with its `%` escapes expanded to `out`, whose line already holds
    /// `len` columns; returns the columns after it. `fd` is where the line goes, for `%*`'s
    /// width.
    fn expand(&mut self, out: &mut Vec<u8>, len: usize, input: &[u8], fd: i32) -> usize {
        let mut values = Values {
            number: self.count,
            read: self.records * self.record,
            elapsed: self.report.elapsed(),
            fd,
            cleanup: false,
        };
        let len = format(out, len, input, &mut values);
        self.tty_cleanup |= values.cleanup;
        len
    }
}

/// What a checkpoint's escapes stand for.
struct Values {
    /// `%u`: the checkpoint's number.
    number: u64,
    /// `%T`: bytes of the archive read (or passed over) before this read.
    read: u64,
    /// `%d`, `%T`'s rate: seconds since the run started.
    elapsed: f64,
    /// Where the text goes (`%*` pads to its width).
    fd: i32,
    /// A `\r` was written.
    cleanup: bool,
}

/// GNU tar's `format_checkpoint_string` for reading: `%u` the number, `%s` "read", `%d`
/// seconds since the start, `%T` (`%{R,W,D}T`) "R: BYTES (SIZE, RATE/s)", `%t` (`%{FMT}t`)
/// the local time by strftime (`%c` by default), `%*` (`%{N}*`) spaces up to column N (the
/// terminal's width by default), `%c` the default "%{%Y-%m-%d %H:%M:%S}t: %ds,
/// %{read,wrote}T%*\r"; anything else is printed as it is, with its `%` (`%%` too; `%{x}q` is
/// `%q`). `len` is the column the text starts at; a `\r` sets it back to 0. Returns the column
/// it ends at. A trailing `%` prints `%` and a NUL, as GNU tar does; a negative `%{N}*` pads
/// nothing (GNU tar 1.34 prints spaces forever).
fn format(out: &mut Vec<u8>, mut len: usize, input: &[u8], values: &mut Values) -> usize {
    let mut i = 0;
    while i < input.len() {
        let c = input[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            if c == b'\r' {
                len = 0;
                values.cleanup = true;
            } else {
                len += 1;
            }
            continue;
        }
        let mut arg = None;
        if input.get(i) == Some(&b'{') {
            match input[i + 1..].iter().position(|&b| b == b'}') {
                Some(end) => {
                    arg = Some(&input[i + 1..i + 1 + end]);
                    i += end + 2;
                }
                None => {
                    out.extend_from_slice(b"%{");
                    len += 2;
                    i += 1;
                    continue;
                }
            }
        }
        let Some(&op) = input.get(i) else {
            out.extend_from_slice(b"%\0");
            break;
        };
        i += 1;
        let text = match op {
            // GNU tar adds the columns of the default format to `len` twice; it ends in `\r`,
            // so what it adds is 0 either way.
            b'c' => {
                len += format(out, len, DEFAULT_FORMAT, values);
                continue;
            }
            b'*' => {
                let w = arg.map_or_else(|| width_of(values.fd) as i64, strtol);
                while w > len as i64 {
                    out.push(b' ');
                    len += 1;
                }
                continue;
            }
            b'u' => values.number.to_string().into_bytes(),
            b's' => b"read".to_vec(),
            b'd' => format!("{:.0}", values.elapsed).into_bytes(),
            b'T' => {
                let label = match arg {
                    Some(a) => split_labels(a).into_iter().next().unwrap_or_default(),
                    None => "R".to_string(),
                };
                totals::format_stats(&label, values.read, values.elapsed).into_bytes()
            }
            b't' => local_time(arg.unwrap_or(b"%c")),
            _ => vec![b'%', op],
        };
        len += text.len();
        out.extend_from_slice(&text);
    }
    len
}

/// `%{A,B,C}T`'s labels (GNU tar's wordsplit at commas, quotes kept together and removed;
/// blanks stay). Only the first, for reading, is used.
fn split_labels(arg: &[u8]) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = Vec::new();
    let mut quote = None;
    let mut bytes = arg.iter();
    while let Some(&b) = bytes.next() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(b'"'), b'\\') => word.extend(bytes.next()),
            (Some(_), _) => word.push(b),
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b',') => words.push(std::mem::take(&mut word)),
            (None, _) => word.push(b),
        }
    }
    if !arg.is_empty() {
        words.push(word);
    }
    words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned()).collect()
}

/// The local time formatted by strftime(3) with `fmt` (`%t`; GNU tar's fprintftime also
/// knows `%N`, which strftime leaves as it is).
fn local_time(fmt: &[u8]) -> Vec<u8> {
    let Ok(fmt) = std::ffi::CString::new(fmt) else { return Vec::new() };
    // Safety: time(NULL) has no preconditions.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // Safety: valid pointers to a time_t and to a tm to fill.
    if unsafe { libc::localtime_r(&now, tm.as_mut_ptr()) }.is_null() {
        return Vec::new();
    }
    let mut buf = vec![0u8; 256];
    while buf.len() <= 1 << 16 {
        // Safety: `buf` has `buf.len()` writable bytes, `fmt` is NUL-terminated and `tm` was
        // filled by localtime_r (a zeroed tm is valid too).
        let n = unsafe {
            libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), tm.as_ptr())
        };
        if n > 0 {
            buf.truncate(n);
            return buf;
        }
        // 0: the output was empty, or did not fit.
        buf.resize(buf.len() * 4, 0);
    }
    Vec::new()
}

/// Columns of the terminal on `fd`, else $COLUMNS, else 80 (checkpoint.c `getwidth`).
fn width_of(fd: i32) -> usize {
    let mut ws = std::mem::MaybeUninit::<libc::winsize>::zeroed();
    // Safety: TIOCGWINSZ writes a winsize into the buffer given; a bad fd only fails.
    if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, ws.as_mut_ptr()) } == 0 {
        // Safety: the ioctl succeeded and filled it.
        let cols = unsafe { ws.assume_init() }.ws_col;
        if cols > 0 {
            return usize::from(cols);
        }
    }
    std::env::var("COLUMNS")
        .ok()
        .map(|c| strtol(c.as_bytes()))
        .filter(|&c| c > 0)
        .map_or(80, |c| usize::try_from(c).unwrap_or(usize::MAX))
}

fn width(tty: &File) -> usize {
    width_of(std::os::fd::AsRawFd::as_raw_fd(tty))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An observer is a value each run holds, not a global: two runs in one process count
    /// from the start each (a resumed one from its resume point), and nothing has to be reset.
    #[test]
    fn each_run_counts_its_own_records() {
        let spec = given(&[("n", "3"), ("a", "sleep=0")]);
        let record = 10240;
        let cfg = CheckpointPlan {
            spec: Checkpoints::new(&spec, false).unwrap().unwrap(),
            record,
            plain_file: None,
            ignore_zeros: false,
            dots_to_stderr: false,
            env: [
                ("TAR_VERSION", "0".into()),
                ("TAR_ARCHIVE", "a.tar".into()),
                ("TAR_BLOCKING_FACTOR", "20".into()),
            ],
            subcommand: "-x",
        };
        for _ in 0..2 {
            let mut o = Observer::start(&cfg, false, Arc::default());
            o.headers_read((0, "gnu"), 7 * record, Header::Member { data: Some(record) });
            assert_eq!((o.count, o.records), (7, 7));
            o.data_read(8 * record, "gnu");
            assert_eq!((o.count, o.records), (8, 8));
        }
        let mut resumed = Observer::start(&cfg, false, Arc::default());
        resumed.skip_to(100 * record);
        resumed.data_read(101 * record, "gnu");
        assert_eq!((resumed.count, resumed.records), (1, 101));
    }

    fn given(args: &[(&str, &str)]) -> Vec<Arg> {
        args.iter()
            .map(|&(k, v)| match k {
                "n" => Arg::Every(v.to_string()),
                _ => Arg::Action(v.to_string()),
            })
            .collect()
    }

    fn parsed(args: &[(&str, &str)]) -> Result<Option<Checkpoints>> {
        Checkpoints::new(&given(args), false)
    }

    /// As GNU tar 1.34 read each of these.
    #[test]
    fn options_like_gnu_tar() {
        let cp = |every, actions| Some(Checkpoints { every, actions, sniffs: false });
        assert_eq!(parsed(&[]).unwrap(), None);
        assert_eq!(parsed(&[("n", "10")]).unwrap(), cp(10, vec![Action::Echo(None)]));
        assert_eq!(parsed(&[("n", "0x5")]).unwrap(), cp(5, vec![Action::Echo(None)]));
        assert_eq!(parsed(&[("n", "010")]).unwrap(), cp(8, vec![Action::Echo(None)]));
        // `--checkpoint=` and `--checkpoint=0`: off.
        assert_eq!(parsed(&[("n", "")]).unwrap(), None);
        assert_eq!(parsed(&[("n", "0")]).unwrap(), None);
        // A dot with no number, or actions alone: every 10.
        assert_eq!(parsed(&[("n", ".")]).unwrap(), cp(10, vec![Action::Dot]));
        assert_eq!(parsed(&[("a", "bell")]).unwrap(), cp(10, vec![Action::Bell]));
        // The last N counts; actions in command-line order, each `.N` a dot.
        assert_eq!(
            parsed(&[("n", "010"), ("a", "echo=\"a\\tb %u\""), ("a", "."), ("n", ".12")]).unwrap(),
            cp(12, vec![Action::Echo(Some(b"a\tb %u".to_vec())), Action::Dot, Action::Dot])
        );
        assert_eq!(
            parsed(&[("a", "echo=\"a\\tb\""), ("a", "sleep=2"), ("a", "exec='x y'")]).unwrap(),
            cp(
                10,
                vec![
                    Action::Echo(Some(b"a\tb".to_vec())),
                    Action::Sleep(2),
                    Action::Exec(b"x y".to_vec())
                ]
            )
        );
        assert_eq!(
            parsed(&[("a", "ttyout=%c"), ("a", "totals"), ("a", "dot"), ("a", "echo")]).unwrap(),
            cp(
                10,
                vec![
                    Action::TtyOut(b"%c".to_vec()),
                    Action::Totals,
                    Action::Dot,
                    Action::Echo(None)
                ]
            )
        );
        assert_eq!(parsed(&[("a", "echo=\"")]).unwrap(), cp(10, vec![Action::Echo(Some(vec![]))]));
        let err = |args| parsed(args).unwrap_err().to_string();
        assert_eq!(err(&[("n", "abc")]), "--checkpoint value is not an integer");
        assert_eq!(err(&[("n", "5x")]), "--checkpoint value is not an integer");
        assert_eq!(err(&[("a", "foo")]), "foo: unknown checkpoint action");
        assert_eq!(err(&[("a", "echo ")]), "echo : unknown checkpoint action");
        assert_eq!(err(&[("a", "sleep=x")]), "sleep=x: not a valid timeout");
    }

    #[test]
    fn strtoul_like_c() {
        assert_eq!(strtoul("", 0), Some(0));
        assert_eq!(strtoul(" 12", 0), Some(12));
        assert_eq!(strtoul("+7", 0), Some(7));
        assert_eq!(strtoul("-1", 0), Some(u64::MAX));
        assert_eq!(strtoul("0x1F", 0), Some(31));
        assert_eq!(strtoul("0x", 0), None);
        assert_eq!(strtoul("08", 0), None);
        assert_eq!(strtoul("08", 10), Some(8));
        assert_eq!(strtoul(" ", 0), None);
        assert_eq!(strtoul("99999999999999999999999", 10), Some(u64::MAX));
        assert_eq!(strtol(b" -3x"), -3);
        assert_eq!(strtol(b"abc"), 0);
    }

    fn expanded(text: &str, len: usize) -> (String, usize) {
        let mut v = Values { number: 7, read: 61440, elapsed: 0.0, fd: -1, cleanup: false };
        let mut out = Vec::new();
        let len = format(&mut out, len, text.as_bytes(), &mut v);
        (String::from_utf8_lossy(&out).into_owned(), len)
    }

    /// The escapes as GNU tar 1.34 printed them (times aside).
    #[test]
    fn escapes_like_gnu_tar() {
        assert_eq!(expanded("Read checkpoint %u", 5), ("Read checkpoint 7".into(), 22));
        assert_eq!(expanded("%u %s", 0).0, "7 read");
        assert_eq!(expanded("%% %q %{x}q %{ %", 0).0, "%% %q %q %{ %\0");
        assert_eq!(expanded("%{5}*|", 5).0, "|");
        assert_eq!(expanded("%{8}*|", 5), ("   |".into(), 9));
        assert_eq!(expanded("%{abc}*|%{-3}*|", 0).0, "||");
        assert_eq!(expanded("a\rb%{3}*|", 9), ("a\rb  |".into(), 4));
        assert!(expanded("[%T]", 0).0.starts_with("[R: 61440 (60KiB, "));
        assert!(expanded("%{A,B}T", 0).0.starts_with("A: 61440 "));
        assert!(expanded("%{}T", 0).0.starts_with("61440 "));
        assert!(expanded("%{,b}T", 0).0.starts_with("61440 "));
        assert!(expanded("%{\"x,y\",z}T", 0).0.starts_with("x,y: 61440 "));
        assert!(expanded("%{ x }T", 0).0.starts_with(" x : 61440 "));
        assert_eq!(expanded("%{}t|", 0).0, "|");
        assert_eq!(expanded("%{%%}t", 0).0, "%");
        let (c, len) = expanded("%c", 0);
        assert!(c.contains(": 0s, read: 61440 (60KiB, ") && c.ends_with("\r"), "{c:?}");
        assert_eq!(len, 0);
        assert_eq!(c.len(), width_of(-1) + 1, "padded to the width, then \\r: {c:?}");
    }
}
