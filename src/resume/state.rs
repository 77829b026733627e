//! The state file (`DIR/.fastuntar-resume`): what a resume point says, as bytes. Pure: encode
//! and decode, with every value bounded and checked, since the file is input to the next run
//! (docs/SECURITY.md, "The resume state file").
//!
//! ```text
//! 0    8   magic "FUTRESUM"
//! 8    4   version (LE)
//! 12   4   body length L (at most STATE_MAX - 48)
//! 16   24  whose it is (from version 3 on, in every later version too): DIR's filesystem id
//!          and inode, and the inode the file itself was written as (u64 LE each)
//! 40   ..  the other fields of `State`, in order (integers LE, byte strings as u32 length
//!          and bytes, options as a presence byte)
//! 16+L 32  SHA-256 of bytes [0, 16+L)
//! ```
//!
//! Our own format, not an external one: it names nothing outside this program, so there is
//! no crate for it; it is versioned, and a file of another version is refused, not guessed at.
//!
//! **Whose a file is** (`owner`, issue 40) is read before anything else of it is believed: a
//! file at `.fastuntar-resume` that is not of this format, or names another DIR, or is not the
//! inode a run wrote (a member of an archive extracted there, a copy of another DIR's state)
//! is not a state of this DIR at all, and is left alone; only a file that passes is checked
//! as a state (and refused in one line when it fails: corrupt, of another version, another
//! archive). Versions 1 and 2 had no owner block: their DIR is read from where they kept it.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::archive::{GLOBALS_MAX, GlobalHeader, Globals, UnitStart};
use crate::decode::{FileId, Format};
use crate::mark::record::{Record, decode_last, encode as encode_record};
use crate::mark::{CarriedDir, Counts, DirState, Placed, Point};
use crate::policy::route::MAX_ROOTS;
use crate::policy::safety::SafePath;

/// The state file's name in DIR, and the name it is written under before its rename.
pub const STATE_NAME: &str = ".fastuntar-resume";
pub const TMP_NAME: &str = ".fastuntar-resume.tmp";

/// Largest state file: a snapshot restore's is under 2 KiB (one directory chain, no MEMBER
/// operands); what could make it larger (thousands of `-T` names, directories waiting with
/// `--delay-directory-restore`, deferred extended attributes) gets no resume point past it,
/// never a larger file. Read back, at most this much is read.
pub const STATE_MAX: usize = 4 << 20;

const MAGIC: &[u8; 8] = b"FUTRESUM";
/// 2: the PAX global headers carried (`State::globals`). 3: whose the file is (the owner
/// block), the archive's ctime, a digest of a sample of its bytes before the point (issue 40).
/// 4: `--spread`'s routing at the point (`State::placed`, issue 43). 5: each probe's root
/// (`Probe::root`): a file placed in a spread root or by a routing callback is probed there.
const VERSION: u32 = 5;
const HEAD: usize = 16;
const SUM: usize = 32;

/// Most probes (files checked to be still there, unchanged, before resuming): the 8 last
/// files, 8 spread over the run, and the last file of each root, DIR's included (MAX_ROOTS
/// counts DIR: root numbers are below it; `resume::Probes`).
pub const MAX_PROBES: usize = 16 + MAX_ROOTS;

/// Directories a member may imply at most (one per component: PATH_MAX / 2).
const MAX_IMPLIED: u64 = 2048;

/// Longest path a state may name: what the kernel takes (PATH_MAX with its NUL).
const MAX_PATH: usize = 4095;

/// What the archive was, as the first run found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputId {
    File(FileId),
    /// A download: the address after redirects (shown, not compared: presigned addresses
    /// change), the validator and the length, which must be the same again. From several
    /// sources (issue 42), each of them as given with its own validator (`sources`, empty for
    /// one source: then `etag`/`last_modified` are the archive operand's).
    Url {
        url: String,
        etag: Option<String>,
        last_modified: Option<String>,
        length: Option<u64>,
        sources: Vec<SourceId>,
    },
}

/// One source of a download from several, and the version it served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceId {
    pub given: String,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// The most sources a state names (`decode::url::MAX_SOURCES`).
const MAX_SOURCES: usize = 64;

