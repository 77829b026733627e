//! GNU incremental archives (`tar -g SNAPSHOT -c`), restored with `-G` / `-g /dev/null`:
//! the levels extracted in order must leave the tree GNU tar 1.34 leaves (removed files and
//! directories, renamed directories, a swap through a temporary directory, a file replaced by
//! a directory and back), say the same `-v` lines ("Deleting ..."), and list the same with
//! `-t -vv`; under one writer (both backends) and several. Hostile lists stay inside DIR.

use crate::util;
use crate::util::engine::{Encoding, Matrix, Run, Set, THREADS_ONE_AND_MORE};

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use util::gnu::{self, Case, Ran};
use util::snapshot::snapshot;
use util::{Cmd, Output, TestDir, fastuntar, gnu_tar};

/// The rows this suite runs over (tests/util/engine.rs): one writer of each backend and four
/// (the purge is a barrier, and the one-writer path waits for it, so both shapes and both
/// backends matter), and the stock limits (the lists' renames and purges within 64
/// descriptors). Plain tars: no decoder row applies; direct IO changes nothing of what `-G`
/// removes or renames.
const MATRIX: Matrix = Matrix {
    writers: Some(&["portable", "uring"]),
    compressed: Set::All,
    threads: THREADS_ONE_AND_MORE,
    limits: true,
    decoders: None,
};

/// The runs of a case (`MATRIX`, in the current tier).
fn rows(test: &str) -> Vec<Run> {
    util::engine::runs(test, &MATRIX, &[Encoding::Plain])
}

