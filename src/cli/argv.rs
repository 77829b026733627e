//! The command line before clap reads it: tar's traditional bundled first argument
//! (`xzvf A -C DIR`) rewritten into dashed options, and `TAR_OPTIONS` put in front.

use std::ffi::OsString;

use super::{Args, UsageError, usage_status};

/// Letters of tar's traditional bundled options (`tar xzvf A -C DIR`) that fastuntar knows.
const BUNDLE_LETTERS: &[u8] = b"xtfCvkpoazjJIZTXOmiqsBbPSnNUGgVchHlMLF";

/// Letters among them that take a value: in a bundle, the arguments after it, in order.
const BUNDLE_VALUES: &[u8] = b"fCITXbNgVHLF";

/// Rewrites tar's traditional form, a first argument of option letters without a dash
/// (`fastuntar xzvf A.tgz -C out`, `tar xfC A.tar out`), into dashed options, as GNU tar reads
/// it: each letter becomes its option and each letter that takes a value takes the next
/// argument after the bundle. A first argument is such a bundle only when it is made of these
/// letters, says `x` or `t`, and names no file here (so `fastuntar xf` still reads an archive
/// named `xf`). Anything else is returned unchanged.
pub fn traditional(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(first) = args.get(1).and_then(|a| a.to_str()) else { return Ok(args) };
    let bytes = first.as_bytes();
    let known = bytes.iter().all(|b| BUNDLE_LETTERS.contains(b));
    let is_bundle = !bytes.is_empty()
        && bytes.iter().all(u8::is_ascii_alphabetic)
        // An operation: extract or list, or one refused by name (`czf`, `rvf`). Only `c` is
        // known by itself (`cz`); the others need an `f`, so that `data` stays the name of
        // an archive.
        && bytes.iter().any(|b| matches!(b, b'x' | b't' | b'c' | b'r' | b'u' | b'd' | b'A'))
        && (known || bytes.contains(&b'f'))
        && std::fs::symlink_metadata(first).is_err();
    if !is_bundle {
        return Ok(args);
    }
    // Another operation (`czf`, `rvf`, `chf`): refused by name (config.rs), whatever else
    // the bundle holds.
    if let Some(&op) = bytes.iter().find(|b| b"cruAd".contains(b)) {
        return Ok(vec![args[0].clone(), format!("-{}", op as char).into()]);
    }
    // A bundle with a letter fastuntar does not know (`xWf`): said, not taken for the
    // name of an archive that does not exist.
    if let Some(&b) = bytes.iter().find(|b| !BUNDLE_LETTERS.contains(b)) {
        return Err(format!("option '{}' in '{first}' is not supported", b as char));
    }
    let mut out = vec![args[0].clone()];
    let mut values = args[2..].iter();
    for &letter in bytes {
        out.push(format!("-{}", letter as char).into());
        if BUNDLE_VALUES.contains(&letter) {
            match values.next() {
                Some(v) => out.push(v.clone()),
                None => {
                    return Err(format!("option '{}' in '{first}' needs a value", letter as char));
                }
            }
        }
    }
    out.extend(values.cloned());
    Ok(out)
}

