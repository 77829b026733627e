//! Member operands: `fastuntar -xf A.tar src/lib docs/README` extracts (or lists) only the
//! members those names select, with GNU tar 1.34's rules (names.c `namelist_match`, gnulib's
//! `exclude_fnmatch` with EXCLUDE_ANCHORED and FNM_LEADING_DIR):
//!
//! - An operand selects the member of that name and everything under it (`src/lib` selects
//!   `src/lib/a.rs`, not `src/library`). Names are compared as stored: `./src` does not select
//!   `src`, and `/etc` selects only a member stored with its leading `/`. Trailing `/` of an
//!   operand and of a member name are ignored (an empty operand: below).
//! - Without `--wildcards` an operand is a literal string. With it, an operand with wildcards
//!   is a shell pattern matched from the start of the name (`*` and `?` match `/`, `\` escapes).
//! - A member counts for the first operand, in command-line order, that selects it. An operand
//!   that never does, including one that repeats or lies under an earlier one (`src src/a`), is
//!   reported "Not found in archive" at the end and the run exits 2, as GNU tar does.
//!
//! - GNU tar drops its whole name list at the first member when the list starts with an
//!   empty name: a first operand `''` selects everything and the others are forgotten (never
//!   reported); an empty operand anywhere else selects nothing and is not reported.
//! - `-K NAME` (`--starting-file`) is the first operand whatever its place, a literal taken
//!   as given (trailing `/` kept, so `-K dir/` never matches, as in GNU tar), and until it
//!   selects a member no other operand may: the members before that one are skipped.
//!
//! Selection happens before `--exclude` (a named member that is then excluded still counts as
//! found) and before `--strip-components`.

use std::collections::HashMap;

use crate::archive::Timestamp;
use crate::report;
use crate::selection::exclude::{self, Exclude, Pattern, has_wildcards, matched_name, unescape};
use crate::selection::given::Given;

pub struct Select {
    operands: Vec<Operand>,
    /// Index of the first literal operand with each text: a member name and each of its
    /// leading directories is looked up here, so 100,000 names from `-T` cost a few lookups
    /// per member, not 100,000 comparisons.
    literals: HashMap<Vec<u8>, usize>,
    /// Indexes of the operands that are patterns or empty, in order.
    others: Vec<usize>,
    /// `--occurrence=N`: a member is selected only when it is the Nth its operand counts.
    occurrence: u64,
    /// Operands with a name not yet counted often enough (for `all_found` in constant time).
    remaining: usize,
    /// The distinct lengths of the operands' texts: whether a member lies under one of them
    /// depends only on that length (GNU's `ISSLASH (name[cursor->length])`).
    lengths: Vec<usize>,
    /// `-K`: operand 0 has not yet selected a member, so nothing is selected.
    starting: bool,
    /// `--recursion` as the command line leaves it: a member under a directory an operand
    /// selected is not another occurrence of it (GNU tar's global `recursion_option`, not
    /// the switch where the operand stood).
    recursion: bool,
}

struct Operand {
    /// For the report: as given (after unquoting), without trailing `/`, as GNU tar names it.
    text: Vec<u8>,
    /// A literal with pattern characters in it: the report suggests --wildcards.
    hint: bool,
    /// None: a literal (looked up in `literals`).
    pattern: Option<Matcher>,
    /// Members counted for it (GNU tar's found_count).
    found: u64,
}

enum Matcher {
    /// An empty operand other than the first.
    Nothing,
    Pattern(Pattern),
    /// With switches other than the defaults (exclude.rs).
    Flagged(exclude::Matcher),
}

impl Select {
    /// The MEMBER operands, in command-line order (operands.rs); `starting`: `-K`'s NAME;
    /// `occurrence`: `--occurrence`'s N, 0 without it.
    pub fn new(
        operands: &[Given],
        starting: Option<&[u8]>,
        occurrence: u64,
        recursion: bool,
    ) -> Select {
        let mut select = Select {
            operands: Vec::new(),
            literals: HashMap::new(),
            others: Vec::new(),
            occurrence,
            remaining: 0,
            lengths: Vec::new(),
            starting: starting.is_some(),
            recursion,
        };
        let starting = starting.map(|name| Given::new(name, false, true));
        let all: Vec<&Given> = starting.iter().chain(operands).collect();
        // GNU tar's name_match: a list that starts with an empty name selects everything.
        if all.first().is_some_and(|g| g.text.is_empty()) {
            select.starting = false;
            return select;
        }
        for (i, given) in all.into_iter().enumerate() {
            let mut key = given.text.as_slice();
            while key.len() > 1
                && !(select.starting && i == 0)
                && let Some(rest) = key.strip_suffix(b"/")
            {
                key = rest;
            }
            let pattern = if key.is_empty() {
                Some(Matcher::Nothing)
            } else if !given.flags.is_default(true) {
                let trimmed = Given { text: key.to_vec(), ..given.clone() };
                Some(Matcher::Flagged(exclude::Matcher::new(&trimmed, true)))
            } else if given.wildcards && has_wildcards(key) {
                Some(Matcher::Pattern(Pattern::compile(key)))
            } else {
                // fnmatch would take a `\` as an escape even without a wildcard.
                let literal = if given.wildcards { unescape(key) } else { key.to_vec() };
                select.literals.entry(literal).or_insert(i);
                None
            };
            if pattern.is_some() {
                select.others.push(i);
            }
            // -K's NAME is a literal even after --wildcards.
            let hint = !given.wildcards && has_wildcards(key) && !(select.starting && i == 0);
            select.operands.push(Operand { text: key.to_vec(), hint, pattern, found: 0 });
        }
        select.remaining = select.operands.iter().filter(|o| !o.text.is_empty()).count();
        select.lengths =
            select.operands.iter().map(|o| o.text.len()).filter(|&len| len > 0).collect();
        select.lengths.sort_unstable();
        select.lengths.dedup();
        select
    }

