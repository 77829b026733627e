//! Stock machines (issue 9): real directory trees found on this machine at test time, packed
//! with GNU tar and extracted by fastuntar under the open-file limits users have (`ulimit -n
//! 1024`, the common default, and `64`), as root and as an unprivileged user (uid 65534), then
//! compared with GNU tar's own extraction of the same archive by the same user: paths, types,
//! contents, link targets, modes and file mtimes (directory mtimes too where the archive has
//! them).
//!
//! The trees: `/usr/share/perl` (1,400 entries in 210 directories, 18 MB as a tar) and
//! `/usr/share/zoneinfo` (1,300 entries, 370 symlinks, 2 MB), else `/usr/include` or
//! `/usr/share/man`, the first two present. Fewer than two is a SKIP line (a failure under CI,
//! `CI=true`); so is the unprivileged run when the tests do not run as root. Until issue 33
//! the trees were `/usr/share` (650 MB, 50,000 entries), `/usr/include` and the cargo
//! registry's sources, five extractions of each: 395 of the suite's seconds on this machine
//! under load, for what the two small trees find (every limit, user, backend and direct IO
//! meets one of them; the scale is `many_directories_in_bounded_fds_and_memory`'s).
//!
//! Matrix rows: none. This suite is the resource-limits dimension's own: each case sets the
//! limits it is about (`ulimit -n`, `-v`, a memory cgroup) and the writer counts and backends
//! that meet them.

use crate::util;

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};

use util::snapshot::{Compare, assert_same, snapshot};
use util::{Cmd, TestDir, fastuntar, have_tool, is_root, note, sh};

/// The unprivileged user the runs switch to (`nobody` on Debian).
const NOBODY: u32 = 65534;

/// Who runs an extraction.
#[derive(Clone, Copy, Debug)]
enum As {
    Root,
    Nobody,
}

impl As {
    fn apply(self, c: &mut Cmd) {
        if let As::Nobody = self {
            c.user(NOBODY, NOBODY);
        }
    }
}

