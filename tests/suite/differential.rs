//! Differential tests: fastuntar against GNU tar, archive by archive, tree by tree.
//!
//! # What "the same as GNU tar" means here
//!
//! fastuntar's defaults are GNU tar's: as root `--same-owner` and `--same-permissions` (`-p`).
//! Owners are compared only where a case asks for it, so the reference command is
//!
//! ```text
//! tar -xf ARCHIVE -C DIR --no-same-owner -p
//! ```
//!
//! * `--no-same-owner`: files belong to the extracting user (fastuntar's default for users
//!   other than root; as root it restores the archive's owners, which only the owner cases
//!   compare).
//! * `-p`: permission bits exactly as archived, umask not applied. It is already the default
//!   for root; passing it keeps the comparison fair when the suite runs as another user.
//!   Note GNU tar keeps setuid/setgid/sticky bits even with `--no-same-owner` (it chmods after
//!   creating, and only re-applies them after a chown when it chowns); checked on GNU tar 1.34:
//!   a 04755 member extracts as 04755 root-owned. fastuntar must do the same (bits & 07777).
//! * Directories that the archive implies but does not contain are created by both tools with
//!   mode 0777 & ~umask and the time of extraction; such "now" mtimes are not compared (see
//!   `snapshot::Compare::recent`), their modes are.
//! * Compared per path (raw bytes): type, mode & 07777, mtime (s + ns) for files, directories
//!   and symlinks, size, contents, symlink target, and hard-link groups. uid/gid only in the
//!   owner cases (`same_owner`).
//!
//! The peer corpus (`../shared/corpus/peer`) has GNU tar 1.34's verdict per archive in its
//! README; where GNU tar fails fastuntar must fail too, unless `INTENDED` below says otherwise.

use crate::util;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use util::engine::{self, Encoding, Matrix, ZSTD_64K, for_each_run};
use util::gnu::Case;
use util::rawtar::{self, Header, Magic, Num, Tar};
use util::snapshot::{Compare, assert_same, diff, snapshot};
use util::tree::{self, TreeOpts};
use util::{Cmd, Input, TestDir, fastuntar, have_tool, have_tools};

/// The rows this suite runs over (tests/util/engine.rs): a plain tar under every writer row, a
/// compressed one under every decoder row with the two sweep writers (hundreds of archives: the
/// decoder rows meet the writer rows in hostile.rs and corrupt.rs too); one writer and the
/// default; the stock limits (a real tree's directories and files in flight within 64
/// descriptors).
const MATRIX: Matrix = Matrix::SWEEP;

/// The peer corpus's rows: 102 real archives, whose differences are in how they are read (the
/// formats, the framings, the decoders), so the two sweep writers (both backends, buffered and
/// every file direct) with every framing and decoder row. The other writer rows, the writer
/// threads and the stock limits meet the generated trees (`format_*`, `sparse_*`,
/// `strip_components`, ...) and hostile.rs's cases; on the corpus they were 12 of its 17 runs
/// an archive, 47 s of the suite's 100 (2026-11-27, load 6).
const CORPUS: Matrix = Matrix {
    writers: Some(&["portable", "uring+direct(threshold 0)"]),
    threads: &["writers default"],
    limits: false,
    ..MATRIX
};

/// The rows for a flag that only the writers carry out (owners, chown): every writer row, a
/// plain tar (the decoder hands the same members to every writer).
const WRITER_ROWS: Matrix = Matrix::WRITERS;

// =============================================================================================
// (a) The peer corpus

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Extracts,
    Fails,
    /// GNU tar cannot read it (lz4); the reference is `lz4 -dc X | tar -xf -`.
    NotApplicable,
}

/// What fastuntar is meant to do with a corpus archive where it differs from GNU tar.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// GNU tar fails, fastuntar may extract; then its tree must equal this reference shell
    /// pipeline (`{a}` is the archive, `{d}` the output directory).
    MayExtractLike(&'static str),
    /// Same exit code as GNU tar; only the `allowed` differences.
    Exit0,
}

/// An intended difference from GNU tar on one corpus archive.
struct Intended {
    archive: &'static str,
    expect: Expect,
    /// Tree differences allowed, as prefixes of `snapshot::diff` lines
    /// (`PATH: what in reference, what in fastuntar`).
    allowed: &'static [&'static str],
    reason: &'static str,
}

/// Intended differences from GNU tar 1.34 on the peer corpus, with the reason for each.
const INTENDED: &[Intended] = &[
    Intended {
        archive: "test_compat_zstd_2.tar.zst",
        expect: Expect::MayExtractLike("zstd -dc {a} | tar -xf - -C {d} --no-same-owner -p"),
        allowed: &[],
        reason: "the zstd stream starts with a skippable frame (magic 0x184D2A50); GNU tar's \
                 compression sniffing does not know that magic and reads the file as a plain tar. \
                 fastuntar detects zstd skippable frames, so it decodes it like `zstd -dc | tar -x`",
    },
    Intended {
        archive: "test_patterns_2.tar",
        expect: Expect::Exit0,
        allowed: &["tmp/foo/bar: mtime "],
        reason: "fastuntar sets every directory's mtime after all contents, so tmp/foo/bar keeps its \
                 archived mtime. GNU tar 1.34 applies a directory's metadata as soon as a member \
                 outside it is extracted (tmp/foo/baz), so the later tmp/foo/bar/baz bumps the \
                 directory's mtime to the time of extraction",
    },
    Intended {
        archive: "test_read_format_gtar_sparse_skip_entry.tar",
        expect: Expect::Exit0,
        allowed: &["a: size 10737418243 in reference, 10737418244 in fastuntar"],
        reason: "the PAX header says GNU.sparse.realsize=10737418244 and the sparse map's last \
                 segment ends at 10737418243; fastuntar sizes the file to realsize (as libarchive's \
                 own test for this archive expects), GNU tar 1.34 stops at the last data segment",
    },
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/peer")
}

/// Parses the README's `| \`archive\` | verdict |` table.
fn parse_verdicts(readme: &str) -> BTreeMap<String, Verdict> {
    let mut m = BTreeMap::new();
    for line in readme.lines() {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        if cols.len() < 4 || !cols[1].starts_with('`') {
            continue;
        }
        let name = cols[1].trim_matches('`').to_string();
        let v = cols[2];
        let verdict = if v.starts_with("extracts") {
            Verdict::Extracts
        } else if v.starts_with("fails") {
            Verdict::Fails
        } else if v.starts_with("n/a") {
            Verdict::NotApplicable
        } else {
            continue;
        };
        m.insert(name, verdict);
    }
    m
}

/// The shell pipeline that extracts `a` into `d` the reference way.
fn reference_cmd(name: &str, intended: Option<&Intended>) -> String {
    if let Some(Intended { expect: Expect::MayExtractLike(cmd), .. }) = intended {
        return cmd.to_string();
    }
    if name.ends_with(".lz4") {
        // GNU tar 1.34 here has no lz4 reader: decompress with the lz4 CLI instead. lz4 exits 1
        // on junk after the last frame (test_compat_lz4_2.tar.lz4) although it decoded every
        // frame, so its status is ignored: tar's decides.
        "{ lz4 -dc {a} || true; } | tar -xf - -C {d} --no-same-owner -p".to_string()
    } else {
        "tar -xf {a} -C {d} --no-same-owner -p".to_string()
    }
}

