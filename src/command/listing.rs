//! The lines `-t` and `-v` print for each member, in GNU tar's forms (its list.c): the name
//! quoted for the locale, or the long line of `-tv` and `-xvv` (mode, owner, size, date).

use std::path::PathBuf;

use crate::archive::{Kind, Member, Timestamp};
use crate::metadata::owner::Owners;
use crate::report::locale::utf8_locale;
use crate::report::quote;
use crate::report::time::tartime;

/// How `-t` and `-v` lines look (`Lines`).
#[derive(Debug, Clone)]
pub struct ListingPlan {
    /// `-R`: lines start `block N: `, N a member's header block plus this (0 for `-t`, 1
    /// when extracting); None without `-R`.
    pub block_past: Option<u64>,
    /// `--numeric-owner`: ids, never names.
    pub numeric_owner: bool,
    /// `-V` was given: a POSIX volume label is dated 1970, as GNU tar 1.34 shows it.
    pub label_given: bool,
    /// `--show-transformed-names`: names as extracted (`strip_components`, `one_top_level`).
    pub show_transformed: bool,
    pub strip_components: usize,
    pub one_top_level: Option<PathBuf>,
    /// `--quoting-style`, `--quote-chars` (quoting.rs).
    pub quoting: crate::report::quoting::Quoting,
    /// `--full-time`, `--utc`.
    pub times: crate::report::time::TimeStyle,
    /// `--xattrs`' filter and `--acls`, for the mark after the mode.
    pub xattrs: Option<crate::metadata::xattrs::XattrFilter>,
    pub acls: bool,
}

/// GNU tar's starting widths for "user/group size" and the date column (list.c).
const UGS_WIDTH: usize = 18;
const DATE_WIDTH: usize = 16;

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
    pub fn new(cfg: &ListingPlan, long: bool) -> Lines {
        Lines {
            long,
            block_past: cfg.block_past,
            utf8: utf8_locale(),
            widths: Widths { ugs: UGS_WIDTH, date: DATE_WIDTH },
            owners: Owners::new(cfg.numeric_owner),
            label_shown: false,
        }
    }

    /// The line (or lines) for `m`; `label` is the reader's POSIX volume label so far.
    /// Bytes: `--quoting-style=literal` writes names as stored.
    pub fn of(&mut self, m: &Member, cfg: &ListingPlan, label: Option<(&[u8], i64)>) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.label_shown
            && m.format == crate::archive::Format::Pax
            && let Some((name, secs)) = label
        {
            self.label_shown = true;
            let secs = if cfg.label_given { 0 } else { secs };
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
            let shown = crate::policy::safety::shown_name(&m.name, cfg.strip_components, top);
            out.extend(self.line(m, &shown, cfg));
        } else {
            out.extend(self.line(m, m.listed_name(false), cfg));
        }
        out
    }

    fn line(&mut self, m: &Member, name: &[u8], cfg: &ListingPlan) -> Vec<u8> {
        let name = cfg.quoting.quote(name, self.utf8);
        if !self.long {
            return name;
        }
        long_line(m, &name, self.utf8, &mut self.widths, &mut self.owners, cfg)
    }
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
    cfg: &ListingPlan,
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
    let date = tartime(m.mtime.secs, m.mtime.nanos, cfg.times.full, cfg.times);
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

/// The column GNU tar 1.34 adds after the mode with `--xattrs` or `--acls` (its
/// `xattrs_print_char`): `+` for a member with ACLs (with --acls), `*` for one with an
/// attribute `--xattrs` would restore, else a space; nothing without either option.
fn mark(m: &Member, cfg: &ListingPlan) -> &'static str {
    if cfg.xattrs.is_none() && !cfg.acls {
        return "";
    }
    let acl = |x: &&crate::archive::Xattr| crate::archive::is_acl_record(&x.name);
    if cfg.acls && m.xattrs.iter().any(|x| acl(&x)) {
        return "+";
    }
    let restored = |f: &crate::metadata::xattrs::XattrFilter| {
        m.xattrs.iter().any(|x| !acl(&x) && f.wants(&x.name))
    };
    if cfg.xattrs.as_ref().is_some_and(restored) { "*" } else { " " }
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
