//! Restoring from a URL (issue 29): `fastuntar -x http://…` against a real HTTP server on
//! 127.0.0.1 that this suite starts (`util/http.rs`), with faults injected byte-exactly. Every
//! case that should succeed is compared with GNU tar's extraction of the same archive from a
//! file; every case that should fail must fail with one line naming the URL, exit 2, and
//! nothing written outside DEST.

use crate::util;
use crate::util::http;

use std::time::{Duration, SystemTime};

use http::{ARCHIVE, Faults, Server};
use util::engine::{Encoding, Matrix, Set, ZSTD_64K, for_each_run};
use util::rawtar::Tar;
use util::snapshot::{Compare, Snapshot, assert_same, snapshot};
use util::{Cmd, Output, Rng, TestDir};

/// The rows this suite runs over (tests/util/engine.rs): every writer row, every decoder row
/// with each (`Set::All`: a download feeds the decoder in the pieces' order, any row may meet
/// it), and the stock limits (8 connections' sockets beside the writers' descriptors). Not a
/// second writer-thread row: the input source hands the same bytes to whatever writes them.
const MATRIX: Matrix = Matrix {
    writers: None,
    compressed: Set::All,
    threads: &["writers default"],
    limits: true,
    decoders: None,
};

/// Flags every download here uses: 4 connections and a budget that makes 256 KiB pieces, so a
/// 2.5 MB archive is fetched in ten pieces, out of order, through the reorder window.
const PIECES: &[&str] = &["--connections", "4", "--memory", "8M"];

/// A tree of 40 files (1 byte to 300 KiB, ~2.5 MB) in two directories, as a tar stream.
fn tree_tar() -> Vec<u8> {
    let mut t = Tar::new();
    let mut rng = Rng::new(29);
    t.dir("d/");
    t.dir("d/e/");
    for i in 0..40u64 {
        let size = match i % 5 {
            0 => 1,
            1 => 4096,
            2 => 300 << 10,
            3 => 77_777,
            _ => 512 * 3 + 7,
        };
        // Random bytes: zstd cannot shrink them, so the compressed archive has pieces too.
        let data = rng.bytes(size);
        let dir = if i % 2 == 0 { "d" } else { "d/e" };
        t.file(format!("{dir}/f{i}"), &data);
    }
    t.finish()
}

/// Offsets of the member headers in a tar stream.
fn header_offsets(tar: &[u8]) -> Vec<u64> {
    let mut v = Vec::new();
    let mut at = 0usize;
    while at + 512 <= tar.len() && tar[at] != 0 {
        v.push(at as u64);
        let size = std::str::from_utf8(&tar[at + 124..at + 135]).unwrap().trim_matches('\0');
        let size = u64::from_str_radix(size.trim(), 8).unwrap() as usize;
        at += 512 + size.div_ceil(512) * 512;
    }
    v
}

/// GNU tar's tree of `tar` (from a file), and the time before it, for the comparisons.
struct Oracle {
    want: Snapshot,
    started: SystemTime,
}

fn oracle(td: &TestDir, tar: &[u8]) -> Oracle {
    let started = SystemTime::now() - Duration::from_secs(1);
    let file = td.write("oracle.tar", tar);
    let gnu = td.fresh("gnu");
    let g = Cmd::new("tar").extract(&file, &gnu).run();
    assert!(g.success(), "GNU tar failed\n{}", g.describe());
    Oracle { want: snapshot(&gnu), started }
}

impl Oracle {
    fn same(&self, dest: &std::path::Path, ctx: &str) {
        let ours = snapshot(dest);
        assert_same(
            &self.want,
            "GNU tar",
            &ours,
            "fastuntar",
            &Compare::extraction(self.started),
            ctx,
        );
    }
}

/// Extracts `url` into a fresh DEST with `cmd`'s flags and `extra`; the output and DEST.
fn extract(td: &TestDir, mut cmd: Cmd, url: &str, extra: &[&str]) -> (Output, std::path::PathBuf) {
    let dest = td.fresh("dest");
    let out = cmd.args(["-x", "--json", "-f", url, "-C"]).arg(&dest).args(extra).run();
    (out, dest)
}

/// A failure in one line naming the URL, exit 2, and nothing left in the test directory but
/// what the test made (DEST may hold what was extracted before the failure).
fn fails_in_one_line(out: &Output, url: &str, words: &str, ctx: &str) {
    out.expect_code(2);
    let lines: Vec<String> =
        out.diagnostics().into_iter().filter(|l| !l.contains("; retry ")).collect();
    assert_eq!(lines.len(), 1, "{ctx}: one line\n{}", out.describe());
    assert!(lines[0].contains(url), "{ctx}: the line names the URL\n{}", out.describe());
    assert!(lines[0].contains(words), "{ctx}: the line says {words:?}\n{}", out.describe());
}

/// The plain download and downloads cut at many offsets (inside zstd frame headers and tar
/// headers, in the middle of pieces), under every engine row: writers × decoder threads, for
/// a plain tar and for 64 KiB zstd frames. Each is GNU tar's tree.
#[test]
fn plain_and_cut_downloads_under_every_engine() {
    let test = "plain_and_cut_downloads_under_every_engine";
    let Some(td) = util::test_dir(test, &["tar"]) else { return };
    let tar = tree_tar();
    let o = oracle(&td, &tar);
    for_each_run(test, &MATRIX, &[Encoding::Plain, ZSTD_64K], |run| {
        let archive = run.encoding.encode(&tar);
        let ctx = run.name();
        let server = Server::start(archive.clone(), Faults::default());
        let url = server.url(ARCHIVE);
        let (out, dest) = extract(&td, run.cmd(), &url, PIECES);
        out.expect_code(0);
        o.same(&dest, &format!("{ctx} plain"));
        let json = out.stdout_str();
        assert_eq!(util::json_number(&json, "retries"), Some(0), "{ctx}");
        // --connections 4 is a ceiling: one to start with, more only while they raise the
        // rate, and a standby for a late piece.
        assert_eq!(util::json_number(&json, "connections_max"), Some(4), "{ctx}");
        let most = util::json_number(&json, "connections").unwrap();
        assert!((1..=4).contains(&most), "{ctx}: {most} connections\n{json}");
        // Pieces reuse their connections (keep-alive): several requests, each connection
        // opened once (a piece beaten by a copy closes one: at most one more each).
        let requests = server.archive_requests();
        assert!(requests >= 4, "{ctx}: {requests} requests");
        assert!(
            server.accepted() as u64 <= 2 * 4 + 1,
            "{ctx}: {} connections for {requests} requests",
            server.accepted()
        );
        drop(server);

        // Cuts: inside three zstd frame headers, or three tar headers, spread over the archive.
        let cuts: Vec<u64> = match run.encoding {
            Encoding::Plain => {
                header_offsets(&tar).into_iter().step_by(13).map(|h| h + 100).collect()
            }
            _ => {
                run.encoding.frame_offsets(&tar).iter().step_by(9).map(|&f| f as u64 + 2).collect()
            }
        };
        assert!(cuts.len() >= 3, "{ctx}: cuts {cuts:?}");
        let faults = Faults { cut_at: cuts.clone(), ..Faults::default() };
        let server = Server::start(archive, faults);
        let (out, dest) = extract(&td, run.cmd(), &url_of(&server), PIECES);
        out.expect_code(0);
        o.same(&dest, &format!("{ctx} cut at {cuts:?}"));
        let retries = util::json_number(&out.stdout_str(), "retries").unwrap();
        assert_eq!(retries, cuts.len() as u64, "{ctx}: one retry per cut\n{}", out.describe());
    });
}

