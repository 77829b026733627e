//! Extended attributes (`--xattrs`, `--xattrs-include`, `--xattrs-exclude`) against GNU tar
//! 1.34's `--xattrs`: archives written by `tar --xattrs` and `bsdtar --xattrs`, every writer
//! configuration and 1 and 3 writer threads; as root `trusted.*` and a `security.capability`
//! that a late write or chown would clear; a destination without attributes (ramfs).
//!
//! Each case checks that GNU tar's tree has the attributes it is about before comparing, so a
//! fastuntar that restores nothing cannot pass.

use crate::util;
use crate::util::Flags;
use crate::util::engine::{Matrix, THREADS_ONE_AND_MORE};

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use util::gnu::{self, Case, Ran};
use util::{Cmd, Output, TestDir, fastuntar, fastuntar_with, for_each_config, gnu_tar};

/// The rows this suite runs over (tests/util/engine.rs): every writer row (each backend sets
/// xattrs and ACLs itself). Plain tars: no decoder row applies; a few files: the stock limits
/// change nothing.
const MATRIX: Matrix = Matrix::WRITERS;

/// The cases whose members several writers split between them (files, a directory's
/// attributes after its contents): every writer row at one writer, a row of each backend at
/// four.
const THREADS: Matrix = MATRIX.threads(THREADS_ONE_AND_MORE);

/// `--acls` under a default ACL inherited from DIR: the two backends at one and four writers
/// (the ACL is set by each backend's own call; direct IO changes nothing about it).
const BACKENDS: Matrix = THREADS.only(&["portable", "uring"]);

/// One PAX record, `LEN KEY=VALUE\n`, LEN counting itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let mut body = format!(" {key}=").into_bytes();
    body.extend(value);
    body.push(b'\n');
    let mut len = body.len() + 1;
    while format!("{len}").len() + body.len() != len {
        len += 1;
    }
    let mut record = format!("{len}").into_bytes();
    record.extend(body);
    record
}

/// A ustar header (mode 0644, a directory's 0755, an old mtime) for `name` of type `flag`
/// and `size` bytes.
fn header(name: &str, flag: u8, size: usize) -> Vec<u8> {
    let mut h = tar::Header::new_ustar();
    h.set_path(name).unwrap();
    h.set_entry_type(tar::EntryType::new(flag));
    h.set_size(size as u64);
    h.set_mode(if flag == b'5' { 0o755 } else { 0o644 });
    h.set_mtime(1_000_000);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// An archive of one file `name` holding `data`, behind a PAX header of `records`.
fn pax_archive(name: &str, records: &[u8], data: &[u8]) -> Vec<u8> {
    let mut bytes = header(&format!("PaxHeaders/{name}"), b'x', records.len());
    bytes.extend(records);
    bytes.resize(bytes.len().next_multiple_of(512), 0);
    bytes.extend(header(name, b'0', data.len()));
    bytes.extend(data);
    bytes.resize(bytes.len().next_multiple_of(512) + 1024, 0);
    bytes
}

/// Every path under `root` (itself excluded) with its attributes, names sorted.
type Attrs = BTreeMap<PathBuf, Vec<(Vec<u8>, Vec<u8>)>>;

fn set(p: &Path, name: &str, value: &[u8]) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // Safety: valid C strings and value slice.
    let r =
        unsafe { libc::lsetxattr(c.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(r, 0, "setxattr {} {name}: {}", p.display(), std::io::Error::last_os_error());
}

fn attrs_of(p: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 65536];
    // Safety: valid C string and buffer.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    assert!(n >= 0, "listxattr {}: {}", p.display(), std::io::Error::last_os_error());
    let mut out = Vec::new();
    for name in names[..n as usize].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let cn = CString::new(name).unwrap();
        let mut value = vec![0u8; 65536];
        // Safety: valid C strings and buffer.
        let len = unsafe {
            libc::lgetxattr(c.as_ptr(), cn.as_ptr(), value.as_mut_ptr().cast(), value.len())
        };
        assert!(len >= 0, "getxattr {}: {}", p.display(), std::io::Error::last_os_error());
        value.truncate(len as usize);
        out.push((name.to_vec(), value));
    }
    out.sort();
    out
}

