//! `-t/--list`: member names like `tar -tf`, and with `-v` lines like `tar -tvf`.

use std::io::{self, Write};
use std::sync::Arc;

use anyhow::Result;

use crate::archive::{Kind, Member, Reader, Skip};
use crate::config::Config;
use crate::decode;
use crate::owner::Owners;
use crate::plan::Timestamp;
use crate::report::quote;
use crate::select::Wanted;
use crate::transform::{NameKind, Transforms};

/// GNU tar's starting widths for "user/group size" and the date column (list.c).
const UGS_WIDTH: usize = 18;
const DATE_WIDTH: usize = 16;

/// The archive as every stage reads it (extraction, `-t` here, `-O` in to_stdout.rs): its
/// members with the reader's options set, which of them are wanted (MEMBER operands and
/// `--exclude`), and the checks at its end.
pub struct Reading {
    pub reader: Reader<Box<dyn Skip + Send>>,
    /// For checking the compressed stream after the end marker (`finish`).
    trailer: Option<decode::Trailer>,
    wanted: Wanted,
    /// `--occurrence` found every name often enough: the archive is not read on (GNU tar
    /// stops there too), and its end is not checked.
    ended_early: bool,
    /// `--transform` expressions (empty: none).
    transforms: Arc<Transforms>,
    /// `--show-omitted-dirs`.
    show_omitted_dirs: bool,
    /// `-V PATTERN`, until the first member has been checked against it.
    label: Option<String>,
    /// The download the archive comes from (a URL): `finish` completes it.
    pub download: Option<Arc<decode::url::Download>>,
    /// A member read and given back (`unread`): the next one `next_member` returns.
    unread: Option<Member>,
}

/// Opens the archive and starts its decoder for a stage that only reads it.
pub fn open(cfg: &Config) -> Result<Reading> {
    let input = open_input(cfg, false)?;
    let wanted = Wanted::new(cfg)?;
    // Decoded frames wait in a pool of all of --memory, nothing else needing it (it is only
    // touched where frames are decoded ahead, so a single-frame archive costs no memory).
    let pools = cfg.pools(input.workers(cfg.threads))?;
    let threads = input.threads(cfg.threads, pools, cfg.memory.is_some())?;
    let decoded = input.decode(threads)?;
    let download = decoded.download.clone();
    let mut reading = Reading::new(cfg, decoded.reader, decoded.trailer, wanted);
    reading.download = download;
    Ok(reading)
}

/// The archive of `cfg` opened and its format found: a URL's download (`decode::open_url`),
/// or a file, standard input or a `-I` program's output (`decode::open`).
pub fn open_input(cfg: &Config, drop_behind: bool) -> Result<decode::Input> {
    match &cfg.url {
        Some(plan) => decode::open_url(plan, cfg.max_window_log),
        None => decode::open(
            cfg.archive.as_deref(),
            cfg.filter.as_deref(),
            cfg.max_window_log,
            drop_behind,
        ),
    }
}

impl Reading {
    /// The decoded stream `input` read as a tar archive, with `-i`, and the attributes kept
    /// only when extracting with `--xattrs` (`-t` and `-O` show none).
    pub fn new(
        cfg: &Config,
        input: Box<dyn Skip + Send>,
        trailer: Option<decode::Trailer>,
        wanted: Wanted,
    ) -> Reading {
        Reading::with_reader(cfg, Reader::new(input), trailer, wanted)
    }

    /// A resumed run's archive (src/resume/): `reader` begins at the resume point. The
    /// volume label was checked by the interrupted run, and `--checkpoint` counts from there.
    pub fn resumed(
        cfg: &Config,
        reader: Reader<Box<dyn Skip + Send>>,
        trailer: Option<decode::Trailer>,
        wanted: Wanted,
    ) -> Reading {
        let at = reader.offset();
        let mut r = Reading::with_reader(cfg, reader, trailer, wanted);
        r.label = None;
        crate::checkpoint::skip_to(at);
        r
    }

