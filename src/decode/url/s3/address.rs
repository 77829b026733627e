//! Where an S3 object is asked for (pure): `s3://BUCKET/KEY` split as aws-cli splits it (the
//! key taken literally: `%20` in it is three characters, not a space), and the https address
//! of the object.
//!
//! **Addressing.** With an endpoint given (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the
//! profile's `endpoint_url`: MinIO, Ceph, R2, GCS's interoperability endpoint, a local test
//! server), the object is addressed path-style, `ENDPOINT/BUCKET/KEY`, which every one of them
//! answers (MinIO and Ceph answer virtual-hosted addresses only when configured with a domain
//! for it). On AWS itself it is virtual-hosted, `https://BUCKET.s3.REGION.amazonaws.com/KEY`,
//! when the bucket name is a DNS label (lower-case letters, digits and hyphens, 3 to 63, no
//! dot: a dot would not match the `*.s3.REGION.amazonaws.com` certificate), else path-style
//! on `https://s3.REGION.amazonaws.com` (AWS still answers it for such names).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use url::Url;

/// An S3 object: its bucket and key as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub bucket: String,
    pub key: String,
}

/// What SigV4 leaves unencoded in a path (RFC 3986's unreserved characters) and `/`, which
/// separates the key's segments: every other byte of the key is sent as %XX, so the path the
/// server canonicalizes is the one signed.
const KEY: &AsciiSet =
    &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');

/// `s3://BUCKET/KEY` (the scheme in any case), or why not.
pub fn parse(operand: &str) -> Result<Object, String> {
    let rest = operand.get(5..).filter(|_| super::is_s3(operand)).ok_or("not an s3:// URL")?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err("no bucket: the form is s3://BUCKET/KEY".into());
    }
    // A bucket name goes into a host name or a path segment as it is: AWS's names are
    // 3-63 of [a-z0-9.-], older ones and other stores' also take capitals and '_'.
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if bucket.len() > 255 || !bucket.chars().all(ok) || bucket.starts_with('.') {
        return Err(format!("'{bucket}' is not a bucket name (letters, digits, '.', '-', '_')"));
    }
    if key.is_empty() {
        return Err("no key: the form is s3://BUCKET/KEY".into());
    }
    // An address's path is resolved by URL rules before it is sent (RFC 3986 §5.2.4): a
    // segment "." or ".." (or its %2E form) would name another key.
    if key.split('/').any(|s| s == "." || s == "..") {
        return Err(format!(
            "the key '{key}' has a '.' or '..' segment, which cannot be addressed"
        ));
    }
    Ok(Object { bucket: bucket.to_string(), key: key.to_string() })
}

/// Whether `bucket` can be a host name label under AWS's S3 domain.
pub fn virtual_hosted(bucket: &str) -> bool {
    let b = bucket.as_bytes();
    (3..=63).contains(&b.len())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The object's https address: on `endpoint` path-style, else on AWS in `region`.
pub fn object_url(object: &Object, region: &str, endpoint: Option<&Url>) -> Result<Url, String> {
    let key = utf8_percent_encode(&object.key, KEY).to_string();
    let text = match endpoint {
        Some(ep) => {
            let base = ep.as_str().trim_end_matches('/');
            format!("{base}/{}/{key}", object.bucket)
        }
        None => {
            if region.is_empty()
                || !region
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            {
                return Err(format!("'{region}' is not a region name"));
            }
            let domain = match region.starts_with("cn-") {
                true => "amazonaws.com.cn",
                false => "amazonaws.com",
            };
            match virtual_hosted(&object.bucket) {
                true => format!("https://{}.s3.{region}.{domain}/{key}", object.bucket),
                false => format!("https://s3.{region}.{domain}/{}/{key}", object.bucket),
            }
        }
    };
    Url::parse(&text).map_err(|e| format!("cannot make an address of it ({e})"))
}

/// An endpoint as given (AWS_ENDPOINT_URL...): an http or https URL with a host and no query,
/// fragment or user name, or why not.
pub fn endpoint(text: &str) -> Result<Url, String> {
    let url = Url::parse(text.trim()).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err("an endpoint is an http:// or https:// address".into());
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err("an endpoint has no query, fragment or user name".into());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(b: &str, k: &str) -> Object {
        Object { bucket: b.into(), key: k.into() }
    }

    #[test]
    fn operands() {
        assert_eq!(parse("s3://b-1/dir/snap.tar.zst"), Ok(obj("b-1", "dir/snap.tar.zst")));
        assert_eq!(parse("S3://b/a%20b"), Ok(obj("b", "a%20b")));
        assert_eq!(parse("s3://b/k?x#y"), Ok(obj("b", "k?x#y")));
        assert_eq!(parse("s3://b//k"), Ok(obj("b", "/k")));
        for bad in [
            "s3://",
            "s3:///k",
            "s3://b",
            "s3://b/",
            "s3://b:1/k",
            "s3://u@b/k",
            "s3://b/a/../k",
            "s3://b/.",
            "http://b/k",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses_on_aws_and_on_an_endpoint() {
        let u = |o: &Object, r: &str, e: Option<&str>| {
            let e = e.map(|e| endpoint(e).unwrap());
            object_url(o, r, e.as_ref()).map(|u| u.to_string())
        };
        let o = obj("ledger-snaps", "mainnet/snapshot-1 +x.tar.zst");
        assert_eq!(
            u(&o, "eu-west-1", None).unwrap(),
            "https://ledger-snaps.s3.eu-west-1.amazonaws.com/mainnet/snapshot-1%20%2Bx.tar.zst"
        );
        assert_eq!(
            u(&obj("my.bucket", "k"), "us-east-1", None).unwrap(),
            "https://s3.us-east-1.amazonaws.com/my.bucket/k"
        );
        assert_eq!(
            u(&obj("Old_Bucket", "k"), "cn-north-1", None).unwrap(),
            "https://s3.cn-north-1.amazonaws.com.cn/Old_Bucket/k"
        );
        assert_eq!(
            u(&o, "auto", Some("https://acct.r2.cloudflarestorage.com")).unwrap(),
            "https://acct.r2.cloudflarestorage.com/ledger-snaps/mainnet/snapshot-1%20%2Bx.tar.zst"
        );
        assert_eq!(
            u(&obj("b", "k/é~"), "x", Some("http://127.0.0.1:9000/prefix/")).unwrap(),
            "http://127.0.0.1:9000/prefix/b/k/%C3%A9~"
        );
        assert!(u(&o, "eu west", None).is_err());
        for bad in ["ftp://h", "https://h/?a=1", "https://u:p@h", "h:9000", "https://"] {
            assert!(endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn which_names_are_host_labels() {
        assert!(virtual_hosted("abc") && virtual_hosted("a-1-b"));
        for no in ["ab", "a.b.c", "-ab", "ab-", "Abc", "a_b", &"a".repeat(64)] {
            assert!(!virtual_hosted(no), "{no}");
        }
    }
}
