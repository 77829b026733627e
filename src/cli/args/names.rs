//! Name transformations (GNU tar's "File name transformations"): `--strip-components`,
//! `--transform`.

#[derive(clap::Args, Debug)]
pub struct Names {
    /// Rename members as they are extracted with a sed expression, `s/REGEX/REPLACEMENT/FLAGS`
    /// (POSIX basic regexes; flags g, i, x for extended, a number N for the Nth match, r/R,
    /// s/S, h/H to apply to member names, symlink targets, hard link targets; `\1`..`\9`, `&`,
    /// `\U` `\L` `\u` `\l` `\E`), several separated by `;`, as GNU tar's --transform (also
    /// --xform). MEMBERs and --exclude match the names as stored; -t and -v show them unless
    /// --show-transformed-names. May be repeated: each applies to the result of the last.
    #[arg(long = "transform", visible_alias = "xform", value_name = "EXPRESSION")]
    pub transform: Vec<String>,

    /// Strip N leading components from member names.
    #[arg(long = "strip-components", value_name = "N", default_value_t = 0)]
    pub strip_components: usize,
}
