//! From the end of one member to the header of the next: the end of the archive (zero blocks,
//! the end of the input), a first block that is not tar, and the extension headers before a
//! member (GNU `L`/`K` long names, PAX `x` and `g` records, the globals a resumed run reads
//! again).

use super::{
    Fill, GLOBALS_MAX, GlobalHeader, Globals, MAX_LONG_NAME, Pending, Reader, Res, SCRATCH,
};
use super::{io_what, read_full, short_read};
use crate::archive::format::{self, BLOCK, Block, BlockCheck, Header, TypeFlag};
use crate::archive::pax::{self, Overrides};
use crate::archive::{Member, Skip};

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

impl<R: Skip> Reader<R> {
    /// One member: past the rest of the previous one, through its extension headers, to its
    /// own header. Ok(None) at the end of the archive.
    pub(super) fn next_member_inner(&mut self) -> Res<Option<Member>> {
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
    pub(super) fn take_global(
        &mut self,
        parsed: pax::Extended,
        mtime: i64,
        records: Option<Vec<u8>>,
    ) {
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
}