    fn with_reader(
        cfg: &Config,
        mut reader: Reader<Box<dyn Skip + Send>>,
        trailer: Option<decode::Trailer>,
        wanted: Wanted,
    ) -> Reading {
        reader.ignore_zeros(cfg.ignore_zeros);
        reader.block_numbers(cfg.block_number);
        reader.pax_delete(cfg.pax_delete.clone());
        // Kept when extracting with --xattrs or --acls, and for -tv's mark with either.
        let marks = cfg.list && cfg.verbose > 0;
        let asked = cfg.xattrs.is_some() || cfg.acls;
        reader.xattrs(asked && (marks || !cfg.reads_only()));
        // -G: the directories' lists, to purge by, or to show (-t -vv, as GNU tar's -tvvv:
        // its -t counts as one -v).
        reader.dumpdirs(cfg.incremental && (!cfg.reads_only() || cfg.list && cfg.verbose > 1));
        crate::checkpoint::start(cfg, trailer.is_some());
        let transforms = cfg.transforms.clone();
        let show_omitted_dirs = cfg.show_omitted_dirs;
        let label = cfg.label.clone();
        Reading {
            reader,
            trailer,
            wanted,
            ended_early: false,
            transforms,
            show_omitted_dirs,
            label,
            download: None,
            unread: None,
        }
    }

    /// Gives `m`, just read, back: `next_member` returns it again (a resumed run reads the
    /// member at its resume point to check it before anything is written).
    pub fn unread(&mut self, m: Member) {
        self.unread = Some(m);
    }

    /// Which members are wanted (for a resume point's counts).
    pub fn wanted(&self) -> &Wanted {
        &self.wanted
    }

    /// The next member; at the end of the archive its size is noted for `--totals`. The
    /// records read count for `--checkpoint`.
    pub fn next_member(&mut self) -> Result<Option<Member>> {
        if let Some(m) = self.unread.take() {
            return Ok(Some(m));
        }
        let m = if self.ended_early {
            None
        } else {
            let before = (self.reader.offset(), self.reader.format());
            let m = self.reader.next_member();
            crate::checkpoint::headers_read(before, &self.reader, &m);
            m?
        };
        if let Some(pattern) = self.label.take() {
            check_label(&pattern, self.reader.first_label())?;
        }
        if m.is_none() {
            crate::totals::archive_ends_at(self.reader.offset());
        }
        Ok(m)
    }

    /// After `next_member`, how the archive ended where it did: with `-R` GNU tar's lines
    /// for the zero blocks and the end of the input met (`block 9: ** Block of NULs **`,
    /// `** End of File **`), each passed to `say` until it fails; then GNU tar's warning for
    /// an end marker of one zero block.
    pub fn say_ends(&mut self, say: &mut dyn FnMut(&str) -> io::Result<()>) -> io::Result<()> {
        let ends = self.reader.take_ends();
        let nuls = ends.zero_runs.iter().flat_map(|&(first, n)| first..first + n);
        let mut lines = nuls
            .map(|block| format!("block {block}: ** Block of NULs **"))
            .chain(ends.eof_at.map(|block| format!("block {block}: ** End of File **")));
        let said = lines.try_for_each(|line| say(&line));
        if let Some(at) = ends.lone_zero_at {
            let what = format!("A lone zero block at {at}");
            crate::report::warn_of(crate::report::Warning::AloneZeroBlock, what);
        }
        said
    }