    /// Whether the member named `name` (as stored) is selected; the operand that selects it
    /// first is marked found.
    pub fn selects(&mut self, name: &[u8]) -> bool {
        if self.operands.is_empty() {
            return true;
        }
        let name = matched_name(name);
        // The name itself and each leading directory of it.
        let cuts = name.iter().enumerate().filter(|(_, b)| **b == b'/').map(|(i, _)| i);
        let mut first = cuts
            .chain([name.len()])
            .filter_map(|end| self.literals.get(&name[..end]).copied())
            .min();
        for &i in &self.others {
            if first.is_some_and(|f| f < i) {
                break;
            }
            let hit = match &self.operands[i].pattern {
                Some(Matcher::Nothing) => false,
                Some(Matcher::Pattern(p)) => p.matches(name, true),
                Some(Matcher::Flagged(m)) => m.matches(name, true),
                None => false,
            };
            if hit {
                first = Some(i);
                break;
            }
        }
        let Some(i) = first else { return false };
        if self.starting {
            if i != 0 {
                return false;
            }
            self.starting = false;
        }
        // GNU tar's name_match: what lies under a directory already counted is not another
        // occurrence of the name.
        let op = &mut self.operands[i];
        let under = self.recursion && name.get(op.text.len()) == Some(&b'/');
        if !under || op.found == 0 {
            op.found += 1;
            if op.found == self.occurrence.max(1) && !op.text.is_empty() {
                self.remaining -= 1;
            }
        }
        self.occurrence == 0 || op.found == self.occurrence
    }

    /// What a resume point carries of the selection (src/resume/): whether `-K` has not yet
    /// selected a member, and each operand's count, in command-line order.
    pub fn export(&self) -> (bool, Vec<u64>) {
        (self.starting, self.operands.iter().map(|o| o.found).collect())
    }

    /// The counts a resume point carried (`export`); false when they cannot be this
    /// selection's (another number of operands), and nothing is changed then.
    pub fn restore(&mut self, starting: bool, found: &[u64]) -> bool {
        if found.len() != self.operands.len() || (starting && !self.starting) {
            return false;
        }
        self.starting = starting;
        for (o, &f) in self.operands.iter_mut().zip(found) {
            o.found = f;
        }
        let enough = self.occurrence.max(1);
        self.remaining =
            self.operands.iter().filter(|o| !o.text.is_empty() && o.found < enough).count();
        true
    }

    /// Whether the operand was counted often enough (GNU tar's WASFOUND); an empty one is
    /// never reported.
    fn was_found(&self, o: &Operand) -> bool {
        o.text.is_empty() || (o.found > 0 && o.found >= self.occurrence)
    }

    /// With `--occurrence`, after the member named `name`: whether every operand has been
    /// counted often enough and nothing more can be under the member (GNU tar's
    /// `all_names_found`), so the archive need not be read on.
    pub fn all_found(&self, name: &[u8]) -> bool {
        if self.occurrence == 0 || self.operands.is_empty() || name.ends_with(b"/") {
            return false;
        }
        self.remaining == 0 && self.lengths.iter().all(|&len| name.get(len) != Some(&b'/'))
    }

    #[cfg(test)]
    /// The operands no member was counted for (often enough), in order.
    pub fn not_found(&self) -> impl Iterator<Item = &[u8]> {
        self.operands.iter().filter(|o| !self.was_found(o)).map(|o| o.text.as_slice())
    }

