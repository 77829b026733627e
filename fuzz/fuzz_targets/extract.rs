//! Whole-archive extraction through the library (`fastuntar::__private::command::extract::run`), as the binary
//! does it, into a scene that tempts every escape:
//!
//! ```text
//! BASE/archive            the input (any format: plain, zstd, gzip, bzip2, lz4)
//! BASE/scene/sentinel     a file outside DIR
//! BASE/scene/outside/f    a directory outside DIR, and a file in it
//! BASE/scene/outside/hl   a file outside DIR with a second name inside DIR (dest/hl)
//! BASE/scene/dest/        DIR, holding: pre_dir_link -> ../outside,
//!                         pre_file_link -> ../sentinel, hl (hard link to outside/hl)
//! ```
//!
//! Each input is extracted twice, with `--io portable` and with `--io uring --direct-io
//! --direct-io-threshold 0`. Each run must return Ok or Err without panicking (the fuzzer's
//! panic hook aborts on a panic in any thread, so the decoder thread is covered too), and
//! afterwards the scene must hold exactly `dest`, `sentinel` and `outside` (with `f` and
//! `hl`), all unchanged (type, content, mode, mtime, owner), and no inode in DIR may be the
//! sentinel's or `outside/f`'s. When both runs succeed their trees must be the same, and they
//! must agree on success/failure and on the number of skipped members.
//!
//! BASE is `$FASTUNTAR_FUZZ_DIR` or a fresh directory in the system temp dir.
#![no_main]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use fastuntar::__private::cli::resolve::{Edge, options};
use fastuntar::__private::command::Plans;
use fastuntar::__private::command::extract;
use fastuntar::__private::report::Reporter;
use libfuzzer_sys::fuzz_target;

const SENTINEL: &[u8] = b"sentinel: must never change\n";
const OUTSIDE_F: &[u8] = b"outside/f: must never change\n";
const OUTSIDE_HL: &[u8] = b"outside/hl: DIR has a hard link to me; my data must not change\n";
/// Files larger than this are compared by size only (a sparse file may be a terabyte).
const HASH_LIMIT: u64 = 1 << 20;

fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let b = match std::env::var_os("FASTUNTAR_FUZZ_DIR") {
            Some(d) => PathBuf::from(d),
            None => std::env::temp_dir().join(format!("fastuntar-fuzz-{}", std::process::id())),
        };
        fs::create_dir_all(&b).unwrap();
        b
    })
}

/// Type, permission bits, owner, mtime (seconds, nanos) and content (or link target) of one
/// entry, for "unchanged" checks.
type Stamp = (u32, u32, u32, i64, i64, Vec<u8>);

fn stamp(p: &Path) -> Stamp {
    let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let content = if m.file_type().is_symlink() {
        fs::read_link(p).unwrap().into_os_string().into_encoded_bytes()
    } else if m.is_file() {
        fs::read(p).unwrap()
    } else {
        Vec::new()
    };
    (m.mode() & 0o170000, m.mode() & 0o7777, m.uid(), m.mtime(), m.mtime_nsec(), content)
}

struct Scene {
    root: PathBuf,
    dest: PathBuf,
    before: Vec<(PathBuf, Stamp)>,
    /// Inodes that may never appear in DIR.
    forbidden: Vec<(u64, u64)>,
}

impl Scene {
    fn new() -> Scene {
        let root = base().join("scene");
        if root.exists() {
            fs::remove_dir_all(&root).unwrap();
        }
        let dest = root.join("dest");
        let outside = root.join("outside");
        fs::create_dir_all(&dest).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(root.join("sentinel"), SENTINEL).unwrap();
        fs::write(outside.join("f"), OUTSIDE_F).unwrap();
        fs::write(outside.join("hl"), OUTSIDE_HL).unwrap();
        // Explicit modes, whatever the umask the fuzzer runs under (an extraction left it at 0
        // until issue 43; it no longer touches it).
        fs::set_permissions(root.join("sentinel"), fs::Permissions::from_mode(0o640)).unwrap();
        fs::set_permissions(outside.join("f"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(outside.join("hl"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o750)).unwrap();
        fs::hard_link(outside.join("hl"), dest.join("hl")).unwrap();
        symlink("../outside", dest.join("pre_dir_link")).unwrap();
        symlink("../sentinel", dest.join("pre_file_link")).unwrap();
        // Fixed times: the two scenes of one input are made at different moments, and the
        // trees are compared with mtimes.
        for p in ["dest/hl", "dest/pre_dir_link", "dest/pre_file_link", "sentinel", "outside/f"] {
            set_mtime(&root.join(p), 1_000_000_000);
        }
        let watched = ["sentinel", "outside", "outside/f", "outside/hl"];
        let before = watched.iter().map(|w| (root.join(w), stamp(&root.join(w)))).collect();
        let ino = |p: PathBuf| {
            let m = fs::metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let forbidden = vec![ino(root.join("sentinel")), ino(outside.join("f")), ino(outside)];
        Scene { root, dest, before, forbidden }
    }

    /// Everything outside DIR is as it was.
    fn check(&self, what: &str) {
        let names = |p: &Path| {
            let mut v: Vec<String> = fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&self.root), ["dest", "outside", "sentinel"], "{what}: scene changed");
        assert_eq!(names(&self.root.join("outside")), ["f", "hl"], "{what}: outside/ changed");
        for (p, s) in &self.before {
            assert_eq!(&stamp(p), s, "{what}: {} changed", p.display());
        }
        let m = fs::symlink_metadata(&self.dest).unwrap();
        assert!(m.is_dir(), "{what}: DIR is no longer a directory");
        // The sentinel (and outside/f) may have no other name, anywhere.
        assert_eq!(fs::metadata(self.root.join("sentinel")).unwrap().nlink(), 1, "{what}");
        assert_eq!(fs::metadata(self.root.join("outside/f")).unwrap().nlink(), 1, "{what}");
        let mut tree = BTreeMap::new();
        walk(&self.dest, Path::new(""), &mut tree, &self.forbidden, what);
    }

    fn tree(&self) -> BTreeMap<PathBuf, (u32, u32, u64, i64, Vec<u8>)> {
        let mut tree = BTreeMap::new();
        walk(&self.dest, Path::new(""), &mut tree, &self.forbidden, "tree");
        tree
    }
}

/// Walks DIR without following symlinks; records (type, mode, size, mtime, content hash or
/// link target) per path; checks no inode is a forbidden one.
fn walk(
    dir: &Path,
    rel: &Path,
    out: &mut BTreeMap<PathBuf, (u32, u32, u64, i64, Vec<u8>)>,
    forbidden: &[(u64, u64)],
    what: &str,
) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let r = rel.join(e.file_name());
        let m = fs::symlink_metadata(&p).unwrap();
        assert!(
            !forbidden.contains(&(m.dev(), m.ino())),
            "{what}: {} is an inode from outside DIR",
            r.display()
        );
        let kind = m.mode() & 0o170000;
        let (content, mtime) = if m.file_type().is_symlink() {
            (fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes(), m.mtime())
        } else if m.is_file() && m.len() <= HASH_LIMIT {
            (fs::read(&p).unwrap(), m.mtime())
        } else if m.is_dir() {
            walk(&p, &r, out, forbidden, what);
            // Directory mtimes are not compared: directories made on the way get "now".
            (Vec::new(), 0)
        } else {
            (Vec::new(), m.mtime())
        };
        out.insert(
            r,
            (kind, m.mode() & 0o7777, if m.is_dir() { 0 } else { m.len() }, mtime, content),
        );
    }
}