fn url_of(s: &Server) -> String {
    s.url(ARCHIVE)
}

/// Faults a download survives, each compared with GNU tar: a stall, 503 then success, 429 with
/// Retry-After, no Range support (one connection), no Range support and a cut (restarted from
/// byte 0 after the validator was found unchanged, the first bytes passed over), a redirect
/// chain to a presigned-style address, HEAD refused. The requests after the first carry
/// If-Range, and every request asks for the identity encoding.
#[test]
fn faults_survived_like_gnu_tar() {
    let Some(td) = util::test_dir("faults_survived_like_gnu_tar", &["tar"]) else { return };
    let tar = tree_tar();
    let zst = ZSTD_64K.encode(&tar);
    let o = oracle(&td, &tar);
    let middle = zst.len() as u64 / 2;
    let cases: Vec<(&str, Faults, Vec<&str>, &str)> = vec![
        (
            "stall",
            Faults { stall_at: Some((middle, Duration::from_secs(4))), ..Faults::default() },
            vec!["--stall-timeout", "1"],
            ARCHIVE,
        ),
        (
            "503 then success",
            Faults { statuses: vec![(503, None)], ..Faults::default() },
            vec![],
            ARCHIVE,
        ),
        (
            "429 with Retry-After",
            Faults { statuses: vec![(0, None), (429, Some("1"))], ..Faults::default() },
            vec![],
            ARCHIVE,
        ),
        ("no Range support", Faults { no_range: true, ..Faults::default() }, vec![], ARCHIVE),
        (
            "ranges but no validator",
            Faults { no_validator: true, ..Faults::default() },
            vec![],
            ARCHIVE,
        ),
        (
            "no Range support, cut",
            Faults { no_range: true, cut_at: vec![middle], ..Faults::default() },
            vec![],
            ARCHIVE,
        ),
        (
            "redirect chain",
            Faults::default(),
            vec!["-v"],
            "/r/3?X-Amz-Signature=a%2Fb&X-Amz-Expires=60",
        ),
    ];
    let mut failed = Vec::new();
    for (name, faults, extra, path) in cases {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The requests answered with a status before the first answer.
            let lead = faults.statuses.iter().take_while(|s| s.0 != 0).count();
            let server = Server::start(zst.clone(), faults);
            let mut flags = PIECES.to_vec();
            flags.extend(extra.iter());
            let url = server.url(path);
            let (out, dest) = extract(&td, util::fastuntar(), &url, &flags);
            out.expect_code(0);
            o.same(&dest, name);
            let json = out.stdout_str();
            let seen = server.seen();
            assert!(seen.iter().all(|s| s.method == "GET"), "{name}: only GETs, no HEAD");
            let archive_requests: Vec<_> = seen.iter().filter(|s| s.path == ARCHIVE).collect();
            assert!(
                seen.iter().all(|s| s.accept_encoding.as_deref() == Some("identity")),
                "{name}: Accept-Encoding: identity"
            );
            match name {
                "ranges but no validator" => {
                    // No If-Range possible: one connection, one whole answer after the first
                    // (a bounded range that could not be continued safely).
                    assert_eq!(util::json_number(&json, "connections"), Some(1), "{name}: {json}");
                    assert_eq!(archive_requests.len(), 2, "{name}");
                    assert_eq!(archive_requests[1].range.as_deref(), Some("bytes=0-"), "{name}");
                }
                "no Range support" => {
                    assert_eq!(util::json_number(&json, "connections"), Some(1), "{name}: {json}");
                    assert_eq!(archive_requests.len(), 1, "{name}");
                }
                "no Range support, cut" => {
                    assert_eq!(util::json_number(&json, "retries"), Some(1), "{name}: {json}");
                    let again = util::json_number(&json, "refetched_bytes").unwrap();
                    assert!(again > 0 && again <= middle, "{name}: {json}");
                }
                "redirect chain" => {
                    assert!(json.contains(&format!("\"url\":\"{}", server.url(ARCHIVE))), "{json}");
                    assert!(json.contains("X-Amz-Signature=a%2Fb&X-Amz-Expires=60\""), "{json}");
                    let said = out.stderr_str();
                    assert!(said.contains("redirected to") && said.contains(ARCHIVE), "{said}");
                }
                "stall" => {
                    // The stalled request is retried at the stall timeout, unless the standby
                    // connection copied the piece's rest first.
                    let retries = util::json_number(&json, "retries").unwrap();
                    let copies = util::json_number(&json, "copies").unwrap();
                    assert!(retries + copies >= 1, "{name}: {json}");
                }
                _ => {
                    assert!(util::json_number(&json, "retries").unwrap() >= 1, "{name}: {json}");
                }
            }
            if !name.starts_with("no Range support") && name != "ranges but no validator" {
                // Every ranged request after the first carries If-Range with the ETag.
                let later = archive_requests.iter().skip(lead + 1).filter(|s| s.range.is_some());
                for s in later {
                    assert_eq!(s.if_range.as_deref(), Some("\"v1\""), "{name}: {s:?}");
                }
            }
        }));
        if r.is_err() {
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// Faults that must stop the run with one line naming the URL and exit 2: an ETag that changes
/// mid-download, a wrong Content-Range, a length larger or smaller than the bytes, a redirect
/// loop, 404, 403, endless headers and one huge header (not retried), slow headers (slowloris), a refused connection, a host that
/// does not resolve, a server without ranges or validator that drops the connection.
#[test]
fn faults_that_stop_the_run() {
    let test = "faults_that_stop_the_run";
    let td = TestDir::new(test);
    let tar = tree_tar();
    let zst = ZSTD_64K.encode(&tar);
    let middle = zst.len() as u64 / 2;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cases: Vec<(&str, Faults, String, &str)> = vec![
        (
            "changed ETag",
            Faults { change_etag_after: Some(2), ..Faults::default() },
            ARCHIVE.into(),
            "changed",
        ),
        (
            "wrong Content-Range",
            Faults { wrong_range_after: Some(2), ..Faults::default() },
            ARCHIVE.into(),
            "Content-Range",
        ),
        (
            "length over the bytes",
            Faults { announce_extra: 1000, ..Faults::default() },
            ARCHIVE.into(),
            "shorter than",
        ),
        ("redirect loop", Faults::default(), "/loop/a".into(), "redirect loop"),
        ("404", Faults::default(), "/missing.tar".into(), "404 Not Found"),
        ("403", Faults::default(), "/forbidden".into(), "403 Forbidden"),
        ("endless headers", Faults::default(), "/endless-headers".into(), "header"),
        ("huge header", Faults::default(), "/huge-header".into(), "header is larger than 64 KiB"),
        (
            "refused",
            Faults::default(),
            format!("http://127.0.0.1:{closed}/a.tar"),
            "cannot connect",
        ),
        (
            "DNS",
            Faults::default(),
            "http://fastuntar-test.invalid/a.tar".into(),
            "does not resolve",
        ),
        (
            "no ranges, no validator, cut",
            Faults {
                no_range: true,
                no_validator: true,
                cut_at: vec![middle],
                ..Faults::default()
            },
            ARCHIVE.into(),
            "cannot continue",
        ),
    ];
    let mut failed = Vec::new();
    for (name, faults, path, words) in cases {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let server = Server::start(zst.clone(), faults);
            let url = if path.starts_with("http") { path.clone() } else { server.url(&path) };
            let cmd = if name == "DNS" {
                // In a network namespace of its own (no interface up), so the lookup fails
                // here and no query leaves the machine for the system's resolver.
                let mut c = Cmd::new("unshare");
                c.arg("-n").arg(util::fastuntar_path());
                c
            } else {
                util::fastuntar()
            };
            if name == "DNS" && !util::have_root(test, "unshare -n for the DNS case") {
                return;
            }
            // A header past its bound is the server's doing, not a passing fault: no retry
            // (bounded here so that one would show as a retry line, not as a long wait).
            let headers = name.contains("header");
            let flags =
                if headers { [PIECES, &["--retries", "2"]].concat() } else { PIECES.to_vec() };
            let (out, _dest) = extract(&td, cmd, &url, &flags);
            if headers {
                assert!(
                    !out.stderr_str().contains("; retry "),
                    "{name}: retried\n{}",
                    out.describe()
                );
            }
            if words.is_empty() {
                // The archive ends early: the decoder says where, by archive offset.
                out.expect_code(2);
                assert_eq!(out.diagnostics().len(), 1, "{name}\n{}", out.describe());
            } else {
                fails_in_one_line(&out, &url, words, name);
            }
        }));
        if r.is_err() {
            failed.push(name);
        }
    }
    let entries: Vec<_> =
        std::fs::read_dir(td.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(
        entries.iter().all(|e| e.to_string_lossy().starts_with("dest")),
        "nothing but DESTs: {entries:?}"
    );
    assert!(failed.is_empty(), "failed: {failed:?}");

    // Slowloris: headers a byte at a time never reach the stall timeout per read, but the
    // headers as a whole must come within it; each attempt is a stall, and --retries ends it.
    let server = Server::start(zst, Faults::default());
    let url = server.url("/slow-headers");
    let started = std::time::Instant::now();
    let flags = ["--stall-timeout", "1", "--retries", "1"];
    let (out, _) = extract(&td, util::fastuntar(), &url, &flags);
    fails_in_one_line(&out, &url, "gave up after 1 retries", "slow headers");
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
}

