//! The documents generated from the command line's definitions (`Args`, clap derive): the man
//! page (`fastuntar --man`, clap_mangen) and docs/REFERENCE.md (`markdown`), so that neither can
//! miss or misstate a flag. Both take each option's long help: its whole doc comment, where
//! `--help` shows only the first paragraph. tests/suite/help.rs checks that docs/REFERENCE.md
//! is what `markdown` makes of the current definitions, and rewrites it when asked.

use clap::{Arg, Command};

/// The environment variable that makes the test rewrite docs/REFERENCE.md.
pub const WRITE_VAR: &str = "FASTUNTAR_WRITE_REFERENCE";

/// The command that rewrites docs/REFERENCE.md, as its header and the stale test's message say.
pub const REGENERATE: &str = "FASTUNTAR_WRITE_REFERENCE=1 cargo test --release --test tests -- suite::help::reference_is_current";

/// Width the markdown's prose is wrapped to (a line may run longer where one word does).
const WIDTH: usize = 100;

/// The man page (roff), as `fastuntar --man` prints it.
pub fn man_page(cmd: Command) -> std::io::Result<Vec<u8>> {
    let mut text = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut text)?;
    Ok(text)
}

/// The flag reference: the usage line, then every option shown by `--help` under the same
/// headings in the same order, each with its long help, aliases, default and values; then
/// the options `--help` hides (GNU tar's that are accepted or refused by name, and the
/// generators), which are documented for scripts that meet them.
pub fn markdown(cmd: &Command) -> String {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = String::new();
    out.push_str("# fastuntar: every flag\n\n");
    push_wrapped(
        &mut out,
        "Generated from the command line's definitions (src/cli/args/, by src/cli/reference.rs), \
         as the man page is (`fastuntar --man`); do not edit it by hand. After changing a flag, \
         regenerate it (a test fails until then):",
    );
    out.push_str(&format!("\n    {REGENERATE}\n\n"));
    push_wrapped(
        &mut out,
        "`fastuntar --help` shows the first paragraph of each, under the same headings. \
         [USAGE.md](USAGE.md) is the guide (snapshots, URLs, S3, resume, direct IO, exit \
         status); [DIFFERENCES.md](DIFFERENCES.md) says where fastuntar and GNU tar differ.",
    );
    out.push('\n');
    let usage = cmd.render_usage().to_string();
    out.push_str(&format!("    {}\n\n", usage.trim()));

    let shown: Vec<&Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    let positionals: Vec<&Arg> = shown.iter().copied().filter(|a| a.is_positional()).collect();
    if !positionals.is_empty() {
        out.push_str("## Arguments\n\n");
        for arg in positionals {
            push_arg(&mut out, arg);
        }
    }
    let mut headings: Vec<&str> = Vec::new();
    for arg in &shown {
        if let Some(h) = arg.get_help_heading()
            && !headings.contains(&h)
        {
            headings.push(h);
        }
    }
    let unheaded: Vec<&Arg> = shown
        .iter()
        .copied()
        .filter(|a| !a.is_positional() && a.get_help_heading().is_none())
        .collect();
    if !unheaded.is_empty() {
        out.push_str("## Options\n\n");
        for arg in unheaded {
            push_arg(&mut out, arg);
        }
    }
    for heading in headings {
        out.push_str(&format!("## {heading}\n\n"));
        for arg in
            shown.iter().filter(|a| !a.is_positional() && a.get_help_heading() == Some(heading))
        {
            push_arg(&mut out, arg);
        }
    }

    if let Some(after) = cmd.get_after_long_help() {
        out.push_str("## Notes and examples\n\n");
        for para in after.to_string().split("\n\n") {
            if para.lines().count() > 1 {
                // Examples: kept as clap prints them.
                for line in para.lines() {
                    out.push_str(&format!("    {}\n", line.trim_start()));
                }
            } else {
                push_wrapped(&mut out, para);
            }
            out.push('\n');
        }
    }

    let hidden: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_hide_set() && !a.get_id().as_str().starts_with("debug_"))
        .collect();
    if !hidden.is_empty() {
        out.push_str("## Not shown by --help\n\n");
        push_wrapped(
            &mut out,
            "GNU tar's options for writing archives and tapes, which fastuntar accepts and ignores \
             or refuses by name (one line, exit 2), as GNU tar does when reading; and the \
             generators of the man page and the shell completions. (The `--debug-*` options are \
             the test suite's.)",
        );
        out.push('\n');
        for arg in hidden {
            push_arg(&mut out, arg);
        }
    }
    out
}