fn tools_for(name: &str) -> &'static [&'static str] {
    if name.ends_with(".lz4") {
        &["lz4"]
    } else if name.ends_with(".zst") {
        &["zstd"]
    } else if name.ends_with(".gz") {
        &["gzip"]
    } else if name.ends_with(".bz2") {
        &["bzip2"]
    } else {
        &[]
    }
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// The runs of a corpus archive: a tar also in 1021-byte zstd frames (its verdict is the
/// tar's); a `.tar.zst` as built, under every decoder row; gzip, bzip2 and LZ4 as built under
/// the writer rows only (`--threads` is about zstd).
fn corpus_encodings(name: &str) -> &'static [Encoding] {
    if name.ends_with(".tar") || name.ends_with(".pax") {
        engine::PLAIN_AND_SMALL_FRAMES
    } else if name.ends_with(".zst") {
        &[Encoding::AsBuilt]
    } else {
        &[Encoding::Plain]
    }
}

/// Runs every corpus archive that `select` accepts through the reference and through fastuntar
/// in every run of `corpus_encodings`.
fn run_corpus(test: &str, select: impl Fn(&str) -> bool) {
    let dir = corpus_dir();
    let readme = dir.join("README.md");
    if !readme.is_file() {
        util::skip(
            test,
            &format!("no peer corpus at {} (shared/ is not beside the repo)", dir.display()),
        );
        return;
    }
    if !have_tool(test, "tar") {
        return;
    }
    let verdicts = parse_verdicts(&fs::read_to_string(&readme).unwrap());
    let mut archives: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md" && select(n))
        .collect();
    archives.sort();
    assert!(!archives.is_empty(), "{test}: no archives selected in {}", dir.display());

    let td = TestDir::new(test);
    let mut failures: Vec<String> = Vec::new();
    let mut matched: BTreeMap<String, usize> = BTreeMap::new();
    let mut considered = 0;
    let mut skipped = Vec::new();
    for name in &archives {
        let archive = dir.join(name);
        let Some(&verdict) = verdicts.get(name) else {
            failures.push(format!("{name}: not in the README's verdict table"));
            continue;
        };
        // A missing tool: a SKIP line here, a failure under CI (`have_tools`).
        if !util::have_tools(&format!("{test}: {name}"), tools_for(name)) {
            skipped.push(format!("{name} (needs {:?})", tools_for(name)));
            continue;
        }
        considered += 1;
        let intended = INTENDED.iter().find(|i| i.archive == name);
        let reference = td.fresh("ref");
        let cmd = reference_cmd(name, intended)
            .replace("{a}", &shell_quote(&archive))
            .replace("{d}", &shell_quote(&reference));
        let started = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
        let gnu = Cmd::new("bash").args(["-c", &format!("set -o pipefail; {cmd}")]).run();
        let gnu_ok = gnu.success();
        let expect_extract = match (verdict, intended.map(|i| i.expect)) {
            (_, Some(Expect::MayExtractLike(_))) => {
                if !gnu_ok {
                    failures
                        .push(format!("{name}: the intended reference failed\n{}", gnu.describe()));
                    continue;
                }
                None // may extract (then must match) or fail
            }
            (Verdict::Extracts | Verdict::NotApplicable, _) => {
                if !gnu_ok {
                    util::note(&format!(
                        "NOTE {test}: {name}: the README says GNU tar extracts it, but here the \
                         reference failed:\n{}",
                        gnu.describe()
                    ));
                }
                Some(true)
            }
            (Verdict::Fails, _) => {
                if gnu_ok {
                    util::note(&format!(
                        "NOTE {test}: {name}: the README says GNU tar fails, but here it extracted"
                    ));
                }
                Some(false)
            }
        };
        let want = snapshot(&reference);
        let bytes = util::read(&archive);
        for run in engine::runs(name, &CORPUS, corpus_encodings(name)) {
            let input = match run.encoding {
                Encoding::Plain | Encoding::AsBuilt => archive.clone(),
                e => td.write(format!("input{}", e.suffix()), e.encode(&bytes)),
            };
            let out_dir = td.fresh("ours");
            let out = run.cmd_on(&input).arg("-x").arg("-C").arg(&out_dir).run();
            let ctx = format!("{name} [{}]", run.name());
            let code = out.code.unwrap_or(-1);
            let result: Result<(), String> = (|| {
                match expect_extract {
                    Some(false) => {
                        if code == 0 {
                            return Err(format!(
                                "GNU tar fails on it, fastuntar exited 0 (list it in INTENDED with a \
                                 reason if that is right)\n{}",
                                out.describe()
                            ));
                        }
                        return Ok(());
                    }
                    None if code != 0 => return Ok(()), // allowed to fail
                    _ => {}
                }
                if code != 0 {
                    return Err(format!("expected exit 0 like the reference\n{}", out.describe()));
                }
                let allowed = intended.map_or(&[][..], |i| i.allowed);
                let mut d = diff(
                    &want,
                    "reference",
                    &snapshot(&out_dir),
                    "fastuntar",
                    &Compare::extraction(started),
                );
                d.retain(|line| !allowed.iter().any(|a| line.starts_with(a)));
                if !d.is_empty() {
                    return Err(format!(
                        "tree differs from the reference ({cmd}):\n  {}\n{}",
                        d.join("\n  "),
                        out.describe()
                    ));
                }
                Ok(())
            })();
            match result {
                Ok(()) => *matched.entry(run.name()).or_default() += 1,
                Err(e) => failures.push(format!("{ctx}: {e}")),
            }
            let _ = fs::remove_dir_all(&out_dir);
        }
        let _ = fs::remove_dir_all(&reference);
    }
    let mut summary = format!(
        "{test}: {considered} of {} archives compared; matched GNU tar (or an intended \
         difference) per run (encoding; engine):",
        archives.len()
    );
    for (cfg, n) in &matched {
        summary += &format!("\n  {cfg:58} {n}");
    }
    for s in &skipped {
        summary += &format!("\nSKIP {test}: {s}");
    }
    util::note(&summary);
    if !failures.is_empty() {
        panic!("{test}: {} failure(s):\n\n{}", failures.len(), failures.join("\n\n"));
    }
}

/// Plain and zstd-compressed corpus archives.
#[test]
fn peer_corpus_tar_and_zstd() {
    run_corpus("peer_corpus_tar_and_zstd", |n| {
        !(n.ends_with(".lz4") || n.ends_with(".gz") || n.ends_with(".bz2"))
    });
}

/// gzip, bzip2 and lz4 corpus archives.
/// LATER ISSUE: gzip/bzip2/lz4 input support is being added to fastuntar; this test is
/// expected to fail until it lands.
#[test]
fn peer_corpus_gzip_bzip2_lz4() {
    run_corpus("peer_corpus_gzip_bzip2_lz4", |n| {
        n.ends_with(".lz4") || n.ends_with(".gz") || n.ends_with(".bz2")
    });
}