/// A file extracted before the resume point, as it was when the state was written: it must
/// be there unchanged for the resume (`rm -rf DIR/*` leaves the state file, a dotfile; so
/// does `rm -rf ROOT/*` of a spread root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The root it was placed in (0: DIR; 1.. the `--spread` or callback roots, in order).
    pub root: u16,
    /// Its path within that root.
    pub path: SafePath,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The version of fastuntar that wrote it (the options' digest depends on it).
    pub program: String,
    pub input: InputId,
    pub format: Format,
    /// The digest of the options that change what lands (`resume::options`).
    pub options: [u8; 32],
    /// DIR itself: its filesystem's id and inode.
    pub dest: (u64, u64),
    /// The inode the state file was written as (a file another way there is not one a run
    /// wrote: `owner`).
    pub own_ino: u64,
    pub point: Point,
    pub counts: Counts,
    /// Directory metadata applied from then on (`--delay-directory-restore`, or met an
    /// incremental archive's directory).
    pub delay: bool,
    pub dirs: Vec<CarriedDir>,
    pub probes: Vec<Probe>,
    /// The PAX global headers read before the point, read again before it.
    pub globals: Globals,
    /// When the resume point was written (ns since the epoch).
    pub written: i128,
    /// An archive file's bytes before the point, sampled (`resume::sample`): a file rewritten
    /// in place with the same size, times and headers is told apart. None for a URL, whose
    /// server vouches for its version (If-Range).
    pub sample: Option<[u8; 32]>,
    /// `--spread`: the bytes each root was given and the spread directories made before the
    /// point (empty without it).
    pub placed: Placed,
}

/// Whose a state file is, from its first bytes (`owner`).
#[derive(Debug, PartialEq, Eq)]
pub struct Owner {
    pub version: u32,
    /// The DIR it was written in: filesystem id, inode.
    pub dest: (u64, u64),
    /// The inode it was written as (None before version 3).
    pub own_ino: Option<u64>,
}

/// Whose the file `file` is: None when it is not of this format at all; else its version,
/// the DIR it names and the inode it says it was written as. Nothing else is checked (the
/// checksum neither: a state of ours that is corrupt is still ours, and refused as corrupt).
pub fn owner(file: &[u8]) -> Option<Owner> {
    if file.len() < HEAD || &file[..8] != MAGIC {
        return None;
    }
    let version = u32::from_le_bytes(file[8..12].try_into().expect("4"));
    let mut i = In(&file[HEAD..]);
    match version {
        0 => None,
        // The fields before DIR's identity, as versions 1 and 2 wrote them.
        1 | 2 => {
            i.text(64).ok()?;
            input_id_v2(&mut i).ok()?;
            i.take(1 + 32).ok()?;
            let dest = (i.u64().ok()?, i.u64().ok()?);
            Some(Owner { version, dest, own_ino: None })
        }
        _ => {
            let dest = (i.u64().ok()?, i.u64().ok()?);
            Some(Owner { version, dest, own_ino: Some(i.u64().ok()?) })
        }
    }
}

/// Why a state file cannot be used, as the one line says it.
#[derive(Debug, PartialEq, Eq)]
pub struct Bad(pub String);

fn bad<T>(why: impl Into<String>) -> Result<T, Bad> {
    Err(Bad(why.into()))
}

struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i128(&mut self, v: i128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn opt(&mut self, b: Option<&[u8]>) {
        self.u8(u8::from(b.is_some()));
        if let Some(b) = b {
            self.bytes(b);
        }
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        self.u8(u8::from(v.is_some()));
        if let Some(v) = v {
            self.u64(v);
        }
    }
}

struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        if n > self.0.len() {
            return bad("it ends early");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Bad> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, Bad> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn i128(&mut self) -> Result<i128, Bad> {
        Ok(i128::from_le_bytes(self.take(16)?.try_into().expect("16")))
    }
    /// A byte string of at most `max` bytes.
    fn bytes(&mut self, max: usize) -> Result<&'a [u8], Bad> {
        let n = self.u32()? as usize;
        if n > max {
            return bad(format!("a field of {n} bytes, more than {max}"));
        }
        self.take(n)
    }
    fn flag(&mut self) -> Result<bool, Bad> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => bad(format!("a flag of {v}")),
        }
    }
    fn opt(&mut self, max: usize) -> Result<Option<&'a [u8]>, Bad> {
        Ok(if self.flag()? { Some(self.bytes(max)?) } else { None })
    }
    fn opt_u64(&mut self) -> Result<Option<u64>, Bad> {
        Ok(if self.flag()? { Some(self.u64()?) } else { None })
    }
    /// A count of items each at least `least` bytes long, so that what it claims fits in
    /// what is left (a hostile count allocates nothing it cannot fill).
    fn count(&mut self, least: usize, max: usize) -> Result<usize, Bad> {
        let n = self.u32()? as usize;
        if n > max || n.saturating_mul(least) > self.0.len() {
            return bad(format!("a count of {n}"));
        }
        Ok(n)
    }
    fn text(&mut self, max: usize) -> Result<String, Bad> {
        String::from_utf8(self.bytes(max)?.to_vec()).or_else(|_| bad("a text that is not UTF-8"))
    }
}

