//! The streaming reader: archive bytes in, [`Member`]s and their data out.
//!
//! Reads `inner` strictly sequentially. Header blocks and extension data (GNU `L`/`K`, PAX
//! `x`/`g`, sparse maps) are small and parsed as they stream past; member data goes straight
//! from `inner` into the caller's buffer. Errors are one line naming the member (or the
//! previous one) and the archive offset, and they are sticky.
//!
//! End of archive follows GNU tar: a zero block ends it (the block after it is read and
//! ignored), and so do EOF where a header would start and a truncated all-zero block there.
//! An empty input or an input that does not start with a tar header is an error.

use std::io::{self, Read};

use anyhow::{Result, anyhow, bail};

use super::format::{self, BLOCK, Block, BlockCheck, Header, SparseExtension, TypeFlag};
use super::pax::{self, Extended, Overrides};
use super::sparse::{self, MapBuilder, MapV1, PaxVersion};
use super::{Kind, Member, Segment};
use crate::plan::Timestamp;

/// Largest GNU long name or long link target (`L`/`K` data) accepted.
const MAX_LONG_NAME: u64 = 1 << 20;
/// Scratch buffer for skipping data and streaming PAX headers.
const SCRATCH: usize = 64 << 10;
/// Longest member name quoted in an error message.
const MAX_NAME_IN_MESSAGE: usize = 1024;

type Res<T> = std::result::Result<T, String>;

/// Streaming tar reader; see the module doc.
pub struct Reader<R: Read> {
    inner: R,
    /// Bytes of the archive consumed (a peeked block is not counted until it is taken).
    pos: u64,
    /// A block read ahead to decide whether a hard link (etc.) really has data.
    peeked: Option<Box<Block>>,
    /// The first error, returned by every later call.
    error: Option<String>,
    /// The end of the archive was reached.
    finished: bool,
    /// Values from PAX global (`g`) headers seen so far.
    global: Overrides,
    /// Name of the last member returned, for messages about what follows it.
    prev: Option<String>,
    /// The member whose data is being read.
    cur: Option<Current>,
    scratch: Vec<u8>,
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

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full<R: Read>(inner: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match inner.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn io_what(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        "unexpected end of archive".to_string()
    } else {
        e.to_string()
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

impl<R: Read> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            pos: 0,
            peeked: None,
            error: None,
            finished: false,
            global: Overrides::default(),
            prev: None,
            cur: None,
            scratch: Vec::new(),
        }
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
    /// completely except the last. Sparse members: a chunk never spans two segments (offsets
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

    /// Bytes of decoded archive consumed so far.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    fn fail(&mut self, e: String) -> anyhow::Error {
        self.error = Some(e.clone());
        self.cur = None;
        anyhow!(e)
    }

    /// Formats a message: `"{name}: {what} (archive offset N)"`, or without a name
    /// `"archive offset N (after '{previous}'): {what}"`.
    fn msg(&self, name: Option<&str>, offset: u64, what: &str) -> String {
        match (name, &self.prev) {
            (Some(n), _) => format!("{}: {what} (archive offset {offset})", one_line(n)),
            (None, Some(p)) => format!("archive offset {offset} (after '{p}'): {what}"),
            (None, None) => format!("archive offset {offset}: {what}"),
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
        let got = read_full(&mut self.inner, &mut buf[..n]);
        let k = *got.as_ref().unwrap_or(&0);
        self.pos += k as u64;
        if k < n {
            let what = match got {
                Err(e) => io_what(&e),
                Ok(_) => io_what(&eof()),
            };
            let name = cur.name.clone();
            return Err(self.msg(Some(&name), self.pos, &what));
        }
        cur.data_left -= n as u64;
        if cur.segments.is_some() {
            cur.seg_done += n as u64;
        } else {
            cur.next += n as u64;
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
        let n = read_full(&mut self.inner, blk)?;
        self.pos += n as u64;
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
                Ok(0) => return Ok(()),
                Ok(BLOCK) => {
                    let check = format::check(&blk);
                    self.peeked = Some(blk);
                    if check != BlockCheck::BadChecksum {
                        return Ok(());
                    }
                }
                Ok(n) => {
                    self.pos += n as u64;
                    return Err(fail(self, &eof()));
                }
                Err(e) => return Err(fail(self, &e)),
            }
        }
        let n = cur.data_left.saturating_add(cur.pad);
        self.skip(n).map_err(|e| fail(self, &e))
    }

