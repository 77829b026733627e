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
//!
//! A row may also give GNU tar other arguments (a spelling only fastuntar has), later archives
//! extracted into the same DEST (the levels of an incremental dump, each compared), a user
//! both run as, and further checks of the two runs (`also`: attributes, ACLs, a line one of
//! them must print), which is how a row checks that GNU tar's result has what the row is
//! about, so that a fastuntar doing nothing cannot pass.

use std::borrow::Borrow;
use std::path::{Path, PathBuf};

use super::engine::{Encoding, Matrix};
use super::snapshot::{Compare, Snapshot, diff, snapshot};
use super::{Cmd, Input, Output, TestDir, fastuntar, have_tools};

/// What stderr says that is compared: the lines a normalizer keeps, given the program's name
/// as it prefixes its lines (`tar`, `fastuntar`).
pub type Said = fn(&Output, &str) -> Vec<String>;

/// One row of a table.
#[derive(Clone)]
pub struct Case<'a> {
    /// What a failure calls the row besides its archive and arguments.
    pub name: &'a str,
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
    /// GNU tar alone runs in the destination, and fastuntar gets `-C {dest}` after the
    /// arguments (GNU tar's `-G` swaps fail with `-C`, TESTING.md F17; ours must not).
    pub gnu_in_dest: bool,
    /// GNU tar's arguments where they are not `args` (a spelling only fastuntar has).
    pub gnu_args: Option<Vec<String>>,
    /// Archives extracted after `archive`, in order, into the same destination with the same
    /// arguments (incremental levels); what each run did is compared.
    pub then: Vec<PathBuf>,
    /// Both run as this (uid, gid) (the test prepares a destination the user may write).
    pub user: Option<(u32, u32)>,
    /// Added to fastuntar's arguments only.
    pub ours_only: Vec<&'static str>,
    /// fastuntar under every run of this matrix (a table's writer rows), GNU tar once.
    pub over: Option<&'a Matrix>,
    /// The encodings fastuntar reads the archive in under `over` (GNU tar reads it plain):
    /// plain unless the row says otherwise.
    pub encodings: &'a [Encoding],
    /// fastuntar's exit status must be this one (besides GNU tar's, when `exit` compares it).
    pub code: Option<i32>,
    /// Compared: the exit status, stdout, the trees (and the files' mtimes in them), what
    /// stderr says (`said`).
    pub exit: bool,
    pub stdout: bool,
    pub tree: bool,
    pub file_times: bool,
    /// Trees are compared with owners (uid, gid), and with DEST's own mode and mtime.
    pub owners: bool,
    pub dest_root: bool,
    pub said: Option<Said>,
    /// Further checks of the two runs (GNU tar's, fastuntar's); what it returns are failures.
    pub also: Option<Also<'a>>,
}

/// A row's further checks of GNU tar's run and fastuntar's: one line a failure.
pub type Also<'a> = &'a dyn Fn(&Ran, &Ran) -> Vec<String>;