fn attrs(root: &Path) -> Attrs {
    fn walk(root: &Path, dir: &Path, out: &mut Attrs) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), attrs_of(&p));
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Attrs::new();
    walk(root, root, &mut out);
    out
}

fn count(a: &Attrs) -> usize {
    a.values().map(Vec::len).sum()
}

/// `TOOL --xattrs -cf ARCHIVE -C SRC .`
fn create(tool: &str, src: &Path, archive: &Path) {
    Cmd::new(tool)
        .arg("--xattrs")
        .arg("-cf")
        .arg(archive)
        .arg("-C")
        .arg(src)
        .arg(".")
        .run()
        .expect_code(0);
}

/// The destination for one fastuntar run: a writer configuration plus writer threads.
fn run(cfg: &impl Flags, flags: &[&str], archive: &Path, dest: &Path) -> Output {
    fastuntar_with(cfg).arg("-q").args(flags).extract(archive, dest).run()
}

/// The row of a comparison with GNU tar: `FLAGS -xf ARCHIVE` (fastuntar with `-q`), exit 0,
/// the trees compared, and `also` the attributes.
fn row<'a>(archive: &Path, flags: &[&str]) -> Case<'a> {
    Case::extract(archive, flags, &[]).ours_only(&["-q"]).code(0)
}

/// A row's check of the attributes: GNU tar restored `want` of them (so a fastuntar that
/// restores nothing cannot pass) and fastuntar the same ones.
fn same_attrs(want: usize) -> impl Fn(&Ran, &Ran) -> Vec<String> {
    move |g, o| {
        let (expected, got) = (attrs(&g.dest), attrs(&o.dest));
        let mut out = Vec::new();
        if count(&expected) != want {
            out.push(format!(
                "GNU tar restored {} attributes, not {want}: {expected:?}",
                count(&expected)
            ));
        }
        if got != expected {
            out.push(format!("attributes {got:?}, GNU tar {expected:?}"));
        }
        out
    }
}

/// A tree with user.* attributes on files and a directory: several per file, binary values
/// (NUL, newline), a file without any, and a file written in several 1 MiB chunks.
fn user_tree(t: &TestDir) -> PathBuf {
    let src = t.join("src");
    fs::create_dir_all(src.join("d/e")).unwrap();
    fs::write(src.join("plain"), b"no attributes").unwrap();
    fs::write(src.join("d/f"), b"f").unwrap();
    fs::write(src.join("d/e/g"), b"g").unwrap();
    fs::write(src.join("big"), vec![7u8; 3 << 20]).unwrap();
    set(&src.join("d/f"), "user.a", b"va");
    set(&src.join("d/f"), "user.bin", b"a\0b\nc\0");
    set(&src.join("d/f"), "user.empty", b"");
    set(&src.join("d/e/g"), "user.g", b"\n");
    set(&src.join("big"), "user.big", &[0xffu8; 1000]);
    set(&src.join("d"), "user.dir", b"dv");
    set(&src.join("d/e"), "user.e", b"\0");
    src
}

#[test]
fn gnu_tar_and_bsdtar_archives_restore_as_gnu_tar_does() {
    let test = "gnu_tar_and_bsdtar_archives_restore_as_gnu_tar_does";
    let Some(t) = util::test_dir(test, &["bsdtar"]) else { return };
    let src = user_tree(&t);
    let gnu = t.join("gnu.tar");
    let bsd = t.join("bsd.tar");
    create("tar", &src, &gnu);
    create("bsdtar", &src, &bsd);
    // (flags, attributes GNU tar restores from the GNU archive)
    let cases: &[(&[&str], usize)] = &[
        (&["--xattrs"], 7),
        (&["--xattrs-include=user.[ab]*"], 3),
        (&["--xattrs", "--xattrs-exclude=user.bin", "--xattrs-exclude=*.e"], 5),
        (&["--xattrs-exclude=user.bin"], 6),
        (&["--xattrs-include=*", "--no-xattrs"], 0),
        (&["--no-xattrs", "--xattrs-include=*"], 7),
        (&[], 0),
    ];
    let checks: Vec<_> = cases.iter().map(|(_, want)| same_attrs(*want)).collect();
    let rows = [&gnu, &bsd].into_iter().flat_map(|archive| {
        cases
            .iter()
            .zip(&checks)
            .map(|((flags, _), check)| row(archive, flags).over(&THREADS).also(check))
    });
    gnu::check(&t, rows);
}

