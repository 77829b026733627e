//! What a user reads before running anything (issue 44): `--help` grouped under GNU tar's
//! headings with one or two lines an option, `--usage` short, the man page and
//! docs/REFERENCE.md generated from the same definitions (and REFERENCE.md not stale), and a
//! README that is a map (at most 250 lines, its links alive).
//!
//! No matrix: the text does not depend on the writers or the decoder.

use crate::util::{Output, fastuntar};

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use clap::CommandFactory;
use fastuntar::__private::cli::reference;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// GNU tar's groups, in its order and words, as issue 44 lists them.
const HEADINGS: [&str; 10] = [
    "Main operation mode",
    "Overwrite control",
    "Selection of members",
    "Name transformation",
    "File attributes",
    "Input: archive, compression, URL, mirrors",
    "Resume",
    "Performance and I/O",
    "Limits and safety",
    "Informative output",
];

fn help_at(columns: &str, flag: &str) -> Output {
    let out = fastuntar().arg(flag).env("COLUMNS", columns).run();
    out.expect_code(0);
    out
}

/// `--help`'s entries: each option line (`  -x, --extract ...`, `      --null ...`) with the
/// lines that continue it, per heading.
fn entries(help: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut heading = String::new();
    for line in help.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            // A heading (`Overwrite control:`), or the text around the lists (`Usage: ...`,
            // `Examples:`, the exit status), whose lines are no entries.
            let is_heading = line.ends_with(':') && line != "Examples:";
            heading =
                if is_heading { line.trim_end_matches(':').to_string() } else { String::new() };
            continue;
        }
        if line.trim().is_empty() || heading.is_empty() {
            continue;
        }
        let starts_entry =
            line.starts_with("  -") || line.starts_with("      --") || line.starts_with("  [");
        if starts_entry {
            out.push((heading.clone(), vec![line.to_string()]));
        } else if let Some(last) = out.last_mut() {
            last.1.push(line.to_string());
        }
    }
    out
}

#[test]
fn help_is_grouped_and_short() {
    let help = help_at("100", "--help").stdout_str();
    // The headings, each once, in GNU tar's order.
    let found: Vec<&str> = help
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
        .map(|l| l.trim_end_matches(':'))
        .filter(|l| *l != "Usage" && *l != "Examples")
        .collect();
    let mut want = vec!["Arguments"];
    want.extend(HEADINGS);
    assert_eq!(found, want, "--help's headings\n{help}");

    // No option under clap's catch-all heading, and none over two lines at 100 columns.
    let entries = entries(&help);
    assert!(entries.len() >= 100, "{} entries: the parse of --help is off\n{help}", entries.len());
    for (heading, lines) in &entries {
        assert!(
            heading == "Arguments" || HEADINGS.contains(&heading.as_str()),
            "{:?} is under {heading:?}\n{help}",
            lines[0]
        );
        assert!(lines.len() <= 2, "over two lines at 100 columns:\n{}", lines.join("\n"));
        for l in lines {
            assert!(l.chars().count() <= 100, "a line over 100 columns: {l:?}");
        }
    }

    // Every option --help should show is there, under the heading its group has.
    let cmd = fastuntar::__private::cli::Args::command();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set() && !a.is_positional()) {
        let long = format!("--{}", arg.get_long().expect("every option has a long name"));
        let (heading, _) = entries
            .iter()
            .find(|(_, lines)| {
                // `--backup[=<CONTROL>]`, `--xattrs...`, `-k,`: the flag itself.
                let flag = |w: &str| {
                    w.split(['[', ',']).next().unwrap().trim_end_matches("...").to_string()
                };
                lines[0].split_whitespace().any(|w| flag(w) == long)
            })
            .unwrap_or_else(|| panic!("--help lacks {long}\n{help}"));
        assert_eq!(Some(heading.as_str()), arg.get_help_heading(), "{long}'s heading");
    }

    // -? is the same text; --usage one line.
    assert_eq!(help_at("100", "-?").stdout_str(), help, "-? and --help differ");
    let usage = help_at("100", "--usage").stdout_str();
    assert_eq!(usage.lines().count(), 1, "--usage: {usage}");
    assert!(usage.starts_with("Usage: fastuntar "), "--usage: {usage}");
}

