//! Placement across several roots (issue 43, `--spread PREFIX=DIR1,DIR2,...`; src/policy/
//! route.rs, src/write/roots.rs).
//!
//! The roots together hold GNU tar's tree with PREFIX remapped (GNU tar extracts into one
//! directory; its `accounts/` is compared with the union of the roots), under the writer rows
//! that take different paths (one io_uring writer, several writer threads, the portable
//! writer, O_DIRECT); each root's share of the bytes is within 15 % of even; a run killed at
//! points spread over it resumes to that tree, and one whose root was emptied since is
//! refused (its probes are looked at in every root); hostile names cannot leave any root; bad
//! values and a rerun with other roots are refused in one line.

use crate::util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use util::rawtar::{Header, Tar};
use util::snapshot::{Compare, Snapshot, assert_same, snapshot};
use util::{Cmd, Rng, TestDir, have_tools};

const ROOTS: usize = 3;

/// A snapshot-shaped archive: `version`, `snapshots/`, an `accounts/` directory (its own
/// mtime) holding 240 files of 1 B to 200 KiB, a subdirectory, a symlink and a hard link
/// within it; then a file after `accounts/` so its mtime must wait for the archive to leave it.
fn archive() -> Vec<u8> {
    let mut t = Tar::new();
    let mut rng = Rng::new(43);
    t.entry(&Header::file("version").mtime(1_600_000_000), b"1.2.3\n");
    t.header(&Header::dir("snapshots/").mtime(1_600_000_001));
    t.entry(&Header::file("snapshots/100/100").mtime(1_600_000_002), &rng.bytes(5000));
    t.header(&Header::dir("accounts/").mode(0o750).mtime(1_600_000_003));
    for i in 0..240u64 {
        let size = 1 + (rng.next_u64() % (200 << 10)) as usize;
        let h = Header::file(format!("accounts/{i}.{}", i * 7)).mtime(1_600_001_000 + i);
        t.entry(&h, &rng.bytes(size));
        if i == 100 {
            t.header(&Header::dir("accounts/sub/").mode(0o700).mtime(1_600_000_004));
            t.entry(&Header::file("accounts/sub/inner").mtime(1_600_000_005), &rng.bytes(999));
        }
    }
    t.symlink("accounts/link", "0.0");
    t.hardlink("accounts/hard", "accounts/3.21");
    t.entry(&Header::file("status").mtime(1_600_000_006), b"done\n");
    t.finish()
}

/// GNU tar's tree of `tar`, and when it was made.
fn gnu(td: &TestDir, tar: &Path) -> (Snapshot, SystemTime) {
    let started = SystemTime::now() - std::time::Duration::from_secs(1);
    let gnu = td.fresh("gnu");
    let g = Cmd::new("tar").arg("-xf").arg(tar).arg("-C").arg(&gnu).run();
    assert!(g.success(), "GNU tar failed\n{}", g.describe());
    (snapshot(&gnu), started)
}

/// DIR and the roots of one run, fresh.
fn places(td: &TestDir) -> (PathBuf, Vec<PathBuf>) {
    let dest = td.fresh("dest");
    let roots = (0..ROOTS).map(|i| td.fresh(&format!("root{i}"))).collect();
    (dest, roots)
}

fn spread_arg(roots: &[PathBuf]) -> String {
    let dirs: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    format!("--spread=accounts/={}", dirs.join(","))
}

/// DIR's tree with each root's put back under `accounts/`: a directory each root holds must
/// be the same in all (mode, time), and is counted once.
fn merged(dest: &Path, roots: &[PathBuf], ctx: &str) -> Snapshot {
    let mut all = snapshot(dest);
    assert!(all.get("accounts").is_none(), "{ctx}: accounts/ landed in DIR too");
    let mut dirs: BTreeMap<Vec<u8>, util::snapshot::Entry> = BTreeMap::new();
    for root in roots {
        let s = snapshot(root).map_paths(|p| {
            Some(match p {
                b"." => b"accounts".to_vec(),
                p => [b"accounts/".as_slice(), p].concat(),
            })
        });
        for (p, e) in s.entries {
            if e.kind == util::snapshot::Kind::Dir {
                if let Some(seen) = dirs.get(&p) {
                    assert_eq!(
                        (seen.mode, seen.mtime),
                        (e.mode, e.mtime),
                        "{ctx}: {} differs between roots",
                        String::from_utf8_lossy(&p)
                    );
                }
                dirs.insert(p.clone(), e.clone());
            } else {
                assert!(
                    !all.entries.contains_key(&p),
                    "{ctx}: {} is in two roots",
                    String::from_utf8_lossy(&p)
                );
            }
            all.entries.insert(p, e);
        }
    }
    all
}