/// GNU tar's `TAR_OPTIONS`: options read before those of the command line (`args`, after
/// `traditional`), so that the command line's come later and win. `env` is split into words
/// as GNU tar splits it (gnulib's wordsplit: blanks separate, '…' and "…" quote, a backslash
/// escapes the next character or gives C's `\n`, `\t`…). As GNU tar, a word that is not an
/// option or an option's value is refused, and so is any error in the options themselves,
/// named as coming from TAR_OPTIONS.
pub fn with_env_options(
    args: Vec<OsString>,
    env: Option<&std::ffi::OsStr>,
) -> Result<Vec<OsString>, UsageError> {
    use clap::CommandFactory;
    use std::os::unix::ffi::OsStrExt;
    let Some(env) = env else { return Ok(args) };
    let words =
        split_words(env.as_bytes()).map_err(|e| format!("cannot split TAR_OPTIONS: {e}"))?;
    if words.is_empty() {
        return Ok(args);
    }
    let program = args.first().cloned().unwrap_or_else(|| "fastuntar".into());
    let alone = std::iter::once(program.clone()).chain(words.iter().cloned());
    match Args::command().try_get_matches_from(alone) {
        Ok(m) => {
            if let Some(mut operands) = m.get_many::<OsString>("operands") {
                let first = operands.next().map(|o| o.to_string_lossy().into_owned());
                return Err(format!(
                    "non-option arguments in TAR_OPTIONS: '{}'",
                    first.unwrap_or_default()
                )
                .into());
            }
        }
        Err(e) if !e.use_stderr() => e.exit(),
        // What concerns options together (`--clamp-mtime` here, `--mtime` on the command
        // line) is judged with the command line, as GNU tar judges it after both.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::ArgumentConflict
                    | clap::error::ErrorKind::MissingRequiredArgument
            ) => {}
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("");
            let message = format!(
                "error parsing TAR_OPTIONS: {}",
                first.strip_prefix("error: ").unwrap_or(first)
            );
            return Err(UsageError { message, status: usage_status(&e) });
        }
    }
    let mut out = vec![program];
    out.extend(words);
    out.extend(args.into_iter().skip(1));
    Ok(out)
}