    /// Whether the member is wanted: selected by the MEMBER operands (which marks the operand
    /// found), not older than `-N`'s date and not excluded, by its name as stored. With `--occurrence`, this is also
    /// where the reading ends once every name was found (after this member, wanted or not, as
    /// GNU tar's `read_and` checks). A wanted member's names are then `--transform`ed, as GNU
    /// tar's `transform_stat_info` does after the same checks: its name (trailing `/`s set
    /// aside, one put back), a symlink's or hard link's target; the stored name is kept for
    /// listings. With `--show-omitted-dirs` a directory member not wanted is named.
    pub fn wants(&mut self, m: &mut Member) -> bool {
        let wanted = self.wanted.wants(&m.name, m.mtime);
        self.ended_early = self.wanted.all_found(&m.name);
        if !wanted && self.show_omitted_dirs && m.kind == Kind::Dir {
            // GNU tar names it without its trailing `/`s.
            let end = m.name.iter().rposition(|&b| b != b'/').map_or(m.name.len(), |e| e + 1);
            crate::report::warn(format!("{}: Omitting", crate::report::printable(&m.name[..end])));
        }
        if wanted && !self.transforms.is_empty() {
            let end = m.name.iter().rposition(|&b| b != b'/').map_or(0, |e| e + 1);
            if let Some(mut name) = self.transforms.apply(&m.name[..end], NameKind::Member) {
                if end < m.name.len() && !name.is_empty() {
                    name.push(b'/');
                }
                m.stored_name = Some(std::mem::replace(&mut m.name, name));
            }
            let kind = match m.kind {
                Kind::Symlink => Some(NameKind::SymlinkTarget),
                Kind::Hardlink => Some(NameKind::HardlinkTarget),
                _ => None,
            };
            if let Some(kind) = kind
                && let Some(target) = self.transforms.apply(&m.link_name, kind)
            {
                m.link_name = target;
            }
        }
        wanted
    }

    /// After the last member: reads a compressed stream on past the end marker, so its end
    /// and checksum are checked (`extract::verify_trailer`), then reports the MEMBER operands
    /// that selected nothing.
    pub fn finish(self, utf8: bool) -> Result<()> {
        if let Some(trailer) = self.trailer
            && !self.ended_early
        {
            crate::extract::verify_trailer(self.reader, &trailer)?;
        }
        if let Some(d) = &self.download
            && !self.ended_early
        {
            d.finish()?;
        }
        self.wanted.report_not_found(utf8);
        Ok(())
    }
}

/// `-V PATTERN`, as GNU tar 1.34 checks it before reading on: the archive's label is the
/// name field of a volume header that is its first block, or the `GNU.volume.label` of a
/// global header that is (`Reader::first_label`); it must match PATTERN (fnmatch(3) without
/// flags).
fn check_label(pattern: &str, label: Option<&[u8]>) -> Result<()> {
    let utf8 = utf8_locale();
    let quoted = |b: &[u8]| crate::report::locale_quoted(b, utf8);
    let Some(label) = label else {
        anyhow::bail!("Archive not labeled to match {}", quoted(pattern.as_bytes()));
    };
    let matches = match (std::ffi::CString::new(pattern), std::ffi::CString::new(label)) {
        // Safety: two NUL-terminated strings that live across the call.
        (Ok(p), Ok(l)) => (unsafe { libc::fnmatch(p.as_ptr(), l.as_ptr(), 0) }) == 0,
        _ => false,
    };
    if !matches {
        anyhow::bail!("Volume {} does not match {}", quoted(label), quoted(pattern.as_bytes()));
    }
    Ok(())
}

/// What `-t` and `-xv` print for each member, in GNU tar's forms: the name (quoted for the
/// locale), or with `-tv` and `-xvv` the long line, whose columns widen with what was shown.
/// A POSIX archive's volume label (`GNU.volume.label`) comes first, as GNU tar shows it
/// (its `print_volume_label`): a volume header of that name owned by 0/0, dated by the global
/// header's mtime, or 1970 when `-V` was given (GNU tar 1.34 has decoded the header anew then).
pub struct Lines {
    long: bool,
    /// `-R`: lines start `block N: `, N a member's header block (`Member::block`) plus this:
    /// 0 for `-t`, 1 when extracting (GNU tar has read past the header then).
    block_past: Option<u64>,
    utf8: bool,
    widths: Widths,
    owners: Owners,
    label_shown: bool,
}

impl Lines {
    pub fn new(cfg: &Config, long: bool) -> Lines {
        Lines {
            long,
            block_past: cfg.block_number.then_some(u64::from(!cfg.list)),
            utf8: utf8_locale(),
            widths: Widths { ugs: UGS_WIDTH, date: DATE_WIDTH },
            owners: Owners::new(cfg.numeric_owner),
            label_shown: false,
        }
    }

