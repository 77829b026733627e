//! The command line's `fastuntar -xf ARCHIVE -C DIR` done through the library, for
//! scripts/ab.sh: the same restore, in-process through `fastuntar::Restore`, so that the API's
//! cost over the command line can be timed (issue 43: within 3 %).
//!
//! ```sh
//! cargo build --release --example ab_restore
//! scripts/ab.sh ARCHIVE target/release/fastuntar target/release/examples/ab_restore
//! ```
//!
//! With `--events`, an observer counts every member started and every file landed, as a
//! program indexing the files would be told them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fastuntar::{Landed, Observer, Restore, Source, Started};

/// Counts what it is told.
#[derive(Default)]
struct Count {
    started: AtomicU64,
    landed: AtomicU64,
}

impl Observer for Count {
    fn started(&self, _: &Started<'_>) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    fn landed(&self, _: Landed<'_>) {
        self.landed.fetch_add(1, Ordering::Relaxed);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: ab_restore -xf ARCHIVE -C DIR [--events]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut archive, mut dest, mut events) = (None, None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-xf" => archive = it.next().map(PathBuf::from),
            "-C" => dest = it.next().map(PathBuf::from),
            "--events" => events = true,
            _ => return Err(usage.into()),
        }
    }
    let (Some(archive), Some(dest)) = (archive, dest) else { return Err(usage.into()) };
    let count = Arc::new(Count::default());
    let mut restore = Restore::new(Source::Path(archive), dest);
    if events {
        restore = restore.observer(count.clone());
    }
    let s = restore.run().map_err(|e| match std::error::Error::source(&e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    })?;
    eprintln!(
        "{} files, {} bytes in {:.3} s; told {} started, {} landed",
        s.files,
        s.bytes,
        s.elapsed.as_secs_f64(),
        count.started.load(Ordering::Relaxed),
        count.landed.load(Ordering::Relaxed)
    );
    Ok(())
}
