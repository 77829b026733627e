//! The decisions of a resumable run, pure: whether this run may write resume points at all
//! (`eligible`), and what to do with the state file found in DIR (`decide`). The actions
//! (reading the file, opening the archive at the point) are in mod.rs and fsio.rs.

use super::state::{InputId, STATE_NAME, State};

/// `--resume` / `--no-resume` / neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flag {
    /// A state that matches is resumed; without one the run starts from the beginning.
    #[default]
    Auto,
    /// `--resume`: the same (accepted so that a retry loop can say it from the first run on),
    /// but a run that cannot write resume points is refused.
    Resume,
    /// `--no-resume`: any state is removed and none is written.
    Off,
}

/// What this run is, as far as resuming goes (config.rs gathers it from the options).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `-t`, `-O`, `--to-command`: nothing is extracted into a directory.
    pub reads_only: bool,
    /// The archive is standard input, or not a regular file (a FIFO, a device).
    pub not_a_file: Option<&'static str>,
    /// Options whose effect on DIR cannot be done again from a member boundary (the killed
    /// run's half-written files after it would count as existing ones), or that read what
    /// cannot be had again: the first such flag.
    pub refused: Option<&'static str>,
    /// `--writeback-every 0`: nothing is ever synced while extracting.
    pub no_writeback: bool,
}

/// Why a run writes no resume points (None: it does). In the words of the line that says so.
pub fn eligible(o: &Options) -> Option<String> {
    if o.reads_only {
        return Some("nothing is extracted into a directory (-t, -O, --to-command)".into());
    }
    if let Some(what) = o.not_a_file {
        return Some(format!("the archive is {what}, which cannot be read again"));
    }
    if let Some(flag) = o.refused {
        return Some(format!("{flag} cannot be resumed from a member boundary"));
    }
    if o.no_writeback {
        return Some("--writeback-every 0 makes nothing durable while extracting".into());
    }
    None
}

/// The state file DIR holds, as read (fsio.rs).
#[derive(Debug)]
pub enum Found {
    Absent,
    /// Something that is not a state of this DIR's (fsio.rs `look`): a member of an archive
    /// extracted into DIR, someone else's file, another DIR's state. It stops nothing and is
    /// left alone (the reason as the line says it).
    Foreign(String),
    /// A state of this DIR's, not to be used: corrupt, invalid, of another version of the
    /// format (the reason as the line says it).
    Unusable(String),
    Valid(Box<State>),
}

/// What identifies this run, to compare with the state's.
#[derive(Clone, Debug)]
pub struct Here {
    pub program: String,
    pub options: [u8; 32],
    /// DIR's filesystem id and inode.
    pub dest: (u64, u64),
    /// The archive file as it is now (None for a URL: its server says at the resume).
    pub input: Option<InputId>,
    /// The archive is a URL.
    pub url: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// From the beginning; resume points are written unless `off` says why not. `clear`:
    /// the state file there goes first (`--no-resume`). `foreign`: what is at the state's
    /// name is not ours (why): it is left as it is, said once, and no state is written.
    Fresh {
        off: Option<String>,
        clear: bool,
        foreign: Option<String>,
    },
    Resume(Box<State>),
    /// One line, exit 2, nothing written.
    Refuse(String),
}

/// The hint every refusal ends with.
pub const START_OVER: &str = "--no-resume starts over";

