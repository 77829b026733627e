//! The input (GNU tar's "Device selection", "Device blocking", "Archive format selection" and
//! "Compression options", and fastuntar's URL options): the archive, its format and
//! compression, a URL's download.

use std::path::PathBuf;

use clap::ArgAction;

#[derive(clap::Args, Debug)]
pub struct Input {
    /// The archive to read ('-' for standard input; an http:// or https:// URL is downloaded
    /// and extracted as it arrives).
    #[arg(short = 'f', long = "file", value_name = "ARCHIVE")]
    pub file: Option<PathBuf>,

    /// Read the archive only if its volume label (`tar -V LABEL -c`: a GNU volume header, or
    /// a POSIX archive's GNU.volume.label) matches PATTERN (shell wildcards, as fnmatch(3)
    /// without flags); otherwise stop before the first member: "Archive not labeled to match
    /// 'PATTERN'" or "Volume 'LABEL' does not match 'PATTERN'" (exit 2), as GNU tar.
    #[arg(short = 'V', long = "label", value_name = "PATTERN")]
    pub label: Option<String>,

    /// The archive format, for creating one (v7, oldgnu, ustar, gnu, posix, pax).
    /// When reading, as in GNU tar, a known FORMAT changes nothing (each header says its own)
    /// and an unknown one is refused.
    #[arg(
        short = 'H',
        long = "format",
        value_name = "FORMAT",
        value_parser = ["v7", "oldgnu", "ustar", "gnu", "posix", "pax"]
    )]
    pub format: Option<String>,

    /// Read on past zero blocks, to the end of the input: for archives concatenated with
    /// `cat a.tar b.tar` (whose first end marker would otherwise end the archive).
    #[arg(short = 'i', long = "ignore-zeros")]
    pub ignore_zeros: bool,

    /// Accepted for tar's habits, as are -z, -j, -J, --gzip, --bzip2, --xz, --zstd and --lz4:
    /// the format is always found from the archive's first bytes, whatever these say.
    #[arg(
        short = 'a',
        long = "auto-compress",
        short_aliases = ['z', 'j', 'J'],
        aliases = ["gzip", "gunzip", "ungzip", "bzip2", "xz", "zstd", "lz4"],
        action = ArgAction::Count
    )]
    pub compression_flag: u8,

    /// Decompress with PROG first: the archive is piped through `PROG -d` (PROG may carry
    /// arguments, split at spaces), for formats fastuntar does not read itself.
    #[arg(short = 'I', long = "use-compress-program", value_name = "PROG")]
    pub compress_program: Option<String>,

    /// Short for -I lzip (also --lzma: -I lzma, --lzop: -I lzop, -Z/--uncompress: -I gzip,
    /// which reads compress's .Z).
    #[arg(long = "lzip", conflicts_with = "compress_program")]
    pub lzip: bool,

    #[arg(long = "lzma", hide = true, conflicts_with_all = ["compress_program", "lzip"])]
    pub lzma: bool,

    #[arg(long = "lzop", hide = true, conflicts_with_all = ["compress_program", "lzip", "lzma"])]
    pub lzop: bool,

    #[arg(
        short = 'Z',
        long = "uncompress",
        alias = "compress",
        hide = true,
        conflicts_with_all = ["compress_program", "lzip", "lzma", "lzop"]
    )]
    pub uncompress: bool,

    /// For an archive read from a URL: the most connections fetching its pieces in parallel
    /// from each source, when it answers ranges and gives a length and an ETag or
    /// Last-Modified (default 8, at most 16; otherwise one). Each source starts with one and
    /// is given more while they raise the rate.
    #[arg(long = "connections", value_name = "N")]
    pub connections: Option<usize>,

    /// For a URL: another source of the same archive (repeatable). Pieces are fetched from
    /// every source at once; a source that serves another archive, or fails, is dropped.
    #[arg(long = "mirror", value_name = "URL")]
    pub mirror: Vec<String>,

    /// For a URL: more sources of the same archive, one URL a line (`#` starts a comment).
    #[arg(long = "mirrors", value_name = "FILE")]
    pub mirrors: Option<PathBuf>,

    /// For a URL: download at most RATE bytes a second, all connections together (curl's
    /// spelling: 500K, 50M, 1G, 1024-based).
    #[arg(long = "limit-rate", value_name = "RATE")]
    pub limit_rate: Option<String>,

    /// For a URL: a connection that brings no byte for SECONDS is retried (default 30).
    #[arg(long = "stall-timeout", value_name = "SECONDS")]
    pub stall_timeout: Option<u64>,

    /// For a URL: a connection that brings less than RATE bytes a second over --stall-timeout
    /// of waiting is retried as stalled. RATE as curl's: 500, 64K, 50M, 1G (1024-based);
    /// default 1K, 0 for no floor.
    #[arg(long = "min-rate", value_name = "RATE")]
    pub min_rate: Option<String>,

    /// For a URL: failures in a row, without a byte between them, before a connection gives up
    /// (default 64, about an hour of waits: at once, then 1, 2, 4 ... 60 s).
    #[arg(long = "retries", value_name = "N")]
    pub retries: Option<u32>,

    /// For an https URL: also trust the CA certificates (PEM) in FILE, besides the system's.
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// For a URL: keep a copy of the downloaded archive in FILE (written as FILE.incomplete,
    /// renamed to FILE once the run ended well and the copy is complete).
    #[arg(long = "keep-archive", value_name = "FILE")]
    pub keep_archive: Option<PathBuf>,

    /// For a URL: the SHA-256 the downloaded bytes must have (sha256:HEX); a mismatch is found
    /// at the end, when the tree has been extracted, and exits 2.
    #[arg(long = "checksum", value_name = "sha256:HEX")]
    pub checksum: Option<String>,

    /// For an s3:// archive: ask for it without credentials (a public bucket), as aws-cli's
    /// --no-sign-request; no credential is looked for.
    #[arg(long = "no-sign-request")]
    pub no_sign_request: bool,

    /// GNU tar's --pax-option: `delete=PATTERN` reads the archive as if the keywords of its
    /// members' PAX headers matching PATTERN (fnmatch: `delete=mtime`, `delete=SCHILY.*`) were
    /// not there; the keywords for making archives (`exthdr.name`, `globexthdr.name`,
    /// `exthdr.mtime`, `globexthdr.mtime`) are accepted. Comma-separated, or given again.
    #[arg(long = "pax-option", value_name = "LIST", action = ArgAction::Append)]
    pub pax_option: Vec<String>,
}
