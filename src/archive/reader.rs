//! The streaming reader: archive bytes in, [`Member`]s and their data out.
//!
//! Reads `inner` strictly sequentially. Header blocks and extension data (GNU `L`/`K`, PAX
//! `x`/`g`, sparse maps) are small and parsed as they stream past; member data goes straight
//! from `inner` into the caller's buffer. Errors are one line naming the member (or the
//! previous one) and the archive offset, and they are sticky.
//!
//! End of archive follows GNU tar: a zero block ends it (the block after it is read and
//! ignored), and so do EOF where a header would start and a truncated all-zero block there.
//! With `-i` (`ignore_zeros`) zero blocks are stepped over and only those two end it.
//! An empty input or an input that does not start with a tar header is an error.
//!
//! Data: regular files (and members of unknown type, `Kind::Other`) have their data returned
//! by `read_data`; directories, links, devices and fifos report size 0 and return none. If
//! such a member declares a size anyway, traditional tars wrote no data for it (GNU tar
//! ignores a hard link's size) while pax allows data: the block after the header decides —
//! a valid header or an end block there means no data, anything else is data and is skipped.
//!
//! This file holds the reader's state and its calls; `headers.rs` reads from one member to the
//! next header (the end of the archive, GNU long names, PAX headers), `member.rs` makes the
//! header a `Member` (names, numbers, sparse maps, dumpdirs), `data.rs` reads and skips the
//! bytes beneath.

mod data;
mod headers;
mod member;
#[cfg(test)]
mod tests;

use std::io::{self, Read};

use anyhow::{Result, anyhow, bail};

use super::format::{BLOCK, Block};
use super::pax::{self, Extended, Overrides};
use super::{Format, Member, Segment, Skip};

/// Largest GNU long name or long link target (`L`/`K` data) accepted.
const MAX_LONG_NAME: u64 = 1 << 20;

/// Scratch buffer for skipping data and streaming PAX headers.
const SCRATCH: usize = 64 << 10;

/// Longest member name quoted in an error message.
const MAX_NAME_IN_MESSAGE: usize = 1024;

type Res<T> = std::result::Result<T, String>;

/// Streaming tar reader; see the module doc.
pub struct Reader<R: Skip> {
    inner: R,
    /// Bytes of the archive consumed (a peeked block is not counted until it is taken).
    pos: u64,
    /// A block read ahead to decide whether a hard link (etc.) really has data.
    peeked: Option<Box<Block>>,
    /// The first error, returned by every later call.
    error: Option<String>,
    /// The end of the archive was reached.
    finished: bool,
    /// `-i`: zero blocks are stepped over, and only the end of the input ends the archive
    /// (concatenated archives, `cat a.tar b.tar`).
    ignore_zeros: bool,
    /// `--xattrs`: PAX extended attribute records are kept.
    xattrs: bool,
    /// `-G`: read the name lists of an incremental archive's directories (`Member::dumpdir`).
    dumpdirs: bool,
    /// `--pax-option delete=PATTERN`: the PAX keywords not read.
    pax_deleted: std::sync::Arc<[std::ffi::CString]>,
    /// The volume label of a POSIX-format archive (`GNU.volume.label` in a `g` header) and
    /// that header's mtime field.
    volume_label: Option<(Vec<u8>, i64)>,
    /// The label GNU tar's `-V` compares (`match_volume_label`): the name field of a volume
    /// header that is the archive's first block, or the `GNU.volume.label` of a `g` header
    /// that is. None when the first block is neither.
    first_label: Option<Vec<u8>>,
    /// Values from the last PAX global (`g`) header: each one replaces the whole set, as in
    /// GNU tar (pax.rs).
    global: Overrides,
    /// The `g` headers behind `global` and `volume_label`, as read, for a resumed run to read
    /// again (`carried`): the one that last set the volume label (first, `label_carried`),
    /// then the last one when it matters. None once one that matters did not fit GLOBALS_MAX.
    globals: Option<Globals>,
    /// The first of `globals` is the header that set the volume label.
    label_carried: bool,
    /// Name of the last member returned, for messages about what follows it.
    prev: Option<String>,
    /// The member whose data is being read.
    cur: Option<Current>,
    scratch: Vec<u8>,
    /// The format of the last member's header (`format`).
    format: Format,
    /// `-R`: zero blocks and the end of the input are noted in `ends`.
    block_numbers: bool,
    /// What the reader met since `take_ends` was last asked.
    ends: Ends,
    /// Members read with a failure the run goes on after (a dumpdir too large to read), as
    /// (name, what), until `take_failures`: the caller says them, and the run exits 2.
    failures: Vec<(String, String)>,
}

