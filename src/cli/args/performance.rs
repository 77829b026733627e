//! Performance and I/O (fastuntar's own): direct IO, memory, threads, the writer backend,
//! `--sync`.

use clap::ValueEnum;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Performance and I/O")]
pub struct Performance {
    /// Write large files with O_DIRECT: auto (where faster), always, never.
    ///
    /// Files of at least --direct-io-threshold bytes. `auto` (the default): direct where it was
    /// measured to be faster, that is on ext4, XFS, btrfs without data checksums and FUSE when the
    /// tree is 256 MiB or more (known from the archive's size and compression, else once that much
    /// has landed); buffered on tmpfs, ramfs, btrfs with checksums and other filesystems
    /// (docs/USAGE.md, "Direct IO"). `always` (also --direct-io alone): wherever the filesystem
    /// takes O_DIRECT (a refusal is warned about once, and the rest written buffered). `never`
    /// (also --no-direct-io). The last one given wins. -v and --json say what was chosen and why.
    #[arg(
        long = "direct-io",
        value_name = "WHEN",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always",
        overrides_with = "no_direct_io"
    )]
    pub direct_io: Option<DirectIo>,

    /// Write every file through the page cache (`--direct-io=never`).
    #[arg(long = "no-direct-io", overrides_with = "direct_io")]
    pub no_direct_io: bool,

    /// Smallest file written with O_DIRECT (default 64K).
    #[arg(long = "direct-io-threshold", value_name = "SIZE")]
    pub direct_io_threshold: Option<String>,

    /// Memory for buffers: file data in flight and decoded frames (default 64M and more).
    ///
    /// File data in flight and, when a zstd archive meets more than one decoder thread, decoded
    /// frames waiting to be read. Default: 64M of file data, plus 32M of frames per decoder thread
    /// past the first, what the third and later add kept within an eighth of the machine's memory;
    /// where the process may use less than 256 MiB (a container's memory limit, `ulimit -v`), a
    /// quarter of that; when listing or with -O, the frames' only, at least 64M. A SIZE given is
    /// the total, divided between the two. From a URL a quarter of it is the reorder window.
    #[arg(long = "memory", value_name = "SIZE")]
    pub memory: Option<String>,

    /// Threads decoding a multi-frame zstd or multi-block xz archive.
    ///
    /// Default: the CPUs this process may run on, one fewer when extracting to disk (for the
    /// writer); 1 keeps to one streaming decoder. The blocks of a multi-block xz stream (`xz -T`)
    /// too, when the decoded frames' memory is at least 128M. Other formats, single-frame zstd and
    /// single-block xz decode on one.
    #[arg(long = "threads", value_name = "N")]
    pub threads: Option<usize>,

    /// Threads that create files (default: the CPUs, at most 8).
    ///
    /// Files are created in parallel (those of one large directory too); archive order still
    /// decides (a later member replaces an earlier one, links follow their targets, directories get
    /// their times last); 1 writes everything from one thread. Where names are compared without
    /// case (FAT, exFAT, SMB, HFS+, an ext4 casefold directory) the default is one writer without
    /// io_uring, since `F` and `f` are one file there; on ext2/3/4 without a journal, one writer
    /// (ext4 then looks up each new inode's recently deleted neighbours, and parallel creation
    /// contends there).
    #[arg(long = "writer-threads", value_name = "N")]
    pub writer_threads: Option<usize>,

    /// Writer backend.
    ///
    /// `auto` (the default): io_uring with one writer thread or when large files go direct, plain
    /// system calls when several writer threads write everything buffered (io_uring measured no
    /// faster there). Where the kernel (or a container's seccomp profile) refuses io_uring, `uring`
    /// falls back to portable with a warning, `auto` silently (with -v, a warning).
    #[arg(long = "io", value_enum, default_value_t = IoBackend::Auto)]
    pub io: IoBackend,

    /// At the end, make everything durable (syncfs) and say how long that took.
    #[arg(long = "sync")]
    pub sync: bool,

    /// Put the members under PREFIX in DIR1,DIR2,... (PREFIX taken off), a writer on each.
    ///
    /// PREFIX is a directory in the archive, as named after --strip-components and
    /// --transform. Each file goes to the DIR given the fewest bytes so far, so each gets an
    /// even share, and the same on a rerun; directories under PREFIX are made in every one.
    /// Each DIR has a writer thread of its own (put each on its own disk) and is confined as
    /// -C's DIR is. `--spread accounts/=/mnt/nvme1/accounts,/mnt/nvme2/accounts` lays a ledger
    /// snapshot's account files out as a validator's account paths. May be given again for
    /// another PREFIX. A DIR may be DIR/PREFIX itself, not elsewhere in -C's DIR.
    #[arg(long = "spread", value_name = "PREFIX=DIR1,DIR2,...")]
    pub spread: Vec<String>,

    /// For the test suite: act as a kernel whose io_uring is refused (`refused`: as
    /// kernel.io_uring_disabled=2) or lacks IORING_OP_OPENAT (`no-openat`: a 5.5 kernel).
    #[arg(long = "debug-uring", value_enum, value_name = "KERNEL", hide = true)]
    pub debug_uring: Option<DebugUring>,

    /// For the test suite: the tree size from which `--direct-io=auto` writes large files
    /// direct (instead of 256 MiB), so that small archives cross it.
    #[arg(long = "debug-direct-after", value_name = "SIZE", hide = true)]
    pub debug_direct_after: Option<String>,
}

/// When files are written with O_DIRECT (write/direct_policy.rs).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectIo {
    /// Where it was measured to be faster (the filesystem, the archive's and the file's size).
    Auto,
    /// Every file of at least --direct-io-threshold bytes, wherever O_DIRECT is accepted.
    Always,
    /// No file.
    Never,
}

/// The hidden `--debug-uring`'s kernels (write::RingProbe).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugUring {
    /// io_uring refused, as kernel.io_uring_disabled=2.
    Refused,
    /// A ring without IORING_OP_OPENAT, as Linux 5.5's.
    NoOpenat,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring with one writer thread or when large files go direct (--direct-io, or the
    /// default policy); plain system calls when several writer threads write every file
    /// buffered (io_uring measured no faster there, and slower for small files).
    Auto,
    /// io_uring (falls back to portable, with a warning, where the kernel refuses it).
    Uring,
    /// Plain pwrite/openat system calls.
    Portable,
}