const FORMATS: [(Format, u8); 6] = [
    (Format::Plain, 0),
    (Format::Zstd, 1),
    (Format::Gzip, 2),
    (Format::Bzip2, 3),
    (Format::Lz4, 4),
    (Format::Xz, 5),
];

fn format_code(f: Format) -> u8 {
    FORMATS.iter().find(|(g, _)| *g == f).map_or(0, |(_, c)| *c)
}

const DIR_STATES: [(DirState, u8); 3] =
    [(DirState::Open, 0), (DirState::Closing, 1), (DirState::Delayed, 2)];

/// A path from a state file: plain components only (no empty one, `.`, `..` or NUL), each at
/// most 255 bytes, in all at most PATH_MAX - 1; the empty path is DIR itself. Such a path
/// only ever names something beneath DIR, and is only walked there without following a
/// symlink (`fsio::stat_beneath`, `Dest::restore_dirs`).
pub fn safe_path(bytes: &[u8]) -> Result<SafePath, Bad> {
    if bytes.len() > MAX_PATH {
        return bad("a path longer than PATH_MAX");
    }
    if bytes.is_empty() {
        return Ok(SafePath(PathBuf::new()));
    }
    for c in bytes.split(|&b| b == b'/') {
        if c.is_empty() || c == b"." || c == b".." || c.contains(&0) || c.len() > 255 {
            return bad("a path that is not plain names beneath DIR");
        }
    }
    let os = std::ffi::OsStr::from_bytes(bytes);
    Ok(SafePath(PathBuf::from(os)))
}

use std::os::unix::ffi::OsStrExt;

fn path_bytes(p: &SafePath) -> &[u8] {
    p.as_path().as_os_str().as_bytes()
}

/// Checks a carried directory's record: a safe path, a mode, attributes within the reader's
/// own bounds.
fn check_record(r: &Record) -> Result<(), Bad> {
    safe_path(&r.path)?;
    if r.mode > 0o7777 {
        return bad(format!("a mode of {:o}", r.mode));
    }
    if r.borrowed {
        return bad("a directory lent permissions (--no-overwrite-dir is never resumed)");
    }
    if let Some(t) = r.mtime
        && t.nanos >= 1_000_000_000
    {
        return bad("a time with more than a second of nanoseconds");
    }
    if let Some(xs) = &r.xattrs {
        let total: usize = crate::archive::xattr_bytes(xs);
        let too_long = xs.iter().any(|x| {
            x.name.len() > 1024
                || x.value.as_ref().is_some_and(|v| v.len() > crate::archive::MAX_XATTR_VALUE)
        });
        if too_long || total > crate::archive::MAX_XATTR_TOTAL {
            return bad("extended attributes over the reader's bounds");
        }
    }
    Ok(())
}