/// bsdtar's LIBARCHIVE.xattr records (name %-encoded, value base64) count where no SCHILY
/// record names the attribute; GNU tar ignores them (bsdtar restores them), so the reference
/// here is bsdtar.
#[test]
fn libarchive_records_count_where_no_schily_record_names_the_attribute() {
    let test = "libarchive_records_count_where_no_schily_record_names_the_attribute";
    let Some(t) = util::test_dir(test, &["bsdtar"]) else { return };
    // A SCHILY and a LIBARCHIVE record for user.dup with different values, and a LIBARCHIVE
    // record alone for "user.a=b %" (%-encoded) with a value holding NUL and newline.
    let records = [
        ("LIBARCHIVE.xattr.user.dup", "bGli".to_string()),
        ("SCHILY.xattr.user.dup", "schily".to_string()),
        ("LIBARCHIVE.xattr.user.a%3Db%20%25", "YQBiCmM".to_string()),
    ];
    let pax: Vec<u8> = records.iter().flat_map(|(k, v)| pax_record(k, v.as_bytes())).collect();
    let mut ar = Vec::new();
    ar.extend(header("PaxHeaders/f", b'x', pax.len()));
    ar.extend(&pax);
    ar.resize(ar.len().div_ceil(512) * 512, 0);
    ar.extend(header("f", b'0', 1));
    ar.extend([b'x'; 512]);
    ar.extend([0u8; 1024]);
    let archive = t.write("lib.tar", &ar);
    let reference = t.fresh("bsdtar-out");
    Cmd::new("bsdtar").extract(&archive, &reference).run().expect_code(0);
    let expected = attrs(&reference);
    let want = vec![
        (b"user.a=b %".to_vec(), b"a\0b\nc".to_vec()),
        (b"user.dup".to_vec(), b"schily".to_vec()),
    ];
    assert_eq!(expected[Path::new("f")], want);
    for_each_config(test, &MATRIX, |cfg| {
        let out = t.fresh("out");
        run(cfg, &["--xattrs", "--writer-threads", "1"], &archive, &out).expect_code(0);
        assert_eq!(attrs(&out), expected, "{}", cfg.name());
    });
}

/// The largest value the kernel takes (64 KiB), binary, on tmpfs (ext4 keeps at most a block
/// of attributes per inode).
#[test]
fn a_64_kib_value_on_tmpfs() {
    let test = "a_64_kib_value_on_tmpfs";
    let shm = Path::new("/dev/shm");
    let Ok(t) = TestDir::in_dir(test, shm) else {
        util::note(&format!("SKIP {test}: no /dev/shm"));
        return;
    };
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("f"), b"data").unwrap();
    let value: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    let c = CString::new(src.join("f").as_os_str().as_bytes()).unwrap();
    // Safety: valid C strings and value slice.
    if unsafe {
        libc::setxattr(c.as_ptr(), c"user.big".as_ptr(), value.as_ptr().cast(), value.len(), 0)
    } != 0
    {
        let e = std::io::Error::last_os_error();
        util::note(&format!("SKIP {test}: /dev/shm refuses a 64 KiB user.* value: {e}"));
        return;
    }
    set(&src.join("f"), "user.small", b"s");
    let archive = t.join("a.tar");
    create("tar", &src, &archive);
    let same = same_attrs(2);
    let big = |g: &Ran, _: &Ran| -> Vec<String> {
        let first = attrs_of(&g.dest.join("f")).into_iter().next();
        (first != Some((b"user.big".to_vec(), value.clone())))
            .then(|| "GNU tar did not restore user.big".into())
            .into_iter()
            .collect()
    };
    let both = |g: &Ran, o: &Ran| big(g, o).into_iter().chain(same(g, o)).collect();
    let row = row(&archive, &["--xattrs"]).ours_only(&["--writer-threads", "2"]);
    gnu::check(&t, [row.over(&MATRIX).also(&both)]);
}

