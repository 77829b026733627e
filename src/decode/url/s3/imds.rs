//! EC2 instance metadata, IMDSv2: a session token (PUT /latest/api/token with its lifetime
//! asked in X-aws-ec2-metadata-token-ttl-seconds), then the instance role's name (GET
//! /latest/meta-data/iam/security-credentials/) and its credentials (GET .../ROLE), each with
//! the token in X-aws-ec2-metadata-token. The service is at 169.254.169.254 (`[fd00:ec2::254]`
//! with AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6), or AWS_EC2_METADATA_SERVICE_ENDPOINT
//! (or the profile's `ec2_metadata_service_endpoint`); AWS_EC2_METADATA_DISABLED=true turns it
//! off. IMDSv1 (no token) is not used.

use std::sync::Arc;

use url::Url;

use super::config::Profile;
use super::credentials::{Credentials, Provider, from_json};
use super::{Env, var};
use crate::decode::url::failed::Failed;
use crate::decode::url::http::{Call, Client, Reply};
use crate::decode::url::retry::Failure;

const ANSWER_MAX: u64 = 64 << 10;

/// The session token's lifetime asked for, in seconds (the SDKs' 6 hours).
const TOKEN_TTL: &str = "21600";

pub struct Imds {
    pub endpoint: Url,
    pub http: Arc<Client>,
}

/// The service's address, None when AWS_EC2_METADATA_DISABLED=true, or why it cannot be
/// used (pure).
pub fn configured(env: Env, profile: Option<&Profile>) -> Option<Result<Url, String>> {
    if var(env, "AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return None;
    }
    let given = var(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT").or_else(|| {
        profile.and_then(|p| p.get("ec2_metadata_service_endpoint")).map(str::to_string)
    });
    let mode = var(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE").or_else(|| {
        profile.and_then(|p| p.get("ec2_metadata_service_endpoint_mode")).map(str::to_string)
    });
    let text = match (given, mode) {
        (Some(e), _) => e,
        (None, Some(m)) if m.trim().eq_ignore_ascii_case("ipv6") => {
            "http://[fd00:ec2::254]".to_string()
        }
        (None, _) => "http://169.254.169.254".to_string(),
    };
    Some(match Url::parse(&text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(u),
        _ => Err(format!("AWS_EC2_METADATA_SERVICE_ENDPOINT={text}: not an http:// address")),
    })
}

impl Imds {
    fn at(&self, path: &str) -> Result<Url, Failed> {
        self.endpoint
            .join(path)
            .map_err(|e| Failed::new(Failure::Protocol, format!("{}: {e}", self.endpoint)))
    }

    fn ask(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Result<Reply, Failed> {
        let url = self.at(path)?;
        let reply = self.http.call(&Call { method, url: &url, headers, body: b"" }, ANSWER_MAX)?;
        if reply.status != 200 {
            let why = match reply.status {
                401 => " (the session token was refused)",
                403 => " (instance metadata is turned off, or IMDSv2 is out of the hop limit)",
                404 => " (no instance role)",
                _ => "",
            };
            return Err(Failed::new(
                Failure::Status(reply.status),
                format!("{method} {url}: {}{why}", reply.status),
            ));
        }
        Ok(reply)
    }
}

impl Provider for Imds {
    fn name(&self) -> String {
        format!("EC2 instance metadata ({})", self.endpoint)
    }

    fn fetch(&self) -> Result<Credentials, Failed> {
        let token = self.ask(
            "PUT",
            "/latest/api/token",
            &[("x-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL)],
        )?;
        let token = String::from_utf8_lossy(&token.body).trim().to_string();
        let auth = [("x-aws-ec2-metadata-token", token.as_str())];
        let base = "/latest/meta-data/iam/security-credentials/";
        let roles = self.ask("GET", base, &auth)?;
        let roles = String::from_utf8_lossy(&roles.body);
        let role = roles.lines().map(str::trim).find(|l| !l.is_empty());
        let Some(role) = role.filter(|r| !r.contains(['/', '?', '#', '%'])) else {
            return Err(Failed::new(Failure::Protocol, "no instance role named"));
        };
        let reply = self.ask("GET", &format!("{base}{role}"), &auth)?;
        let v: serde_json::Value = serde_json::from_slice(&reply.body)
            .map_err(|e| Failed::new(Failure::Protocol, format!("role {role}: not JSON ({e})")))?;
        if let Some(code) = v.get("Code").and_then(|c| c.as_str()).filter(|c| *c != "Success") {
            let code = crate::report::printable(code.as_bytes());
            return Err(Failed::new(Failure::Protocol, format!("role {role}: Code {code}")));
        }
        from_json(&reply.body, "Token")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn where_the_service_is() {
        let got = |vars: &[(&str, &str)], p: Option<&Profile>| {
            configured(&env(vars), p).map(|r| r.map(|u| u.to_string()))
        };
        assert_eq!(got(&[], None), Some(Ok("http://169.254.169.254/".into())));
        assert_eq!(got(&[("AWS_EC2_METADATA_DISABLED", "TRUE")], None), None);
        assert_eq!(
            got(&[("AWS_EC2_METADATA_DISABLED", "false")], None),
            Some(Ok("http://169.254.169.254/".into()))
        );
        assert_eq!(
            got(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6")], None),
            Some(Ok("http://[fd00:ec2::254]/".into()))
        );
        let p = Profile::of("default", &[("ec2_metadata_service_endpoint", "http://127.0.0.1:8/")]);
        assert_eq!(got(&[], Some(&p)), Some(Ok("http://127.0.0.1:8/".into())));
        let e = [("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")];
        assert_eq!(got(&e, Some(&p)), Some(Ok("http://127.0.0.1:9/".into())));
        assert!(
            got(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", "169.254.169.254")], None)
                .unwrap()
                .is_err()
        );
    }
}