/// How the archive ended, said after the member read before it (`Reading::say_ends`): for
/// `-R` (GNU tar's `--block-number`) the zero blocks met (runs of (first block, count)) and
/// the block where the input ended without an end marker; and the block after an end marker
/// of one zero block (GNU tar's "A lone zero block at N").
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ends {
    pub zero_runs: Vec<(u64, u64)>,
    pub eof_at: Option<u64>,
    pub lone_zero_at: Option<u64>,
}

/// Where a member's data stands (`Reader::data_ahead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataAhead {
    /// The offset in the extracted file of the next byte.
    pub offset: u64,
    /// Bytes of data left.
    pub left: u64,
    /// Where the stream has the next bytes (`Skip::ahead`).
    pub ahead: super::Ahead,
}

/// Data-reading state of the current member.
struct Current {
    /// Name for messages.
    name: String,
    /// Bytes of the member's data area not yet consumed (excluding padding).
    data_left: u64,
    /// Padding after the data area.
    pad: u64,
    /// Whether `read_data` returns the data (regular files and unknown types).
    readable: bool,
    /// A type that has no data (hard link, directory, ...) but declares a size: whether the
    /// data is really there is decided by looking at the next block.
    maybe_data: bool,
    /// Offset in the extracted file of the next chunk (non-sparse).
    next: u64,
    /// Sparse segments, the one being read, and how much of it was read.
    segments: Option<Vec<Segment>>,
    seg: usize,
    seg_done: u64,
}

/// Outcome of reading one block.
enum Fill {
    Full,
    /// EOF before its first byte.
    Eof,
    /// EOF after this many bytes.
    Partial(usize),
}

impl Fill {
    /// How many bytes of the block the read filled.
    fn len(&self) -> usize {
        match self {
            Fill::Full => BLOCK,
            Fill::Eof => 0,
            Fill::Partial(n) => *n,
        }
    }
}

/// Extension headers read so far for the member that follows them.
#[derive(Default)]
struct Pending {
    /// GNU `L` data.
    long_name: Option<Vec<u8>>,
    /// GNU `K` data.
    long_link: Option<Vec<u8>>,
    /// Blocks of the last `L` header and its data, and of the last `K` (GNU tar's `-R`
    /// counts a member's number back by them; a repeated `L` replaces the one before).
    long_name_blocks: u64,
    long_link_blocks: u64,
    /// The PAX `x` header.
    local: Option<Extended>,
}

impl Pending {
    /// Whether an extension header waits for its member (the archive may not end here).
    fn dangling(&self) -> bool {
        self.long_name.is_some() || self.long_link.is_some() || self.local.is_some()
    }
}

/// Reads until `buf` is full or EOF. Returns the bytes read, and the error that stopped it
/// early if any (the bytes before it count: they were consumed).
fn read_full<R: Read>(inner: &mut R, buf: &mut [u8]) -> (usize, io::Result<()>) {
    let mut n = 0;
    while n < buf.len() {
        match inner.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (n, Err(e)),
        }
    }
    (n, Ok(()))
}

/// What to say about a short read: the error, or EOF.
fn short_read(r: io::Result<()>) -> String {
    match r {
        Err(e) => io_what(&e),
        Ok(()) => io_what(&eof()),
    }
}

