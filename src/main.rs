//! fastuntar: parse the command line, run the extraction, turn the outcome into an exit code.

use clap::Parser;

use fastuntar::exit_codes::ExitCode;
use fastuntar::{cli, config, extract, report};

fn main() {
    let args = cli::Args::parse();
    let code = match config::Config::from_args(args).and_then(|cfg| extract::run(&cfg)) {
        Ok(_summary) if report::skipped_count() > 0 => ExitCode::Skipped,
        Ok(_summary) => ExitCode::Success,
        Err(e) => {
            eprintln!("fastuntar: {e:#}");
            ExitCode::Fatal
        }
    };
    std::process::exit(code as i32);
}