/// TLS with a CA made now: trusted with --cacert, refused without it, and a certificate for
/// another host refused even with its CA; an https URL that redirects to http refused.
#[test]
fn tls_with_a_private_ca() {
    let Some(td) = util::test_dir("tls_with_a_private_ca", &["tar"]) else { return };
    let tar = tree_tar();
    let o = oracle(&td, &tar);
    let (ca, config) = http::tls_for(&["localhost"]);
    let ca_file = td.write("ca.pem", ca);
    let plain = Server::start(tar.clone(), Faults::default());
    let faults = Faults { downgrade_to: Some(plain.url(ARCHIVE)), ..Faults::default() };
    let server = Server::with_tls(tar.clone(), faults, Some(config));
    let url = server.url(ARCHIVE);

    let (out, dest) =
        extract(&td, util::fastuntar(), &url, &["--cacert", ca_file.to_str().unwrap()]);
    out.expect_code(0);
    o.same(&dest, "--cacert");

    let (out, _) = extract(&td, util::fastuntar(), &url, &[]);
    fails_in_one_line(&out, &url, "certificate", "without --cacert");

    let down = server.url("/down");
    let (out, _) = extract(&td, util::fastuntar(), &down, &["--cacert", ca_file.to_str().unwrap()]);
    fails_in_one_line(&out, &down, "from https to http", "downgrade");

    let (ca2, config2) = http::tls_for(&["wrong.example"]);
    let ca2_file = td.write("ca2.pem", ca2);
    let wrong = Server::with_tls(tar, Faults::default(), Some(config2));
    let url = wrong.url(ARCHIVE);
    let (out, _) = extract(&td, util::fastuntar(), &url, &["--cacert", ca2_file.to_str().unwrap()]);
    fails_in_one_line(&out, &url, "certificate", "wrong host");
}

/// --keep-archive: the copy is the archive when the run ends well, and is left only as
/// FILE.incomplete when it does not. --checksum: the right sum passes, a wrong one exits 2
/// after the tree was extracted. -t and -O read a URL as a file.
#[test]
fn keep_archive_checksum_list_and_stdout() {
    let test = "keep_archive_checksum_list_and_stdout";
    let Some(td) = util::gnu::dir(test, &["sha256sum"]) else { return };
    let tar = tree_tar();
    let zst = ZSTD_64K.encode(&tar);
    let o = oracle(&td, &tar);
    let file = td.write("a.tar.zst", &zst);
    let sum = Cmd::new("sha256sum").arg(&file).run().stdout_str();
    let sum = format!("sha256:{}", &sum[..64]);
    let server = Server::start(zst.clone(), Faults { cut_at: vec![1000], ..Faults::default() });
    let url = server.url(ARCHIVE);
    let kept = td.join("kept.tar.zst");
    let k = kept.to_str().unwrap();
    let (out, dest) = extract(
        &td,
        util::fastuntar(),
        &url,
        &[&["--keep-archive", k, "--checksum", &sum], PIECES].concat(),
    );
    out.expect_code(0);
    o.same(&dest, "--keep-archive --checksum");
    assert_eq!(util::read(&kept), zst, "the kept copy is the archive");
    assert!(!td.join("kept.tar.zst.incomplete").exists());

    let bad = format!("sha256:{}", "0".repeat(64));
    let (out, dest) = extract(&td, util::fastuntar(), &url, &["--checksum", &bad]);
    fails_in_one_line(&out, &url, "sha256 mismatch", "wrong checksum");
    o.same(&dest, "the tree stands after a checksum mismatch");

    let changing =
        Server::start(zst.clone(), Faults { change_etag_after: Some(2), ..Faults::default() });
    let kept2 = td.join("kept2.tar.zst");
    let k2 = kept2.to_str().unwrap();
    let url2 = changing.url(ARCHIVE);
    let (out, _) =
        extract(&td, util::fastuntar(), &url2, &[&["--keep-archive", k2], PIECES].concat());
    fails_in_one_line(&out, &url2, "changed", "--keep-archive and a failure");
    assert!(!kept2.exists(), "no FILE after a failed run");
    assert!(td.join("kept2.tar.zst.incomplete").exists(), "FILE.incomplete after a failed run");

    let listed = util::fastuntar().args(["-t", "-f", &url]).args(PIECES).run();
    listed.expect_code(0);
    let gnu = Cmd::new("tar").arg("-tf").arg(td.join("oracle.tar")).run();
    assert_eq!(listed.stdout_str(), gnu.stdout_str(), "-t URL");
    let data = util::fastuntar().args(["-xO", "-f", &url]).args(PIECES).run();
    data.expect_code(0);
    let gnu = Cmd::new("tar").arg("-xOf").arg(td.join("oracle.tar")).run();
    assert!(data.stdout == gnu.stdout, "-O URL");
}

