//! GNU tar 1.34 as the oracle, as case tables (in the manner of Go's archive/tar, whose tests
//! are tables of vectors run by one loop): a `Case` is one row (the archive, the arguments, the
//! environment, how DEST is prepared, what is compared) and `differences` runs it through both
//! programs and says every way they differ. A suite's comparison is a table of rows and one
//! call: `check(&td, &cases)`.
//!
//! Arguments are given once for both programs: `{archive}` stands for the row's archive and
//! `{dest}` for a fresh destination of each program's own (DEST appears masked as `{dest}` in
//! what is compared). GNU tar runs with `TAR_OPTIONS` empty unless the row sets it, and
//! fastuntar with the row's `ours_only` flags besides (the matrix's writer rows: GNU tar has
//! none of them), under every run of `over` when the row names a matrix (GNU tar once).

use std::borrow::Borrow;
use std::path::{Path, PathBuf};

use super::engine::{Encoding, Matrix};
use super::snapshot::{Compare, diff, snapshot};
use super::{Cmd, Input, Output, TestDir, fastuntar, have_tools};

/// What stderr says that is compared: the lines a normalizer keeps, given the program's name
/// as it prefixes its lines (`tar`, `fastuntar`).
pub type Said = fn(&Output, &str) -> Vec<String>;

/// One row of a table.
#[derive(Clone)]
pub struct Case<'a> {
    /// The archive `{archive}` stands for.
    pub archive: PathBuf,
    /// The arguments, the same for both programs (with `{archive}` and `{dest}`).
    pub args: Vec<String>,
    /// Environment variables for both (`TAR_OPTIONS`, `LC_ALL`, `TZ`); LC_ALL is C otherwise.
    pub env: Vec<(&'a str, &'a str)>,
    /// Fills each program's destination before its run.
    pub prepare: Option<&'a dyn Fn(&Path)>,
    /// Standard input for both: bytes on a pipe, or a file (which a program may seek).
    pub stdin: Option<Stdin>,
    /// Run in the destination (GNU tar puts what `-K` selects in its working directory, and
    /// makes `-G`'s temporary directory there); else in the test directory.
    pub in_dest: bool,
    /// Added to fastuntar's arguments only.
    pub ours_only: Vec<&'static str>,
    /// fastuntar under every run of this matrix (a table's writer rows), GNU tar once.
    pub over: Option<&'a Matrix>,
    /// fastuntar's exit status must be this one (besides GNU tar's, when `exit` compares it).
    pub code: Option<i32>,
    /// Compared: the exit status, stdout, the trees (and the files' mtimes in them), what
    /// stderr says (`said`).
    pub exit: bool,
    pub stdout: bool,
    pub tree: bool,
    pub file_times: bool,
    pub said: Option<Said>,
}