/// Bytes of regular files in each root.
fn shares(roots: &[PathBuf]) -> Vec<u64> {
    roots
        .iter()
        .map(|r| {
            snapshot(r)
                .entries
                .values()
                .filter(|e| e.kind == util::snapshot::Kind::File)
                .map(|e| e.size)
                .sum()
        })
        .collect()
}

/// Checks the link groups too: the hard link and its target in one root.
fn same_as_gnu(want: &Snapshot, started: SystemTime, dest: &Path, roots: &[PathBuf], ctx: &str) {
    let ours = merged(dest, roots, ctx);
    assert_same(
        want,
        "GNU tar",
        &ours,
        "fastuntar (roots merged)",
        &Compare::extraction(started),
        ctx,
    );
    let linked = roots.iter().any(|r| {
        let s = snapshot(r);
        s.link_groups()
            .iter()
            .any(|g| g.contains(b"hard".as_slice()) && g.contains(b"3.21".as_slice()))
    });
    assert!(linked, "{ctx}: the hard link is not a link to its target in one root");
}

/// The roots together hold GNU tar's tree, under each writer row that lands files its own
/// way, and each root's share of the bytes is within 15 % of even.
#[test]
fn roots_together_hold_gnu_tars_tree_each_an_even_share() {
    let test = "spread::roots_together_hold_gnu_tars_tree_each_an_even_share";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let tar = td.write("a.tar", archive());
    let (want, started) = gnu(&td, &tar);
    let rows: &[&[&str]] = &[
        &[],
        &["--writer-threads", "2"],
        &["--io", "portable"],
        &["--direct-io", "--direct-io-threshold", "64K"],
    ];
    for row in rows {
        let ctx = format!("row {row:?}");
        let (dest, roots) = places(&td);
        let r = util::fastuntar()
            .args(["-x", "-f"])
            .arg(&tar)
            .arg("-C")
            .arg(&dest)
            .arg(spread_arg(&roots))
            .args(*row)
            .run();
        r.expect_code(0);
        same_as_gnu(&want, started, &dest, &roots, &ctx);
        let bytes = shares(&roots);
        let even = bytes.iter().sum::<u64>() as f64 / ROOTS as f64;
        for b in &bytes {
            let off = (*b as f64 - even).abs() / even;
            assert!(off <= 0.15, "{ctx}: shares {bytes:?} are not within 15 % of even");
        }
    }
}

/// Killed at points spread over the run (members, the state protocol, the final stamps, the
/// end) and run again: the roots hold GNU tar's tree, the state is gone, and a rerun that
/// found a state says it resumed. A rerun with other roots is refused in one line.
#[test]
fn killed_anywhere_resumes_across_all_roots() {
    let test = "spread::killed_anywhere_resumes_across_all_roots";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let tar = td.write("a.tar", archive());
    let (want, started) = gnu(&td, &tar);
    let points: &[&str] = match util::engine::tier() {
        util::engine::Tier::Exhaustive => &[
            "member:20",
            "member:120",
            "member:200",
            "renamed:1",
            "renamed:3",
            "final-stamp:1",
            "end:1",
        ],
        util::engine::Tier::Quick => &["member:120", "renamed:2", "end:1"],
    };
    let run = |dest: &Path, roots: &[PathBuf], extra: &[&str]| {
        Cmd::new(util::fastuntar_path())
            .args(["-x", "-f"])
            .arg(&tar)
            .arg("-C")
            .arg(dest)
            .arg(spread_arg(roots))
            .args(["--writeback-every", "64K"])
            .args(extra)
            .run()
    };
    // The default writer at every point; DIR's several writer threads (the dispatcher in
    // front of the lanes) and the portable writer at one each.
    let rows: Vec<(&[&str], &[&str])> = vec![
        (&[], points),
        (&["--writer-threads", "2"], &points[..1]),
        (&["--io", "portable"], &points[points.len() - 1..]),
    ];
    let mut resumed = 0;
    for (row, points) in rows {
        for point in points {
            let ctx = format!("{row:?} killed at {point}");
            let (dest, roots) = places(&td);
            let kill = format!("--debug-kill-at={point}");
            let k = run(&dest, &roots, &[row, &[kill.as_str()]].concat());
            assert!(
                k.signal == Some(libc::SIGKILL) || k.code == Some(0),
                "{ctx}\n{}",
                k.describe()
            );
            let state = dest.join(".fastuntar-resume").exists();
            let r = run(&dest, &roots, row);
            r.expect_code(0);
            let said = r.stderr_str().contains("resumed at member");
            assert_eq!(said, state, "{ctx}: state {state}, resumed {said}\n{}", r.describe());
            resumed += usize::from(said);
            assert!(!dest.join(".fastuntar-resume").exists(), "{ctx}: the state is left");
            same_as_gnu(&want, started, &dest, &roots, &ctx);
        }
    }
    assert!(resumed > 0, "no rerun resumed: the kill points missed every state");

    // Other roots: refused in one line, nothing written.
    let (dest, roots) = places(&td);
    let k = run(&dest, &roots, &["--debug-kill-at=renamed:1"]);
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    let other: Vec<PathBuf> = roots.iter().rev().cloned().collect();
    let r = run(&dest, &other, &[]);
    r.expect_code(2);
    let lines = r.diagnostics();
    assert_eq!(lines.len(), 1, "{}", r.describe());
    assert!(lines[0].contains("cannot resume") && lines[0].contains("--spread"), "{lines:?}");
}

