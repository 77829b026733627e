//! The archive as every command reads it (`-x`, `-t`, `-O`): the member loop they share, with
//! the reader's options set, the members chosen, their names transformed, and the checks at
//! the archive's end.

use std::io;
use std::sync::Arc;

use anyhow::{Result, anyhow};

use crate::archive::{Kind, Member, Reader, Skip};
use crate::decode;
use crate::report::Reporter;
use crate::report::checkpoint::{Header, Observer};
use crate::report::locale::utf8_locale;
use crate::selection::select::Wanted;
use crate::selection::transform::{NameKind, Transforms};

/// How the archive is read, as the run's options fixed it (options/mod.rs `read_plan`).
#[derive(Debug, Clone)]
pub struct ReadPlan {
    /// `-i`: read past zero blocks.
    pub ignore_zeros: bool,
    /// `-R`: the reader keeps each member's block number.
    pub block_numbers: bool,
    /// `--pax-option delete=PATTERN`s: PAX keywords the reader skips.
    pub pax_delete: Vec<std::ffi::CString>,
    /// Extended attributes are kept (extracting with `--xattrs` or `--acls`, and `-tv`'s mark).
    pub xattrs: bool,
    /// `-G`'s directory lists are kept (to purge by, or to show with `-t -vv`).
    pub dumpdirs: bool,
    /// `--show-omitted-dirs`: each directory member not wanted is named ("Omitting").
    pub show_omitted_dirs: bool,
    /// `--transform` expressions (the selection plan's), applied to wanted members.
    pub transforms: Arc<Transforms>,
    /// `-V PATTERN`: the archive's volume label must match.
    pub label: Option<String>,
    /// `--checkpoint`: set up as the archive is opened.
    pub checkpoint: Option<crate::report::checkpoint::CheckpointPlan>,
    /// The warning classes `--warning` left on (the lone zero block's).
    pub warnings: crate::report::Warnings,
}

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
    /// `--keep-archive`'s copy is named by the caller once its writers are done
    /// (`Download::keep_copy`), not by `finish`: extraction, where members land in DIR after
    /// the reader has finished.
    pub copy_named_later: bool,
    /// A member read and given back (`unread`): the next one `next_member` returns.
    unread: Option<Member>,
    /// `--checkpoint`: told where the reader has got to, here after each header and by the
    /// data loops (extract.rs, to_stdout.rs) after each chunk. None: checkpoints are off.
    pub checkpoints: Option<Observer>,
    /// The warning classes `--warning` left on.
    warnings: crate::report::Warnings,
    /// What the reading says and counts (the run's).
    report: Arc<Reporter>,
}

/// Opens the archive and starts its decoder for a stage that only reads it.
pub fn open(
    source: &decode::plan::InputPlan,
    selection: &crate::selection::plan::SelectionPlan,
    plan: &ReadPlan,
    report: &Arc<Reporter>,
) -> Result<Reading> {
    let input = decode::open_input(source, false)?;
    let wanted = Wanted::new(selection)?;
    // Decoded frames wait in a pool of all of --memory, nothing else needing it (it is only
    // touched where frames are decoded ahead, so a single-frame archive costs no memory).
    let pools = source.pools(input.workers(source.threads))?;
    let threads = input.threads(source.threads, pools, source.budget.explicit)?;
    let decoded = input.decode(threads)?;
    let download = decoded.download.clone();
    let mut reading = Reading::new(plan, decoded.reader, decoded.trailer, wanted, report.clone());
    reading.download = download;
    Ok(reading)
}

impl Reading {
    /// The decoded stream `input` read as a tar archive, with `-i`, and the attributes kept
    /// only when extracting with `--xattrs` (`-t` and `-O` show none).
    pub fn new(
        plan: &ReadPlan,
        input: Box<dyn Skip + Send>,
        trailer: Option<decode::Trailer>,
        wanted: Wanted,
        report: Arc<Reporter>,
    ) -> Reading {
        Reading::with_reader(plan, Reader::new(input), (trailer, wanted), report)
    }

