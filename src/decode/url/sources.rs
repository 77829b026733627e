//! The sources of one archive and what makes them one archive (pure).
//!
//! A restore may name several sources for the same archive: the archive operand, then each
//! `--mirror URL` and each line of `--mirrors FILE`. Each is one address (plus, for an S3
//! object, the signer its requests carry: `source.rs`). Before any source's bytes are used:
//! - every source that answered must report the same length (`admit`: different lengths
//!   refuse the run at the start; a source that answers only later, with another length, is
//!   dropped);
//! - each is pinned to its own validator (its ETag, else its Last-Modified), which every
//!   request to it carries as If-Range; a source that cannot be pinned (no validator, no
//!   ranges) is dropped when another can serve pieces;
//! - the first bytes each serves (`SAMPLE` of them) are compared byte for byte with the same
//!   bytes from the reference, the first source that could be pinned (`compare`).
//!
//! A source is dropped with one line naming it and why; the run goes on with the rest.

/// Bytes every source is first asked for, and compared on: the first request to each source
/// is `Range: bytes=FROM-(FROM+SAMPLE-1)`, whose answer gives the length and the validator,
/// and whose bytes are the sample. 64 KiB: a round trip's worth on a fast link, and far more
/// than the headers that tell two archives apart (a zstd frame header, the first tar header).
pub const SAMPLE: u64 = 64 << 10;

/// `--mirrors FILE`'s text: one URL a line; blank lines and lines starting with `#` (after
/// leading blanks) are passed over, and so is what follows ` #` on a line (snapshot finders
/// annotate their lists). Err names the first line that is not an http(s) URL.
pub fn parse_list(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = match line.find(" #") {
            Some(k) => &line[..k],
            None => line,
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !super::is_url(line.as_ref()) {
            return Err(format!("line {}: not an http://, https:// or s3:// URL: {line:?}", i + 1));
        }
        out.push(line.to_string());
    }
    Ok(out)
}

/// The sources in order, the archive first, each address once (a mirror listed twice, or
/// the archive listed again as a mirror, is one source).
pub fn in_order(archive: &str, mirrors: &[String]) -> Vec<String> {
    let mut out: Vec<String> = vec![archive.to_string()];
    for m in mirrors {
        if !out.contains(m) {
            out.push(m.clone());
        }
    }
    out
}

/// What a source's first answer showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not answered yet.
    Pending,
    /// 206 to a range, with the archive's length; `pinned`: a validator If-Range can carry.
    Ranges { length: u64, pinned: bool },
    /// The whole file (200), of this length if it said.
    Whole { length: Option<u64> },
    /// Failed for good (the text says why: a 404, a refused connection, retries spent).
    Failed(String),
}

/// How the archive is fetched, once the first answers are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In pieces, from every source that serves pinned ranges.
    Pieces,
    /// One source read from its start to its end, as a file on a pipe.
    Whole,
}

/// What the first answers decide: the mode, the reference (the source the others are
/// compared with, and the identity a resumed run expects), and the sources dropped, each with
/// its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    pub mode: Mode,
    pub reference: usize,
    pub length: Option<u64>,
    pub dropped: Vec<(usize, String)>,
}

/// Why a source without ranges is not used when others serve pieces.
pub const NO_RANGES: &str = "answers no ranges (200 to a Range request), so it cannot serve \
                             pieces beside the other sources";
/// Why a source without a validator is not used when others serve pieces.
pub const NO_VALIDATOR: &str = "gives neither an ETag nor a Last-Modified, so its pieces \
                                cannot be pinned to one version of the archive";
/// Why the other sources are not used when none serves pinned ranges.
pub const ONE_WHOLE: &str = "no source serves pinned ranges, so one is read whole";