/// Issue 40, 1: `--keep-archive DIR/k.tar.zst` where an earlier archive left a symlink at
/// `DIR/k.tar.zst.incomplete` to a file outside DIR. The copy is made anew beside it, never
/// written through it: the file outside keeps its bytes, FILE is the archive. Before, the copy
/// was opened with a plain create, which followed the link and filled the victim with the
/// server's bytes (and the rename then moved the link to FILE). Under every engine row.
#[test]
fn keep_archive_never_writes_through_a_planted_link() {
    let test = "keep_archive_never_writes_through_a_planted_link";
    let Some(td) = util::gnu::dir(test, &[]) else { return };
    let zst = ZSTD_64K.encode(&tree_tar());
    let server = Server::start(zst.clone(), Faults::default());
    let url = server.url(ARCHIVE);
    let victim = td.write("victim", b"root's file outside DIR\n");
    for_each_run(test, &MATRIX, &[Encoding::Plain], |run| {
        let dest = td.fresh("dest");
        // The earlier archive: a symlink member named like the copy, to the victim.
        let mut t = Tar::new();
        t.symlink("k.tar.zst.incomplete", victim.to_str().unwrap());
        let planted = td.write("planted.tar", t.finish());
        let p = util::fastuntar().arg("-xf").arg(&planted).arg("-C").arg(&dest).run();
        p.expect_code(0);
        let kept = dest.join("k.tar.zst");
        let mut c = run.engine.cmd();
        let out = c
            .args(["-x", "-f", &url, "-C"])
            .arg(&dest)
            .arg("--keep-archive")
            .arg(&kept)
            .args(PIECES)
            .run();
        out.expect_code(0);
        let victim_now = util::read(&victim);
        assert_eq!(victim_now, b"root's file outside DIR\n", "written through the planted link");
        assert!(util::read(&kept) == zst, "the kept copy is not the archive");
        let part = dest.join("k.tar.zst.incomplete");
        assert!(part.symlink_metadata().is_err(), "FILE.incomplete left behind");
    });
}

/// Issue 40, 3: a member named like the kept copy (`k.tar.incomplete`: a file, or a symlink
/// out of DIR) lands in DIR while the download goes on into the copy it replaced. The run
/// fails in one line and exit 2, FILE is not made, the member stays as extracted; with
/// `--checksum` too (the sum is the download's, right). Before, the member (or the link) was
/// renamed to FILE and the run exited 0, `--checksum` saying it matched.
#[test]
fn a_member_named_like_the_kept_copy_fails_in_one_line() {
    let test = "a_member_named_like_the_kept_copy_fails_in_one_line";
    let Some(td) = util::gnu::dir(test, &["sha256sum"]) else { return };
    let victim = td.write("victim", b"outside\n");
    for (kind, symlink) in [("a file", false), ("a symlink out of DIR", true)] {
        let mut t = Tar::new();
        t.file("first", &Rng::new(40).bytes(300 << 10));
        match symlink {
            true => t.symlink("k.tar.incomplete", victim.to_str().unwrap()),
            false => t.file("k.tar.incomplete", b"the member's bytes\n"),
        };
        t.file("last", b"after it\n");
        let tar = t.finish();
        let file = td.write("served.tar", &tar);
        let sum = Cmd::new("sha256sum").arg(&file).run().stdout_str();
        let sum = format!("sha256:{}", &sum[..64]);
        let server = Server::start(tar.clone(), Faults::default());
        let url = server.url(ARCHIVE);
        for checksum in [false, true] {
            let ctx = format!("{kind}, --checksum {checksum}");
            let dest = td.fresh("dest");
            let kept = dest.join("k.tar");
            let mut extra = vec!["--keep-archive", kept.to_str().unwrap()];
            if checksum {
                extra.extend(["--checksum", sum.as_str()]);
            }
            let out =
                util::fastuntar().args(["-x", "-f", &url, "-C"]).arg(&dest).args(&extra).run();
            out.expect_code(2);
            let lines = out.diagnostics();
            assert_eq!(lines.len(), 1, "{ctx}: one line\n{}", out.describe());
            assert!(lines[0].contains("no longer the download"), "{ctx}\n{}", out.describe());
            assert!(kept.symlink_metadata().is_err(), "{ctx}: FILE was made");
            let member = dest.join("k.tar.incomplete");
            match symlink {
                true => assert!(member.symlink_metadata().unwrap().file_type().is_symlink()),
                false => assert_eq!(util::read(&member), b"the member's bytes\n", "{ctx}"),
            }
            assert_eq!(util::read(&victim), b"outside\n", "{ctx}: the victim");
        }
    }
}

/// The proxy variables as curl reads them: an https URL goes through `https_proxy` (a CONNECT
/// tunnel, TLS checked end to end), an http URL through `http_proxy` (one that refuses is
/// named by the failure), unless NO_PROXY names the host.
#[test]
fn proxy_variables_as_curl() {
    let test = "proxy_variables_as_curl";
    let td = TestDir::new(test);
    let (ca, config) = http::tls_for(&["localhost"]);
    let ca_file = td.write("ca.pem", ca);
    let tls = Server::with_tls(tree_tar(), Faults::default(), Some(config));
    let proxy = http::Proxy::start();
    let mut c = util::fastuntar();
    c.env("https_proxy", format!("http://{}", proxy.addr)).env("NO_PROXY", "example.com");
    let (out, _) = extract(&td, c, &tls.url(ARCHIVE), &["--cacert", ca_file.to_str().unwrap()]);
    out.expect_code(0);
    let tunnels = proxy.tunnels.load(std::sync::atomic::Ordering::Relaxed);
    assert!(tunnels >= 1, "the download went through the proxy");

    let server = Server::start(tree_tar(), Faults::default());
    let url = server.url(ARCHIVE);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let proxy = format!("http://127.0.0.1:{closed}");
    let mut c = util::fastuntar();
    c.env("http_proxy", &proxy).env("NO_PROXY", "");
    let (out, _) = extract(&td, c, &url, &[]);
    fails_in_one_line(&out, &url, "cannot connect", "through the proxy");
    let mut c = util::fastuntar();
    c.env("http_proxy", &proxy).env("NO_PROXY", "example.com,127.0.0.1");
    let (out, _) = extract(&td, c, &url, &[]);
    out.expect_code(0);
}