impl State {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Out(Vec::with_capacity(1024));
        o.u64(self.dest.0);
        o.u64(self.dest.1);
        o.u64(self.own_ino);
        o.bytes(self.program.as_bytes());
        match &self.input {
            InputId::File(f) => {
                o.u8(0);
                o.u64(f.fsid);
                o.u64(f.ino);
                o.u64(f.size);
                o.i128(f.mtime_ns);
                o.i128(f.ctime_ns);
            }
            InputId::Url { url, etag, last_modified, length, sources } => {
                // 1: one source; 2: several, each with its validator after the length.
                o.u8(if sources.is_empty() { 1 } else { 2 });
                o.bytes(url.as_bytes());
                o.opt(etag.as_deref().map(str::as_bytes));
                o.opt(last_modified.as_deref().map(str::as_bytes));
                o.opt_u64(*length);
                if !sources.is_empty() {
                    o.u32(sources.len() as u32);
                    for s in sources {
                        o.bytes(s.given.as_bytes());
                        o.opt(s.etag.as_deref().map(str::as_bytes));
                        o.opt(s.last_modified.as_deref().map(str::as_bytes));
                    }
                }
            }
        }
        o.u8(format_code(self.format));
        o.0.extend_from_slice(&self.options);
        let p = &self.point;
        o.u64(p.member);
        o.u64(p.tar);
        o.u64(p.unit.index);
        o.u64(p.unit.compressed);
        o.u64(p.unit.decoded);
        o.0.extend_from_slice(&p.anchor);
        let c = &self.counts;
        o.u8(u8::from(c.starting));
        o.u32(c.found.len() as u32);
        for &f in &c.found {
            o.u64(f);
        }
        o.u64(c.bytes);
        o.u64(c.files);
        o.u64(c.skipped);
        o.u8(u8::from(self.delay));
        o.u32(self.dirs.len() as u32);
        for d in &self.dirs {
            let code = DIR_STATES.iter().find(|(s, _)| *s == d.state).map_or(0, |(_, c)| *c);
            o.u8(code);
            let mut rec = Vec::new();
            encode_record(&d.record, &mut rec);
            o.bytes(&rec);
        }
        o.u32(self.probes.len() as u32);
        for p in &self.probes {
            o.u32(u32::from(p.root));
            o.bytes(path_bytes(&p.path));
            o.u64(p.ino);
            o.u64(p.size);
            o.i128(p.mtime_ns);
        }
        o.u32(self.globals.headers.len() as u32);
        for g in &self.globals.headers {
            o.u64(g.mtime as u64);
            o.bytes(&g.records);
        }
        o.i128(self.written);
        o.opt(self.sample.as_ref().map(|s| &s[..]));
        o.u32(self.placed.loads.len() as u32);
        for &l in &self.placed.loads {
            o.u64(l);
        }
        o.u32(self.placed.dirs.len() as u32);
        for d in &self.placed.dirs {
            let mut rec = Vec::new();
            encode_record(d, &mut rec);
            o.bytes(&rec);
        }
        seal(&o.0)
    }

    /// A state from the file's bytes, checked: magic, version, length and checksum, then
    /// every field against its bounds. Nothing is allocated beyond what the bytes hold.
    pub fn decode(file: &[u8]) -> Result<State, Bad> {
        State::decode_body(fields(file)?)
    }

    /// The fields of a state from its body (what the checksum covers after the head), each
    /// checked against its bounds. Public for the fuzz target (fuzz/fuzz_targets/
    /// resume_state.rs), which reaches the fields a forger who re-signs a file reaches.
    pub fn decode_body(body: &[u8]) -> Result<State, Bad> {
        let mut i = In(body);
        let dest = (i.u64()?, i.u64()?);
        let own_ino = i.u64()?;
        let program = i.text(64)?;
        let input = input_id(&mut i)?;
        let code = i.u8()?;
        let Some(&(format, _)) = FORMATS.iter().find(|(_, c)| *c == code) else {
            return bad(format!("a format of {code}"));
        };
        let options: [u8; 32] = i.take(32)?.try_into().expect("32");
        let member = i.u64()?;
        let tar = i.u64()?;
        let unit = UnitStart { index: i.u64()?, compressed: i.u64()?, decoded: i.u64()? };
        let anchor: [u8; 32] = i.take(32)?.try_into().expect("32");
        let point = Point { member, tar, unit, anchor };
        check_point(&point, &input)?;
        let starting = i.flag()?;
        let n = i.count(8, usize::MAX)?;
        let found = (0..n).map(|_| i.u64()).collect::<Result<Vec<_>, _>>()?;
        let counts =
            Counts { starting, found, bytes: i.u64()?, files: i.u64()?, skipped: i.u64()? };
        // Files counted include the directories the members imply (`accounts/` of a snapshot,
        // which has no member of its own): at most one per path component of each.
        let implied = member.saturating_add(1).saturating_mul(MAX_IMPLIED);
        if counts.found.iter().any(|&f| f > member) || counts.files > implied {
            return bad("counts beyond the members before the resume point");
        }
        let delay = i.flag()?;
        let dirs = carried_dirs(&mut i)?;
        let probes = probes(&mut i)?;
        let globals = globals(&mut i)?;
        let written = i.i128()?;
        let sample = match i.opt(32)? {
            Some(b) if b.len() == 32 => Some(<[u8; 32]>::try_from(b).expect("32")),
            Some(_) => return bad("a sample digest that is not 32 bytes"),
            None => None,
        };
        if matches!(input, InputId::File(_)) != sample.is_some() {
            return bad("an archive file without its sample, or a URL with one");
        }
        let placed = placed(&mut i)?;
        if !i.0.is_empty() {
            return bad("bytes after its last field");
        }
        Ok(State {
            program,
            input,
            format,
            options,
            dest,
            own_ino,
            point,
            counts,
            delay,
            dirs,
            probes,
            globals,
            written,
            sample,
            placed,
        })
    }
}

