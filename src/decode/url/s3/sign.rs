//! SigV4 for S3 GETs, through AWS's `aws-sigv4` crate (synchronous: no runtime). Every request
//! is signed as it is sent (a piece, a retry, a redirect hop on the endpoint), with the
//! credentials of that moment, so a restore that outlives its temporary credentials goes on
//! with the refreshed ones. The signed headers: `host`, `range`, `if-range`, `x-amz-date`,
//! `x-amz-content-sha256` (the empty body's hash) and, for temporary credentials,
//! `x-amz-security-token`. S3's rules: the path signed as sent (encoded once, not normalized).

use std::time::SystemTime;

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use url::{Origin, Url};

use super::credentials::{Cache, Credentials};
use crate::decode::url::failed::Failed;
use crate::decode::url::retry::Failure;
use crate::decode::url::source::Sign;

/// The signer of one S3 endpoint.
pub struct Signer {
    origin: Origin,
    region: String,
    credentials: Cache,
}

impl Signer {
    pub fn new(endpoint: &Url, region: String, credentials: Cache) -> Signer {
        Signer { origin: endpoint.origin(), region, credentials }
    }
}

impl Sign for Signer {
    fn covers(&self, url: &Url) -> bool {
        url.origin() == self.origin
    }

    fn sign(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
    ) -> Result<Vec<(&'static str, String)>, Failed> {
        let creds = self.credentials.current()?;
        signed_headers(&creds, &self.region, url, headers, SystemTime::now())
            .map_err(|e| Failed::new(Failure::Protocol, format!("cannot sign the request: {e}")))
    }
}

/// The headers that sign a GET of `url` carrying `headers`, at `now` (pure). The error is
/// aws-sigv4's, which never holds the credentials.
pub fn signed_headers(
    creds: &Credentials,
    region: &str,
    url: &Url,
    headers: &[(&str, &str)],
    now: SystemTime,
) -> Result<Vec<(&'static str, String)>, String> {
    let identity: Identity = aws_credential_types::Credentials::new(
        creds.key_id.expose(),
        creds.secret.expose(),
        creds.token.as_ref().map(|t| t.expose().to_string()),
        creds.expiry,
        "fastuntar",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let request = SignableRequest::new(
        "GET",
        url.as_str(),
        headers.iter().copied(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(request, &params).map_err(|e| e.to_string())?.into_parts();
    let (out, _) = instructions.into_parts();
    Ok(out.into_iter().map(|h| (h.name(), h.value().to_string())).collect())
}

#[cfg(test)]
mod tests {
    use super::super::credentials::Secret;
    use super::*;
    use std::time::Duration;

    fn example() -> Credentials {
        Credentials {
            key_id: Secret::new("AKIAIOSFODNN7EXAMPLE"),
            secret: Secret::new("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            token: None,
            expiry: None,
        }
    }

    /// AWS's worked example, "Signature Calculations for the Authorization Header: Transferring
    /// Payload in a Single Chunk (AWS Signature Version 4)", GET Object: the signature it
    /// publishes.
    #[test]
    fn aws_documented_get_object() {
        let url = Url::parse("https://examplebucket.s3.amazonaws.com/test.txt").unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600); // 2013-05-24
        let h =
            signed_headers(&example(), "us-east-1", &url, &[("range", "bytes=0-9")], at).unwrap();
        let get = |k: &str| h.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-amz-date"), Some("20130524T000000Z"));
        assert_eq!(
            get("x-amz-content-sha256"),
            Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        assert_eq!(
            get("authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
                 SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
                 Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
            )
        );
        assert_eq!(get("x-amz-security-token"), None);
    }

    /// A session token is sent and signed; a port and an encoded key are signed as sent.
    #[test]
    fn session_tokens_ports_and_encoded_keys() {
        let mut c = example();
        c.token = Some(Secret::new("TOKEN"));
        let url = Url::parse("http://127.0.0.1:9000/b/a%20b%2Bc").unwrap();
        let h = signed_headers(&c, "eu-west-1", &url, &[], SystemTime::now()).unwrap();
        let get = |k: &str| h.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-amz-security-token"), Some("TOKEN"));
        let auth = get("authorization").unwrap();
        assert!(auth.contains("/eu-west-1/s3/aws4_request"), "{auth}");
        assert!(
            auth.contains(
                "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
            ),
            "{auth}"
        );
        assert!(!auth.contains(c.secret.expose()));
    }

    #[test]
    fn only_the_endpoint_origin_is_covered() {
        struct Fixed;
        impl super::super::credentials::Provider for Fixed {
            fn name(&self) -> String {
                "fixed".into()
            }
            fn fetch(&self) -> Result<Credentials, Failed> {
                Ok(example())
            }
        }
        let ep = Url::parse("https://b.s3.eu-west-1.amazonaws.com/k").unwrap();
        let s = Signer::new(&ep, "eu-west-1".into(), Cache::new(Box::new(Fixed)).unwrap());
        assert!(s.covers(&Url::parse("https://b.s3.eu-west-1.amazonaws.com/other?x=1").unwrap()));
        for other in [
            "http://b.s3.eu-west-1.amazonaws.com/k",
            "https://b.s3.eu-west-1.amazonaws.com:8443/k",
            "https://cdn.example/k",
            "https://evil.b.s3.eu-west-1.amazonaws.com/k",
        ] {
            assert!(!s.covers(&Url::parse(other).unwrap()), "{other}");
        }
    }
}
