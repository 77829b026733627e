//! The process exit codes, in one place (documented in README.md).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything was extracted.
    Success = 0,
    /// A member could not be extracted (each reported, the run went on), or a fatal error
    /// stopped the run: GNU tar's 2. (GNU tar's 1, "some files differ", is `--compare`'s,
    /// which fastuntar refuses; a command line it cannot read is `cli::usage_status`'s 64.)
    Fatal = 2,
}