#[test]
fn corpus_readme_table_is_complete() {
    let dir = corpus_dir();
    let Ok(readme) = fs::read_to_string(dir.join("README.md")) else {
        util::skip(
            "corpus_readme_table_is_complete",
            &format!("no peer corpus at {}", dir.display()),
        );
        return;
    };
    let verdicts = parse_verdicts(&readme);
    assert!(verdicts.len() > 50, "parsed only {} verdicts", verdicts.len());
    for e in fs::read_dir(&dir).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n != "README.md" {
            assert!(verdicts.contains_key(&n), "{n} missing from the README table");
        }
    }
    for i in INTENDED {
        assert!(
            verdicts.contains_key(i.archive),
            "INTENDED names {}, which is not in the corpus",
            i.archive
        );
        assert!(!i.reason.is_empty());
    }
}

// =============================================================================================
// (b) Generated archives

/// A generated tree `base/t` and archives of it.
struct Generated {
    td: TestDir,
    base: PathBuf,
}

impl Generated {
    fn new(test: &str, opts: TreeOpts) -> Generated {
        let td = TestDir::new(test);
        let base = td.join("src");
        fs::create_dir(&base).unwrap();
        tree::build(&base.join("t"), opts);
        Generated { td, base }
    }

    /// `tar -cf NAME -C base t` with `flags`; returns the archive path.
    fn tar(&self, name: &str, flags: &[&str]) -> PathBuf {
        let out = self.td.join(name);
        let r = Cmd::new("tar")
            .args(flags)
            .arg("-cf")
            .arg(&out)
            .arg("-C")
            .arg(&self.base)
            .arg("t")
            .run();
        assert!(r.success(), "creating {name} with GNU tar failed\n{}", r.describe());
        out
    }
}

/// Runs `body` with a generated tree (`opts`) and `a.tar` of it made by GNU tar with `format`,
/// when `tools` are on PATH (else only their SKIP lines).
fn with_generated(
    test: &str,
    tools: &[&str],
    opts: TreeOpts,
    format: &str,
    body: impl FnOnce(&Generated, &Path),
) {
    if have_tools(test, tools) {
        let g = Generated::new(test, opts);
        let a = g.tar("a.tar", &[format]);
        body(&g, &a);
    }
}

/// Extracts with the reference pipeline `reference` (`{a}` archive, `{d}` dir), then with
/// fastuntar in every run of `matrix` (`MATRIX`, or a case's rows: it says why) (`-x ARCHIVE
/// -C DIR` + `extra`), comparing trees. `encodings` None: a tar stream also runs in small zstd
/// frames (`engine::encodings_of`).
#[allow(clippy::too_many_arguments)]
fn compare_with_reference(
    test: &str,
    td: &TestDir,
    archive: &Path,
    reference: &str,
    extra: &[&str],
    cmp_owner: bool,
    matrix: &Matrix,
    encodings: Option<&'static [Encoding]>,
) {
    let ref_dir = td.fresh("ref");
    let cmd =
        reference.replace("{a}", &shell_quote(archive)).replace("{d}", &shell_quote(&ref_dir));
    let started = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    let r = Cmd::new("bash").args(["-c", &format!("set -o pipefail; {cmd}")]).run();
    assert!(r.success(), "{test}: the reference extraction failed\n{}", r.describe());
    let want = snapshot(&ref_dir);
    assert!(want.entries.len() > 1, "{test}: the reference extracted nothing");
    let cmp = Compare { owner: cmp_owner, ..Compare::extraction(started) };
    let bytes = util::read(archive);
    let encodings = encodings.unwrap_or_else(|| engine::encodings_of(&bytes));
    let inputs: Vec<PathBuf> = (encodings.iter())
        .map(|e| match e {
            Encoding::Plain | Encoding::AsBuilt => archive.to_path_buf(),
            _ => {
                td.write(format!("{}{}", e.name().replace(' ', "-"), e.suffix()), e.encode(&bytes))
            }
        })
        .collect();
    for_each_run(test, matrix, encodings, |run| {
        let input = &inputs[encodings.iter().position(|e| *e == run.encoding).unwrap()];
        let d = td.fresh("ours");
        let out = run.cmd_on(input).arg("-x").arg("-C").arg(&d).args(extra).run();
        out.expect_code(0);
        assert_same(
            &want,
            "GNU tar",
            &snapshot(&d),
            "fastuntar",
            &cmp,
            &format!("{test} [{}]\n{}", run.name(), out.describe()),
        );
        let _ = fs::remove_dir_all(&d);
    });
}

const GNU_X: &str = "tar -xf {a} -C {d} --no-same-owner -p";

/// GNU tar without ownership, then libarchive's set-id rule, which fastuntar follows on purpose
/// (see `setid_checked` in src/extract.rs): without `--same-owner` a root extraction owns every
/// file, so S_ISUID stays only where the archive's uid is ours (0) and S_ISGID only where its
/// gid is. GNU tar would leave a set-uid-root file for a member of uid 1000.
const GNU_X_SETID_RULE: &str = "tar -xf {a} -C {d} --no-same-owner -p && \
    tar --numeric-owner -tvf {a} | while read -r perm ids size day time name; do \
      case $perm in ???[sS]*) [ \"${ids%%/*}\" = 0 ] || chmod u-s {d}/\"$name\";; esac; \
      case $perm in ??????[sS]*) [ \"${ids##*/}\" = 0 ] || chmod g-s {d}/\"$name\";; esac; \
    done";

fn format_case(test: &str, opts: TreeOpts, flags: &[&str]) {
    if !have_tool(test, "tar") {
        return;
    }
    let g = Generated::new(test, opts);
    let a = g.tar("a.tar", flags);
    compare_with_reference(test, &g.td, &a, GNU_X, &[], false, &MATRIX, None);
}

/// One test per GNU tar `-c` format (and sparse format) of the generated tree: `name: tree
/// options, creation flags`.
macro_rules! format_cases {
    ($($name:ident: $opts:ident, [$($flag:literal),*];)*) => {$(
        #[test]
        fn $name() {
            format_case(stringify!($name), TreeOpts::$opts, &[$($flag),*]);
        }
    )*};
}

format_cases! {
    format_gnu: FULL, ["--format=gnu"];
    format_pax: FULL, ["--format=pax"];
    format_ustar: USTAR, ["--format=ustar"];
    format_oldgnu: FULL, ["--format=oldgnu"];
    sparse_gnu: FULL, ["--format=gnu", "--sparse"];
    sparse_oldgnu: FULL, ["--format=oldgnu", "--sparse"];
    sparse_posix_0_0: FULL, ["--format=posix", "--sparse", "--sparse-version=0.0"];
    sparse_posix_0_1: FULL, ["--format=posix", "--sparse", "--sparse-version=0.1"];
    sparse_posix_1_0: FULL, ["--format=posix", "--sparse", "--sparse-version=1.0"];
}

#[test]
fn format_v7() {
    // v7 marks directories only by a trailing '/', has no FIFOs, no prefix field and no
    // owner names, and GNU tar refuses members that do not fit: archive only the parts of the
    // ustar tree that fit (no FIFO, no non-ASCII or long names).
    if !have_tool("format_v7", "tar") {
        return;
    }
    let g = Generated::new("format_v7", TreeOpts::USTAR);
    let out = g.td.join("a.tar");
    let r = Cmd::new("tar")
        .args(["--format=v7", "-cf"])
        .arg(&out)
        .arg("-C")
        .arg(&g.base)
        .args(["t/sizes", "t/modes", "t/nested", "t/links", "t/hard", "t/empty"])
        .run();
    assert!(r.success(), "creating a v7 archive failed\n{}", r.describe());
    compare_with_reference("format_v7", &g.td, &out, GNU_X, &[], false, &MATRIX, None);
}