/// As root: trusted.* on a file, a directory and a FIFO, and security.capability on a 3 MiB
/// file (several writes: a write or chown after the attribute clears it), with --same-owner
/// (a chown) too; then as uid 65534 the trusted.* attributes are refused: one warning per
/// member, exit 0 as GNU tar's, the rest restored.
#[test]
fn trusted_and_capability_as_root() {
    let why = "trusted.* and security.* need CAP_SYS_ADMIN / CAP_SETFCAP";
    let Some(t) = util::users_test_dir("trusted_and_capability_as_root", why, &["tar"]) else {
        return;
    };
    let src = t.join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("ping"), vec![1u8; 3 << 20]).unwrap();
    fs::write(src.join("d/f"), b"f").unwrap();
    let fifo = CString::new(src.join("d/p").as_os_str().as_bytes()).unwrap();
    // Safety: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // cap_net_raw=ep, VFS_CAP_REVISION_2.
    let cap: Vec<u8> = [1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0].to_vec();
    set(&src.join("ping"), "security.capability", &cap);
    set(&src.join("ping"), "user.u", b"u");
    set(&src.join("d/f"), "trusted.f", b"tf");
    set(&src.join("d/f"), "user.f", b"uf");
    set(&src.join("d"), "trusted.d", b"td");
    set(&src.join("d/p"), "trusted.p", b"tp");
    let archive = t.join("a.tar");
    create("tar", &src, &archive);
    let include = [
        "--xattrs-include=security.capability",
        "--xattrs-include=trusted.*",
        "--xattrs-include=user.*",
    ];
    let same = same_attrs(6);
    let capable = |g: &Ran, o: &Ran| -> Vec<String> {
        let first = attrs_of(&g.dest.join("ping")).into_iter().next();
        let lost = first != Some((b"security.capability".to_vec(), cap.clone()));
        let lost = lost.then(|| "GNU tar did not restore the capability".to_string());
        lost.into_iter().chain(same(g, o)).collect()
    };
    let with_owner: Vec<&str> = include.iter().chain(&["--same-owner"]).copied().collect();
    let rows =
        [&include[..], &with_owner].map(|flags| row(&archive, flags).over(&THREADS).also(&capable));
    gnu::check(&t, rows);
    // Not root: trusted.* is refused (EPERM), GNU tar warns per attribute and exits 0; we
    // warn once per member and exit 0.
    let out = t.fresh("nobody");
    // Its own (the archive's "./" sets the mode of DIR, which only its owner may).
    std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
    let flags = ["--xattrs-include=trusted.*", "--xattrs-include=user.*"];
    let got = util::fastuntar().user(65534, 65534).args(flags).extract(&archive, &out).run();
    got.expect_code(0);
    let mut lines = got.diagnostics();
    lines.sort();
    assert_eq!(
        lines,
        [
            "fastuntar: ./d/: cannot set extended attribute 'trusted.d': Operation not permitted (os error 1)",
            "fastuntar: ./d/f: cannot set extended attribute 'trusted.f': Operation not permitted (os error 1)",
            "fastuntar: ./d/p: cannot set extended attribute 'trusted.p': Operation not permitted (os error 1)",
        ],
        "{}",
        got.describe()
    );
    assert_eq!(attrs_of(&out.join("d/f")), [(b"user.f".to_vec(), b"uf".to_vec())]);
    assert_eq!(attrs_of(&out.join("ping")), [(b"user.u".to_vec(), b"u".to_vec())]);
}