impl<'a> Case<'a> {
    /// A row comparing exit status, stdout and tree.
    pub fn new<S: AsRef<str>>(archive: &Path, args: &[S]) -> Case<'a> {
        Case {
            archive: archive.to_path_buf(),
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            env: Vec::new(),
            prepare: None,
            stdin: None,
            in_dest: false,
            ours_only: Vec::new(),
            over: None,
            code: None,
            exit: true,
            stdout: true,
            tree: true,
            file_times: true,
            said: None,
        }
    }

    /// `FLAGS -xf ARCHIVE OPERANDS` into `-C {dest}` (given first: GNU tar applies a -C to the
    /// names after it, -T's included), comparing exit status, tree and `said`, not stdout.
    pub fn extract(archive: &Path, flags: &[&str], operands: &[&str]) -> Case<'a> {
        let args: Vec<&str> = ["-C", "{dest}"]
            .into_iter()
            .chain(flags.iter().copied())
            .chain(["-xf", "{archive}"])
            .chain(operands.iter().copied())
            .collect();
        Case { stdout: false, ..Case::new(archive, &args) }
    }

    /// `FLAGS -f ARCHIVE -C {dest}` (FLAGS say what to do: `-x`, `-tv`, `-xvv`): exit status,
    /// stdout and tree.
    pub fn flags(archive: &Path, flags: &[&str]) -> Case<'a> {
        let args: Vec<&str> =
            flags.iter().copied().chain(["-f", "{archive}", "-C", "{dest}"]).collect();
        Case::new(archive, &args)
    }

    /// `FLAGS -tf ARCHIVE OPERANDS`: exit status and listing.
    pub fn list(archive: &Path, flags: &[&str], operands: &[&str]) -> Case<'a> {
        let args: Vec<&str> = flags
            .iter()
            .copied()
            .chain(["-tf", "{archive}"])
            .chain(operands.iter().copied())
            .collect();
        Case { tree: false, ..Case::new(archive, &args) }
    }

    pub fn env(mut self, key: &'a str, value: &'a str) -> Self {
        self.env.push((key, value));
        self
    }

    pub fn prepare(mut self, prepare: &'a dyn Fn(&Path)) -> Self {
        self.prepare = Some(prepare);
        self
    }

    pub fn stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(Stdin::Bytes(bytes));
        self
    }

    /// Standard input for both from the file `path` (a regular file, not a pipe).
    pub fn stdin_file(mut self, path: &Path) -> Self {
        self.stdin = Some(Stdin::File(path.to_path_buf()));
        self
    }

    /// fastuntar must exit `code` (GNU tar's status is compared as the row says).
    pub fn code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    pub fn in_dest(mut self) -> Self {
        self.in_dest = true;
        self
    }

    pub fn ours_only(mut self, flags: &[&'static str]) -> Self {
        self.ours_only.extend_from_slice(flags);
        self
    }

    pub fn over(mut self, matrix: &'a Matrix) -> Self {
        self.over = Some(matrix);
        self
    }

    pub fn said(mut self, said: Said) -> Self {
        self.said = Some(said);
        self
    }

    /// Trees are compared without the files' mtimes (`-m`: the time of extraction).
    pub fn without_file_times(mut self) -> Self {
        self.file_times = false;
        self
    }

    /// Only what `said` keeps and the exit status are compared.
    pub fn only_said(self, said: Said) -> Self {
        Case { stdout: false, tree: false, ..self.said(said) }
    }

    /// Only the exit status and what `said` keeps are compared (not the trees: with `-m` files
    /// get the time they were made).
    pub fn only_said_and_exit(self) -> Self {
        Case { stdout: false, tree: false, ..self }
    }

    /// Only the exit status and stdout are compared.
    pub fn only_stdout(self) -> Self {
        Case { tree: false, ..self }
    }

    /// The exit status and what `said` keeps are not compared with GNU tar's.
    pub fn no_exit(self) -> Self {
        Case { exit: false, ..self }
    }

    /// How a failure names the row: its environment, archive and arguments.
    pub fn label(&self) -> String {
        let env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v:?} ")).collect();
        let name = self.archive.file_name().unwrap_or_default().to_string_lossy();
        format!("{}{name}: {:?} {:?}", env.concat(), self.args, self.ours_only)
    }
}

/// Standard input of a row.
#[derive(Clone)]
pub enum Stdin {
    /// Written to a pipe.
    Bytes(Vec<u8>),
    /// The file itself.
    File(PathBuf),
}

/// What one program did with a row.
pub struct Ran {
    pub out: Output,
    pub dest: PathBuf,
}

/// Runs `case` with `prog` (GNU tar's or fastuntar's command, `extra` after its arguments).
pub fn run(td: &TestDir, case: &Case, mut cmd: Cmd, prefix: &str, extra: &[&str]) -> Ran {
    let dest = td.fresh(prefix);
    if let Some(prepare) = case.prepare {
        prepare(&dest);
    }
    for a in &case.args {
        let a = a
            .replace("{dest}", dest.to_str().unwrap())
            .replace("{archive}", case.archive.to_str().unwrap());
        cmd.arg(a);
    }
    cmd.args(extra).env("TAR_OPTIONS", "");
    for (k, v) in &case.env {
        cmd.env(k, v);
    }
    cmd.current_dir(if case.in_dest { &dest } else { td.path() });
    match &case.stdin {
        Some(Stdin::Bytes(bytes)) => cmd.stdin(Input::Bytes(bytes.clone())),
        Some(Stdin::File(path)) => cmd.stdin(Input::File(path.clone())),
        None => &mut cmd,
    };
    Ran { out: cmd.run(), dest }
}

