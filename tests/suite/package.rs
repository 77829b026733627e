//! Installing without a Rust toolchain (issue 44): `scripts/package.sh` builds a static binary
//! and a .deb. The .deb holds the binary, the man page and the bash/zsh/fish completions where
//! Debian puts them, with a control file that says what it is; the binary taken out of it is
//! static and extracts the committed sample, and an archive from an https:// URL on
//! `localhost` (musl's own resolver reading /etc/hosts, rustls and ring built with musl-gcc).
//!
//! No matrix: one package, one build. Exhaustive tier only: the build compiles fastuntar and
//! every dependency again for the musl target (docs/TESTING.md has its cost); the quick tier
//! says so in one line and stops.

use crate::util;
use crate::util::engine::{Tier, tier};

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use util::http::{self, Faults, Server};
use util::rawtar::Tar;
use util::{Cmd, Output, TestDir, have_tools, note};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd`, asserting it exits 0; its output.
fn ok(cmd: &mut Cmd, what: &str) -> Output {
    let out = cmd.run();
    assert!(out.success(), "{what}\n{}", out.describe());
    out
}

/// `dpkg-deb -c`'s listing: path (without the leading `.`) → (mode string, owner/group).
fn contents(deb: &Path) -> BTreeMap<String, (String, String)> {
    let out = ok(Cmd::new("dpkg-deb").arg("-c").arg(deb), "dpkg-deb -c");
    out.stdout_str()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 6, "a dpkg-deb -c line: {l:?}");
            let path = f[5].trim_start_matches('.').trim_end_matches('/');
            (path.to_string(), (f[0].to_string(), f[1].to_string()))
        })
        .collect()
}

#[test]
fn deb_and_static_binary() {
    let test = "deb_and_static_binary";
    if tier() == Tier::Quick {
        note(&format!(
            "{test}: not in the quick tier (scripts/package.sh builds for the musl target); \
             FASTUNTAR_TEST_TIER=exhaustive runs it"
        ));
        return;
    }
    if !have_tools(test, &["dpkg-deb", "file", "ldd", "gzip", "sha256sum", "bash"]) {
        return;
    }
    let td = TestDir::new(test);
    let out_dir = td.join("package");
    // scripts/test.sh has built it before the tests (so the build does not compete with them
    // for the CPUs); then this is cargo finding it up to date, and the packing. Cargo holds
    // no lock on target/ while the tests of `cargo test` run.
    let build = ok(
        Cmd::new("bash")
            .arg(repo().join("scripts/package.sh"))
            .arg("--out")
            .arg(&out_dir)
            .timeout(Duration::from_secs(45 * 60)),
        "scripts/package.sh",
    );
    let printed: Vec<PathBuf> = build.stdout_str().lines().map(PathBuf::from).collect();
    let [deb, lone] = printed.as_slice() else {
        panic!("package.sh should print the .deb and the binary\n{}", build.describe());
    };
    // Under CI the musl build is required: package.sh falls back to a static glibc (whose
    // DNS needs the NSS modules of its own glibc) only where musl cannot be had.
    let libc = lone.to_string_lossy().rsplit('-').next().unwrap_or_default().to_string();
    if libc != "musl" {
        let why = format!("package.sh built a static {libc} binary, not musl");
        assert!(!util::in_ci(), "{test}: {why} (CI=true)\n{}", build.describe());
        note(&format!("{test}: NOTE {why}; checking that one"));
    }
    let arch = ok(Cmd::new("dpkg").arg("--print-architecture"), "dpkg").stdout_str();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        deb.file_name().unwrap().to_str().unwrap(),
        format!("fastuntar_{version}_{}.deb", arch.trim()),
        "the .deb's name"
    );

    // 1. What the .deb holds: exactly these files, root's, with these modes.
    let listed = contents(deb);
    let files: BTreeMap<&str, &str> = [
        ("/usr/bin/fastuntar", "-rwxr-xr-x"),
        ("/usr/share/man/man1/fastuntar.1.gz", "-rw-r--r--"),
        ("/usr/share/bash-completion/completions/fastuntar", "-rw-r--r--"),
        ("/usr/share/zsh/vendor-completions/_fastuntar", "-rw-r--r--"),
        ("/usr/share/fish/vendor_completions.d/fastuntar.fish", "-rw-r--r--"),
        ("/usr/share/doc/fastuntar/copyright", "-rw-r--r--"),
        ("/usr/share/doc/fastuntar/changelog.gz", "-rw-r--r--"),
        ("/usr/share/lintian/overrides/fastuntar", "-rw-r--r--"),
    ]
    .into();
    let got: BTreeMap<&str, &str> = listed
        .iter()
        .filter(|(_, (mode, _))| !mode.starts_with('d'))
        .map(|(p, (mode, _))| (p.as_str(), mode.as_str()))
        .collect();
    assert_eq!(got, files, "the .deb's files and modes");
    for (path, (mode, owner)) in &listed {
        assert_eq!(owner, "root/root", "{path} in the .deb");
        if mode.starts_with('d') {
            assert_eq!(mode, "drwxr-xr-x", "{path} in the .deb");
        }
    }

    // 2. The control file.
    let field = |name: &str| {
        let out = ok(Cmd::new("dpkg-deb").arg("-f").arg(deb).arg(name), "dpkg-deb -f");
        out.stdout_str().trim().to_string()
    };
    assert_eq!(field("Package"), "fastuntar");
    assert_eq!(field("Version"), version);
    assert_eq!(field("Architecture"), arch.trim());
    assert_eq!(field("Depends"), "", "a static binary depends on nothing");
    assert!(field("Maintainer").contains('@'), "Maintainer: {}", field("Maintainer"));
    assert!(field("Description").starts_with("fast and safe tar extractor"));
    let kib: u64 = field("Installed-Size").parse().expect("Installed-Size");
    let bin_kib = fs::metadata(lone).unwrap().len() / 1024;
    assert!(kib >= bin_kib, "Installed-Size {kib} KiB, the binary alone {bin_kib} KiB");

    // 3. Unpacked: the md5sums hold, the binary is static and is the lone one.
    let root = td.join("root");
    ok(Cmd::new("dpkg-deb").arg("-x").arg(deb).arg(&root), "dpkg-deb -x");
    let control = td.join("control");
    ok(Cmd::new("dpkg-deb").arg("-e").arg(deb).arg(&control), "dpkg-deb -e");
    ok(
        Cmd::new("md5sum")
            .args(["-c", "--strict", "--quiet"])
            .arg(control.join("md5sums"))
            .current_dir(&root),
        "the .deb's md5sums",
    );
    let bin = root.join("usr/bin/fastuntar");
    assert_eq!(fs::read(&bin).unwrap(), fs::read(lone).unwrap(), "the binary beside the .deb");
    let kind = ok(Cmd::new("file").arg("-b").arg(&bin), "file").stdout_str();
    assert!(
        kind.contains("statically linked") || kind.contains("static-pie linked"),
        "not a static binary: {kind}"
    );
    let ldd = Cmd::new("ldd").arg(&bin).run();
    let said = format!("{}{}", ldd.stdout_str(), ldd.stderr_str());
    assert!(
        said.contains("not a dynamic executable") || said.contains("statically linked"),
        "ldd finds libraries: {said}"
    );

    // 4. The man page and the completions are the binary's own, and well formed.
    let man = ok(
        Cmd::new("gzip").arg("-dc").arg(root.join("usr/share/man/man1/fastuntar.1.gz")),
        "gunzip",
    );
    let man = man.stdout_str();
    assert!(man.contains(".TH fastuntar 1") && man.contains("\n.SH "), "not a man page:\n{man}");
    assert!(man.contains("direct\\-io"), "the man page lacks --direct-io");
    let bash = root.join("usr/share/bash-completion/completions/fastuntar");
    ok(Cmd::new("bash").arg("-n").arg(&bash), "the bash completion is not valid bash");
    for f in [
        &bash,
        &root.join("usr/share/zsh/vendor-completions/_fastuntar"),
        &root.join("usr/share/fish/vendor_completions.d/fastuntar.fish"),
    ] {
        let text = fs::read_to_string(f).unwrap();
        assert!(
            text.contains("fastuntar") && text.contains("direct-io"),
            "{}: {text}",
            f.display()
        );
    }

    // 5. It extracts: the committed sample, every file with its checksum.
    let dest = td.join("sample");
    fs::create_dir(&dest).unwrap();
    let sample = repo().join("fixtures/sample.tar.zst");
    ok(
        Cmd::new(&bin).arg("-x").arg(&sample).arg("-C").arg(&dest),
        "the static binary on the sample",
    );
    ok(
        Cmd::new("sha256sum")
            .args(["-c", "--strict", "--quiet"])
            .arg(repo().join("fixtures/sample.sha256"))
            .current_dir(&dest),
        "the sample extracted by the static binary",
    );

    // 5b. Its writer stands aside for the decoder (SCHED_BATCH, src/aside.rs): musl's
    //     sched_setscheduler is a stub that fails, so the binary makes the system call itself
    //     (until it did, the static binary never changed a thread). The archive comes on a
    //     pipe held open after its first member's header, so the run waits with its writer
    //     under its policy while the threads are looked at.
    let mut tar = Tar::new();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    tar.file("waits", &data);
    let tar = tar.finish();
    let dest = td.join("aside");
    fs::create_dir(&dest).unwrap();
    let mut child = std::process::Command::new(&bin)
        .args(["-x", "-f", "-", "-C"])
        .arg(&dest)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, &tar[..1024]).unwrap();
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
    while !seen.contains(&libc::SCHED_BATCH) && start.elapsed() < Duration::from_secs(20) {
        seen = util::thread_policies(child.id());
        std::thread::sleep(Duration::from_millis(5));
    }
    std::io::Write::write_all(&mut stdin, &tar[1024..]).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        seen.contains(&libc::SCHED_BATCH),
        "no thread of the static binary under SCHED_BATCH: {seen:?}"
    );
    assert!(status.success(), "the static binary on a pipe: {status}");
    assert_eq!(fs::read(dest.join("waits")).unwrap(), data);

    // 6. From an https:// URL on localhost: the name through musl's resolver (/etc/hosts),
    //    the certificate checked by rustls with ring as built by musl-gcc.
    let (ca, config) = http::tls_for(&["localhost"]);
    let ca_file = td.write("ca.pem", ca.as_bytes());
    let server = Server::with_tls(fs::read(&sample).unwrap(), Faults::default(), Some(config));
    let url = server.url(http::ARCHIVE);
    assert!(url.starts_with("https://localhost:"), "{url}");
    let dest = td.join("from-url");
    fs::create_dir(&dest).unwrap();
    ok(
        Cmd::new(&bin).arg("-x").arg(&url).arg("-C").arg(&dest).arg("--cacert").arg(&ca_file),
        "the static binary from https://localhost",
    );
    ok(
        Cmd::new("sha256sum")
            .args(["-c", "--strict", "--quiet"])
            .arg(repo().join("fixtures/sample.sha256"))
            .current_dir(&dest),
        "the sample downloaded by the static binary",
    );
}