/// A fresh empty directory the user may write into.
fn dest(td: &TestDir, who: As, prefix: &str) -> PathBuf {
    let d = td.fresh(prefix);
    if let As::Nobody = who {
        chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    d
}

/// Packs `dir`'s last component from its parent with GNU tar into `td/NAME.tar.zst`
/// (readable by everyone).
fn pack(td: &TestDir, dir: &Path, name: &str) -> PathBuf {
    pack_with(td, dir, name, "zstd -q -3", "zst")
}

/// `pack` through `compressor` (a shell command from stdin to stdout) into `NAME.tar.EXT`.
fn pack_with(td: &TestDir, dir: &Path, name: &str, compressor: &str, ext: &str) -> PathBuf {
    let archive = td.join(format!("{name}.tar.{ext}"));
    let parent = dir.parent().unwrap();
    let leaf = dir.file_name().unwrap();
    sh(&format!(
        "tar -C '{}' -cf - '{}' 2>/dev/null | {compressor} > '{}'",
        parent.display(),
        leaf.to_string_lossy(),
        archive.display()
    ));
    fs::set_permissions(&archive, fs::Permissions::from_mode(0o644)).unwrap();
    archive
}

/// Extracts `archive` with GNU tar as `who`, then with fastuntar as `who` for each run (open
/// files allowed, extra flags), and compares the trees.
fn same_as_gnu(td: &TestDir, test: &str, archive: &Path, who: As, runs: &[(u64, &[&str])]) {
    let reference = dest(td, who, "gnu");
    let mut gnu = Cmd::new("tar");
    // GNU tar finds the compression from the magic number (zstd, xz), as fastuntar does.
    gnu.extract(archive, &reference);
    who.apply(&mut gnu);
    let out = gnu.run();
    assert!(out.success(), "GNU tar failed on {}\n{}", archive.display(), out.describe());
    let want = snapshot(&reference);
    for &(n, args) in runs {
        let got_dir = dest(td, who, "fu");
        let mut c = fastuntar();
        c.arg("-x").arg(archive).arg("-C").arg(&got_dir).args(args).arg("-q");
        c.rlimit(libc::RLIMIT_NOFILE, n, n);
        who.apply(&mut c);
        let out = c.run();
        let ctx = format!("{test}: ulimit -n {n} as {who:?} {args:?}\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        // The roots were made by the test (their mtimes differ); implied directories get
        // the time of extraction in both.
        let cmp = Compare { root: false, ..Compare::extraction(td.started) };
        assert_same(&want, "GNU tar", &snapshot(&got_dir), "fastuntar", &cmp, &ctx);
        fs::remove_dir_all(&got_dir).unwrap();
    }
    fs::remove_dir_all(&reference).unwrap();
}

/// A scratch directory uid 65534 can reach and read (the unprivileged runs read archives
/// there), when GNU tar and `compressor` are installed (else a SKIP line and None).
fn scratch_for(test: &str, compressor: &str) -> Option<TestDir> {
    if !have_tool(test, "tar") || !have_tool(test, compressor) {
        return None;
    }
    Some(TestDir::for_users(test))
}

/// Real trees, in the order they are taken: the two first present are the suite's (a Debian
/// with perl-modules and tzdata has the first two; one building this crate has libc6-dev's
/// /usr/include).
const REAL_TREES: &[(&str, &str)] = &[
    ("usr-share-perl", "/usr/share/perl"),
    ("usr-share-zoneinfo", "/usr/share/zoneinfo"),
    ("usr-include", "/usr/include"),
    ("usr-share-man", "/usr/share/man"),
];

/// The suite's two real trees, with a name for each (fewer, with a SKIP line, where this
/// machine has not two of REAL_TREES).
fn trees(test: &str) -> Vec<(&'static str, PathBuf)> {
    let v: Vec<(&str, PathBuf)> = REAL_TREES
        .iter()
        .map(|&(name, p)| (name, PathBuf::from(p)))
        .filter(|(_, p)| fs::read_dir(p).is_ok_and(|mut d| d.next().is_some()))
        .take(2)
        .collect();
    if v.len() < 2 {
        util::skip(test, &format!("two of {REAL_TREES:?} are not here: {v:?}"));
    }
    v
}

/// Each real tree, as root and (when the tests run as root) as uid 65534, under `ulimit -n
/// 1024` and `ulimit -n 64`, buffered and with `--direct-io`, io_uring and portable, equals GNU
/// tar's extraction: every user, limit and writer meets one of the trees.
#[test]
fn real_trees_under_default_limits() {
    let test = "real_trees_under_default_limits";
    let Some(td) = scratch_for(test, "zstd") else { return };
    for (name, tree) in trees(test) {
        let archive = pack(&td, &tree, name);
        let who: &[As] = if is_root() { &[As::Root, As::Nobody] } else { &[As::Root] };
        if !is_root() {
            note(&format!("SKIP {test} [{name}] as uid {NOBODY}: the tests do not run as root"));
        }
        let direct: &[&str] = &["--direct-io"];
        let portable: &[&str] = &["--direct-io", "--io", "portable"];
        let first = name == trees(test)[0].0;
        for &w in who {
            let runs: &[(u64, &[&str])] = match (first, w) {
                (true, As::Root) => &[(1024, &[]), (64, portable)],
                (true, As::Nobody) => &[(64, direct)],
                (false, As::Root) => &[(64, direct)],
                (false, As::Nobody) => &[(1024, &[]), (64, &[])],
            };
            same_as_gnu(&td, test, &archive, w, runs);
        }
        fs::remove_file(&archive).unwrap();
    }
}

/// Many directories, each with one file, under `ulimit -n 64` (a cache of 4096 directory fds
/// once ran out of descriptors at directory 1,012 under the default 1024), in memory that does
/// not grow with their number: 30,000 directories take what 3,000 take (with a fixed 8 MiB
/// pool). Before, every directory's metadata was kept to the end: 200,000 took 118 MB, about
/// 0.6 KB a directory, which would put 30,000 16 MB above 3,000. (100,000 and 10,000 until
/// issue 33: three times the time for the same finding.) The quick tier extracts the 3,000
/// under `ulimit -n 64` only: removing 66,000 entries took 60 of the case's 100 s on this
/// machine's disk (ext4 mounted with `discard`, about 1 ms a directory, 2026-11-27), and the
/// memory comparison needs both sizes; the exhaustive tier runs both.
#[test]
fn many_directories_in_bounded_fds_and_memory() {
    let td = TestDir::new("many_directories_in_bounded_fds_and_memory");
    let sizes: &[usize] = match util::engine::tier() {
        util::engine::Tier::Exhaustive => &[3_000, 30_000],
        util::engine::Tier::Quick => &[3_000],
    };
    let mut rss = Vec::new();
    for &n in sizes {
        let mut t = util::rawtar::Tar::new();
        for i in 0..n {
            t.dir(format!("top/d{i:06}"));
            t.file(format!("top/d{i:06}/f"), b"");
        }
        let archive = td.write("dirs.tar.zst", util::rawtar::zstd(&t.finish(), 3));
        let d = td.fresh("out");
        let mut c = fastuntar();
        c.arg("-x").arg(&archive).arg("-C").arg(&d).args(["--memory", "8M", "-q"]).measure_rss();
        c.rlimit(libc::RLIMIT_NOFILE, 64, 64).timeout(std::time::Duration::from_secs(120));
        let out = c.run();
        assert_eq!(out.code, Some(0), "{}", out.describe());
        assert!(d.join(format!("top/d{:06}/f", n - 1)).is_file());
        rss.push(out.peak_rss_kib);
        fs::remove_dir_all(&d).unwrap();
    }
    match rss[..] {
        [_] => {}
        [Some(small), Some(large)] => assert!(
            large < small + (8 << 10) && large < 64 << 10,
            "peak RSS {small} KiB for 3,000 directories, {large} KiB for 30,000"
        ),
        _ => util::skip("many_directories peak RSS", "/usr/bin/time not installed"),
    }
}

/// A real tree as `.tar.xz` (the format of kernel and most source tarballs; fastuntar once
/// said "not a tar archive (bad header checksum)" of it), in blocks as `xz -T` writes them: the same tree as GNU tar's (`tar -xf`, which runs `xz -d`), with both writers and with
/// the blocks decoded on 2 threads; `-t` lists what `tar -t` lists, on 1 and 2 threads.
#[test]
fn a_real_tree_as_xz() {
    let test = "a_real_tree_as_xz";
    let Some(td) = scratch_for(test, "xz") else { return };
    // A small real tree (xz compresses ~5 MB/s at -6): /usr/share/zoneinfo (tzdata), else the
    // smaller of the suite's; in 512 KiB blocks, so that even 2 MB make several.
    let zoneinfo = Path::new("/usr/share/zoneinfo");
    let (name, tree) = if zoneinfo.is_dir() {
        ("zoneinfo", zoneinfo.to_path_buf())
    } else {
        match trees(test).into_iter().min_by_key(|(_, p)| walk_size(p)) {
            Some(t) => t,
            None => return,
        }
    };
    let archive = pack_with(&td, &tree, name, "xz -q -6 -T2 --block-size=512KiB", "xz");
    let direct: &[&str] = &["--direct-io"];
    let portable: &[&str] = &["--io", "portable"];
    let threads: &[&str] = &["--threads", "2", "--memory", "256M"];
    same_as_gnu(&td, test, &archive, As::Root, &[(1024, direct), (1024, portable), (64, threads)]);
    let mut gnu = Cmd::new("tar");
    gnu.arg("-tf").arg(&archive);
    let want = gnu.run();
    assert!(want.success(), "{}", want.describe());
    for args in [&["--threads", "1"][..], threads] {
        let mut c = fastuntar();
        c.arg("-t").arg(&archive).args(args);
        let out = c.run();
        assert_eq!(out.code, Some(0), "{}", out.describe());
        assert!(out.stdout == want.stdout, "{test}: -t {args:?} differs from tar -t on {name}");
    }
}

/// Bytes of regular files under `p` (not following symlinks).
fn walk_size(p: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// More writer threads than the open-file limit leaves descriptors for get fewer, with a
/// warning saying so: under `ulimit -n 20`, `--writer-threads 4` failed with EMFILE ("cannot
/// create: Too many open files") on the cargo registry's tree, each writer's cache of one
/// directory and one file in flight on top of the budget made for one writer.
#[test]
fn writer_threads_fit_the_open_file_limit() {
    let test = "writer_threads_fit_the_open_file_limit";
    let Some(td) = scratch_for(test, "zstd") else { return };
    // 300 directories in three levels, 10 files each: every writer walks and creates at once.
    let tree = td.join("tree");
    for i in 0..300 {
        let d = tree.join(format!("a{}/b{}/c{i}", i % 7, i % 11));
        fs::create_dir_all(&d).unwrap();
        for j in 0..10 {
            fs::write(d.join(format!("f{j}")), format!("{i}/{j}\n").repeat(j * 50)).unwrap();
        }
    }
    let archive = pack(&td, &tree, "tree");
    let who = if is_root() { As::Nobody } else { As::Root };
    let four: &[&str] = &["--writer-threads", "4"];
    let direct: &[&str] = &["--writer-threads", "4", "--direct-io"];
    let eight: &[&str] = &["--writer-threads", "8", "--io", "portable"];
    let runs: &[(u64, &[&str])] = &[(20, four), (20, direct), (20, eight), (64, eight)];
    // The quick tier: the first (the failure's own case; the two checks below run it too).
    // Each run makes and removes 3,300 entries (about 4 s of this machine's disk).
    let runs = match util::engine::tier() {
        util::engine::Tier::Exhaustive => runs,
        util::engine::Tier::Quick => &runs[..1],
    };
    same_as_gnu(&td, test, &archive, who, runs);

    let d = dest(&td, who, "said");
    let mut c = fastuntar();
    c.arg("-x").arg(&archive).arg("-C").arg(&d).args(four).arg("-q");
    c.rlimit(libc::RLIMIT_NOFILE, 20, 20);
    who.apply(&mut c);
    let out = c.run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let said = out.stderr_str();
    assert!(
        said.contains(
            "4 writer threads need more file descriptors than ulimit -n 20 leaves; using"
        ),
        "{}",
        out.describe()
    );
    // The default count (the CPUs) is cut without a word: nobody asked for it.
    let d = dest(&td, who, "quiet");
    let mut c = fastuntar();
    c.arg("-x").arg(&archive).arg("-C").arg(&d).arg("-q");
    c.rlimit(libc::RLIMIT_NOFILE, 20, 20);
    who.apply(&mut c);
    let out = c.run();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(out.stderr_str(), "", "{}", out.describe());
}

/// A memory cgroup of `limit` bytes for this test (v2 `memory.max`, else the v1 memory
/// controller's `memory.limit_in_bytes`), as its directory and the file a process joins it
/// through; None (with the reason) where none can be made here.
fn memory_cgroup(name: &str, limit: u64) -> Result<(PathBuf, &'static str), String> {
    let v2 = Path::new("/sys/fs/cgroup");
    let v2_has_memory = fs::read_to_string(v2.join("cgroup.subtree_control"))
        .is_ok_and(|s| s.split_whitespace().any(|c| c == "memory"));
    let (dir, limit_file, join) = if v2_has_memory {
        (v2.join(name), "memory.max", "cgroup.procs")
    } else if Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        (Path::new("/sys/fs/cgroup/memory").join(name), "memory.limit_in_bytes", "tasks")
    } else {
        return Err("no memory cgroup controller (v2 subtree_control or v1 mount)".into());
    };
    let _ = fs::remove_dir(&dir);
    fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    fs::write(dir.join(limit_file), limit.to_string())
        .map_err(|e| format!("cannot limit {}: {e}", dir.display()))?;
    Ok((dir, join))
}

/// Small machines and containers: where the process may use less than 256 MiB (a memory
/// cgroup's limit, `ulimit -v`), the default budget is a quarter of it (src/config.rs
/// `tight_memory`), as the `--json` summary's `pool_bytes` shows, and the extraction equals GNU
/// tar's. In a cgroup of 64 MiB the default 64 MiB pool was killed by the OOM killer (a tarball
/// of /usr/share to a slow disk, peak RSS 77 MB; GNU tar's is 5 MB).
#[test]
fn small_memory_limits_shrink_the_default_budget() {
    let test = "small_memory_limits_shrink_the_default_budget";
    let Some(td) = scratch_for(test, "zstd") else { return };
    let src = td.join("src");
    let mut rng = util::Rng::new(7);
    for i in 0..48 {
        let d = src.join(format!("d{}", i % 6));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(format!("f{i}")), rng.bytes(1 << 20)).unwrap();
    }
    let archive = pack(&td, &src, "src");
    let reference = td.fresh("gnu");
    let out = Cmd::new("tar").extract(&archive, &reference).run();
    assert!(out.success(), "{}", out.describe());
    let want = snapshot(&reference);
    let pool = |stdout: &str| -> u64 {
        let at = stdout.find("\"pool_bytes\":").expect("pool_bytes in --json") + 13;
        stdout[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
    };
    let check = |label: &str, out: &util::Output, d: &Path, most: u64| {
        let ctx = format!("{test} [{label}]\n{}", out.describe());
        assert_eq!(out.code, Some(0), "{ctx}");
        let bytes = pool(&out.stdout_str());
        assert!(bytes <= most, "{ctx}\npool_bytes {bytes}, more than {most}");
        let cmp = Compare { root: false, ..Compare::extraction(td.started) };
        assert_same(&want, "GNU tar", &snapshot(d), "fastuntar", &cmp, &ctx);
    };
    const MIB: u64 = 1 << 20;
    // No limit: the whole default budget.
    let d = td.fresh("free");
    let out = fastuntar().extract(&archive, &d).arg("--json").run();
    check("no limit", &out, &d, 64 * MIB);
    assert_eq!(pool(&out.stdout_str()), 64 * MIB, "{}", out.describe());
    // ulimit -v 192 MiB: a quarter, 48 MiB.
    let d = td.fresh("as");
    let mut c = fastuntar();
    c.extract(&archive, &d).arg("--json");
    c.rlimit(libc::RLIMIT_AS, 192 * MIB, 192 * MIB);
    check("ulimit -v 196608", &c.run(), &d, 48 * MIB);
    // A memory cgroup of 64 MiB (a container's limit): 16 MiB.
    if !is_root() {
        note(&format!("SKIP {test} [cgroup]: needs root"));
        return;
    }
    let (cg, join) = match memory_cgroup(&format!("fastuntar-{}", std::process::id()), 64 * MIB) {
        Ok(cg) => cg,
        Err(why) => {
            note(&format!("SKIP {test} [cgroup]: {why}"));
            return;
        }
    };
    let d = td.fresh("cg");
    let script = format!(
        "echo $$ > '{}' && exec '{}' -xf '{}' -C '{}' --json",
        cg.join(join).display(),
        util::fastuntar_path().display(),
        archive.display(),
        d.display()
    );
    let out = Cmd::new("sh").args(["-c", &script]).run();
    let _ = fs::remove_dir(&cg);
    check("memory cgroup of 64 MiB", &out, &d, 16 * MIB);
}
