//! The resolve step's tests.

use std::ffi::OsString;

use super::*;
use selection::incremental_level;
use writer::{backup_wanted, direct_io, old_files};

/// A machine with 4 CPUs, 16 GiB, no limits (options/tests.rs `machine`), stdin not a
/// terminal, not root.
pub(crate) fn edge() -> Edge {
    Edge {
        machine: crate::options::tests::machine(),
        tape: None,
        stdin_tty: false,
        version_control: None,
        backup_suffix: None,
    }
}

/// `--backup` and `--suffix` against `$VERSION_CONTROL` and `$SIMPLE_BACKUP_SUFFIX`: the
/// options win, the environment fills in what they leave out.
#[test]
fn backups_from_options_and_environment() {
    let env = Edge {
        version_control: Some("numbered".into()),
        backup_suffix: Some(".bak".into()),
        ..edge()
    };
    for (argv, edge, want) in [
        (&["-x"][..], edge(), None),
        (&["-x"], env.clone(), None),
        (&["-x", "--backup"], edge(), Some(("", "~"))),
        (&["-x", "--backup"], env.clone(), Some(("numbered", ".bak"))),
        (&["-x", "--backup=simple"], env.clone(), Some(("simple", ".bak"))),
        (&["-x", "--suffix=.old"], edge(), Some(("", ".old"))),
        (&["-x", "--suffix=.old"], env.clone(), Some(("numbered", ".old"))),
        (&["-x", "--backup=off", "--suffix=.old"], env.clone(), Some(("off", ".old"))),
    ] {
        let args = args(argv);
        assert_eq!(backup_wanted(&args, &edge), want, "{argv:?}");
    }
}

fn args(extra: &[&str]) -> Args {
    let mut argv: Vec<OsString> = ["fastuntar"].map(Into::into).into();
    argv.extend(extra.iter().map(Into::into));
    crate::cli::parse(argv)
}

fn plans_of(extra: &[&str], edge: &Edge) -> Result<Plans> {
    resolve(args(extra), edge, &mut Vec::new())
}

/// `-f`, else the first operand, else $TAPE; `-` and nothing are standard input, never a
/// terminal.
#[test]
fn where_the_archive_comes_from() {
    let tape = Edge { tape: Some("/dev/st0".into()), ..edge() };
    let tty = Edge { stdin_tty: true, ..edge() };
    let p = |s: &str| Some(PathBuf::from(s));
    for (argv, edge, want) in [
        (&["-x", "-f", "a.tar"][..], edge(), Some(p("a.tar"))),
        (&["-x", "a.tar", "b"], edge(), Some(p("a.tar"))),
        (&["-x", "-f", "a.tar"], tape.clone(), Some(p("a.tar"))),
        (&["-x"], tape.clone(), Some(p("/dev/st0"))),
        (&["-x", "-f", "-"], tape, Some(None)),
        (&["-x"], edge(), Some(None)),
        (&["-x", "-f", "-"], tty.clone(), None),
        (&["-x"], tty.clone(), None),
        (&["-x", "-f", "a.tar"], tty, Some(p("a.tar"))),
    ] {
        let got = archive_source(&args(argv), &edge).ok();
        assert_eq!(got, want, "{argv:?} tape {:?} tty {}", edge.tape, edge.stdin_tty);
    }
}

#[test]
fn which_command_runs() {
    for (argv, want) in [
        (&["-x", "-f", "a"][..], Command::Extract),
        (&["-t", "-f", "a"], Command::List),
        (&["-x", "-O", "-f", "a"], Command::ToStdout),
        (
            &["-x", "--to-command", "wc", "--ignore-command-error", "-f", "a"],
            Command::ToCommand { command: "wc".into(), ignore_errors: true },
        ),
    ] {
        assert_eq!(command(&args(argv)), want, "{argv:?}");
    }
}

