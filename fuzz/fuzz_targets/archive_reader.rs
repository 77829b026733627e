//! Any bytes → `fastuntar::__private::archive::Reader`: members and their data are read to the end or to
//! the first error. The reader must terminate on its own, never panic, and keep its contract
//! (see `common::drain`). The same input read with a 509-byte buffer must give the same members,
//! data and error as with the 64 KiB buffer.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let big = common::drain(data, 64 << 10);
    let small = common::drain(data, 509);
    assert_eq!(big, small, "the chunk size changed what was read");
});