/// What a run does, given `flag`, what DIR holds at the state's name, why the run could not
/// write resume points (`eligible`) and what identifies it.
///
/// A file that is not ours stops nothing (issue 40): until then a member named
/// `.fastuntar-resume` made every later run into that DIR stop with exit 2, so a retry loop
/// never ended. `--resume` goes on too: what DIR holds is not the command line's error.
pub fn decide(flag: Flag, found: Found, eligible: Option<String>, here: &Here) -> Plan {
    let refuse = |why: String| Plan::Refuse(format!("{why}; {START_OVER}"));
    let taken = || Some(format!("{} is not a resume state of this directory's", STATE_NAME));
    if flag == Flag::Off {
        return match found {
            Found::Foreign(why) => {
                Plan::Fresh { off: Some("--no-resume".into()), clear: false, foreign: Some(why) }
            }
            _ => Plan::Fresh { off: Some("--no-resume".into()), clear: true, foreign: None },
        };
    }
    let state = match found {
        Found::Absent => {
            return match (flag, eligible) {
                (Flag::Resume, Some(why)) => Plan::Refuse(format!("--resume: {why}")),
                (_, off) => Plan::Fresh { off, clear: false, foreign: None },
            };
        }
        Found::Foreign(why) => {
            return match (flag, eligible) {
                (Flag::Resume, Some(off)) => Plan::Refuse(format!("--resume: {off}")),
                (_, off) => {
                    Plan::Fresh { off: off.or_else(taken), clear: false, foreign: Some(why) }
                }
            };
        }
        Found::Unusable(why) => return refuse(why),
        Found::Valid(state) => state,
    };
    if let Some(why) = eligible {
        return refuse(format!(
            "an interrupted run left a resume point, and this run cannot use it: {why}"
        ));
    }
    if let Some(why) = mismatch(&state, here) {
        return refuse(why);
    }
    Plan::Resume(state)
}

/// Why `state` is not this run's to resume (None: it is, as far as can be told before the
/// archive is opened again; the archive's own check follows, `resume::verify_anchor`).
fn mismatch(state: &State, here: &Here) -> Option<String> {
    if state.program != here.program {
        return Some(format!(
            "the resume point was made by fastuntar {}, this is {}",
            state.program, here.program
        ));
    }
    if state.dest != here.dest {
        return Some("the resume point was made in another directory".into());
    }
    match (&state.input, &here.input, here.url) {
        (InputId::File(_), _, true) | (InputId::Url { .. }, _, false) => {
            return Some("the resume point was made from another archive".into());
        }
        (InputId::File(was), Some(InputId::File(is)), false) if was != is => {
            return Some(format!(
                "the archive changed since the interrupted run ({})",
                changed(was, is)
            ));
        }
        _ => {}
    }
    if state.options != here.options {
        return Some(
            "the options that decide what is extracted are not the interrupted run's \
             (MEMBERs, --exclude, --transform, --strip-components, --snapshot, --spread, limits, ...)"
                .into(),
        );
    }
    None
}

