//! GNU tar's incremental archives (`tar -g SNAPSHOT -c`), read with `-G` or `-g FILE`.
//!
//! Such an archive stores, with each directory, the names the directory held when it was
//! archived (a GNU `D` member's data, or a `GNU.dumpdir` PAX record): NUL-ended entries, each
//! a letter and a name, then an empty entry. 'Y' is a name archived this time, 'N' one that was
//! not (unchanged since the previous level), 'D' a directory; 'R' and 'T' name a directory
//! renamed since (from, to), through a temporary directory made where an 'X' says when two
//! names are swapped. Restoring the levels in order with `-G` brings a tree to the state of the
//! last one: before each directory member, its renames are made and whatever the directory
//! holds that its list does not name is removed (`write/purge.rs`), as GNU tar 1.34's
//! `purge_directory` does.
//!
//! This is the decoder side: the list is checked as GNU tar's `dumpdir_ok` checks it and kept
//! as it is (the purge looks up the names the directory holds), and the rename paths are made
//! safe as member names are (`safety.rs`: no `..`, no leading `/`, `--strip-components` and
//! `--one-top-level` applied, where GNU tar takes them as they are written, a leading `/` or
//! `../` removed). The SNAPSHOT file of `-g` is not read when extracting or listing, as in
//! GNU tar.

use crate::policy::safety::{SafePath, Sanitizer, Verdict};

/// A directory's names as an incremental archive (`tar -g`) lists them, checked and made
/// safe by the decoder side (`plan` here), for the writer's purge (write/purge.rs).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dumpdir {
    /// The list as stored (NUL-ended entries, a letter and a name each). Only its 'Y' (in this
    /// archive), 'N' (not in it: unchanged since) and 'D' (a directory) entries are looked up,
    /// by the purge, for the names the directory holds: nothing per entry is allocated, so a
    /// list costs its own size whatever its count of names.
    pub list: Vec<u8>,
    /// Renames of directories to make first, in order.
    pub moves: Vec<Move>,
    /// An 'X' made a temporary directory that no rename used: GNU tar's warning.
    pub unused_temp: bool,
    /// Why the list cannot be used (GNU tar's words): the directory is then not purged, and
    /// this is reported if the directory exists.
    pub malformed: Option<String>,
}

/// One step of a dumpdir's renames.
#[derive(Debug, PartialEq, Eq)]
pub enum Move {
    /// 'X': a temporary directory is made in this directory (the stand-in a swap of two
    /// names goes through).
    TempDir(SafePath),
    /// 'R' then 'T': rename a directory; None is the temporary directory.
    Rename { from: Option<SafePath>, to: Option<SafePath> },
}

/// The entries of a raw list, up to the empty one that ends it (a list cut short ends where
/// its data does; a last entry without its NUL counts).
pub fn entries(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    raw.split(|&b| b == 0).take_while(|e| !e.is_empty())
}

/// Most renames one list may make: GNU tar lists the directories renamed since the last level,
/// a handful; the cap keeps a hostile list of millions of 'R'/'T' pairs (two paths each) from
/// costing gigabytes.
const MAX_MOVES: usize = 1 << 16;

/// Most path components the renames of one run's lists may name together (their 'X', 'R' and
/// 'T' paths, as sanitized). Each rename walks its paths through the writer's record of DIR,
/// at ~84 ns a component named: 15,700 renames of 2,000-level paths (two lists of 60 MB, 13.7
/// KB of .tar.zst) took 5.3 s (issue 27). A bound per list would not do: such lists compress
/// to a few bytes each, and an archive may hold any number. At this many, a run's renames
/// cost ~1.4 s at most; a GNU tar list renames a few directories (at a depth of 20 this
/// allows 400,000 renames).
pub const MAX_RENAME_COMPONENTS: usize = 1 << 24;

/// What the lists of a run may still rename through (MAX_RENAME_COMPONENTS path components).
pub struct RenameBudget {
    left: usize,
}

impl Default for RenameBudget {
    fn default() -> RenameBudget {
        RenameBudget { left: MAX_RENAME_COMPONENTS }
    }
}

/// What `-G` does before the directory member whose list is `raw`: the list (kept as it is)
/// and its renames, or with GNU tar's words why it is malformed (the directory is then not
/// purged; that is reported only if the directory exists, as GNU tar reports it).
/// `budget` is what the run's lists may still rename through: a list whose renames need more
/// is refused (its directory is not purged), and one that is not takes its share.
pub fn plan(raw: Vec<u8>, sanitizer: &mut Sanitizer, budget: &mut RenameBudget) -> Dumpdir {
    let checked = check(&raw).and_then(|unused| Ok((unused, moves(&raw, sanitizer, budget)?)));
    match checked {
        Ok((unused_temp, moves)) => Dumpdir { list: raw, moves, unused_temp, malformed: None },
        Err(why) => Dumpdir { malformed: Some(why), ..Dumpdir::default() },
    }
}

