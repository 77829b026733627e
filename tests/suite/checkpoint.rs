//! `--checkpoint[=N]` and `--checkpoint-action=ACTION` against GNU tar 1.34 on the same
//! archives: the checkpoints' count and numbers (one per record read, GNU tar's way of
//! reading: records passed over by lseek in a plain archive file count none, a compressed
//! file's first record counts twice, `-i` counts the read that finds the end), the actions'
//! output (echo lines on stderr, dots on stdout or with `-O` on stderr, `%` escapes, `totals`)
//! and what `exec=` scripts see. stderr is compared after "fastuntar: " becomes "tar: ", with
//! fastuntar's closing summary line left out and the rates (timing) masked.
//!
//! Matrix rows: none (tests/util/engine.rs). Checkpoints count records the reader reads and
//! the actions run on the reader's thread, before any writer: the default engine, once a case.

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};

use util::gnu::{self, Case, Ran};
use util::{Cmd, Output, Rng, TestDir, have_tool, is_summary};

/// A fresh test directory for `test` with its archive `a.tar` of the tree, when `tar` is GNU
/// tar (the comparisons need its way of counting); else a SKIP line (under CI a failure).
fn set_up(test: &str) -> Option<(TestDir, PathBuf)> {
    let out = Cmd::new("tar").arg("--version").run();
    if !(out.success() && out.stdout_str().contains("GNU tar")) {
        util::skip(test, "GNU tar missing");
        return None;
    }
    let td = TestDir::new(test);
    let a = archive(&td, "a.tar", &[]);
    Some((td, a))
}

/// A tree of a few hundred KB: small files, a subdirectory, a symlink, and one 300,000-byte
/// member spanning about 30 records of 10240 bytes.
fn tree(td: &TestDir) -> PathBuf {
    let root = td.join("tree");
    let mut rng = Rng::new(7);
    for i in 1..=5 {
        td.write(format!("tree/src/f{i}"), rng.bytes(3000 * i));
    }
    td.write("tree/src/big", rng.bytes(300_000));
    td.write("tree/src/sub/a", rng.bytes(700));
    td.write("tree/src/sub/b", b"b\n");
    std::os::unix::fs::symlink("f1", root.join("src/link")).unwrap();
    root
}

/// `tar -c` of the tree, with `flags` (a format), into `name`.
fn archive(td: &TestDir, name: &str, flags: &[&str]) -> PathBuf {
    let root = td.join("tree");
    if !root.exists() {
        tree(td);
    }
    let path = td.join(name);
    let out =
        Cmd::new("tar").arg("-C").arg(&root).args(flags).arg("-cf").arg(&path).arg("src").run();
    assert!(out.success(), "{}", out.describe());
    path
}

/// One row of a checkpoint table: a comparison with GNU tar (`gnu::Case`: the arguments, with
/// `{archive}` and `{dest}`, a fresh directory of each program's own; standard input; the exit
/// status, stdout and stderr as `said` reads it) and what else must hold of the two runs
/// (`check`: the checkpoints' count or numbers, the scripts' logs).
struct Row<'a> {
    case: Case<'a>,
    check: fn(&Seen) -> Result<(), String>,
}

/// What a row's `check` is given.
struct Seen<'a> {
    gnu: &'a Ran,
    ours: &'a Ran,
    /// GNU tar's stderr as compared (`stderr`).
    said: String,
    /// How many 10240-byte records the test's archive `a.tar` spans.
    records: u64,
}

impl Seen<'_> {
    /// The numbers of GNU tar's default echo lines.
    fn numbers(&self) -> Vec<u64> {
        numbers(&self.said)
    }
}

/// `args` on `archive`, comparing exit status, stdout and stderr (`said`), then `check`.
fn row<'a>(archive: &Path, args: &[&str], check: fn(&Seen) -> Result<(), String>) -> Row<'a> {
    Row { case: Case::new(archive, args).only_stdout().said(said), check }
}

/// `row`, the archive read from standard input (`-f -`: the file itself on stdin).
fn stdin_row<'a>(archive: &Path, args: &[&str], check: fn(&Seen) -> Result<(), String>) -> Row<'a> {
    let r = row(archive, args, check);
    Row { case: r.case.stdin_file(archive), ..r }
}

/// Nothing besides the comparison.
fn compared(_: &Seen) -> Result<(), String> {
    Ok(())
}