#[test]
fn old_files_and_direct_io() {
    for (argv, want) in [
        (&[][..], OldFiles::Replace),
        (&["-k"], OldFiles::Keep),
        (&["--skip-old-files"], OldFiles::Skip),
        (&["--keep-newer-files"], OldFiles::KeepNewer),
        (&["--no-overwrite-dir"], OldFiles::NoOverwriteDir),
        (&["-U"], OldFiles::UnlinkFirst),
    ] {
        let argv: Vec<&str> = ["-x", "-f", "a"].iter().chain(argv).copied().collect();
        assert_eq!(old_files(&args(&argv)), want, "{argv:?}");
    }
    use crate::cli::DirectIo as Flag;
    for (when, never, want) in [
        (None, false, DirectIo::Auto),
        (Some(Flag::Auto), false, DirectIo::Auto),
        (Some(Flag::Always), false, DirectIo::Always),
        (Some(Flag::Never), false, DirectIo::Never),
        (Some(Flag::Always), true, DirectIo::Never),
        (None, true, DirectIo::Never),
    ] {
        assert_eq!(direct_io(when, never), want, "{when:?} {never}");
    }
}

/// The options that leave a run without resume points, first one named.
#[test]
fn options_that_refuse_resume_points() {
    for (argv, want) in [
        (&[][..], None),
        (&["-U"], None),
        (&["--recursive-unlink"], None),
        (&["-k"], Some("-k (--keep-old-files)")),
        (&["--skip-old-files"], Some("--skip-old-files")),
        (&["--keep-newer-files"], Some("--keep-newer-files")),
        (&["--no-overwrite-dir"], Some("--no-overwrite-dir")),
        (&["--backup"], Some("--backup")),
        (&["-G"], Some("-G (--incremental)")),
        (&["-w"], Some("-w (--interactive)")),
        (&["-N", "@0"], Some("-N (--newer)")),
        (&["-I", "zstd"], Some("-I (--use-compress-program)")),
        (&["--backup", "-w"], Some("--backup")),
    ] {
        let argv: Vec<&str> = ["-x", "-f", "a.tar"].iter().chain(argv).copied().collect();
        let plans = plans_of(&argv, &edge()).unwrap();
        assert_eq!(plans.resume.refused, want, "{argv:?}");
    }
    let sum = format!("sha256:{}", "0".repeat(64));
    let url = ["-x", "-f", "https://h/a.tar", "--checksum", &sum];
    assert_eq!(plans_of(&url, &edge()).unwrap().resume.refused, Some("--checksum"));
}

/// Root restores owners and exact modes by default; others only when asked.
#[test]
fn root_restores_owners_and_modes() {
    let root = Edge { machine: crate::options::Machine { root: true, ..edge().machine }, ..edge() };
    for (argv, edge, owner, exact) in [
        (&[][..], edge(), false, false),
        (&[], root.clone(), true, true),
        (&["--no-same-owner", "--no-same-permissions"], root, false, false),
        (&["--same-owner", "-p"], edge(), true, true),
    ] {
        let argv: Vec<&str> = ["-x", "-f", "a"].iter().chain(argv).copied().collect();
        let plans = plans_of(&argv, &edge).unwrap();
        assert_eq!((plans.policy.same_owner, plans.writer.exact_modes), (owner, exact));
    }
}

/// The layout the flags lead to (the conditions themselves: options/tests.rs
/// `writer_layouts`): `-h` keeps directory symlinks, `-U` unlinks.
#[test]
fn writer_layouts_from_flags() {
    let plain = crate::write::plan::DestFs::default();
    for (argv, want) in [
        (&[][..], 4),
        (&["--writer-threads", "2"], 2),
        (&["-U", "--writer-threads", "3"], 1),
        (&["--recursive-unlink"], 1),
        (&["-h", "--writer-threads", "4"], 1),
    ] {
        let argv: Vec<&str> = ["-x", "-f", "a", "-C", "/d"].iter().chain(argv).copied().collect();
        let plans = plans_of(&argv, &edge()).unwrap();
        assert_eq!(crate::options::writer_layout(&plans.writer, &plain).threads, want, "{argv:?}");
    }
}

