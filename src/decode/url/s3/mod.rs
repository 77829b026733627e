//! An S3 object (`s3://BUCKET/KEY`) as a download source: the https address of the object on
//! its endpoint, and a signer that signs every request to that endpoint with SigV4 and the
//! credentials AWS's own tools would find (docs/DESIGN.md "Reading from S3").
//!
//! - `address.rs` (pure): the operand, the region, the endpoint and the addressing style.
//! - `config.rs`: the environment and the shared config and credentials files (a profile).
//! - `credentials.rs`: credentials (never printed), the provider interface, the cache that
//!   refreshes them before they expire.
//! - `chain.rs`: which provider, in AWS's order: the environment, the profile (static keys,
//!   `credential_process`, web identity), web identity from the environment, the container
//!   agent (ECS, EKS Pod Identity), EC2 instance metadata (IMDSv2).
//! - One file per provider that fetches: `process.rs`, `web_identity.rs` (STS), `ecs.rs`,
//!   `imds.rs`.
//! - `sign.rs`: SigV4 through AWS's `aws-sigv4` crate, synchronous, one signature a request.

pub mod address;
pub mod chain;
pub mod config;
pub mod credentials;
pub mod ecs;
pub mod imds;
pub mod process;
pub mod sign;
pub mod web_identity;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};

use super::http::{Client, Settings};
use super::source::Source;

/// How the environment is read: a variable's value, None when unset (tests pass a table).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Reads `name` from `env`, an empty value counting as unset (as the AWS SDKs do).
pub fn var(env: Env, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

/// What an S3 source takes from the command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--no-sign-request`: no credentials looked for, no signature.
    pub no_sign: bool,
    /// `--stall-timeout`: the bound on STS's answer too.
    pub stall: Duration,
    /// `--cacert`: trusted for STS and the endpoint alike.
    pub cacert: Option<PathBuf>,
}

/// Whether `operand` is an `s3://` address (the scheme in any case).
pub fn is_s3(operand: &str) -> bool {
    operand.len() >= 5 && operand[..5].eq_ignore_ascii_case("s3://")
}

/// The source `s3://BUCKET/KEY` names: its address on the endpoint (AWS_ENDPOINT_URL_S3,
/// AWS_ENDPOINT_URL or the profile's `endpoint_url`, else AWS in the region), and unless
/// `--no-sign-request` a signer with the first credentials the chain finds. Any failure is
/// one line naming the operand.
pub fn source(operand: &str, opts: &Options, env: Env) -> Result<Source> {
    let given = operand.to_string();
    let fail = |e: String| anyhow!("{given}: {e}");
    let object = address::parse(operand).map_err(fail)?;
    let profile = config::Profile::load(env).map_err(fail)?;
    let region = config::region(env, profile.as_ref());
    let endpoint = config::endpoint(env, profile.as_ref(), "S3").map_err(fail)?;
    let url = address::object_url(&object, &region.name, endpoint.as_ref()).map_err(fail)?;
    if opts.no_sign {
        return Ok(Source { given, url, sign: None });
    }
    let http = Clients::new(opts).map_err(|e| fail(format!("{e:#}")))?;
    let ctx = chain::Context { env, profile: profile.as_ref(), region: &region, http: &http };
    let found = chain::find(&ctx).map_err(fail)?;
    let last_resort = found.last_resort.then(|| (found.tried.clone(), found.provider.name()));
    let cache = credentials::Cache::new(found.provider).map_err(|e| match last_resort {
        // Instance metadata is asked last, where it may not be: "none found", not its error.
        Some((mut tried, _)) => {
            tried.push(e.text);
            fail(chain::none_found(&tried))
        }
        None => fail(e.text),
    })?;
    let signer = sign::Signer::new(&url, region.name.clone(), cache);
    Ok(Source { given, url, sign: Some(Arc::new(signer)) })
}

/// What an AWS error answer says: `(Code: Message)` from its XML (the query protocol's
/// `ErrorResponse/Error` and S3's `Error` alike), printable, at most 300 characters; empty
/// when there is none.
pub fn error_text(xml: &str) -> String {
    let Ok(doc) = roxmltree::Document::parse(xml) else { return String::new() };
    let get = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::trim)
            .unwrap_or("")
    };
    let (code, message) = (get("Code"), get("Message"));
    if code.is_empty() && message.is_empty() {
        return String::new();
    }
    let mut t = crate::report::printable(format!("{code}: {message}").as_bytes());
    if t.len() > 300 {
        let mut end = 300;
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        t.truncate(end);
    }
    format!("({t})")
}

/// The HTTP clients the credential providers use: `sts` as any request to AWS (the
/// environment's proxy, `--cacert`), `local` for the instance metadata service and the
/// container agent (no proxy, and a short bound: they answer at once or not at all).
pub struct Clients {
    pub sts: Arc<Client>,
    pub local: Arc<Client>,
}

/// How long the instance metadata service or the container agent may take to answer: the
/// AWS SDKs give IMDS 1 s to connect and 1 s to read; off EC2 the address 169.254.169.254
/// answers nothing, and the chain's last step should not hold a run for long.
pub const LOCAL_STALL: Duration = Duration::from_secs(2);

impl Clients {
    pub fn new(opts: &Options) -> Result<Clients> {
        let settings =
            |stall, direct| Settings { stall, cacert: opts.cacert.clone(), connections: 1, direct };
        Ok(Clients {
            sts: Arc::new(Client::new(settings(opts.stall, false))?),
            local: Arc::new(Client::new(settings(LOCAL_STALL, true))?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_answers() {
        assert_eq!(error_text("not xml"), "");
        assert_eq!(error_text("<html><body>x</body></html>"), "");
        let s3 = "<Error><Code>AccessDenied</Code><Message>Access\nDenied</Message></Error>";
        assert_eq!(error_text(s3), "(AccessDenied: Access\\nDenied)");
        let long = format!("<Error><Code>X</Code><Message>{}</Message></Error>", "é".repeat(400));
        assert!(error_text(&long).len() <= 302);
        assert!(is_s3("S3://b/k") && !is_s3("s3:/b/k") && !is_s3("https://b"));
    }
}
