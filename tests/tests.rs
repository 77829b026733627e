//! Every integration suite, in one test crate (as ripgrep's tests/tests.rs): one link, one
//! binary, one `cargo test` pass. `util` is the shared kit (the matrix of engine rows and its
//! runner, a command runner, tree snapshots, archive builders, the HTTP test server);
//! `suite::NAME` is one suite (run one with `cargo test --release --test tests suite::NAME::`).
//! How a suite joins, and which rows of the matrix each runs: docs/TESTING.md.

mod util;

mod suite {
    mod api;
    mod checkpoint;
    mod cli;
    mod corrupt;
    mod differential;
    mod dropin;
    mod faults;
    mod help;
    mod hostile;
    mod incremental;
    mod multiframe;
    mod ordering;
    mod package;
    mod races;
    mod regressions;
    mod resume;
    mod robustness;
    mod s3;
    mod sample;
    mod selection;
    mod snapshot_mode;
    mod spread;
    mod stock;
    mod transform;
    mod url;
    mod xattrs;
}