/// `--spread`'s loads (at most one per root) and directories, each checked.
fn placed(i: &mut In) -> Result<Placed, Bad> {
    let n = i.count(8, crate::policy::route::MAX_ROOTS)?;
    let loads = (0..n).map(|_| i.u64()).collect::<Result<Vec<_>, _>>()?;
    let n = i.count(4, usize::MAX)?;
    let mut dirs = Vec::with_capacity(n);
    for _ in 0..n {
        let rec = i.bytes(STATE_MAX)?;
        let (record, start) = decode_last(rec).or_else(|_| bad("a spread directory record"))?;
        if start != 0 {
            return bad("a spread directory record with bytes before it");
        }
        check_record(&record)?;
        dirs.push(record);
    }
    Ok(Placed { loads, dirs })
}

/// A state file from its body: the head (magic, version, length), the body, its SHA-256.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut file = Vec::with_capacity(HEAD + body.len() + SUM);
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(&VERSION.to_le_bytes());
    file.extend_from_slice(&(body.len() as u32).to_le_bytes());
    file.extend_from_slice(body);
    let sum = Sha256::digest(&file);
    file.extend_from_slice(&sum);
    file
}

/// The fields of a state file, once its size, magic, version, length and checksum are
/// checked.
fn fields(file: &[u8]) -> Result<&[u8], Bad> {
    if file.len() > STATE_MAX {
        return bad(format!("it is larger than {} MiB", STATE_MAX >> 20));
    }
    if file.len() < HEAD + SUM || &file[..8] != MAGIC {
        return bad("it is not a fastuntar resume state");
    }
    let version = u32::from_le_bytes(file[8..12].try_into().expect("4"));
    if version != VERSION {
        return bad(format!("it is of format version {version}, this fastuntar reads {VERSION}"));
    }
    let len = u32::from_le_bytes(file[12..16].try_into().expect("4")) as usize;
    if HEAD + len + SUM != file.len() {
        return bad("its length field does not match its size");
    }
    let (signed, sum) = file.split_at(HEAD + len);
    if Sha256::digest(signed).as_slice() != sum {
        return bad("its checksum does not match (corrupt)");
    }
    Ok(&signed[HEAD..])
}

/// Which archive the state is of: a file's identity, or a URL's with its validators.
fn input_id(i: &mut In) -> Result<InputId, Bad> {
    Ok(match i.u8()? {
        0 => InputId::File(FileId {
            fsid: i.u64()?,
            ino: i.u64()?,
            size: i.u64()?,
            mtime_ns: i.i128()?,
            ctime_ns: i.i128()?,
        }),
        kind @ (1 | 2) => {
            let url = i.text(64 << 10)?;
            let etag = i.opt(4096)?.map(|b| String::from_utf8_lossy(b).into_owned());
            let lm = i.opt(256)?.map(|b| String::from_utf8_lossy(b).into_owned());
            let length = i.opt_u64()?;
            let mut sources = Vec::new();
            if kind == 2 {
                let n = i.count(6, MAX_SOURCES)?;
                for _ in 0..n {
                    let given = i.text(64 << 10)?;
                    let etag = i.opt(4096)?.map(|b| String::from_utf8_lossy(b).into_owned());
                    let lm = i.opt(256)?.map(|b| String::from_utf8_lossy(b).into_owned());
                    sources.push(SourceId { given, etag, last_modified: lm });
                }
                if sources.is_empty() {
                    return bad("a download from several sources that names none");
                }
            }
            InputId::Url { url, etag, last_modified: lm, length, sources }
        }
        k => return bad(format!("an input of kind {k}")),
    })
}

/// The input of a version 1 or 2 state (no ctime), only to be stepped over (`owner`).
fn input_id_v2(i: &mut In) -> Result<(), Bad> {
    match i.u8()? {
        0 => drop(i.take(8 + 8 + 8 + 16)?),
        1 => {
            i.text(64 << 10)?;
            i.opt(4096)?;
            i.opt(256)?;
            i.opt_u64()?;
        }
        k => return bad(format!("an input of kind {k}")),
    }
    Ok(())
}

/// The directories carried over, each a state and a deferred directory record, checked.
fn carried_dirs(i: &mut In) -> Result<Vec<CarriedDir>, Bad> {
    let n = i.count(5, usize::MAX)?;
    let mut dirs = Vec::with_capacity(n);
    for _ in 0..n {
        let code = i.u8()?;
        let Some(&(state, _)) = DIR_STATES.iter().find(|(_, c)| *c == code) else {
            return bad(format!("a directory state of {code}"));
        };
        let rec = i.bytes(STATE_MAX)?;
        let (record, start) = decode_last(rec).or_else(|_| bad("a directory record"))?;
        if start != 0 {
            return bad("a directory record with bytes before it");
        }
        check_record(&record)?;
        dirs.push(CarriedDir { state, record });
    }
    Ok(dirs)
}