/// Decides from the sources' first answers (in the order given, the archive first; `shown`
/// names them). Err: the line that refuses the run (the lengths differ, or every source
/// failed). Sources still `Pending` are left to join later (`join`).
pub fn admit(seen: &[Seen], shown: &[String]) -> Result<Admission, String> {
    let lengths: Vec<(usize, u64)> = seen
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Seen::Ranges { length, .. } | Seen::Whole { length: Some(length) } => {
                Some((i, *length))
            }
            _ => None,
        })
        .collect();
    if let Some(&(a, la)) = lengths.first()
        && let Some(&(b, lb)) = lengths.iter().find(|(_, l)| *l != la)
    {
        return Err(format!(
            "the sources are not one archive: {} is {la} bytes, {} is {lb} bytes",
            shown[a], shown[b]
        ));
    }
    let failed = |i: usize| match &seen[i] {
        Seen::Failed(why) => Some((i, why.clone())),
        _ => None,
    };
    let pinned = seen.iter().position(|s| matches!(s, Seen::Ranges { pinned: true, .. }));
    if let Some(reference) = pinned {
        let dropped = (0..seen.len())
            .filter_map(|i| match &seen[i] {
                Seen::Ranges { pinned: false, .. } => Some((i, NO_VALIDATOR.to_string())),
                Seen::Whole { .. } => Some((i, NO_RANGES.to_string())),
                _ => failed(i),
            })
            .collect();
        let length = lengths.first().map(|l| l.1);
        return Ok(Admission { mode: Mode::Pieces, reference, length, dropped });
    }
    let answered = seen.iter().position(|s| matches!(s, Seen::Ranges { .. } | Seen::Whole { .. }));
    if let Some(reference) = answered {
        let dropped = (0..seen.len())
            .filter(|&i| i != reference)
            .map(|i| match &seen[i] {
                Seen::Failed(why) => (i, why.clone()),
                _ => (i, ONE_WHOLE.to_string()),
            })
            .collect();
        let length = match &seen[reference] {
            Seen::Ranges { length, .. } => Some(*length),
            Seen::Whole { length } => *length,
            _ => None,
        };
        return Ok(Admission { mode: Mode::Whole, reference, length, dropped });
    }
    if seen.contains(&Seen::Pending) {
        return Err("no source has answered yet".to_string());
    }
    Err(every_source_failed(seen, shown))
}

/// The one line when no source is left: the source's own failure when there is one (as a
/// single URL always said it), else each source and why.
pub fn every_source_failed(seen: &[Seen], shown: &[String]) -> String {
    let why = |s: &Seen| match s {
        Seen::Failed(w) => w.clone(),
        _ => "not used".to_string(),
    };
    if seen.len() == 1 {
        return format!("{}: {}", shown[0], why(&seen[0]));
    }
    let each: Vec<String> =
        seen.iter().zip(shown).map(|(s, name)| format!("{name}: {}", why(s))).collect();
    format!("every source failed: {}", each.join("; "))
}

/// Whether a source that answered after the run started may join it: Ok, or why it is
/// dropped (another length, no pinned ranges).
pub fn join(seen: &Seen, length: Option<u64>) -> Result<(), String> {
    match seen {
        Seen::Ranges { length: l, pinned: true } if Some(*l) == length => Ok(()),
        Seen::Ranges { length: l, .. } | Seen::Whole { length: Some(l) } if Some(*l) != length => {
            Err(format!(
                "is {l} bytes, the archive {} bytes: not the same archive",
                length.map_or("?".to_string(), |l| l.to_string())
            ))
        }
        Seen::Ranges { .. } => Err(NO_VALIDATOR.to_string()),
        Seen::Whole { .. } => Err(NO_RANGES.to_string()),
        Seen::Failed(why) => Err(why.clone()),
        Seen::Pending => Err("has not answered".to_string()),
    }
}

