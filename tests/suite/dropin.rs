//! fastuntar in place of `tar -x` in a script (issue 28): the same archive, arguments and
//! environment (`TAR_OPTIONS`) given to GNU tar 1.34 and to fastuntar, each into a fresh
//! destination prepared the same way, and the extracted trees, exit statuses and stdout
//! compared. Stderr is compared only where README says nothing about its wording.

use crate::util;
use crate::util::engine::{Encoding, Matrix, Set, THREADS_ALL, THREADS_ONE_AND_MORE};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use util::gnu;
use util::snapshot::{Compare, diff, snapshot};
use util::{Cmd, Output, TestDir, fastuntar, have_tool};

/// The rows this suite runs over (tests/util/engine.rs): most cases run one fastuntar per
/// comparison (what a script sees: status, stdout, tree, decided before the writers). The
/// cases about the order of what the writers do (`--delay-directory-restore`) run under both
/// backends at one writer and four; `-v --backup`'s Renaming lines also at the default count.
/// No decoder row (plain tars), no limits (a few files).
const WRITER_SHAPES: Matrix = Matrix {
    writers: Some(&["portable", "uring"]),
    compressed: Set::All,
    threads: THREADS_ONE_AND_MORE,
    limits: false,
    decoders: None,
};

/// `-v --backup`'s Renaming order: `WRITER_SHAPES` and the default writer count.
const RENAMING: Matrix = WRITER_SHAPES.threads(THREADS_ALL);

/// `--delay-directory-restore`'s merge of a directory met again and its order of stamps
/// (issue 40, 2): every writer row (each applies the delayed records its own way: one writer,
/// the dispatcher of several, io_uring and portable, direct or not), at one writer and four.
const EVERY_WRITER: Matrix = Matrix {
    writers: None,
    compressed: Set::All,
    threads: THREADS_ONE_AND_MORE,
    limits: false,
    decoders: None,
};

/// One run of each program: `args` with `{dest}` replaced by its destination and `{archive}`
/// by the archive, in the test directory, with `TAR_OPTIONS` set to `tar_options` (empty:
/// none).
struct Case<'a> {
    args: &'a [&'a str],
    tar_options: &'a str,
    /// Fills a destination before the run (called for each).
    prepare: &'a dyn Fn(&Path),
    /// Compare the mtimes of files (not with -m, where they are the extraction's).
    file_times: bool,
    /// Added to fastuntar's arguments only (`--writer-threads`, `--io`: GNU tar has none).
    ours_only: &'a [&'static str],
    /// More environment for both (`VERSION_CONTROL`, `SIMPLE_BACKUP_SUFFIX`).
    env: &'a [(&'a str, &'a str)],
}

impl<'a> Case<'a> {
    fn new(args: &'a [&'a str]) -> Case<'a> {
        let prepare = &|_: &Path| {};
        Case { args, tar_options: "", prepare, file_times: true, ours_only: &[], env: &[] }
    }
}

/// What the two runs gave.
struct Both {
    gnu: Output,
    ours: Output,
    gnu_dest: PathBuf,
    ours_dest: PathBuf,
}

/// `case` on `archive` as a row of the shared kit's table (`util::gnu`).
fn row<'a>(archive: &Path, case: &Case<'a>) -> gnu::Case<'a> {
    let mut row = gnu::Case::new(archive, case.args).env("TAR_OPTIONS", case.tar_options);
    for (key, value) in case.env {
        row = row.env(key, value);
    }
    row.prepare = Some(case.prepare);
    row.file_times = case.file_times;
    row.ours_only = case.ours_only.to_vec();
    row
}

fn run_both(td: &TestDir, archive: &Path, case: &Case) -> Both {
    let row = row(archive, case);
    let gnu = gnu::run_gnu(td, &row);
    let ours = gnu::run_ours(td, &row, &fastuntar);
    Both { gnu: gnu.out, ours: ours.out, gnu_dest: gnu.dest, ours_dest: ours.dest }
}

/// The differences between GNU tar's run and fastuntar's (exit status, stdout, tree), one
/// line each, labelled with the arguments.
fn differences(td: &TestDir, archive: &Path, case: &Case) -> Vec<String> {
    gnu::differences(td, &row(archive, case))
}

fn assert_same(td: &TestDir, archive: &Path, cases: &[Case]) {
    let all: Vec<String> = cases.iter().flat_map(|c| differences(td, archive, c)).collect();
    gnu::assert_none(&all);
}

/// GNU tar's archive `name` of `members` of `root`, made with `flags`.
fn gnu_archive(td: &TestDir, name: &str, flags: &[&str], root: &Path, members: &[&str]) -> PathBuf {
    gnu::archive(td, name, flags, root, members)
}