/// Killed once a resume point is written, then one root's files removed (its directories kept: an
/// operator's `rm` between the kill and the rerun): the rerun does not resume over the hole
/// (issue 43: probes were DIR's files only, and it did, silently missing that root's files).
/// It is refused in one line naming a file of that root, nothing written, as for DIR's files
/// (`resume::mismatches_are_refused_in_one_line_and_no_resume_starts_over`), and
/// `--no-resume` starts over to GNU tar's tree.
#[test]
fn a_root_emptied_after_the_kill_is_not_resumed() {
    let test = "spread::a_root_emptied_after_the_kill_is_not_resumed";
    if !have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let tar = td.write("a.tar", archive());
    let (want, started) = gnu(&td, &tar);
    let (dest, roots) = places(&td);
    let run = |extra: &[&str]| {
        Cmd::new(util::fastuntar_path())
            .args(["-x", "-f"])
            .arg(&tar)
            .arg("-C")
            .arg(&dest)
            .arg(spread_arg(&roots))
            .args(["--writeback-every", "64K"])
            .args(extra)
            .run()
    };
    // The first state: on a fast disk the whole run may write no second before its end.
    let k = run(&["--debug-kill-at=renamed:1"]);
    assert_eq!(k.signal, Some(libc::SIGKILL), "{}", k.describe());
    assert!(dest.join(".fastuntar-resume").exists(), "no state at the first point");
    let emptied = &roots[1];
    assert!(util::tree::remove_files(emptied) > 0, "the root held no file at the kill");
    let before: Vec<Snapshot> = [&dest].into_iter().chain(&roots).map(|d| snapshot(d)).collect();
    let r = run(&[]);
    r.expect_code(2);
    let lines = r.diagnostics();
    assert_eq!(lines.len(), 1, "{}", r.describe());
    let root = format!("{}/", emptied.display());
    for want in ["cannot resume", root.as_str(), "was changed or removed", "--no-resume"] {
        assert!(lines[0].contains(want), "the line says {want:?}: {lines:?}");
    }
    for (d, was) in [&dest].into_iter().chain(&roots).zip(&before) {
        assert_same(was, "before", &snapshot(d), "after", &Compare::exact(), "refused");
    }
    run(&["--no-resume"]).expect_code(0);
    same_as_gnu(&want, started, &dest, &roots, "a root emptied, then --no-resume");
}