/// Runs every row of `rows` with both programs, `records` the records of `a.tar`; fails
/// naming every row that differs or fails its check. Returns how many rows ran.
fn check_rows(td: &TestDir, records: u64, rows: &[Row]) -> usize {
    let mut failures = Vec::new();
    let mut ran = 0;
    for row in rows {
        let b = gnu::both(td, &row.case);
        failures.extend(b.differences);
        let seen = Seen { gnu: &b.gnu, ours: &b.ours, said: stderr(&b.gnu.out), records };
        if let Err(e) = (row.check)(&seen) {
            failures.push(format!("{}: {e}", row.case.label()));
        }
        ran += 1;
    }
    gnu::assert_none(&failures);
    ran
}

/// How many records of 10240 bytes `archive` spans.
fn records_of(archive: &Path) -> u64 {
    fs::metadata(archive).unwrap().len() / 10240
}

/// stderr as `Case::said` compares it (`stderr`), in lines that keep their newlines (dots
/// have none after the last).
fn said(out: &Output, _prog: &str) -> Vec<String> {
    stderr(out).split_inclusive('\n').map(str::to_string).collect()
}

/// stderr as compared: fastuntar's summary line out, "fastuntar: " read as "tar: ", and the
/// rates in "(SIZE, RATE/s)" (timing) masked.
fn stderr(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let kept: String = text.split_inclusive('\n').filter(|l| !is_summary(l.trim_end())).collect();
    mask_rates(&kept.replace("fastuntar: ", "tar: "))
}

fn mask_rates(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(end) = rest.find("/s)") {
        let start = rest[..end].rfind(", ").map_or(end, |i| i + 2);
        out.push_str(&rest[..start]);
        out.push_str("RATE)");
        rest = &rest[end + 3..];
    }
    out.push_str(rest);
    out
}

/// The numbers of the default echo lines ("tar: Read checkpoint N").
fn numbers(stderr: &str) -> Vec<u64> {
    stderr.lines().filter_map(|l| l.strip_prefix("tar: Read checkpoint ")?.parse().ok()).collect()
}

#[test]
fn default_echo_counts_records_like_gnu_tar() {
    let Some((td, a)) = set_up("default_echo_counts_records_like_gnu_tar") else {
        return;
    };
    let records = records_of(&a);
    assert!(records >= 30, "the archive spans {records} records");
    let rows = [
        // -x reads every record; --checkpoint alone is every 10th.
        row(&a, &["--checkpoint", "-xf", "{archive}", "-C", "{dest}"], |s| {
            let want: Vec<u64> = (1..=s.records / 10).map(|n| n * 10).collect();
            expect(s.numbers() == want, s, "every 10th record")
        }),
        row(&a, &["--checkpoint=3", "-xf", "{archive}", "-C", "{dest}"], |s| {
            expect(s.numbers().len() as u64 == s.records / 3, s, "every 3rd record")
        }),
        // -t of an archive file: the big member's records are passed over (GNU tar seeks), so
        // fewer checkpoints than records.
        row(&a, &["--checkpoint=1", "-tf", "{archive}"], |s| {
            expect((s.numbers().len() as u64) < s.records - 20, s, "-t reads few records")
        }),
        // From standard input nothing is passed over.
        stdin_row(&a, &["--checkpoint=1", "-tf", "-"], |s| {
            expect(s.numbers().len() as u64 == s.records, s, "one a record")
        }),
        // -O, and -x of a part (the rest is passed over).
        row(&a, &["--checkpoint=2", "-xOf", "{archive}"], compared),
        row(
            &a,
            &["--checkpoint=1", "--exclude=src/big", "-xf", "{archive}", "-C", "{dest}"],
            compared,
        ),
        row(&a, &["--checkpoint=1", "-xf", "{archive}", "-C", "{dest}", "src/f4"], compared),
        // `-b 4`: records of 2048 bytes; those after the end marker are not read.
        row(&a, &["-b", "4", "--checkpoint=1", "-xf", "{archive}", "-C", "{dest}"], |s| {
            expect(s.numbers().len() as u64 > 4 * s.records, s, "records of 2048 bytes")
        }),
        row(&a, &["-b", "4", "--checkpoint=1", "-tf", "{archive}"], compared),
        stdin_row(&a, &["--checkpoint=0x5", "--record-size=4K", "-tf", "-"], compared),
        // -q silences fastuntar's summary, never the checkpoints GNU tar (which has no -q)
        // prints.
        Row {
            case: row(&a, &["--checkpoint=4", "-xf", "{archive}", "-C", "{dest}"], compared)
                .case
                .ours_only(&["-q"]),
            check: |s| expect(!s.ours.out.stderr.is_empty(), s, "checkpoints under -q"),
        },
    ];
    assert_eq!(check_rows(&td, records, &rows), 11);
}

