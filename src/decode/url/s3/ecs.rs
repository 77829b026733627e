//! Container credentials (ECS task roles, EKS Pod Identity): a GET of
//! AWS_CONTAINER_CREDENTIALS_RELATIVE_URI on `http://169.254.170.2`, or of
//! AWS_CONTAINER_CREDENTIALS_FULL_URI, with the `Authorization` token of
//! AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at each fetch: it rotates) or
//! AWS_CONTAINER_AUTHORIZATION_TOKEN. A full URI over http must be the machine's own
//! (loopback) or the container agent's (169.254.170.2, 169.254.170.23, fd00:ec2::23), as the
//! SDKs require, so the token and the credentials never cross a network in clear.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use url::{Host, Url};

use super::credentials::{Credentials, Provider, from_json};
use super::{Env, var};
use crate::decode::url::failed::Failed;
use crate::decode::url::http::{Call, Client};
use crate::decode::url::retry::Failure;

/// The ECS agent's address for a relative URI.
pub const ECS_HOST: &str = "http://169.254.170.2";

const ANSWER_MAX: u64 = 64 << 10;

/// Where the token comes from.
pub enum Token {
    None,
    File(PathBuf),
    Value(String),
}

pub struct Container {
    pub url: Url,
    pub token: Token,
    pub http: Arc<Client>,
}

/// The container endpoint the environment names, None when it names none, or why it cannot
/// be used (pure).
pub fn configured(env: Env) -> Option<Result<(Url, Token), String>> {
    let (name, text) = match var(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        Some(rel) => ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", format!("{ECS_HOST}{rel}")),
        None => {
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", var(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI")?)
        }
    };
    let token = match (
        var(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
        var(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN"),
    ) {
        (Some(f), _) => Token::File(PathBuf::from(f)),
        (None, Some(t)) => Token::Value(t),
        (None, None) => Token::None,
    };
    Some(match Url::parse(&text) {
        Ok(url) if allowed(&url) => Ok((url, token)),
        Ok(url) => Err(format!(
            "{name}={url}: over http only the loopback address or the container agent's \
             (169.254.170.2, 169.254.170.23, fd00:ec2::23) may be used"
        )),
        Err(e) => Err(format!("{name}={text}: not a URL ({e})")),
    })
}

/// https anywhere; http to loopback or the agent's addresses.
fn allowed(url: &Url) -> bool {
    let ip = match url.host() {
        Some(Host::Ipv4(a)) => IpAddr::V4(a),
        Some(Host::Ipv6(a)) => IpAddr::V6(a),
        Some(Host::Domain(d)) => {
            return url.scheme() == "https" || d.eq_ignore_ascii_case("localhost");
        }
        None => return false,
    };
    match url.scheme() {
        "https" => true,
        "http" => {
            let agent: [IpAddr; 3] = [
                "169.254.170.2".parse().expect("an address"),
                "169.254.170.23".parse().expect("an address"),
                "fd00:ec2::23".parse().expect("an address"),
            ];
            ip.is_loopback() || agent.contains(&ip)
        }
        _ => false,
    }
}

impl Provider for Container {
    fn name(&self) -> String {
        format!("container credentials ({})", self.url)
    }

    fn fetch(&self) -> Result<Credentials, Failed> {
        let token = match &self.token {
            Token::None => None,
            Token::Value(t) => Some(t.clone()),
            Token::File(p) => Some(
                std::fs::read_to_string(p)
                    .map_err(|e| {
                        Failed::new(
                            Failure::Protocol,
                            format!("{}: cannot read ({e})", p.display()),
                        )
                    })?
                    .trim()
                    .to_string(),
            ),
        };
        if token.as_ref().is_some_and(|t| t.contains(['\r', '\n'])) {
            return Err(Failed::new(
                Failure::Protocol,
                "the authorization token holds a line break",
            ));
        }
        let headers: Vec<(&str, &str)> =
            token.as_deref().map(|t| ("authorization", t)).into_iter().collect();
        let reply = self.http.call(
            &Call { method: "GET", url: &self.url, headers: &headers, body: b"" },
            ANSWER_MAX,
        )?;
        if reply.status != 200 {
            return Err(Failed::new(
                Failure::Status(reply.status),
                format!("{} {}", self.url, reply.status),
            ));
        }
        from_json(&reply.body, "Token")
            .map_err(|f| Failed { text: format!("{}: {}", self.url, f.text), ..f })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn which_endpoint_and_token() {
        let got = |vars: &[(&str, &str)]| {
            configured(&env(vars)).map(|r| r.map(|(u, t)| (u.to_string(), t)))
        };
        assert!(got(&[]).is_none());
        let (u, t) =
            got(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds/abc")]).unwrap().unwrap();
        assert_eq!(u, "http://169.254.170.2/v2/creds/abc");
        assert!(matches!(t, Token::None));
        let full = [
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:51679/creds"),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "tok"),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/var/run/tok"),
        ];
        let (u, t) = got(&full).unwrap().unwrap();
        assert_eq!(u, "http://127.0.0.1:51679/creds");
        assert!(matches!(t, Token::File(p) if p == std::path::Path::new("/var/run/tok")));
        assert!(matches!(got(&full[..2]).unwrap().unwrap().1, Token::Value(v) if v == "tok"));
        for ok in [
            "http://169.254.170.23/v1/credentials",
            "http://[fd00:ec2::23]/x",
            "https://creds.example/x",
            "http://localhost:1/x",
        ] {
            assert!(got(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", ok)]).unwrap().is_ok(), "{ok}");
        }
        for bad in ["http://10.0.0.1/creds", "http://creds.example/x", "file:///etc/passwd"] {
            assert!(got(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", bad)]).unwrap().is_err(), "{bad}");
        }
    }
}