fn zstd_file(src: &Path, dst: &Path, flags: &str) {
    util::sh(&format!("zstd {flags} -q -c < {} > {}", shell_quote(src), shell_quote(dst)));
}

#[test]
fn zstd_level1() {
    let test = "zstd_level1";
    with_generated(test, &["tar", "zstd"], TreeOpts::FULL, "--format=pax", |g, a| {
        let z = g.td.join("a.tar.zst");
        zstd_file(a, &z, "-1");
        compare_with_reference(test, &g.td, &z, GNU_X, &[], false, &MATRIX, None);
    });
}

/// `zstd --long=31` fed through a pipe: the frame has no content size and declares a 2 GiB
/// window. GNU tar's `zstd -d` refuses that without `--long=31`, and fastuntar without
/// `--max-window 2G` (its default is zstd's 128M), so both are told.
#[test]
fn zstd_long_window() {
    let test = "zstd_long_window";
    with_generated(test, &["tar", "zstd"], TreeOpts::FULL, "--format=gnu", |g, a| {
        let z = g.td.join("a.tar.zst");
        util::sh(&format!(
            "cat {} | zstd --long=31 -1 -q -c > {}",
            shell_quote(a),
            shell_quote(&z)
        ));
        let info = Cmd::new("zstd").args(["-lv"]).arg(&z).run();
        assert!(
            info.stdout_str().contains("2147483648") || info.stderr_str().contains("2147483648"),
            "expected a 2 GiB window:\n{}",
            info.describe()
        );
        compare_with_reference(
            test,
            &g.td,
            &z,
            "zstd -d --long=31 -q -c {a} | tar -xf - -C {d} --no-same-owner -p",
            &["--max-window", "2G"],
            false,
            &MATRIX,
            None,
        );
    });
}

/// Two zstd frames, concatenated; the split is in the middle of a member, off any block edge.
#[test]
fn zstd_two_frames() {
    let test = "zstd_two_frames";
    with_generated(test, &["tar", "zstd"], TreeOpts::FULL, "--format=gnu", |g, a| {
        let bytes = util::read(a);
        let cut = bytes.len() / 2 + 77;
        let (p1, p2) = (g.td.write("p1", &bytes[..cut]), g.td.write("p2", &bytes[cut..]));
        let (z1, z2) = (g.td.join("p1.zst"), g.td.join("p2.zst"));
        zstd_file(&p1, &z1, "-1");
        zstd_file(&p2, &z2, "-3");
        let mut z = util::read(&z1);
        z.extend(util::read(&z2));
        let zp = g.td.write("two-frames.tar.zst", &z);
        compare_with_reference(test, &g.td, &zp, GNU_X, &[], false, &MATRIX, None);
    });
}

/// A zstd frame followed by a skippable frame and another frame.
#[test]
fn zstd_skippable_frame_between() {
    let test = "zstd_skippable_frame_between";
    with_generated(test, &["tar", "zstd"], TreeOpts::USTAR, "--format=ustar", |g, a| {
        let bytes = util::read(a);
        let cut = bytes.len() / 3;
        let mut z = util::rawtar::zstd(&bytes[..cut], 1);
        z.extend_from_slice(&[0x5e, 0x2a, 0x4d, 0x18, 5, 0, 0, 0, 1, 2, 3, 4, 5]);
        z.extend(util::rawtar::zstd(&bytes[cut..], 1));
        let zp = g.td.write("skippable.tar.zst", &z);
        compare_with_reference(
            test,
            &g.td,
            &zp,
            "zstd -dc {a} | tar -xf - -C {d} --no-same-owner -p",
            &[],
            false,
            &MATRIX,
            None,
        );
    });
}

// --- Standard input and tar's spellings -------------------------------------------------------

/// `tar -xf archive -C REF --no-same-owner -p` into a fresh REF; returns REF.
fn gnu_extract(g: &Generated, archive: &Path) -> PathBuf {
    let d = g.td.fresh("ref");
    let mut tar = Cmd::new("tar");
    let r = tar.extract(archive, &d).args(["--no-same-owner", "-p"]).run();
    assert!(r.success(), "{}", r.describe());
    d
}

/// Extracts `archive` with GNU tar, then with fastuntar run as `args` (with `{a}` and `{d}`
/// replaced) under the default writer, and compares.
fn spelling_case(
    test: &str,
    g: &Generated,
    archive: &Path,
    args: &[&str],
    input: Option<Input>,
    cwd_is_dest: bool,
) -> util::Output {
    let started = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    let ref_dir = gnu_extract(g, archive);
    let d = g.td.fresh("ours");
    let mut cmd = fastuntar();
    for a in args {
        match *a {
            "{a}" => cmd.arg(archive),
            "{d}" => cmd.arg(&d),
            other => cmd.arg(other),
        };
    }
    if let Some(i) = input {
        cmd.stdin(i);
    }
    if cwd_is_dest {
        cmd.current_dir(&d);
    }
    let out = cmd.run();
    out.expect_code(0);
    assert_same(
        &snapshot(&ref_dir),
        "GNU tar",
        &snapshot(&d),
        "fastuntar",
        &Compare::extraction(started),
        &format!("{test}\n{}", out.describe()),
    );
    out
}

fn spelling_setup(test: &str) -> Option<(Generated, PathBuf, PathBuf)> {
    if !have_tools(test, &["tar", "zstd"]) {
        return None;
    }
    let g = Generated::new(test, TreeOpts::USTAR);
    let a = g.tar("a.tar", &["--format=gnu"]);
    let z = g.td.join("a.tar.zst");
    zstd_file(&a, &z, "-1");
    Some((g, a, z))
}

#[test]
fn stdin_dash() {
    let Some((g, a, z)) = spelling_setup("stdin_dash") else { return };
    for archive in [&a, &z] {
        let file = || Input::File(archive.clone());
        // The last: through a pipe rather than a file.
        let cases: [(&str, &[&str], Input); 3] = [
            ("stdin_dash -x -", &["-x", "-", "-C", "{d}"], file()),
            ("stdin_dash -xf -", &["-xf", "-", "-C", "{d}"], file()),
            ("stdin_dash pipe", &["-x", "-", "-C", "{d}"], Input::Bytes(util::read(archive))),
        ];
        for (label, args, input) in cases {
            spelling_case(label, &g, archive, args, Some(input), false);
        }
    }
}

/// Standard input arriving in small pieces: the first read may return fewer bytes than a
/// magic number; compression detection must not depend on it.
#[test]
fn stdin_trickle() {
    let Some((g, a, z)) = spelling_setup("stdin_trickle") else { return };
    for archive in [&a, &z] {
        let bytes = util::read(archive);
        let chunks = vec![
            bytes[..1].to_vec(),
            bytes[1..3].to_vec(),
            bytes[3..700].to_vec(),
            bytes[700..].to_vec(),
        ];
        spelling_case(
            "stdin_trickle",
            &g,
            archive,
            &["-x", "-", "-C", "{d}"],
            Some(Input::trickle(chunks)),
            false,
        );
    }
}