    /// The line (or lines) for `m`; `label` is the reader's POSIX volume label so far.
    /// Bytes: `--quoting-style=literal` writes names as stored.
    pub fn of(&mut self, m: &Member, cfg: &Config, label: Option<(&[u8], i64)>) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.label_shown
            && m.format == crate::archive::Format::Pax
            && let Some((name, secs)) = label
        {
            self.label_shown = true;
            let secs = if cfg.label.is_some() { 0 } else { secs };
            let v = Member::volume_header(name.to_vec(), Timestamp { secs, nanos: 0 });
            // -R: block 0, extracting too.
            if self.block_past.is_some() {
                out.extend_from_slice(b"block 0: ");
            }
            out.extend(self.line(&v, v.listed_name(false), cfg));
            out.push(b'\n');
        }
        if let Some(past) = self.block_past {
            out.extend_from_slice(format!("block {}: ", m.block + past).as_bytes());
        }
        if cfg.show_transformed {
            // As extracted: `--strip-components` and `--one-top-level` too, as GNU tar shows.
            use std::os::unix::ffi::OsStrExt;
            let top = cfg.one_top_level.as_deref().map(|t| t.as_os_str().as_bytes());
            let shown = crate::safety::shown_name(&m.name, cfg.strip_components, top);
            out.extend(self.line(m, &shown, cfg));
        } else {
            out.extend(self.line(m, m.listed_name(false), cfg));
        }
        out
    }

    fn line(&mut self, m: &Member, name: &[u8], cfg: &Config) -> Vec<u8> {
        let name = cfg.quoting.quote(name, self.utf8);
        if !self.long {
            return name;
        }
        long_line(m, &name, self.utf8, &mut self.widths, &mut self.owners, cfg)
    }
}

pub fn run(cfg: &Config) -> Result<u64> {
    let mut archive = open(cfg)?;
    let mut out = io::BufWriter::new(crate::report::listing());
    let utf8 = utf8_locale();
    let mut lines = Lines::new(cfg, cfg.verbose > 0);
    // Checkpoints and "Omitting" lines print straight to stdout and stderr: each line goes out
    // before them.
    let line_by_line = crate::checkpoint::on() || cfg.show_omitted_dirs;
    let mut members = 0;
    loop {
        // The ends met before an error are said before it, as GNU tar does.
        let next = archive.next_member();
        if let Err(e) = archive.say_ends(&mut |line| writeln!(out, "{line}")) {
            return stopped(members, e);
        }
        let Some(mut m) = next? else { break };
        if !archive.wants(&mut m) {
            continue;
        }
        members += 1;
        let line = lines.of(&m, cfg, archive.reader.volume_label());
        let mut written = out.write_all(&line).and_then(|()| out.write_all(b"\n"));
        if let Some(raw) = m.dumpdir.as_deref().filter(|_| cfg.verbose > 1) {
            written = written.and_then(|()| out.write_all(&crate::incremental::listing(raw)));
        }
        if let Err(e) = written.and_then(|()| if line_by_line { out.flush() } else { Ok(()) }) {
            return stopped(members, e);
        }
    }
    if let Err(e) = out.flush() {
        return stopped(members, e);
    }
    archive.finish(utf8)?;
    Ok(members)
}

/// Listing ends at the first failed write. A closed pipe (`fastuntar -t A | head`) ends it
/// quietly: nobody is reading, and reading the rest of the archive would be wasted. Any other
/// failure (a full disk) is reported at the end of the run, exit 2, like GNU tar's "stdout:
/// write error".
fn stopped(members: u64, e: io::Error) -> Result<u64> {
    if e.kind() != io::ErrorKind::BrokenPipe {
        crate::report::stdout_failed(&e);
    }
    Ok(members)
}

/// GNU tar lists member names as stored but hard-link targets with leading `/` (and any
/// prefix up to a `..` component) removed, as it would extract them.
fn listed_target(raw: &[u8]) -> &[u8] {
    let mut cut = 0;
    let mut i = 0;
    while i < raw.len() {
        let end = raw[i..].iter().position(|&b| b == b'/').map_or(raw.len(), |p| i + p);
        if &raw[i..end] == b".." {
            cut = (end + 1).min(raw.len());
        }
        i = end + 1;
    }
    let mut rest = &raw[cut..];
    while let Some(r) = rest.strip_prefix(b"/") {
        rest = r;
    }
    rest
}

