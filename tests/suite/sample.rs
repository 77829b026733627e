//! The committed sample (`fixtures/sample.tar.zst`, made by `scripts/make-fixtures.sh`):
//! it extracts to exactly the files `fixtures/sample.sha256` lists, with the archived modes
//! and mtimes, under every writer configuration; and the script still makes it.

use crate::util;
use crate::util::engine::Matrix;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use util::snapshot::{Compare, Kind, assert_same, snapshot};
use util::{Cmd, TestDir, fastuntar_with, for_each_config};

/// The rows this suite runs over (tests/util/engine.rs): every writer row (the sample is a
/// plain tar: no decoder row applies; it is a few files: the stock limits change nothing).
const MATRIX: Matrix = Matrix::WRITERS;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The relative paths listed in sample.sha256.
fn listed() -> BTreeSet<String> {
    let list = fs::read_to_string(fixtures().join("sample.sha256")).unwrap();
    list.lines().map(|l| l.split_once("  ").expect("sha256sum line").1.to_string()).collect()
}

#[test]
fn sample_extracts_with_the_listed_checksums() {
    let test = "sample_extracts_with_the_listed_checksums";
    let archive = fixtures().join("sample.tar.zst");
    assert!(archive.is_file(), "missing {} (run scripts/make-fixtures.sh)", archive.display());
    assert!(fs::metadata(&archive).unwrap().len() < 200 << 10, "the sample should stay small");
    let want = listed();
    assert!(want.len() > 50, "{} files listed", want.len());
    let td = TestDir::new(test);
    for_each_config(test, &MATRIX, |cfg| {
        let d = td.fresh("out");
        let out = fastuntar_with(cfg).arg("-x").arg(&archive).arg("-C").arg(&d).run();
        out.expect_code(0);
        let snap = snapshot(&d);
        let files: BTreeSet<String> = snap
            .entries
            .iter()
            .filter(|(_, e)| e.kind != Kind::Dir)
            .map(|(p, _)| String::from_utf8(p.clone()).unwrap())
            .collect();
        assert_eq!(files, want, "extracted files vs sample.sha256\n{}", out.describe());
        for (p, e) in &snap.entries {
            if p.as_slice() == b"." {
                continue;
            }
            let mode = if e.kind == Kind::Dir { 0o755 } else { 0o644 };
            assert_eq!(e.mode, mode, "{}", String::from_utf8_lossy(p));
            assert_eq!(e.mtime, (1_700_000_000, 0), "{}", String::from_utf8_lossy(p));
        }
        let check = Cmd::new("sha256sum")
            .args(["-c", "--strict", "--quiet"])
            .arg(fixtures().join("sample.sha256"))
            .current_dir(&d)
            .run();
        assert!(check.success(), "checksums differ\n{}", check.describe());
        let _ = fs::remove_dir_all(&d);
    });
}

#[test]
fn sample_matches_gnu_tar() {
    let test = "sample_matches_gnu_tar";
    util::with_tools(test, &["tar", "zstd"], |td| {
        let archive = fixtures().join("sample.tar.zst");
        let (a, b) = (td.fresh("gnu"), td.fresh("ours"));
        let g = Cmd::new("tar").extract(&archive, &a).run();
        assert!(g.success(), "{}", g.describe());
        let out = util::fastuntar().extract(&archive, &b).run();
        out.expect_code(0);
        assert_same(
            &snapshot(&a),
            "GNU tar",
            &snapshot(&b),
            "fastuntar",
            &Compare::extraction(td.started),
            &out.describe(),
        );
    });
}

/// Rerunning the script gives the same listing and the same tar stream (the compressed bytes
/// also match when the zstd version is the one that made the committed file).
#[test]
fn make_fixtures_is_deterministic() {
    let test = "make_fixtures_is_deterministic";
    util::with_tools(test, &["tar", "zstd", "sha256sum", "awk"], |td| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-fixtures.sh");
        let out = Cmd::new("bash").arg(&script).arg(td.path()).run();
        assert!(out.success(), "{}", out.describe());
        assert_eq!(
            util::read(td.join("sample.sha256")),
            util::read(fixtures().join("sample.sha256")),
            "sample.sha256 changed: rerun scripts/make-fixtures.sh and commit fixtures/"
        );
        let tar_of = |p: &Path| {
            let r = Cmd::new("zstd").args(["-dc"]).arg(p).run();
            assert!(r.success(), "{}", r.describe());
            r.stdout
        };
        assert!(
            tar_of(&td.join("sample.tar.zst")) == tar_of(&fixtures().join("sample.tar.zst")),
            "the tar stream inside sample.tar.zst changed: rerun scripts/make-fixtures.sh"
        );
        if util::read(td.join("sample.tar.zst")) != util::read(fixtures().join("sample.tar.zst")) {
            util::note(&format!(
                "NOTE {test}: same tar stream, different zstd bytes (another zstd version)"
            ));
        }
    });
}