/// How `ours` differs from `gnu` under `case`, one line each, labelled.
pub fn compare(td: &TestDir, case: &Case, gnu: &Ran, ours: &Ran, row: &str) -> Vec<String> {
    let label = format!("{}{row}", case.label());
    let mut out = Vec::new();
    if let Some(code) = case.code.filter(|&c| ours.out.code != Some(c)) {
        out.push(format!(
            "{label}: exit {:?}, want {code}\n{}",
            ours.out.code,
            ours.out.describe()
        ));
    }
    if case.exit && gnu.out.code != ours.out.code {
        out.push(format!(
            "{label}: exit {:?}, GNU tar {:?}\n{}\n--- GNU tar's stderr ---\n{}",
            ours.out.code,
            gnu.out.code,
            ours.out.describe(),
            gnu.out.stderr_str()
        ));
    }
    let shown = |r: &Ran| r.out.stdout_str().replace(r.dest.to_str().unwrap(), "{dest}");
    if case.stdout && shown(gnu) != shown(ours) {
        out.push(format!(
            "{label}: stdout differs\n--- GNU tar ---\n{}--- fastuntar ---\n{}",
            shown(gnu),
            shown(ours)
        ));
    }
    if let Some(said) = case.said {
        let (g, o) = (said(&gnu.out, "tar"), said(&ours.out, "fastuntar"));
        if g != o {
            out.push(format!("{label}: said {o:?}, GNU tar {g:?}"));
        }
    }
    if case.tree {
        let cmp = Compare::extraction(td.started);
        let mut d = diff(&snapshot(&gnu.dest), "GNU tar", &snapshot(&ours.dest), "fastuntar", &cmp);
        d.retain(|line| case.file_times || !line.contains(": mtime "));
        if !d.is_empty() {
            out.push(format!("{label}: trees differ:\n    {}", d.join("\n    ")));
        }
    }
    out
}

/// What both programs did with a row run once each, and every way they differ (for a row
/// whose runs a test checks further than the comparison).
pub struct Both {
    pub gnu: Ran,
    pub ours: Ran,
    pub differences: Vec<String>,
}

/// Runs `case` (a row without a matrix) once with each program.
pub fn both(td: &TestDir, case: &Case) -> Both {
    assert!(
        case.over.is_none(),
        "{}: gnu::both runs a row once; `differences` runs a matrix",
        case.label()
    );
    let gnu = run(td, case, Cmd::new("tar"), "gnu", &[]);
    let ours = run(td, case, fastuntar(), "ours", &case.ours_only);
    let differences = compare(td, case, &gnu, &ours, "");
    Both { gnu, ours, differences }
}

/// Every way fastuntar differs from GNU tar on `case` (under each run of its matrix).
pub fn differences(td: &TestDir, case: &Case) -> Vec<String> {
    let Some(matrix) = case.over else {
        return both(td, case).differences;
    };
    let gnu = run(td, case, Cmd::new("tar"), "gnu", &[]);
    let mut out = Vec::new();
    for r in super::engine::runs(&case.label(), matrix, &[Encoding::Plain]) {
        let ours = run(td, case, r.cmd(), "ours", &case.ours_only);
        out.extend(compare(td, case, &gnu, &ours, &format!(" [{}]", r.name())));
    }
    out
}

/// Runs every row of `cases` (a table, or an iterator making its rows); fails naming every
/// difference.
pub fn check<'a>(td: &TestDir, cases: impl IntoIterator<Item = impl Borrow<Case<'a>>>) {
    let all: Vec<String> = cases.into_iter().flat_map(|c| differences(td, c.borrow())).collect();
    assert_none(&all);
}

/// Runs every row of `cases` after the test's own `failures`; fails naming all of them.
pub fn check_with(td: &TestDir, cases: &[Case], mut failures: Vec<String>) {
    failures.extend(cases.iter().flat_map(|c| differences(td, c)));
    assert_none(&failures);
}

/// Fails with every line of `failures`, if there are any.
pub fn assert_none(failures: &[String]) {
    assert!(failures.is_empty(), "fastuntar differs from GNU tar:\n  {}", failures.join("\n  "));
}

/// A fresh test directory for the comparison `test` when GNU tar and `tools` are installed;
/// otherwise the SKIP lines (a failure under CI) and None.
pub fn dir(test: &str, tools: &[&str]) -> Option<TestDir> {
    let all: Vec<&str> = ["tar"].iter().chain(tools).copied().collect();
    have_tools(test, &all).then(|| TestDir::new(test))
}

/// GNU tar's archive `name` (in the test directory) of `members` of `root`, made with `flags`.
pub fn archive(td: &TestDir, name: &str, flags: &[&str], root: &Path, members: &[&str]) -> PathBuf {
    let archive = td.join(name);
    let out = Cmd::new("tar")
        .args(flags)
        .arg("-C")
        .arg(root)
        .arg("-cf")
        .arg(&archive)
        .args(members)
        .env("TAR_OPTIONS", "")
        .run();
    assert!(out.success(), "{}", out.describe());
    archive
}