    /// At the end of a run that read the whole archive: one error line for each operand that
    /// selected nothing (the run exits 2), with a hint when it would have been a pattern.
    pub fn report_not_found(&self, utf8: bool, to: &report::Reporter) {
        for o in self.operands.iter().filter(|o| !self.was_found(o)) {
            let hint = if o.hint { " (--wildcards would match it as a pattern)" } else { "" };
            let what = if o.found == 0 {
                "Not found in archive"
            } else {
                "Required occurrence not found in archive"
            };
            to.failed(&report::quote(&o.text, utf8), format!("{what}{hint}"));
        }
    }
}

/// Which members a stage wants: those the MEMBER operands select (all, without operands),
/// not older than `-N`'s date and not excluded by `--exclude`. Extraction, `-t` and `-O` all
/// ask this one.
pub struct Wanted {
    select: Select,
    exclude: Exclude,
    newer: Option<Timestamp>,
}

impl Wanted {
    pub fn new(cfg: &super::plan::SelectionPlan) -> anyhow::Result<Wanted> {
        Ok(Wanted {
            select: Select::new(
                &cfg.members,
                cfg.starting_file.as_deref(),
                cfg.occurrence,
                cfg.recursion,
            ),
            exclude: Exclude::new(&cfg.exclude)?,
            newer: cfg.newer,
        })
    }

    /// After a wanted member: whether `--occurrence` found everything it looks for, so the
    /// archive need not be read on.
    pub fn all_found(&self, name: &[u8]) -> bool {
        self.select.all_found(name)
    }

    /// Whether the member named `name` (as stored), last modified at `mtime`, is wanted.
    /// Selection comes first, as in GNU tar's `read_and`: a named member that is then older
    /// than `-N`'s date or excluded still counts as found. As there, only the member's whole
    /// seconds count against the date (a member of 12:00:00.5 is as old as 12:00:00, and
    /// kept for a date of 12:00:00, left out for one of 12:00:00.1).
    pub fn wants(&mut self, name: &[u8], mtime: Timestamp) -> bool {
        self.select.selects(name)
            && self.newer.is_none_or(|date| (mtime.secs, 0) >= (date.secs, date.nanos))
            && !self.exclude.excludes(name)
    }

    /// After the whole archive was read: the operands that selected nothing (exit 2).
    pub fn report_not_found(&self, utf8: bool, to: &report::Reporter) {
        self.select.report_not_found(utf8, to);
    }

    /// The selection's counts, for a resume point (`Select::export`).
    pub fn export(&self) -> (bool, Vec<u64>) {
        self.select.export()
    }

