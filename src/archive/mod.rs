//! Bytes → archive members. No filesystem access happens here.
//!
//! `format.rs` is the 512-byte block and header checks, `pax.rs` the PAX record codec,
//! `sparse.rs` the GNU sparse maps, `reader.rs` the only part that reads.

mod format;
mod pax;
mod reader;
mod sparse;
mod units;
mod xattr;

pub use reader::{GLOBALS_MAX, GlobalHeader, Globals, NotTar, Reader};
pub use units::{UnitStart, Units};

/// Whether a PAX keyword matches a `--pax-option delete=` pattern.
pub fn pax_deleted(pattern: &std::ffi::CStr, keyword: &str) -> bool {
    pax::keyword_matches(pattern, keyword.as_bytes())
}
pub use xattr::{
    ACL_ACCESS_KEY, ACL_DEFAULT_KEY, MAX_TOTAL as MAX_XATTR_TOTAL, MAX_VALUE as MAX_XATTR_VALUE,
    Xattr, held as xattr_bytes, is_acl_record,
};

/// What the tar reader reads: the decoded archive, which may also let data the reader does
/// not want (a listing, an excluded member) be passed over without being copied out.
pub trait Skip: std::io::Read {
    /// Consumes up to `n` bytes without copying them, returning how many; 0 when this source
    /// cannot (the reader then reads them into a scratch buffer). Frames another thread
    /// decoded are already in memory (decode/parallel.rs): copying them out only to drop them
    /// was a fifth of `-t`'s reader thread.
    fn skip_in_place(&mut self, _n: u64) -> std::io::Result<u64> {
        Ok(0)
    }

    /// Where the next bytes come from: a pool buffer that holds them decoded already (a frame
    /// another thread decoded, decode/parallel.rs), so that `lend` can hand them on as file
    /// data instead of their being copied into a file buffer; or the caller's read, which
    /// decodes them into its buffer. Waits for them as a read would.
    fn ahead(&mut self) -> std::io::Result<Ahead> {
        Ok(Ahead::Read(None))
    }

    /// The next `n` bytes as a piece of the buffer that holds them, `n` at most the `len` the
    /// last `ahead` gave (which must have been `Ahead::Lend`, with nothing read since).
    fn lend(&mut self, _n: usize) -> std::io::Result<crate::pool::PoolBuf> {
        Err(std::io::Error::other("this stream has no buffers to hand on"))
    }

    /// Where decoding could begin again to reach decoded offset `t`: the start of the last
    /// independent unit of the input at or before it (a zstd frame; any offset of a plain
    /// tar). The default is the start of the stream, which every decoder can begin at (a
    /// single gzip stream is decoded again from there); None when the unit holding `t` is no
    /// longer known (src/resume/ takes no resume point there).
    fn unit_at_or_before(&self, _t: u64) -> Option<UnitStart> {
        Some(UnitStart::START)
    }
}

impl<S: Skip + ?Sized> Skip for Box<S> {
    fn skip_in_place(&mut self, n: u64) -> std::io::Result<u64> {
        (**self).skip_in_place(n)
    }

    fn ahead(&mut self) -> std::io::Result<Ahead> {
        (**self).ahead()
    }

    fn lend(&mut self, n: usize) -> std::io::Result<crate::pool::PoolBuf> {
        (**self).lend(n)
    }

    fn unit_at_or_before(&self, t: u64) -> Option<UnitStart> {
        (**self).unit_at_or_before(t)
    }
}

/// Where the next decoded bytes come from (`Skip::ahead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ahead {
    /// A pool buffer holds them.
    Lend(Lendable),
    /// A read decodes them into the caller's buffer: the next `n` bytes when Some (after
    /// them others may lie in a pool buffer), else as far as the stream can tell all of them.
    Read(Option<u64>),
}

/// Where the next decoded bytes lie in the buffer that holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lendable {
    /// The address of the next byte (O_DIRECT wants it aligned).
    pub addr: usize,
    /// Bytes from there to the end of the buffer's data, at least 1.
    pub len: usize,
}

impl Skip for &[u8] {}
impl Skip for std::io::Empty {}

/// The header format of a member, as GNU tar tells them apart when reading (`TAR_FORMAT` for
/// `--to-command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// No magic.
    V7,
    /// GNU's `"ustar  "` magic.
    Gnu,
    /// POSIX `"ustar\0"` without PAX records.
    Ustar,
    /// POSIX `"ustar\0"` after a PAX header.
    Pax,
}

impl Format {
    /// GNU tar's `archive_format_string`.
    pub fn name(self) -> &'static str {
        match self {
            Format::V7 => "v7",
            Format::Gnu => "gnu",
            Format::Ustar => "ustar",
            Format::Pax => "posix",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Hardlink,
    Fifo,
    CharDev,
    BlockDev,
    /// Any other type flag (GNU volume labels, multi-volume continuations, ...).
    Other(u8),
}

/// One data segment of a sparse file: `len` bytes at `offset` in the extracted file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub len: u64,
}