/// `Ok` when `ok`, else the failure `what`, with GNU tar's stderr as compared.
fn expect(ok: bool, s: &Seen, what: &str) -> Result<(), String> {
    if ok { Ok(()) } else { Err(format!("want {what}; GNU tar said:\n{}", s.said)) }
}

#[test]
fn dots_like_gnu_tar() {
    let Some((td, a)) = set_up("dots_like_gnu_tar") else {
        return;
    };
    let rows = [
        // On stdout, between the names, never a newline after one: -t, -tv, -xv. (Whether the
        // dots or a name come last depends on the order `tar -c` read the tree in, which is
        // the filesystem's: on the load protocol's fresh ext4 a name came last.)
        stdin_row(&a, &["--checkpoint=.5", "-tf", "-"], compared),
        row(&a, &["--checkpoint=.1", "-tvf", "{archive}"], compared),
        row(&a, &["--checkpoint=.5", "-xvf", "{archive}", "-C", "{dest}"], |s| {
            let out = &s.gnu.out.stdout;
            let dots = out.iter().filter(|&&b| b == b'.').count();
            let newline_after_a_dot = out.windows(2).any(|w| w == b".\n");
            expect(dots >= 6 && !newline_after_a_dot, s, "6 dots or more, no newline after one")
        }),
        // `--checkpoint=.` alone is every 10th; with -O the dots go to stderr.
        row(&a, &["--checkpoint=.", "-xOf", "{archive}"], |s| {
            let err = &s.gnu.out.stderr;
            expect(err.starts_with(b"...") && !err.contains(&b'\n'), s, "dots on stderr")
        }),
    ];
    assert_eq!(check_rows(&td, records_of(&a), &rows), 4);
    // Dots to a reader that went away end nothing (GNU tar dies of SIGPIPE there): exit 0,
    // the tree whole.
    let d = td.fresh("gone");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = std::process::Command::new(util::fastuntar_path())
        .arg("-xf")
        .arg(&a)
        .args(["--checkpoint=.1", "-q", "-C"])
        .arg(&d)
        .stdout(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "dots to a closed pipe");
    assert!(d.join("src/big").metadata().is_ok_and(|m| m.len() == 300_000));
}

/// What the `exec=` scripts of a row wrote (`>> {dest}.log`): the same for both, 5 lines or
/// more.
fn same_logs(s: &Seen) -> Result<(), String> {
    let log = |r: &Ran| fs::read_to_string(format!("{}.log", r.dest.display())).unwrap_or_default();
    let (g, o) = (log(s.gnu), log(s.ours));
    if g != o {
        return Err(format!("what the scripts saw:\n--- GNU tar ---\n{g}--- fastuntar ---\n{o}"));
    }
    expect(g.lines().count() >= 5, s, &format!("5 checkpoints or more in the log:\n{g}"))
}