#[test]
fn help_wraps_to_a_narrow_terminal() {
    // At 80 columns nothing runs past the edge; the headings stay.
    let help = help_at("80", "--help").stdout_str();
    for l in help.lines() {
        assert!(l.chars().count() <= 80, "a line over 80 columns: {l:?}");
    }
    for h in HEADINGS {
        assert!(help.lines().any(|l| l == format!("{h}:")), "no {h:?} at 80 columns");
    }
}

#[test]
fn man_page_has_every_flag_at_length() {
    let out = fastuntar().arg("--man").run();
    out.expect_code(0);
    let man = out.stdout_str();
    let cmd = fastuntar::__private::cli::Args::command();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set() && !a.is_positional()) {
        let long = arg.get_long().unwrap().replace('-', "\\-");
        assert!(man.contains(&format!("\\-\\-{long}")), "the man page lacks --{long}");
    }
    // GNU tar's groups as sections, and the long help (not --help's first paragraph).
    for h in HEADINGS {
        assert!(
            man.contains(&format!(".SH \"{}\"", h.to_uppercase()))
                || man.contains(&format!(".SH {}", h.to_uppercase())),
            "no section {h}"
        );
    }
    assert!(man.contains("TAR_FILENAME"), "the man page has --to-command's short help only");
}

/// The flags docs/REFERENCE.md heads its entries with (`### `-x`, `--extract``).
fn listed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("### "))
        .flat_map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .filter(|s| s.starts_with('-'))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn reference_is_current() {
    let cmd = fastuntar::__private::cli::Args::command();
    let text = reference::markdown(&cmd);
    let path = repo().join("docs/REFERENCE.md");
    if std::env::var_os(reference::WRITE_VAR).is_some() {
        fs::write(&path, &text).unwrap();
        eprintln!("reference_is_current: wrote {}", path.display());
        return;
    }
    let on_disk = fs::read_to_string(&path).unwrap_or_default();

    // The list of flags first, so that the message names what is missing or extra.
    let clap_flags: BTreeSet<String> = cmd
        .get_arguments()
        .filter(|a| !a.is_positional() && !a.get_id().as_str().starts_with("debug_"))
        .flat_map(reference::spellings)
        .collect();
    let doc_flags = listed(&on_disk);
    let missing: Vec<_> = clap_flags.difference(&doc_flags).collect();
    let extra: Vec<_> = doc_flags.difference(&clap_flags).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/REFERENCE.md is stale: it lacks {missing:?} and lists {extra:?}, which clap \
         does not have. Regenerate it: {}",
        reference::REGENERATE
    );
    assert!(
        on_disk == text,
        "docs/REFERENCE.md is stale: it is not what src/cli/args/ make now (a flag's help, \
         heading, default or value changed). Regenerate it: {}",
        reference::REGENERATE
    );
}

#[test]
fn readme_is_a_map() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 250, "README.md is {} lines (at most 250)", lines.len());
    for (i, l) in lines.iter().enumerate() {
        assert!(l.chars().count() <= 200, "README.md:{}: {} characters", i + 1, l.chars().count());
    }
    // The two set-up commands, and every relative link alive.
    assert!(readme.contains("\ncargo run --release -- -x fixtures/sample.tar.zst "), "set-up");
    assert!(readme.contains("\nscripts/test.sh\n"), "set-up");
    let mut links = 0;
    for part in readme.split("](").skip(1) {
        let target = part.split(')').next().unwrap();
        if target.starts_with("http") {
            continue;
        }
        let file = target.split('#').next().unwrap();
        assert!(repo().join(file).exists(), "README.md links to {target}, which is not there");
        links += 1;
    }
    assert!(links >= 6, "README.md links to {links} files");
    // The script that draws its chart is there to be run.
    let bench = fs::read_to_string(repo().join("scripts/bench.sh")).unwrap();
    assert!(bench.contains("chart"), "scripts/bench.sh has no chart step");
    assert!(
        repo().join("docs/time-to-restore.svg").exists()
            && readme.contains("docs/time-to-restore.svg")
    );
}