#[test]
fn spellings() {
    let Some((g, a, z)) = spelling_setup("spellings") else { return };
    // (label, args, whether DIR is the current directory rather than `-C`)
    let cases: &[(&str, &[&str], bool)] = &[
        ("spellings -xf", &["-xf", "{a}", "-C", "{d}"], false),
        ("spellings -f", &["-f", "{a}", "-C", "{d}"], false),
        ("spellings --file", &["--extract", "--file", "{a}", "--directory", "{d}"], false),
        ("spellings -C first", &["-C", "{d}", "-xf", "{a}"], false),
        ("spellings -p --no-same-owner", &["-xpf", "{a}", "-C", "{d}", "--no-same-owner"], false),
        ("spellings default dir", &["-xf", "{a}"], true),
        ("spellings --memory", &["-xf", "{a}", "-C", "{d}", "--memory", "64K"], false),
    ];
    for archive in [&a, &z] {
        for &(label, args, cwd_is_dest) in cases {
            spelling_case(label, &g, archive, args, None, cwd_is_dest);
        }
        let q =
            spelling_case("spellings -q", &g, archive, &["-xqf", "{a}", "-C", "{d}"], None, false);
        assert!(
            q.stdout.is_empty() && q.diagnostics().is_empty(),
            "-q printed something\n{}",
            q.describe()
        );
    }
}

/// `-C DIR` where DIR does not exist yet: it is created.
#[test]
fn creates_missing_dest() {
    let Some((g, a, _)) = spelling_setup("creates_missing_dest") else { return };
    let d = g.td.join("not-yet");
    let out = fastuntar().extract(&a, &d).run();
    out.expect_code(0);
    assert!(d.join("t/sizes/f513").is_file(), "{}", out.describe());
    // Created like `mkdir`: 0777 minus the umask (GNU tar's implied directories get the same).
    let assert_created_like_mkdir = |dir: &Path, out: &util::Output| {
        let mode = fs::metadata(dir).unwrap().permissions().mode() & 0o7777;
        let want = 0o777 & !util::umask();
        assert_eq!(mode, want, "mode of the created DIR: {mode:04o}\n{}", out.describe());
    };
    assert_created_like_mkdir(&d, &out);
    let nested = g.td.join("not/yet/either");
    let out = fastuntar().extract(&a, &nested).run();
    if out.success() {
        assert_created_like_mkdir(&nested, &out);
    }
}

/// `-v` prints member names on stdout, like `tar -xv`.
#[test]
fn verbose_lists_members() {
    let Some((g, a, z)) = spelling_setup("verbose_lists_members") else { return };
    let listing = Cmd::new("tar").args(["--quoting-style=escape", "-tf"]).arg(&a).run();
    assert!(listing.success());
    let names: Vec<String> = listing
        .stdout_str()
        .lines()
        .filter(|n| n.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'\\'))
        .map(str::to_string)
        .collect();
    assert!(names.len() > 30, "too few plain names listed: {names:?}");
    for (archive, spelling) in [(&a, "-xvf"), (&z, "-xvf"), (&a, "-xv")] {
        let args: Vec<&str> = if spelling == "-xv" {
            vec!["-xv", "{a}", "-C", "{d}"]
        } else {
            vec![spelling, "{a}", "-C", "{d}"]
        };
        let out = spelling_case("verbose_lists_members", &g, archive, &args, None, false);
        let printed: Vec<String> =
            out.stdout_str().lines().map(|l| l.trim_end_matches('/').to_string()).collect();
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| !printed.iter().any(|p| p == n.trim_end_matches('/')))
            .collect();
        assert!(
            missing.is_empty(),
            "{spelling}: names missing from stdout: {missing:?}\n{}",
            out.describe()
        );
    }
}

#[test]
fn strip_components() {
    let test = "strip_components";
    with_generated(test, &["tar"], TreeOpts::FULL, "--format=gnu", |g, a| {
        for n in ["1", "2"] {
            compare_with_reference(
                &format!("{test} {n}"),
                &g.td,
                a,
                &format!("{GNU_X} --strip-components {n}"),
                &["--strip-components", n],
                false,
                &MATRIX,
                None,
            );
        }
    });
}

/// As root, default extraction restores uid/gid like GNU tar's default (`--same-owner`);
/// `--no-same-owner` leaves files to the extracting user, like GNU tar `--no-same-owner`.
#[test]
fn same_owner() {
    let test = "same_owner";
    if !have_tool(test, "tar") || !util::have_root(test, "chown to build the tree") {
        return;
    }
    let g = Generated::new(test, TreeOpts { owners: true, ..TreeOpts::FULL });
    let a = g.tar("a.tar", &["--format=pax"]);
    compare_with_reference(
        &format!("{test} (default)"),
        &g.td,
        &a,
        "tar -xf {a} -C {d}",
        &[],
        true,
        &MATRIX,
        None,
    );
    // The flags: what each writer does with the owners (the default above met every row).
    let plain = &[Encoding::Plain];
    for (label, reference, flags) in [
        ("--no-same-owner", GNU_X_SETID_RULE, &["--no-same-owner"][..]),
        ("--same-owner", "tar -xf {a} -C {d} --same-owner -p", &["--same-owner"]),
        // The last of --same-owner / --no-same-owner wins.
        ("--same-owner --no-same-owner", GNU_X_SETID_RULE, &["--same-owner", "--no-same-owner"]),
    ] {
        let name = format!("{test} ({label})");
        compare_with_reference(&name, &g.td, &a, reference, flags, true, &WRITER_ROWS, Some(plain));
    }
}

/// The tree as archived equals the tree GNU tar extracts, file by file (a check of the suite
/// itself: if this fails the generated tree has something GNU tar cannot round-trip, and the
/// other comparisons would be meaningless for it).
#[test]
fn generated_tree_round_trips_through_gnu_tar() {
    let test = "generated_tree_round_trips_through_gnu_tar";
    with_generated(test, &["tar"], TreeOpts::FULL, "--format=pax", |g, a| {
        let d = gnu_extract(g, a);
        let src = snapshot(&g.base.join("t"));
        let got = snapshot(&d.join("t"));
        assert_same(&src, "source", &got, "GNU tar", &Compare::default(), test);
        // The source really has what the suite promises.
        let names: Vec<&[u8]> = src.entries.keys().map(|k| k.as_slice()).collect();
        assert!(names.iter().any(|n| std::str::from_utf8(n).is_err()), "no non-UTF-8 name");
        assert!(names.iter().any(|n| n.len() > 255), "no path over 255 bytes");
        assert!(src.link_groups().iter().any(|g| g.len() == 3), "no 3-link group");
        assert!(src.entries.values().any(|e| e.mtime.0 < 0), "no pre-1970 mtime");
        let sparse = src.get("sparse/holes").unwrap();
        assert!(
            sparse.allocated < sparse.size / 2,
            "sparse/holes is not sparse on this file system"
        );
    });
}

// =============================================================================================
// (c) Hand-made archives: member orders and header encodings that GNU tar's writer never
// produces, compared with what GNU tar extracts from them.

/// Writes `archive` and compares fastuntar with GNU tar on it, under every writer config.
fn handmade(test: &str, archive: Vec<u8>) {
    let Some(td) = util::gnu::dir(test, &[]) else { return };
    let a = td.write("a.tar", &archive);
    compare_with_reference(test, &td, &a, GNU_X, &[], false, &MATRIX, None);
}