    /// The counts a resume point carried (`Select::restore`).
    pub fn restore(&mut self, starting: bool, found: &[u64]) -> bool {
        self.select.restore(starting, found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed run goes on with the counts of the run it resumes: what was found before the
    /// resume point is not reported missing, what was not still is.
    #[test]
    fn counts_carry_over_a_resume() {
        let mut first = select(&["a", "b", "c"], false);
        assert!(first.selects(b"a/x"));
        assert!(first.selects(b"c"));
        let (starting, found) = first.export();
        assert_eq!(found, [1, 0, 1]);
        let mut resumed = select(&["a", "b", "c"], false);
        assert!(resumed.restore(starting, &found));
        let missing: Vec<&[u8]> = resumed.not_found().collect();
        assert_eq!(missing, [&b"b"[..]]);
        assert!(resumed.selects(b"b"));
        assert_eq!(resumed.not_found().count(), 0);
        // Counts of another selection are refused, and change nothing.
        let mut other = select(&["a", "b"], false);
        assert!(!other.restore(false, &found));
        assert_eq!(other.not_found().count(), 2);
    }

    fn select(operands: &[&str], wildcards: bool) -> Select {
        let ops: Vec<Given> =
            operands.iter().map(|s| Given::new(s.as_bytes(), wildcards, true)).collect();
        Select::new(&ops, None, 0, true)
    }

    fn not_found(s: &Select) -> Vec<String> {
        s.not_found().map(|t| String::from_utf8_lossy(t).into_owned()).collect()
    }

    /// Each case checked with GNU tar 1.34 (`tar -xf t.tar OPERAND`) on an archive of `src/`,
    /// `src/a/`, `src/a/x`, `src/a/sub/`, `src/a/sub/z`, `src/ab`, `src/b/`, `src/b/y`.
    #[test]
    fn literal_operands_select_a_name_and_what_is_under_it() {
        let mut s = select(&["src/a"], false);
        assert!(s.selects(b"src/a/"));
        assert!(s.selects(b"src/a/sub/z"));
        assert!(!s.selects(b"src/ab"));
        assert!(!s.selects(b"src/"));
        assert!(!s.selects(b"./src/a/x"));
        let mut s = select(&["src/a//"], false);
        assert!(s.selects(b"src/a/x"));
        let mut s = select(&["./src/a"], false);
        assert!(s.selects(b"./src/a/x") && !s.selects(b"src/a/x"));
        let mut s = select(&["/tmp/b"], false);
        assert!(s.selects(b"/tmp/b/y") && !s.selects(b"tmp/b/y"));
        for op in ["src//a", "src/a/.", "/", "src/*"] {
            let mut s = select(&[op], false);
            assert!(!s.selects(b"src/a/x"), "{op}");
            assert_eq!(not_found(&s), [op]);
        }
        let mut s = select(&[""], false);
        assert!(s.selects(b"anything/at/all"));
        assert!(not_found(&s).is_empty());
        // Only a first empty name selects everything; elsewhere it selects nothing, unreported.
        let mut s = select(&["", "nope"], false);
        assert!(s.selects(b"src/a/x") && not_found(&s).is_empty());
        let mut s = select(&["src/b", ""], false);
        assert!(!s.selects(b"src/a/x") && s.selects(b"src/b/y"));
        assert!(not_found(&s).is_empty());
    }

    /// A member counts for the first operand that selects it: GNU tar says "Not found" for
    /// `src/a/x` in `tar -xf t.tar src/a src/a/x`, and for the second of two equal operands,
    /// but not for `src/a` in `tar -xf t.tar src/a/x src/a`.
    #[test]
    fn the_first_operand_that_selects_a_member_counts() {
        let mut s = select(&["src/a", "src/a/x", "src/b/y", "src/b/y"], false);
        for name in ["src/a/", "src/a/x", "src/b/y"] {
            assert!(s.selects(name.as_bytes()));
        }
        assert_eq!(not_found(&s), ["src/a/x", "src/b/y"]);
        let mut s = select(&["src/a/x", "src/a"], false);
        for name in ["src/a/", "src/a/x", "src/a/sub/z"] {
            assert!(s.selects(name.as_bytes()));
        }
        assert!(not_found(&s).is_empty());
        // A pattern before a literal takes the member; one after it does not.
        let mut s = select(&["src/*", "src/b/y"], true);
        assert!(s.selects(b"src/b/y"));
        assert_eq!(not_found(&s), ["src/b/y"]);
        let mut s = select(&["src/b/y", "src/*"], true);
        assert!(s.selects(b"src/b/y"));
        assert_eq!(not_found(&s), ["src/*"]);
    }

    /// `--wildcards` (checked with GNU tar 1.34 as above): anchored, `*` and `?` match `/`,
    /// a match selects what is under it.
    #[test]
    fn wildcard_operands_are_anchored_patterns() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("src/*", &["src/a/", "src/a/sub/z", "src/ab"], &["src/", "x/src/a"]),
            ("src/a*", &["src/a/x", "src/ab"], &["src/b/y"]),
            ("*/x", &["src/a/x"], &["src/ab"]),
            ("src/?", &["src/a/sub/z", "src/b/y"], &["src/ab"]),
            ("s*", &["src/", "src/b/y"], &["tmp/s"]),
            ("src/[ab]", &["src/a/x", "src/b/"], &["src/ab"]),
            ("a\\*", &["a*/f"], &["ab"]),
        ];
        for (op, yes, no) in cases {
            let mut s = select(&[op], true);
            for name in *yes {
                assert!(s.selects(name.as_bytes()), "{op} should select {name}");
            }
            for name in *no {
                assert!(!s.selects(name.as_bytes()), "{op} should not select {name}");
            }
        }
        // Without --wildcards the same text is a literal.
        let mut s = select(&["src/*"], false);
        assert!(s.selects(b"src/*") && !s.selects(b"src/a"));
    }

    /// `-K` (checked with GNU tar 1.34 on the archive above): nothing before NAME's first
    /// member, then NAME is the first operand.
    #[test]
    fn starting_file_skips_to_its_member_and_stays_an_operand() {
        let ops = [Given::new(b"src/a", false, true)];
        let mut s = Select::new(&ops, Some(b"src/b"), 0, true);
        assert!(!s.selects(b"src/a/x"), "before -K's member");
        assert!(!s.selects(b"src/ab"));
        assert!(s.selects(b"src/b/") && s.selects(b"src/b/y"));
        assert!(s.selects(b"src/a/sub/z") && !s.selects(b"src/ab"));
        assert!(not_found(&s).is_empty());
        // Taken as given: a trailing `/` is kept, so nothing matches and nothing is selected.
        let mut s = Select::new(&ops, Some(b"src/b/"), 0, true);
        assert!(!s.selects(b"src/b/y") && !s.selects(b"src/a/x"));
        assert_eq!(not_found(&s), ["src/b/", "src/a"]);
        // Empty: everything, and the operands are forgotten.
        let mut s = Select::new(&[Given::new(b"nope", false, true)], Some(b""), 0, true);
        assert!(s.selects(b"x") && not_found(&s).is_empty());
    }

    #[test]
    fn no_operands_select_everything() {
        let mut s = select(&[], false);
        assert!(s.selects(b"x"));
        assert!(not_found(&s).is_empty());
    }
}
