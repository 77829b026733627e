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

use std::io::{self, Read};

use anyhow::{Result, anyhow, bail};

use super::format::{self, BLOCK, Block, BlockCheck, Header, SparseExtension, TypeFlag};
use super::pax::{self, Extended, Overrides};
use super::sparse::{self, MapBuilder, MapV1, PaxVersion};
use super::{Format, Kind, Member, Segment, Skip};
use crate::archive::Timestamp;

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

/// A member's names, extension headers applied.
struct Names {
    name: Vec<u8>,
    link_name: Vec<u8>,
    uname: Vec<u8>,
    gname: Vec<u8>,
    /// The header's own uname and gname (see `Member::uid_name`).
    header_uname: Vec<u8>,
    header_gname: Vec<u8>,
}

/// A member's numeric header fields, extension headers applied.
struct NumericFields {
    /// Stored size: the data area without padding.
    size: u64,
    mode: u32,
    uid: u64,
    gid: u64,
    /// A PAX record gave the uid (gid): GNU tar then looks no name up (`Member::uid_name`).
    uid_from_pax: bool,
    gid_from_pax: bool,
    mtime: Timestamp,
}

/// Where a member's data goes.
struct DataLayout {
    /// Bytes of the data area after the header (and a PAX 1.0 sparse map) still to read.
    data_left: u64,
    /// Size of the extracted file.
    real_size: u64,
    /// The sparse map, for sparse members.
    segments: Option<Vec<Segment>>,
}

/// The format a member's header block is in, by its magic (`Header::magic_kind`: Some(true)
/// ustar, Some(false) GNU, None V7) and whether a PAX local header came before it. A PAX
/// global header alone leaves it ustar, as GNU tar 1.34 says.
fn format_of(magic: Option<bool>, pax_local: bool) -> Format {
    match magic {
        Some(true) if pax_local => Format::Pax,
        Some(true) => Format::Ustar,
        Some(false) => Format::Gnu,
        None => Format::V7,
    }
}