/// Splits `text` into words as GNU tar splits TAR_OPTIONS (see `with_env_options`).
fn split_words(text: &[u8]) -> Result<Vec<OsString>, &'static str> {
    use std::os::unix::ffi::OsStringExt;
    fn escaped(c: u8) -> u8 {
        match c {
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 11,
            c => c,
        }
    }
    let mut words = Vec::new();
    let mut word: Option<Vec<u8>> = None;
    let mut bytes = text.iter().copied();
    while let Some(c) = bytes.next() {
        match c {
            b' ' | b'\t' | b'\n' => {
                if let Some(w) = word.take() {
                    words.push(OsString::from_vec(w));
                }
            }
            b'\'' => {
                let w = word.get_or_insert_with(Vec::new);
                loop {
                    match bytes.next() {
                        Some(b'\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("missing closing quote"),
                    }
                }
            }
            b'"' => {
                let w = word.get_or_insert_with(Vec::new);
                loop {
                    match bytes.next() {
                        Some(b'"') => break,
                        Some(b'\\') => match bytes.next() {
                            Some(c) => w.push(escaped(c)),
                            None => return Err("missing closing quote"),
                        },
                        Some(c) => w.push(c),
                        None => return Err("missing closing quote"),
                    }
                }
            }
            b'\\' => {
                let w = word.get_or_insert_with(Vec::new);
                match bytes.next() {
                    Some(c) => w.push(escaped(c)),
                    None => w.push(b'\\'),
                }
            }
            c => word.get_or_insert_with(Vec::new).push(c),
        }
    }
    words.extend(word.map(OsString::from_vec));
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(args: &[&str]) -> Result<Vec<String>, String> {
        let args = args.iter().map(OsString::from).collect();
        traditional(args).map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn bundles_become_dashed_options() {
        assert_eq!(
            rewrite(&["t", "xzvf", "a.tgz"]).unwrap(),
            ["t", "-x", "-z", "-v", "-f", "a.tgz"]
        );
        assert_eq!(
            rewrite(&["t", "xfC", "a.tar", "out", "m1"]).unwrap(),
            ["t", "-x", "-f", "a.tar", "-C", "out", "m1"]
        );
        assert_eq!(rewrite(&["t", "tf", "a.tar", "-v"]).unwrap(), ["t", "-t", "-f", "a.tar", "-v"]);
        assert!(rewrite(&["t", "xf"]).unwrap_err().contains("'f' in 'xf' needs a value"));
    }

    #[test]
    fn a_bundle_with_an_unknown_letter_is_refused() {
        assert!(rewrite(&["t", "xWf", "a.tar"]).unwrap_err().contains("option 'W' in 'xWf'"));
        // GNU tar's -h (--dereference) and -H FORMAT are letters of a bundle too.
        assert_eq!(
            rewrite(&["t", "xhHf", "posix", "a"]).unwrap(),
            ["t", "-x", "-h", "-H", "posix", "-f", "a"]
        );
        assert_eq!(rewrite(&["t", "xPf", "a"]).unwrap(), ["t", "-x", "-P", "-f", "a"]);
        // Without an f, unknown letters leave it an archive name.
        assert_eq!(rewrite(&["t", "data"]).unwrap(), ["t", "data"]);
        // Other operations are refused by name (config.rs), not taken for an archive named
        // `czf`, nor refused for a letter fastuntar does not know (`chf`).
        assert_eq!(rewrite(&["t", "czf", "o.tgz", "d"]).unwrap(), ["t", "-c"]);
        assert_eq!(rewrite(&["t", "chf", "o.tar", "d"]).unwrap(), ["t", "-c"]);
        assert_eq!(rewrite(&["t", "rvf", "o.tar", "d"]).unwrap(), ["t", "-r"]);
        assert_eq!(rewrite(&["t", "cz"]).unwrap(), ["t", "-c"]);
    }

    fn split(text: &str) -> Result<Vec<String>, &'static str> {
        split_words(text.as_bytes())
            .map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn tar_options_split_like_wordsplit() {
        assert_eq!(split("  -v   --strip=1\t-C\n/x ").unwrap(), ["-v", "--strip=1", "-C", "/x"]);
        assert_eq!(
            split(r#"-C 'a b' "--exclude=c d" e\ f"#).unwrap(),
            ["-C", "a b", "--exclude=c d", "e f"]
        );
        assert_eq!(split(r#""a\"b" 'c\d' x\ty ''"#).unwrap(), ["a\"b", "c\\d", "x\ty", ""]);
        assert_eq!(split("").unwrap(), Vec::<String>::new());
        assert_eq!(split("'-v").unwrap_err(), "missing closing quote");
        assert_eq!(split("\"-v").unwrap_err(), "missing closing quote");
    }

    #[test]
    fn tar_options_come_first() {
        let args: Vec<OsString> = ["t", "-x", "-f", "a"].iter().map(OsString::from).collect();
        let env = std::ffi::OsStr::new("-v --strip-components=1");
        let out = with_env_options(args.clone(), Some(env)).unwrap();
        assert_eq!(out, ["t", "-v", "--strip-components=1", "-x", "-f", "a"]);
        assert_eq!(with_env_options(args.clone(), None).unwrap(), args);
        assert_eq!(with_env_options(args.clone(), Some("  ".as_ref())).unwrap(), args);
        // An unknown option: GNU tar's argp status, 64; one tar itself refuses: 2.
        let err = with_env_options(args.clone(), Some("--bogus".as_ref())).unwrap_err();
        assert!(err.message.starts_with("error parsing TAR_OPTIONS: "), "{err}");
        assert!(err.message.contains("--bogus"), "{err}");
        assert_eq!(err.status, 64);
        let err = with_env_options(args.clone(), Some("-H bogus".as_ref())).unwrap_err();
        assert_eq!(err.status, 2, "{err}");
        let err = with_env_options(args.clone(), Some("-v name".as_ref())).unwrap_err();
        assert_eq!(err.message, "non-option arguments in TAR_OPTIONS: 'name'");
        let err = with_env_options(args.clone(), Some("'-v".as_ref())).unwrap_err();
        assert_eq!(err.message, "cannot split TAR_OPTIONS: missing closing quote");
        // Judged together with the command line: --clamp-mtime needs --mtime, given there.
        let mut with_mtime = args.clone();
        with_mtime.push("--mtime=@0".into());
        assert!(with_env_options(with_mtime, Some("--clamp-mtime".as_ref())).is_ok());
    }

    #[test]
    fn anything_else_is_left_alone() {
        for args in [
            &["t", "-xf", "a.tar"][..],
            &["t", "a.tar"],
            &["t", "vf", "a.tar"],
            &["t", "xyz"],
            &["t"],
            &["t", ""],
            &["t", "/"],
        ] {
            assert_eq!(rewrite(args).unwrap(), *args);
        }
    }
}