impl<'a> Case<'a> {
    /// A row comparing exit status, stdout and tree.
    pub fn new<S: AsRef<str>>(archive: &Path, args: &[S]) -> Case<'a> {
        Case {
            name: "",
            archive: archive.to_path_buf(),
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            env: Vec::new(),
            prepare: None,
            stdin: None,
            in_dest: false,
            gnu_in_dest: false,
            gnu_args: None,
            then: Vec::new(),
            user: None,
            ours_only: Vec::new(),
            over: None,
            encodings: &[Encoding::Plain],
            code: None,
            exit: true,
            stdout: true,
            tree: true,
            file_times: true,
            owners: false,
            dest_root: true,
            said: None,
            also: None,
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

    pub fn named(mut self, name: &'a str) -> Self {
        self.name = name;
        self
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

    /// GNU tar alone runs in DEST; fastuntar gets `-C {dest}` (`gnu_in_dest`).
    pub fn gnu_in_dest(mut self) -> Self {
        self.gnu_in_dest = true;
        self
    }

    /// GNU tar runs `args` instead of the row's (with `{archive}` and `{dest}`).
    pub fn gnu_args<S: AsRef<str>>(mut self, args: &[S]) -> Self {
        self.gnu_args = Some(args.iter().map(|a| a.as_ref().to_string()).collect());
        self
    }

    /// `archives` are extracted after the row's, in order, into the same DEST.
    pub fn then(mut self, archives: &[PathBuf]) -> Self {
        self.then.extend_from_slice(archives);
        self
    }

    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// Trees are compared with owners.
    pub fn owners(mut self) -> Self {
        self.owners = true;
        self
    }

    /// Trees are compared without DEST's own mode and mtime.
    pub fn without_dest_root(mut self) -> Self {
        self.dest_root = false;
        self
    }

    pub fn also(mut self, also: Also<'a>) -> Self {
        self.also = Some(also);
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

    /// fastuntar reads the archive in each of `encodings` under `over` (`engine::Encoding`:
    /// a zstd framing puts the decoder's buffers, and what it lends the writers, in the way).
    pub fn encodings(mut self, encodings: &'a [Encoding]) -> Self {
        self.encodings = encodings;
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

    /// Stdout is not compared.
    pub fn without_stdout(self) -> Self {
        Case { stdout: false, ..self }
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
        let row = if self.name.is_empty() { String::new() } else { format!("{}: ", self.name) };
        let gnu = self.gnu_args.as_ref().map_or(String::new(), |g| format!(" (GNU tar {g:?})"));
        format!("{row}{}{name}: {:?} {:?}{gnu}", env.concat(), self.args, self.ours_only)
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

/// What one program did with a row: its last run, DEST, and for each earlier archive (`then`)
/// its run and the tree it left (when trees are compared).
pub struct Ran {
    pub out: Output,
    pub dest: PathBuf,
    pub levels: Vec<(Output, Option<Snapshot>)>,
}

/// GNU tar's run of `case`.
pub fn run_gnu(td: &TestDir, case: &Case) -> Ran {
    run(td, case, &|| Cmd::new("tar"), true)
}

/// fastuntar's run of `case`, each command made by `cmd` (a matrix run's, or `fastuntar`).
pub fn run_ours(td: &TestDir, case: &Case, cmd: &dyn Fn() -> Cmd) -> Ran {
    run(td, case, cmd, false)
}

fn run(td: &TestDir, case: &Case, make: &dyn Fn() -> Cmd, gnu: bool) -> Ran {
    let dest = td.fresh(if gnu { "gnu" } else { "ours" });
    if let Some(prepare) = case.prepare {
        prepare(&dest);
    }
    let mut args = match (&case.gnu_args, gnu) {
        (Some(g), true) => g.clone(),
        _ => case.args.clone(),
    };
    if !gnu {
        args.extend(case.ours_only.iter().map(|a| a.to_string()));
        if case.gnu_in_dest {
            args.extend(["-C".to_string(), "{dest}".to_string()]);
        }
    }
    let mut levels = Vec::new();
    let mut last = None;
    for archive in std::iter::once(&case.archive).chain(&case.then) {
        if let Some(out) = last.take() {
            levels.push((out, case.tree.then(|| snapshot(&dest))));
        }
        let mut cmd = make();
        for a in &args {
            cmd.arg(
                a.replace("{dest}", dest.to_str().unwrap())
                    .replace("{archive}", archive.to_str().unwrap()),
            );
        }
        cmd.env("TAR_OPTIONS", "");
        for (k, v) in &case.env {
            cmd.env(k, v);
        }
        if let Some((uid, gid)) = case.user {
            cmd.user(uid, gid);
        }
        let in_dest = case.in_dest || (gnu && case.gnu_in_dest);
        cmd.current_dir(if in_dest { &dest } else { td.path() });
        match &case.stdin {
            Some(Stdin::Bytes(bytes)) => cmd.stdin(Input::Bytes(bytes.clone())),
            Some(Stdin::File(path)) => cmd.stdin(Input::File(path.clone())),
            None => &mut cmd,
        };
        last = Some(cmd.run());
    }
    Ran { out: last.expect("a row has an archive"), dest, levels }
}

/// What a run printed on stdout, as compared: DEST masked as `{dest}`, fastuntar's name at
/// the start of a line (`-v`'s "Deleting" lines) as GNU tar's; bytes that are not UTF-8 as
/// they are.
fn shown(out: &Output, dest: &Path) -> Vec<u8> {
    let Ok(s) = std::str::from_utf8(&out.stdout) else { return out.stdout.clone() };
    let s = s.replace(dest.to_str().unwrap(), "{dest}");
    let lines: Vec<&str> = s.split('\n').collect();
    let named =
        |l: &&str| l.strip_prefix("fastuntar: ").map_or(l.to_string(), |r| format!("tar: {r}"));
    lines.iter().map(named).collect::<Vec<_>>().join("\n").into_bytes()
}

/// How `ours` differs from `gnu` under `case`, one line each, labelled.
pub fn compare(td: &TestDir, case: &Case, gnu: &Ran, ours: &Ran, row: &str) -> Vec<String> {
    let label = format!("{}{row}", case.label());
    let mut out = Vec::new();
    let tree = |r: &Ran| case.tree.then(|| snapshot(&r.dest));
    let steps = gnu
        .levels
        .iter()
        .zip(&ours.levels)
        .map(|((go, gt), (oo, ot))| ((go, gt.clone()), (oo, ot.clone())));
    let last = ((&gnu.out, tree(gnu)), (&ours.out, tree(ours)));
    let n = gnu.levels.len();
    for (i, ((go, gt), (oo, ot))) in steps.chain([last]).enumerate() {
        let label = if n == 0 { label.clone() } else { format!("{label} level {i}") };
        let (g, o) = (
            Step { out: go, tree: gt, dest: &gnu.dest },
            Step { out: oo, tree: ot, dest: &ours.dest },
        );
        out.extend(compare_step(td, case, &label, &g, &o));
    }
    if let Some(also) = case.also {
        out.extend(also(gnu, ours).into_iter().map(|l| format!("{label}: {l}")));
    }
    out
}

/// One run of each program on one archive of a row.
struct Step<'r> {
    out: &'r Output,
    tree: Option<Snapshot>,
    dest: &'r Path,
}

fn compare_step(td: &TestDir, case: &Case, label: &str, gnu: &Step, ours: &Step) -> Vec<String> {
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
    let (gs, os) = (shown(gnu.out, gnu.dest), shown(ours.out, ours.dest));
    if case.stdout && gs != os {
        let text = |b: &[u8]| match std::str::from_utf8(b) {
            Ok(s) => s.to_string(),
            Err(_) => format!("({} bytes, not UTF-8)\n", b.len()),
        };
        out.push(format!(
            "{label}: stdout differs\n--- GNU tar ---\n{}--- fastuntar ---\n{}",
            text(&gs),
            text(&os)
        ));
    }
    if let Some(said) = case.said {
        let (g, o) = (said(gnu.out, "tar"), said(ours.out, "fastuntar"));
        if g != o {
            out.push(format!("{label}: said {o:?}, GNU tar {g:?}"));
        }
    }
    if let (Some(g), Some(o)) = (&gnu.tree, &ours.tree) {
        let cmp =
            Compare { owner: case.owners, root: case.dest_root, ..Compare::extraction(td.started) };
        let mut d = diff(g, "GNU tar", o, "fastuntar", &cmp);
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
    let gnu = run_gnu(td, case);
    let ours = run_ours(td, case, &fastuntar);
    let differences = compare(td, case, &gnu, &ours, "");
    Both { gnu, ours, differences }
}

/// Every way fastuntar differs from GNU tar on `case` (under each run of its matrix).
pub fn differences(td: &TestDir, case: &Case) -> Vec<String> {
    let Some(matrix) = case.over else {
        return both(td, case).differences;
    };
    let gnu = run_gnu(td, case);
    let mut out = Vec::new();
    let mut encoded: Vec<(Encoding, PathBuf)> = Vec::new();
    for r in super::engine::runs(&case.label(), matrix, case.encodings) {
        // The archive in the run's encoding, made once per encoding.
        let archive = match encoded.iter().find(|(e, _)| *e == r.encoding) {
            _ if r.encoding == Encoding::Plain => case.archive.clone(),
            Some((_, path)) => path.clone(),
            None => {
                let tar = super::read(&case.archive);
                let name = case.archive.file_name().unwrap_or_default().to_string_lossy();
                let path = td.join(format!("{name}.{}{}", encoded.len(), r.encoding.suffix()));
                std::fs::write(&path, r.encoding.encode(&tar)).unwrap();
                encoded.push((r.encoding, path.clone()));
                path
            }
        };
        let run_case = Case { archive, ..case.clone() };
        let ours = run_ours(td, &run_case, &|| r.cmd());
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

/// What stderr says, as a row's `said` compares it: the diagnostics without the program's
/// name and the closing "Exiting with failure status" line, sorted (several writers report in
/// their own order).
pub fn said_sorted(out: &Output, prog: &str) -> Vec<String> {
    let mut lines: Vec<String> = out
        .diagnostics()
        .iter()
        .map(|l| l.strip_prefix(&format!("{prog}: ")).unwrap_or(l).to_string())
        .filter(|l| !l.starts_with("Exiting with failure status"))
        .collect();
    lines.sort();
    lines
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
