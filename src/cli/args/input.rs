//! The input (GNU tar's "Device selection", "Device blocking", "Archive format selection" and
//! "Compression options", and fastuntar's URL options): the archive, its format and
//! compression, a URL's download.

use std::path::PathBuf;

use clap::ArgAction;

#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Input: archive, compression, URL, mirrors")]
pub struct Input {
    /// The archive ('-': standard input; a URL is read as it arrives).
    ///
    /// `-` reads standard input; an http://, https:// or s3:// URL is downloaded and extracted as
    /// it arrives (docs/USAGE.md, "Restore from a URL"). Without -f, the first operand is the
    /// archive; with neither, $TAPE or else standard input, as GNU tar (`zstd -dc A | fastuntar
    /// -x`; a terminal is refused). The format is found from the archive's first bytes, never its
    /// name.
    ///
    /// tar's traditional bundled first argument is read as GNU tar reads it (`xzvf ARCHIVE`, `xfC A
    /// DIR`), unless a file of that name exists.
    #[arg(short = 'f', long = "file", value_name = "ARCHIVE")]
    pub file: Option<PathBuf>,

    /// Read the archive only if its volume label matches PATTERN.
    ///
    /// The label is `tar -V LABEL -c`'s: a GNU volume header first, or a POSIX archive's
    /// GNU.volume.label. PATTERN has shell wildcards (fnmatch(3) without flags). Otherwise the run
    /// stops before the first member: "Archive not labeled to match 'PATTERN'" or "Volume 'LABEL'
    /// does not match 'PATTERN'", exit 2, as GNU tar. A POSIX archive's label is listed first by -t
    /// and -v, as GNU tar lists it. (-V is not --version, as in GNU tar.)
    #[arg(short = 'V', long = "label", value_name = "PATTERN")]
    pub label: Option<String>,

