//! Any bytes → the body of a resume state (`fastuntar::__private::resume::state::State::decode_body`), as a
//! forger who re-signs the file reaches it: never a panic, nothing allocated beyond what the
//! bytes hold (STATE_MAX bounds the file), and whatever decodes encodes back to itself. The
//! sealed file (head, body, checksum) must decode the same.
#![no_main]

use fastuntar::__private::resume::state::{State, seal};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = State::decode_body(data);
    assert_eq!(State::decode(&seal(data)), body, "the sealed file decoded otherwise");
    if let Ok(s) = body {
        assert_eq!(State::decode(&s.encode()), Ok(s));
    }
});