/// The files probed to tell whether DIR and the roots were changed since, never a root itself.
fn probes(i: &mut In) -> Result<Vec<Probe>, Bad> {
    let n = i.count(40, MAX_PROBES)?;
    let mut probes = Vec::with_capacity(n);
    for _ in 0..n {
        let root = i.u32()?;
        let Some(root) = u16::try_from(root).ok().filter(|&r| usize::from(r) < MAX_ROOTS) else {
            return bad(format!("a probe in root {root}, past the most roots"));
        };
        let path = safe_path(i.bytes(MAX_PATH)?)?;
        if path.is_root() {
            return bad("a probe of a root itself");
        }
        let (ino, size, mtime_ns) = (i.u64()?, i.u64()?, i.i128()?);
        probes.push(Probe { root, path, ino, size, mtime_ns });
    }
    Ok(probes)
}

/// The PAX global headers carried over: at most GLOBALS_MAX bytes of records in all, as the
/// reader keeps them (`Reader::carried`); their records are parsed again by the reader's own
/// PAX parser, with its bounds, when the resumed run begins.
fn globals(i: &mut In) -> Result<Globals, Bad> {
    let n = i.count(12, GLOBALS_MAX)?;
    let mut headers = Vec::with_capacity(n);
    let mut total = 0;
    for _ in 0..n {
        let mtime = i.u64()? as i64;
        let records = i.bytes(GLOBALS_MAX - total)?.to_vec();
        total += records.len();
        headers.push(GlobalHeader { mtime, records });
    }
    Ok(Globals { headers })
}