/// The reorder window stays within --memory: a URL extraction of 24 MB on 8 connections, with
/// the decoder slower than the loopback, peaks within a few MiB of the same extraction from a
/// file under the same --memory (the window is part of it, and the pieces wait for room).
#[test]
fn the_window_stays_within_memory() {
    let test = "the_window_stays_within_memory";
    let td = TestDir::new(test);
    let mut t = Tar::new();
    let mut rng = Rng::new(7);
    for i in 0..24 {
        t.file(format!("f{i}"), &rng.bytes(1 << 20));
    }
    let zst = ZSTD_64K.encode(&t.finish());
    let file = td.write("a.tar.zst", &zst);
    let server = Server::start(zst, Faults::default());
    let flags = ["--memory", "8M", "--connections", "8", "--threads", "1", "-q"];
    let rss = |src: &[&str]| {
        let dest = td.fresh("dest");
        let out = util::fastuntar().measure_rss().args(src).args(flags).arg("-C").arg(&dest).run();
        out.expect_code(0);
        out.peak_rss_kib.expect("peak RSS (/usr/bin/time)")
    };
    let from_url = rss(&["-x", "-f", &server.url(ARCHIVE)]);
    let from_file = rss(&["-x", "-f", file.to_str().unwrap()]);
    util::note(&format!("peak RSS from the URL {from_url} KiB, from the file {from_file} KiB"));
    assert!(
        from_url <= from_file + 8 * 1024,
        "from the URL {from_url} KiB, from the file {from_file} KiB"
    );
}

/// 16 connections under `ulimit -n 20`: the ceiling is cut to what the open-file limit
/// leaves room for beside the writer (here one), and the tree is GNU tar's; under 64 the
/// ceiling is what fits (the open-file limit's half after the writer's needs), and no more
/// are opened.
#[test]
fn connections_fit_the_open_file_limit() {
    let Some(td) = util::test_dir("connections_fit_the_open_file_limit", &["tar"]) else { return };
    let tar = tree_tar();
    let o = oracle(&td, &tar);
    let server = Server::start(tar, Faults::default());
    for (limit, range) in [(20, 1..=1), (64, 8..=16)] {
        let mut c = util::fastuntar();
        c.rlimit(libc::RLIMIT_NOFILE, limit, limit);
        let flags = ["--connections", "16", "--memory", "16M"];
        let (out, dest) = extract(&td, c, &server.url(ARCHIVE), &flags);
        out.expect_code(0);
        o.same(&dest, &format!("ulimit -n {limit}"));
        let json = out.stdout_str();
        let ceiling = util::json_number(&json, "connections_max").unwrap();
        assert!(range.contains(&ceiling), "ulimit -n {limit}: ceiling {ceiling}\n{json}");
        let most = util::json_number(&json, "connections").unwrap();
        assert!(most <= ceiling, "ulimit -n {limit}: {most} over {ceiling}\n{json}");
    }
}

/// The source's first-class operation for resuming (issue 30): open the URL from byte X
/// expecting the version recorded, and get the archive's bytes from X; a changed version is
/// refused before anything is read.
#[test]
fn open_at_an_offset_with_a_validator() {
    use fastuntar::__private::decode::url::{self, Identity, Plan, Start, Validator};
    use std::io::Read;
    let archive: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let server =
        Server::start(archive.clone(), Faults { cut_at: vec![2_000_000], ..Faults::default() });
    let plan = Plan {
        url: server.url(ARCHIVE),
        mirrors: vec![],
        limit_rate: None,
        connections: 4,
        stall: Duration::from_secs(5),
        min_rate: 0,
        retries: 3,
        cacert: None,
        keep: None,
        checksum: None,
        window: 2 << 20,
        verbose: false,
        quiet: true,
        no_sign_request: false,
    };
    let first = url::open(&plan, Start::default()).unwrap();
    let identity = first.identity().clone();
    drop(first);
    let from = 1_234_567;
    let d = url::open(&plan, Start { from, expect: Some(identity.clone()) }).unwrap();
    let mut got = Vec::new();
    d.reader().read_to_end(&mut got).unwrap();
    assert!(got == archive[from as usize..], "the bytes from {from}");
    let other = Identity {
        validator: Validator { etag: Some("\"v9\"".into()), last_modified: None },
        ..identity
    };
    let e = url::open(&plan, Start { from, expect: Some(other) }).err().expect("a changed version");
    assert!(e.to_string().contains("changed"), "{e}");
}