/// Compares a source's sample (bytes from `at`) with the reference's: None when they are the
/// same bytes, else the line that drops the source.
pub fn compare(reference: &[u8], got: &[u8], at: u64, reference_name: &str) -> Option<String> {
    if got.len() != reference.len() {
        return Some(format!(
            "sent {} bytes for the {} bytes from byte {at} that {reference_name} sent",
            got.len(),
            reference.len()
        ));
    }
    let first = reference.iter().zip(got).position(|(a, b)| a != b)?;
    Some(format!(
        "serves other bytes than {reference_name}: byte {} differs, so it is not the same \
         archive",
        at + first as u64
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://m{i}/a")).collect()
    }

    #[test]
    fn mirror_lists_as_snapshot_finders_print_them() {
        let text = "# fastest first\nhttps://a/x.tar.zst\n\n  http://b:8899/x.tar.zst  # 120 MB/s\n\
                    \t# off for now: https://c/x\nHTTPS://D/x\n";
        assert_eq!(
            parse_list(text).unwrap(),
            ["https://a/x.tar.zst", "http://b:8899/x.tar.zst", "HTTPS://D/x"]
        );
        assert_eq!(parse_list("").unwrap(), Vec::<String>::new());
        let e = parse_list("https://a/x\nftp://b/x\n").unwrap_err();
        assert!(e.starts_with("line 2:") && e.contains("ftp://b/x"), "{e}");
        // A fragment is part of the address, not a comment.
        assert_eq!(parse_list("https://a/x#frag").unwrap(), ["https://a/x#frag"]);
        assert_eq!(
            in_order("https://a", &["https://b".into(), "https://a".into(), "https://b".into()]),
            ["https://a", "https://b"]
        );
    }

    /// The first answers, in order (the archive first): the mode, the reference, what is
    /// dropped and why, or the line that refuses the run.
    #[test]
    fn first_answers_decide_mode_reference_and_drops() {
        use Seen::*;
        let r = |length, pinned| Ranges { length, pinned };
        let f = |w: &str| Failed(w.to_string());
        type Want = Result<(Mode, usize, Vec<(usize, &'static str)>), &'static str>;
        let cases: Vec<(&str, Vec<Seen>, Want)> = vec![
            ("one source, ranges", vec![r(10, true)], Ok((Mode::Pieces, 0, vec![]))),
            ("one source, whole", vec![Whole { length: Some(10) }], Ok((Mode::Whole, 0, vec![]))),
            ("one source, no validator", vec![r(10, false)], Ok((Mode::Whole, 0, vec![]))),
            (
                "three agree",
                vec![r(10, true), r(10, true), r(10, true)],
                Ok((Mode::Pieces, 0, vec![])),
            ),
            (
                "the archive 404, mirrors serve",
                vec![f("404 Not Found"), r(10, true), r(10, true)],
                Ok((Mode::Pieces, 1, vec![(0, "404 Not Found")])),
            ),
            (
                "a mirror without ranges is dropped",
                vec![r(10, true), Whole { length: Some(10) }],
                Ok((Mode::Pieces, 0, vec![(1, NO_RANGES)])),
            ),
            (
                "the archive without a validator, a mirror with one",
                vec![r(10, false), r(10, true)],
                Ok((Mode::Pieces, 1, vec![(0, NO_VALIDATOR)])),
            ),
            (
                "none pinned: the first read whole",
                vec![Whole { length: None }, r(10, false)],
                Ok((Mode::Whole, 0, vec![(1, ONE_WHOLE)])),
            ),
            (
                "a slow mirror joins later",
                vec![r(10, true), Pending],
                Ok((Mode::Pieces, 0, vec![])),
            ),
            ("lengths differ", vec![r(10, true), r(11, true)], Err("not one archive")),
            (
                "lengths differ, whole",
                vec![r(10, true), Whole { length: Some(9) }],
                Err("m0/a is 10 bytes, http://m1/a is 9 bytes"),
            ),
            ("every source failed", vec![f("404 Not Found"), f("refused")], Err("every source")),
            ("one source failed", vec![f("404 Not Found")], Err("http://m0/a: 404 Not Found")),
        ];
        for (name, seen, want) in cases {
            let got = admit(&seen, &names(seen.len()));
            match (got, want) {
                (Ok(a), Ok((mode, reference, dropped))) => {
                    assert_eq!((a.mode, a.reference), (mode, reference), "{name}");
                    let d: Vec<(usize, &str)> =
                        a.dropped.iter().map(|(i, w)| (*i, w.as_str())).collect();
                    assert_eq!(d, dropped, "{name}");
                }
                (Err(e), Err(w)) => assert!(e.contains(w), "{name}: {e}"),
                (got, want) => panic!("{name}: {got:?}, want {want:?}"),
            }
        }
        let all = admit(&[f("404 Not Found"), f("cannot connect")], &names(2)).unwrap_err();
        assert_eq!(
            all,
            "every source failed: http://m0/a: 404 Not Found; http://m1/a: cannot connect"
        );
    }

    #[test]
    fn late_sources_join_or_are_dropped() {
        let r = |length, pinned| Seen::Ranges { length, pinned };
        assert_eq!(join(&r(10, true), Some(10)), Ok(()));
        assert!(join(&r(11, true), Some(10)).unwrap_err().contains("not the same archive"));
        assert_eq!(join(&r(10, false), Some(10)).unwrap_err(), NO_VALIDATOR);
        assert_eq!(join(&Seen::Whole { length: Some(10) }, Some(10)).unwrap_err(), NO_RANGES);
        assert!(join(&Seen::Whole { length: Some(9) }, Some(10)).is_err());
        assert_eq!(join(&Seen::Failed("404".into()), Some(10)).unwrap_err(), "404");
    }

    #[test]
    fn samples_compared_byte_for_byte() {
        let a = b"0123456789";
        assert_eq!(compare(a, a, 100, "A"), None);
        let e = compare(a, b"0123X56789", 100, "A").unwrap();
        assert!(e.contains("other bytes than A: byte 104 differs"), "{e}");
        assert!(compare(a, b"01234", 100, "A").unwrap().contains("sent 5 bytes for the 10"));
    }
}
