//! Resuming an interrupted extraction (fastuntar's own): `--resume`, `--no-resume`,
//! `--writeback-every`.

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Resume")]
pub struct Resume {
    /// Write back to the disk, and a resume point, every SIZE written (0: never).
    ///
    /// Start writing the extracted data back to the disk each time SIZE more has been written
    /// (syncfs from a thread of its own), so the data is durable sooner and a final sync finds
    /// little left to do, and write a resume point with it (DIR/.fastuntar-resume: a member before
    /// which everything is on disk). 0 turns both off.
    // 256M: extract+sync of 100,000 small files, medians of 3 interleaved runs, 3.29 -> 2.95 s
    // on the virtio disk and 3.97 -> 3.43 s on the RAM-backed ext4 (64M: 3.09 / 3.66 s); the
    // 4 GB snapshot written buffered 4.70 -> 4.02 s, with --direct-io 2.59 / 2.69 s (no gain,
    // within noise). Extraction alone takes longer (2.2 -> 2.8 s on the disk): it ends once
    // the last syncfs has.
    #[arg(long = "writeback-every", value_name = "SIZE", default_value = "256M")]
    pub writeback_every: String,

    /// Resume an interrupted extraction from DIR's resume point (the default when one fits).
    ///
    /// A rerun with the same archive and the options that change what lands resumes by itself, and
    /// says where (`resumed at member N / byte X of the archive`); --resume asks for it (with no
    /// state in DIR it starts from the beginning, with a note). A state that does not fit the run
    /// (another archive, other options, files removed) stops it with one line. A run that cannot
    /// write resume points (standard input, -k, --backup, ...) is refused. Everything about it:
    /// docs/USAGE.md, "Resuming an interrupted restore".
    #[arg(long = "resume", overrides_with = "no_resume")]
    pub resume: bool,

    /// Remove any resume point in DIR and write none: extract from the beginning.
    #[arg(long = "no-resume", overrides_with = "resume")]
    pub no_resume: bool,

    /// For the test suite: SIGKILL this process at the N-th EVENT (member, published,
    /// written, synced, renamed, stamp, final-stamp, end).
    #[arg(long = "debug-kill-at", value_name = "EVENT:N", hide = true)]
    pub debug_kill_at: Option<String>,
}
