//! fastuntar: extract .tar and .tar.zst archives as fast as the disk allows, and safely.
//!
//! The library's face is [`Restore`]: an archive (a file, any reader, or a URL) restored
//! into a directory in-process, with typed options, an [`Observer`] told each member started,
//! each file landed (with its open file, if wanted), each member skipped and why, the
//! warnings and the progress, a [`Cancel`] token, and one [`Error`] type. A run prints
//! nothing, leaves the umask and the resource limits as they are, and never exits the
//! process; two runs at once in one process each give their own tree.
//!
//! ```no_run
//! use std::sync::Arc;
//! use fastuntar::{Landed, Observer, Restore, Source};
//!
//! struct Files;
//! impl Observer for Files {
//!     fn landed(&self, file: Landed<'_>) {
//!         println!("{} ({} bytes)", file.path.display(), file.size);
//!     }
//! }
//!
//! let summary = Restore::new(Source::Path("snapshot.tar.zst".into()), "/ledger")
//!     .snapshot(true)
//!     .observer(Arc::new(Files))
//!     .run()?;
//! assert_eq!(summary.skipped, 0);
//! # Ok::<(), fastuntar::Error>(())
//! ```
//!
//! Inside (docs/DESIGN.md): the typed options (`options`: `Restore` fills them, the command
//! line fills them from its flags) make one plan per stage; a `command` (extract, list, to
//! stdout) reads its input through `decode` into `archive` members, which `selection` chooses
//! and `policy` makes safe, as `plan` ops for the `write` backend, with file data in `pool`
//! buffers that return to the pool once written; `report` says what happened, to a terminal
//! (the command line, src/main.rs) or to the observer.

mod api;
mod aside;
pub use api::{
    Cancel, DirectIo, Error, Landed, MemberKind, Observer, Overwrite, Progress, Restore, Resume,
    Route, SkipReason, Skipped, Source, Started, Summary,
};

mod archive;
mod budget;
mod cli;
mod command;
mod decode;
mod exit_codes;
mod lend;
mod mark;
mod metadata;
mod options;
mod plan;
mod policy;
mod pool;
mod reading;
mod report;
mod resources;
mod resume;
mod selection;
mod write;

/// What the command line (src/main.rs), the integration tests and the fuzz targets reach of
/// the rooms below the API. Not part of the API: no stability, no documentation.
#[doc(hidden)]
pub mod __private {
    pub mod archive {
        pub use crate::archive::{Kind, NotTar, Reader};
    }
    pub mod cli {
        pub use crate::cli::{Args, UsageError, parse, traditional, with_env_options};
        pub mod reference {
            pub use crate::cli::reference::{REGENERATE, WRITE_VAR, man_page, markdown, spellings};
        }
        pub mod resolve {
            pub use crate::cli::resolve::{Edge, options};
        }
    }
    pub mod command {
        pub use crate::command::{Command, Plans};
        pub mod extract {
            pub use crate::command::extract::run;
        }
        pub mod list {
            pub use crate::command::list::run;
        }
        pub mod to_stdout {
            pub use crate::command::to_stdout::run;
        }
    }
    pub mod decode {
        pub mod url {
            pub use crate::decode::url::{Identity, Plan, Start, Validator, open};
        }
    }
    pub mod options {
        pub use crate::options::{Machine, Options};
    }
    pub mod exit_codes {
        pub use crate::exit_codes::ExitCode;
    }
    pub mod report {
        pub use crate::report::voice::causes;
        pub use crate::report::{
            NOT_RECOVERABLE, PREVIOUS_ERRORS, Reporter, chain, closing, program_name, said,
            set_program, strerror,
        };
        pub mod locale {
            pub use crate::report::locale::init_locale;
        }
        pub mod plan {
            pub use crate::report::plan::ReportPlan;
        }
        pub mod progress {
            pub use crate::report::progress::ON_SCREEN;
        }
        pub mod summary {
            pub use crate::report::summary::say;
        }
    }
    pub mod resources {
        pub use crate::resources::{fit_address_space, raise_nofile};
    }
    pub mod resume {
        pub mod state {
            pub use crate::resume::state::{State, seal};
        }
    }
    pub mod selection {
        pub mod transform {
            pub use crate::selection::transform::{NameKind, Transforms};
        }
    }
    pub mod write {
        pub mod plan {
            pub use crate::write::plan::DestFs;
        }
    }
}