/// Names that try to leave a root: `..`, absolute names, a symlink in a root pointing out of
/// it (absolute, or up through `..`) with a file written through it, a non-directory named
/// PREFIX, hard links across roots or out of them. Nothing lands outside DIR and the roots;
/// the refused members are named and the exit status is 2.
#[test]
fn hostile_names_cannot_leave_any_root() {
    let test = "spread::hostile_names_cannot_leave_any_root";
    let td = TestDir::new(test);
    let outside = td.fresh("outside");
    let mut t = Tar::new();
    t.header(&Header::dir("accounts/"));
    t.file("accounts/ok", b"fine");
    t.file("accounts/../../escape1", b"x");
    t.file("/accounts/fromabs", b"x");
    t.file("/escape2", b"x");
    t.symlink("accounts/abs", outside.display().to_string());
    t.file("accounts/abs/escape3", b"x");
    t.symlink("accounts/up", "..");
    t.file("accounts/up/escape4", b"x");
    t.symlink("accounts/upup", "../../outside");
    t.file("accounts/upup/escape5", b"x");
    // Once per root, so that some file lands in the root holding the symlink.
    for i in 0..ROOTS {
        t.file(format!("accounts/abs/again{i}"), b"x");
        t.file(format!("accounts/upup/again{i}"), b"x");
    }
    t.hardlink("accounts/h1", "version");
    t.hardlink("accounts/h2", "accounts/../../../etc/passwd");
    t.symlink("accounts", "/");
    let tar = td.write("h.tar", t.finish());
    let (dest, roots) = places(&td);
    let r = util::fastuntar()
        .args(["-x", "-f"])
        .arg(&tar)
        .arg("-C")
        .arg(&dest)
        .arg(spread_arg(&roots))
        .run();
    r.expect_code(2);
    assert_eq!(util::entries_under(&outside), 0, "something left the roots\n{}", r.describe());
    let parent = dest.parent().unwrap();
    for name in ["escape1", "escape2", "escape3", "escape4", "escape5"] {
        assert!(!parent.join(name).exists(), "{name} left the roots");
    }
    let said = r.stderr_str();
    for name in [
        "accounts/h1:",
        "accounts/h2:",
        "accounts/abs/escape3:",
        "accounts/up/escape4:",
        "accounts/upup/escape5:",
        "accounts/abs/again2:",
        "accounts: is a spread prefix",
    ] {
        assert!(said.contains(name), "{name} not named\n{said}");
    }
    // Nothing beneath a symlink became a directory in another root.
    for root in &roots {
        for link in ["abs", "up", "upup"] {
            assert!(!root.join(link).is_dir() || root.join(link).is_symlink(), "{link} made a dir");
        }
    }
    // What may land did, once: `ok`, and the absolute names with their `/` taken off.
    for name in ["ok", "fromabs"] {
        let landed: usize = roots.iter().map(|r| usize::from(r.join(name).exists())).sum();
        assert_eq!(landed, 1, "accounts/{name} in {landed} roots");
    }
    assert!(dest.join("escape2").exists(), "/escape2 is not in DIR\n{}", r.describe());
}

/// Bad values: one line naming the flag and why, exit 2, nothing created.
#[test]
fn bad_values_are_refused_in_one_line() {
    let test = "spread::bad_values_are_refused_in_one_line";
    let td = TestDir::new(test);
    let tar = td.write("a.tar", archive());
    let dest = td.path().join("dest");
    let r = |v: &str| format!("{}", td.path().join(v).display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--spread=accounts".into()], "expected PREFIX=DIR1,DIR2"),
        (vec![format!("--spread==/{}", r("a"))], "an empty PREFIX"),
        (vec![format!("--spread=../x={}", r("a"))], "may not hold '..'"),
        (vec![format!("--spread=accounts={},,{}", r("a"), r("b"))], "an empty DIR"),
        (vec![format!("--spread=accounts={},{}", r("a"), r("a"))], "is given twice"),
        (vec![format!("--spread=accounts={}", dest.display())], "holds DIR"),
        (vec![format!("--spread=accounts={}", dest.join("x").display())], "lies in DIR"),
        (
            vec![
                format!("--spread=accounts={}", r("a")),
                format!("--spread=accounts/x={}", r("b")),
            ],
            "overlaps another --spread's",
        ),
        (vec![format!("--spread=accounts={}", r("a")), "-G".into()], "cannot be used with -G"),
    ];
    for (args, says) in cases {
        let out =
            util::fastuntar().args(["-x", "-f"]).arg(&tar).arg("-C").arg(&dest).args(&args).run();
        out.expect_code(2);
        let lines = out.diagnostics();
        assert_eq!(lines.len(), 1, "{args:?}\n{}", out.describe());
        assert!(lines[0].contains("--spread") && lines[0].contains(says), "{args:?}: {lines:?}");
        assert!(!dest.exists() && !td.path().join("a").exists(), "{args:?}: something was made");
    }
}