#[test]
fn handmade_later_members_replace_earlier_ones() {
    let mut t = Tar::new();
    t.file("f", b"first version\n");
    t.file("f", b"second, longer version\n");
    t.entry(&Header::file("g").mode(0o600).mtime(1_000), b"long first version of g\n");
    t.entry(&Header::file("g").mode(0o644).mtime(2_000), b"short\n");
    t.symlink("s", "one");
    t.symlink("s", "two");
    t.file("link-then-file", b"x\n");
    t.symlink("link-then-file", "f");
    t.file("link-then-file", b"file again\n");
    t.header(&Header::dir("d").mode(0o700).mtime(3_000));
    t.file("d/inside", b"inside\n");
    t.header(&Header::dir("d").mode(0o750).mtime(4_000));
    t.file("x", b"file, then an empty dir\n");
    t.header(&Header::dir("x").mode(0o711).mtime(5_000));
    handmade("handmade_later_members_replace_earlier_ones", t.finish());
}

/// A hard link keeps the inode it was made to; a later member of the target's name replaces
/// the name only.
#[test]
fn handmade_hardlink_then_target_replaced() {
    let mut t = Tar::new();
    t.entry(&Header::file("a").mode(0o640).mtime(1_000), b"original a\n");
    t.hardlink("b", "a");
    t.entry(&Header::file("a").mode(0o600).mtime(2_000), b"new a\n");
    t.hardlink("c", "a");
    t.hardlink("d", "b");
    handmade("handmade_hardlink_then_target_replaced", t.finish());
}

/// Directories: implied parents, contents before the directory member, a read-only directory
/// with contents, directory mtimes set after their contents.
#[test]
fn handmade_directory_order() {
    let mut t = Tar::new();
    t.file("implied/parent/f", b"parents implied\n");
    t.file("later/f", b"before its directory member\n");
    t.header(&Header::dir("later").mode(0o700).mtime(1_000));
    t.header(&Header::dir("ro").mode(0o555).mtime(2_000));
    t.file("ro/f", b"in a read-only dir\n");
    t.header(&Header::dir("ro/sub/").mode(0o500).mtime(3_000));
    t.file("ro/sub/g", b"deeper\n");
    t.header(&Header::dir("trailing-slash/").mtime(4_000));
    // A v7-style directory: type '0' with a name ending in '/'.
    t.header(&Header { typeflag: 0, ..Header::file("v7dir/").mode(0o751).mtime(5_000) });
    t.file("v7dir/f", b"in a v7 dir\n");
    handmade("handmade_directory_order", t.finish());
}

/// Numeric fields in their rarer encodings: base-256 mtimes (negative and large), PAX times
/// with fractions (negative too), PAX size and uid/gid overriding the header, octal fields
/// terminated by a space instead of a NUL, no terminator at all.
#[test]
fn handmade_numeric_encodings() {
    let mut t = Tar::new();
    t.entry(
        &Header { mtime: Num::Base256(-86_400 * 365 * 20), ..Header::file("b256-negative") },
        b"1\n",
    );
    t.entry(&Header { mtime: Num::Base256(1 << 33), ..Header::file("b256-large") }, b"2\n");
    t.pax(&[("mtime", "1234567890.123456789")]).file("pax-ns", b"3\n");
    t.pax(&[("mtime", "-1.25")]).file("pax-negative-fraction", b"4\n");
    t.pax(&[("mtime", "987654321")]).file("pax-integer", b"5\n");
    t.pax(&[("size", "6")]).entry(&Header::file("pax-size").size(Num::Octal(0)), b"sixsix");
    t.pax(&[("uid", "4000000000"), ("gid", "3000000000")]).file("pax-big-ids", b"7\n");
    t.entry(&Header { mode: Num::Raw(b"000644 ".to_vec()), ..Header::file("space-term") }, b"8\n");
    t.entry(&Header { mode: Num::Raw(b"00000755".to_vec()), ..Header::file("no-term") }, b"9\n");
    t.entry(
        &Header { mode: Num::Raw(b"     644".to_vec()), ..Header::file("leading-spaces") },
        b"a\n",
    );
    t.entry(&Header { magic: Magic::Gnu, ..Header::file("gnu-magic").mtime(1_111) }, b"b\n");
    t.entry(&Header { magic: Magic::V7, ..Header::file("v7-magic").mtime(2_222) }, b"c\n");
    handmade("handmade_numeric_encodings", t.finish());
}

/// Long names and link targets through GNU L/K, PAX path/linkpath, and the ustar prefix.
#[test]
fn handmade_long_names() {
    let long_dir = "p".repeat(150);
    let mut t = Tar::new();
    t.member(&Header::file(format!("gnu/{}", "L".repeat(200))), b"via L\n");
    t.member(&Header::symlink("gnu-symlink", "T".repeat(300)), b"");
    t.member(&Header::file(format!("gnu/{}", "A".repeat(120))), b"hard-link target\n");
    t.member(&Header::hardlink("gnu-hardlink", format!("gnu/{}", "A".repeat(120))), b"");
    t.pax(&[("path", format!("pax/{}", "P".repeat(230)))]).file("ignored", b"via PAX\n");
    t.pax(&[("linkpath", "Q".repeat(400))]).symlink("pax-symlink", "ignored");
    t.entry(
        &Header { prefix: long_dir.clone().into_bytes(), ..Header::file("n".repeat(90)) },
        b"prefix\n",
    );
    t.header(&Header::dir(format!("{long_dir}/")));
    handmade("handmade_long_names", t.finish());
}

/// PAX global headers, and a PAX header followed by a GNU long name for the same member (the
/// PAX path wins in both tools).
#[test]
fn handmade_extension_header_mixtures() {
    let mut t = Tar::new();
    t.entry(
        &Header::new("pax_global_header", rawtar::PAX_GLOBAL),
        &rawtar::pax_record("comment", "hello"),
    );
    t.file("after-global", b"1\n");
    t.pax(&[("path", "pax-wins")]).gnu_long_name("gnu-loses").file("header-loses", b"2\n");
    t.pax(&[("comment", "only a comment")]).file("commented", b"3\n");
    t.pax(&[("path", "x/y/z")]).header(&Header::dir("ignored-dir"));
    handmade("handmade_extension_header_mixtures", t.finish());
}

/// One large file (more than the pool, many chunks) in several containers, against GNU tar,
/// also with a pool of 256 KiB so buffers are recycled many times per file.
#[test]
fn large_file_integrity() {
    let test = "large_file_integrity";
    util::with_tools(test, &["tar", "zstd"], |td| {
        let src = td.join("src/big");
        fs::create_dir_all(&src).unwrap();
        fs::write(src.join("f"), tree::contents((80 << 20) + 7, 99)).unwrap();
        fs::write(src.join("g"), tree::contents(3 << 20, 98)).unwrap();
        let a = td.join("big.tar");
        let r = Cmd::new("tar")
            .args(["--format=pax", "-cf"])
            .arg(&a)
            .arg("-C")
            .arg(td.join("src"))
            .arg("big")
            .run();
        assert!(r.success(), "{}", r.describe());
        let z = td.join("big.tar.zst");
        zstd_file(&a, &z, "-1");
        let _ = fs::remove_dir_all(td.join("src"));
        // The tar under the writer rows; compressed, below, under the decoder rows.
        let plain = &[Encoding::Plain];
        compare_with_reference(test, td, &a, GNU_X, &[], false, &MATRIX, Some(plain));
        compare_with_reference(
            &format!("{test} (zstd)"),
            td,
            &z,
            GNU_X,
            &["--memory", "256K"],
            false,
            &MATRIX,
            None,
        );
    });
}

