//! A request that failed: the class of its failure (`retry::Failure`, which decides whether it
//! is tried again) and the words that say what happened. What `http.rs` returns for a request
//! that got no answer to read, and what a signer (`source::Sign`) or a credential provider
//! (`s3/`) returns when it cannot do its part.

use super::retry::Failure;

/// A request that got no answer to read, or one not to follow.
#[derive(Debug)]
pub struct Failed {
    pub failure: Failure,
    pub text: String,
}

impl Failed {
    pub fn new(failure: Failure, text: impl Into<String>) -> Failed {
        Failed { failure, text: text.into() }
    }
}