fn write(root: &Path, rel: &str, data: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

/// Level 0, 1 and 2 of `src` made by GNU tar with `format`, changing the tree between them.
fn levels(td: &TestDir, format: &str) -> Vec<PathBuf> {
    let root = td.join(format!("tree-{format}"));
    let snap = td.join(format!("snap-{format}"));
    let dump = |n: usize| {
        let a = td.join(format!("{format}-l{n}.tar"));
        let out = gnu_tar([
            "-C",
            root.to_str().unwrap(),
            &format!("--format={format}"),
            "-g",
            snap.to_str().unwrap(),
            "-cf",
            a.to_str().unwrap(),
            "src",
        ]);
        assert!(out.success(), "{}", out.describe());
        // File times come from the kernel's coarse clock (a tick behind the dump's start
        // time): a file changed at once after a dump could look older than it, and GNU tar
        // would not archive it again.
        std::thread::sleep(std::time::Duration::from_millis(50));
        a
    };
    let s = |rel: &str| root.join("src").join(rel);
    for (rel, data) in [
        ("f1", "1"),
        ("keep", "k"),
        ("a/f2", "2"),
        ("a/b/f3", "3"),
        ("a/b/deep/f4", "4"),
        ("c/f5", "5"),
        ("t", "file that becomes a directory"),
        ("u/f6", "directory that becomes a file"),
        ("p/pf", "p"),
        ("q/qf", "q"),
        ("./dot name/x", "x"),
    ] {
        write(&root.join("src"), rel, data);
    }
    symlink("keep", s("sl")).unwrap();
    let l0 = dump(0);
    // Level 1: removals (a file, a symlink), a rename, a file replaced by a directory, a new
    // directory. No directory is removed in a level that makes one: GNU tar would take a
    // new directory that got a removed one's inode number for that one renamed.
    fs::remove_file(s("f1")).unwrap();
    fs::remove_file(s("sl")).unwrap();
    fs::rename(s("c"), s("c2")).unwrap();
    fs::remove_file(s("t")).unwrap();
    write(&root.join("src"), "t/inside", "now a directory");
    write(&root.join("src"), "new/n", "n");
    let l1 = dump(1);
    // Level 2: two directories swap names (through the temporary directory 'X' names), trees
    // go, a directory is replaced by a file.
    fs::rename(s("p"), s("tmp-swap")).unwrap();
    fs::rename(s("q"), s("p")).unwrap();
    fs::rename(s("tmp-swap"), s("q")).unwrap();
    fs::remove_dir_all(s("c2")).unwrap();
    fs::remove_dir_all(s("a/b")).unwrap();
    fs::remove_file(s("keep")).unwrap();
    fs::remove_dir_all(s("u")).unwrap();
    fs::write(s("u"), "now a file").unwrap();
    let l2 = dump(2);
    vec![l0, l1, l2]
}

/// `gnu::said_sorted`, without the error numbers our messages end with (GNU tar's do not).
fn said(out: &Output, prog: &str) -> Vec<String> {
    let unnumbered = |l: String| match l.rfind(" (os error ") {
        Some(i) if l.ends_with(')') => l[..i].to_string(),
        _ => l,
    };
    gnu::said_sorted(out, prog).into_iter().map(unnumbered).collect()
}

/// `said`, the member our lines name left out: GNU tar's name none.
fn said_unnamed(out: &Output, prog: &str) -> Vec<String> {
    let lines = said(out, prog).into_iter();
    let unnamed = |l: String| l.split_once(": ").map_or(l.clone(), |(_, rest)| rest.to_string());
    if prog == "tar" { lines.collect() } else { lines.map(unnamed).collect() }
}

/// The row of `FLAGS -f ARCHIVE` and then each of `then` into DEST: GNU tar run in DEST
/// (TESTING.md F17), fastuntar with `-C DEST`; exit status, stdout (`-v`'s "Deleting" lines)
/// and tree compared after each.
fn levels_row<'a>(archives: &[PathBuf], flags: &[&str]) -> Case<'a> {
    let args: Vec<&str> = flags.iter().copied().chain(["-f", "{archive}"]).collect();
    Case::new(&archives[0], &args).then(&archives[1..]).gnu_in_dest()
}

#[test]
fn levels_restore_like_gnu_tar() {
    let Some(td) = util::gnu::dir("levels_restore_like_gnu_tar", &[]) else { return };
    let mut rows = Vec::new();
    for format in ["gnu", "posix"] {
        let archives = levels(&td, format);
        // The swap goes through the temporary directory: the list says so.
        let listed = gnu_tar(["-tvvG", "-f", archives[2].to_str().unwrap()]);
        assert!(listed.stdout_str().contains("\nX src\n"), "{}", listed.stdout_str());
        // The flags spelled both ways; the writer rows on the first only (the second is the
        // same path).
        rows.push(levels_row(&archives, &["-xv", "-G"]).said(said).over(&MATRIX));
        rows.push(levels_row(&archives, &["-xv", "-g", "/dev/null"]).said(said));
        // The last level restored is the source tree as it was dumped.
        let names = |root: &Path| -> Vec<Vec<u8>> { snapshot(root).entries.into_keys().collect() };
        let restored = td.fresh("check");
        for a in &archives {
            let out = fastuntar().args(["-xG", "-f"]).arg(a).arg("-C").arg(&restored).run();
            assert!(out.success(), "{}", out.describe());
        }
        assert_eq!(names(&restored), names(&td.join(format!("tree-{format}"))), "{format}");
    }
    gnu::check(&td, &rows);
}

#[test]
fn lists_shown_like_gnu_tar() {
    let Some(td) = util::gnu::dir("lists_shown_like_gnu_tar", &[]) else { return };
    let archives: Vec<PathBuf> = ["gnu", "posix"].iter().flat_map(|f| levels(&td, f)).collect();
    let flags: [&[&str]; 5] =
        [&["-tvvG"], &["-tvG"], &["-tG"], &["-tvv"], &["-tvv", "-g", "/dev/null"]];
    let row = |(a, flags): (&PathBuf, &&[&str])| {
        let args: Vec<&str> = flags.iter().copied().chain(["-f", "{archive}"]).collect();
        Case::new(a, &args).only_stdout()
    };
    gnu::check(&td, archives.iter().flat_map(|a| flags.iter().map(move |f| (a, f))).map(row));
}

/// A raw archive of one GNU dumpdir member `name` with the list `list`.
fn dumpdir_archive(td: &TestDir, file: &str, members: &[(&str, &[u8])]) -> PathBuf {
    let mut t = util::rawtar::Tar::new();
    for (name, list) in members {
        // A GNU-format header: GNU tar reads a ustar one's `D` data as a plain directory's.
        let h = util::rawtar::Header::new(*name, b'D');
        t.entry(&util::rawtar::Header { magic: util::rawtar::Magic::Gnu, ..h }, list);
    }
    td.write(file, t.finish())
}

/// Lists that would reach outside DIR: a rename out of it is refused (the member named, exit
/// 2, nothing renamed or removed), a symlink in a purged directory is removed and not
/// followed, a directory member that is a symlink to outside is not purged through.
#[test]
fn hostile_lists_stay_inside() {
    let td = TestDir::new("incremental_hostile");
    let outside = td.join("outside");
    write(&outside, "precious", "p");
    write(&outside, "sub/precious", "p");
    let archive = dumpdir_archive(
        &td,
        "hostile.tar",
        &[("d/", b"Ykeep\0R../outside/sub\0Tstolen\0\0"), ("e/", b"Ykeep\0\0"), ("viasym/", b"\0")],
    );
    for run in rows("hostile_lists_stay_inside") {
        let row = run.name();
        let dest = td.fresh("dest");
        write(&dest, "d/keep", "k");
        write(&dest, "d/gone", "g");
        write(&dest, "e/keep", "k");
        symlink(&outside, dest.join("e/link-out")).unwrap();
        fs::create_dir_all(dest.join("e/sub")).unwrap();
        symlink(outside.join("sub"), dest.join("e/sub/link")).unwrap();
        symlink(&outside, dest.join("viasym")).unwrap();
        let out = run.cmd().arg("-xvG").arg("-f").arg(&archive).arg("-C").arg(&dest).run();
        let label = format!("{row:?}");
        assert_eq!(out.code, Some(2), "{label}: {}", out.describe());
        let err = out.stderr_str();
        assert!(
            err.lines()
                .any(|l| l.starts_with("fastuntar: d/: Malformed dumpdir: 'R'")
                    && l.contains("'..'")),
            "{label}: {err}"
        );
        // d is not purged (its list is refused), e is: the symlinks go, not what they point to.
        assert!(dest.join("d/gone").exists(), "{label}");
        assert!(!dest.join("e/link-out").exists() && !dest.join("e/sub").exists(), "{label}");
        assert!(dest.join("e/keep").exists(), "{label}");
        assert!(
            outside.join("precious").exists() && outside.join("sub/precious").exists(),
            "{label}"
        );
        assert!(!dest.join("stolen").exists(), "{label}");
        let stdout = out.stdout_str();
        assert!(stdout.contains("Deleting") && stdout.contains("e/link-out"), "{label}: {stdout}");
    }
}

/// Malformed lists (GNU tar's `dumpdir_ok`): the directory is not purged, the error reported
/// (exit 2) only when the directory exists, the member still extracted; as GNU tar.
#[test]
fn malformed_lists_like_gnu_tar() {
    let Some(td) = util::gnu::dir("malformed_lists_like_gnu_tar", &[]) else { return };
    let archive = dumpdir_archive(
        &td,
        "malformed.tar",
        &[("there/", b"Ra\0\0"), ("absent/", b"Ta\0\0"), ("x/", b"Yf\0\0")],
    );
    let prepare = |d: &Path| {
        for rel in ["there/stays", "x/f", "x/goes"] {
            write(d, rel, rel);
            util::tree::set_mtime(&d.join(rel), 1_500_000_000, 0);
        }
    };
    // GNU tar's lines name no member; ours do. The same errors, in the same words.
    let row = levels_row(&[archive], &["-xG"]).prepare(&prepare).said(said_unnamed);
    gnu::check(&td, [row.over(&MATRIX)]);
}

/// `--one-file-system`: what is mounted inside a purged directory is left alone (GNU tar's
/// "directory is on a different device: not purging"); without it, its removal fails as GNU
/// tar's does (a mount point cannot be removed), and neither empties it.
#[test]
fn one_file_system_keeps_mounts() {
    let Some(td) = util::root_test_dir("one_file_system_keeps_mounts", "mounts a tmpfs", &["tar"])
    else {
        return;
    };
    let archive = dumpdir_archive(&td, "m.tar", &[("m/", b"Ykeep\0\0")]);
    let mounted = |dest: &Path| {
        write(dest, "m/keep", "k");
        let mnt = dest.join("m/mnt");
        fs::create_dir_all(&mnt).unwrap();
        let mount = Cmd::new("mount").args(["-t", "tmpfs", "tmpfs"]).arg(&mnt).run();
        assert!(mount.success(), "{}", mount.describe());
        write(&mnt, "inside", "i");
        // The scene's own files: the same times in both trees.
        for f in ["m/keep", "m/mnt/inside"] {
            util::tree::set_mtime(&dest.join(f), 1_500_000_000, 0);
        }
    };
    for flags in [&["--one-file-system"][..], &[]] {
        let args: Vec<&str> =
            flags.iter().copied().chain(["-xG", "-f", "{archive}", "-C", "{dest}"]).collect();
        let row = Case::new(&archive, &args).prepare(&mounted).said(said);
        let both = gnu::both(&td, &row);
        let survived = [&both.gnu, &both.ours].map(|r| {
            let mnt = r.dest.join("m/mnt");
            let survived = mnt.join("inside").exists();
            Cmd::new("umount").arg("-l").arg(&mnt).run();
            survived
        });
        gnu::assert_none(&both.differences);
        // Removing a mount point fails either way (EBUSY, GNU tar's "Cannot remove"); with
        // the option nothing is tried.
        assert_eq!(survived, [true, true], "{flags:?}: GNU tar, then fastuntar");
        let said = said(&both.ours.out, "fastuntar");
        let warned = said.iter().any(|l| l.contains("on a different device: not purging"));
        assert_eq!(warned, !flags.is_empty(), "{flags:?}: {said:?}");
    }
}

/// An archive of `.` (`tar -g snap -cf l1.tar .`, the common way): two top-level directories
/// swap names, so the list of `./` makes its temporary directory in DIR itself (`X .`); a
/// file whose name is not UTF-8 goes. Against GNU tar (in DIR), under every row. Before, `X .`
/// made the whole list "malformed": the swap was not made, and the purges of `p` and `q` then
/// deleted the files the swap should have kept.
#[test]
fn a_swap_at_the_top_of_an_archive_of_dot() {
    let Some(td) = util::gnu::dir("a_swap_at_the_top_of_an_archive_of_dot", &[]) else { return };
    let root = td.join("root");
    write(&root, "p/pf", "p");
    write(&root, "q/qf", "q");
    write(&root, "z", "z");
    let odd = root.join(std::ffi::OsStr::from_bytes(b"bad\xff\tname"));
    fs::write(&odd, "not UTF-8").unwrap();
    let snap = td.join("snap");
    let dump = |n: usize| {
        let a = td.join(format!("dot-l{n}.tar"));
        let (r, s) = (root.to_str().unwrap(), snap.to_str().unwrap());
        let out = gnu_tar(["-C", r, "-g", s, "-cf", a.to_str().unwrap(), "."]);
        assert!(out.success(), "{}", out.describe());
        std::thread::sleep(std::time::Duration::from_millis(50));
        a
    };
    let l0 = dump(0);
    fs::rename(root.join("p"), root.join("t")).unwrap();
    fs::rename(root.join("q"), root.join("p")).unwrap();
    fs::rename(root.join("t"), root.join("q")).unwrap();
    fs::remove_file(root.join("z")).unwrap();
    fs::remove_file(&odd).unwrap();
    let l1 = dump(1);
    let listed = gnu_tar(["-tvvG", "-f", l1.to_str().unwrap()]);
    assert!(listed.stdout_str().contains("\nX .\n"), "{}", listed.stdout_str());
    let swapped = |_: &Ran, o: &Ran| -> Vec<String> {
        let pf = fs::read(o.dest.join("q/pf")).ok();
        (pf.as_deref() != Some(b"p"))
            .then(|| format!("the swap: q/pf is {pf:?}"))
            .into_iter()
            .collect()
    };
    let row = levels_row(&[l0, l1], &["-xvG"]).over(&MATRIX).also(&swapped);
    gnu::check(&td, [row]);
}

/// A list of millions of names costs its own size, not a heap allocation per name: 32 MiB of
/// two-byte entries (16 million names) purge a directory within 200 MB of peak RSS (about
/// 700 MB before, 1.4 GB for the 64 MiB the reader allows).
#[test]
fn a_list_of_millions_of_names_costs_its_size() {
    let td = TestDir::new("incremental_big_list");
    let mut list = b"Y\0".repeat(16 << 20);
    list.extend_from_slice(b"Ykeep\0\0");
    let archive = dumpdir_archive(&td, "big.tar", &[("d/", &list)]);
    let dest = td.fresh("dest");
    write(&dest, "d/keep", "k");
    write(&dest, "d/goes", "g");
    let out =
        fastuntar().arg("-xG").arg("-f").arg(&archive).arg("-C").arg(&dest).measure_rss().run();
    assert!(out.success(), "{}", out.describe());
    assert!(dest.join("d/keep").exists() && !dest.join("d/goes").exists());
    match out.peak_rss_kib {
        Some(kib) => assert!(kib < 200 * 1024, "peak RSS {kib} KiB"),
        None => util::note(
            "a_list_of_millions_of_names_costs_its_size: no /usr/bin/time, RSS not checked",
        ),
    }
}

/// Issue 27, finding 3: the temporary directories of swaps ('X', then 'R' and 'T' of the empty
/// name) count against `--max-files` like every directory the writer makes. Directories `o/`
/// and `d/`, then `d/` with a list of 2,000 of them, each renamed to `o/nN`, made 2,002
/// directories under `--max-files 10` and exited 0 (the temporary directory was a bare
/// mkdirat that the count never saw). Now the run stops there, exit 2, with the limit named.
#[test]
fn temporary_directories_count_against_max_files() {
    let td = TestDir::new("temporary_directories_count_against_max_files");
    let mut list = Vec::new();
    for i in 0..2000 {
        list.extend_from_slice(format!("Xd\0R\0To/n{i}\0").as_bytes());
    }
    list.push(0);
    let mut t = util::rawtar::Tar::new();
    t.dir("o/").dir("d/");
    let h = util::rawtar::Header::new("d/", b'D');
    t.entry(&util::rawtar::Header { magic: util::rawtar::Magic::Gnu, ..h }, &list);
    let archive = td.write("swaps.tar", t.finish());
    for run in rows("temporary_directories_count_against_max_files") {
        let row = run.name();
        let dest = td.fresh("dest");
        let out = run
            .cmd()
            .args(["-xG", "--max-files", "10", "-f"])
            .arg(&archive)
            .arg("-C")
            .arg(&dest)
            .run();
        let label = format!("{row:?}: {}", out.describe());
        assert_eq!(out.code, Some(2), "{label}");
        assert!(out.stderr_str().contains("--max-files"), "{label}");
        let made = util::entries_under(&dest);
        assert!(made <= 10, "{made} directories under --max-files 10; {label}");
    }
}

/// Issue 27, finding 6: renames through deep paths cost a walk of each path through the
/// writer's record of DIR, ~84 ns a component: lists of 7,850 renames each through a
/// 2,000-level path (63 MB of list, a few KB of .tar.zst) took 2.6 s of CPU a list. The
/// renames of a run's lists may go through 2^24 path components in all (~1.4 s); lists past
/// that are refused before anything is walked (reported, exit 2, not purged). Here three
/// lists of 62,800 renames through 250 levels (as many components as the issue's).
#[test]
fn deep_renames_are_bounded() {
    use std::io::Write;
    let td = TestDir::new("deep_renames_are_bounded");
    // 250 levels: a deeper tree took seconds to remove on this VM's disk (2,000: 5 s).
    let deep = format!("d/{}", "a/".repeat(248));
    let mut t = util::rawtar::Tar::new();
    t.gnu_long_name(format!("{deep}x/")).entry(&util::rawtar::Header::dir("placeholder/"), b"");
    let archive = td.join("deep.tar.zst");
    let mut z = zstd::stream::Encoder::new(fs::File::create(&archive).unwrap(), 1).unwrap();
    z.write_all(&t.unterminated()).unwrap();
    let renames = 62_800;
    // x to y and back: each list's renames, made, leave the tree as it was.
    let pairs = [format!("R{deep}x\0T{deep}y\0"), format!("R{deep}y\0T{deep}x\0")];
    let pair = |i: usize| &pairs[i % 2];
    let size = 3 + renames * pairs[0].len() + 1;
    let header = util::rawtar::Header::new("d/", b'D');
    let header = util::rawtar::Header { magic: util::rawtar::Magic::Gnu, ..header };
    for _ in 0..3 {
        z.write_all(&header.block(size as u64)).unwrap();
        z.write_all(b"Da\0").unwrap();
        for i in 0..renames {
            z.write_all(pair(i).as_bytes()).unwrap();
        }
        z.write_all(&[0]).unwrap();
        z.write_all(&vec![0; (512 - size % 512) % 512]).unwrap();
    }
    z.write_all(&[0; 1024]).unwrap();
    z.finish().unwrap();
    let dest = td.fresh("dest");
    let out = fastuntar()
        .args(["-xG", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(&dest)
        .measure_rss()
        .timeout(std::time::Duration::from_secs(120))
        .run();
    match out.cpu_seconds {
        Some(cpu) => {
            util::note(&format!("deep_renames_are_bounded: {cpu:.2} s of CPU"));
            assert!(cpu < 4.0, "{cpu:.1} s of CPU\n{}", out.describe());
        }
        None => util::note("deep_renames_are_bounded: no /usr/bin/time, CPU time not checked"),
    }
    assert_eq!(out.code, Some(2), "{}", out.describe());
    let refused = out
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("d/: not purged: the renames of this archive's lists would go"))
        .count();
    assert_eq!(refused, 3, "{}", out.describe());
    assert!(dest.join(&deep).join("x").is_dir(), "nothing renamed");
}