/// The member kind a header's type flag stands for, and whether it is a type without data of
/// its own (a declared size may or may not be stored). None for an extension header.
fn kind_of(flag: TypeFlag, name: &[u8]) -> Option<(Kind, bool)> {
    Some(match flag {
        // Old tars mark directories with a trailing slash on a regular file; like any
        // directory, a declared size may or may not come with data.
        TypeFlag::Regular if name.ends_with(b"/") => (Kind::Dir, true),
        TypeFlag::Regular | TypeFlag::OldSparse => (Kind::File, false),
        TypeFlag::HardLink => (Kind::Hardlink, true),
        TypeFlag::Symlink => (Kind::Symlink, true),
        TypeFlag::CharDev => (Kind::CharDev, true),
        TypeFlag::BlockDev => (Kind::BlockDev, true),
        TypeFlag::Dir => (Kind::Dir, true),
        TypeFlag::Fifo => (Kind::Fifo, true),
        TypeFlag::DumpDir => (Kind::Dir, false),
        TypeFlag::Other(b) => (Kind::Other(b), false),
        TypeFlag::LongName | TypeFlag::LongLink | TypeFlag::PaxLocal | TypeFlag::PaxGlobal => {
            return None;
        }
    })
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

/// What a first block that is not a tar header looks like, when it starts like a compressed
/// or archive format fastuntar does not read (xz, zstd, gzip, bzip2 and LZ4 are decoded before
/// the tar stage sees them): its name, and how to get the tar out of it.
fn other_format(blk: &[u8]) -> Option<(&'static str, &'static str)> {
    const FORMATS: [(&[u8], &str, &str); 6] = [
        (b"LZIP", "lzip-compressed data", ", but --lzip reads it through lzip -d"),
        (b"\x1f\x9d", "compress(1) data (.Z)", ", but -Z reads it through gzip -d"),
        (b"\x89LZO\0\r\n\x1a\n", "lzop-compressed data", ", but --lzop reads it through lzop -d"),
        (b"\x5d\0\0", "LZMA-alone data (.lzma)", ", but --lzma reads it through lzma -d"),
        (b"PK\x03\x04", "a zip archive", ""),
        (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", ""),
    ];
    FORMATS.iter().find(|(magic, ..)| blk.starts_with(magic)).map(|&(_, name, how)| (name, how))
}

/// The message for a format `other_format` found.
fn not_read((name, how): (&str, &str)) -> String {
    format!("not a tar archive: it starts like {name}, which fastuntar does not read{how}")
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

    fn read_data_inner(&mut self, buf: &mut [u8]) -> Res<Option<(u64, usize)>> {
        let Some(cur) = self.cur.as_mut() else {
            return Ok(None);
        };
        if !cur.readable {
            return Ok(None);
        }
        let (offset, n) = match &cur.segments {
            Some(segments) => loop {
                let Some(s) = segments.get(cur.seg) else {
                    return Ok(None);
                };
                let left = s.len - cur.seg_done;
                if left == 0 {
                    cur.seg += 1;
                    cur.seg_done = 0;
                    continue;
                }
                break (s.offset + cur.seg_done, left.min(buf.len() as u64) as usize);
            },
            None => {
                if cur.data_left == 0 {
                    return Ok(None);
                }
                (cur.next, cur.data_left.min(buf.len() as u64) as usize)
            }
        };
        let (k, res) = read_full(&mut self.inner, &mut buf[..n]);
        self.pos += k as u64;
        cur.data_left -= k as u64;
        if cur.segments.is_some() {
            cur.seg_done += k as u64;
        } else {
            cur.next += k as u64;
        }
        if k < n {
            // The input ended inside the data: what arrived is handed on (GNU tar writes it
            // too), and the error is the next call's (sticky from here: `check`). Not after a
            // read error: a decoder that failed (a damaged zstd frame) may have given bytes
            // its checksum never vouched for.
            let clean_end = res.is_ok();
            let what = short_read(res);
            let name = cur.name.clone();
            let e = self.msg(Some(&name), self.pos, &what);
            if k == 0 || !clean_end {
                return Err(e);
            }
            self.error = Some(e);
            return Ok(Some((offset, k)));
        }
        Ok(Some((offset, n)))
    }

    /// Reads one block, taking the peeked one first.
    fn read_block(&mut self, blk: &mut Block) -> io::Result<Fill> {
        if let Some(p) = self.peeked.take() {
            *blk = *p;
            self.pos += BLOCK as u64;
            return Ok(Fill::Full);
        }
        let (n, res) = read_full(&mut self.inner, blk);
        self.pos += n as u64;
        if n < BLOCK {
            res?;
        }
        Ok(match n {
            0 => Fill::Eof,
            BLOCK => Fill::Full,
            n => Fill::Partial(n),
        })
    }

    /// Reads one block that must be there (extension data, sparse maps).
    fn read_block_full(&mut self, blk: &mut Block) -> io::Result<()> {
        match self.read_block(blk)? {
            Fill::Full => Ok(()),
            Fill::Eof | Fill::Partial(_) => Err(eof()),
        }
    }

    /// Consumes `n` bytes (the peeked block counts as its first 512).
    fn skip(&mut self, mut n: u64) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        if self.peeked.take().is_some() {
            n = n.saturating_sub(BLOCK as u64);
            self.pos += BLOCK as u64;
        }
        if self.scratch.is_empty() {
            self.scratch = vec![0; SCRATCH];
        }
        while n > 0 {
            match self.inner.skip_in_place(n) {
                Ok(0) => {}
                Ok(k) => {
                    // At most `n` by the trait's contract; min() so a source that broke it
                    // could not wrap the count.
                    let k = k.min(n);
                    n -= k;
                    self.pos += k;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let want = n.min(self.scratch.len() as u64) as usize;
            match self.inner.read(&mut self.scratch[..want]) {
                Ok(0) => return Err(eof()),
                Ok(k) => {
                    n -= k as u64;
                    self.pos += k as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads past the rest of the current member.
    fn finish_current(&mut self) -> Res<()> {
        let Some(cur) = self.cur.take() else {
            return Ok(());
        };
        let fail = |s: &Self, e: &io::Error| s.msg(Some(&cur.name), s.pos, &io_what(e));
        if cur.maybe_data {
            // Traditional tars ignore the size of hard links (and some writers fill it in
            // without storing data), while pax allows hard links with data. Look at the
            // next block: a valid header or an end block means there is no data.
            let mut blk = Box::new([0u8; BLOCK]);
            match read_full(&mut self.inner, &mut blk[..]) {
                (0, Ok(())) => return Ok(()),
                (BLOCK, _) => {
                    let check = format::check(&blk);
                    self.peeked = Some(blk);
                    if check != BlockCheck::BadChecksum {
                        return Ok(());
                    }
                }
                (n, res) => {
                    self.pos += n as u64;
                    return Err(fail(self, &res.err().unwrap_or_else(eof)));
                }
            }
        }
        let n = cur.data_left.saturating_add(cur.pad);
        self.skip(n).map_err(|e| fail(self, &e))
    }

    /// One member: past the rest of the previous one, through its extension headers, to its
    /// own header. Ok(None) at the end of the archive.
    fn next_member_inner(&mut self) -> Res<Option<Member>> {
        self.finish_current()?;
        let mut start = self.pos;
        let mut ext = Pending::default();
        let mut blk: Block = [0; BLOCK];
        loop {
            let off = self.pos;
            if !self.read_header_block(&mut blk, off, ext.dangling())? {
                return Ok(None);
            }
            if self.ignore_zeros
                && !ext.dangling()
                && matches!(format::check(&blk), BlockCheck::Zero)
            {
                self.zero_at(off);
                start = self.pos;
                continue;
            }
            if !self.check_header_block(&blk, off, ext.dangling())? {
                return Ok(None);
            }
            let h = Header(&blk);
            if off == 0 && h.type_byte() == b'V' {
                self.first_label = Some(format::cstr(&blk[..100]).to_vec());
            }
            match h.type_flag() {
                flag @ (TypeFlag::LongName | TypeFlag::LongLink) => {
                    self.read_gnu_long(&h, flag, off, &mut ext)?;
                    let blocks = (self.pos - off) / BLOCK as u64;
                    if flag == TypeFlag::LongName {
                        ext.long_name_blocks = blocks;
                    } else {
                        ext.long_link_blocks = blocks;
                    }
                }
                flag @ (TypeFlag::PaxLocal | TypeFlag::PaxGlobal) => {
                    self.read_pax(&h, flag, off, &mut ext)?;
                    if off == 0 && flag == TypeFlag::PaxGlobal {
                        self.first_label = self.volume_label.as_ref().map(|(l, _)| l.clone());
                    }
                }
                _ => return self.member(&blk, start, off, ext).map(Some),
            }
        }
    }

    /// Reads the block where a header should start, at `off`. Ok(false) where the archive
    /// ends there (EOF, or a truncated all-zero block, unless an extension header is waiting
    /// for its member: `dangling`).
    fn read_header_block(&mut self, blk: &mut Block, off: u64, dangling: bool) -> Res<bool> {
        let fill = self.read_block(blk).map_err(|e| self.msg(None, self.pos, &io_what(&e)))?;
        match fill {
            Fill::Full => Ok(true),
            Fill::Eof if off == 0 => Err(self.msg(None, 0, "not a tar archive (empty input)")),
            Fill::Partial(n) if off == 0 => {
                let what = match other_format(&blk[..n]) {
                    Some(f) => not_read(f),
                    None => format!("not a tar archive (only {n} bytes)"),
                };
                Err(self.msg(None, 0, &what))
            }
            // The end of the input, or a truncated end-of-archive block: GNU tar ends quietly
            // too (its short read drops the block: -R says the input ended there).
            Fill::Eof | Fill::Partial(_)
                if !dangling && blk[..fill.len()].iter().all(|&b| b == 0) =>
            {
                if self.block_numbers {
                    self.ends.eof_at = Some(off / BLOCK as u64);
                }
                Ok(false)
            }
            Fill::Eof | Fill::Partial(_) => {
                let what = if dangling {
                    "unexpected end of archive after an extended header"
                } else {
                    "unexpected end of archive"
                };
                Err(self.msg(None, self.pos, what))
            }
        }
    }

    /// Checks the full block read at `off`: Ok(true) for a header, Ok(false) for the end of
    /// the archive (a zero block, after which one more block is read and ignored).
    fn check_header_block(&mut self, blk: &Block, off: u64, dangling: bool) -> Res<bool> {
        match format::check(blk) {
            BlockCheck::Header => Ok(true),
            BlockCheck::Zero if dangling => {
                Err(self.msg(None, off, "end of archive after an extended header"))
            }
            BlockCheck::Zero => {
                self.zero_at(off);
                // The second end block (or whatever follows a lone one) is read and
                // ignored, as GNU tar does; nothing after it is looked at.
                let mut second: Block = [0; BLOCK];
                // Not after a read error: a corrupt stream is reported as such (its trailer
                // check, reading.rs verify_trailer).
                let lone = match self.read_block(&mut second) {
                    Ok(Fill::Full) => second != [0; BLOCK],
                    Ok(Fill::Eof | Fill::Partial(_)) => true,
                    Err(_) => false,
                };
                if lone {
                    self.ends.lone_zero_at = Some(off / BLOCK as u64 + 1);
                }
                Ok(false)
            }
            BlockCheck::BadChecksum if off == 0 => {
                let what = match other_format(blk) {
                    Some(f) => not_read(f),
                    None => "not a tar archive (bad header checksum)".to_string(),
                };
                Err(self.msg(None, off, &what))
            }
            BlockCheck::BadChecksum => Err(self.msg(None, off, "bad header checksum")),
        }
    }

    /// A GNU `L` (long name) or `K` (long link target) header at `off`: reads its data into
    /// `ext`.
    fn read_gnu_long(
        &mut self,
        h: &Header<'_>,
        flag: TypeFlag,
        off: u64,
        ext: &mut Pending,
    ) -> Res<()> {
        let size = self.extension_size(h, off)?;
        let which = if flag == TypeFlag::LongName { "name" } else { "link name" };
        if size > MAX_LONG_NAME {
            let what = format!("GNU long {which} of {size} bytes (limit {MAX_LONG_NAME})");
            return Err(self.msg(None, off, &what));
        }
        let mut data = Vec::new();
        self.stream(size, off, |chunk| {
            data.extend_from_slice(chunk);
            Ok(())
        })?;
        let value = format::cstr(&data).to_vec();
        if flag == TypeFlag::LongName {
            ext.long_name = Some(value);
        } else {
            ext.long_link = Some(value);
        }
        Ok(())
    }

    /// A PAX `x` (for the next member, into `ext`) or `g` (for every later member) header at
    /// `off`: parses its records.
    fn read_pax(&mut self, h: &Header<'_>, flag: TypeFlag, off: u64, ext: &mut Pending) -> Res<()> {
        let size = self.extension_size(h, off)?;
        let global = flag == TypeFlag::PaxGlobal;
        let mut parser = pax::Parser::new(size, global, self.xattrs);
        // GNU tar deletes keywords from `x` headers only (xheader.c's decx, not decg).
        if !global {
            parser.delete(&self.pax_deleted);
        }
        parser.keep_dumpdir(self.dumpdirs);
        // A `g` header's records are kept as read while they fit (`carried`).
        let held = match (&self.globals, self.label_carried) {
            (Some(g), true) => g.headers[0].records.len() as u64,
            _ => 0,
        };
        let keep = global && size <= (GLOBALS_MAX as u64).saturating_sub(held);
        let mut records = Vec::new();
        self.stream(size, off, |chunk| {
            if keep {
                records.extend_from_slice(chunk);
            }
            parser.feed(chunk)
        })?;
        let mut parsed = parser.finish().map_err(|e| self.msg(None, off, &e))?;
        // A malformed record is GNU tar's "Malformed extended header": said, the run exits 2,
        // and the header stands as far as it was read.
        for what in std::mem::take(&mut parsed.malformed) {
            self.failures.push((self.place(off), what));
        }
        if global {
            self.take_global(parsed, h.mtime().unwrap_or(0), keep.then_some(records));
        } else {
            ext.local = Some(parsed);
        }
        Ok(())
    }

    /// Applies a `g` header's records (`parsed`; `mtime` is its header's) to every later
    /// member: its values replace the whole global set (GNU tar's `xheader_decode_global`);
    /// a volume label stays until another header sets one. What a resumed run must read
    /// again to stand here is kept (`records`, as read; None: past GLOBALS_MAX): the header
    /// that last set the label, then this one when it sets a value or clears what the set
    /// held. None from a header that matters and was not kept on.
    fn take_global(&mut self, parsed: pax::Extended, mtime: i64, records: Option<Vec<u8>>) {
        let sets = parsed.overrides != Overrides::default();
        let clears = self.global != Overrides::default();
        let label = parsed.volume_label.is_some();
        if let Some(label) = parsed.volume_label {
            self.volume_label = Some((label, mtime));
        }
        self.global = parsed.overrides;
        if !(label || sets || clears) {
            return;
        }
        let header = records.map(|records| GlobalHeader { mtime, records });
        self.globals = match (self.globals.take(), header) {
            (_, Some(h)) if label => {
                self.label_carried = true;
                Some(Globals { headers: vec![h] })
            }
            (Some(mut g), Some(h)) => {
                g.headers.truncate(usize::from(self.label_carried));
                g.headers.push(h);
                Some(g)
            }
            _ => None,
        };
    }

    /// The size of an extension header's data (its own size field; PAX does not apply).
    fn extension_size(&self, h: &Header<'_>, off: u64) -> Res<u64> {
        match h.size() {
            Ok(v) => u64::try_from(v)
                .map_err(|_| self.msg(None, off, "negative size in extended header")),
            Err(e) => Err(self.msg(None, off, &format!("bad size field in extended header ({e})"))),
        }
    }

    /// Reads an extension header's data area of `size` bytes plus padding, passing the data
    /// to `f` in pieces. Errors from `f` are reported at `at`, the header's offset.
    fn stream(&mut self, size: u64, at: u64, mut f: impl FnMut(&[u8]) -> Res<()>) -> Res<()> {
        let total = format::padded(size)
            .ok_or_else(|| self.msg(None, self.pos, "extended header size overflows"))?;
        if self.scratch.is_empty() {
            self.scratch = vec![0; SCRATCH];
        }
        let mut done: u64 = 0;
        while done < total {
            let want = (total - done).min(self.scratch.len() as u64) as usize;
            // A peeked block can only precede a header, never extension data.
            let (k, res) = read_full(&mut self.inner, &mut self.scratch[..want]);
            self.pos += k as u64;
            if k < want {
                return Err(self.msg(None, self.pos, &short_read(res)));
            }
            let data = size.saturating_sub(done).min(want as u64) as usize;
            if data > 0 {
                f(&self.scratch[..data]).map_err(|e| self.msg(None, at, &e))?;
            }
            done += want as u64;
        }
        Ok(())
    }

    /// Builds the member from its header block at `off` and the extension headers before it
    /// (the first of them at `start`), reads its sparse map if it has one, and makes it the
    /// current member.
    fn member(&mut self, blk: &Block, start: u64, off: u64, ext: Pending) -> Res<Member> {
        let h = Header(blk);
        // At least as far back as the headers go, so never below 0.
        let block = off / BLOCK as u64 - ext.long_name_blocks - ext.long_link_blocks;
        let format = format_of(h.magic_kind(), ext.local.is_some());
        self.format = format;
        let mut local = ext.local.unwrap_or_default();
        let xattrs = std::mem::take(&mut local.xattrs).into_list();
        let names = self.names(&h, &local, ext.long_name, ext.long_link);
        let display = crate::report::printable(&names.name);
        let err = |s: &Self, what: &str| s.msg(Some(&display), off, what);
        let fields = self.numeric_fields(&h, &local.overrides, &display, off)?;
        let pad = format::padded(fields.size)
            .map(|p| p - fields.size)
            .ok_or_else(|| err(self, "size overflows"))?;
        let (kind, header_only) = kind_of(h.type_flag(), &names.name)
            .ok_or_else(|| err(self, "internal error: extension header as member"))?;
        let readable = matches!(kind, Kind::File | Kind::Other(_));
        let pax_dumpdir = std::mem::take(&mut local.dumpdir);
        let is_dumpdir = kind == Kind::Dir
            && (local.is_dumpdir || (h.type_flag() == TypeFlag::DumpDir && format == Format::Gnu));
        let mut layout = self.data_layout(&h, kind, local, fields.size, &display, off)?;
        let mut pad = pad;
        // GNU tar takes a `D` member's data for a list only in a GNU-format header; in a ustar
        // one it is a plain directory's data, skipped.
        let dumpdir =
            if self.dumpdirs && h.type_flag() == TypeFlag::DumpDir && format == Format::Gnu {
                let list = self.read_dumpdir(fields.size, pad, &display)?;
                if list.is_some() {
                    // Read with its padding: nothing is left of the member's data.
                    (layout.data_left, pad) = (0, 0);
                }
                list
            } else if kind == Kind::Dir {
                pax_dumpdir
            } else {
                None
            };

        self.cur = Some(Current {
            name: display,
            data_left: layout.data_left,
            pad,
            readable,
            maybe_data: header_only && layout.data_left > 0,
            next: 0,
            segments: layout.segments.clone(),
            seg: 0,
            seg_done: 0,
        });
        let (dev_major, dev_minor) = h.device();
        Ok(Member {
            name: names.name,
            link_name: names.link_name,
            kind,
            mode: fields.mode,
            uid: fields.uid,
            gid: fields.gid,
            uname: names.uname,
            gname: names.gname,
            uid_name: if fields.uid_from_pax { Vec::new() } else { names.header_uname },
            gid_name: if fields.gid_from_pax { Vec::new() } else { names.header_gname },
            dev_major,
            dev_minor,
            mtime: fields.mtime,
            size: if readable { layout.real_size } else { 0 },
            declared_size: fields.size,
            sparse: layout.segments,
            offset: start,
            block,
            xattrs,
            stored_name: None,
            format,
            type_flag: h.type_byte(),
            dumpdir,
            is_dumpdir,
        })
    }

    /// A GNU `D` member's list (`-G`), `size` bytes of data and `pad` after them, read with
    /// its padding (a peeked block only ever precedes a header). None, its data left to be
    /// passed over as a plain directory's, when it is larger than `pax::MAX_DUMPDIR`: the
    /// directory is made, not purged (exit 2).
    fn read_dumpdir(&mut self, size: u64, pad: u64, display: &str) -> Res<Option<Vec<u8>>> {
        if size > pax::MAX_DUMPDIR as u64 {
            let what = format!(
                "dumpdir of {size} bytes is larger than fastuntar reads ({} MiB); not purged",
                pax::MAX_DUMPDIR >> 20
            );
            self.failures.push((display.to_string(), what));
            return Ok(None);
        }
        // Pages of the buffer that no data reaches are never touched.
        let total = (size + pad) as usize;
        let mut list = vec![0; total];
        let (k, res) = read_full(&mut self.inner, &mut list);
        self.pos += k as u64;
        if k < total {
            return Err(self.msg(Some(display), self.pos, &short_read(res)));
        }
        list.truncate(size as usize);
        Ok(Some(list))
    }

    /// The member's name, link target and owner names: PAX (local, then global) over GNU
    /// `L`/`K` over the header; a PAX sparse name over all of them.
    fn names(
        &self,
        h: &Header<'_>,
        local: &Extended,
        long_name: Option<Vec<u8>>,
        long_link: Option<Vec<u8>>,
    ) -> Names {
        let (g, lo) = (&self.global, &local.overrides);
        let name = match &local.sparse.name {
            Some(n) => n.clone(),
            None => pax::pick(&lo.path, &g.path).or(long_name).unwrap_or_else(|| h.name()),
        };
        let link_name =
            pax::pick(&lo.linkpath, &g.linkpath).or(long_link).unwrap_or_else(|| h.link_name());
        let (header_uname, header_gname) = h.owner_names();
        let uname = pax::pick(&lo.uname, &g.uname).unwrap_or_else(|| header_uname.clone());
        let gname = pax::pick(&lo.gname, &g.gname).unwrap_or_else(|| header_gname.clone());
        Names { name, link_name, uname, gname, header_uname, header_gname }
    }

    /// Size, mode, uid, gid and mtime: PAX (local, then global) over the header's fields,
    /// checked in that order; errors name the member (`display`) and its header's offset.
    fn numeric_fields(
        &self,
        h: &Header<'_>,
        lo: &Overrides,
        display: &str,
        off: u64,
    ) -> Res<NumericFields> {
        let g = &self.global;
        let err = |what: &str| self.msg(Some(display), off, what);
        let num = |field: &str, v: Result<i64, format::NumError>| -> Res<u64> {
            match v {
                Ok(v) => u64::try_from(v).map_err(|_| err(&format!("negative {field}"))),
                Err(e) => Err(err(&format!("bad {field} field ({e})"))),
            }
        };
        let size = match pax::pick(&lo.size, &g.size) {
            Some(s) => s,
            None => num("size", h.size())?,
        };
        let mode = num("mode", h.mode())?;
        let mode = u32::try_from(mode & 0o7777).unwrap_or(0);
        let (uid, uid_from_pax) = match pax::pick(&lo.uid, &g.uid) {
            Some(v) => (v, true),
            None => (num("uid", h.uid())?, false),
        };
        let (gid, gid_from_pax) = match pax::pick(&lo.gid, &g.gid) {
            Some(v) => (v, true),
            None => (num("gid", h.gid())?, false),
        };
        let mtime = match pax::pick(&lo.mtime, &g.mtime) {
            Some(t) => t,
            None => match h.mtime() {
                Ok(secs) => Timestamp { secs, nanos: 0 },
                Err(e) => return Err(err(&format!("bad mtime field ({e})"))),
            },
        };
        Ok(NumericFields { size, mode, uid, gid, uid_from_pax, gid_from_pax, mtime })
    }

    /// Where a member of `size` stored bytes puts its data: the sparse map (old GNU `S`, or
    /// PAX sparse 0.x / 1.0 on a regular file; a 1.0 map is read from the data area here),
    /// and the data still to read.
    fn data_layout(
        &mut self,
        h: &Header<'_>,
        kind: Kind,
        local: Extended,
        size: u64,
        display: &str,
        off: u64,
    ) -> Res<DataLayout> {
        let err = |s: &Self, what: &str| s.msg(Some(display), off, what);
        let plain = DataLayout { data_left: size, real_size: size, segments: None };
        if h.type_flag() == TypeFlag::OldSparse {
            let (map, real) = self.old_gnu_map(h, size, display, off)?;
            return Ok(DataLayout { segments: Some(map), real_size: real, ..plain });
        }
        if kind != Kind::File {
            return Ok(plain);
        }
        match local.sparse.version() {
            Err(e) => Err(err(self, &e)),
            Ok(None) => Ok(plain),
            Ok(Some(PaxVersion::V0)) => {
                let real = local.sparse.realsize().unwrap_or(size);
                let map = local.sparse.finish_v0(real, size).map_err(|e| err(self, &e))?;
                Ok(DataLayout { segments: Some(map), real_size: real, ..plain })
            }
            Ok(Some(PaxVersion::V1)) => {
                let real = local.sparse.realsize().unwrap_or(size);
                let (map, map_bytes) = self.map_v1(size, real, display)?;
                Ok(DataLayout { data_left: size - map_bytes, real_size: real, segments: Some(map) })
            }
        }
    }

    /// Old GNU sparse ('S'): four entries in the header, then extension blocks while
    /// `isextended` is set. Returns the map and the real size.
    fn old_gnu_map(
        &mut self,
        h: &Header<'_>,
        stored: u64,
        name: &str,
        off: u64,
    ) -> Res<(Vec<Segment>, u64)> {
        let realsize = match h.gnu_realsize() {
            Ok(v) => {
                u64::try_from(v).map_err(|_| self.msg(Some(name), off, "negative real size"))?
            }
            Err(e) => return Err(self.msg(Some(name), off, &format!("bad real size field ({e})"))),
        };
        let mut map = MapBuilder::default();
        // GNU tar stops at the first empty entry; later ones are ignored, but the extension
        // blocks are still read: they are not data.
        let mut ended = false;
        let mut add = |map: &mut MapBuilder, entry: Option<&[u8]>| -> Res<()> {
            if let (false, Some(e)) = (ended, entry) {
                ended = !sparse::old_gnu_entry(map, e)?;
            }
            Ok(())
        };
        for i in 0..format::SPARSES_IN_HEADER {
            add(&mut map, h.gnu_sparse_entry(i)).map_err(|e| self.msg(Some(name), off, &e))?;
        }
        let mut extended = h.gnu_is_extended();
        let mut blk: Block = [0; BLOCK];
        while extended {
            let at = self.pos;
            self.read_block_full(&mut blk)
                .map_err(|e| self.msg(Some(name), self.pos, &io_what(&e)))?;
            let x = SparseExtension(&blk);
            for i in 0..format::SPARSES_IN_EXTENSION {
                add(&mut map, x.entry(i)).map_err(|e| self.msg(Some(name), at, &e))?;
            }
            extended = x.is_extended();
        }
        let map = map.finish(realsize, stored).map_err(|e| self.msg(Some(name), off, &e))?;
        Ok((map, realsize))
    }

    /// PAX sparse 1.0: reads the map at the start of the data area (`size` bytes). Returns
    /// the map and the bytes it took (whole blocks).
    fn map_v1(&mut self, size: u64, realsize: u64, name: &str) -> Res<(Vec<Segment>, u64)> {
        let at = self.pos;
        let mut parser = MapV1::default();
        let mut used: u64 = 0;
        let mut blk: Block = [0; BLOCK];
        loop {
            if used + BLOCK as u64 > size {
                return Err(self.msg(Some(name), at, "sparse map runs past the member data"));
            }
            self.read_block_full(&mut blk)
                .map_err(|e| self.msg(Some(name), self.pos, &io_what(&e)))?;
            used += BLOCK as u64;
            let done = parser
                .feed(&blk)
                .map_err(|e| self.msg(Some(name), at, &format!("malformed sparse map: {e}")))?;
            if done {
                break;
            }
        }
        let map = parser.finish(realsize, size - used).map_err(|e| self.msg(Some(name), at, &e))?;
        Ok((map, used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format a member is listed and checkpointed under: its header's magic, PAX only
    /// with a local extended header (a global one alone leaves it ustar, as GNU tar says).
    #[test]
    fn formats_by_magic() {
        let cases = [
            ((Some(true), true), Format::Pax),
            ((Some(true), false), Format::Ustar),
            ((Some(false), true), Format::Gnu),
            ((Some(false), false), Format::Gnu),
            ((None, true), Format::V7),
        ];
        for ((magic, pax_local), want) in cases {
            assert_eq!(format_of(magic, pax_local), want, "{magic:?} {pax_local}");
        }
    }

    const MTIME: u64 = 1_000_000;

    fn fix_checksum(b: &mut Block) {
        b[148..156].fill(b' ');
        let sum: u32 = b.iter().map(|&x| u32::from(x)).sum();
        b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }

    /// A ustar header block (name at most 100 bytes, size below 8 GiB).
    fn header(name: &[u8], flag: u8, size: u64) -> Block {
        let (size, mtime) = (format!("{size:011o}\0"), format!("{MTIME:011o}\0"));
        // (offset, value): name, mode, uid, gid, size, mtime, type flag, magic and version.
        let fields: [(usize, &[u8]); 8] = [
            (0, name),
            (100, b"0000644\0"),
            (108, b"0001750\0"),
            (116, b"0001751\0"),
            (124, size.as_bytes()),
            (136, mtime.as_bytes()),
            (156, &[flag]),
            (257, b"ustar\x0000"),
        ];
        let mut b = [0u8; BLOCK];
        for (at, value) in fields {
            b[at..at + value.len()].copy_from_slice(value);
        }
        fix_checksum(&mut b);
        b
    }

    /// `header`, changed by `f`, with the checksum fixed afterwards.
    fn header_with(name: &[u8], flag: u8, size: u64, f: impl FnOnce(&mut Block)) -> Block {
        let mut b = header(name, flag, size);
        f(&mut b);
        fix_checksum(&mut b);
        b
    }

    /// One PAX record with its length right.
    fn rec(key: &str, value: &[u8]) -> Vec<u8> {
        let body = [b" ", key.as_bytes(), b"=", value, b"\n"].concat();
        let len = (body.len()..).find(|n| n.to_string().len() + body.len() == *n).unwrap();
        [len.to_string().as_bytes(), &body].concat()
    }

    /// An archive under construction; `starts` records where each member's first header is,
    /// `boundaries` other places where the archive may end (after a global header).
    #[derive(Default)]
    struct Ar {
        bytes: Vec<u8>,
        starts: Vec<u64>,
        boundaries: Vec<u64>,
    }

    impl Ar {
        fn new() -> Self {
            Ar::default()
        }
        /// Marks the start of a member (call before its first header).
        fn start(mut self) -> Self {
            self.starts.push(self.bytes.len() as u64);
            self
        }
        fn boundary(mut self) -> Self {
            self.boundaries.push(self.bytes.len() as u64);
            self
        }
        fn block(mut self, b: Block) -> Self {
            self.bytes.extend_from_slice(&b);
            self
        }
        fn data(mut self, d: &[u8]) -> Self {
            self.bytes.extend_from_slice(d);
            let pad = format::padded(d.len() as u64).unwrap() as usize - d.len();
            self.bytes.resize(self.bytes.len() + pad, 0);
            self
        }
        fn file(self, name: &str, content: &[u8]) -> Self {
            let h = header(name.as_bytes(), b'0', content.len() as u64);
            self.start().block(h).data(content)
        }
        fn pax(self, flag: u8, records: &[(&str, &[u8])]) -> Self {
            let data: Vec<u8> = records.iter().flat_map(|(k, v)| rec(k, v)).collect();
            self.block(header(b"PaxHeader/x", flag, data.len() as u64)).data(&data)
        }
        fn end(mut self) -> Vec<u8> {
            self.bytes.extend_from_slice(&[0; 2 * BLOCK]);
            self.bytes
        }
    }

    struct Got {
        m: Member,
        chunks: Vec<(u64, Vec<u8>)>,
        /// The failures the reader met on the way to the member (`take_failures`).
        said: Vec<String>,
    }

    impl Got {
        /// The extracted file: chunks written at their offsets, holes as zeros.
        fn contents(&self) -> Vec<u8> {
            let mut v = vec![0u8; self.m.size as usize];
            for (off, c) in &self.chunks {
                v[*off as usize..*off as usize + c.len()].copy_from_slice(c);
            }
            v
        }
        fn name(&self) -> String {
            self.m.display_name()
        }
    }

    /// Reads every member and its data with `chunk`-byte buffers. Stops at the end or at the
    /// first error; the step count is bounded so a loop would fail the test.
    fn read_with(archive: &[u8], chunk: usize) -> (Vec<Got>, Option<String>) {
        let mut r = Reader::new(archive);
        let mut buf = vec![0u8; chunk];
        let mut out = Vec::new();
        for _ in 0..archive.len() + 10 {
            match r.next_member() {
                Ok(None) => {
                    assert!(r.next_member().unwrap().is_none(), "end is repeatable");
                    assert_eq!(r.read_data(&mut buf).unwrap(), None);
                    return (out, None);
                }
                Err(e) => {
                    // Failures met on the way to the error: with the member before it, or
                    // before the error when there is none.
                    let said: Vec<String> =
                        r.take_failures().into_iter().map(|(w, s)| format!("{w}: {s}")).collect();
                    let again = r.next_member().unwrap_err().to_string();
                    assert_eq!(again, e.to_string(), "errors are sticky");
                    assert!(r.read_data(&mut buf).is_err(), "errors are sticky");
                    assert!(!e.to_string().contains('\n'), "one line: {e}");
                    return match out.last_mut() {
                        Some(g) => {
                            g.said.extend(said);
                            (out, Some(e.to_string()))
                        }
                        None => (
                            out,
                            Some(
                                said.into_iter()
                                    .chain([e.to_string()])
                                    .collect::<Vec<_>>()
                                    .join("; "),
                            ),
                        ),
                    };
                }
                Ok(Some(m)) => {
                    let said = r.take_failures().into_iter().map(|(w, s)| format!("{w}: {s}"));
                    let mut g = Got { m, chunks: Vec::new(), said: said.collect() };
                    for _ in 0..archive.len() + 10 {
                        match r.read_data(&mut buf) {
                            Ok(Some((off, n))) => {
                                assert!(n > 0 && n <= chunk);
                                g.chunks.push((off, buf[..n].to_vec()));
                            }
                            Ok(None) => break,
                            Err(e) => {
                                out.push(g);
                                return (out, Some(e.to_string()));
                            }
                        }
                    }
                    out.push(g);
                }
            }
        }
        panic!("reader did not terminate");
    }

    fn read_ok(archive: &[u8]) -> Vec<Got> {
        let (got, err) = read_with(archive, 1 << 16);
        if let Some(e) = err {
            panic!("unexpected error: {e}");
        }
        let said: Vec<&String> = got.iter().flat_map(|g| &g.said).collect();
        assert!(said.is_empty(), "unexpected failures: {said:?}");
        // A tiny buffer gives the same result.
        let (small, err) = read_with(archive, 7);
        assert_eq!(err, None);
        assert_eq!(small.len(), got.len());
        for (a, b) in got.iter().zip(&small) {
            assert_eq!(a.contents(), b.contents(), "{}", a.name());
        }
        got
    }

    /// Reads `archive` to its end without a fatal error: the members, and every failure the
    /// run goes on after (a malformed PAX header), as said.
    fn read_said(archive: &[u8]) -> (Vec<Got>, Vec<String>) {
        let (got, err) = read_with(archive, 1 << 16);
        assert_eq!(err, None, "a fatal error");
        let said = got.iter().flat_map(|g| g.said.clone()).collect();
        (got, said)
    }

    fn read_err(archive: &[u8]) -> String {
        match read_with(archive, 1 << 16) {
            (_, Some(e)) => e,
            (got, None) => panic!("no error; read {} members", got.len()),
        }
    }

    #[test]
    fn every_type_flag() {
        let mut ar = Ar::new().file("f0", b"hello");
        for (name, flag) in [
            ("nul", 0u8),
            ("contig", b'7'),
            ("hard", b'1'),
            ("sym", b'2'),
            ("chr", b'3'),
            ("blk", b'4'),
            ("dir/", b'5'),
            ("fifo", b'6'),
            ("label", b'V'),
            ("unknown", b'A'),
        ] {
            ar = ar.start().block(header_with(name.as_bytes(), flag, 0, |b| {
                b[157..163].copy_from_slice(b"target");
            }));
        }
        let ar = ar
            .start()
            .block(header(b"dumpdir", b'D', 12))
            .data(b"Ya\0Yb\0\0\0\0\0\0\0")
            .start()
            .block(header(b"multi", b'M', 3))
            .data(b"abc")
            .start()
            .block(header(b"old/dir/", b'0', 0))
            .end();
        let got = read_ok(&ar);
        let kinds: Vec<(String, Kind, u64)> =
            got.iter().map(|g| (g.name(), g.m.kind, g.m.size)).collect();
        let want = [
            ("f0", Kind::File, 5),
            ("nul", Kind::File, 0),
            ("contig", Kind::File, 0),
            ("hard", Kind::Hardlink, 0),
            ("sym", Kind::Symlink, 0),
            ("chr", Kind::CharDev, 0),
            ("blk", Kind::BlockDev, 0),
            ("dir/", Kind::Dir, 0),
            ("fifo", Kind::Fifo, 0),
            ("label", Kind::Other(b'V'), 0),
            ("unknown", Kind::Other(b'A'), 0),
            ("dumpdir", Kind::Dir, 0),
            ("multi", Kind::Other(b'M'), 3),
            ("old/dir/", Kind::Dir, 0),
        ];
        let want: Vec<(String, Kind, u64)> =
            want.iter().map(|(n, k, s)| (n.to_string(), *k, *s)).collect();
        assert_eq!(kinds, want);
        assert_eq!(got[0].contents(), b"hello");
        assert_eq!(got[3].m.link_name, b"target");
        assert_eq!(got[4].m.link_name, b"target");
        assert!(got[11].chunks.is_empty(), "dumpdir data is skipped");
        assert_eq!(got[12].contents(), b"abc");
        let m = &got[0].m;
        assert_eq!((m.mode, m.uid, m.gid), (0o644, 0o1750, 0o1751));
        assert_eq!(m.mtime, Timestamp { secs: MTIME as i64, nanos: 0 });
        assert_eq!(m.sparse, None);
    }

    #[test]
    fn member_offsets_and_reader_offset() {
        let ar = Ar::new()
            .file("a", &[1; 600])
            .start()
            .pax(b'x', &[("path", b"b")])
            .block(header(b"ignored", b'0', 1))
            .data(b"x")
            .file("c", b"");
        let starts = ar.starts.clone();
        let bytes = ar.end();
        let mut r = Reader::new(&bytes[..]);
        let mut offs = Vec::new();
        while let Some(m) = r.next_member().unwrap() {
            offs.push(m.offset);
        }
        assert_eq!(offs, starts);
        assert_eq!(r.offset(), bytes.len() as u64);
        // Nothing after the end marker is read; the caller gets it back.
        let mut padded = bytes.clone();
        padded.extend_from_slice(b"trailing");
        let mut r = Reader::new(&padded[..]);
        while r.next_member().unwrap().is_some() {}
        assert_eq!(r.into_inner(), b"trailing");
    }

    #[test]
    fn chunking() {
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let ar = Ar::new().file("f", &content).end();
        let (got, err) = read_with(&ar, 4096);
        assert_eq!(err, None);
        let offs: Vec<(u64, usize)> = got[0].chunks.iter().map(|(o, c)| (*o, c.len())).collect();
        assert_eq!(offs, [(0, 4096), (4096, 4096), (8192, 1808)]);
        assert_eq!(got[0].contents(), content);
    }

    #[test]
    fn long_names_gnu() {
        let long100 = "d/".repeat(60) + "file";
        let long300 = "e".repeat(300);
        let target = "t/".repeat(200);
        let mut b = tar::Builder::new(Vec::new());
        for name in [&long100, &long300] {
            let mut h = tar::Header::new_gnu();
            h.set_size(3);
            h.set_mode(0o600);
            b.append_data(&mut h, name, &b"abc"[..]).unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "link", &target).unwrap();
        let bytes = b.into_inner().unwrap();
        let got = read_ok(&bytes);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].name(), long100);
        assert_eq!(got[1].name(), long300);
        assert_eq!(got[1].contents(), b"abc");
        assert_eq!(got[1].m.mode, 0o600);
        assert_eq!(got[2].name(), "link");
        assert_eq!(got[2].m.kind, Kind::Symlink);
        assert_eq!(String::from_utf8_lossy(&got[2].m.link_name), target);
        assert_eq!(got[0].m.offset, 0);
        assert!(got[1].m.offset > 1024);

        // Hand-built: L data without a trailing NUL, and a redundant L (the last one wins).
        let ar = Ar::new()
            .start()
            .block(header(b"././@LongLink", b'L', 5))
            .data(b"first")
            .block(header(b"././@LongLink", b'L', 7))
            .data(b"second\0")
            .block(header(b"././@LongLink", b'K', 3))
            .data(b"tgt")
            .block(header(b"short", b'1', 0))
            .end();
        let got = read_ok(&ar);
        assert_eq!(got[0].name(), "second");
        assert_eq!(got[0].m.link_name, b"tgt");
        assert_eq!(got[0].m.kind, Kind::Hardlink);
    }

    #[test]
    fn long_names_pax_and_ustar_prefix() {
        let long = "p/".repeat(150) + "name";
        let ar = Ar::new()
            .start()
            .pax(b'x', &[("path", long.as_bytes()), ("linkpath", b"L".repeat(500).as_slice())])
            .block(header(b"truncated", b'2', 0))
            .start()
            .block(header_with(b"name", b'0', 0, |b| b[345..348].copy_from_slice(b"pre")))
            // GNU magic: the prefix field is not a prefix.
            .start()
            .block(header_with(b"gnu", b'0', 0, |b| {
                b[257..265].copy_from_slice(b"ustar  \0");
                b[345..348].copy_from_slice(b"pre");
            }))
            // PAX path wins over a GNU long name.
            .start()
            .pax(b'x', &[("path", b"from-pax")])
            .block(header(b"././@LongLink", b'L', 6))
            .data(b"from-L")
            .block(header(b"hdr", b'0', 0))
            // An empty PAX path is an empty name, as for GNU tar 1.34 and Go.
            .start()
            .pax(b'x', &[("path", b"")])
            .block(header(b"p3", b'0', 0))
            .end();
        let got = read_ok(&ar);
        let names: Vec<String> = got.iter().map(Got::name).collect();
        assert_eq!(names, [long.as_str(), "pre/name", "gnu", "from-pax", ""]);
        assert_eq!(got[0].m.link_name, b"L".repeat(500));
        // tar crate PAX extensions.
        let mut b = tar::Builder::new(Vec::new());
        b.append_pax_extensions([("path", long.as_bytes())]).unwrap();
        let mut h = tar::Header::new_ustar();
        h.set_size(2);
        h.set_path("short").unwrap();
        h.set_cksum();
        b.append(&h, &b"hi"[..]).unwrap();
        let got = read_ok(&b.into_inner().unwrap());
        assert_eq!(got[0].name(), long);
        assert_eq!(got[0].contents(), b"hi");
    }

    #[test]
    fn pax_overrides_and_globals() {
        let ar = Ar::new()
            .start()
            .pax(b'g', &[("mtime", b"5.25"), ("uid", b"77"), ("comment", b"x")])
            .block(header(b"a", b'0', 0))
            // Local beats global.
            .start()
            .pax(b'x', &[("mtime", b"-1.5"), ("uid", b"0"), ("gid", b"4294967295")])
            .block(header(b"b", b'0', 0))
            .file("c", b"")
            // A later global header replaces the whole set, as in GNU tar: uid is 8, and the
            // mtime is the header's again.
            .start()
            .pax(b'g', &[("uid", b"8")])
            .pax(b'x', &[("size", b"3"), ("mtime", b"1700000000.123456789123")])
            .block(header(b"d", b'0', 0))
            .data(b"xyz")
            .file("e", b"")
            // One that sets nothing clears the set.
            .start()
            .pax(b'g', &[("comment", b"reset")])
            .file("f", b"")
            .end();
        let got = read_ok(&ar);
        let t = |g: &Got| (g.m.mtime.secs, g.m.mtime.nanos, g.m.uid, g.m.gid);
        let header_time = 1_000_000;
        assert_eq!(t(&got[0]), (5, 250_000_000, 77, 0o1751));
        assert_eq!(t(&got[1]), (-2, 500_000_000, 0, u64::from(u32::MAX)));
        assert_eq!(t(&got[2]), (5, 250_000_000, 77, 0o1751));
        assert_eq!(t(&got[3]), (1_700_000_000, 123_456_789, 8, 0o1751));
        assert_eq!(t(&got[4]), (header_time, 0, 8, 0o1751));
        assert_eq!(t(&got[5]), (header_time, 0, 0o1750, 0o1751));
        assert_eq!(got[3].contents(), b"xyz");
        assert_eq!(got[3].m.offset, got[2].m.offset + 512);
    }

    /// A resumed run's reader begins at a member boundary, from an earlier unit's start, with
    /// the archive's own offsets; a PAX global value or a volume label is carried across every
    /// boundary after it, so none of those may be resumed at.
    #[test]
    fn resumed_at_a_member_boundary() {
        let ar = Ar::new().file("a", b"one").file("b", &[7; 700]).file("c", b"three").end();
        let plain = read_ok(&ar);
        let c = plain[2].m.offset;
        let none = Globals::default();
        for from in [0, plain[1].m.offset, c] {
            let mut r = Reader::resume(&ar[from as usize..], c, from, &none).unwrap();
            let m = r.next_member().unwrap().unwrap();
            assert_eq!((m.name.as_slice(), m.offset), (&b"c"[..], c), "from {from}");
            assert_eq!(r.carried(), Some(&none));
        }
        assert!(Reader::resume(&ar[..], c + 1, 0, &none).is_err(), "not a block boundary");
        assert!(Reader::resume(&ar[..], 512, 1024, &none).is_err(), "before its unit");
        assert!(Reader::resume(&ar[..], 100 * 512, 0, &none).is_err(), "past the end");
    }

    /// PAX global headers apply to every member after them: a reader resumed past them reads
    /// the carried ones again and returns the members an uninterrupted reader returns. Each
    /// replaces the whole set (GNU tar), so what is carried is the header that last set the
    /// volume label and the last one, when it set a value or cleared what was set; one that
    /// changes nothing (`git archive`'s comment) is not carried; more than GLOBALS_MAX of
    /// them leave no resume point.
    #[test]
    fn globals_are_carried_to_a_resumed_reader() {
        let ar = Ar::new()
            .start()
            .pax(b'g', &[("comment", &b"0123abcd"[..])])
            .pax(
                b'g',
                &[("uid", &b"8"[..]), ("uname", &b"eight"[..]), ("mtime", &b"1600000000.5"[..])],
            )
            .file("a", b"one")
            .pax(b'g', &[("GNU.volume.label", &b"vol"[..]), ("uid", &b"9"[..])])
            .file("b", &[7; 700])
            .pax(b'g', &[("comment", &b"reset"[..])])
            .file("c", b"three")
            .pax(b'g', &[("gid", &b"10"[..])])
            .file("d", b"four")
            .pax(b'g', &[("comment", &b"again"[..])])
            .pax(b'g', &[("comment", &b"nothing to clear"[..])])
            .file("e", b"five")
            .end();
        let whole = read_ok(&ar);
        let mut r = Reader::new(&ar[..]);
        let mut carried = Vec::new();
        while let Some(m) = r.next_member().unwrap() {
            carried.push((m.offset, r.carried().cloned().unwrap()));
        }
        let kept = |i: usize| {
            let g: &Globals = &carried[i].1;
            g.headers
                .iter()
                .map(|h| String::from_utf8_lossy(&h.records).into_owned())
                .collect::<Vec<String>>()
        };
        let text = |k: &str, v: &str| String::from_utf8(rec(k, v.as_bytes())).unwrap();
        let label = text("GNU.volume.label", "vol") + &text("uid", "9");
        let reset = text("comment", "reset");
        let again = text("comment", "again");
        assert_eq!(
            kept(0),
            [text("uid", "8") + &text("uname", "eight") + &text("mtime", "1600000000.5")]
        );
        assert_eq!(kept(1), std::slice::from_ref(&label));
        assert_eq!(kept(2), [label.clone(), reset]);
        assert_eq!(kept(3), [label.clone(), text("gid", "10")]);
        assert_eq!(kept(4), [label, again]);
        // What the headers gave each member: a replaced set, the label kept.
        let ids: Vec<(u64, u64)> = whole.iter().map(|g| (g.m.uid, g.m.gid)).collect();
        assert_eq!(
            ids,
            [(8, 0o1751), (9, 0o1751), (0o1750, 0o1751), (0o1750, 10), (0o1750, 0o1751)]
        );
        for (i, (at, globals)) in carried.iter().enumerate() {
            let mut r = Reader::resume(&ar[*at as usize..], *at, *at, globals).unwrap();
            let mut rest = vec![r.next_member().unwrap().unwrap()];
            // The label is the carried one from the first member on (`-v`'s lines show it).
            let label = r.volume_label().map(|(l, t)| (l.to_vec(), t));
            assert_eq!(label, (i > 0).then(|| (b"vol".to_vec(), 1_000_000)), "at member {i}");
            while let Some(m) = r.next_member().unwrap() {
                rest.push(m);
            }
            // Every field a carried header may set, and the offsets.
            let seen = |m: &Member| format!("{m:?}");
            let want: Vec<_> = whole[i..].iter().map(|e| seen(&e.m)).collect();
            assert_eq!(rest.iter().map(seen).collect::<Vec<_>>(), want, "resumed at member {i}");
        }
        // A carried header the parser refuses (a forged state): an error, not a guess. One it
        // finds malformed is read as the interrupted run read it (the records before the
        // malformed one), which said so then.
        let records = rec("path", &vec![b'p'; pax::MAX_NAME_VALUE + 1]);
        let bad = Globals { headers: vec![GlobalHeader { mtime: 0, records }] };
        assert!(Reader::resume(&ar[..], 0, 0, &bad).is_err());
        let records = [rec("uid", b"7"), b"9 uid=8".to_vec()].concat();
        let cut = Globals { headers: vec![GlobalHeader { mtime: 0, records }] };
        let plain = Ar::new().file("z", b"").end();
        let mut r = Reader::resume(&plain[..], 0, 0, &cut).unwrap();
        assert_eq!(r.next_member().unwrap().unwrap().uid, 7);
        assert!(r.take_failures().is_empty());
        // Past GLOBALS_MAX: nothing can be carried; a large one that sets nothing is no bar.
        let big = vec![b'x'; GLOBALS_MAX];
        for (key, carried) in [("path", false), ("comment", true)] {
            let ar = Ar::new().start().pax(b'g', &[(key, &big[..])]).file("a", b"").end();
            let mut r = Reader::new(&ar[..]);
            r.next_member().unwrap();
            assert_eq!(r.carried().is_some(), carried, "{key}");
        }
    }

    #[test]
    fn base256_and_bad_sizes() {
        // A 10-byte file whose size is written in base-256.
        let ar = Ar::new()
            .start()
            .block(header_with(b"big", b'0', 0, |b| {
                b[124..136].copy_from_slice(b"\x80\0\0\0\0\0\0\0\0\0\0\x0a");
                b[136..148].copy_from_slice(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xfe");
                b[108..116].copy_from_slice(b"\x80\0\0\0\xff\xff\xff\xfe");
            }))
            .data(b"0123456789")
            .end();
        let got = read_ok(&ar);
        assert_eq!(got[0].contents(), b"0123456789");
        assert_eq!(got[0].m.mtime.secs, -2);
        assert_eq!(got[0].m.uid, 0xffff_fffe);

        let cases: &[(Block, &str)] = &[
            (
                header_with(b"neg", b'0', 0, |b| b[124..136].fill(0xff)),
                "neg: negative size (archive offset 0)",
            ),
            (
                header_with(b"huge", b'0', 0, |b| {
                    b[124..136].copy_from_slice(b"\x80\0\0\0\x80\0\0\0\0\0\0\0")
                }),
                "huge: bad size field (out of range) (archive offset 0)",
            ),
            (
                header_with(b"garbage", b'0', 0, |b| b[124..136].copy_from_slice(b"0000000001x\0")),
                "garbage: bad size field (not a number)",
            ),
            (
                header_with(b"blank", b'0', 0, |b| b[124..136].fill(b' ')),
                "blank: bad size field (blank)",
            ),
            (
                header_with(b"mode", b'0', 0, |b| b[100..108].copy_from_slice(b"0030816\0")),
                "mode: bad mode field",
            ),
            (header_with(b"neguid", b'0', 0, |b| b[108..116].fill(0xff)), "neguid: negative uid"),
        ];
        for (h, want) in cases {
            let bytes = Ar::new().block(*h).end();
            let e = read_err(&bytes);
            assert!(e.contains(want), "{e}");
        }
        // PAX size beyond 2^63, negative, not a number: said (GNU tar's words), the record
        // ignored, the header's size read.
        for (v, want) in [
            (
                &b"9223372036854775808"[..],
                "Extended header size=9223372036854775808 is out of range",
            ),
            (b"-1", "Extended header size=-1 is out of range 0..9223372036854775807"),
            (b"1e3", "Malformed extended header: invalid size=1e3"),
        ] {
            let bytes = Ar::new().pax(b'x', &[("size", v)]).file("f", b"ab").end();
            let (got, said) = read_said(&bytes);
            assert_eq!(said.len(), 1, "{said:?}");
            assert!(said[0].starts_with("archive offset 0: "), "{said:?}");
            assert!(said[0].contains(want), "{said:?}");
            assert_eq!(got[0].contents(), b"ab");
        }
    }

    #[test]
    fn data_shorter_than_declared() {
        let mut ar = Ar::new().file("ok", b"x").file("short", &[7; 5000]).end();
        ar.truncate(512 * 2 + 512 + 3000);
        let (got, err) = read_with(&ar, 1024);
        assert_eq!(got.len(), 2);
        assert_eq!(err.unwrap(), "short: unexpected end of archive (archive offset 4536)");
        // What arrived is handed on, the last chunk short (GNU tar writes it too), and the
        // error comes with the next call; `check` has it from then on.
        let lens: Vec<usize> = got[1].chunks.iter().map(|c| c.1.len()).collect();
        assert_eq!(lens, [1024, 1024, 952]);
        assert!(got[1].chunks.iter().all(|c| c.1.iter().all(|&b| b == 7)));
        let mut r = Reader::new(&ar[..]);
        r.next_member().unwrap();
        r.next_member().unwrap();
        let mut buf = vec![0; 4096];
        assert_eq!(r.read_data(&mut buf).unwrap(), Some((0, 3000)));
        let e = r.check().unwrap_err().to_string();
        assert_eq!(e, "short: unexpected end of archive (archive offset 4536)");
        assert_eq!(r.read_data(&mut buf).unwrap_err().to_string(), e);
        // Also when the data is skipped rather than read.
        let mut r = Reader::new(&ar[..]);
        r.next_member().unwrap();
        r.next_member().unwrap();
        let e = r.next_member().unwrap_err().to_string();
        assert_eq!(e, "short: unexpected end of archive (archive offset 4536)");
    }

    #[test]
    fn checksums_and_not_tar() {
        let text = b"this is not a tar archive, just some text\n".repeat(30);
        let e = read_err(&text);
        assert_eq!(e, "archive offset 0: not a tar archive (bad header checksum)");
        let mut lz = b"LZIP\x01".to_vec();
        lz.resize(2048, 7);
        assert_eq!(
            read_err(&lz),
            "archive offset 0: not a tar archive: it starts like lzip-compressed data, which \
             fastuntar does not read, but --lzip reads it through lzip -d"
        );
        let mut zip = b"PK\x03\x04".to_vec();
        zip.resize(105, 0);
        assert_eq!(
            read_err(&zip),
            "archive offset 0: not a tar archive: it starts like a zip archive, which fastuntar \
             does not read"
        );
        assert_eq!(read_err(b"hello\n"), "archive offset 0: not a tar archive (only 6 bytes)");
        assert_eq!(read_err(b""), "archive offset 0: not a tar archive (empty input)");
        let mut ar = Ar::new().file("foo", b"abc").file("bar", b"").end();
        ar[1024 + 10] ^= 1;
        assert_eq!(read_err(&ar), "archive offset 1024 (after 'foo'): bad header checksum");
        // The historical signed checksum is accepted.
        let mut h = header(b"\xe9t\xe9", b'0', 0);
        h[148..156].fill(b' ');
        let signed: i32 = h.iter().map(|&x| i32::from(x as i8)).sum();
        h[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
        let got = read_ok(&Ar::new().block(h).end());
        assert_eq!(got[0].m.name, b"\xe9t\xe9");
    }

    #[test]
    fn pax_errors() {
        let bad_len = Ar::new()
            .file("first", b"")
            .block(header(b"PaxHeader/x", b'x', 11))
            .data(b"99 path=ab\n")
            .block(header(b"f", b'0', 0))
            .end();
        // Malformed: said, and the member read from its own header, as GNU tar does.
        let (got, said) = read_said(&bad_len);
        assert_eq!(
            said,
            ["archive offset 512 (after 'first'): Extended header length 99 is out of range"]
        );
        assert_eq!(got[1].name(), "f");
        // The records before a malformed one stand; a `g` header the same.
        let partial = Ar::new()
            .start()
            .pax(b'g', &[("uid", b"3")])
            .data(b"")
            .block(header(b"PaxHeader/x", b'x', 40))
            .data(b"17 path=from-pax\n11 path=bad\x0012 gid=99\n")
            .block(header(b"h", b'0', 0))
            .end();
        let (got, said) = read_said(&partial);
        assert_eq!(said, ["archive offset 1024: Malformed extended header: missing newline"]);
        assert_eq!((got[0].name(), got[0].m.uid, got[0].m.gid), ("from-pax".into(), 3, 0o1751));
        // Huge records that are skipped are fine (libarchive's pax_large_attr has 8 MB).
        let big = vec![b'a'; 3 << 20];
        let ar = Ar::new()
            .start()
            .pax(b'x', &[("SCHILY.xattr.user.big", &big), ("path", b"p")])
            .block(header(b"f", b'0', 0))
            .end();
        assert_eq!(read_ok(&ar)[0].name(), "p");
        // A kept value over its cap is an error.
        let long = vec![b'a'; pax::MAX_NAME_VALUE + 1];
        let ar = Ar::new().pax(b'x', &[("path", &long)]).block(header(b"f", b'0', 0)).end();
        assert!(read_err(&ar).contains("path value too long"));
    }

    #[test]
    fn oversized_long_name() {
        let ar = Ar::new()
            .file("before", b"")
            .block(header(b"././@LongLink", b'L', MAX_LONG_NAME + 1))
            .end();
        assert_eq!(
            read_err(&ar),
            format!(
                "archive offset 512 (after 'before'): GNU long name of {} bytes (limit {MAX_LONG_NAME})",
                MAX_LONG_NAME + 1
            )
        );
        let ar = Ar::new().block(header(b"././@LongLink", b'K', 0o77777777777)).end();
        assert!(read_err(&ar).contains("GNU long link name of"));
    }

    #[test]
    fn end_of_archive_variants() {
        let one = Ar::new().file("a", b"1").end();
        let body = &one[..1024];
        // Two zero blocks, trailing garbage after them not read.
        let mut with_garbage = one.clone();
        with_garbage.extend_from_slice(b"garbage after the end");
        // (archive, members, offset at the end)
        let cases: Vec<(Vec<u8>, usize, u64)> = vec![
            (one.clone(), 1, 2048),
            (with_garbage, 1, 2048),
            (body.to_vec(), 1, 1024),
            ([body, &[0u8; 512][..]].concat(), 1, 1536),
            ([body, &[0u8; 100][..]].concat(), 1, 1124),
            ([body, &[0u8; 700][..]].concat(), 1, 1724),
            // A lone zero block followed by something else: GNU tar warns and stops.
            ([body, &[0u8; 512][..], &header(b"b", b'0', 0)[..]].concat(), 1, 2048),
            (vec![0u8; 1024], 0, 1024),
            (vec![0u8; 10240], 0, 1024),
            (vec![0u8; 512], 0, 512),
        ];
        for (i, (ar, n, end)) in cases.iter().enumerate() {
            let mut r = Reader::new(&ar[..]);
            let mut count = 0;
            while r.next_member().unwrap().is_some() {
                count += 1;
            }
            assert_eq!((count, r.offset()), (*n, *end), "case {i}");
        }
        // Truncated non-zero block where a header would start.
        let cut = [body, &header(b"b", b'0', 0)[..100]].concat();
        assert_eq!(read_err(&cut), "archive offset 1124 (after 'a'): unexpected end of archive");
        // Extension headers with nothing after them.
        let dangling = Ar::new().pax(b'x', &[("path", b"p")]).bytes;
        assert!(read_err(&dangling).contains("end of archive after an extended header"));
        let dangling = Ar::new().pax(b'x', &[("path", b"p")]).end();
        assert!(read_err(&dangling).contains("end of archive after an extended header"));
        // A global header alone is fine.
        assert!(read_ok(&Ar::new().pax(b'g', &[("mtime", b"1")]).end()).is_empty());
    }

    #[test]
    fn hard_link_data() {
        // A hard link declaring data that is present (pax allows it): skipped.
        let ar = Ar::new()
            .file("a", b"data")
            .start()
            .block(header_with(b"h", b'1', 600, |b| b[157] = b'a'))
            .data(&[b'X'; 600])
            .file("b", b"bee")
            .end();
        let got = read_ok(&ar);
        let names: Vec<String> = got.iter().map(Got::name).collect();
        assert_eq!(names, ["a", "h", "b"]);
        assert_eq!(got[1].m.size, 0);
        assert!(got[1].chunks.is_empty());
        assert_eq!(got[2].contents(), b"bee");
        // A size but no data (old writers): the next block is a header, so nothing is skipped.
        let ar = Ar::new()
            .file("a", b"data")
            .start()
            .block(header_with(b"h", b'1', 600, |b| b[157] = b'a'))
            .file("b", b"bee")
            .end();
        let names: Vec<String> = read_ok(&ar).iter().map(Got::name).collect();
        assert_eq!(names, ["a", "h", "b"]);
        // Likewise at the very end of an archive without end blocks.
        let ar = Ar::new()
            .file("a", b"data")
            .block(header_with(b"h", b'1', 600, |b| b[157] = b'a'))
            .bytes;
        assert_eq!(read_ok(&ar).len(), 2);
        // Directories and symlinks with data are handled the same way.
        let ar = Ar::new()
            .block(header(b"d/", b'5', 10))
            .data(b"0123456789")
            .block(header(b"s", b'2', 1))
            .block(header(b"f", b'0', 0))
            .end();
        let names: Vec<String> = read_ok(&ar).iter().map(Got::name).collect();
        assert_eq!(names, ["d/", "s", "f"]);
        // An old-style directory (regular type, trailing slash) declaring a size it does not
        // store (libarchive's test_compat_tar_directory_1.tar); and one that does store it.
        let ar = Ar::new()
            .block(header(b"directory1/", 0, 1))
            .block(header(b"directory2/", 0, 3))
            .data(b"xyz")
            .block(header(b"f", b'0', 0))
            .end();
        let got = read_ok(&ar);
        let kinds: Vec<(String, Kind)> = got.iter().map(|g| (g.name(), g.m.kind)).collect();
        let want = [("directory1/", Kind::Dir), ("directory2/", Kind::Dir), ("f", Kind::File)];
        assert_eq!(kinds, want.map(|(n, k)| (n.to_string(), k)));
    }

    /// Old GNU sparse header: four entries in the header, then 21 per extension block.
    fn old_gnu_sparse(name: &str, realsize: u64, segs: &[(u64, u64)]) -> Vec<u8> {
        let stored: u64 = segs.iter().map(|s| s.1).sum();
        let entry = |b: &mut [u8], (o, n): (u64, u64)| {
            b[..12].copy_from_slice(format!("{o:011o}\0").as_bytes());
            b[12..24].copy_from_slice(format!("{n:011o}\0").as_bytes());
        };
        let (head, rest) = segs.split_at(segs.len().min(4));
        let h = header_with(name.as_bytes(), b'S', stored, |b| {
            b[257..265].copy_from_slice(b"ustar  \0");
            for (i, &s) in head.iter().enumerate() {
                entry(&mut b[386 + 24 * i..], s);
            }
            b[482] = u8::from(!rest.is_empty());
            b[483..495].copy_from_slice(format!("{realsize:011o}\0").as_bytes());
        });
        let mut out = h.to_vec();
        let chunks: Vec<&[(u64, u64)]> = rest.chunks(format::SPARSES_IN_EXTENSION).collect();
        for (i, c) in chunks.iter().enumerate() {
            let mut x = [0u8; BLOCK];
            for (j, &s) in c.iter().enumerate() {
                entry(&mut x[24 * j..], s);
            }
            x[504] = u8::from(i + 1 < chunks.len());
            out.extend_from_slice(&x);
        }
        let data: Vec<u8> = (0..stored).map(|i| (i % 253) as u8 + 1).collect();
        out.extend(Ar::new().data(&data).bytes);
        out
    }

    /// Expected contents of a sparse file built by these tests.
    fn sparse_contents(realsize: u64, segs: &[(u64, u64)]) -> Vec<u8> {
        let mut v = vec![0u8; realsize as usize];
        let mut i = 0u64;
        for &(o, n) in segs {
            for k in 0..n {
                v[(o + k) as usize] = (i % 253) as u8 + 1;
                i += 1;
            }
        }
        v
    }

    fn seg_list(m: &Member) -> Vec<(u64, u64)> {
        m.sparse.as_ref().unwrap().iter().map(|s| (s.offset, s.len)).collect()
    }

    #[test]
    fn sparse_old_gnu() {
        // 4 entries in the header, 21 in the first extension block, 3 in the second, with
        // a zero-length one in the middle and one marking the end of the file.
        let mut segs: Vec<(u64, u64)> = (0..26).map(|i| (i * 1000, 10 + i)).collect();
        segs.push((40_000, 0));
        segs.push((99_990, 10));
        segs.push((100_000, 0));
        let mut ar = Ar::new().start();
        ar.bytes.extend(old_gnu_sparse("sp", 100_000, &segs));
        let ar = ar.file("after", b"z").end();
        let got = read_ok(&ar);
        assert_eq!(got[0].m.kind, Kind::File);
        assert_eq!(got[0].m.size, 100_000);
        let nonempty: Vec<(u64, u64)> = segs.iter().copied().filter(|s| s.1 > 0).collect();
        assert_eq!(seg_list(&got[0].m), nonempty);
        assert_eq!(got[0].contents(), sparse_contents(100_000, &segs));
        assert_eq!(got[1].name(), "after");
        // A chunk never spans two segments.
        let (g, _) = read_with(&ar, 25);
        let chunks: Vec<(u64, usize)> = g[0].chunks.iter().map(|(o, c)| (*o, c.len())).collect();
        assert_eq!(&chunks[..5], [(0, 10), (1000, 11), (2000, 12), (3000, 13), (4000, 14)]);
        assert_eq!(&chunks[15..18], [(15_000, 25), (16_000, 25), (16_025, 1)]);
        // Invalid maps.
        for (segs, want) in [
            (&[(0u64, 10u64), (5, 10)][..], "overlaps"),
            (&[(0, 10), (200_000, 10)][..], "beyond the file size"),
        ] {
            let ar = [old_gnu_sparse("bad", 100_000, segs), vec![0; 1024]].concat();
            let e = read_err(&ar);
            assert!(e.starts_with("bad: ") && e.contains(want), "{e}");
        }
        // Extension blocks missing.
        let full = old_gnu_sparse("cut", 100_000, &segs);
        let e = read_err(&full[..512 + 256]);
        assert_eq!(e, "cut: unexpected end of archive (archive offset 768)");
    }

    fn pax_v1_sparse(name: &str, realsize: u64, segs: &[(u64, u64)]) -> Vec<u8> {
        let mut map = format!("{}\n", segs.len());
        for (o, n) in segs {
            map += &format!("{o}\n{n}\n");
        }
        let map = Ar::new().data(map.as_bytes()).bytes;
        let stored: u64 = segs.iter().map(|s| s.1).sum();
        let data: Vec<u8> = (0..stored).map(|i| (i % 253) as u8 + 1).collect();
        let real = realsize.to_string();
        let mut ar = Ar::new()
            .pax(
                b'x',
                &[
                    ("GNU.sparse.major", b"1"),
                    ("GNU.sparse.minor", b"0"),
                    ("GNU.sparse.name", name.as_bytes()),
                    ("GNU.sparse.realsize", real.as_bytes()),
                ],
            )
            .block(header(b"GNUSparseFile.0/x", b'0', map.len() as u64 + stored));
        ar.bytes.extend(map);
        ar.data(&data).bytes
    }

    #[test]
    fn sparse_pax() {
        let segs: Vec<(u64, u64)> =
            (0..100).map(|i| (i * 1000, 7 + i % 5)).chain([(200_000, 0)]).collect();
        let nonempty: Vec<(u64, u64)> = segs.iter().copied().filter(|s| s.1 > 0).collect();
        let stored: u64 = segs.iter().map(|s| s.1).sum();
        let data: Vec<u8> = (0..stored).map(|i| (i % 253) as u8 + 1).collect();
        let numblocks = segs.len().to_string();
        let size0 = "200000";

        // 0.0: offset/numbytes pairs.
        let mut recs: Vec<(String, Vec<u8>)> = vec![
            ("GNU.sparse.size".into(), size0.into()),
            ("GNU.sparse.numblocks".into(), numblocks.clone().into()),
        ];
        for (o, n) in &segs {
            recs.push(("GNU.sparse.offset".into(), o.to_string().into()));
            recs.push(("GNU.sparse.numbytes".into(), n.to_string().into()));
        }
        let recs: Vec<(&str, &[u8])> =
            recs.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        let v00 = Ar::new().pax(b'x', &recs).block(header(b"s00", b'0', stored)).data(&data).bytes;

        // 0.1: one map record.
        let map01: Vec<String> = segs.iter().map(|(o, n)| format!("{o},{n}")).collect();
        let map01 = map01.join(",");
        let v01 = Ar::new()
            .pax(
                b'x',
                &[
                    ("GNU.sparse.size", size0.as_bytes()),
                    ("GNU.sparse.numblocks", numblocks.as_bytes()),
                    ("GNU.sparse.name", b"s01"),
                    ("GNU.sparse.map", map01.as_bytes()),
                ],
            )
            .block(header(b"GNUSparseFile.1/s01", b'0', stored))
            .data(&data)
            .bytes;

        // 1.0: map in the data area (more than one block of it).
        let v10 = pax_v1_sparse("s10", 200_000, &segs);

        let ar = [v00, v01, v10, Ar::new().file("after", b"!").end()].concat();
        let got = read_ok(&ar);
        let names: Vec<String> = got.iter().map(Got::name).collect();
        assert_eq!(names, ["s00", "s01", "s10", "after"]);
        let want = sparse_contents(200_000, &segs);
        for g in &got[..3] {
            assert_eq!(g.m.size, 200_000, "{}", g.name());
            assert_eq!(seg_list(&g.m), nonempty, "{}", g.name());
            assert_eq!(g.contents(), want, "{}", g.name());
        }
        assert_eq!(got[3].contents(), b"!");

        // Broken maps.
        let bad_version = Ar::new()
            .pax(b'x', &[("GNU.sparse.major", b"2"), ("GNU.sparse.minor", b"0")])
            .block(header(b"f", b'0', 0))
            .end();
        assert!(read_err(&bad_version).contains("unsupported GNU sparse format 2.0"));
        let too_much = pax_v1_sparse("over", 100, &[(0, 50), (60, 50)]);
        let e = read_err(&[too_much, vec![0; 1024]].concat());
        assert!(e.starts_with("over: sparse map reaches offset 110"), "{e}");
        let mut unterminated = Ar::new()
            .pax(b'x', &[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
            .block(header(b"f", b'0', 512));
        unterminated.bytes.extend([b'1'; 512]);
        let e = read_err(&unterminated.end());
        assert!(e.contains("number out of range"), "{e}");
        let mut no_room = Ar::new()
            .pax(b'x', &[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
            .block(header(b"f", b'0', 512));
        no_room
            .bytes
            .extend(Ar::new().data(format!("200\n{}", "0\n".repeat(254)).as_bytes()).bytes);
        let e = read_err(&no_room.end());
        assert!(e.contains("sparse map runs past the member data"), "{e}");
        // A huge declared count is refused before anything is allocated for it.
        let mut huge = Ar::new()
            .pax(b'x', &[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
            .block(header(b"f", b'0', 512));
        huge.bytes.extend(Ar::new().data(b"99999999999999\n").bytes);
        assert!(read_err(&huge.end()).contains("entries (limit"));
        // Stored data beyond what the map covers is skipped (GNU tar does the same).
        let extra = Ar::new()
            .pax(b'x', &[("GNU.sparse.size", b"100"), ("GNU.sparse.map", b"10,5")])
            .block(header(b"x", b'0', 700))
            .data(&[9; 700])
            .file("next", b"n")
            .end();
        let got = read_ok(&extra);
        assert_eq!(seg_list(&got[0].m), [(10, 5)]);
        assert_eq!(got[0].chunks, [(10, vec![9; 5])]);
        assert_eq!(got[1].name(), "next");
    }

    /// Several members of every kind the reader has to parse, and where each begins.
    fn mixed_archive() -> Ar {
        let mut ar = Ar::new()
            .file("plain", &[1; 700])
            .start()
            .block(header(b"././@LongLink", b'L', 200))
            .data(&[b'n'; 200])
            .block(header(b"short", b'0', 3))
            .data(b"abc")
            .start()
            .pax(b'g', &[("uid", b"5")])
            .boundary()
            .pax(b'x', &[("path", b"pax/name"), ("mtime", b"1.5")])
            .block(header(b"p", b'0', 1024))
            .data(&[2; 1024])
            .start();
        ar.bytes.extend(pax_v1_sparse("sparse1", 100_000, &[(0, 600), (50_000, 10), (100_000, 0)]));
        ar = ar.start();
        let segs: Vec<(u64, u64)> = (0..30).map(|i| (i * 3, 1)).collect();
        ar.bytes.extend(old_gnu_sparse("sparse0", 100, &segs));
        ar.start()
            .block(header_with(b"link", b'1', 0, |b| b[157] = b'p'))
            .start()
            .block(header(b"dir/", b'5', 0))
            .file("last", b"end")
    }

    /// Data skipped in place (a source that can, as the frame-parallel decoder can for a
    /// worker's frames) reads the same members as data read into the scratch buffer, and an
    /// in-place skip past the end is an error like a short read.
    #[test]
    fn skipping_in_place() {
        /// Skips in place on every other call, at most 700 bytes at a time.
        struct InPlace<'a> {
            data: &'a [u8],
            calls: usize,
        }
        impl Read for InPlace<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.data.read(buf)
            }
        }
        impl Skip for InPlace<'_> {
            fn skip_in_place(&mut self, n: u64) -> io::Result<u64> {
                self.calls += 1;
                if self.calls.is_multiple_of(2) {
                    return Ok(0);
                }
                let k = (n as usize).min(700).min(self.data.len());
                self.data = &self.data[k..];
                Ok(k as u64)
            }
        }
        let ar = mixed_archive().end();
        fn names<R: Skip>(r: &mut Reader<R>) -> Vec<(String, u64)> {
            let mut v = Vec::new();
            while let Some(m) = r.next_member().unwrap() {
                v.push((m.display_name(), r.offset()));
            }
            v
        }
        let mut plain = Reader::new(&ar[..]);
        let mut in_place = Reader::new(InPlace { data: &ar, calls: 0 });
        let want = names(&mut plain);
        assert_eq!(names(&mut in_place), want);
        assert!(in_place.into_inner().calls > 4, "skipped in place");
        // Data cut short inside a member that is skipped.
        let data_of_p = ar.windows(1024).position(|w| w == [2; 1024]).unwrap();
        let cut = &ar[..data_of_p + 100];
        let mut r = Reader::new(InPlace { data: cut, calls: 0 });
        fn first_error<R: Skip>(r: &mut Reader<R>) -> String {
            loop {
                match r.next_member() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("no error"),
                    Err(e) => return e.to_string(),
                }
            }
        }
        assert_eq!(first_error(&mut r), first_error(&mut Reader::new(cut)));
    }

    #[test]
    fn read_truncation() {
        let ar = mixed_archive();
        let starts = ar.starts.clone();
        let boundaries = ar.boundaries.clone();
        let end_at = ar.bytes.len();
        let full = ar.end();
        assert_eq!(read_ok(&full).len(), starts.len());
        let mut cuts: Vec<usize> = Vec::new();
        for edge in (0..=full.len()).step_by(BLOCK) {
            for delta in [0usize, 1, 100, 511] {
                if edge + delta <= full.len() {
                    cuts.push(edge + delta);
                }
            }
        }
        for cut in cuts {
            let (got, err) = read_with(&full[..cut], 333);
            let at_member_start =
                cut > 0 && (starts.contains(&(cut as u64)) || boundaries.contains(&(cut as u64)));
            let in_end_blocks = cut >= end_at;
            match err {
                None => {
                    assert!(at_member_start || in_end_blocks, "cut {cut} read without error");
                    // Members that end at or before the cut.
                    let ends = starts.iter().skip(1).copied().chain([end_at as u64]);
                    let complete = ends.filter(|&e| e <= cut as u64).count();
                    assert_eq!(got.len(), complete, "cut {cut}");
                }
                Some(e) => {
                    assert!(!in_end_blocks && !at_member_start, "cut {cut}: {e}");
                    assert!(
                        e.contains("unexpected end of archive") || e.contains("not a tar archive"),
                        "cut {cut}: {e}"
                    );
                    assert!(
                        e.contains(&format!("archive offset {}", cut)) || cut < BLOCK,
                        "cut {cut}: {e}"
                    );
                }
            }
        }
    }

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for len in [0usize, 1, 100, 511, 512, 513, 1024, 1536, 4096, 10_000, 100_000] {
            for _ in 0..20 {
                let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                let (_, err) = read_with(&bytes, 1000);
                assert!(err.is_some(), "random input of {len} bytes read as an archive");
            }
        }
        // A valid header in front of random data: deeper paths, still no panic.
        for flag in [b'0', b'x', b'g', b'L', b'S', b'1'] {
            for _ in 0..20 {
                let size = rng.next() % 5000;
                let mut bytes = header(b"r", flag, size).to_vec();
                bytes.extend((0..rng.next() % 6000).map(|_| rng.next() as u8));
                read_with(&bytes, 512);
            }
        }
    }

    #[test]
    fn mutated_archives_never_panic() {
        let ar = mixed_archive();
        let full = ar.end();
        // Blocks that are headers in the original, to re-checksum after mutation so that the
        // mutated fields get parsed instead of failing the checksum.
        let headers: Vec<usize> = (0..full.len() / BLOCK)
            .filter(|i| {
                let b: &Block = full[i * BLOCK..(i + 1) * BLOCK].try_into().unwrap();
                format::check(b) == BlockCheck::Header
            })
            .collect();
        let mut rng = XorShift(42);
        for round in 0..3000 {
            let mut m = full.clone();
            for _ in 0..1 + rng.next() % 6 {
                let i = (rng.next() as usize) % m.len();
                m[i] = match rng.next() % 4 {
                    0 => rng.next() as u8,
                    1 => 0,
                    2 => b'0' + (rng.next() % 10) as u8,
                    _ => 0xff,
                };
            }
            if round % 2 == 0 {
                for &h in &headers {
                    let b: &mut Block = (&mut m[h * BLOCK..(h + 1) * BLOCK]).try_into().unwrap();
                    fix_checksum(b);
                }
            }
            read_with(&m, 1 + (rng.next() % 2000) as usize);
        }
    }

    #[test]
    fn io_errors_are_wrapped() {
        /// Gives `data` up to `fail_at`, then an error.
        struct Failing {
            data: Vec<u8>,
            pos: usize,
            fail_at: usize,
        }
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.pos == self.fail_at {
                    return Err(io::Error::other("zstd: corrupted block"));
                }
                let n = buf.len().min(self.fail_at - self.pos);
                buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
                self.pos += n;
                Ok(n)
            }
        }
        impl Skip for Failing {}
        let data = Ar::new().file("foo", &[3; 5000]).end();
        let mut r = Reader::new(Failing { data, pos: 0, fail_at: 3000 });
        let m = r.next_member().unwrap().unwrap();
        assert_eq!(m.display_name(), "foo");
        let mut buf = vec![0; 8192];
        // Not a clean end: what the decoder gave before its error is not handed on.
        let e = r.read_data(&mut buf).unwrap_err().to_string();
        assert_eq!(e, "foo: zstd: corrupted block (archive offset 3000)");
        assert_eq!(r.next_member().unwrap_err().to_string(), e);
    }

    #[test]
    fn peer_corpus() {
        let dir = std::path::Path::new("/work/shared/corpus/peer");
        if !dir.is_dir() {
            eprintln!("skipping peer_corpus: {} is missing", dir.display());
            return;
        }
        // Archives GNU tar 1.34 fails on, and what this reader says: the error that ends it,
        // or a failure it reads on after (GNU tar's "Malformed extended header" lines).
        const GNU_FAILS: &[(&str, &str)] = &[
            ("test_read_format_gtar_sparse_1_17_posix10_modified.tar", "malformed sparse map"),
            ("test_read_format_tar_V_negative_size.tar", "bad size field (out of range)"),
            ("test_read_format_tar_acl_oob_read.tar", "Malformed extended header: missing newline"),
            ("test_read_format_tar_invalid_pax_size.tar", "size=-19769411113659727436 is out of"),
            ("test_read_format_tar_pax_g_large.tar", "unexpected end of archive"),
            ("test_read_pax_empty_val_no_nl.tar", "Malformed extended header: missing newline"),
        ];
        // GNU tar fails on these for reasons outside the reader (member names with "..").
        const FAILS_AFTER_READING: &[&str] = &["test_patterns_4.tar"];

        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("tar" | "pax")))
            .collect();
        entries.sort();
        assert!(!entries.is_empty());
        for path in entries {
            let file = path.file_name().unwrap().to_str().unwrap().to_string();
            let gnu_fails = readme.contains(&format!("| `{file}` | fails |"));
            let expected = GNU_FAILS.iter().find(|(f, _)| *f == file).map(|(_, e)| *e);
            assert_eq!(
                gnu_fails,
                expected.is_some() || FAILS_AFTER_READING.contains(&file.as_str()),
                "{file}: README verdict not reflected here"
            );
            let bytes = std::fs::read(&path).unwrap();
            let (got, err) = read_with(&bytes, 1 << 16);
            for g in &got {
                let read: usize = g.chunks.iter().map(|c| c.1.len()).sum();
                println!(
                    "{file}: {:?} {} size={} read={read} sparse={:?}",
                    g.m.kind,
                    g.name(),
                    g.m.size,
                    g.m.sparse.as_ref().map(Vec::len)
                );
            }
            let said: Vec<String> = got.iter().flat_map(|g| g.said.clone()).collect();
            match (expected, err) {
                (None, None) => assert!(said.is_empty(), "{file}: GNU tar reads it: {said:?}"),
                (None, Some(e)) => panic!("{file}: GNU tar reads it, we fail: {e}"),
                (Some(want), e) => {
                    let all: Vec<&String> = said.iter().chain(&e).collect();
                    assert!(all.iter().any(|l| l.contains(want)), "{file}: {all:?}");
                }
            }
        }
        // Spot checks of the sparse formats against what GNU tar extracts.
        let members = |f: &str| read_with(&std::fs::read(dir.join(f)).unwrap(), 1 << 16).0;
        for f in [
            "test_read_format_gtar_sparse_1_13.tar",
            "test_read_format_gtar_sparse_1_17.tar",
            "test_read_format_gtar_sparse_1_17_posix00.tar",
            "test_read_format_gtar_sparse_1_17_posix01.tar",
            "test_read_format_gtar_sparse_1_17_posix10.tar",
        ] {
            let got = members(f);
            let summary: Vec<(String, u64, usize)> = got
                .iter()
                .map(|g| (g.name(), g.m.size, g.m.sparse.as_ref().map_or(0, Vec::len)))
                .collect();
            assert_eq!(summary[0].0, "sparse", "{f}");
            assert_eq!(summary[0].1, 3_145_728, "{f}");
            assert_eq!(summary[1].0, "sparse2", "{f}");
            assert_eq!(summary[1].1, 99_000_001, "{f}");
            assert_eq!(summary[1].2, 99, "{f}");
            assert_eq!(summary[2], ("non-sparse".to_string(), 0, 0), "{f}");
        }
        let got = members("test_read_format_tar_pax_negative_time.tar");
        assert_eq!(got[0].m.mtime, Timestamp { secs: -2_146_608_000, nanos: 0 });
        let got = members("test_compat_solaris_pax_sparse_1.pax");
        assert_eq!((got[0].m.size, got[0].m.sparse.is_none()), (819_207, true));
    }
}