/// A program's defaults (`Options::new`, what `Restore` starts from) are the command line's
/// for `fastuntar -x -f ARCHIVE -C DIR` run by a user who is not root, but for what only the
/// command line shows: every stage's plan the same, and so the resume digest (a rerun from the
/// other resumes). As root the command line restores owners and exact modes (GNU tar's
/// default there) and a program does not, so their digests differ (docs/USAGE.md).
#[test]
fn library_defaults_are_the_command_lines() {
    let machine = edge().machine;
    for argv in
        [&["-x", "-f", "a.tar", "-C", "/d"][..], &["-x", "-f", "https://h/a.tar", "-C", "/d"]]
    {
        let cli = options(args(argv), &edge(), &mut Vec::new()).unwrap().plans(&machine).unwrap();
        let mut lib = Options::new("/d".into());
        lib.archive = Some(argv[2].into());
        lib.shown.report.quiet = false;
        let lib = lib.plans(&machine).unwrap();
        let stages = |p: &Plans| {
            let Plans { command, input, resume, read, selection, policy, writer, .. } = p;
            format!("{command:?} {input:?} {resume:?} {read:?} {selection:?} {policy:?} {writer:?}")
        };
        assert_eq!(stages(&cli), stages(&lib), "{argv:?}");
    }
}

/// Warnings the resolve step leaves to the caller, in order.
#[test]
fn notes_in_order() {
    let mut notes = Vec::new();
    let argv = ["-x", "-f", "a", "-v", "--level", "1", "-N", "@1800000000"];
    resolve(args(&argv), &edge(), &mut notes).unwrap();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("Option --after-date: Treating date '@1800000000' as"));
    assert_eq!(notes[1], "--level is meaningless without --listed-incremental");
}

#[test]
fn one_top_level_of_a_url() {
    let url = "https://h/p/snapshot-1-abc.tar.zst?X-Amz-Credential=AK%2F2026/us/s3&Sig=x/y";
    let got = top_level(std::path::Path::new(""), Some(std::path::Path::new(url))).unwrap();
    assert_eq!(got, Some(PathBuf::from("snapshot-1-abc")));
    let s3 = "s3://b/dir/snap?1.tar.zst";
    let got = top_level(std::path::Path::new(""), Some(std::path::Path::new(s3))).unwrap();
    assert_eq!(got, Some(PathBuf::from("snap?1")));
}

/// `--no-sign-request` is for an s3:// archive only.
#[test]
fn no_sign_request_needs_s3() {
    let mut notes = Vec::new();
    for a in ["x.tar", "https://h/x.tar"] {
        let e = resolve(args(&["-x", "--no-sign-request", "-f", a]), &edge(), &mut notes);
        assert!(format!("{:#}", e.unwrap_err()).contains("--no-sign-request applies"), "{a}");
    }
    let ok = resolve(args(&["-x", "--no-sign-request", "-f", "s3://b/k.tar"]), &edge(), &mut notes);
    assert!(ok.is_ok());
    // An s3:// mirror of an https archive is signed (or not) as well.
    let argv = ["-x", "--no-sign-request", "-f", "https://h/x.tar", "--mirror", "s3://b/k.tar"];
    assert!(resolve(args(&argv), &edge(), &mut notes).is_ok());
}

