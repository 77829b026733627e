//! Web identity (EKS's IAM roles for service accounts, GitHub's OIDC): the token in
//! AWS_WEB_IDENTITY_TOKEN_FILE (or a profile's `web_identity_token_file`) is exchanged for
//! temporary credentials of AWS_ROLE_ARN (`role_arn`) by STS's AssumeRoleWithWebIdentity, an
//! unsigned POST. The file is read again at each refresh: EKS rotates the token in it. STS is
//! `https://sts.REGION.amazonaws.com` (the SDKs' regional default), or AWS_ENDPOINT_URL_STS /
//! AWS_ENDPOINT_URL. Its XML answer is read with `roxmltree`.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use url::Url;

use super::credentials::{Credentials, Provider, Secret, parse_time};
use crate::decode::url::failed::Failed;
use crate::decode::url::http::{Call, Client};
use crate::decode::url::retry::Failure;

/// The largest token file read (a JWT is 1-2 KiB).
const TOKEN_MAX: u64 = 64 << 10;

/// The largest STS answer read.
const ANSWER_MAX: u64 = 64 << 10;

pub struct WebIdentity {
    pub token_file: PathBuf,
    pub role_arn: String,
    pub session_name: String,
    pub sts: Url,
    pub http: Arc<Client>,
    /// Where it was configured, for messages.
    pub from: String,
}

impl Provider for WebIdentity {
    fn name(&self) -> String {
        format!("web identity ({})", self.from)
    }

    fn fetch(&self) -> Result<Credentials, Failed> {
        let fail = |why: String| Failed::new(Failure::Protocol, why);
        let token = read_token(&self.token_file).map_err(fail)?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("Action", "AssumeRoleWithWebIdentity")
            .append_pair("Version", "2011-06-15")
            .append_pair("RoleArn", &self.role_arn)
            .append_pair("RoleSessionName", &self.session_name)
            .append_pair("WebIdentityToken", &token)
            .finish();
        let call = Call {
            method: "POST",
            url: &self.sts,
            headers: &[("content-type", "application/x-www-form-urlencoded; charset=utf-8")],
            body: body.as_bytes(),
        };
        let reply = self
            .http
            .call(&call, ANSWER_MAX)
            .map_err(|f| Failed { text: format!("STS {}: {}", self.sts, f.text), ..f })?;
        let text = String::from_utf8_lossy(&reply.body);
        if reply.status != 200 {
            let why = super::error_text(&text);
            let failure = Failure::Status(reply.status);
            return Err(Failed::new(failure, format!("STS {}: {} {why}", self.sts, reply.status)));
        }
        parse(&text).map_err(|e| fail(format!("STS {}: {e}", self.sts)))
    }
}

fn read_token(path: &std::path::Path) -> Result<String, String> {
    let f = std::fs::File::open(path)
        .map_err(|e| format!("{}: cannot read the token ({e})", path.display()))?;
    let mut token = String::new();
    f.take(TOKEN_MAX)
        .read_to_string(&mut token)
        .map_err(|e| format!("{}: cannot read the token ({e})", path.display()))?;
    let token = token.trim();
    if token.is_empty() {
        return Err(format!("{}: the token file is empty", path.display()));
    }
    Ok(token.to_string())
}

/// The credentials in AssumeRoleWithWebIdentity's answer (pure).
pub fn parse(xml: &str) -> Result<Credentials, String> {
    let doc =
        roxmltree::Document::parse(xml).map_err(|e| format!("the answer is not XML ({e})"))?;
    let creds = doc
        .descendants()
        .find(|n| n.has_tag_name("Credentials"))
        .ok_or("no Credentials in the answer")?;
    let field = |name: &str| {
        creds
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(format!("no {name} in the answer"))
    };
    let expiration = field("Expiration")?;
    Ok(Credentials {
        key_id: Secret::new(field("AccessKeyId")?),
        secret: Secret::new(field("SecretAccessKey")?),
        token: Some(Secret::new(field("SessionToken")?)),
        expiry: Some(
            parse_time(expiration).ok_or(format!("Expiration {expiration:?} is not a time"))?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_answers() {
        let ok = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
          <AssumeRoleWithWebIdentityResult>
            <Credentials>
              <SessionToken>TOKEN</SessionToken>
              <SecretAccessKey>SECRET</SecretAccessKey>
              <Expiration>2026-11-28T10:00:00Z</Expiration>
              <AccessKeyId>ASIAX</AccessKeyId>
            </Credentials>
          </AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"#;
        let c = parse(ok).unwrap();
        assert_eq!(c.key_id.expose(), "ASIAX");
        assert_eq!(c.token.unwrap().expose(), "TOKEN");
        assert!(c.expiry.is_some());
        assert!(parse("<x/>").unwrap_err().contains("no Credentials"));
        assert!(parse(&ok.replace("<SessionToken>TOKEN</SessionToken>", "")).is_err());
        let err = r#"<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>
            <Message>Couldn't retrieve verification key</Message></Error></ErrorResponse>"#;
        assert_eq!(
            super::super::error_text(err),
            "(InvalidIdentityToken: Couldn't retrieve verification key)"
        );
    }
}