/// `tree/d/f`, `tree/d/e/g`, `tree/top`, with fixed modes and times; returns `tree`.
fn small_tree(td: &TestDir) -> PathBuf {
    let root = td.join("tree");
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::write(root.join("d/f"), "f\n").unwrap();
    fs::write(root.join("d/e/g"), "g\n").unwrap();
    fs::write(root.join("top"), "top\n").unwrap();
    for (i, rel) in ["d/e/g", "d/f", "top", "d/e", "d"].iter().enumerate() {
        util::tree::set_mtime(&root.join(rel), 1_500_000_000 + i as i64 * 1000, 0);
    }
    fs::set_permissions(root.join("d"), fs::Permissions::from_mode(0o750)).unwrap();
    root
}

use std::os::unix::fs::PermissionsExt;

/// Issue 28, 1: `-H FORMAT` (and `TAR_OPTIONS="-H posix"`) is accepted when reading, as GNU tar
/// accepts it; an unknown FORMAT is refused as there.
#[test]
fn format_option_is_accepted_like_gnu_tar() {
    let Some(td) = util::gnu::dir("format_option_is_accepted_like_gnu_tar", &[]) else { return };
    let root = small_tree(&td);
    let archive = gnu_archive(&td, "a.tar", &["--format=posix"], &root, &["d", "top"]);
    let mut cases: Vec<Case> = Vec::new();
    let formats = ["v7", "oldgnu", "ustar", "gnu", "posix", "pax", "bogus", "star", "POSIX"];
    let args: Vec<[String; 6]> = formats
        .iter()
        .map(|f| {
            ["-x".into(), "-H".into(), f.to_string(), "-f".into(), "{archive}".into(), "-C".into()]
        })
        .collect();
    let args: Vec<Vec<&str>> =
        args.iter().map(|a| a.iter().map(String::as_str).chain(["{dest}"]).collect()).collect();
    cases.extend(args.iter().map(|a| Case::new(a)));
    let more: &[&[&str]] = &[
        &["-xHposix", "-f", "{archive}", "-C", "{dest}"],
        &["--format=gnu", "-xf", "{archive}", "-C", "{dest}"],
        &["-tH", "pax", "-f", "{archive}"],
        &["-tvHbogus", "-f", "{archive}"],
    ];
    cases.extend(more.iter().map(|a| Case::new(a)));
    for opts in ["-H posix", "-Hpax", "--format=posix", "-H bogus"] {
        cases.push(Case { tar_options: opts, ..Case::new(&["-xf", "{archive}", "-C", "{dest}"]) });
        cases.push(Case { tar_options: opts, ..Case::new(&["-tf", "{archive}"]) });
    }
    assert_same(&td, &archive, &cases);
}

/// Issue 28, 2: `-h` is `--dereference`, and when extracting does what GNU tar 1.34 does with
/// it: a symlink to a directory where a directory member lands stays, what is under the member
/// is extracted through it, and the directory it leads to gets the member's mode and time
/// (checked against tar: `--keep-directory-symlink` leaves that directory's metadata as it
/// is). The issue's own command (`--overwrite -xhf`) among them. Help is `--help` and `-?`.
#[test]
fn dereference_keeps_a_directory_symlink_like_gnu_tar() {
    let Some(td) = util::gnu::dir("dereference_keeps_a_directory_symlink_like_gnu_tar", &[]) else {
        return;
    };
    let root = small_tree(&td);
    let archive = gnu_archive(&td, "a.tar", &[], &root, &["d", "top"]);
    // DEST/real is a directory (with a time of its own), DEST/d a symlink to it.
    let prepare = |dest: &Path| {
        fs::create_dir(dest.join("real")).unwrap();
        fs::write(dest.join("real/old"), "old\n").unwrap();
        util::tree::set_mtime(&dest.join("real/old"), 1_000_000_000, 0);
        util::tree::set_mtime(&dest.join("real"), 1_000_000_000, 0);
        symlink("real", dest.join("d")).unwrap();
        util::tree::set_mtime(&dest.join("d"), 1_000_000_000, 0);
    };
    let with = |args| Case { prepare: &prepare, ..Case::new(args) };
    assert_same(
        &td,
        &archive,
        &[
            with(&["-xhf", "{archive}", "-C", "{dest}"]),
            with(&["--overwrite", "-xhf", "{archive}", "-C", "{dest}"]),
            with(&["-x", "--dereference", "-f", "{archive}", "-C", "{dest}"]),
            with(&["xhf", "{archive}", "-C", "{dest}"]),
            with(&["-k", "-h", "-xf", "{archive}", "-C", "{dest}"]),
            with(&["-xf", "{archive}", "-C", "{dest}"]),
            with(&["-x", "--keep-directory-symlink", "-f", "{archive}", "-C", "{dest}"]),
            Case { tar_options: "-h", ..with(&["-xf", "{archive}", "-C", "{dest}"]) },
        ],
    );
    // Help: exit 0 and a usage text on stdout, as GNU tar; -h is not help.
    for help in ["--help", "-?"] {
        let out = fastuntar().arg(help).run();
        out.expect_code(0);
        assert!(out.stdout_str().contains("Usage:"), "{}", out.describe());
    }
}

