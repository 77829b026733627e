//! The input plan: where the archive comes from and how it is decoded, as the run's options
//! fixed it (options/input.rs). The input stage (decode/, and resume/ which opens it at a resume
//! point) reads only this, never the flags.

use std::path::PathBuf;

use anyhow::Result;

use crate::budget::{Budget, Pools};

#[derive(Debug, Clone)]
pub struct InputPlan {
    /// The archive file; None for standard input (or a URL: `url`).
    pub archive: Option<PathBuf>,
    /// `PROG -d` (split at spaces) to pipe the archive through first (`-I PROG`, `--lzip`, ...).
    pub filter: Option<Vec<String>>,
    /// The archive is read from this URL (decode/url/), with these settings.
    pub url: Option<super::url::Plan>,
    /// log2 of the largest zstd window accepted (`--max-window`).
    pub max_window_log: u32,
    /// Decoder threads (frames of a multi-frame archive decode in parallel).
    pub threads: usize,
    /// The buffer memory, divided into pools once the decoder threads are known.
    pub budget: Budget,
    /// A program's own reader to read the archive from (the library's `Source::Reader`),
    /// instead of `archive` or standard input; None on the command line.
    pub reader: Option<Handed>,
}

/// A reader handed over by a program, taken by the one run that reads it.
#[derive(Clone)]
pub struct Handed(std::sync::Arc<std::sync::Mutex<Option<Box<dyn std::io::Read + Send>>>>);

impl Handed {
    /// `reader`, to be taken once.
    pub fn new(reader: Box<dyn std::io::Read + Send>) -> Handed {
        Handed(std::sync::Arc::new(std::sync::Mutex::new(Some(reader))))
    }

    /// The reader, the first time.
    pub fn take(&self) -> Option<Box<dyn std::io::Read + Send>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handed")
    }
}

impl InputPlan {
    /// The buffer pools for a run whose zstd frames `workers` threads decode besides the
    /// reader (budget.rs `divide`).
    pub fn pools(&self, workers: usize) -> Result<Pools> {
        self.budget.pools(workers)
    }
}