/// The renames of a checked list, their paths made safe; at most MAX_MOVES of them, through at
/// most what is `left` of the run's budget, which they then take.
fn moves(
    raw: &[u8],
    sanitizer: &mut Sanitizer,
    budget: &mut RenameBudget,
) -> Result<Vec<Move>, String> {
    let mut moves = Vec::new();
    let mut from: Option<Option<SafePath>> = None;
    let mut walked = 0;
    let depth = |p: &Option<SafePath>| p.as_ref().map_or(0, |p| p.components().count());
    for e in entries(raw) {
        let (letter, name) = (e[0], &e[1..]);
        match letter {
            // The directory itself may hold the temporary one (an archive of `.`).
            b'X' => {
                let parent = safe(sanitizer, name, 'X', true)?;
                walked += parent.components().count();
                moves.push(Move::TempDir(parent));
            }
            b'R' => {
                let path = optional(sanitizer, name, 'R')?;
                walked += depth(&path);
                from = Some(path);
            }
            b'T' => {
                let to = optional(sanitizer, name, 'T')?;
                walked += depth(&to);
                let from = from.take().ok_or("Malformed dumpdir: 'T' not preceded by 'R'")?;
                moves.push(Move::Rename { from, to });
            }
            _ => {}
        }
        if moves.len() > MAX_MOVES {
            return Err(format!("Malformed dumpdir: more than {MAX_MOVES} renames"));
        }
        if walked > budget.left {
            return Err(format!(
                "not purged: the renames of this archive's lists would go through more than \
                 {MAX_RENAME_COMPONENTS} path components"
            ));
        }
    }
    budget.left -= walked;
    Ok(moves)
}

/// A rename's path, None when empty (the temporary directory).
fn optional(
    sanitizer: &mut Sanitizer,
    name: &[u8],
    letter: char,
) -> Result<Option<SafePath>, String> {
    if name.is_empty() { Ok(None) } else { safe(sanitizer, name, letter, false).map(Some) }
}

/// A path of the list made safe as a member name; DIR itself only where `root` allows it.
fn safe(
    sanitizer: &mut Sanitizer,
    name: &[u8],
    letter: char,
    root: bool,
) -> Result<SafePath, String> {
    let shown = crate::report::printable(name);
    match sanitizer.judge(name) {
        Verdict::Extract(p) if root || !p.is_root() => Ok(p),
        Verdict::Extract(_) | Verdict::Nothing => {
            Err(format!("Malformed dumpdir: '{letter}' names no directory ('{shown}')"))
        }
        Verdict::Refuse(why) => Err(format!("Malformed dumpdir: '{letter}' {shown}: {why}")),
    }
}

/// GNU tar 1.34's `dumpdir_ok`: an 'R' is followed by a 'T', an empty name in either stands
/// for the temporary directory an 'X' made, and there is at most one 'X' at a time. An 'X'
/// never used is only warned about (by the purge): true then.
fn check(raw: &[u8]) -> Result<bool, String> {
    let mut has_tempdir = false;
    let mut expect = None;
    for e in entries(raw) {
        let letter = e[0];
        if let Some(want) = expect
            && letter != want
        {
            // C's "%#3o": octal with a leading 0 (an entry's letter is never NUL).
            let (want, found) = (want as char, format!("0{letter:o}"));
            return Err(format!("Malformed dumpdir: expected '{want}' but found {found}"));
        }
        match letter {
            b'X' if has_tempdir => return Err("Malformed dumpdir: 'X' duplicated".into()),
            b'X' => has_tempdir = true,
            b'R' => {
                if e.len() == 1 {
                    if !has_tempdir {
                        return Err("Malformed dumpdir: empty name in 'R'".into());
                    }
                    has_tempdir = false;
                }
                expect = Some(b'T');
            }
            b'T' => {
                if expect != Some(b'T') {
                    return Err("Malformed dumpdir: 'T' not preceded by 'R'".into());
                }
                if e.len() == 1 && !has_tempdir {
                    return Err("Malformed dumpdir: empty name in 'T'".into());
                }
                expect = None;
            }
            _ => {}
        }
    }
    if let Some(want) = expect {
        return Err(format!(
            "Malformed dumpdir: expected '{}' but found end of data",
            want as char
        ));
    }
    Ok(has_tempdir)
}