/// Issue 28, 2: every short option letter GNU tar 1.34 has (and the letters it does not), given
/// to `-x` with a value where it takes one, does what it does in GNU tar: the same exit status,
/// stdout and tree. None may end in exit 0 with nothing done where GNU tar extracts, or the
/// other way round. The deliberate differences are README's: `-P` (refused), the multi-volume
/// options `-M`, `-L`, `-F` (refused), `-z`/`-j`/`-J` (the data decides the format), `-K`
/// with `-C`, and fastuntar's own `-q`. GNU tar's argp exits 64 for a letter it does not know.
#[test]
fn every_short_option_letter_acts_as_in_gnu_tar() {
    let Some(td) = util::gnu::dir("every_short_option_letter_acts_as_in_gnu_tar", &[]) else {
        return;
    };
    let root = small_tree(&td);
    let archive = gnu_archive(&td, "a.tar", &[], &root, &["d", "top"]);
    td.write("names", "d\n");
    td.write("excluded", "top\n");
    // The value each letter that takes one gets (GNU tar's `tar --help`).
    let value = |l: char| match l {
        'b' => Some("20"),
        'C' => Some("{dest}"),
        'F' => Some("true"),
        'g' => Some("/dev/null"),
        'H' => Some("posix"),
        'I' => Some("gzip"),
        'K' => Some("d/f"),
        'L' => Some("1024"),
        'N' => Some("2000-01-01"),
        'T' => Some("names"),
        'V' => Some("label*"),
        'X' => Some("excluded"),
        _ => None,
    };
    // The exit status and a file that must be there (None: nothing may be).
    let deliberate = |l: char| match l {
        'P' | 'M' | 'L' | 'F' => Some((2, None)),
        'q' | 'z' | 'j' | 'J' => Some((0, Some("top"))),
        // `-K` with `-C`: GNU tar extracts into its working directory, fastuntar into DIR.
        'K' => Some((0, Some("d/f"))),
        _ => None,
    };
    let letters = ('a'..='z').chain('A'..='Z').chain('0'..='9').chain(['?']);
    let mut failures = Vec::new();
    for l in letters {
        let flag = format!("-{l}");
        // -C first: GNU tar extracts -T's and -K's names into the directory current where
        // they stand (a difference README lists).
        let mut args = vec!["-C", "{dest}", "-x", flag.as_str()];
        args.extend(value(l));
        if l != 'f' {
            args.push("-f");
        }
        args.push("{archive}");
        // -m: the files' times are the extraction's.
        let case = Case { file_times: l != 'm', ..Case::new(&args) };
        if let Some((code, made)) = deliberate(l) {
            let b = run_both(&td, &archive, &case);
            let extracted = fs::read_dir(&b.ours_dest).unwrap().count() > 0;
            let made = made.is_none_or(|m| b.ours_dest.join(m).exists());
            if b.ours.code != Some(code) || extracted != (code == 0) || !made {
                failures.push(format!("{flag}: expected exit {code}\n{}", b.ours.describe()));
            }
            continue;
        }
        if l == '?' {
            // Help: exit 0, nothing extracted (the texts differ).
            let b = run_both(&td, &archive, &case);
            if b.gnu.code != b.ours.code || fs::read_dir(&b.ours_dest).unwrap().count() != 0 {
                failures.push(format!("-?: {}", b.ours.describe()));
            }
            continue;
        }
        failures.extend(differences(&td, &archive, &case));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Issue 28, 3: a member that cannot be extracted makes the run exit 2, as in GNU tar (1 is
/// `--compare`'s "some files differ"): `-k` and an existing file (said: "File exists"), a
/// directory member where `-k` keeps a file (its mkdir fails, and the members under it), a
/// member whose parent the archive made a file, a name with `..`. The rest is extracted, as there.
#[test]
fn a_failed_member_exits_2_like_gnu_tar() {
    let Some(td) = util::gnu::dir("a_failed_member_exits_2_like_gnu_tar", &[]) else { return };
    let root = small_tree(&td);
    let archive = gnu_archive(&td, "a.tar", &[], &root, &["d", "top"]);
    let mine = |dest: &Path, name: &str| {
        fs::write(dest.join(name), "mine\n").unwrap();
        util::tree::set_mtime(&dest.join(name), 1_000_000_000, 0);
    };
    let top_there = |dest: &Path| mine(dest, "top");
    let d_a_file = |dest: &Path| mine(dest, "d");
    let cases = [
        Case { prepare: &top_there, ..Case::new(&["-xkf", "{archive}", "-C", "{dest}"]) },
        Case { prepare: &top_there, ..Case::new(&["-xvkf", "{archive}", "-C", "{dest}"]) },
        Case { prepare: &d_a_file, ..Case::new(&["-xkf", "{archive}", "-C", "{dest}"]) },
        Case { prepare: &d_a_file, ..Case::new(&["-xvkf", "{archive}", "-C", "{dest}"]) },
    ];
    assert_same(&td, &archive, &cases);
    let b = run_both(&td, &archive, &cases[0]);
    assert!(
        b.ours.stderr_str().contains("top") && b.ours.stderr_str().contains("File exists"),
        "-k says the file exists\n{}",
        b.ours.describe()
    );
    // `x` is a file, then `x/y` wants it a directory: "Cannot open: Not a directory".
    let mut t = util::rawtar::Tar::new();
    t.file("x", b"x\n").file("x/y", b"y\n").file("z", b"z\n");
    let through_file = td.write("through-file.tar", t.finish());
    // A `..` in a name: GNU tar 1.34 refuses it too ("Member name contains '..'").
    let mut t = util::rawtar::Tar::new();
    t.file("../x", b"x\n").file("a/../z", b"z\n").file("ok", b"ok\n");
    let dot_dot = td.write("dot-dot.tar", t.finish());
    for archive in [through_file, dot_dot] {
        assert_same(
            &td,
            &archive,
            &[
                Case::new(&["-xf", "{archive}", "-C", "{dest}"]),
                Case::new(&["-xvf", "{archive}", "-C", "{dest}"]),
            ],
        );
    }
}

/// Issue 28, 4: success is quiet, as GNU tar's: off a terminal nothing on stderr (nor stdout)
/// after a clean extraction, whatever the options that ask for nothing (`TAR_OPTIONS` too); the
/// summary when asked (`-v`, `--totals`: cli::summary_line_and_quiet).
#[test]
fn success_is_quiet_like_gnu_tar() {
    let Some(td) = util::gnu::dir("success_is_quiet_like_gnu_tar", &[]) else { return };
    let root = small_tree(&td);
    let archive = gnu_archive(&td, "a.tar", &[], &root, &["d", "top"]);
    let cases = [
        Case::new(&["-xf", "{archive}", "-C", "{dest}"]),
        Case::new(&["xpf", "{archive}", "-C", "{dest}"]),
        Case::new(&["-x", "--strip-components=1", "-f", "{archive}", "-C", "{dest}"]),
        Case::new(&["-x", "-f", "{archive}", "-C", "{dest}", "d/f"]),
        Case { tar_options: "-p", ..Case::new(&["-xf", "{archive}", "-C", "{dest}"]) },
    ];
    assert_same(&td, &archive, &cases);
    for case in &cases {
        let b = run_both(&td, &archive, case);
        assert!(b.gnu.stderr.is_empty(), "{}", b.gnu.describe());
        assert!(b.ours.stderr.is_empty(), "success must be quiet\n{}", b.ours.describe());
    }
}

/// Issue 28, 10: `--show-transformed-names` shows the names as extracted, `--one-top-level`'s
/// directory (and `--strip-components`) included, in `-t`, `-tv` and `-xv`, as GNU tar; the
/// files land in the same places.
#[test]
fn show_transformed_names_include_one_top_level_like_gnu_tar() {
    let Some(td) = util::gnu::dir("show_transformed_names_include_one_top_level_like_gnu_tar", &[])
    else {
        return;
    };
    let mut t = util::rawtar::Tar::new();
    t.dir("b/").file("b/f", b"f\n").file("c", b"c\n").dir("./x/").file("./x/y", b"y\n");
    // (`.a/k` is a difference README lists: GNU tar takes it to be under `a`.)
    t.dir("a/").file("a/q", b"q\n");
    let archive = td.write("names.tar", t.finish());
    let mut cases = Vec::new();
    let lists: &[&[&str]] = &[
        &["-t", "--show-transformed-names", "--one-top-level=a", "-f", "{archive}"],
        &["-tv", "--show-transformed-names", "--one-top-level=a", "-f", "{archive}"],
        &["-t", "--show-transformed-names", "--one-top-level=top", "-f", "{archive}"],
        &["-t", "--show-transformed-names", "--strip-components=1", "-f", "{archive}"],
        &["-t", "--show-stored-names", "--one-top-level=a", "-f", "{archive}"],
        &["-t", "--one-top-level=a", "-f", "{archive}"],
        &[
            "-xv",
            "--show-transformed-names",
            "--one-top-level=a",
            "-f",
            "{archive}",
            "-C",
            "{dest}",
        ],
        &[
            "-xv",
            "--show-transformed-names",
            "--one-top-level=top",
            "-f",
            "{archive}",
            "-C",
            "{dest}",
        ],
        &["-xv", "--one-top-level=top", "-f", "{archive}", "-C", "{dest}"],
        &[
            "-xv",
            "--show-transformed-names",
            "--transform=s/c/C/",
            "--one-top-level=top",
            "-f",
            "{archive}",
            "-C",
            "{dest}",
        ],
    ];
    cases.extend(lists.iter().map(|a| Case::new(a)));
    assert_same(&td, &archive, &cases);
}

/// True when every one of `tools` is installed. Off CI a missing one skips the test (a SKIP
/// line); in CI (`CI=true`, where scripts/test.sh installs them) it is a failure.
fn oracles(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&&str> = tools.iter().filter(|t| !util::which_quiet(t)).collect();
    assert!(
        missing.is_empty() || std::env::var("CI").as_deref() != Ok("true"),
        "{test}: {missing:?} not installed (scripts/test.sh installs them)"
    );
    util::have_tools(test, tools)
}

/// Issue 28, 6: lzip and lzop archives are found by their magic, as GNU tar finds them, and
/// read through `lzip -d` / `lzop -d` (no `--lzip` needed); from standard input refused as
/// GNU tar refuses them ("Use --lzip option"), and with the program missing a one-line error
/// naming it, exit 2, nothing extracted.
#[test]
fn lzip_and_lzop_found_by_magic_like_gnu_tar() {
    let test = "lzip_and_lzop_found_by_magic_like_gnu_tar";
    if !oracles(test, &["tar", "lzip", "lzop"]) {
        return;
    }
    let td = TestDir::new("lzip_lzop");
    let root = small_tree(&td);
    let plain = gnu_archive(&td, "k.tar", &[], &root, &["d", "top"]);
    let lz = td.join("k.tar.lz");
    let lzo = td.join("k.tar.lzo");
    util::sh(&format!(
        "lzip -c {0} > {1} && lzop -c {0} > {2}",
        plain.display(),
        lz.display(),
        lzo.display()
    ));
    // Under a name that says nothing: the data decides.
    let lz_bin = td.join("k.bin");
    fs::copy(&lz, &lz_bin).unwrap();
    for archive in [&lz, &lzo, &lz_bin] {
        assert_same(
            &td,
            archive,
            &[
                Case::new(&["-xf", "{archive}", "-C", "{dest}"]),
                Case::new(&["-xvf", "{archive}", "-C", "{dest}"]),
                Case::new(&["xf", "{archive}", "-C", "{dest}"]),
                Case::new(&["-tvf", "{archive}"]),
                Case::new(&["-xOf", "{archive}"]),
            ],
        );
    }
    for (archive, flag) in [(&lz, "--lzip"), (&lzo, "--lzop")] {
        // Standard input: refused by both, nothing extracted; with the flag, extracted.
        for with_flag in [false, true] {
            let run = |mut cmd: Cmd| {
                let dest = td.fresh("stdin");
                cmd.args(with_flag.then_some(flag)).extract("-", &dest);
                let out = cmd.stdin(util::Input::File(archive.to_path_buf())).run();
                (out, dest.join("top").exists())
            };
            let ((gnu, g), (ours, o)) = (run(Cmd::new("tar")), run(fastuntar()));
            assert_eq!((ours.code, o), (gnu.code, g), "{flag} {with_flag}\n{}", ours.describe());
        }
    }
    // The program missing: GNU tar's "Cannot exec", exit 2; ours one line naming it.
    let empty = td.fresh("no-programs");
    let tar = util::which_path("tar");
    for (archive, program) in [(&lz, "lzip"), (&lzo, "lzop")] {
        let run = |mut cmd: Cmd| {
            let dest = td.fresh("missing");
            let out = cmd.env("PATH", &empty).extract(archive, &dest).run();
            (out, fs::read_dir(&dest).unwrap().count())
        };
        let ((gnu, g), (ours, o)) = (run(Cmd::new(&tar)), run(fastuntar()));
        assert_eq!((ours.code, o), (gnu.code, g), "{}", ours.describe());
        let lines = ours.stderr_lines();
        assert!(lines.len() == 1 && lines[0].contains(program), "{}", ours.describe());
    }
}

/// Issue 28, 7: `-v --backup` says `Renaming 'X' to 'X~'` right after X's name and before the
/// next member's, as GNU tar, whatever the writer count (the writer renames; the decoder waits
/// for each member to land before naming the next): 1, 2, 3 and 4 writers, both backends.
/// Also numbered backups, `-vv`, and the kind and suffix of backups from `$VERSION_CONTROL` and
/// `$SIMPLE_BACKUP_SUFFIX` (read at the edge, cli/resolve.rs), the options winning over them.
#[test]
fn backup_renaming_follows_its_member_like_gnu_tar() {
    let Some(td) = util::gnu::dir("backup_renaming_follows_its_member_like_gnu_tar", &[]) else {
        return;
    };
    let root = td.join("tree");
    let names = ["dir1/file1", "dir1/file2", "dir2/file3", "dir2/sub/file4", "top"];
    for n in names {
        fs::create_dir_all(root.join(n).parent().unwrap()).unwrap();
        fs::write(root.join(n), format!("new {n}\n")).unwrap();
        util::tree::set_mtime(&root.join(n), 1_500_000_000, 0);
    }
    let archive = gnu_archive(&td, "a.tar", &[], &root, &["dir1", "dir2", "top"]);
    let prepare = |dest: &Path| {
        for n in names {
            fs::create_dir_all(dest.join(n).parent().unwrap()).unwrap();
            fs::write(dest.join(n), format!("old {n}\n")).unwrap();
            util::tree::set_mtime(&dest.join(n), 1_000_000_000, 0);
        }
    };
    let runs: &[&[&str]] = &[
        &["-xv", "--backup", "-f", "{archive}", "-C", "{dest}"],
        &["-xv", "--backup=numbered", "-f", "{archive}", "-C", "{dest}"],
        &["-xvv", "--backup", "-f", "{archive}", "-C", "{dest}"],
        &["-xv", "--suffix=.old", "-f", "{archive}", "-C", "{dest}"],
    ];
    let env: &[(&str, &str)] = &[("VERSION_CONTROL", "numbered"), ("SIMPLE_BACKUP_SUFFIX", ".bak")];
    let with_env: &[&[&str]] = &[
        &["-xv", "--backup", "-f", "{archive}", "-C", "{dest}"],
        &["-xv", "--backup=simple", "-f", "{archive}", "-C", "{dest}"],
        &["-xv", "--suffix=.old", "-f", "{archive}", "-C", "{dest}"],
    ];
    let mut cases = Vec::new();
    let shapes = writer_shapes("backup_renaming_follows_its_member_like_gnu_tar", &RENAMING);
    for shape in &shapes {
        for args in runs {
            cases.push(Case { prepare: &prepare, ours_only: shape, ..Case::new(args) });
        }
    }
    for args in with_env {
        cases.push(Case { prepare: &prepare, env, ..Case::new(args) });
    }
    assert_same(&td, &archive, &cases);
}

/// fastuntar's flags for the runs of `matrix` (GNU tar has none of these flags).
fn writer_shapes(test: &str, matrix: &Matrix) -> Vec<Vec<&'static str>> {
    util::engine::runs(test, matrix, &[Encoding::Plain]).iter().map(|r| r.engine.args()).collect()
}

/// Issue 28, 5: `--delay-directory-restore` as GNU tar 1.34: with it every directory gets its
/// mode and time at the end (`a a/b a/c a/b/f`: `a/b` keeps its archived time; without it the
/// file made in `a/b` after the archive left it gives it the extraction's), the last of it and
/// `--no-delay-directory-restore` decides, `TAR_OPTIONS` too; and GNU tar's automatic case: a
/// directory of an incremental archive (`tar -g`, GNU and POSIX formats) turns it on even
/// without `-G` and after `--no-delay-directory-restore`. Under both backends and 1, 3 and 4
/// writer threads.
#[test]
fn delay_directory_restore_like_gnu_tar() {
    let Some(td) = util::gnu::dir("delay_directory_restore_like_gnu_tar", &[]) else { return };
    let root = td.join("tree");
    for d in ["a/b", "a/c", "x/y/z"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(root.join("a/b/f"), "f\n").unwrap();
    fs::write(root.join("x/y/z/g"), "g\n").unwrap();
    fs::write(root.join("x/h"), "h\n").unwrap();
    for (i, d) in
        ["a/b/f", "x/y/z/g", "x/h", "a/b", "a/c", "a", "x/y/z", "x/y", "x"].iter().enumerate()
    {
        util::tree::set_mtime(&root.join(d), 1_000_000_000 + i as i64 * 1000, 0);
    }
    fs::set_permissions(root.join("a/b"), fs::Permissions::from_mode(0o750)).unwrap();
    let reordered = gnu_archive(
        &td,
        "reordered.tar",
        &["--no-recursion"],
        &root,
        &["a", "a/b", "a/c", "a/b/f"],
    );
    let cases: &[(&str, &[&str])] = &[
        ("", &["-xf", "{archive}", "-C", "{dest}"]),
        ("", &["--delay-directory-restore", "-xf", "{archive}", "-C", "{dest}"]),
        (
            "",
            &[
                "--delay-directory-restore",
                "--no-delay-directory-restore",
                "-xf",
                "{archive}",
                "-C",
                "{dest}",
            ],
        ),
        ("--delay-directory-restore", &["-xf", "{archive}", "-C", "{dest}"]),
        (
            "--delay-directory-restore",
            &["--no-delay-directory-restore", "-xf", "{archive}", "-C", "{dest}"],
        ),
    ];
    let incremental: Vec<PathBuf> = ["gnu", "posix"]
        .iter()
        .map(|format| {
            let snar = td.join(format!("{format}.snar"));
            let flags =
                [format!("--format={format}"), format!("--listed-incremental={}", snar.display())];
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            gnu_archive(&td, &format!("level0-{format}.tar"), &flags, &root, &["a", "x"])
        })
        .collect();
    let with_incremental: &[(&str, &[&str])] = &[
        ("", &["-xf", "{archive}", "-C", "{dest}"]),
        ("", &["--no-delay-directory-restore", "-xf", "{archive}", "-C", "{dest}"]),
        ("", &["-xG", "-f", "{archive}", "-C", "{dest}"]),
    ];
    let all = cases
        .iter()
        .map(|c| (&reordered, c))
        .chain(incremental.iter().flat_map(|a| with_incremental.iter().map(move |c| (a, c))));
    let mut failures = Vec::new();
    for (archive, (env, args)) in all {
        for shape in &writer_shapes("delay_directory_restore_like_gnu_tar", &WRITER_SHAPES) {
            let case = Case { tar_options: env, ours_only: shape, ..Case::new(args) };
            failures.extend(differences(&td, archive, &case));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Issue 28, 5: a member under a directory the archive made read-only earlier (`ro/`, 0555,
/// then another member, then `ro/f`), as a user who is not root: without the option both GNU
/// tar and fastuntar fail `ro/f` (the directory got its mode when the archive left it), with
/// `--delay-directory-restore` both extract it and `ro` ends 0555.
#[test]
fn delay_directory_restore_fills_a_read_only_directory_like_gnu_tar() {
    let test = "delay_directory_restore_fills_a_read_only_directory_like_gnu_tar";
    if !util::have_root(test, "runs both as uid 65534") || !have_tool(test, "tar") {
        return;
    }
    let td = TestDir::for_users("delay_read_only");
    let mut t = util::rawtar::Tar::new();
    t.header(&util::rawtar::Header::dir("ro/").mode(0o555).mtime(1_000_000_000));
    t.file("other", b"other\n").file("ro/f", b"f\n");
    let archive = td.write("ro.tar", t.finish());
    fs::set_permissions(&archive, fs::Permissions::from_mode(0o644)).unwrap();
    for delay in [false, true] {
        let run = |mut cmd: Cmd| {
            let dest = td.fresh("dest");
            std::os::unix::fs::chown(&dest, Some(65534), Some(65534)).unwrap();
            cmd.user(65534, 65534).args(delay.then_some("--delay-directory-restore"));
            let out = cmd.extract(&archive, &dest).run();
            (out, dest)
        };
        let ((gnu, g), (ours, o)) = (run(Cmd::new("tar")), run(fastuntar()));
        assert_eq!(ours.code, gnu.code, "delay {delay}\n{}\n{}", ours.describe(), gnu.describe());
        assert_eq!(o.join("ro/f").exists(), delay, "delay {delay}\n{}", ours.describe());
        let cmp = Compare::extraction(td.started);
        let d = diff(&snapshot(&g), "GNU tar", &snapshot(&o), "fastuntar", &cmp);
        assert!(d.is_empty(), "delay {delay}: trees differ:\n    {}", d.join("\n    "));
    }
}

/// Issue 40, 2: a directory met again (`a/` 0755, `a/f`, `a/` 0700: archives extended with
/// `tar -r` or `-A`) with `--delay-directory-restore` gets its last member's mode and time,
/// as GNU tar's (which updates its delayed entry in place) and as without the option; also
/// in an incremental archive (`tar -g` levels joined with `tar -A`), where GNU tar delays by
/// itself. Under every writer row. Before, the first member's mode and time were left
/// (0755: more open than the archive's last word).
#[test]
fn delay_directory_restore_keeps_the_last_of_a_repeated_directory() {
    let test = "delay_directory_restore_keeps_the_last_of_a_repeated_directory";
    let Some(td) = util::gnu::dir(test, &[]) else { return };
    let mut t = util::rawtar::Tar::new();
    let dir =
        |name: &str, mode: u32, mtime: u64| util::rawtar::Header::dir(name).mode(mode).mtime(mtime);
    t.header(&dir("a/", 0o755, 1_000_000_000));
    t.file("a/f", b"f\n");
    t.header(&dir("a/b/", 0o750, 1_000_000_100));
    t.file("a/b/g", b"g\n");
    t.file("x", b"x\n");
    t.header(&dir("a/", 0o700, 1_100_000_000));
    t.header(&dir("a/c/", 0o751, 1_100_000_500));
    t.file("a/c/h", b"h\n");
    t.header(&dir("a/b/", 0o705, 1_200_000_000));
    let repeated = td.write("repeated.tar", t.finish());
    // Two levels of `tar -g`, the second after `a`'s mode and time changed, joined.
    let root = td.join("tree");
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/b/f"), "f\n").unwrap();
    util::tree::set_mtime(&root.join("a/b"), 1_000_000_000, 0);
    util::tree::set_mtime(&root.join("a"), 1_000_000_100, 0);
    let snar = td.join("levels.snar");
    let g = [format!("--listed-incremental={}", snar.display())];
    let g: Vec<&str> = g.iter().map(String::as_str).collect();
    let level0 = gnu_archive(&td, "level0.tar", &g, &root, &["a"]);
    fs::set_permissions(root.join("a"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(root.join("a/new"), "new\n").unwrap();
    util::tree::set_mtime(&root.join("a"), 1_200_000_000, 0);
    let level1 = gnu_archive(&td, "level1.tar", &g, &root, &["a"]);
    let joined = td.join("joined.tar");
    fs::copy(&level0, &joined).unwrap();
    let cat = Cmd::new("tar").arg("-A").arg("-f").arg(&joined).arg(&level1).run();
    assert!(cat.success(), "tar -A\n{}", cat.describe());
    let rows = [
        gnu::Case::extract(&repeated, &["--delay-directory-restore"], &[]).over(&EVERY_WRITER),
        gnu::Case::extract(&repeated, &[], &[]).over(&EVERY_WRITER),
        gnu::Case::extract(&joined, &[], &[]).over(&EVERY_WRITER),
    ];
    gnu::check(&td, rows);
}

/// Issue 40, 2: with `--delay-directory-restore`, as a user who is not root, a directory the
/// archive leaves without search permission (0600) is stamped after everything beneath it,
/// as GNU tar stamps its list (newest made first): its subdirectories get their modes and
/// times, and nothing is reported. Also when the parent comes again later with that mode.
/// Under every writer row. Before, the parent was stamped first (records were applied in the
/// order the archive left the directories, children first recorded, so last applied) and
/// its subdirectories silently kept 0700 and the extraction's time.
#[test]
fn delay_directory_restore_stamps_a_directory_after_its_children_as_a_user() {
    let test = "delay_directory_restore_stamps_a_directory_after_its_children_as_a_user";
    if !util::have_root(test, "runs both as uid 65534") || !have_tool(test, "tar") {
        return;
    }
    let td = TestDir::for_users(test);
    let dir =
        |name: &str, mode: u32, mtime: u64| util::rawtar::Header::dir(name).mode(mode).mtime(mtime);
    let mut t = util::rawtar::Tar::new();
    t.header(&dir("p/", 0o600, 1_000_000_000));
    t.header(&dir("p/q/", 0o755, 1_000_000_100));
    t.file("p/q/g", b"g\n");
    t.file("z", b"z\n");
    let unsearchable = td.write("unsearchable.tar", t.finish());
    let mut t = util::rawtar::Tar::new();
    t.header(&dir("a/", 0o755, 1_000_000_000));
    t.header(&dir("a/b/", 0o750, 1_000_000_100));
    t.file("a/b/f", b"f\n");
    t.file("x", b"x\n");
    t.header(&dir("a/", 0o600, 1_100_000_000));
    t.header(&dir("a/c/", 0o751, 1_100_000_500));
    t.file("a/c/h", b"h\n");
    t.file("y", b"y\n");
    let again = td.write("again.tar", t.finish());
    for a in [&unsearchable, &again] {
        fs::set_permissions(a, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let chown = |d: &Path| std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    let rows = [&unsearchable, &again].map(|a| {
        gnu::Case::extract(a, &["--delay-directory-restore"], &[])
            .prepare(&chown)
            .user(65534, 65534)
            .code(0)
            .over(&EVERY_WRITER)
    });
    gnu::check(&td, rows);
}

/// Issue 28, 5: the directories waiting for the end are not kept in memory past a bound: with
/// 12,000 directories of 70-byte names (~1.3 MB of records: past the 1 MiB kept in memory, the
/// rest in a temporary file) every directory gets GNU tar's mode and time. (25,000 of 8-byte
/// names until issue 33: the same records in twice the directories.) The quick tier passes the
/// 1 MiB with 2,000 directories of 690-byte paths (~1.5 MB of records, GNU long names):
/// removing the 48,000 entries of the two trees took 50 of the case's 110 s on this machine's
/// disk (ext4 mounted with `discard`, about 1 ms a directory; load 10, 2026-11-27).
#[test]
fn delay_directory_restore_spills_many_directories() {
    let Some(td) = util::gnu::dir("delay_directory_restore_spills_many_directories", &[]) else {
        return;
    };
    let mut t = util::rawtar::Tar::new();
    // The quick tier's paths: two 240-byte directories every member shares (made once), then
    // the member's own 204-byte name.
    let (count, above, pad) = match util::engine::tier() {
        util::engine::Tier::Exhaustive => (12_000, String::new(), "x".repeat(60)),
        util::engine::Tier::Quick => (2_000, format!("{0}/{0}/", "y".repeat(240)), "x".repeat(200)),
    };
    for i in 0..count {
        let d = format!("d{:03}/{above}{:03}-{pad}/", i / 1000, i % 1000);
        let dir = util::rawtar::Header::dir(d.as_str()).mode(0o750).mtime(1_000_000_000 + i);
        t.member(&dir, b"");
        t.member(&util::rawtar::Header::file(format!("{d}f")), b"");
    }
    let archive = td.write("many.tar", t.finish());
    let b = run_both(
        &td,
        &archive,
        &Case::new(&["--delay-directory-restore", "-xf", "{archive}", "-C", "{dest}"]),
    );
    assert_eq!(b.ours.code, b.gnu.code, "{}", b.ours.describe());
    let cmp = Compare::extraction(td.started);
    let d = diff(&snapshot(&b.gnu_dest), "GNU tar", &snapshot(&b.ours_dest), "fastuntar", &cmp);
    assert!(
        d.is_empty(),
        "trees differ:\n    {}",
        d.iter().take(20).cloned().collect::<Vec<_>>().join("\n    ")
    );
}