/// A destination without extended attributes (ramfs: ENOTSUP for every namespace): each
/// member with attributes is named once, everything else extracted, exit 0: GNU tar warns per
/// attribute and exits 0.
#[test]
fn a_filesystem_without_xattrs() {
    let test = "a_filesystem_without_xattrs";
    let Some(t) = util::root_test_dir(test, "mounting a ramfs", &["tar"]) else { return };
    let src = user_tree(&t);
    let archive = t.join("a.tar");
    create("tar", &src, &archive);
    let mnt = t.fresh("ramfs");
    let m = Cmd::new("mount").args(["-t", "ramfs", "ramfs"]).arg(&mnt).run();
    if !m.success() {
        util::note(&format!("SKIP {test}: cannot mount a ramfs: {}", m.stderr_str().trim()));
        return;
    }
    let result = std::panic::catch_unwind(|| {
        let gnu =
            gnu_tar([Path::new("--xattrs"), Path::new("-xf"), &archive, Path::new("-C"), &mnt]);
        gnu.expect_code(0);
        assert!(gnu.stderr_str().contains("Operation not supported"), "{}", gnu.describe());
        for (i, cfg) in util::writer_rows(&["portable", "uring"]).into_iter().enumerate() {
            let out = mnt.join(format!("out{i}"));
            fs::create_dir(&out).unwrap();
            let got = run(cfg, &["--xattrs", "--writer-threads", "1"], &archive, &out);
            got.expect_code(0);
            let mut lines = got.diagnostics();
            lines.sort();
            let want: Vec<String> = ["./big", "./d/", "./d/e/", "./d/e/g", "./d/f"]
                .iter()
                .map(|m| {
                    let first = match *m {
                        "./big" => "user.big",
                        "./d/" => "user.dir",
                        "./d/e/" => "user.e",
                        "./d/e/g" => "user.g",
                        _ => "user.a",
                    };
                    let more = if *m == "./d/f" { " (and 2 more not set)" } else { "" };
                    format!(
                        "fastuntar: {m}: cannot set extended attribute '{first}': Operation not supported (os error 95){more}"
                    )
                })
                .collect();
            assert_eq!(lines, want, "{}\n{}", cfg.name, got.describe());
            assert_eq!(fs::read(out.join("big")).unwrap().len(), 3 << 20);
        }
    });
    Cmd::new("umount").arg(&mnt).run();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn snapshot_mode_refuses_xattrs() {
    let t = TestDir::new("snapshot_mode_refuses_xattrs");
    let archive = t.write("a.tar", vec![0u8; 1024]);
    for flag in ["--xattrs", "--xattrs-include=*"] {
        let got = util::fastuntar()
            .args([flag, "--snapshot", "-xf"])
            .arg(&archive)
            .arg("-C")
            .arg(t.path())
            .run();
        got.expect_code(2);
        assert!(
            got.stderr_str().contains("--xattrs cannot be used with --snapshot"),
            "{}",
            got.describe()
        );
    }
    // The last flag decides: --no-xattrs after them turns them off.
    util::fastuntar()
        .args(["--xattrs", "--no-xattrs", "--snapshot", "-xf"])
        .arg(&archive)
        .arg("-C")
        .arg(t.path())
        .run()
        .expect_code(0);
}

/// Directories keep their attributes until their metadata is applied, after their contents:
/// 1,000 nested directories with 60 KiB each (60 MB, on tmpfs) once held all of it at once.
/// Past 16 MiB a directory's attributes are set when it is made; every one still arrives, and
/// the memory stays bounded.
#[test]
fn deep_directories_with_large_attributes_stay_bounded() {
    let test = "deep_directories_with_large_attributes_stay_bounded";
    let Ok(t) = tempfile::tempdir_in("/dev/shm") else {
        util::note(&format!("SKIP {test}: no /dev/shm"));
        return;
    };
    const DEPTH: usize = 1000;
    const VALUE: usize = 60 * 1024;
    let value = |level: usize| -> Vec<u8> {
        (0..VALUE).map(|i| ((i * 7 + level * 13) % 251) as u8).collect()
    };
    let mut ar = Vec::new();
    let mut path = String::new();
    for level in 0..DEPTH {
        path.push_str("d/");
        // The path (past ustar's 100 bytes) and the attribute, as PAX records.
        let mut pax = pax_record("path", path.as_bytes());
        pax.extend(pax_record("SCHILY.xattr.user.big", &value(level)));
        ar.extend(header("PaxHeaders/d", b'x', pax.len()));
        ar.extend(&pax);
        ar.resize(ar.len().div_ceil(512) * 512, 0);
        ar.extend(header("d/", b'5', 0));
    }
    ar.extend([0u8; 1024]);
    let archive = t.path().join("deep.tar");
    fs::write(&archive, &ar).unwrap();
    let out = t.path().join("out");
    fs::create_dir(&out).unwrap();
    let run = fastuntar()
        .args(["--xattrs", "-q", "-xf"])
        .arg(&archive)
        .arg("-C")
        .arg(&out)
        .measure_rss()
        .run();
    run.expect_code(0);
    let mut dir = out.clone();
    for level in 0..DEPTH {
        dir.push("d");
        let got = attrs_of(&dir);
        assert_eq!(got, [(b"user.big".to_vec(), value(level))], "level {level}");
    }
    if let Some(kib) = run.peak_rss_kib {
        util::note(&format!("{test}: peak RSS {kib} KiB"));
        assert!(kib < 48 * 1024, "peak RSS {kib} KiB for 60 MB of attributes");
    }
}

/// `setfacl ARGS... PATH`.
fn setfacl(args: &[&str], p: &Path) {
    Cmd::new("setfacl").args(args).arg(p).run().expect_code(0);
}

/// The ACL attributes of every path under `root`, and how many there are.
fn acls(root: &Path) -> (Attrs, usize) {
    let mut all = attrs(root);
    for list in all.values_mut() {
        list.retain(|(name, _)| name.starts_with(b"system.posix_acl_"));
    }
    let n = count(&all);
    (all, n)
}

/// `--acls` against GNU tar 1.34 (`tar --acls`): an archive GNU tar wrote of files with
/// named users and groups (by name, and a number with no name here), a directory with an
/// access and a default ACL, a file inside it that inherited one, and files without: the same
/// `system.posix_acl_access`/`_default` attributes and modes under every writer
/// configuration and 1 and 3 writer threads; none without `--acls`, or after `--no-acls`;
/// the `-tv` mark (`+`, `*` with `--xattrs`) as GNU tar prints it. An ACL naming a user
/// unknown here is reported, and the file is extracted without it (exit 0, as GNU tar's).
#[test]
fn acls_like_gnu_tar() {
    let test = "acls_like_gnu_tar";
    let Some(t) = util::test_dir(test, &["tar", "setfacl"]) else { return };
    let src = t.join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    for f in ["f", "plain", "g"] {
        fs::write(src.join(f), f).unwrap();
    }
    setfacl(&["-m", "u:nobody:rw,g:nogroup:r,u:1234:x"], &src.join("f"));
    setfacl(&["-m", "u:nobody:rwx"], &src.join("d"));
    setfacl(&["-d", "-m", "u:nobody:rx,g::r"], &src.join("d"));
    fs::write(src.join("d/inner"), "inner").unwrap();
    set(&src.join("g"), "user.g", b"g");
    let archive = t.join("acls.tar");
    Cmd::new("tar")
        .args(["--acls", "--xattrs", "--format=posix", "-cf"])
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .args(["f", "plain", "g", "d", "d/inner"])
        .run()
        .expect_code(0);
    // bsdtar writes the same ACLs with commas and ids, and its modes without the mask: the
    // ACL must be set after the mode (GNU tar's order), or a directory's mask is lost.
    let mut archives = vec![archive.clone()];
    if util::have_tool("acls_like_gnu_tar (bsdtar's archive)", "bsdtar") {
        let bsd = t.join("bsd-acls.tar");
        Cmd::new("bsdtar")
            .args(["--acls", "--format=pax", "-cf"])
            .arg(&bsd)
            .arg("-C")
            .arg(&src)
            .args(["f", "plain", "g", "d", "d/inner"])
            .run()
            .expect_code(0);
        archives.push(bsd);
    } else {
        util::skip("acls_like_gnu_tar (bsdtar's archive)", "bsdtar not installed");
    }
    let cases: &[(&[&str], bool)] = &[
        (&["--acls"], true),
        (&["--acls", "--xattrs"], true),
        (&["--xattrs", "--acls", "--no-acls"], false),
        (&[], false),
    ];
    let checks =
        [true, false].map(|restored| same_acls(restored, &["f", "plain", "g", "d", "d/inner"]));
    let mut rows: Vec<Case> = archives
        .iter()
        .flat_map(|a| {
            cases.iter().map(|(flags, restored)| {
                row(a, flags).over(&THREADS).also(&checks[usize::from(!restored)])
            })
        })
        .collect();
    for flags in [&["--acls"][..], &["--xattrs"], &["--acls", "--xattrs"], &[]] {
        let flags: Vec<&str> = flags.iter().copied().chain(["-v"]).collect();
        rows.push(Case::list(&archive, &flags, &[]));
    }
    // An ACL naming a user this system does not know.
    let text = "user::rw-\nuser:no-such-user-here:r--\ngroup::r--\nmask::r--\nother::r--\n";
    let rec = pax_record("SCHILY.acl.access", text.as_bytes());
    let odd = t.write("unknown.tar", pax_archive("unknown", &rec, b"data\n"));
    let named = |_: &Ran, o: &Ran| -> Vec<String> {
        let said = o.out.stderr_str().contains("unknown: cannot restore its ACL: unknown user");
        (!said)
            .then(|| format!("no line naming the user\n{}", o.out.describe()))
            .into_iter()
            .collect()
    };
    rows.push(Case::extract(&odd, &["--acls"], &[]).code(0).also(&named));
    gnu::check(&t, &rows);
}

/// A row's check of ACLs: GNU tar restored some (or, `restored` false, none) and fastuntar the
/// same, and the modes of `files` are GNU tar's (a mask sets the group bits).
fn same_acls<'f>(restored: bool, files: &'f [&'f str]) -> impl Fn(&Ran, &Ran) -> Vec<String> + 'f {
    move |g, o| {
        let ((want, n), got) = (acls(&g.dest), acls(&o.dest).0);
        let mut out = Vec::new();
        if (n > 0) != restored {
            out.push(format!("GNU tar restored {want:?}"));
        }
        if got != want {
            out.push(format!("ACLs {got:?}, GNU tar {want:?}"));
        }
        let mode =
            |root: &Path, f: &str| fs::symlink_metadata(root.join(f)).unwrap().mode() & 0o7777;
        for f in files {
            let (gm, om) = (mode(&g.dest, f), mode(&o.dest, f));
            if gm != om {
                out.push(format!("{f}: mode {om:o}, GNU tar {gm:o}"));
            }
        }
        out
    }
}

/// Issue 28, 8: attribute names in `SCHILY.xattr.` keys are %-decoded as GNU tar's
/// `xattr_decode_keyword` decodes them: `%3D` is `=`, `%25` is `%`, nothing else. GNU tar
/// writes `user.=NAME%3D=` as `SCHILY.xattr.user.%3DNAME%253D%3D`; before, fastuntar restored
/// the encoded name. Both a name GNU tar wrote (from a file that has it) and hand-made keys
/// (`%3d`, `%41` stay) give GNU tar's attributes.
#[test]
fn xattr_names_are_percent_decoded_like_gnu_tar() {
    let Some(t) = util::test_dir("xattr_names_are_percent_decoded_like_gnu_tar", &["tar"]) else {
        return;
    };
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("f"), "f\n").unwrap();
    set(&src.join("f"), "user.=NAME%3D=", b"v1");
    set(&src.join("f"), "user.%", b"v2");
    let written = t.join("written.tar");
    let out = Cmd::new("tar")
        .args(["--xattrs", "--format=posix", "-C"])
        .arg(&src)
        .arg("-cf")
        .arg(&written)
        .arg("f")
        .run();
    assert!(out.success(), "{}", out.describe());
    assert!(util::read(&written).windows(27).any(|w| w == b"SCHILY.xattr.user.%3DNAME%2"));
    let mut records = Vec::new();
    for key in ["user.%3DNAME%253D%3D", "user.%3d", "user.%41%2", "user.%25%"] {
        records.extend(pax_record(&format!("SCHILY.xattr.{key}"), key.as_bytes()));
    }
    let made = t.write("made.tar", pax_archive("g", &records, b"g\n"));
    let decoded = |file: &'static str| {
        move |g: &Ran, o: &Ran| -> Vec<String> {
            let (want, got) = (attrs_of(&g.dest.join(file)), attrs_of(&o.dest.join(file)));
            let mut out = Vec::new();
            if !want.iter().any(|(n, _)| n.contains(&b'=')) {
                out.push(format!("GNU tar decoded {want:?}"));
            }
            if got != want {
                out.push(format!("attributes {got:?}, GNU tar {want:?}"));
            }
            out
        }
    };
    let (f, g) = (decoded("f"), decoded("g"));
    let row = |archive: &Path| Case::extract(archive, &["--xattrs"], &[]).code(0);
    gnu::check(&t, [row(&written).also(&f), row(&made).also(&g)]);
}