/// One archive member, with every extension header (GNU L/K, PAX x/g, sparse) already applied.
#[derive(Clone, Debug)]
pub struct Member {
    /// Raw path bytes (PAX `path` > GNU `L` > ustar prefix/name), unsanitised.
    pub name: Vec<u8>,
    /// Raw link target (PAX `linkpath` > GNU `K` > header linkname).
    pub link_name: Vec<u8>,
    pub kind: Kind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    /// Owner and group names (PAX uname/gname > header), empty when absent. Listed.
    pub uname: Vec<u8>,
    pub gname: Vec<u8>,
    /// The names GNU tar 1.34 maps to local ids when it restores ownership (`decode_header`,
    /// before the PAX records are applied): the ustar header's uname and gname, each empty when
    /// the header has none or a PAX `uid` (`gid`) record gives the number, which then stands.
    /// A PAX uname or gname is only listed, never looked up (GNU tar does the same).
    pub uid_name: Vec<u8>,
    pub gid_name: Vec<u8>,
    /// Device numbers of character and block devices. Only listed.
    pub dev_major: u64,
    pub dev_minor: u64,
    pub mtime: Timestamp,
    /// Extracted size in bytes (for sparse files the real size, not the stored size); 0 for
    /// members that extract no data.
    pub size: u64,
    /// The size the header declares (PAX `size` over the header's field): what `-tv` lists
    /// for a directory (an incremental archive's dumpdir holds its name list there).
    pub declared_size: u64,
    /// Some for GNU sparse members: the data segments, in file order.
    pub sparse: Option<Vec<Segment>>,
    /// Offset of the member's first header block (including extension headers).
    pub offset: u64,
    /// The block `-R` names it by (GNU tar's): its header's, less the last GNU long name
    /// and long link headers before it with their data (PAX headers are not counted back).
    pub block: u64,
    /// Extended attributes from the member's PAX `x` header, in record order; read only with
    /// `Reader::xattrs` (empty, and nothing allocated, otherwise or when it has none).
    pub xattrs: Vec<Xattr>,
    /// The name as stored, where `--transform` changed `name` (reading.rs `Reading::wants`):
    /// `-t` and `-v` show it unless `--show-transformed-names`.
    pub stored_name: Option<Vec<u8>>,
    pub format: Format,
    /// The header's type flag as stored (`'7'`, a contiguous file, extracts as a regular one
    /// with GNU tar's warning).
    pub type_flag: u8,
    /// A directory's names in an incremental archive (GNU `D` data or the `GNU.dumpdir`
    /// record), read only with `Reader::dumpdirs`: NUL-ended entries, each a control letter
    /// ('Y' in the archive, 'N' not, 'D' a directory, 'R'/'T' a rename, 'X' a temporary
    /// directory) and a name, then an empty one.
    pub dumpdir: Option<Vec<u8>>,
    /// A directory of an incremental archive: a GNU-format `D` member, or one with a
    /// `GNU.dumpdir` record, whether or not its list was kept (GNU tar's `is_dumpdir`, which
    /// turns delayed directory restore on).
    pub is_dumpdir: bool,
}

impl Member {
    /// A volume header named `label` (type 'V', mode 0, owned by 0/0), as GNU tar shows a
    /// POSIX archive's `GNU.volume.label`.
    pub fn volume_header(label: Vec<u8>, mtime: crate::archive::Timestamp) -> Member {
        Member {
            name: label,
            link_name: Vec::new(),
            kind: Kind::Other(b'V'),
            mode: 0,
            uid: 0,
            gid: 0,
            uname: Vec::new(),
            gname: Vec::new(),
            uid_name: Vec::new(),
            gid_name: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            mtime,
            size: 0,
            declared_size: 0,
            sparse: None,
            offset: 0,
            block: 0,
            xattrs: Vec::new(),
            stored_name: None,
            format: Format::Pax,
            type_flag: b'V',
            dumpdir: None,
            is_dumpdir: false,
        }
    }

    /// The name `-t` and `-v` show: as stored, or with `transformed` (GNU tar's
    /// --show-transformed-names) as extracted.
    pub fn listed_name(&self, transformed: bool) -> &[u8] {
        match &self.stored_name {
            Some(stored) if !transformed => stored,
            _ => &self.name,
        }
    }

    /// The name for messages: escaped as GNU tar prints it (control characters and bytes that
    /// are not UTF-8 as C escapes), so it can never break a line. A name longer than any path
    /// the kernel accepts (PATH_MAX) shows its first and last 2 KiB around "...": every op in
    /// flight carries this string, and a 1 MiB name must not cost a megabyte per member.
    pub fn display_name(&self) -> String {
        const SIDE: usize = 2048;
        let n = &self.name;
        if n.len() <= 2 * SIDE {
            return crate::report::printable(n);
        }
        let head = crate::report::printable(&n[..SIDE]);
        let tail = crate::report::printable(&n[n.len() - SIDE..]);
        format!("{head}...{tail}")
    }
}
/// Seconds and nanoseconds since the epoch, as a tar header or PAX record gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timestamp {
    pub secs: i64,
    pub nanos: u32,
}
