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

use util::{Cmd, Input, Output, Rng, TestDir, fastuntar, have_tool, is_summary};

/// Whether `tar` is GNU tar (the comparisons need its way of counting), else a SKIP line.
fn gnu_tar_here(test: &str) -> bool {
    let out = Cmd::new("tar").arg("--version").run();
    let gnu = out.success() && out.stdout_str().contains("GNU tar");
    if !gnu {
        util::skip(test, "GNU tar missing");
    }
    gnu
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

/// GNU tar and fastuntar with the same arguments, each `{dir}` in them replaced by a fresh
/// directory of its own and each `{log}` by a file of its own; the archive from `stdin`
/// when given.
struct Pair {
    gnu: Output,
    ours: Output,
    logs: (PathBuf, PathBuf),
}

fn both(td: &TestDir, args: &[&str], stdin: Option<&Path>) -> Pair {
    let run = |mut cmd: Cmd, side: &str| {
        let dir = td.fresh(side);
        let log = td.join(format!("{}.log", dir.file_name().unwrap().to_str().unwrap()));
        for a in args {
            let a =
                a.replace("{dir}", dir.to_str().unwrap()).replace("{log}", log.to_str().unwrap());
            cmd.arg(a);
        }
        if let Some(p) = stdin {
            cmd.stdin(Input::File(p.to_path_buf()));
        }
        (cmd.current_dir(td.path()).run(), log)
    };
    let (gnu, gnu_log) = run(Cmd::new("tar"), "gnu");
    let (ours, ours_log) = run(fastuntar(), "ours");
    Pair { gnu, ours, logs: (gnu_log, ours_log) }
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

/// The same exit code, stdout and stderr (as `stderr` compares it); returns stderr.
fn same(p: &Pair, what: &str) -> String {
    let (g, o) = (stderr(&p.gnu), stderr(&p.ours));
    assert_eq!(
        p.gnu.code,
        p.ours.code,
        "{what}: exit codes\n{}\n{}",
        p.gnu.describe(),
        p.ours.describe()
    );
    assert_eq!(
        g,
        o,
        "{what}: stderr\n--- GNU tar ---\n{}\n--- fastuntar ---\n{}",
        p.gnu.describe(),
        p.ours.describe()
    );
    assert!(
        p.gnu.stdout == p.ours.stdout,
        "{what}: stdout\n{}\n{}",
        p.gnu.describe(),
        p.ours.describe()
    );
    g
}

/// The numbers of the default echo lines ("tar: Read checkpoint N").
fn numbers(stderr: &str) -> Vec<u64> {
    stderr.lines().filter_map(|l| l.strip_prefix("tar: Read checkpoint ")?.parse().ok()).collect()
}

#[test]
fn default_echo_counts_records_like_gnu_tar() {
    let test = "default_echo_counts_records_like_gnu_tar";
    if !gnu_tar_here(test) {
        return;
    }
    let td = TestDir::new(test);
    let a = archive(&td, "a.tar", &[]);
    let a = a.to_str().unwrap();
    let records = fs::metadata(a).unwrap().len() / 10240;
    assert!(records >= 30, "the archive spans {records} records");
    // -x reads every record; --checkpoint alone is every 10th.
    let x = same(&both(&td, &["--checkpoint", "-xf", a, "-C", "{dir}"], None), "-x");
    assert_eq!(numbers(&x), (1..=records / 10).map(|n| n * 10).collect::<Vec<_>>(), "{x}");
    let x3 = same(&both(&td, &["--checkpoint=3", "-xf", a, "-C", "{dir}"], None), "-x every 3");
    assert_eq!(numbers(&x3).len() as u64, records / 3, "{x3}");
    // -t of an archive file: the big member's records are passed over (GNU tar seeks), so
    // fewer checkpoints than records.
    let t = same(&both(&td, &["--checkpoint=1", "-tf", a], None), "-t");
    assert!((numbers(&t).len() as u64) < records - 20, "-t reads few records:\n{t}");
    // From a pipe nothing is passed over.
    let p = same(&both(&td, &["--checkpoint=1", "-tf", "-"], Some(Path::new(a))), "-t stdin");
    assert_eq!(numbers(&p).len() as u64, records, "{p}");
    // -O, and -x of a part (the rest is passed over).
    same(&both(&td, &["--checkpoint=2", "-xOf", a], None), "-O");
    same(
        &both(&td, &["--checkpoint=1", "--exclude=src/big", "-xf", a, "-C", "{dir}"], None),
        "--exclude",
    );
    same(&both(&td, &["--checkpoint=1", "-xf", a, "-C", "{dir}", "src/f4"], None), "MEMBER");
    // `-b 4`: records of 2048 bytes; those after the end marker are not read.
    let b4 =
        same(&both(&td, &["-b", "4", "--checkpoint=1", "-xf", a, "-C", "{dir}"], None), "-b 4");
    assert!(numbers(&b4).len() as u64 > 4 * records, "{b4}");
    same(&both(&td, &["-b", "4", "--checkpoint=1", "-tf", a], None), "-b 4 -t");
    same(
        &both(&td, &["--checkpoint=0x5", "--record-size=4K", "-tf", "-"], Some(Path::new(a))),
        "hex N",
    );
    // -q silences fastuntar's summary, never the checkpoints GNU tar (which has no -q) prints.
    let mut quiet = both(&td, &["--checkpoint=4", "-xf", a, "-C", "{dir}"], None);
    quiet.ours =
        fastuntar().args(["-q", "--checkpoint=4", "-xf", a, "-C"]).arg(td.fresh("q")).run();
    assert!(!quiet.ours.stderr.is_empty());
    same(&quiet, "-q");
}

#[test]
fn dots_like_gnu_tar() {
    let test = "dots_like_gnu_tar";
    if !gnu_tar_here(test) {
        return;
    }
    let td = TestDir::new(test);
    let a = archive(&td, "a.tar", &[]);
    let a = a.to_str().unwrap();
    // On stdout, between the names, no newline after the last: -t, -tv, -xv.
    same(&both(&td, &["--checkpoint=.5", "-tf", "-"], Some(Path::new(a))), "-t dots");
    same(&both(&td, &["--checkpoint=.1", "-tvf", a], None), "-tv dots");
    let xv = both(&td, &["--checkpoint=.5", "-xvf", a, "-C", "{dir}"], None);
    same(&xv, "-xv dots");
    let dots = xv.gnu.stdout.iter().filter(|&&b| b == b'.').count();
    assert!(dots >= 6 && xv.gnu.stdout.ends_with(b"."), "{}", xv.gnu.describe());
    // `--checkpoint=.` alone is every 10th; with -O the dots go to stderr.
    let o = both(&td, &["--checkpoint=.", "-xOf", a], None);
    same(&o, "-O dots");
    assert!(o.gnu.stderr.starts_with(b"...") && !o.gnu.stderr.contains(&b'\n'));
    // Dots to a reader that went away end nothing (GNU tar dies of SIGPIPE there): exit 0,
    // the tree whole.
    let d = td.fresh("gone");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = std::process::Command::new(util::fastuntar_path())
        .args(["-xf", a, "--checkpoint=.1", "-q", "-C"])
        .arg(&d)
        .stdout(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "dots to a closed pipe");
    assert!(d.join("src/big").metadata().is_ok_and(|m| m.len() == 300_000));
}

#[test]
fn actions_like_gnu_tar() {
    let test = "actions_like_gnu_tar";
    if !gnu_tar_here(test) {
        return;
    }
    let td = TestDir::new(test);
    let a = archive(&td, "a.tar", &[]);
    let a = a.to_str().unwrap();
    let e = same(
        &both(&td, &["--checkpoint=7", "--checkpoint-action=echo='%u %s'", "-xOf", a], None),
        "echo=",
    );
    let records = fs::metadata(a).unwrap().len() / 10240;
    let want: String = (1..=records / 7).map(|k| format!("tar: {} read\n", 7 * k)).collect();
    assert_eq!(e, want);
    // Several actions, in command-line order, `.N` among them; the escapes GNU tar prints
    // as they are; %T and totals (bytes read before the checkpoint's record).
    let several = same(
        &both(
            &td,
            &[
                "--checkpoint-action=echo=\"a\\tb %u\"",
                "--checkpoint-action=totals",
                "--checkpoint=.12",
                "--checkpoint-action=echo=[%T] [%{A,B}T] %% %q %{x}q %{ z",
                "-xOf",
                a,
            ],
            None,
        ),
        "several",
    );
    assert!(
        several.starts_with(
            "tar: a\tb 12\nTotal bytes read: 112640 (110KiB, RATE)\n.tar: [R: 112640 (110KiB, \
             RATE)] [A: 112640 (110KiB, RATE)] %% %q %q %{ z\n"
        ),
        "{several}"
    );
    // %{N}* pads the line, program name included, to column N.
    let p = both(
        &td,
        &["--checkpoint=10", "--checkpoint-action=echo=%u%{40}*|", "-tf", "-"],
        Some(Path::new(a)),
    );
    for out in [&p.gnu, &p.ours] {
        let lines = out.stderr_lines();
        assert!(
            !lines.is_empty() && lines.iter().all(|l| l.len() == 41 && l.ends_with('|')),
            "{}",
            out.describe()
        );
    }
    // `exec=`: the script runs at each checkpoint, with the TAR_* variables, and is waited for.
    let script = "--checkpoint-action=exec=echo $TAR_CHECKPOINT $TAR_SUBCOMMAND $TAR_FORMAT \
                  $TAR_BLOCKING_FACTOR $TAR_ARCHIVE >> {log}";
    let posix = archive(&td, "p.tar", &["--format=posix"]);
    for (args, stdin) in [
        (vec!["--checkpoint=3", script, "-xf", a, "-C", "{dir}"], None),
        (vec!["--checkpoint=1", script, "-tf", a], None),
        (vec!["--checkpoint=2", "-b", "8", script, "-tf", "-"], Some(Path::new(a))),
        (vec!["--checkpoint=1", script, "-xOf", posix.to_str().unwrap()], None),
    ] {
        let p = both(&td, &args, stdin);
        same(&p, "exec");
        let (g, o) =
            (fs::read_to_string(&p.logs.0).unwrap(), fs::read_to_string(&p.logs.1).unwrap());
        assert_eq!(g, o, "exec {args:?}: what the scripts saw");
        assert!(g.lines().count() >= 5, "{g}");
    }
}

#[test]
fn compressed_and_concatenated_like_gnu_tar() {
    let test = "compressed_and_concatenated_like_gnu_tar";
    if !gnu_tar_here(test) {
        return;
    }
    let td = TestDir::new(test);
    let a = archive(&td, "a.tar", &[]);
    // -i reads to the end of the input, and that last read counts.
    let mut cat = fs::read(&a).unwrap();
    cat.extend(fs::read(&a).unwrap());
    let cat_path = td.write("cat.tar", &cat);
    let cat_path = cat_path.to_str().unwrap();
    same(&both(&td, &["--checkpoint=1", "-itf", cat_path], None), "-i -t");
    same(&both(&td, &["--checkpoint=1", "-ixOf", "-"], Some(Path::new(cat_path))), "-i -O stdin");
    if !have_tool(test, "zstd") {
        util::skip(&format!("{test} (zstd part)"), "zstd not installed");
        return;
    }
    let zst = td.join("a.tar.zst");
    let out = Cmd::new("zstd").args(["-q", "-f", "-o"]).arg(&zst).arg(&a).run();
    assert!(out.success(), "{}", out.describe());
    let zst = zst.to_str().unwrap();
    // Found by its magic: GNU tar reads the first record once to look, then the
    // decompressor's stream, so one checkpoint more than records.
    let records = fs::metadata(&a).unwrap().len() / 10240;
    let auto = same(&both(&td, &["--checkpoint=1", "-xf", zst, "-C", "{dir}"], None), "zstd");
    assert_eq!(numbers(&auto).len() as u64, records + 1, "{auto}");
    // Named by -I or --zstd: no look, one per record.
    let named = same(&both(&td, &["--checkpoint=1", "-I", "zstd", "-tf", zst], None), "-I zstd");
    assert_eq!(numbers(&named).len() as u64, records, "{named}");
    same(&both(&td, &["--checkpoint=3", "--zstd", "-xOf", zst], None), "--zstd");
}

#[test]
fn bad_options_are_one_line() {
    let test = "bad_options_are_one_line";
    if !gnu_tar_here(test) {
        return;
    }
    let td = TestDir::new(test);
    let a = archive(&td, "a.tar", &[]);
    let a = a.to_str().unwrap();
    for (args, message) in [
        (["--checkpoint-action=foo", "-tf", a], "foo: unknown checkpoint action"),
        (["--checkpoint=abc", "-tf", a], "--checkpoint value is not an integer"),
        (["--checkpoint-action=sleep=x", "-tf", a], "sleep=x: not a valid timeout"),
    ] {
        let p = both(&td, &args, None);
        assert_eq!(p.gnu.code, Some(2), "{}", p.gnu.describe());
        assert_eq!(p.gnu.stderr_lines()[0], format!("tar: {message}"));
        p.ours.expect_code(2);
        assert_eq!(
            p.ours.stderr_lines(),
            [format!("fastuntar: {message}")],
            "{}",
            p.ours.describe()
        );
        assert!(p.ours.stdout.is_empty());
    }
}