/// `-tvvv -G`: the list as GNU tar's `list_dumpdir` prints it after the member's line: an
/// entry a line, its letter, a blank and the name, then an empty line for the empty entry
/// that ends the list. GNU tar prints the names raw; control characters are escaped here
/// (`\033`), so that a hostile list cannot send a terminal escape or forge a line.
pub fn listing(raw: &[u8]) -> Vec<u8> {
    // GNU tar prints up to and including the empty entry (`dumpdir_size`).
    let end = raw.windows(2).position(|w| w == [0, 0]).map_or(raw.len(), |i| i + 2);
    let raw = if raw.first() == Some(&0) { &raw[..1] } else { &raw[..end] };
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 8);
    let mut started = false;
    for &b in raw {
        match b {
            b'Y' | b'N' | b'D' | b'R' | b'T' | b'X' => {
                out.push(b);
                if !started {
                    out.push(b' ');
                    started = true;
                }
            }
            0 => {
                out.push(b'\n');
                started = false;
            }
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(raw: &[u8]) -> Result<Dumpdir, String> {
        let d = plan(raw.to_vec(), &mut Sanitizer::new(0, None), &mut RenameBudget::default());
        match d.malformed {
            Some(why) => Err(why),
            None => Ok(d),
        }
    }

    fn p(s: &str) -> SafePath {
        SafePath(s.into())
    }

    #[test]
    fn renames_in_order_and_the_list_kept() {
        let raw = b"Yb\0Na\0Dc\0Rsrc/c\0Tsrc/c2\0\0";
        let d = plan_of(raw).unwrap();
        assert_eq!(d.list, raw);
        assert_eq!(entries(&d.list).count(), 5);
        assert_eq!(d.moves, [Move::Rename { from: Some(p("src/c")), to: Some(p("src/c2")) }]);
        assert!(!d.unused_temp);
    }

    #[test]
    fn a_swap_goes_through_the_temporary_directory() {
        let d = plan_of(b"Xd\0Rd/a\0T\0Rd/b\0Td/a\0R\0Td/b\0\0").unwrap();
        assert_eq!(
            d.moves,
            [
                Move::TempDir(p("d")),
                Move::Rename { from: Some(p("d/a")), to: None },
                Move::Rename { from: Some(p("d/b")), to: Some(p("d/a")) },
                Move::Rename { from: None, to: Some(p("d/b")) },
            ]
        );
        // At the top of an archive of `.`, the temporary directory is made in DIR itself.
        let d = plan_of(b"X.\0R./a\0T\0R./b\0T./a\0R\0T./b\0\0").unwrap();
        assert_eq!(d.moves[0], Move::TempDir(p("")));
        assert!(plan_of(b"X\0\0").unwrap().unused_temp);
    }

    #[test]
    fn malformed_lists_are_refused_with_gnu_tars_words() {
        for (raw, said) in [
            (&b"Ra\0\0"[..], "expected 'T' but found end of data"),
            (b"Ra\0Yb\0\0", "expected 'T' but found 0131"),
            (b"Ta\0\0", "'T' not preceded by 'R'"),
            (b"R\0Ta\0\0", "empty name in 'R'"),
            (b"Ra\0T\0\0", "empty name in 'T'"),
            (b"Xa\0Xb\0\0", "'X' duplicated"),
            (b"Ra/../../x\0Tb\0\0", "'..'"),
            (b"Ra\0T/\0\0", "names no directory"),
        ] {
            let e = plan_of(raw).unwrap_err();
            assert!(e.starts_with("Malformed dumpdir") && e.contains(said), "{raw:?}: {e}");
        }
        // A list cut short (no final empty entry) is read as far as it goes.
        assert_eq!(entries(b"Ya\0Nb").count(), 2);
        assert!(plan_of(b"").is_ok());
        // Renames to or from DIR itself are not.
        assert!(plan_of(b"R.\0Ta\0\0").unwrap_err().contains("names no directory"));
        let many = b"Ra\0Tb\0".repeat(MAX_MOVES + 1);
        assert!(plan_of(&many).unwrap_err().contains("renames"));
    }

    /// The paths of a run's renames have at most MAX_RENAME_COMPONENTS components in all,
    /// counted as sanitized ('X' parents, 'R' and 'T' paths; the temporary directory's empty
    /// name none), so lists of deep renames are refused before anything is walked, once the
    /// lists before them took the budget. A list refused takes none of it.
    #[test]
    fn deep_renames_are_bounded_per_run() {
        let mut budget = RenameBudget { left: 10_002 };
        let mut plan = |raw: String| {
            let d = plan(raw.into_bytes(), &mut Sanitizer::new(0, None), &mut budget);
            d.malformed.map_or(Ok(d.moves.len()), Err)
        };
        let deep = "a/".repeat(999);
        // 1,000 components each way; a leading `/` and `./` count for nothing.
        let pair = format!("R/./{deep}x\0T{deep}y\0");
        assert_eq!(plan(pair.repeat(2) + "\0"), Ok(2));
        // 6,000 and the temporary directory's parent, 2: the budget is spent.
        assert_eq!(plan(format!("Xa/b\0{}\0", pair.repeat(3))), Ok(4));
        let e = plan(pair.clone() + "\0").unwrap_err();
        assert!(e.contains(&format!("more than {MAX_RENAME_COMPONENTS} path components")), "{e}");
        // A list without renames still passes.
        assert_eq!(plan("Ya\0Db\0\0".into()), Ok(0));
    }

    #[test]
    fn listed_as_gnu_tar_lists_it() {
        assert_eq!(listing(b"Da\0Rsrc/c\0Tsrc/c2\0\0"), b"D a\nR src/c\nT src/c2\n\n");
        assert_eq!(listing(b"\0"), b"\n");
        // Letters inside a name print as they are; a name not starting with one gets no blank.
        assert_eq!(listing(b"YDY\0?Y\0\0"), b"Y DY\n?Y \n\n");
        // A terminal escape or a newline in a name is shown, not sent.
        assert_eq!(listing(b"Ya\x1b[2Jb\nc\0\0"), b"Y a\\033[2Jb\\012c\n\n");
    }
}
