//! The process exit codes, in one place (documented in README.md).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything was extracted.
    Success = 0,
    /// The run finished but some members were skipped, each with a warning.
    Skipped = 1,
    /// A fatal error stopped the run.
    Fatal = 2,
}