/// Sets the mtime of `p` (not following a symlink).
fn set_mtime(p: &Path, secs: i64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec { tv_sec: secs, tv_nsec: 0 };
    // Safety: a valid C string and a two-element timespec array.
    let r = unsafe {
        libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
    };
    assert_eq!(r, 0, "utimensat {}", p.display());
}

/// An entry without its content, for messages: (type, mode, size, mtime, content hash).
fn brief(e: Option<&(u32, u32, u64, i64, Vec<u8>)>) -> Option<(u32, u32, u64, i64, u64)> {
    e.map(|(t, m, s, mt, c)| {
        let h = c.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        (*t, *m, *s, *mt, h)
    })
}

fn config(archive: &Path, dest: &Path, backend: &[&str], report: &Reporter) -> Plans {
    let mut argv = vec!["fastuntar", "-x"];
    let (a, d) = (archive.to_str().unwrap(), dest.to_str().unwrap());
    argv.extend([a, "-C", d, "-q", "--memory", "1M", "--max-window", "64M"]);
    argv.extend(backend);
    // `cli::parse`, as main: `-C` is read from the options in command-line order, which
    // clap's own parse leaves out (the run then extracted into the working directory).
    let args = fastuntar::__private::cli::parse(argv.iter().map(Into::into).collect());
    let edge = Edge::read(report.started_at()).expect("the edge reads");
    let options = options(args, &edge, &mut Vec::new()).expect("fixed arguments resolve");
    options.prepare(&edge.machine).expect("fixed arguments resolve")
}

const BACKENDS: [&[&str]; 2] =
    [&["--io", "portable"], &["--io", "uring", "--direct-io", "--direct-io-threshold", "0"]];

fuzz_target!(|data: &[u8]| {
    let archive = base().join("archive");
    fs::write(&archive, data).unwrap();
    let mut results = Vec::new();
    for backend in BACKENDS {
        let scene = Scene::new();
        // Each run its own reporter, as each run of the binary: the counts start from 0.
        let report = Arc::new(Reporter::new());
        let cfg = config(&archive, &scene.dest, backend, &report);
        let r = extract::run(&cfg, &report);
        let what =
            format!("{backend:?} ({})", r.as_ref().err().map_or("ok".into(), |e| format!("{e:#}")));
        if let Err(e) = &r {
            let msg = format!("{e:#}");
            assert!(!msg.chars().any(char::is_control), "{what}: error is one line, escaped");
        }
        scene.check(&what);
        let tree = if r.is_ok() { Some(scene.tree()) } else { None };
        results.push((r.is_ok(), report.skipped_count(), tree, what));
    }
    let (a, b) = (&results[0], &results[1]);
    assert_eq!(a.0, b.0, "backends disagree on success: {} vs {}", a.3, b.3);
    if a.0 {
        assert_eq!(a.1, b.1, "backends skipped a different number of members");
        let (ta, tb) = (a.2.as_ref().unwrap(), b.2.as_ref().unwrap());
        let differ: Vec<String> = ta
            .keys()
            .chain(tb.keys())
            .filter(|k| ta.get(*k) != tb.get(*k))
            .map(|k| format!("{}: {:?} vs {:?}", k.display(), brief(ta.get(k)), brief(tb.get(k))))
            .collect();
        assert!(differ.is_empty(), "backends extracted different trees: {differ:#?}");
    }
});