/// Which of a file's identity fields differ, for the line.
fn changed(was: &crate::decode::FileId, is: &crate::decode::FileId) -> String {
    let mut what = Vec::new();
    if was.size != is.size {
        what.push("size");
    }
    if was.mtime_ns != is.mtime_ns {
        what.push("mtime");
    }
    // Alone: written in place (or moved, chmod'ed) with size and mtime as they were.
    if was.ctime_ns != is.ctime_ns {
        what.push("ctime");
    }
    if (was.fsid, was.ino) != (is.fsid, is.ino) {
        what.push("inode");
    }
    format!("its {} differ", what.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::state::tests::sample;
    use super::*;
    use crate::decode::FileId;

    fn here(s: &State) -> Here {
        Here {
            program: s.program.clone(),
            options: s.options,
            dest: s.dest,
            input: Some(s.input.clone()),
            url: false,
        }
    }

    fn valid(s: &State) -> Found {
        Found::Valid(Box::new(s.clone()))
    }

    #[test]
    fn without_a_state_the_run_starts_from_the_beginning() {
        let s = sample();
        let h = here(&s);
        assert_eq!(
            decide(Flag::Auto, Found::Absent, None, &h),
            Plan::Fresh { off: None, clear: false, foreign: None }
        );
        assert_eq!(
            decide(Flag::Resume, Found::Absent, None, &h),
            Plan::Fresh { off: None, clear: false, foreign: None }
        );
        let why = Some("stdin".to_string());
        assert_eq!(
            decide(Flag::Auto, Found::Absent, why.clone(), &h),
            Plan::Fresh { off: why.clone(), clear: false, foreign: None }
        );
        assert!(matches!(decide(Flag::Resume, Found::Absent, why, &h), Plan::Refuse(_)));
    }

    #[test]
    fn a_matching_state_resumes_with_or_without_the_flag() {
        let s = sample();
        for flag in [Flag::Auto, Flag::Resume] {
            assert_eq!(decide(flag, valid(&s), None, &here(&s)), Plan::Resume(Box::new(s.clone())));
        }
        assert_eq!(
            decide(Flag::Off, valid(&s), None, &here(&s)),
            Plan::Fresh { off: Some("--no-resume".into()), clear: true, foreign: None }
        );
    }

    /// A file that is not a state of this DIR's stops no run, with or without `--resume`:
    /// it is left as it is (never cleared, even by `--no-resume`) and no state is written.
    #[test]
    fn a_file_not_ours_stops_nothing() {
        let s = sample();
        let h = here(&s);
        let foreign = || Found::Foreign("a member".into());
        for flag in [Flag::Auto, Flag::Resume] {
            match decide(flag, foreign(), None, &h) {
                Plan::Fresh { off: Some(off), clear: false, foreign: Some(w) } => {
                    assert!(off.contains(STATE_NAME) && w == "a member", "{off}");
                }
                p => panic!("{flag:?}: {p:?}"),
            }
        }
        assert_eq!(
            decide(Flag::Off, foreign(), None, &h),
            Plan::Fresh {
                off: Some("--no-resume".into()),
                clear: false,
                foreign: Some("a member".into())
            }
        );
        let why = Some("stdin".to_string());
        assert!(matches!(decide(Flag::Resume, foreign(), why, &h), Plan::Refuse(_)));
    }

    #[test]
    fn anything_else_is_refused_with_the_way_out() {
        let s = sample();
        let refused = |p: Plan, what: &str| match p {
            Plan::Refuse(line) => {
                assert!(line.contains(what) && line.ends_with(START_OVER), "{line}");
                assert!(!line.contains('\n'));
            }
            p => panic!("{p:?}"),
        };
        let mut h = here(&s);
        h.options = [0; 32];
        refused(decide(Flag::Auto, valid(&s), None, &h), "options");
        let mut h = here(&s);
        let id = FileId { fsid: 1, ino: 2, size: 5, mtime_ns: -5, ctime_ns: 6 };
        h.input = Some(InputId::File(id));
        refused(decide(Flag::Auto, valid(&s), None, &h), "its size differ");
        let mut h = here(&s);
        h.input = Some(InputId::File(FileId { size: 1 << 30, ctime_ns: 7, ..id }));
        refused(decide(Flag::Auto, valid(&s), None, &h), "its ctime differ");
        let mut h = here(&s);
        h.url = true;
        refused(decide(Flag::Auto, valid(&s), None, &h), "another archive");
        let mut h = here(&s);
        h.dest = (0, 0);
        refused(decide(Flag::Auto, valid(&s), None, &h), "another directory");
        let mut h = here(&s);
        h.program = "9.9.9".into();
        refused(decide(Flag::Resume, valid(&s), None, &h), "made by fastuntar");
        refused(decide(Flag::Auto, Found::Unusable("corrupt".into()), None, &here(&s)), "corrupt");
        let why = Some("-k cannot be resumed".to_string());
        refused(decide(Flag::Auto, valid(&s), why, &here(&s)), "-k cannot");
    }

    #[test]
    fn eligibility() {
        assert_eq!(eligible(&Options::default()), None);
        let o = Options { reads_only: true, ..Options::default() };
        assert!(eligible(&o).is_some_and(|w| w.contains("-t")));
        let o = Options { not_a_file: Some("standard input"), ..Options::default() };
        assert!(eligible(&o).is_some_and(|w| w.contains("standard input")));
        let o = Options { refused: Some("--backup"), ..Options::default() };
        assert!(eligible(&o).is_some_and(|w| w.starts_with("--backup")));
        let o = Options { no_writeback: true, ..Options::default() };
        assert!(eligible(&o).is_some());
    }
}