/// Interim answers (issue 40): a server that sends `100 Continue` or `103 Early Hints` before
/// every answer, flushed in one write with the answer's head and first bytes. ureq 3.5.2
/// counted the bytes after a 1xx as header ("response header is too big: 128176 > 65536"), so
/// most runs failed; 24 runs with `--retries 0` over http and https must all be GNU tar's tree
/// at the first attempt. The layer that works around it steps aside once an answer's status is
/// final (the body read whole); an answer that starts with a 1xx stays stepped.
#[test]
fn interim_answers_before_the_answer() {
    let Some(td) = util::test_dir("interim_answers_before_the_answer", &["tar"]) else { return };
    let tar = tree_tar();
    let o = oracle(&td, &tar);
    let (ca, config) = http::tls_for(&["localhost"]);
    let ca_file = td.write("ca.pem", ca);
    let cont = "HTTP/1.1 100 Continue";
    let hints = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style";
    let sets: [&[&'static str]; 3] = [&[cont], &[hints], &[cont, hints, hints]];
    let mut failed = Vec::new();
    for run in 0..24 {
        let interim = sets[run % 3].to_vec();
        // Runs 20-23: the first interim answer read alone, then the second with the answer's
        // head and its body in whole reads (the layer must not step aside after a 1xx).
        let apart = (run >= 20).then_some(Duration::from_millis(30));
        let interim = if apart.is_some() { vec![cont, hints] } else { interim };
        let faults = Faults { interim: interim.clone(), interim_apart: apart, ..Faults::default() };
        let tls = run % 4 == 3;
        let server = if tls {
            Server::with_tls(tar.clone(), faults, Some(config.clone()))
        } else {
            Server::start(tar.clone(), faults)
        };
        let url = server.url(ARCHIVE);
        let mut flags = vec!["--retries", "0", "--cacert", ca_file.to_str().unwrap()];
        flags.extend(PIECES);
        let (out, dest) = extract(&td, util::fastuntar(), &url, &flags);
        let name = format!(
            "run {run} ({}, {} interim{})",
            if tls { "https" } else { "http" },
            interim.len(),
            if apart.is_some() { ", the first apart" } else { "" }
        );
        if out.code != Some(0) {
            failed.push(format!("{name}: {}", out.stderr_str().trim()));
            continue;
        }
        o.same(&dest, &name);
        // The first answer and pieces after it (each source starts with one connection and
        // sizes its pieces by its speed, issue 42: a few requests for this tree, not 8).
        let asked = server.archive_requests();
        assert!(asked >= 2, "{name}: the pieces were asked for ({asked} requests)");
    }
    assert!(failed.is_empty(), "{} of 24 runs failed:\n{}", failed.len(), failed.join("\n"));
}

/// `--min-rate` (issue 40): a connection below the floor for a whole `--stall-timeout` of
/// reading is retried as a stall, from where it stopped. A first answer trickling 4 KiB every
/// 200 ms (20 KiB/s) against `--min-rate 256K --stall-timeout 1` is asked again and the tree
/// is GNU tar's; a server that trickles on every connection ends the run after `--retries 2`
/// (the slow attempts brought less than a window at the floor, so they are failures in a row,
/// not progress), in a few seconds, where without the floor it would have gone on at 20 KiB/s.
#[test]
fn a_connection_below_min_rate_is_retried() {
    let Some(td) = util::test_dir("a_connection_below_min_rate_is_retried", &["tar"]) else {
        return;
    };
    let tar = tree_tar();
    let o = oracle(&td, &tar);
    let every = Duration::from_millis(200);
    let floor = ["--min-rate", "256K", "--stall-timeout", "1"];

    let once = Faults { trickle: Some((1, 4096, every)), ..Faults::default() };
    let server = Server::start(tar.clone(), once);
    let url = server.url(ARCHIVE);
    let (out, dest) = extract(&td, util::fastuntar(), &url, &[PIECES, &floor].concat());
    out.expect_code(0);
    o.same(&dest, "a trickling first answer");
    let said = out.stderr_str();
    assert!(said.contains("slower than --min-rate") && said.contains("retry 1 of 64"), "{said}");
    assert!(util::json_number(&out.stdout_str(), "retries").unwrap() >= 1);

    let always = Faults { trickle: Some((usize::MAX, 4096, every)), ..Faults::default() };
    let server = Server::start(tar, always);
    let url = server.url(ARCHIVE);
    let started = std::time::Instant::now();
    let flags = [PIECES, &floor, &["--retries", "2"]].concat();
    let mut bounded = util::fastuntar();
    bounded.timeout(Duration::from_secs(60));
    let (out, _) = extract(&td, bounded, &url, &flags);
    fails_in_one_line(&out, &url, "slower than --min-rate", "trickling on every connection");
    assert!(out.stderr_str().contains("gave up after 2 retries"), "{}", out.describe());
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
}

// ---- several sources (issue 42) --------------------------------------------------------------

/// `--mirror` flags for the servers after the first.
fn mirrors(servers: &[&Server]) -> Vec<String> {
    servers.iter().flat_map(|s| ["--mirror".to_string(), s.url(ARCHIVE)]).collect()
}

/// Extracts from `servers` (the first as the archive, the rest as mirrors) with `extra`.
fn from_sources(td: &TestDir, servers: &[&Server], extra: &[&str]) -> (Output, std::path::PathBuf) {
    let m = mirrors(&servers[1..]);
    let mut flags: Vec<&str> = m.iter().map(String::as_str).collect();
    flags.extend_from_slice(extra);
    extract(td, util::fastuntar(), &servers[0].url(ARCHIVE), &flags)
}

/// `"key":"text"` in the JSON summary's `sources`, in order.
fn source_states(json: &str) -> Vec<String> {
    json.split("\"state\":\"")
        .skip(1)
        .map(|r| r.split('"').next().unwrap_or("").to_string())
        .collect()
}

/// A tree of `n` random files of 400 KiB (incompressible: the compressed archive is as long).
fn big_tar(n: usize, seed: u64) -> Vec<u8> {
    let mut t = Tar::new();
    let mut rng = Rng::new(seed);
    t.dir("big/");
    for i in 0..n {
        t.file(format!("big/f{i:03}"), &rng.bytes(400 << 10));
    }
    t.finish()
}

/// Three sources, each capped at 3 MB/s, one killed (every connection closed, new ones
/// refused) once 30 % of the archive has been served: the run goes on with the other two,
/// and the tree is GNU tar's, under every decoder row.
#[test]
fn three_sources_one_killed_at_30_percent() {
    let test = "three_sources_one_killed_at_30_percent";
    let Some(td) = util::test_dir(test, &["tar"]) else { return };
    let tar = big_tar(12, 42);
    let o = oracle(&td, &tar);
    for_each_run(test, &MATRIX, &[Encoding::Plain, ZSTD_64K], |run| {
        let archive = run.encoding.encode(&tar);
        let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let capped = |die| Faults { rate: Some(3_000_000), die_when: die, ..Faults::default() };
        // (The archive is ~4.9 MB: ~0.6 s at 9 MB/s.)
        // Every server counts what it sends; the second dies at 30 % of the archive in all.
        let mark = archive.len() as u64 * 3 / 10;
        let a = Server::start(archive.clone(), capped(Some((served.clone(), u64::MAX))));
        let b = Server::start(archive.clone(), capped(Some((served.clone(), mark))));
        let c = Server::start(archive, capped(Some((served.clone(), u64::MAX))));
        let ctx = run.name();
        let m = mirrors(&[&b, &c]);
        let mut flags: Vec<&str> = m.iter().map(String::as_str).collect();
        flags.extend_from_slice(&["--retries", "2"]);
        let (out, dest) = extract(&td, run.cmd(), &a.url(ARCHIVE), &flags);
        out.expect_code(0);
        o.same(&dest, &format!("{ctx}: one of three killed"));
        assert!(b.dead(), "{ctx}: the second source was killed\n{}", out.describe());
        let json = out.stdout_str();
        // The killed source is retrying, or dropped once its retries were spent, or (on a
        // loaded host, where a source measured slow gets a piece only once a second to be
        // measured again) still "in use" because no request of its was in flight when it
        // died and the others finished the archive first: seen once in the exhaustive tier
        // at load 5 with 512 KiB served by it. What the issue asks is the tree, above.
        let states = source_states(&json);
        assert_eq!(states.len(), 3, "{ctx}: {json}");
        assert!(["retrying", "dropped", "in use"].contains(&states[1].as_str()), "{ctx}: {json}");
        assert_eq!((states[0].as_str(), states[2].as_str()), ("in use", "in use"), "{ctx}");
    });
}

/// A mirror that serves another archive of the same length is compared on its first bytes,
/// dropped with one line naming it and why, and the tree is the archive's (the archive as
/// given is the reference the mirrors are compared with).
#[test]
fn a_source_with_other_bytes_is_dropped() {
    let Some(td) = util::test_dir("a_source_with_other_bytes_is_dropped", &["tar"]) else {
        return;
    };
    let tar = big_tar(6, 1);
    let other = big_tar(6, 2);
    assert_eq!(tar.len(), other.len());
    let o = oracle(&td, &tar);
    let good = Server::start(tar.clone(), Faults::default());
    let bad = Server::start(other, Faults::default());
    let (out, dest) = from_sources(&td, &[&good, &bad], &[]);
    out.expect_code(0);
    o.same(&dest, "a mirror of another archive");
    let lines = out.diagnostics();
    assert_eq!(lines.len(), 1, "one line\n{}", out.describe());
    assert!(lines[0].contains(&bad.url(ARCHIVE)), "{}", out.describe());
    assert!(lines[0].contains("other bytes"), "{}", out.describe());
    let json = out.stdout_str();
    assert_eq!(source_states(&json), ["in use", "dropped"], "{json}");
    // Nothing of the bad mirror's was used.
    let bytes: Vec<u64> = json
        .split("\"sources\":")
        .nth(1)
        .unwrap()
        .split("\"bytes\":")
        .skip(1)
        .map(|r| r.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(bytes, [tar.len() as u64, 0], "{json}");
}

/// Each source's fields in the `--json` summary (issue 42: bytes, rate, connections, state
/// and why dropped), held against what the servers say they did: two sources capped at
/// different rates and one answering 404. A source's `bytes` (those that count) are at most
/// what its server sent, within the 64 KiB sample a mirror sends for comparison when no copy
/// or retry was made, and all of them together are the archive; its `mb_per_s` is those
/// bytes over the run; its `connections` (most at once) at least
/// one and at most the TCP connections its server accepted; the 404 source dropped, saying
/// so, with no byte and no connection. The text summary (`--totals`) says the same.
#[test]
fn each_source_in_the_summary() {
    let Some(td) = util::test_dir("each_source_in_the_summary", &["tar"]) else { return };
    let tar = big_tar(8, 7);
    let o = oracle(&td, &tar);
    let caps = [3_000_000u64, 9_000_000];
    let slow = Server::start(tar.clone(), Faults { rate: Some(caps[0]), ..Faults::default() });
    let fast = Server::start(tar.clone(), Faults { rate: Some(caps[1]), ..Faults::default() });
    let gone = Server::start(tar.clone(), Faults::default());
    let missing = gone.url("/missing.tar");
    let flags = ["--mirror", &fast.url(ARCHIVE), "--mirror", &missing];
    let (out, dest) = extract(&td, util::fastuntar(), &slow.url(ARCHIVE), &flags);
    out.expect_code(0);
    o.same(&dest, "three sources, one 404");
    let text = out.stdout_str();
    let json: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let sources = json["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3, "{json}");
    let secs = json["elapsed_s"].as_f64().unwrap();
    let clean = json["copies"] == 0 && json["retries"] == 0;
    let mut total = 0;
    for (i, server) in [&slow, &fast].into_iter().enumerate() {
        let src = &sources[i];
        let ctx = format!("source {i} of {json}");
        assert_eq!(src["url"], server.url(ARCHIVE), "{ctx}");
        assert_eq!(src["state"], "in use", "{ctx}");
        assert_eq!(src["dropped"], serde_json::Value::Null, "{ctx}");
        let bytes = src["bytes"].as_u64().unwrap();
        let sent = server.sent().last().map_or(0, |l| l.1);
        assert!(bytes > 0 && bytes <= sent, "{ctx}: {bytes} counted, {sent} sent");
        if clean {
            assert!(sent - bytes <= 64 << 10, "{ctx}: {bytes} counted, {sent} sent");
        }
        total += bytes;
        let rate = src["mb_per_s"].as_f64().unwrap();
        let want = bytes as f64 / 1e6 / secs;
        assert!((rate - want).abs() <= 0.002, "{ctx}: {rate} MB/s, {bytes} B in {secs} s");
        let most = src["connections"].as_u64().unwrap() as usize;
        assert!(most >= 1 && most <= server.accepted(), "{ctx}: {}", server.accepted());
    }
    assert_eq!(total, tar.len() as u64, "every byte counted once: {json}");
    let dropped = &sources[2];
    assert_eq!(dropped["url"], missing, "{json}");
    assert_eq!(dropped["state"], "dropped", "{json}");
    assert!(dropped["dropped"].as_str().unwrap().contains("404"), "{json}");
    assert_eq!((&dropped["bytes"], &dropped["connections"]), (&0.into(), &0.into()), "{json}");
    assert!(gone.sent().is_empty(), "the 404 server sent no archive byte");
    // The text summary (`--totals`, without --json), another run: each source's MB, at most
    // what its server sent this time, together the archive; the 404 one dropped, saying why.
    let before = [&slow, &fast].map(|s| s.sent().last().map_or(0, |l| l.1));
    let dest = td.fresh("dest");
    let flags = ["--mirror", &fast.url(ARCHIVE), "--mirror", &missing, "--totals"];
    let out =
        util::fastuntar().args(["-x", "-f", &slow.url(ARCHIVE), "-C"]).arg(&dest).args(flags).run();
    out.expect_code(0);
    let line = out.stderr_str();
    let mut mb = 0.0;
    for (i, server) in [&slow, &fast].into_iter().enumerate() {
        let url = server.url(ARCHIVE);
        let said = line.split(&format!("{url} ")).nth(1).and_then(|r| r.split(" MB").next());
        let said: f64 =
            said.and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("{url} in {line}"));
        let sent = server.sent().last().map_or(0, |l| l.1) - before[i];
        assert!(said <= sent as f64 / 1e6 + 0.05, "{url}: {said} MB said, {sent} B sent: {line}");
        mb += said;
    }
    assert!((mb - tar.len() as f64 / 1e6).abs() <= 0.1, "{mb} MB of {}: {line}", tar.len());
    assert!(line.contains(&format!("{missing} dropped (404 Not Found)")), "{line}");
}

/// A mirror that answers 404 is dropped with a note; the tree is the archive's. An archive
/// operand that answers 404 is dropped the same way, and its mirrors serve the run.
#[test]
fn a_source_answering_404_is_dropped_with_a_note() {
    let Some(td) = util::test_dir("a_source_answering_404_is_dropped_with_a_note", &["tar"]) else {
        return;
    };
    let tar = tree_tar();
    let o = oracle(&td, &tar);
    let a = Server::start(tar.clone(), Faults::default());
    let b = Server::start(tar, Faults::default());
    let missing = b.url("/missing.tar");
    for (archive, mirror, gone) in
        [(a.url(ARCHIVE), missing.clone(), 1), (missing.clone(), a.url(ARCHIVE), 0)]
    {
        let (out, dest) =
            extract(&td, util::fastuntar(), &archive, &["--mirror", &mirror, "--connections", "2"]);
        out.expect_code(0);
        o.same(&dest, &format!("404 as source {gone}"));
        let lines = out.diagnostics();
        assert_eq!(lines.len(), 1, "one note\n{}", out.describe());
        assert!(lines[0].contains(&missing) && lines[0].contains("404 Not Found"), "{lines:?}");
        let states = source_states(&out.stdout_str());
        assert_eq!(states[gone], "dropped", "{}", out.stdout_str());
        assert_eq!(states[1 - gone], "in use", "{}", out.stdout_str());
    }
}

/// Sources that report different lengths are not one archive: the run is refused with one
/// line naming both, exit 2, nothing extracted.
#[test]
fn sources_of_different_lengths_are_refused() {
    let td = TestDir::new("sources_of_different_lengths_are_refused");
    let tar = tree_tar();
    let mut longer = tar.clone();
    longer.extend_from_slice(&[0u8; 512]);
    let a = Server::start(tar, Faults::default());
    let b = Server::start(longer, Faults::default());
    let (out, dest) = from_sources(&td, &[&a, &b], &[]);
    fails_in_one_line(&out, &a.url(ARCHIVE), "not one archive", "lengths");
    assert!(out.diagnostics()[0].contains(&b.url(ARCHIVE)), "{}", out.describe());
    let entries = std::fs::read_dir(&dest).map(|d| d.count()).unwrap_or(0);
    assert_eq!(entries, 0, "nothing extracted");
}

/// Every source fails (a 404, a refused connection, a 403): exit 2, one line naming each.
#[test]
fn every_source_failing_is_one_line() {
    let td = TestDir::new("every_source_failing_is_one_line");
    let server = Server::start(tree_tar(), Faults::default());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let refused = format!("http://127.0.0.1:{closed}/a.tar");
    let missing = server.url("/missing.tar");
    let forbidden = server.url("/forbidden");
    let flags = ["--mirror", &refused, "--mirror", &forbidden];
    let (out, _) = extract(&td, util::fastuntar(), &missing, &flags);
    fails_in_one_line(&out, &missing, "every source failed", "all fail");
    let line = &out.diagnostics()[0];
    for (url, why) in [(&missing, "404"), (&refused, "cannot connect"), (&forbidden, "403")] {
        assert!(line.contains(url.as_str()) && line.contains(why), "{url} {why}: {line}");
    }
}

/// A source 10x slower than two others never holds the run back: from the three, the run
/// takes no longer than from the two fast ones alone, +15 %.
///
/// Measured within this test, interleaved (two, three, two, three, ...) with the same flags,
/// and compared on each side's fastest run: the sources are paced by sleeping servers, so
/// what a loaded machine adds to a run is delay, never speed, and the fastest of a few runs
/// is the one least disturbed. A slow piece holding the reader costs a run the same
/// whatever the load (one 256 KiB block at 0.8 MB/s: 0.33 s, +17 % here), so it shows in
/// the fastest too. At least MIN_ROUNDS rounds; while the bar is missed, more, up to
/// MAX_ROUNDS (a bounded retry for load spikes, not for a scheduler that fails every time).
/// Before the 0 B/s measurement was fixed (`schedule::tests::a_request_measures_its_source`
/// pins that) the fastest runs came out at 1.10-1.13x at a load of 8.5, after at 0.96-1.05x:
/// this bar is the issue's, and the unit test is the sharper check.
#[test]
fn a_slow_source_never_holds_the_run_back() {
    const MIN_ROUNDS: usize = 2;
    const MAX_ROUNDS: usize = 5;
    const BAR: f64 = 1.15;
    let Some(td) = util::test_dir("a_slow_source_never_holds_the_run_back", &["tar"]) else {
        return;
    };
    // 24 MB at 2 x 8 MB/s: 1.5 s from the two fast sources. A window of 2 MiB (`--memory
    // 8M`) holds 125 ms of it, as the default 16 MiB holds 80 ms at 200 MB/s: the slow
    // source's smallest piece (256 KiB, 0.3 s) would hold the reader back wherever it lay.
    let tar = big_tar(60, 7);
    let o = oracle(&td, &tar);
    let paced = |rate| Faults { rate: Some(rate), ..Faults::default() };
    let fast1 = Server::start(tar.clone(), paced(8_000_000));
    let fast2 = Server::start(tar.clone(), paced(8_000_000));
    let slow = Server::start(tar, paced(800_000));
    let flags = ["-q", "--memory", "8M"];
    let best = |v: &[Duration]| v.iter().min().copied().unwrap().as_secs_f64();
    let (mut two, mut three) = (Vec::new(), Vec::new());
    let mut log = Vec::new();
    for round in 0..MAX_ROUNDS {
        let (out, dest) = from_sources(&td, &[&fast1, &fast2], &flags);
        out.expect_code(0);
        two.push(out.elapsed);
        if round == 0 {
            o.same(&dest, "two fast sources");
        }
        let (out, dest) = from_sources(&td, &[&fast1, &fast2, &slow], &flags);
        out.expect_code(0);
        three.push(out.elapsed);
        if round == 0 {
            o.same(&dest, "two fast sources and a slow one");
        }
        let line = format!(
            "round {round}: two {:.3} s, three {:.3} s; sources: {}",
            two[round].as_secs_f64(),
            three[round].as_secs_f64(),
            out.stdout_str().split("\"sources\":").nth(1).unwrap_or("").trim_end()
        );
        util::note(&line);
        log.push(line);
        if round + 1 >= MIN_ROUNDS && best(&three) <= best(&two) * BAR {
            break;
        }
    }
    let (two, three) = (best(&two), best(&three));
    assert!(
        three <= two * BAR,
        "from three sources {three:.3} s, from the two fast ones alone {two:.3} s ({:.2}x, \
         the fastest of {} interleaved rounds each; load {})\n{}",
        three / two,
        log.len(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        log.join("\n")
    );
}

/// A mirror that hangs mid-run (its connections stay open and send nothing, as a mirror
/// black-holed by a firewall) does not hold the run back until the 30 s stall timeout: the
/// piece the reader needs is asked again from the other source, the first copy wins.
#[test]
fn a_hung_source_is_copied_around() {
    let Some(td) = util::test_dir("a_hung_source_is_copied_around", &["tar"]) else { return };
    // 8 MB at 2 x 4 MB/s, the second hanging once 25 % was served: ~2 s.
    let tar = big_tar(20, 11);
    let o = oracle(&td, &tar);
    let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mark = tar.len() as u64 / 4;
    let paced = |die: Option<(std::sync::Arc<std::sync::atomic::AtomicU64>, u64)>| Faults {
        rate: Some(4_000_000),
        hang: die.is_some(),
        die_when: die,
        ..Faults::default()
    };
    let a = Server::start(tar.clone(), paced(None));
    let b = Server::start(tar, paced(Some((served, mark))));
    let (out, dest) = from_sources(&td, &[&a, &b], &["--memory", "8M"]);
    out.expect_code(0);
    o.same(&dest, "a hung mirror");
    assert!(b.dead(), "the mirror hung\n{}", out.describe());
    assert!(out.elapsed < Duration::from_secs(15), "{:?}\n{}", out.elapsed, out.describe());
    let copies = util::json_number(&out.stdout_str(), "copies").unwrap();
    assert!(copies >= 1, "{}", out.describe());
}

/// `--limit-rate 2M` with three sources: the servers together send 2 MiB/s within 10 %, over
/// the first 10 s after the first byte.
#[test]
fn limit_rate_holds_within_ten_percent() {
    let Some(td) = util::test_dir("limit_rate_holds_within_ten_percent", &["tar"]) else {
        return;
    };
    // 26 MB: 12.4 s at 2 MiB/s.
    let tar = big_tar(65, 9);
    let o = oracle(&td, &tar);
    let servers: Vec<Server> =
        (0..3).map(|_| Server::start(tar.clone(), Faults::default())).collect();
    let refs: Vec<&Server> = servers.iter().collect();
    let (out, dest) = from_sources(&td, &refs, &["--limit-rate", "2M"]);
    out.expect_code(0);
    o.same(&dest, "--limit-rate");
    let mut sent: Vec<(std::time::Instant, u64)> = Vec::new();
    for s in &servers {
        let mut before = 0;
        for (t, total) in s.sent() {
            sent.push((t, total - before));
            before = total;
        }
    }
    sent.sort();
    let t0 = sent.first().expect("bytes were sent").0;
    let window = Duration::from_secs(10);
    let in_window: u64 = sent.iter().filter(|(t, _)| *t - t0 <= window).map(|x| x.1).sum();
    let want = 2.0 * 1048576.0 * 10.0;
    let ratio = in_window as f64 / want;
    util::note(&format!("--limit-rate 2M: {in_window} bytes in the first 10 s ({ratio:.3})"));
    assert!((0.9..=1.1).contains(&ratio), "{in_window} bytes in 10 s, {ratio:.3} of 2 MiB/s");
}
