//! Limits and safety (fastuntar's own): `--snapshot`, the `--max-*` limits, the zstd window.

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Limits and safety")]
pub struct Limits {
    /// Accept only the ledger snapshot layout; files 0644, directories 0755.
    ///
    /// The layout of a ledger snapshot (version, snapshots/..., accounts/...): regular files and
    /// directories only, files landed 0644 and directories 0755, at most 5,000,000 files and 4T
    /// (--max-files, --max-bytes); anything else stops the run before it is written.
    #[arg(long = "snapshot")]
    pub snapshot: bool,

    /// Stop before the member that would exceed N members (snapshot mode: 5000000).
    #[arg(long = "max-files", value_name = "N")]
    pub max_files: Option<u64>,

    /// Stop before the file sizes total over SIZE (snapshot mode: 4T).
    #[arg(long = "max-bytes", value_name = "SIZE")]
    pub max_bytes: Option<String>,

    /// Stop at a file member larger than SIZE.
    #[arg(long = "max-member-size", value_name = "SIZE")]
    pub max_member_size: Option<String>,

    /// Largest zstd window to accept (`zstd --long=31` archives need 2G).
    ///
    /// Largest zstd window to accept (memory the decoder may need): a power of two up to 2G.
    /// The default is `zstd -d`'s own; archives made with `zstd --long=31` need 2G.
    // 128M, as zstd's CLI (it refuses larger windows without --long=31 or --memory): a 75 KB
    // frame declaring 2 GiB drove RSS to 2 GiB under the old 2G default. Agave's frames
    // declare 512 KiB (level 1) to 2 MiB (level 3).
    #[arg(long = "max-window", value_name = "SIZE", default_value = "128M")]
    pub max_window: String,
}
