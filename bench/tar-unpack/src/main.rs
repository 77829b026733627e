//! `tar-unpack ARCHIVE|- DEST`: extracts a tar or a zstd-compressed tar with the `tar` crate's
//! `Archive::unpack` behind zstd's streaming decoder, as a program built on the two crates
//! does it (Agave's own unpacker is one such, with its checks on top). A contestant of
//! scripts/bench-url.sh's chart; not part of fastuntar.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::process::ExitCode;

/// zstd's frame magic, little-endian 0xFD2FB528.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let [archive, dest] = args.as_slice() else {
        eprintln!("usage: tar-unpack ARCHIVE|- DEST");
        return ExitCode::from(2);
    };
    match unpack(archive, dest) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tar-unpack: {}: {e}", archive.to_string_lossy());
            ExitCode::from(2)
        }
    }
}

fn unpack(archive: &std::ffi::OsStr, dest: &std::ffi::OsStr) -> io::Result<()> {
    let input: Box<dyn Read> = if archive == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(archive)?)
    };
    let mut input = BufReader::with_capacity(1 << 20, input);
    let decoded: Box<dyn Read> = if input.fill_buf()?.starts_with(&ZSTD_MAGIC) {
        Box::new(zstd::Decoder::with_buffer(input)?)
    } else {
        Box::new(input)
    };
    tar::Archive::new(decoded).unpack(dest)
}