/// A resume point that could be: on a block boundary, after its unit's start and within
/// reach of it, the unit inside the archive.
fn check_point(p: &Point, input: &InputId) -> Result<(), Bad> {
    let size = match input {
        InputId::File(f) => Some(f.size),
        InputId::Url { length, .. } => *length,
    };
    let u = p.unit;
    if !p.tar.is_multiple_of(512) {
        return bad("a resume point that is not on a tar block");
    }
    if u.decoded > p.tar {
        return bad("a resume point before the start of its input unit");
    }
    if p.member > p.tar / 512 {
        return bad("more members before the resume point than blocks");
    }
    if size.is_some_and(|s| u.compressed >= s && u.compressed > 0) {
        return bad("a resume point past the end of the archive");
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::archive::Xattr;

    pub fn sample() -> State {
        let record = |p: &str| Record {
            path: p.as_bytes().to_vec(),
            mode: 0o755,
            mtime: Some(crate::archive::Timestamp { secs: 1_600_000_000, nanos: 5 }),
            owner: Some((1, 2)),
            dev: 7,
            ino: 99,
            borrowed: false,
            name: String::new(),
            xattrs: None,
        };
        let mut with_attrs = record("accounts");
        with_attrs.name = "accounts/".into();
        with_attrs.xattrs =
            Some(vec![Xattr { name: b"user.a".to_vec(), value: Some(vec![1]) }].into());
        State {
            program: "0.1.0".into(),
            input: InputId::File(FileId {
                fsid: 1,
                ino: 2,
                size: 1 << 30,
                mtime_ns: -5,
                ctime_ns: 6,
            }),
            format: Format::Zstd,
            options: [7; 32],
            dest: (3, 4),
            own_ino: 44,
            point: Point {
                member: 10,
                tar: 1 << 20,
                unit: UnitStart { index: 3, compressed: 12345, decoded: 1 << 19 },
                anchor: [9; 32],
            },
            counts: Counts {
                starting: false,
                found: vec![1, 0, 3],
                bytes: 5,
                files: 9,
                skipped: 1,
            },
            delay: false,
            dirs: vec![
                CarriedDir { state: DirState::Open, record: record("") },
                CarriedDir { state: DirState::Open, record: with_attrs },
                CarriedDir { state: DirState::Closing, record: record("snapshots/1") },
            ],
            probes: vec![
                Probe {
                    root: 0,
                    path: safe_path(b"version").unwrap(),
                    ino: 5,
                    size: 6,
                    mtime_ns: 7,
                },
                Probe { root: 2, path: safe_path(b"1.1").unwrap(), ino: 8, size: 9, mtime_ns: -10 },
            ],
            globals: Globals {
                headers: vec![GlobalHeader { mtime: -3, records: b"11 uid=80\n".to_vec() }],
            },
            written: 123,
            sample: Some([8; 32]),
            placed: Placed { loads: vec![0, 7, 9], dirs: vec![record("accounts")] },
        }
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let bytes = s.encode();
        assert_eq!(State::decode(&bytes), Ok(s.clone()));
        // Each probe keeps its root (a spread root's file is probed there, not in DIR).
        let roots: Vec<u16> =
            State::decode(&bytes).unwrap().probes.iter().map(|p| p.root).collect();
        assert_eq!(roots, [0, 2]);
        let url = State {
            input: InputId::Url {
                url: "https://h/a".into(),
                etag: Some("\"x\"".into()),
                last_modified: None,
                length: Some(1 << 30),
                sources: vec![],
            },
            sample: None,
            ..s
        };
        assert_eq!(State::decode(&url.encode()), Ok(url.clone()));
        let id = |g: &str, e: Option<&str>, lm: Option<&str>| SourceId {
            given: g.into(),
            etag: e.map(str::to_string),
            last_modified: lm.map(str::to_string),
        };
        let several = State {
            input: InputId::Url {
                url: "https://h/a".into(),
                etag: Some("\"x\"".into()),
                last_modified: None,
                length: Some(1 << 30),
                sources: vec![
                    id("https://h/a", Some("\"x\""), None),
                    id("https://m/a", None, Some("Sun, 06 Nov 1994 08:49:37 GMT")),
                ],
            },
            ..url
        };
        assert_eq!(State::decode(&several.encode()), Ok(several));
    }

    /// A state of format 4 (its probes without their roots) is ours, and refused in the one
    /// line every other format version gets.
    #[test]
    fn format_4_is_refused_in_one_line() {
        let mut file = sample().encode();
        file[8..12].copy_from_slice(&4u32.to_le_bytes());
        let n = file.len() - SUM;
        let sum = Sha256::digest(&file[..n]);
        file[n..].copy_from_slice(&sum);
        assert_eq!(owner(&file).map(|o| o.version), Some(4));
        let e = State::decode(&file).unwrap_err().0;
        assert_eq!(e, "it is of format version 4, this fastuntar reads 5");
    }

    /// Whose a file is, read before the rest: ours names DIR and its own inode; a file of
    /// another format is nobody's; versions 1 and 2 give their DIR from where they kept it.
    #[test]
    fn whose_a_file_is() {
        let s = sample();
        let bytes = s.encode();
        let want = Owner { version: VERSION, dest: (3, 4), own_ino: Some(44) };
        assert_eq!(owner(&bytes), Some(want));
        // Corrupt past the owner block: still ours (and refused as corrupt).
        let mut b = bytes.clone();
        let mid = b.len() / 2;
        b[mid] ^= 1;
        assert!(owner(&b).is_some() && State::decode(&b).is_err());
        assert_eq!(owner(b"not a state at all"), None);
        assert_eq!(owner(&vec![0; 5 << 20]), None);
        assert_eq!(owner(&bytes[..20]), None, "cut in the owner block");
        // A version 2 file, as the version before this one wrote it.
        let mut v2 = Out(Vec::new());
        v2.bytes(b"0.1.0");
        v2.u8(0);
        v2.0.extend_from_slice(&[0; 40]);
        v2.u8(1);
        v2.0.extend_from_slice(&[7; 32]);
        v2.u64(3);
        v2.u64(4);
        v2.0.extend_from_slice(&[0; 100]);
        let mut file = seal(&v2.0);
        file[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(owner(&file), Some(Owner { version: 2, dest: (3, 4), own_ino: None }));
        let e = State::decode(&file).unwrap_err().0;
        assert!(e.contains("format version 2"), "{e}");
    }

    /// Every byte flipped, the file cut anywhere, bytes added: refused, never a panic.
    #[test]
    fn every_corruption_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(State::decode(&b).is_err(), "byte {i} flipped");
        }
        for cut in 0..bytes.len() {
            assert!(State::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(State::decode(&longer).is_err());
    }

    /// Re-signs a body: a forger who knows the format passes the checksum, not the checks.
    fn signed(mut s: State, f: impl FnOnce(&mut State)) -> Result<State, Bad> {
        f(&mut s);
        State::decode(&s.encode())
    }

    #[test]
    fn forged_states_are_refused() {
        let s = sample();
        let path = |p: &[u8]| Record { path: p.to_vec(), ..s.dirs[0].record.clone() };
        for p in [&b"../x"[..], b"/etc", b"a//b", b"a/./b", b"a/\0", b"a/..", &[b'x'; 256]] {
            let r = signed(s.clone(), |s| s.dirs[0].record = path(p));
            assert!(r.is_err(), "dir path {:?}", String::from_utf8_lossy(p));
            let r = signed(s.clone(), |s| {
                s.probes[0].path = SafePath(PathBuf::from(std::ffi::OsStr::from_bytes(p)))
            });
            assert!(r.is_err(), "probe path {:?}", String::from_utf8_lossy(p));
        }
        assert!(signed(s.clone(), |s| s.point.tar += 1).is_err(), "not on a block");
        assert!(signed(s.clone(), |s| s.point.unit.decoded = s.point.tar + 512).is_err());
        assert!(signed(s.clone(), |s| s.point.unit.compressed = 1 << 30).is_err(), "past the end");
        assert!(signed(s.clone(), |s| s.point.member = (1 << 20) / 512 + 1).is_err());
        assert!(signed(s.clone(), |s| s.counts.found[0] = 11).is_err(), "counts over N");
        assert!(signed(s.clone(), |s| s.dirs[0].record.mode = 0o10000).is_err());
        assert!(signed(s.clone(), |s| s.dirs[0].record.borrowed = true).is_err());
        let many = vec![s.probes[0].clone(); MAX_PROBES + 1];
        assert!(signed(s.clone(), |s| s.probes = many).is_err(), "more probes than the most");
        let far = MAX_ROOTS as u16;
        assert!(signed(s.clone(), |s| s.probes[1].root = far).is_err(), "a probe past the roots");
        assert!(signed(s.clone(), |s| s.probes[1].root = far - 1).is_ok());
        assert!(signed(s.clone(), |s| s.sample = None).is_err(), "a file without its sample");
        let big = vec![Xattr { name: b"user.x".to_vec(), value: Some(vec![0; 70_000]) }];
        assert!(signed(s.clone(), |s| s.dirs[1].record.xattrs = Some(big.into())).is_err());
        let g = |n: usize| GlobalHeader { mtime: 0, records: vec![b'x'; n] };
        assert!(signed(s.clone(), |s| s.globals.headers = vec![g(GLOBALS_MAX)]).is_ok());
        let over = vec![g(GLOBALS_MAX / 2), g(GLOBALS_MAX / 2 + 1)];
        assert!(signed(s.clone(), |s| s.globals.headers = over).is_err(), "globals over the bound");
        // A 5 MiB body: refused by its size before anything is read.
        let mut huge = s.clone();
        huge.counts.found = vec![0; 700_000];
        assert!(State::decode(&huge.encode()).is_err());
    }

    /// A deterministic fuzz of the re-signed body (the checksum passes, as for a forger): 60,000
    /// bodies mutated from a real state's by flips, cuts, insertions, deletions and spliced
    /// runs of 0x00/0xff. None panics, and whatever decodes encodes back to itself.
    #[test]
    fn mutated_bodies_never_panic() {
        let file = sample().encode();
        let body = &file[HEAD..file.len() - SUM];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n.max(1) as u64) as usize
        };
        let mut accepted = 0;
        for _ in 0..60_000 {
            let mut b = body.to_vec();
            for _ in 0..1 + next(4) {
                let at = next(b.len() + 1);
                match next(5) {
                    0 if at < b.len() => b[at] ^= 1 << next(8),
                    1 => b.truncate(at),
                    2 => b.insert(at, next(256) as u8),
                    3 if at < b.len() => drop(b.remove(at)),
                    _ => {
                        let fill = [0u8, 0xff][next(2)];
                        let end = (at + 1 + next(9)).min(b.len());
                        b[at.min(end)..end].fill(fill);
                    }
                }
            }
            if let Ok(s) = State::decode_body(&b) {
                accepted += 1;
                assert_eq!(State::decode(&s.encode()), Ok(s), "{b:?}");
            }
        }
        // Mutations of values (a size, a time) decode; the loop reached the fields.
        assert!(accepted > 100, "only {accepted} mutated bodies decoded");
    }

    /// Counts that claim more items than the bytes left could hold allocate nothing.
    #[test]
    fn hostile_counts_are_bounded() {
        let mut body = Out(Vec::new());
        body.0.extend_from_slice(&[0; 24]);
        body.bytes(b"0.1.0");
        body.u8(0);
        let file = {
            let mut f = Vec::new();
            f.extend_from_slice(MAGIC);
            f.extend_from_slice(&VERSION.to_le_bytes());
            let mut b = body.0.clone();
            b.extend_from_slice(&[0; 40]);
            b.extend_from_slice(&[0xff; 64]);
            f.extend_from_slice(&(b.len() as u32).to_le_bytes());
            f.extend_from_slice(&b);
            let sum = Sha256::digest(&f);
            f.extend_from_slice(&sum);
            f
        };
        assert!(State::decode(&file).is_err());
    }
}