/// Regression (found by the multi-frame corpus runs, issue 11): GNU sparse archives of the
/// peer corpus in 4096-byte zstd frames hung with `--threads 4`. The tar stage kept the pool
/// buffers of small sparse segments in its unsent batch (flushed at BATCH_OPS ops or
/// BATCH_BYTES bytes, not at a number of buffers) and then blocked reading the next frame,
/// whose worker waited in `Pool::get_timeout` for a buffer only the batch could give back. The
/// batch was then sent before it held more buffers than the decoder left; since decoded
/// frames have a pool of their own (2026-11-23) a worker never waits for the tar stage's
/// buffers. 32K is the least `--memory` that still has both pools (4 buffers each), 16K
/// decodes on one thread.
#[test]
fn sparse_in_small_frames_with_threads_4() {
    let test = "sparse_in_small_frames_with_threads_4";
    let archive = corpus_dir().join("test_read_format_gtar_sparse_1_13.tar");
    if !archive.is_file() || !have_tool(test, "tar") {
        util::skip(test, "no peer corpus");
        return;
    }
    let td = TestDir::new(test);
    let z = td.write("a.tar.zst", ZSTD_4K.encode(&util::read(&archive)));
    let d = td.fresh("ours");
    for (memory, threads, frame_pool) in [("64M", 4, 33 << 20), ("32K", 4, 16 << 10), ("16K", 1, 0)]
    {
        let out = fastuntar()
            .args(["--io", "portable", "--threads", "4", "--json", "--memory", memory, "-x"])
            .arg(&z)
            .arg("-C")
            .arg(&d)
            .timeout(std::time::Duration::from_secs(15))
            .run();
        out.expect_code(0);
        let json = out.stdout_str();
        let want = format!("\"decode_threads\":{threads},");
        assert!(json.contains(&want), "--memory {memory}: {json}");
        let want = format!("\"frame_pool_bytes\":{frame_pool},");
        assert!(json.contains(&want), "--memory {memory}: {json}");
    }
}

const ZSTD_4K: Encoding = Encoding::Zstd { frame: Some(4096) };

// =============================================================================================
// (d) Extended headers as GNU tar reads them, and a member the input ends in (issue 41: the
// test archives of Go's archive/tar and CPython's tarfile, each shape built here with rawtar).

/// The PAX rows' runs: both backends (buffered and every file direct), the plain tar and the
/// tar in 1021-byte frames (every record straddles a frame edge somewhere) under every decoder
/// row. What they are about is read before any writer sees a member.
const PAX_ROWS: Matrix = Matrix {
    writers: Some(&["portable", "uring+direct(threshold 0)"]),
    threads: &["writers default"],
    limits: false,
    ..MATRIX
};

/// The truncated-member rows' runs: every writer row and every writer-thread row (the
/// incomplete file's last, unaligned chunk is a direct-IO matter: buffered, direct, io_uring,
/// portable, several writers), and the tar in 64 KiB zstd frames under every decoder row with
/// the two sweep writers (`--threads 4` lends the decoder's buffers to the writers).
const TRUNCATED_ROWS: Matrix =
    Matrix { threads: util::engine::THREADS_ALL, limits: false, ..MATRIX };

/// What stderr says, as GNU tar says it: our lines name where an extended header is (`archive
/// offset 512 (after 'a'): `), GNU tar's do not.
fn said_without_places(out: &util::Output, prog: &str) -> Vec<String> {
    let mut lines: Vec<String> = util::gnu::said_sorted(out, prog)
        .into_iter()
        .map(|l| match l.strip_prefix("archive offset ").and_then(|r| r.split_once(": ")) {
            Some((_, what)) => what.to_string(),
            None => l,
        })
        .collect();
    lines.sort();
    lines
}

/// An `x` header of exactly these record bytes (malformed ones too).
fn pax_bytes(t: &mut Tar, data: &[u8]) {
    t.pax_raw(data);
}

/// Each shape of issue 41 against GNU tar 1.34, extracted (`-x`, owners compared) and listed
/// (`-tv`: owners, sizes and times as read), stderr compared as GNU tar words it. Each row
/// failed before the fix, as noted:
/// 1. numbers with leading zeros (`size=` of 24 characters, `uid=`/`gid=` over 20, a time, a
///    record length) were refused: `invalid size`, exit 2, nothing extracted;
/// 2. a malformed record stopped the run; GNU tar says `Malformed extended header: ...`,
///    keeps the records before it, reads on, exits 2;
/// 5. a later `g` header kept the earlier one's records (POSIX's merge); GNU tar replaces the
///    set, so `b` has its header's mtime (bsdtar 3.6 and Go's archive/tar apply no `g` record
///    to later members at all);
/// 6. a NUL in a keyword was taken silently; GNU tar: `missing equal sign`, exit 2.
#[test]
fn pax_records_as_gnu_tar_reads_them() {
    let test = "pax_records_as_gnu_tar_reads_them";
    let Some(td) = util::gnu::dir(test, &[]) else { return };
    let zeros = "0".repeat(30);
    let mut leading = Tar::new();
    leading.pax(&[("size", "000000000000000000000005")]);
    leading.entry(&Header::file("size5").size(Num::Octal(0)), b"");
    leading.raw(b"hello").pad();
    leading
        .pax(&[("uid", format!("{zeros}123")), ("gid", format!("{zeros}7"))])
        .file("ids", b"i\n");
    leading.pax(&[("mtime", format!("{zeros}1500000000.25"))]).file("time", b"t\n");
    let body = " path=zero-length\n";
    let len = 40 + body.len();
    pax_bytes(&mut leading, format!("{len:040}{body}").as_bytes());
    leading.file("ignored", b"z\n");
    leading.file("after", b"after\n");

    let mut malformed = Tar::new();
    let bad: [(&str, &[u8]); 11] = [
        ("missing-newline", b"11 path=bad\0"),
        ("missing-length", b"x path=bad\n"),
        ("missing-blank", b"10path=bad\n"),
        ("missing-equal", b"11 pathbad\n"),
        ("length-zero", b"0 path=bad\n"),
        ("length-out-of-range", b"99"),
        ("size-invalid", b"9 size=x\n"),
        ("size-negative", b"11 size=-1\n"),
        ("uid-out-of-range", b"18 uid=4294967296\n"),
        ("mtime-invalid", b"11 mtime=x\n"),
        // The records before the malformed one stand, those after it are not read.
        ("partial", b"20 mtime=1500000000\n11 path=bad\x0011 uid=55\n"),
    ];
    for (name, records) in bad {
        pax_bytes(&mut malformed, records);
        malformed.file(name, format!("{name}\n").as_bytes());
    }
    // A malformed global header: its records before the bad one are the new global set.
    let g = Header::new("pax_global_header", rawtar::PAX_GLOBAL);
    malformed.entry(&g, &[&rawtar::pax_record("uid", "3")[..], b"11 path=bad\0"].concat());
    malformed.file("after-global", b"g\n");

    let mut globals = Tar::new();
    globals.entry(&g, &rawtar::pax_record("mtime", "1500000000"));
    globals.file("a", b"a\n");
    globals.entry(&g, &rawtar::pax_record("comment", "reset"));
    globals.entry(&Header::file("b").mtime(1_000_000_000), b"b\n");
    let owner = [rawtar::pax_record("uid", "77"), rawtar::pax_record("uname", "seventy")].concat();
    globals.entry(&g, &owner);
    globals.file("c", b"c\n");
    globals.entry(&g, &rawtar::pax_record("gid", "5"));
    globals.file("d", b"d\n");

    let mut nul_key = Tar::new();
    pax_bytes(&mut nul_key, b"12 pa\0th=xy\n");
    nul_key.file("a", b"a\n");
    nul_key.file("after", b"after\n");

    let archives = [
        ("1: leading zeros", td.write("leading-zeros.tar", leading.finish())),
        ("2: malformed records", td.write("malformed.tar", malformed.finish())),
        ("5: each g header replaces the set", td.write("globals.tar", globals.finish())),
        ("6: NUL in a keyword", td.write("nul-keyword.tar", nul_key.finish())),
    ];
    let encodings = [Encoding::Plain, util::engine::ZSTD_1021];
    let mut rows = Vec::new();
    for (name, archive) in &archives {
        let extract = Case::extract(archive, &[], &[]).owners();
        let list = Case::list(archive, &["-v"], &[]);
        for row in [extract, list] {
            rows.push(
                row.named(name).said(said_without_places).over(&PAX_ROWS).encodings(&encodings),
            );
        }
    }
    util::gnu::check(&td, &rows);
}

