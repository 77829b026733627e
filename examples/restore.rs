//! Restores a snapshot-shaped archive in-process and prints what happens, file by file:
//!
//! ```sh
//! cargo run --release --example restore -- snapshot.tar.zst /ledger [--quiet] [--cancel-after N] \
//!     [--spread-accounts /mnt/nvme1/accounts,/mnt/nvme2/accounts] \
//!     [--route-accounts /mnt/nvme1/accounts,/mnt/nvme2/accounts]
//! ```
//!
//! Each member started, each file landed (its path and size), each member skipped and why,
//! the warnings and the progress counters are printed; `--quiet` prints only the summary (the
//! speed comparison with the command line, scripts/ab.sh). `--cancel-after N` cancels the run
//! after N files landed: run it again without to see it resume. `--spread-accounts` lays the
//! `accounts/` files over the directories given (as Agave over its account paths): each
//! landed line says its root (0 the destination, 1 and up those directories).
//! `--route-accounts` lays them over the directories by a rule of this program's instead, with
//! a routing callback (`Restore::route`): each `accounts/<slot>.<id>` file to directory
//! `id % N`, so that a file's place follows from its name alone; another member under
//! `accounts/` is refused (and said as a skip).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fastuntar::{
    Cancel, Landed, MemberKind, Observer, Progress, Restore, Route, Skipped, Source, Started,
};

/// Prints every event, and cancels after `cancel_after` files.
struct Print {
    quiet: bool,
    landed: AtomicU64,
    cancel_after: Option<u64>,
    cancel: Cancel,
}

impl Observer for Print {
    fn started(&self, m: &Started<'_>) {
        if !self.quiet {
            println!("start  {:?} {} {:?}", m.kind, m.size, String::from_utf8_lossy(m.name));
        }
    }

    fn landed(&self, f: Landed<'_>) {
        let n = self.landed.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.quiet {
            println!("landed root {} {} {}", f.root, f.size, f.path.display());
        }
        if self.cancel_after.is_some_and(|after| n >= after) {
            self.cancel.cancel();
        }
    }

    fn skipped(&self, s: &Skipped<'_>) {
        println!("skip   {} {:?}: {}", s.member, s.reason, s.message);
    }

    fn warning(&self, w: &str) {
        println!("warn   {w}");
    }

    fn progress(&self, p: Progress) {
        if !self.quiet {
            println!("progress {} members {} bytes", p.members, p.written);
        }
    }
}

/// Where a member goes among `n` account directories (roots 1 to n; 0 is the destination):
/// `accounts/<slot>.<id>` to root 1 + id % n, named `<slot>.<id>` there; `accounts/` itself
/// made in every root; anything else under `accounts/` refused; the rest as archived.
fn by_account_id(n: usize) -> impl Fn(&Path, MemberKind) -> Route + Send + Sync + 'static {
    move |path: &Path, kind: MemberKind| {
        let Ok(file) = path.strip_prefix("accounts") else { return Route::to(0, path) };
        if file.as_os_str().is_empty() && kind == MemberKind::Dir {
            return Route::Each { roots: (1..=n).collect(), path: PathBuf::new() };
        }
        let id = file.to_str().and_then(|f| f.split_once('.')?.1.parse::<usize>().ok());
        match (id, kind) {
            (Some(id), MemberKind::File) => Route::to(1 + id % n, file),
            _ => Route::Refuse("not an account file (accounts/<slot>.<id>)".into()),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: restore ARCHIVE DEST [--quiet] [--cancel-after N] \
                 [--spread-accounts D1,D2,...] [--route-accounts D1,D2,...]";
    let (Some(archive), Some(dest)) = (args.next(), args.next()) else {
        return Err(usage.into());
    };
    let (mut quiet, mut cancel_after, mut spread, mut route) = (false, None, None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quiet" => quiet = true,
            "--cancel-after" => cancel_after = Some(args.next().ok_or(usage)?.parse()?),
            "--spread-accounts" => spread = Some(args.next().ok_or(usage)?),
            "--route-accounts" => route = Some(args.next().ok_or(usage)?),
            _ => return Err(usage.into()),
        }
    }
    let cancel = Cancel::new();
    let print =
        Arc::new(Print { quiet, landed: AtomicU64::new(0), cancel_after, cancel: cancel.clone() });
    let mut restore = Restore::new(Source::Path(PathBuf::from(archive)), dest);
    if let Some(dirs) = spread {
        let roots: Vec<&str> = dirs.split(',').collect();
        restore = restore.spread("accounts/", &roots);
    }
    if let Some(dirs) = route {
        let roots: Vec<&str> = dirs.split(',').collect();
        restore = restore.roots(&roots).route(by_account_id(roots.len()));
    }
    let summary = restore.observer(print).cancel(cancel).run();
    match summary {
        Ok(s) => {
            println!(
                "restored {} files, {} directories, {} bytes in {:.3} s ({} skipped{})",
                s.files,
                s.dirs,
                s.bytes,
                s.elapsed.as_secs_f64(),
                s.skipped,
                if s.resumed { ", resumed" } else { "" }
            );
            Ok(())
        }
        Err(e) => {
            let cause = std::error::Error::source(&e).map(|c| format!(": {c}")).unwrap_or_default();
            Err(format!("{e}{cause}").into())
        }
    }
}
