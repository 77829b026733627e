//! One member's header block, with the extension headers before it, made a `Member`: its
//! format, kind, names and numeric fields (PAX over GNU over the header), where its data lies
//! (sparse maps: old GNU, PAX 0.x and 1.0), and `-G`'s directory lists.

use super::{Current, Pending, Reader, Res, io_what, read_full, short_read};
use crate::archive::format::{self, BLOCK, Block, Header, SparseExtension, TypeFlag};
use crate::archive::pax::{self, Extended, Overrides};
use crate::archive::sparse::{self, MapBuilder, MapV1, PaxVersion};
use crate::archive::{Format, Kind, Member, Segment, Skip, Timestamp};

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

impl<R: Skip> Reader<R> {
    /// Builds the member from its header block at `off` and the extension headers before it
    /// (the first of them at `start`), reads its sparse map if it has one, and makes it the
    /// current member.
    pub(super) fn member(
        &mut self,
        blk: &Block,
        start: u64,
        off: u64,
        ext: Pending,
    ) -> Res<Member> {
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
}