    fn next_member_inner(&mut self) -> Res<Option<Member>> {
        self.finish_current()?;
        let start = self.pos;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut local: Option<Extended> = None;
        let mut blk: Block = [0; BLOCK];
        loop {
            let off = self.pos;
            let dangling = long_name.is_some() || long_link.is_some() || local.is_some();
            let fill =
                self.read_block(&mut blk).map_err(|e| self.msg(None, self.pos, &io_what(&e)))?;
            match fill {
                Fill::Full => {}
                Fill::Eof if off == 0 => {
                    return Err(self.msg(None, 0, "not a tar archive (empty input)"));
                }
                Fill::Partial(n) if off == 0 => {
                    let what = format!("not a tar archive (only {n} bytes)");
                    return Err(self.msg(None, 0, &what));
                }
                Fill::Eof if !dangling => return Ok(None),
                // A truncated end-of-archive block: GNU tar ends quietly too.
                Fill::Partial(n) if !dangling && blk[..n].iter().all(|&b| b == 0) => {
                    return Ok(None);
                }
                Fill::Eof | Fill::Partial(_) => {
                    let what = if dangling {
                        "unexpected end of archive after an extended header"
                    } else {
                        "unexpected end of archive"
                    };
                    return Err(self.msg(None, self.pos, what));
                }
            }
            match format::check(&blk) {
                BlockCheck::Header => {}
                BlockCheck::Zero if dangling => {
                    return Err(self.msg(None, off, "end of archive after an extended header"));
                }
                BlockCheck::Zero => {
                    // The second end block (or whatever follows a lone one) is read and
                    // ignored, as GNU tar does; nothing after it is looked at.
                    let mut second: Block = [0; BLOCK];
                    let _ = self.read_block(&mut second);
                    return Ok(None);
                }
                BlockCheck::BadChecksum => {
                    let what = if off == 0 {
                        "not a tar archive (bad header checksum)"
                    } else {
                        "bad header checksum"
                    };
                    return Err(self.msg(None, off, what));
                }
            }
            let h = Header(&blk);
            match h.type_flag() {
                flag @ (TypeFlag::LongName | TypeFlag::LongLink) => {
                    let size = self.extension_size(&h, off)?;
                    let which = if flag == TypeFlag::LongName { "name" } else { "link name" };
                    if size > MAX_LONG_NAME {
                        let what =
                            format!("GNU long {which} of {size} bytes (limit {MAX_LONG_NAME})");
                        return Err(self.msg(None, off, &what));
                    }
                    let mut data = Vec::new();
                    self.stream(size, off, |chunk| {
                        data.extend_from_slice(chunk);
                        Ok(())
                    })?;
                    let value = format::cstr(&data).to_vec();
                    if flag == TypeFlag::LongName {
                        long_name = Some(value);
                    } else {
                        long_link = Some(value);
                    }
                }
                flag @ (TypeFlag::PaxLocal | TypeFlag::PaxGlobal) => {
                    let size = self.extension_size(&h, off)?;
                    let global = flag == TypeFlag::PaxGlobal;
                    let mut parser = pax::Parser::new(size, global);
                    self.stream(size, off, |chunk| parser.feed(chunk))?;
                    let ext = parser.finish().map_err(|e| self.msg(None, off, &e))?;
                    if global {
                        self.global.merge_global(ext.overrides);
                    } else {
                        local = Some(ext);
                    }
                }
                _ => {
                    let ext = local.unwrap_or_default();
                    return self.member(&blk, start, off, long_name, long_link, ext).map(Some);
                }
            }
        }
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
            let got = read_full(&mut self.inner, &mut self.scratch[..want]);
            let k = *got.as_ref().unwrap_or(&0);
            self.pos += k as u64;
            if k < want {
                let what = match got {
                    Err(e) => io_what(&e),
                    Ok(_) => io_what(&eof()),
                };
                return Err(self.msg(None, self.pos, &what));
            }
            let data = size.saturating_sub(done).min(want as u64) as usize;
            if data > 0 {
                f(&self.scratch[..data]).map_err(|e| self.msg(None, at, &e))?;
            }
            done += want as u64;
        }
        Ok(())
    }

    /// Builds the member from its header block and the extension headers before it, and
    /// reads its sparse map if it has one.
    fn member(
        &mut self,
        blk: &Block,
        start: u64,
        off: u64,
        long_name: Option<Vec<u8>>,
        long_link: Option<Vec<u8>>,
        ext: Extended,
    ) -> Res<Member> {
        let h = Header(blk);
        let g = &self.global;
        let lo = &ext.overrides;
        let name = match &ext.sparse.name {
            Some(n) => n.clone(),
            None => pax::pick(&lo.path, &g.path).or(long_name).unwrap_or_else(|| h.name()),
        };
        let link_name =
            pax::pick(&lo.linkpath, &g.linkpath).or(long_link).unwrap_or_else(|| h.link_name());
        let pax_size = pax::pick(&lo.size, &g.size);
        let pax_mtime = pax::pick(&lo.mtime, &g.mtime);
        let pax_uid = pax::pick(&lo.uid, &g.uid);
        let pax_gid = pax::pick(&lo.gid, &g.gid);

        let display = String::from_utf8_lossy(&name).into_owned();
        let err = |s: &Self, what: &str| s.msg(Some(&display), off, what);
        let num = |s: &Self, field: &str, v: Result<i64, format::NumError>| -> Res<u64> {
            match v {
                Ok(v) => u64::try_from(v).map_err(|_| err(s, &format!("negative {field}"))),
                Err(e) => Err(err(s, &format!("bad {field} field ({e})"))),
            }
        };

        let size = match pax_size {
            Some(s) => s,
            None => num(self, "size", h.size())?,
        };
        let mode = num(self, "mode", h.mode())?;
        let mode = u32::try_from(mode & 0o7777).unwrap_or(0);
        let uid = match pax_uid {
            Some(v) => v,
            None => num(self, "uid", h.uid())?,
        };
        let gid = match pax_gid {
            Some(v) => v,
            None => num(self, "gid", h.gid())?,
        };
        let mtime = match pax_mtime {
            Some(t) => t,
            None => match h.mtime() {
                Ok(secs) => Timestamp { secs, nanos: 0 },
                Err(e) => return Err(err(self, &format!("bad mtime field ({e})"))),
            },
        };
        let pad =
            format::padded(size).map(|p| p - size).ok_or_else(|| err(self, "size overflows"))?;

        let flag = h.type_flag();
        // (kind, has no data of its own, data readable through read_data)
        let (kind, header_only) = match flag {
            TypeFlag::Regular if name.ends_with(b"/") => (Kind::Dir, false),
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
                return Err(err(self, "internal error: extension header as member"));
            }
        };
        let readable = matches!(kind, Kind::File | Kind::Other(_));

        let mut data_left = size;
        let mut real_size = size;
        let mut segments = None;
        if flag == TypeFlag::OldSparse {
            let (map, real) = self.old_gnu_map(&h, size, &display, off)?;
            segments = Some(map);
            real_size = real;
        } else if kind == Kind::File {
            match ext.sparse.version() {
                Err(e) => return Err(err(self, &e)),
                Ok(None) => {}
                Ok(Some(PaxVersion::V0)) => {
                    let real = ext.sparse.realsize().unwrap_or(size);
                    let map = ext.sparse.finish_v0(real, size).map_err(|e| err(self, &e))?;
                    segments = Some(map);
                    real_size = real;
                }
                Ok(Some(PaxVersion::V1)) => {
                    let real = ext.sparse.realsize().unwrap_or(size);
                    let (map, map_bytes) = self.map_v1(size, real, &display)?;
                    data_left = size - map_bytes;
                    segments = Some(map);
                    real_size = real;
                }
            }
        }

        self.cur = Some(Current {
            name: display,
            data_left,
            pad,
            readable,
            maybe_data: header_only && data_left > 0,
            next: 0,
            segments: segments.clone(),
            seg: 0,
            seg_done: 0,
        });
        Ok(Member {
            name,
            link_name,
            kind,
            mode,
            uid,
            gid,
            mtime,
            size: if readable { real_size } else { 0 },
            sparse: segments,
            offset: start,
        })
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
