//! The generated tree of the differential suite: the shapes an extractor gets wrong.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::Rng;

/// Which parts of the tree to make (not every tar format can hold all of it).
#[derive(Debug, Clone, Copy)]
pub struct TreeOpts {
    /// Names and link targets that do not fit ustar (a name > 100 bytes without a usable `/`
    /// split, paths > 255 bytes, link targets > 100 bytes).
    pub long_names: bool,
    /// mtimes before 1970 (ustar's octal fields cannot hold them).
    pub negative_mtimes: bool,
    /// Files chowned to assorted uids/gids (root only).
    pub owners: bool,
}

impl TreeOpts {
    pub const FULL: TreeOpts = TreeOpts { long_names: true, negative_mtimes: true, owners: false };
    pub const USTAR: TreeOpts =
        TreeOpts { long_names: false, negative_mtimes: false, owners: false };
}

/// Sizes around block (512), page (4096), the default direct-I/O threshold (64 KiB) and the
/// pool chunk (1 MiB) edges.
pub const SIZES: &[usize] = &[
    0,
    1,
    511,
    512,
    513,
    4095,
    4096,
    4097,
    65535,
    65536,
    65537,
    (1 << 20) - 1,
    1 << 20,
    (1 << 20) + 1,
];

fn osb(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

fn mkdir(p: &Path) {
    fs::create_dir_all(p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
}

fn write(p: &Path, data: &[u8]) {
    if let Some(d) = p.parent() {
        mkdir(d);
    }
    fs::write(p, data).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn cstr(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Writes each `(path, contents)` of `files` under `root`, making the directories on the way:
/// the small trees the GNU tar comparisons pack (`util::gnu::archive`).
pub fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (rel, data) in files {
        write(&root.join(rel), data.as_bytes());
    }
}

/// Removes everything beneath `root` but the directories (`find ROOT ! -type d -delete`: an
/// operator's `rm` of a root's files, the tree kept): the count removed.
pub fn remove_files(root: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            n += remove_files(&e.path());
        } else {
            std::fs::remove_file(e.path()).unwrap();
            n += 1;
        }
    }
    n
}

/// Sets the mtime (and atime) of `p` without following a symlink.
pub fn set_mtime(p: &Path, secs: i64, nsecs: i64) {
    let ts = libc::timespec { tv_sec: secs as libc::time_t, tv_nsec: nsecs as _ };
    let times = [ts, ts];
    let c = cstr(p);
    // Safety: `c` is a NUL-terminated path and `times` two valid timespecs, both alive for the call.
    let r = unsafe {
        libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
    };
    assert_eq!(r, 0, "utimensat {}: {}", p.display(), std::io::Error::last_os_error());
}

pub fn mkfifo(p: &Path, mode: u32) {
    let c = cstr(p);
    // Safety: `c` is a NUL-terminated path alive for the call.
    let r = unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) };
    assert_eq!(r, 0, "mkfifo {}: {}", p.display(), std::io::Error::last_os_error());
}

pub fn lchown(p: &Path, uid: u32, gid: u32) {
    let c = cstr(p);
    // Safety: `c` is a NUL-terminated path alive for the call.
    let r = unsafe { libc::lchown(c.as_ptr(), uid, gid) };
    assert_eq!(r, 0, "lchown {}: {}", p.display(), std::io::Error::last_os_error());
}

/// Deterministic contents for a file of `n` bytes.
pub fn contents(n: usize, seed: u64) -> Vec<u8> {
    Rng::new(seed ^ (n as u64).wrapping_mul(0x100_0000_01b3)).bytes(n)
}