/// The column widths of `tar -tv`, which grow (never shrink) with what was listed.
struct Widths {
    ugs: usize,
    date: usize,
}

/// One `tar -tv` line. The owner column is the member's names, or with `--numeric-owner` (or
/// where a name is empty) its ids as GNU tar resolves them (`owner.rs`): a PAX record may
/// empty a name whose header name maps to a local id, and GNU tar lists that id.
fn long_line(
    m: &Member,
    name: &[u8],
    utf8: bool,
    widths: &mut Widths,
    owners: &mut Owners,
    cfg: &Config,
) -> Vec<u8> {
    let numeric = cfg.numeric_owner;
    let user = if m.uname.is_empty() || numeric {
        owners.uid(m).to_string()
    } else {
        quote(&m.uname, utf8)
    };
    let group = if m.gname.is_empty() || numeric {
        owners.gid(m).to_string()
    } else {
        quote(&m.gname, utf8)
    };
    let size = match m.kind {
        Kind::CharDev | Kind::BlockDev => format!("{},{}", m.dev_major, m.dev_minor),
        Kind::Hardlink | Kind::Symlink | Kind::Fifo => "0".to_string(),
        // The header's size, as GNU tar lists it: 0 for most, the length of the name list of
        // an incremental archive's dumpdir ('D').
        Kind::Dir => m.declared_size.to_string(),
        _ => m.size.to_string(),
    };
    let pad = user.len() + 1 + group.len() + size.len();
    widths.ugs = widths.ugs.max(pad);
    let date = tartime(m.mtime, cfg.times.full, cfg.times);
    widths.date = widths.date.max(date.len());
    let mut line = format!(
        "{}{} {user}/{group} {:>w$} {:<dw$} ",
        mode_string(m),
        mark(m, cfg),
        size,
        date,
        w = widths.ugs - pad + size.len(),
        dw = widths.date,
    )
    .into_bytes();
    line.extend_from_slice(name);
    match m.kind {
        Kind::Symlink => {
            line.extend_from_slice(b" -> ");
            line.extend(cfg.quoting.quote(&m.link_name, utf8));
        }
        Kind::Hardlink => {
            line.extend_from_slice(b" link to ");
            line.extend(cfg.quoting.quote(listed_target(&m.link_name), utf8));
        }
        Kind::Other(b'V') => line.extend_from_slice(b"--Volume Header--"),
        Kind::Other(flag) => {
            // As GNU tar's quote(): escaped (`\001`, `\377`), in the locale's marks.
            let quoted = crate::report::locale_quoted(&[flag], utf8);
            line.extend_from_slice(format!(" unknown file type {quoted}").as_bytes());
        }
        _ => {}
    }
    line
}

fn mode_string(m: &Member) -> String {
    let t = match m.kind {
        // GNU tar marks a contiguous file (type 7) `C`.
        Kind::File if m.type_flag == b'7' => 'C',
        Kind::File => '-',
        Kind::Other(b'V') => 'V',
        Kind::Other(_) => '?',
        Kind::Dir => 'd',
        Kind::Symlink => 'l',
        Kind::Hardlink => 'h',
        Kind::Fifo => 'p',
        Kind::CharDev => 'c',
        Kind::BlockDev => 'b',
    };
    let mode = m.mode;
    let bit = |mask: u32, c: char| if mode & mask != 0 { c } else { '-' };
    let special = |x: bool, set: bool, on: char, off: char| match (x, set) {
        (true, true) => on,
        (false, true) => off,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        t,
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(mode & 0o100 != 0, mode & 0o4000 != 0, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(mode & 0o010 != 0, mode & 0o2000 != 0, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(mode & 0o001 != 0, mode & 0o1000 != 0, 't', 'T'),
    ]
    .iter()
    .collect()
}

/// How times are shown: `--full-time`, `--utc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeStyle {
    pub full: bool,
    pub utc: bool,
}

/// GNU tar's `tartime`: "YYYY-MM-DD HH:MM" in local time (UTC with `--utc`), or with `full`
/// "YYYY-MM-DD HH:MM:SS" and the nanoseconds without trailing zeros (".5"); the number of
/// seconds where the time is out of the calendar's range.
pub fn tartime(t: Timestamp, full: bool, style: TimeStyle) -> String {
    let secs = t.secs as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // Safety: valid pointers to a time_t and a tm buffer.
    let ok = !unsafe {
        if style.utc {
            libc::gmtime_r(&secs, tm.as_mut_ptr())
        } else {
            libc::localtime_r(&secs, tm.as_mut_ptr())
        }
    }
    .is_null();
    if !ok {
        return t.secs.to_string();
    }
    // Safety: localtime_r/gmtime_r succeeded.
    let tm = unsafe { tm.assume_init() };
    let date = format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        tm.tm_year as i64 + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min
    );
    if !full {
        return date;
    }
    format!("{date}:{:02}{}", tm.tm_sec, ns_fraction(t.nanos))
}