/// `--mirror`, `--mirrors FILE` and `--limit-rate` into the download plan: the mirrors in
/// order (the file's after the flags'), each a URL; a rate above 0; the source flags refused
/// for a file.
#[test]
fn mirrors_and_limit_rate_into_the_url_plan() {
    let dir = std::env::temp_dir().join(format!("fastuntar-mirrors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("list");
    std::fs::write(&list, "# snapshot finder\nhttps://c/a.tar\n\n  s3://d/a.tar  # r2\n").unwrap();
    let list = list.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let argv: Vec<&str> =
            ["-x", "-f", "https://h/a.tar"].iter().chain(extra).copied().collect();
        plans_of(&argv, &edge()).map(|p| p.input.url.expect("a URL plan"))
    };
    let p = plan(&["--mirror", "https://b/a.tar", "--mirrors", list, "--limit-rate", "50M"]);
    let p = p.unwrap();
    assert_eq!(p.mirrors, ["https://b/a.tar", "https://c/a.tar", "s3://d/a.tar"]);
    assert_eq!(p.limit_rate, Some(50 << 20));
    assert_eq!(plan(&[]).unwrap().limit_rate, None);
    for (extra, words) in [
        (&["--limit-rate", "0"][..], "must be more than 0"),
        (&["--limit-rate", "fast"][..], "invalid rate"),
        (&["--mirror", "ftp://b/a.tar"][..], "not an http://, https:// or s3:// URL"),
        (&["--mirrors", "/nonexistent/list"][..], "cannot read"),
    ] {
        let e = format!("{:#}", plan(extra).unwrap_err());
        assert!(e.contains(words), "{extra:?}: {e}");
    }
    let e = plans_of(&["-x", "-f", "a.tar", "--mirror", "https://b/a.tar"], &edge());
    assert!(format!("{:#}", e.unwrap_err()).contains("apply to an archive read from a URL"));
    std::fs::remove_dir_all(&dir).unwrap();
}
#[test]
fn incremental_levels_as_gnu_tar_reads_them() {
    for (text, level) in [
        ("0", Some(0)),
        ("", Some(0)),
        (" 1", Some(1)),
        ("+2", Some(2)),
        ("-1", Some(-1)),
        ("-01", Some(-1)),
        ("4294967295", Some(-1)),
        ("99999999999999999999999", Some(-1)),
        ("x", None),
        ("1x", None),
        ("-", None),
        ("  ", None),
    ] {
        assert_eq!(incremental_level(text), level, "{text:?}");
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("64K").unwrap(), 65536);
    assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
    assert_eq!(parse_size("0").unwrap(), 0);
    assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
    assert!(parse_size("12Q").is_err());
    assert!(parse_size("99999999999T").is_err());
}

/// Rates as curl's --limit-rate spells them (1024-based, either case, K to P, fractions as
/// curl 8.19 takes them); the errors name a rate.
#[test]
fn rates() {
    for (text, want) in [
        ("0", 0),
        ("500", 500),
        ("64k", 64 << 10),
        ("64K", 64 << 10),
        ("50M", 50 << 20),
        ("50m", 50 << 20),
        ("1G", 1 << 30),
        ("2T", 2 << 40),
        ("1P", 1 << 50),
        ("10KB", 10 << 10),
        ("8 MiB", 8 << 20),
        ("100B", 100),
        // Fractions, as curl 8.19 takes them, rounded down to a byte.
        ("1.5M", 3 << 19),
        ("0.5G", 1 << 29),
        ("0.5g", 1 << 29),
        ("500k", 500 << 10),
        ("1.25K", 1280),
        ("0.1K", 102),
        ("2.0", 2),
        ("1.5", 1),
        ("0.0", 0),
        ("0.000000000000001P", 1),
        ("1.999999999999999999", 1),
        ("16383.999999999999999999P", u64::MAX),
    ] {
        assert_eq!(parse_rate(text).unwrap(), want, "{text}");
    }
    for bad in [
        "",
        "M",
        ".5M",
        "1.M",
        "1..5M",
        "1.5.2M",
        "1,5M",
        "1e3",
        "-1",
        "-0.5M",
        "50Mb/s",
        "1X",
        "99999P",
        "16384P",
        "1.0000000000000000001M",
        // Less than a byte, which is not the 0 that turns a rate off.
        "0.0001K",
        "0.5",
    ] {
        let e = parse_rate(bad).unwrap_err().to_string();
        assert!(e.contains("rate"), "{bad}: {e}");
    }
}

/// `--min-rate` into the download plan: 1 KiB/s unless given, 0 for none, refused when not
/// a rate.
#[test]
fn min_rate_into_the_url_plan() {
    let url = |extra: &[&str]| {
        let argv: Vec<&str> =
            ["-x", "-f", "https://h/a.tar"].iter().chain(extra).copied().collect();
        plans_of(&argv, &edge()).map(|p| p.input.url.expect("a URL plan").min_rate)
    };
    assert_eq!(url(&[]).unwrap(), crate::decode::url::DEFAULT_MIN_RATE);
    assert_eq!(url(&["--min-rate", "50M"]).unwrap(), 50 << 20);
    assert_eq!(url(&["--min-rate=0"]).unwrap(), 0);
    let e = format!("{:#}", url(&["--min-rate", "fast"]).unwrap_err());
    assert!(e.contains("--min-rate") && e.contains("invalid rate 'fast'"), "{e}");
    // A tuning flag: let be for a file (TAR_OPTIONS may carry it).
    assert!(plans_of(&["-x", "-f", "a.tar", "--min-rate", "1M"], &edge()).is_ok());
}

#[test]
fn window_logs() {
    assert_eq!(window_log(2 << 30).unwrap(), 31);
    assert_eq!(window_log(128 << 20).unwrap(), 27);
    assert_eq!(window_log(100 << 20).unwrap(), 26);
    assert!(window_log(4 << 30).is_err());
    assert!(window_log(10).is_err());
}