/// Builds the tree at `root` (which must not exist). Returns nothing: snapshot it to see it.
pub fn build(root: &Path, opts: TreeOpts) {
    assert!(!root.exists());
    mkdir(root);
    let r = |s: &str| root.join(s);

    // Sizes.
    write(&r("empty"), b"");
    for (i, &n) in SIZES.iter().enumerate() {
        write(&r(&format!("sizes/f{n}")), &contents(n, i as u64));
    }

    // Permission bits: every mode is restored exactly by both tools as root (see differential.rs
    // for why setuid/setgid/sticky are included).
    for m in [0o600, 0o640, 0o644, 0o664, 0o666, 0o700, 0o750, 0o755, 0o777, 0o400, 0o444, 0o000] {
        let p = r(&format!("modes/m{m:04o}"));
        write(&p, format!("mode {m:o}\n").as_bytes());
        chmod(&p, m);
    }
    for m in [0o4755, 0o2755, 0o6711, 0o1644] {
        let p = r(&format!("modes/special{m:04o}"));
        write(&p, format!("mode {m:o}\n").as_bytes());
        chmod(&p, m);
    }
    // Directories with modes; 0555 ones have contents, so permissions must come after them.
    for m in [0o700, 0o755, 0o555, 0o750, 0o1777, 0o2775] {
        let d = r(&format!("dirs/d{m:04o}"));
        write(&d.join("f"), b"inside\n");
        write(&d.join("sub/g"), b"deeper\n");
        chmod(&d.join("sub"), if m == 0o555 { 0o500 } else { 0o755 });
        chmod(&d, m);
    }

    // Nesting.
    write(&r("nested/a/b/c/d/e/deep.txt"), b"deep\n");
    mkdir(&r("nested/empty-dir"));
    mkdir(&r("nested/a/empty2"));

    // Names: unicode, non-UTF-8, odd characters.
    write(&r("unicode/ünïcødé.txt"), "ünïcødé\n".as_bytes());
    write(&r("unicode/日本語/ファイル.txt"), "日本語\n".as_bytes());
    write(&r("unicode/emoji-😀-🦀"), b"crab\n");
    let bytes = r("bytes");
    mkdir(&bytes);
    write(&bytes.join(osb(b"latin1-\xe9t\xe9")), b"latin-1 name\n");
    let odd_dir = bytes.join(osb(b"\xff\xfe-dir"));
    mkdir(&odd_dir);
    write(&odd_dir.join(osb(b"\x80file\x01ctl")), b"non-UTF-8 dir and file\n");
    write(&r("odd/with space"), b"space\n");
    write(&r("odd/new\nline"), b"newline\n");
    write(&r("odd/back\\slash 'quote\" *star?"), b"punctuation\n");
    write(&r("odd/-dash"), b"dash\n");

    if opts.long_names {
        // A path over 100 bytes, one over 255 (nested), names near the 255-byte limit.
        let p101 = format!("long/{}/{}/file", "x".repeat(60), "y".repeat(60));
        write(&r(&p101), b"path over 100\n");
        let deep: Vec<String> = (0..6).map(|i| format!("{i}{}", "d".repeat(49))).collect();
        write(&r(&format!("long/{}/file-at-the-bottom", deep.join("/"))), b"path over 255\n");
        write(&r(&format!("long/{}", "n".repeat(255))), b"255-byte name\n");
        write(&r(&format!("long/{}/f", "m".repeat(254))), b"254-byte dir name\n");
        write(&r(&format!("long/{}", "é".repeat(127))), b"254 bytes of UTF-8\n");
    } else {
        // Over 100 bytes but splittable into ustar's prefix + name.
        let p = format!("long/{}/{}/file", "x".repeat(60), "y".repeat(60));
        write(&r(&p), b"path over 100, ustar-splittable\n");
    }

    // Symlinks: relative, absolute, dangling, to a directory, non-UTF-8.
    let links = r("links");
    mkdir(&links);
    symlink("../sizes/f511", links.join("rel")).unwrap();
    symlink("/etc/passwd", links.join("abs")).unwrap();
    symlink("does/not/exist", links.join("dangling")).unwrap();
    symlink("../nested", links.join("to-dir")).unwrap();
    symlink(".", links.join("self-dot")).unwrap();
    symlink(osb(b"\xe9-target"), links.join("bytes-target")).unwrap();
    if opts.long_names {
        symlink(format!("../{}", "z".repeat(150)), links.join("long-target")).unwrap();
    }

    // Hard links: a pair, a triple across directories, one to a long name.
    let hard = r("hard");
    write(&hard.join("a1"), b"pair\n");
    fs::hard_link(hard.join("a1"), hard.join("a2")).unwrap();
    write(&hard.join("b1"), &contents(5000, 77));
    fs::hard_link(hard.join("b1"), hard.join("b2")).unwrap();
    fs::hard_link(hard.join("b1"), r("nested/a/b-link")).unwrap();
    write(&hard.join("empty1"), b"");
    fs::hard_link(hard.join("empty1"), hard.join("empty2")).unwrap();
    if opts.long_names {
        fs::hard_link(hard.join("a1"), hard.join("l".repeat(200))).unwrap();
    }

    // A sparse file (a hole at the start, data, a hole at the end) and one ending in data.
    let sp = r("sparse");
    mkdir(&sp);
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::create(sp.join("holes")).unwrap();
        f.set_len(4 << 20).unwrap();
        f.write_all_at(&contents(4096, 1), 64 << 10).unwrap();
        f.write_all_at(&contents(10_000, 2), 1 << 20).unwrap();
        f.write_all_at(&contents(777, 3), (2 << 20) + 123).unwrap();
        let g = fs::File::create(sp.join("data-at-end")).unwrap();
        g.set_len(3 << 20).unwrap();
        g.write_all_at(&contents(5000, 4), (3 << 20) - 5000).unwrap();
        let h = fs::File::create(sp.join("all-hole")).unwrap();
        h.set_len(1 << 20).unwrap();
    }

    // A FIFO.
    mkdir(&r("special"));
    mkfifo(&r("special/fifo"), 0o640);

    if opts.owners {
        lchown(&r("sizes/f1"), 1000, 1000);
        lchown(&r("modes/m0640"), 1234, 5678);
        lchown(&r("modes/special4755"), 4321, 0);
        lchown(&r("modes/special2755"), 0, 4321);
        lchown(&r("empty"), 65534, 65534);
        lchown(&r("dirs/d0750"), 4242, 4243);
        lchown(&links.join("rel"), 777, 888);
        lchown(&hard.join("b1"), 2000, 3000);
        lchown(&r("special/fifo"), 99, 98);
        // chown clears setuid/setgid on files: set the modes again.
        chmod(&r("modes/special4755"), 0o4755);
        chmod(&r("modes/special2755"), 0o2755);
    }

    // mtimes last, children before parents. Seconds and nanoseconds vary; a few are before 1970.
    let mut all = Vec::new();
    collect(root, &mut all);
    all.sort();
    for (i, p) in all.iter().enumerate().rev() {
        let i = i as i64;
        let rel = p.strip_prefix(root).unwrap().as_os_str().as_bytes();
        let (s, ns) = if opts.negative_mtimes && rel.starts_with(b"nested/a/b") {
            (-315_619_200 - i * 3600, (i * 7_654_321) % 1_000_000_000) // 1960
        } else if opts.negative_mtimes && rel == b"empty" {
            (-1, 500_000_000)
        } else if rel == b"sizes/f0" {
            (0, 0)
        } else {
            (1_500_000_000 + i * 1000 + 7, (i * 123_456_789 + 1) % 1_000_000_000)
        };
        set_mtime(p, s, ns);
    }
    set_mtime(root, 1_400_000_000, 999_999_999);
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        out.push(p.clone());
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            collect(&p, out);
        }
    }
}