    /// A resumed run's archive (src/resume/): `reader` begins at the resume point. The
    /// volume label was checked by the interrupted run, and `--checkpoint` counts from there.
    pub fn resumed(
        plan: &ReadPlan,
        reader: Reader<Box<dyn Skip + Send>>,
        trailer: Option<decode::Trailer>,
        wanted: Wanted,
        report: Arc<Reporter>,
    ) -> Reading {
        let at = reader.offset();
        let mut r = Reading::with_reader(plan, reader, (trailer, wanted), report);
        r.label = None;
        if let Some(c) = &mut r.checkpoints {
            c.skip_to(at);
        }
        r
    }

    fn with_reader(
        plan: &ReadPlan,
        mut reader: Reader<Box<dyn Skip + Send>>,
        (trailer, wanted): (Option<decode::Trailer>, Wanted),
        report: Arc<Reporter>,
    ) -> Reading {
        reader.ignore_zeros(plan.ignore_zeros);
        reader.block_numbers(plan.block_numbers);
        reader.pax_delete(plan.pax_delete.clone());
        reader.xattrs(plan.xattrs);
        reader.dumpdirs(plan.dumpdirs);
        let checkpoints =
            plan.checkpoint.as_ref().map(|c| Observer::start(c, trailer.is_some(), report.clone()));
        let transforms = plan.transforms.clone();
        let show_omitted_dirs = plan.show_omitted_dirs;
        let label = plan.label.clone();
        Reading {
            reader,
            trailer,
            wanted,
            ended_early: false,
            transforms,
            show_omitted_dirs,
            label,
            download: None,
            copy_named_later: false,
            unread: None,
            checkpoints,
            warnings: plan.warnings,
            report,
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
            for (name, what) in self.reader.take_failures() {
                self.report.failed(&name, what);
            }
            if let Some(c) = &mut self.checkpoints {
                c.headers_read(before, self.reader.offset(), header_of(&m));
            }
            m?
        };
        if let Some(pattern) = self.label.take() {
            check_label(&pattern, self.reader.first_label())?;
        }
        if m.is_none() {
            self.report.archive_ends_at(self.reader.offset());
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
            self.warnings.warn(&self.report, crate::report::Warning::AloneZeroBlock, what);
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
            let name = crate::report::printable(&m.name[..end]);
            self.report.warn(format!("{name}: Omitting"));
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
    /// and checksum are checked (`verify_trailer`), then reports the MEMBER operands
    /// that selected nothing.
    pub fn finish(self, utf8: bool) -> Result<()> {
        if let Some(trailer) = self.trailer
            && !self.ended_early
        {
            verify_trailer(self.reader, &trailer)?;
        }
        if let Some(d) = &self.download
            && !self.ended_early
        {
            d.finish()?;
            if !self.copy_named_later {
                d.keep_copy()?;
            }
        }
        self.wanted.report_not_found(utf8, &self.report);
        Ok(())
    }
}

/// What a header read found, as checkpoints count it: a member with the bytes of data GNU tar
/// would pass over if it did not read them (a file's size, a sparse file's stored segments;
/// None for members without data), the end, or a failure.
fn header_of(got: &Result<Option<Member>>) -> Header {
    match got {
        Ok(Some(m)) => Header::Member {
            data: match (m.kind, &m.sparse) {
                (Kind::File | Kind::Other(_), Some(segments)) => {
                    Some(segments.iter().map(|s| s.len).sum())
                }
                (Kind::File | Kind::Other(_), None) => Some(m.size),
                _ => None,
            },
        },
        Ok(None) => Header::End,
        Err(_) => Header::Failed,
    }
}

/// The tar end marker comes before the end of a compressed stream: reads on so the decoder
/// checks the frame's end and checksum and what follows it, as `zstd -d | tar -x` would, but
/// only within a budget (decode.rs TRAILER_DECODED): gigabytes of trailing data are not decoded.
fn verify_trailer<R: Skip>(reader: Reader<R>, trailer: &decode::Trailer) -> Result<()> {
    let end = reader.offset();
    trailer
        .check(reader.into_inner())
        .map_err(|e| anyhow!("archive offset {end}: after the end of the archive: {e}"))
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