/// Issue 28, 9: `--acls` resets ACLs as GNU tar's `xattrs_acls_set` does, extracting into a
/// directory with a default ACL (which new files and directories inherit): a member without
/// an access ACL gets one from its mode (the inherited named entries go), a directory member
/// without a default ACL loses the inherited one, and the empty `SCHILY.acl.default=` GNU tar
/// writes for a directory with an access ACL and no default ACL is taken (it was refused:
/// "an ACL needs user::, group:: and other:: entries"). The ACLs and modes are GNU tar's,
/// under both backends and 1 and 3 writer threads.
#[test]
fn acls_reset_like_gnu_tar() {
    let test = "acls_reset_like_gnu_tar";
    let Some(t) = util::test_dir(test, &["tar", "setfacl"]) else { return };
    let src = t.join("src");
    for d in ["plain-dir", "acl-dir", "both-dir"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    for f in ["plain", "acl-file", "plain-dir/f", "acl-dir/f"] {
        fs::write(src.join(f), f).unwrap();
    }
    setfacl(&["-m", "u:nobody:r"], &src.join("acl-file"));
    setfacl(&["-m", "u:nobody:rwx"], &src.join("acl-dir"));
    setfacl(&["-m", "u:nobody:rx"], &src.join("both-dir"));
    setfacl(&["-d", "-m", "u:nobody:r"], &src.join("both-dir"));
    let archive = t.join("reset.tar");
    let members = ["plain", "acl-file", "plain-dir", "plain-dir/f", "acl-dir", "both-dir"];
    Cmd::new("tar")
        .args(["--acls", "--format=posix", "--no-recursion", "-cf"])
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .args(members)
        .arg("acl-dir/f")
        .run()
        .expect_code(0);
    assert!(
        util::read(&archive).windows(20).any(|w| w == b"SCHILY.acl.default=\n"),
        "GNU tar wrote no empty default ACL"
    );
    // DIR has a default ACL: everything made in it inherits `user:daemon:rwx`.
    let inheriting = |d: &Path| setfacl(&["-d", "-m", "u:daemon:rwx"], d);
    let files: Vec<&str> = members.iter().chain(&["acl-dir/f"]).copied().collect();
    let same = same_acls(true, &files);
    let row = row(&archive, &["--acls"]).prepare(&inheriting).over(&BACKENDS).also(&same);
    gnu::check(&t, [row]);
}