/// Issue 41, shape 3: a NUL in a PAX path or link target. GNU tar cuts the name there and
/// extracts `good` (and links to `tgt`); fastuntar refuses such a name (docs/SECURITY.md), and
/// now skips that member alone, as it does a `../x` member, where the whole run used to stop
/// (exit 2, `after` not extracted). The listing is GNU tar's: the name up to the NUL.
#[test]
fn nul_in_a_pax_path_skips_that_member() {
    let test = "nul_in_a_pax_path_skips_that_member";
    let Some(td) = util::gnu::dir(test, &[]) else { return };
    let mut t = Tar::new();
    t.pax(&[("path", &b"good\0../../evil"[..])]).file("p1", b"p\n");
    t.file("tgt", b"target\n");
    t.pax(&[("linkpath", &b"tgt\0junk"[..])]).symlink("sym", "ignored");
    t.pax(&[("linkpath", &b"tgt\0junk"[..])]).hardlink("hard", "ignored");
    t.pax(&[("GNU.sparse.name", &b"sparse\0name"[..])]).file("p2", b"p\n");
    t.file("after", b"after\n");
    let archive = td.write("nul-path.tar", t.finish());
    let encodings = [Encoding::Plain, util::engine::ZSTD_1021];
    // GNU tar's result has what the row is about; ours skipped those members, named them, and
    // extracted the rest.
    let also: util::gnu::Also = &|gnu, ours| {
        let mut failures = Vec::new();
        let (g, o) = (snapshot(&gnu.dest), snapshot(&ours.dest));
        let names = |s: &util::snapshot::Snapshot| {
            s.entries.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>()
        };
        if names(&g) != [".", "after", "good", "hard", "sparse", "sym", "tgt"] {
            failures.push(format!("GNU tar extracted {:?}", names(&g)));
        }
        if names(&o) != [".", "after", "tgt"] {
            failures.push(format!("fastuntar extracted {:?}", names(&o)));
        }
        let said = ours.out.diagnostics();
        for want in [
            "good\\000../../evil: member name contains a NUL byte; skipped",
            "sym: symlink target contains a NUL byte; skipped",
            "hard: hard link target is unsafe or empty; skipped",
            "sparse\\000name: member name contains a NUL byte; skipped",
        ] {
            if !said.iter().any(|l| l.ends_with(want)) {
                failures.push(format!("fastuntar did not say {want:?}: {said:?}"));
            }
        }
        failures
    };
    let rows = [
        Case::extract(&archive, &[], &[])
            .named("3: extracted")
            .no_exit()
            .code(2)
            .only_said_and_exit()
            .also(also)
            .over(&PAX_ROWS)
            .encodings(&encodings),
        Case::list(&archive, &["-v"], &[]).named("3: listed").over(&PAX_ROWS).encodings(&encodings),
    ];
    util::gnu::check(&td, &rows);
}

/// Issue 41, shape 4: the input ends inside a member's data (Go's and CPython's truncated
/// archives). GNU tar leaves every byte that arrived, at owner-only mode (its metadata never
/// applied), and exits 2. Before the fix fastuntar left 0 of 512 bytes, 0 of 614,400 and 12,582,912 of
/// 13,107,200 (the last partial chunk dropped; with `--io portable --direct-io` 0 of any),
/// at the member's mode 0644. Under every writer row and writer-thread row, and from zstd
/// frames under every decoder row.
#[test]
fn truncated_member_keeps_what_arrived() {
    let test = "truncated_member_keeps_what_arrived";
    let Some(td) = util::gnu::dir(test, &[]) else { return };
    let mut rng = util::Rng::new(41);
    let cases = [(4096u64, 512usize), (1 << 20, 614_400), (20 << 20, (12 << 20) + (512 << 10))];
    let mut archives = Vec::new();
    for (size, present) in cases {
        let mut t = Tar::new();
        t.entry(&Header::file("first").mode(0o640), b"complete\n");
        t.header(&Header::file("big").mode(0o644).size(Num::Octal(size)));
        t.raw(&rng.bytes(present));
        let a = td.write(format!("truncated-{size}-{present}.tar"), t.unterminated());
        archives.push((a, present as u64));
    }
    let encodings = [Encoding::Plain, ZSTD_64K];
    // GNU tar's result has what the row is about (the bytes that arrived, owner-only); the
    // complete member keeps its time in both (file times are not compared: the incomplete
    // file's is the time of extraction).
    let checks: Vec<_> = archives
        .iter()
        .map(|&(_, present)| {
            move |gnu: &util::gnu::Ran, ours: &util::gnu::Ran| -> Vec<String> {
                let mut failures = Vec::new();
                for (who, r) in [("GNU tar", gnu), ("fastuntar", ours)] {
                    let s = snapshot(&r.dest);
                    match s.get("big") {
                        Some(e) if e.size == present && e.mode == 0o600 => {}
                        e => failures.push(format!(
                            "{who}: big is {:?}, want {present} bytes at 0600",
                            e.map(|e| (e.size, format!("{:o}", e.mode)))
                        )),
                    }
                    if s.get("first").map(|e| e.mtime.0) != Some(rawtar::MTIME as i64) {
                        failures.push(format!("{who}: first has not its mtime"));
                    }
                }
                failures
            }
        })
        .collect();
    let cases: Vec<Case> = archives
        .iter()
        .zip(&checks)
        .map(|((archive, _), check)| {
            Case::extract(archive, &[], &[])
                .without_file_times()
                .also(check)
                .over(&TRUNCATED_ROWS)
                .encodings(&encodings)
        })
        .collect();
    util::gnu::check(&td, &cases);
}
