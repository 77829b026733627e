//! Name transformations (GNU tar's "File name transformations"): `--strip-components`,
//! `--transform`.

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Name transformation")]
pub struct Names {
    /// Rename members with a sed expression, `s/REGEX/REPLACEMENT/FLAGS` (repeatable).
    ///
    /// As GNU tar's --transform: POSIX basic regexes (glibc's; `x` for extended), flags `g`, `i`, a
    /// number N for the Nth match, and r/R, s/S, h/H to apply it (or not) to member names, symlink
    /// targets and hard link targets; `\1`..`\9`, `&`, `\U` `\L` `\u` `\l` `\E` in the replacement.
    /// Several may be separated by `;` or given as several options, each applied to the last one's
    /// result.
    ///
    /// Applied before --strip-components. MEMBERs and --exclude match the stored names; -t and -v
    /// show them unless --show-transformed-names. A name that comes out with `..` is skipped like
    /// any other; an empty name makes a directory member DIR itself and skips any other.
    #[arg(long = "transform", visible_alias = "xform", value_name = "EXPRESSION")]
    pub transform: Vec<String>,

    /// Strip N leading components from member names.
    ///
    /// Applied after --transform and before --one-top-level; a member whose name is stripped to
    /// nothing is skipped (with --one-top-level it becomes DIR).
    #[arg(long = "strip-components", value_name = "N", default_value_t = 0)]
    pub strip_components: usize,
}