/// The flags this document lists for an argument, as its heading spells them (`-x`,
/// `--extract`; a positional's value name).
pub fn spellings(arg: &Arg) -> Vec<String> {
    if arg.is_positional() {
        let names = arg.get_value_names().unwrap_or_default();
        return vec![names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" ")];
    }
    let mut all = Vec::new();
    if let Some(s) = arg.get_short() {
        all.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        all.push(format!("--{l}"));
    }
    all
}

fn push_arg(out: &mut String, arg: &Arg) {
    let names: Vec<String> = spellings(arg).iter().map(|s| format!("`{s}`")).collect();
    let value = value_suffix(arg);
    out.push_str(&format!("### {}{value}\n\n", names.join(", ")));
    let help = arg.get_long_help().or_else(|| arg.get_help()).map(|h| h.to_string());
    for para in help.as_deref().unwrap_or("").split("\n\n").filter(|p| !p.trim().is_empty()) {
        push_wrapped(out, para);
        out.push('\n');
    }
    let mut notes = Vec::new();
    let mut aliases: Vec<String> = Vec::new();
    aliases
        .extend(arg.get_all_short_aliases().unwrap_or_default().iter().map(|c| format!("`-{c}`")));
    aliases.extend(arg.get_all_aliases().unwrap_or_default().iter().map(|a| format!("`--{a}`")));
    if !aliases.is_empty() {
        notes.push(format!("Also spelled {}.", aliases.join(", ")));
    }
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("Default: `{}`.", defaults.join(" ")));
    }
    if !notes.is_empty() {
        push_wrapped(out, &notes.join(" "));
        out.push('\n');
    }
    let values: Vec<_> =
        arg.get_possible_values().into_iter().filter(|v| !v.is_hide_set()).collect();
    if !values.is_empty() && values.iter().any(|v| v.get_help().is_some()) {
        for v in values {
            let help = v.get_help().map(|h| format!(": {h}")).unwrap_or_default();
            push_wrapped_item(out, &format!("`{}`{help}", v.get_name()));
        }
        out.push('\n');
    } else if !values.is_empty() {
        let names: Vec<String> = values.iter().map(|v| format!("`{}`", v.get_name())).collect();
        push_wrapped(out, &format!("Values: {}.", names.join(", ")));
        out.push('\n');
    }
}

/// ` VALUE`, ` [=VALUE]` or ` VALUE...` after the flags, as `--help` writes them.
fn value_suffix(arg: &Arg) -> String {
    if arg.is_positional() || !arg.get_action().takes_values() {
        return String::new();
    }
    let Some(range) = arg.get_num_args() else {
        return String::new();
    };
    if !range.takes_values() {
        return String::new();
    }
    let names = arg.get_value_names().map(|n| n.iter().map(|n| n.to_string()).collect::<Vec<_>>());
    let name = names.map(|n| n.join(" ")).unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    if range.min_values() == 0 { format!(" `[={name}]`") } else { format!(" `{name}`") }
}

/// Appends `text` as one paragraph wrapped at `WIDTH`, with a newline after.
fn push_wrapped(out: &mut String, text: &str) {
    for line in wrap(text, WIDTH) {
        out.push_str(&line);
        out.push('\n');
    }
}

/// Appends `text` as a list item, its continuation lines indented under it.
fn push_wrapped_item(out: &mut String, text: &str) {
    for (i, line) in wrap(text, WIDTH - 2).into_iter().enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(&line);
        out.push('\n');
    }
}

/// Greedy word wrap; a word longer than `width` stands alone on its line.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn wrap_keeps_words_and_width() {
        let text = "one two three four five six seven eight nine ten";
        let lines = wrap(text, 14);
        assert_eq!(lines, ["one two three", "four five six", "seven eight", "nine ten"]);
        assert_eq!(wrap("averyveryverylongword x", 5), ["averyveryverylongword", "x"]);
        assert!(wrap("  ", 10).is_empty());
    }

    #[test]
    fn every_shown_flag_has_its_heading_line() {
        let cmd = crate::cli::Args::command();
        let text = markdown(&cmd);
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let names: Vec<String> = spellings(arg).iter().map(|s| format!("`{s}`")).collect();
            let head = format!("### {}", names.join(", "));
            assert!(text.lines().any(|l| l.starts_with(&head)), "no {head} line");
        }
        // Long help, not the first paragraph alone: --to-command's variables are in it.
        assert!(text.contains("TAR_FILENAME"));
        // A value enum's values with their help.
        assert!(text.contains("- `portable`: Plain pwrite/openat system calls"));
        // The debug options are the test suite's own.
        assert!(!text.contains("### `--debug-"));
    }
}
