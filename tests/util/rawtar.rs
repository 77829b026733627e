//! A byte-level tar writer for hostile and corrupt archives. Unlike the `tar` crate it writes
//! whatever it is given: `..` components, absolute names, NUL bytes, bad sizes, bad checksums.
//!
//! Header layout (POSIX ustar, with the GNU variants):
//! name 0..100, mode 100..108, uid 108..116, gid 116..124, size 124..136, mtime 136..148,
//! chksum 148..156, typeflag 156, linkname 157..257, magic 257..263, version 263..265,
//! uname 265..297, gname 297..329, devmajor 329..337, devminor 337..345, prefix 345..500.

pub const BLOCK: usize = 512;

pub const REG: u8 = b'0';
pub const LINK: u8 = b'1';
pub const SYMLINK: u8 = b'2';
pub const CHR: u8 = b'3';
pub const BLK: u8 = b'4';
pub const DIR: u8 = b'5';
pub const FIFO: u8 = b'6';
pub const GNU_LONGNAME: u8 = b'L';
pub const GNU_LONGLINK: u8 = b'K';
pub const PAX: u8 = b'x';
pub const PAX_GLOBAL: u8 = b'g';

/// A numeric header field.
#[derive(Clone, Debug)]
pub enum Num {
    /// Zero-padded octal digits and a NUL (panics if it does not fit).
    Octal(u64),
    /// GNU base-256: big-endian two's complement over the whole field, high bit set.
    Base256(i128),
    /// Exactly these bytes (padded with NULs / truncated to the field).
    Raw(Vec<u8>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Magic {
    /// "ustar\0" "00"
    Ustar,
    /// "ustar " " \0" (GNU and old GNU)
    Gnu,
    /// Nothing (v7).
    V7,
}

#[derive(Clone, Debug)]
pub struct Header {
    /// Written raw into the 100-byte name field (truncated to 100 bytes).
    pub name: Vec<u8>,
    pub mode: Num,
    pub uid: Num,
    pub gid: Num,
    /// None: the length of the data given to `Tar::entry` (0 for `Tar::header`).
    pub size: Option<Num>,
    pub mtime: Num,
    pub typeflag: u8,
    pub linkname: Vec<u8>,
    pub magic: Magic,
    pub uname: Vec<u8>,
    pub gname: Vec<u8>,
    pub devmajor: u64,
    pub devminor: u64,
    pub prefix: Vec<u8>,
    /// Some: these 8 bytes in the checksum field instead of the right checksum.
    pub checksum: Option<[u8; 8]>,
}

/// A fixed, unremarkable mtime (2020-09-13).
pub const MTIME: u64 = 1_600_000_000;

impl Header {
    pub fn new(name: impl AsRef<[u8]>, typeflag: u8) -> Header {
        Header {
            name: name.as_ref().to_vec(),
            mode: Num::Octal(if typeflag == DIR { 0o755 } else { 0o644 }),
            uid: Num::Octal(0),
            gid: Num::Octal(0),
            size: None,
            mtime: Num::Octal(MTIME),
            typeflag,
            linkname: Vec::new(),
            magic: Magic::Ustar,
            uname: b"root".to_vec(),
            gname: b"root".to_vec(),
            devmajor: 0,
            devminor: 0,
            prefix: Vec::new(),
            checksum: None,
        }
    }

    pub fn file(name: impl AsRef<[u8]>) -> Header {
        Header::new(name, REG)
    }

    pub fn dir(name: impl AsRef<[u8]>) -> Header {
        Header::new(name, DIR)
    }

    pub fn symlink(name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> Header {
        Header { linkname: target.as_ref().to_vec(), ..Header::new(name, SYMLINK) }
    }

    pub fn hardlink(name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> Header {
        Header { linkname: target.as_ref().to_vec(), ..Header::new(name, LINK) }
    }

    pub fn mode(mut self, mode: u32) -> Header {
        self.mode = Num::Octal(u64::from(mode));
        self
    }

    pub fn mtime(mut self, t: u64) -> Header {
        self.mtime = Num::Octal(t);
        self
    }

    pub fn size(mut self, n: Num) -> Header {
        self.size = Some(n);
        self
    }

    /// The 512-byte block, with `size` used when the header has none of its own.
    pub fn block(&self, size: u64) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        put_bytes(&mut b[0..100], &self.name);
        put_num(&mut b[100..108], &self.mode);
        put_num(&mut b[108..116], &self.uid);
        put_num(&mut b[116..124], &self.gid);
        put_num(&mut b[124..136], self.size.as_ref().unwrap_or(&Num::Octal(size)));
        put_num(&mut b[136..148], &self.mtime);
        b[156] = self.typeflag;
        put_bytes(&mut b[157..257], &self.linkname);
        match self.magic {
            Magic::Ustar => {
                b[257..263].copy_from_slice(b"ustar\0");
                b[263..265].copy_from_slice(b"00");
            }
            Magic::Gnu => b[257..265].copy_from_slice(b"ustar  \0"),
            Magic::V7 => {}
        }
        if self.magic != Magic::V7 {
            put_bytes(&mut b[265..297], &self.uname);
            put_bytes(&mut b[297..329], &self.gname);
            put_num(&mut b[329..337], &Num::Octal(self.devmajor));
            put_num(&mut b[337..345], &Num::Octal(self.devminor));
            put_bytes(&mut b[345..500], &self.prefix);
        }
        match &self.checksum {
            Some(c) => b[148..156].copy_from_slice(c),
            None => {
                let sum = checksum(&b);
                b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
            }
        }
        b
    }
}

/// The header checksum: the byte sum with the checksum field counted as spaces.
pub fn checksum(b: &[u8; BLOCK]) -> u32 {
    b.iter()
        .enumerate()
        .map(|(i, &x)| if (148..156).contains(&i) { u32::from(b' ') } else { u32::from(x) })
        .sum()
}

fn put_bytes(field: &mut [u8], v: &[u8]) {
    let n = v.len().min(field.len());
    field[..n].copy_from_slice(&v[..n]);
}

fn put_num(field: &mut [u8], n: &Num) {
    let w = field.len();
    match n {
        Num::Octal(v) => {
            let s = format!("{v:0width$o}", width = w - 1);
            assert!(s.len() < w, "{v} does not fit a {w}-byte octal field");
            field[..w - 1].copy_from_slice(s.as_bytes());
            field[w - 1] = 0;
        }
        Num::Base256(v) => {
            let be = v.to_be_bytes(); // 16 bytes of two's complement
            for (i, f) in field.iter_mut().enumerate() {
                let from_end = w - 1 - i;
                *f = if from_end < 16 {
                    be[15 - from_end]
                } else if *v < 0 {
                    0xff
                } else {
                    0
                };
            }
            field[0] |= 0x80;
        }
        Num::Raw(bytes) => {
            field.fill(0);
            put_bytes(field, bytes);
        }
    }
}

/// One PAX record: "LEN key=value\n", LEN counting itself.
pub fn pax_record(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Vec<u8> {
    let body = [b" ", key.as_ref(), b"=", value.as_ref(), b"\n"].concat();
    let len = (body.len()..).find(|n| n.to_string().len() + body.len() == *n).unwrap();
    [len.to_string().as_bytes(), &body].concat()
}

/// An archive being built, block by block.
#[derive(Default, Clone)]
pub struct Tar {
    pub buf: Vec<u8>,
}

impl Tar {
    pub fn new() -> Tar {
        Tar::default()
    }

    /// A header block alone (size field: the header's own, or 0).
    pub fn header(&mut self, h: &Header) -> &mut Self {
        self.buf.extend_from_slice(&h.block(0));
        self
    }

    /// Data padded with NULs to a block edge.
    pub fn data(&mut self, data: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(data);
        self.pad();
        self
    }

    pub fn pad(&mut self) -> &mut Self {
        let r = self.buf.len() % BLOCK;
        if r != 0 {
            self.buf.resize(self.buf.len() + BLOCK - r, 0);
        }
        self
    }

    /// A header whose size (unless set) is `data.len()`, then the data.
    pub fn entry(&mut self, h: &Header, data: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(&h.block(data.len() as u64));
        self.data(data)
    }

    pub fn file(&mut self, name: impl AsRef<[u8]>, data: &[u8]) -> &mut Self {
        self.entry(&Header::file(name), data)
    }

    pub fn dir(&mut self, name: impl AsRef<[u8]>) -> &mut Self {
        self.header(&Header::dir(name))
    }

    pub fn symlink(&mut self, name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> &mut Self {
        self.header(&Header::symlink(name, target))
    }

    pub fn hardlink(&mut self, name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> &mut Self {
        self.header(&Header::hardlink(name, target))
    }

    /// A member with any name and link target: GNU 'L' / 'K' headers go first when the name or
    /// target does not fit its 100-byte field.
    pub fn member(&mut self, h: &Header, data: &[u8]) -> &mut Self {
        if h.name.len() > 100 {
            self.gnu_long_name(&h.name);
        }
        if h.linkname.len() > 100 {
            self.gnu_long_link(&h.linkname);
        }
        self.entry(h, data)
    }

    /// A GNU 'L' header carrying the next member's name (NUL-terminated, as GNU tar writes it).
    pub fn gnu_long_name(&mut self, name: impl AsRef<[u8]>) -> &mut Self {
        let mut d = name.as_ref().to_vec();
        d.push(0);
        let h = Header { magic: Magic::Gnu, ..Header::new("././@LongLink", GNU_LONGNAME) };
        self.entry(&h, &d)
    }

    /// A GNU 'K' header carrying the next member's link target.
    pub fn gnu_long_link(&mut self, target: impl AsRef<[u8]>) -> &mut Self {
        let mut d = target.as_ref().to_vec();
        d.push(0);
        let h = Header { magic: Magic::Gnu, ..Header::new("././@LongLink", GNU_LONGLINK) };
        self.entry(&h, &d)
    }

    /// A PAX 'x' header with these records (each key, value).
    pub fn pax<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, records: &[(K, V)]) -> &mut Self {
        let mut d = Vec::new();
        for (k, v) in records {
            d.extend(pax_record(k, v));
        }
        self.pax_raw(&d)
    }

    /// A PAX 'x' header with exactly these data bytes.
    pub fn pax_raw(&mut self, data: &[u8]) -> &mut Self {
        self.entry(&Header::new("./PaxHeaders/x", PAX), data)
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self
    }

    /// The archive with its two end blocks.
    pub fn finish(&self) -> Vec<u8> {
        let mut v = self.buf.clone();
        assert_eq!(v.len() % BLOCK, 0, "unpadded archive");
        v.resize(v.len() + 2 * BLOCK, 0);
        v
    }

    /// The archive without end blocks (as some writers leave it).
    pub fn unterminated(&self) -> Vec<u8> {
        self.buf.clone()
    }
}

/// Compresses with the zstd library at `level` (one frame).
pub fn zstd(data: &[u8], level: i32) -> Vec<u8> {
    zstd::stream::encode_all(data, level).unwrap()
}