    /// Accepted as in GNU tar (each header says its own format).
    ///
    /// The archive format, for creating one (v7, oldgnu, ustar, gnu, posix, pax). When reading, as
    /// in GNU tar, a known FORMAT changes nothing (`TAR_OPTIONS="-H posix"` works) and an unknown
    /// one is refused (exit 2).
    #[arg(
        short = 'H',
        long = "format",
        value_name = "FORMAT",
        value_parser = ["v7", "oldgnu", "ustar", "gnu", "posix", "pax"]
    )]
    pub format: Option<String>,

    /// Read on past zero blocks (archives joined with `cat`).
    ///
    /// Read to the end of the input: for archives concatenated with `cat a.tar b.tar`, whose first
    /// end marker would otherwise end the archive.
    #[arg(short = 'i', long = "ignore-zeros")]
    pub ignore_zeros: bool,

    /// Accepted, as -z, -j, -J: the data decides the format.
    ///
    /// As are -z, -j, -J, --gzip, --bzip2, --xz, --zstd and --lz4: zstd, gzip, bzip2, xz and LZ4
    /// are decoded in-process and found from the archive's first bytes, whatever these say.
    #[arg(
        short = 'a',
        long = "auto-compress",
        short_aliases = ['z', 'j', 'J'],
        aliases = ["gzip", "gunzip", "ungzip", "bzip2", "xz", "zstd", "lz4"],
        action = ArgAction::Count
    )]
    pub compression_flag: u8,

    /// Decompress through `PROG -d` first.
    ///
    /// For formats fastuntar does not read itself: the archive is piped through `PROG -d` (PROG may
    /// carry arguments, split at spaces); its failure fails the run. Not with a URL. lzip and lzop
    /// archive files are found by their magic, as GNU tar finds them, and read through `lzip -d` /
    /// `lzop -d` without a flag (not installed: `A: lzip-compressed: cannot run 'lzip -d': No such
    /// file or directory`, exit 2; on standard input, as GNU tar, give --lzip or --lzop).
    #[arg(short = 'I', long = "use-compress-program", value_name = "PROG")]
    pub compress_program: Option<String>,

    /// Short for -I lzip (--lzma, --lzop, -Z likewise).
    ///
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

    /// URL: most connections per source (default 8).
    ///
    /// For an archive read from a URL: the most connections fetching its pieces in parallel
    /// from each source, when it answers ranges and gives a length and an ETag or
    /// Last-Modified (default 8, at most 16; otherwise one). Each source starts with one and is
    /// given more while they raise the rate. Each connection is a file descriptor: under a low
    /// `ulimit -n` fewer are opened.
    #[arg(long = "connections", value_name = "N")]
    pub connections: Option<usize>,

    /// URL: another source of the same archive (repeatable).
    ///
    /// For a URL: another source of the same archive, http://, https:// or s3:// (repeatable).
    /// Pieces are fetched from every source at once, scheduled by measured speed; a source
    /// that serves another archive (another length, other first bytes), or fails past
    /// --retries, is dropped with one line and the run goes on with the rest.
    #[arg(long = "mirror", value_name = "URL")]
    pub mirror: Vec<String>,

    /// URL: more sources, one URL a line in FILE.
    ///
    /// For a URL: more sources of the same archive, one URL a line (`#` starts a comment), as
    /// snapshot finders print them.
    #[arg(long = "mirrors", value_name = "FILE")]
    pub mirrors: Option<PathBuf>,

    /// URL: at most RATE bytes a second, in all.
    ///
    /// For a URL: download at most RATE bytes a second, all connections of all sources
    /// together (curl's spelling: 500K, 50M, 1.5M, 0.5G, 1024-based; a fraction rounds down to
    /// a byte).
    #[arg(long = "limit-rate", value_name = "RATE")]
    pub limit_rate: Option<String>,

    /// URL: retry a connection silent this long (30).
    ///
    /// For a URL: a connection that brings no byte for SECONDS is retried from the byte where it
    /// stopped (default 30).
    #[arg(long = "stall-timeout", value_name = "SECONDS")]
    pub stall_timeout: Option<u64>,

    /// URL: retry a connection slower than RATE (1K).
    ///
    /// For a URL: a connection that brings less than RATE bytes a second over --stall-timeout of
    /// waiting is retried as stalled. RATE as curl's --limit-rate takes it: 500, 64K, 1.5M, 1G
    /// (1024-based); default 1K, 0 for no floor.
    #[arg(long = "min-rate", value_name = "RATE")]
    pub min_rate: Option<String>,

    /// URL: failures in a row before giving up (64).
    ///
    /// For a URL: failures in a row, without a byte between them, before the run gives up (default
    /// 64: about an hour of waits, at once, then 1, 2, 4 ... 60 s). Any byte received starts the
    /// count again.
    #[arg(long = "retries", value_name = "N")]
    pub retries: Option<u32>,

    /// https: also trust the CA certificates in FILE.
    ///
    /// For an https URL: trust the CA certificates (PEM) in FILE besides the system's
    /// ($SSL_CERT_FILE, $SSL_CERT_DIR or the distribution's bundle). There is no option to skip the
    /// check.
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// URL: keep a copy of the download in FILE.
    ///
    /// For a URL: the copy is written as FILE.incomplete and renamed to FILE once the run ended
    /// well (and --checksum, if given, matched); a failed run leaves FILE.incomplete. Made anew,
    /// never through a link or a file already at either name; a member of the archive named like it
    /// fails the run.
    #[arg(long = "keep-archive", value_name = "FILE")]
    pub keep_archive: Option<PathBuf>,

    /// URL: the SHA-256 the download must have.
    ///
    /// For a URL: `sha256:HEX`, hashed over the downloaded bytes in order. Extraction goes on while
    /// they arrive, so a mismatch is found at the end: the tree stands extracted from the bytes as
    /// served, the run exits 2 (`sha256 mismatch`) and a --keep-archive copy is removed.
    #[arg(long = "checksum", value_name = "sha256:HEX")]
    pub checksum: Option<String>,

    /// s3://: send no credentials (a public bucket).
    ///
    /// For an s3:// archive: ask for it without credentials, as aws-cli's --no-sign-request; no
    /// credential is looked for or sent.
    #[arg(long = "no-sign-request")]
    pub no_sign_request: bool,

    /// Read as if PAX keywords matching delete=PATTERN were not there.
    ///
    /// GNU tar's --pax-option when reading: `delete=PATTERN` reads the archive as if the keywords
    /// of its members' PAX headers matching PATTERN (fnmatch: `delete=mtime`, `delete=SCHILY.*`)
    /// were not there (a global header's are kept; a pattern matching a protected GNU.sparse.*,
    /// GNU.dumpdir or GNU.volume.* keyword is refused, as GNU tar). The keywords for making
    /// archives (exthdr.name, globexthdr.name, exthdr.mtime, globexthdr.mtime) are accepted. An
    /// override (KEYWORD=VALUE) of a keyword that changes what is extracted (path, linkpath, size,
    /// mtime, atime, ctime, uid, gid, uname, gname, SCHILY.*) is refused in one line; of another,
    /// accepted (it changes nothing). Comma-separated, or given again.
    #[arg(long = "pax-option", value_name = "LIST", action = ArgAction::Append)]
    pub pax_option: Vec<String>,
}