/// The column GNU tar 1.34 adds after the mode with `--xattrs` or `--acls` (its
/// `xattrs_print_char`): `+` for a member with ACLs (with --acls), `*` for one with an
/// attribute `--xattrs` would restore, else a space; nothing without either option.
fn mark(m: &Member, cfg: &Config) -> &'static str {
    if cfg.xattrs.is_none() && !cfg.acls {
        return "";
    }
    let acl = |x: &&crate::archive::Xattr| crate::acl::is_record(&x.name);
    if cfg.acls && m.xattrs.iter().any(|x| acl(&x)) {
        return "+";
    }
    let restored =
        |f: &crate::xattrs::XattrFilter| m.xattrs.iter().any(|x| !acl(&x) && f.wants(&x.name));
    if cfg.xattrs.as_ref().is_some_and(restored) { "*" } else { " " }
}

/// GNU tar's `code_ns_fraction`: `.` and the nanoseconds without trailing zeros; nothing for 0.
pub fn ns_fraction(ns: u32) -> String {
    if ns == 0 {
        return String::new();
    }
    let digits = format!("{ns:09}");
    format!(".{}", digits.trim_end_matches('0'))
}

/// Whether the run's locale is UTF-8 (names keep their non-ASCII characters, quotation marks
/// are ‘…’), as GNU tar decides it after `setlocale(LC_ALL, "")`: by the character set of the
/// locale the environment names, if it is installed (`init_locale`); before that (the library's
/// unit tests) by the environment alone.
pub fn utf8_locale() -> bool {
    match LOCALE.get() {
        Some(&utf8) => utf8,
        None => {
            let v = ["LC_ALL", "LC_CTYPE", "LANG"]
                .iter()
                .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
                .unwrap_or_default()
                .to_ascii_lowercase();
            v.contains("utf-8") || v.contains("utf8")
        }
    }
}

/// Set by `init_locale`: the locale's character set is UTF-8.
static LOCALE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Takes LC_CTYPE from the environment, as GNU tar's `setlocale (LC_ALL, "")` does (a locale
/// that is not installed leaves "C"), and notes whether its character set is UTF-8; from then
/// on `report::quote` asks the C library which characters are printable (`iswprint`), so
/// names are escaped as GNU tar escapes them on the same machine. Call before any thread
/// starts (setlocale is not thread-safe).
pub fn init_locale() {
    // Safety: called from main before other threads exist; the empty string is a valid C
    // string; nl_langinfo's result is read before any other locale call.
    let utf8 = unsafe {
        !libc::setlocale(libc::LC_CTYPE, c"".as_ptr()).is_null() && {
            let codeset = libc::nl_langinfo(libc::CODESET);
            !codeset.is_null() && std::ffi::CStr::from_ptr(codeset).to_bytes() == b"UTF-8"
        }
    };
    let _ = LOCALE.set(utf8);
    crate::report::use_libc_printable(utf8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_targets() {
        assert_eq!(listed_target(b"/etc/passwd"), b"etc/passwd");
        assert_eq!(listed_target(b"a/../../b"), b"b");
        assert_eq!(listed_target(b"dir/"), b"dir/");
    }
}