#[test]
fn actions_like_gnu_tar() {
    let Some((td, a)) = set_up("actions_like_gnu_tar") else {
        return;
    };
    // `exec=`: the script runs at each checkpoint, with the TAR_* variables, and is waited for.
    let script = "--checkpoint-action=exec=echo $TAR_CHECKPOINT $TAR_SUBCOMMAND $TAR_FORMAT \
                  $TAR_BLOCKING_FACTOR $TAR_ARCHIVE >> {dest}.log";
    let posix = archive(&td, "p.tar", &["--format=posix"]);
    let rows = [
        row(
            &a,
            &["--checkpoint=7", "--checkpoint-action=echo='%u %s'", "-xOf", "{archive}"],
            |s| {
                let want: String =
                    (1..=s.records / 7).map(|k| format!("tar: {} read\n", 7 * k)).collect();
                expect(s.said == want, s, &want)
            },
        ),
        // Several actions, in command-line order, `.N` among them; the escapes GNU tar prints
        // as they are; %T and totals (bytes read before the checkpoint's record).
        row(
            &a,
            &[
                "--checkpoint-action=echo=\"a\\tb %u\"",
                "--checkpoint-action=totals",
                "--checkpoint=.12",
                "--checkpoint-action=echo=[%T] [%{A,B}T] %% %q %{x}q %{ z",
                "-xOf",
                "{archive}",
            ],
            |s| {
                let want = "tar: a\tb 12\nTotal bytes read: 112640 (110KiB, RATE)\n.tar: [R: \
                            112640 (110KiB, RATE)] [A: 112640 (110KiB, RATE)] %% %q %q %{ z\n";
                expect(s.said.starts_with(want), s, want)
            },
        ),
        // %{N}* pads the line, program name included, to column N: stderr differs by the
        // names' lengths, so each is checked.
        Row {
            case: Case::new(
                &a,
                &["--checkpoint=10", "--checkpoint-action=echo=%u%{40}*|", "-tf", "-"],
            )
            .only_stdout()
            .stdin_file(&a),
            check: |s| {
                for out in [&s.gnu.out, &s.ours.out] {
                    let lines = out.stderr_lines();
                    if lines.is_empty() || !lines.iter().all(|l| l.len() == 41 && l.ends_with('|'))
                    {
                        return Err(format!("want lines padded to 41:\n{}", out.describe()));
                    }
                }
                Ok(())
            },
        },
        row(&a, &["--checkpoint=3", script, "-xf", "{archive}", "-C", "{dest}"], same_logs),
        row(&a, &["--checkpoint=1", script, "-tf", "{archive}"], same_logs),
        stdin_row(&a, &["--checkpoint=2", "-b", "8", script, "-tf", "-"], same_logs),
        row(&posix, &["--checkpoint=1", script, "-xOf", "{archive}"], same_logs),
    ];
    assert_eq!(check_rows(&td, records_of(&a), &rows), 7);
}

#[test]
fn compressed_and_concatenated_like_gnu_tar() {
    let test = "compressed_and_concatenated_like_gnu_tar";
    let Some((td, a)) = set_up(test) else {
        return;
    };
    let records = records_of(&a);
    // -i reads to the end of the input, and that last read counts.
    let mut cat = fs::read(&a).unwrap();
    cat.extend(fs::read(&a).unwrap());
    let cat = td.write("cat.tar", &cat);
    let rows = [
        row(&cat, &["--checkpoint=1", "-itf", "{archive}"], compared),
        stdin_row(&cat, &["--checkpoint=1", "-ixOf", "-"], compared),
    ];
    assert_eq!(check_rows(&td, records, &rows), 2);
    if !have_tool(test, "zstd") {
        util::skip(&format!("{test} (zstd part)"), "zstd not installed");
        return;
    }
    let zst = td.join("a.tar.zst");
    let out = Cmd::new("zstd").args(["-q", "-f", "-o"]).arg(&zst).arg(&a).run();
    assert!(out.success(), "{}", out.describe());
    let rows = [
        // Found by its magic: GNU tar reads the first record once to look, then the
        // decompressor's stream, so one checkpoint more than records.
        row(&zst, &["--checkpoint=1", "-xf", "{archive}", "-C", "{dest}"], |s| {
            expect(s.numbers().len() as u64 == s.records + 1, s, "one more than records")
        }),
        // Named by -I or --zstd: no look, one per record.
        row(&zst, &["--checkpoint=1", "-I", "zstd", "-tf", "{archive}"], |s| {
            expect(s.numbers().len() as u64 == s.records, s, "one a record")
        }),
        row(&zst, &["--checkpoint=3", "--zstd", "-xOf", "{archive}"], compared),
    ];
    assert_eq!(check_rows(&td, records, &rows), 3);
}

#[test]
fn bad_options_are_one_line() {
    let Some((td, a)) = set_up("bad_options_are_one_line") else {
        return;
    };
    for (args, message) in [
        (["--checkpoint-action=foo", "-tf", "{archive}"], "foo: unknown checkpoint action"),
        (["--checkpoint=abc", "-tf", "{archive}"], "--checkpoint value is not an integer"),
        (["--checkpoint-action=sleep=x", "-tf", "{archive}"], "sleep=x: not a valid timeout"),
    ] {
        let p = gnu::both(&td, &Case::new(&a, &args).only_stdout());
        assert_eq!(p.gnu.out.code, Some(2), "{}", p.gnu.out.describe());
        assert_eq!(p.gnu.out.stderr_lines()[0], format!("tar: {message}"));
        p.ours.out.expect_code(2);
        assert_eq!(
            p.ours.out.stderr_lines(),
            [format!("fastuntar: {message}")],
            "{}",
            p.ours.out.describe()
        );
        assert!(p.ours.out.stdout.is_empty());
    }
}