fn io_what(e: &io::Error) -> String {
    match (e.kind(), e.get_ref()) {
        // A decoder that saw its input end mid-frame says so: keep its words.
        (io::ErrorKind::UnexpectedEof, Some(inner)) => {
            format!("unexpected end of archive ({inner})")
        }
        (io::ErrorKind::UnexpectedEof, None) => "unexpected end of archive".to_string(),
        _ => e.to_string(),
    }
}

fn eof() -> io::Error {
    io::Error::from(io::ErrorKind::UnexpectedEof)
}

/// A name made fit for a one-line message: control characters escaped, length capped.
fn one_line(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if i == MAX_NAME_IN_MESSAGE {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The PAX global headers a resumed run reads again (`Reader::carried`, `Reader::resume`),
/// in the order they came: each one's records as read and its header's mtime (the volume
/// label's time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Globals {
    pub headers: Vec<GlobalHeader>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalHeader {
    pub mtime: i64,
    pub records: Vec<u8>,
}

/// The most bytes of `g` records carried to a resumed run, all headers together: what a
/// state file holds for them. `git archive`'s one header is 52 bytes (and sets nothing, so
/// it is not kept); a writer's defaults (`uname`, `mtime`) a few hundred.
pub const GLOBALS_MAX: usize = 64 << 10;

impl Globals {
    pub fn bytes(&self) -> usize {
        self.headers.iter().map(|g| g.records.len()).sum()
    }
}

impl<R: Skip> Reader<R> {
    /// A reader at the start of an archive (`inner` yields the decoded tar bytes).
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            pos: 0,
            peeked: None,
            error: None,
            finished: false,
            ignore_zeros: false,
            xattrs: false,
            dumpdirs: false,
            pax_deleted: std::sync::Arc::new([]),
            volume_label: None,
            first_label: None,
            global: Overrides::default(),
            globals: Some(Globals::default()),
            label_carried: false,
            prev: None,
            cur: None,
            scratch: Vec::new(),
            // GNU tar's name before it has read a header.
            format: Format::Gnu,
            block_numbers: false,
            ends: Ends::default(),
            failures: Vec::new(),
        }
    }

    /// A reader that begins at member boundary `at` of the archive (a resumed run,
    /// src/resume/), on `inner`, which yields the decoded stream from offset `from` (the start
    /// of the input unit holding `at`): the `at - from` bytes before it are passed over.
    /// Offsets in messages and members stay the archive's own. `globals` are the PAX global
    /// headers read before `at` (`carried` there), read again first.
    pub fn resume(inner: R, at: u64, from: u64, globals: &Globals) -> Result<Self> {
        let mut r = Reader::new(inner);
        for g in &globals.headers {
            let mut parser = pax::Parser::new(g.records.len() as u64, true, false);
            let parsed = parser.feed(&g.records).and_then(|()| parser.finish());
            let parsed = parsed.map_err(|e| anyhow!("a PAX global header carried over: {e}"))?;
            r.take_global(parsed, g.mtime, Some(g.records.clone()));
        }
        r.pos = from;
        let gap = at.checked_sub(from).filter(|_| at.is_multiple_of(BLOCK as u64));
        let Some(gap) = gap else {
            bail!("resume point {at} is not a block boundary after {from}")
        };
        r.skip(gap).map_err(|e| anyhow!("archive offset {from}: {}", io_what(&e)))?;
        Ok(r)
    }

    /// Where decoding could begin again to reach decoded offset `t` (`Skip::unit_at_or_before`).
    pub fn unit_at_or_before(&self, t: u64) -> Option<super::UnitStart> {
        self.inner.unit_at_or_before(t)
    }

    /// What a resumed run must read again before the member boundary it is at: the PAX global
    /// (`g`) headers that set a value or a volume label, which apply to every member after
    /// them. None when they are more than GLOBALS_MAX: no resume point past them.
    pub fn carried(&self) -> Option<&Globals> {
        self.globals.as_ref()
    }

    /// `-R`: note the zero blocks and the end of the input as they are met (`take_ends`).
    pub fn block_numbers(&mut self, on: bool) {
        self.block_numbers = on;
    }

    /// The failures met since the last call (`failures`).
    pub fn take_failures(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.failures)
    }

    /// How the archive ended, as met since the last call (`Ends`).
    pub fn take_ends(&mut self) -> Ends {
        std::mem::take(&mut self.ends)
    }

    /// Notes a zero block at `off` for `-R`.
    fn zero_at(&mut self, off: u64) {
        if self.block_numbers {
            let block = off / BLOCK as u64;
            match self.ends.zero_runs.last_mut() {
                Some((first, n)) if *first + *n == block => *n += 1,
                _ => self.ends.zero_runs.push((block, 1)),
            }
        }
    }

    /// GNU tar's `--ignore-zeros`: read on past zero blocks to the end of the input.
    pub fn ignore_zeros(&mut self, on: bool) {
        self.ignore_zeros = on;
    }

    /// `--xattrs`: keep the members' extended attributes (`Member::xattrs`); otherwise their
    /// records are skipped as every other unused PAX record is.
    pub fn xattrs(&mut self, on: bool) {
        self.xattrs = on;
    }

    /// `-G`: keep the list of names of each directory of an incremental archive (a GNU `D`
    /// member's data, or a `GNU.dumpdir` PAX record) in `Member::dumpdir`; otherwise the data
    /// is skipped and the member is a plain directory.
    pub fn dumpdirs(&mut self, on: bool) {
        self.dumpdirs = on;
    }

    /// `--pax-option delete=PATTERN`: records of `x` headers whose keyword matches one of
    /// `patterns` (fnmatch) are read as if they were not there (a `g` header's are kept).
    pub fn pax_delete(&mut self, patterns: Vec<std::ffi::CString>) {
        self.pax_deleted = patterns.into();
    }

    /// The label `-V` checks, once the first member has been read: see `first_label`.
    pub fn first_label(&self) -> Option<&[u8]> {
        self.first_label.as_deref()
    }

    /// The volume label a POSIX-format archive's global header gave so far (GNU tar's
    /// `GNU.volume.label`), with that header's mtime.
    pub fn volume_label(&self) -> Option<(&[u8], i64)> {
        self.volume_label.as_ref().map(|(l, t)| (l.as_slice(), *t))
    }

    /// Next member with every extension header applied; skips (reads past) whatever data of
    /// the previous member was not read. Ok(None) at end of archive.
    pub fn next_member(&mut self) -> Result<Option<Member>> {
        if let Some(e) = &self.error {
            return Err(anyhow!("{e}"));
        }
        if self.finished {
            return Ok(None);
        }
        match self.next_member_inner() {
            Ok(Some(m)) => {
                self.prev = Some(one_line(&m.display_name()));
                Ok(Some(m))
            }
            Ok(None) => {
                self.finished = true;
                Ok(None)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Fills `buf` (its len is the chunk size, e.g. 1 MiB) with the next data of the current
    /// member. Returns Some((offset_in_extracted_file, n)) with n > 0, or None once all its
    /// data is read.
    ///
    /// Regular members: chunks are contiguous from offset 0 and each one fills `buf`
    /// completely except the last. Where the input ends inside the data (a clean end, not a
    /// read error), the bytes that arrived come as a last, short chunk, and the error with
    /// the next call (`check`).
    /// Sparse members: a chunk never spans two segments (offsets
    /// are the segment offsets in the real file). Members without data (directories, links,
    /// ...) return None at once.
    pub fn read_data(&mut self, buf: &mut [u8]) -> Result<Option<(u64, usize)>> {
        if let Some(e) = &self.error {
            return Err(anyhow!("{e}"));
        }
        if buf.is_empty() {
            bail!("read_data needs a non-empty buffer");
        }
        match self.read_data_inner(buf) {
            Ok(r) => Ok(r),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The reader's error, if it has one: after a chunk shorter than asked (the input ended
    /// inside the member's data, `read_data` hands on what arrived), the error that follows.
    pub fn check(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(anyhow!("{e}")),
            None => Ok(()),
        }
    }

    /// Where the current member's data stands, for taking it in chunks that are either
    /// handed on as the stream holds them (`lend_data`) or read (`read_data`): None once its
    /// data is read, and for members whose data is not one run (sparse ones, types without
    /// data).
    pub fn data_ahead(&mut self) -> Result<Option<DataAhead>> {
        if let Some(e) = &self.error {
            return Err(anyhow!("{e}"));
        }
        let Some(cur) = self.cur.as_ref() else { return Ok(None) };
        if !cur.readable || cur.segments.is_some() || cur.data_left == 0 {
            return Ok(None);
        }
        let (offset, left) = (cur.next, cur.data_left);
        // A block read ahead (only ever after a member without data) is not the stream's.
        let ahead = match self.peeked {
            Some(_) => super::Ahead::Read(Some(BLOCK as u64)),
            None => match self.inner.ahead() {
                Ok(a) => a,
                Err(e) => {
                    let name = cur.name.clone();
                    let e = self.msg(Some(&name), self.pos, &io_what(&e));
                    return Err(self.fail(e));
                }
            },
        };
        Ok(Some(DataAhead { offset, left, ahead }))
    }

    /// The next `n` bytes of the current member's data as a piece of the stream's buffer,
    /// with their offset in the file: `n` at most the `left` and the `Ahead::Lend` length
    /// that `data_ahead` just gave.
    pub fn lend_data(&mut self, n: usize) -> Result<(u64, crate::pool::PoolBuf)> {
        if let Some(e) = &self.error {
            return Err(anyhow!("{e}"));
        }
        let Some(cur) = self.cur.as_mut() else { bail!("no member's data to hand on") };
        if n == 0 || n as u64 > cur.data_left || cur.segments.is_some() {
            bail!("{}: {n} bytes cannot be handed on here", cur.name);
        }
        match self.inner.lend(n) {
            Ok(buf) if buf.len() == n => {
                let offset = cur.next;
                cur.next += n as u64;
                cur.data_left -= n as u64;
                self.pos += n as u64;
                Ok((offset, buf))
            }
            Ok(buf) => {
                let what = format!("{n} bytes asked of the stream, {} handed on", buf.len());
                let name = cur.name.clone();
                let e = self.msg(Some(&name), self.pos, &what);
                Err(self.fail(e))
            }
            Err(e) => {
                let name = cur.name.clone();
                let e = self.msg(Some(&name), self.pos, &io_what(&e));
                Err(self.fail(e))
            }
        }
    }

    /// Bytes of decoded archive consumed so far.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// The format of the last member's header as GNU tar names it ("gnu", "ustar", "posix",
    /// "v7"; "gnu" before the first): `--checkpoint-action=exec`'s `TAR_FORMAT`.
    pub fn format(&self) -> &'static str {
        self.format.name()
    }

    /// The input, positioned after what was consumed (after the end-of-archive blocks once
    /// `next_member` returned None). The reader never reads past the end marker, so a caller
    /// that wants a compressed stream's trailer verified (a zstd checksum covers the data
    /// only at the end of the frame) drains the rest of the input itself.
    pub fn into_inner(self) -> R {
        self.inner
    }

    fn fail(&mut self, e: String) -> anyhow::Error {
        self.error = Some(e.clone());
        self.cur = None;
        anyhow!(e)
    }

    /// Formats a message: `"{name}: {what} (archive offset N)"`, or without a name
    /// `"archive offset N (after '{previous}'): {what}"`.
    fn msg(&self, name: Option<&str>, offset: u64, what: &str) -> String {
        match name.filter(|n| !n.is_empty()) {
            Some(n) => format!("{}: {what} (archive offset {offset})", one_line(n)),
            None => format!("{}: {what}", self.place(offset)),
        }
    }

    /// Where `offset` is, for a message about what has no name of its own (an extension
    /// header): `archive offset N (after '{previous}')`.
    fn place(&self, offset: u64) -> String {
        match &self.prev {
            Some(p) => format!("archive offset {offset} (after '{p}')"),
            None => format!("archive offset {offset}"),
        }
    }
}
