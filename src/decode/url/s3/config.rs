//! The AWS configuration as AWS's tools read it: the environment, and the profile in the
//! shared config file (AWS_CONFIG_FILE, else ~/.aws/config: `[profile NAME]`, `[default]`)
//! and the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials:
//! `[NAME]`), the credentials file's values winning. The profile is AWS_PROFILE's, else
//! `default`. The files are read with the `rust-ini` crate set to aws-cli's rules (botocore
//! reads them with Python's RawConfigParser): `#` and `;` start a comment only at a line's
//! start (after it they are part of the value), quotes and backslashes are part of a value,
//! an indented line continues the value above (a sub-property), names are in any case.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ini::{Ini, ParseOption};
use url::Url;

use super::{Env, address, var};

/// The largest config or credentials file read (a real one is a few KiB).
const FILE_MAX: u64 = 1 << 20;

/// One profile's properties, merged from both files.
#[derive(Clone, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    props: BTreeMap<String, String>,
    /// Where it was read (for messages).
    pub from: String,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The values may be secrets (aws_secret_access_key): only the names.
        f.debug_struct("Profile")
            .field("name", &self.name)
            .field("keys", &self.props.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Profile {
    /// A property's value (names as in the files, lower case), empty counting as unset.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// The profile AWS_PROFILE names (else `default`), or None when neither file has it. A
    /// file that cannot be read or parsed, or a profile AWS_PROFILE names that neither file
    /// has, is an error.
    pub fn load(env: Env) -> Result<Option<Profile>, String> {
        let named = var(env, "AWS_PROFILE");
        let name = named.clone().unwrap_or_else(|| "default".to_string());
        let config = path(env, "AWS_CONFIG_FILE", "config");
        let creds = path(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
        let mut props = BTreeMap::new();
        let mut found = Vec::new();
        if let Some(p) = &config
            && let Some(ini) = read(p)?
        {
            let section = ini
                .iter()
                .find(|(s, _)| s.is_some_and(|s| config_section(s) == Some(name.as_str())))
                .or_else(|| ini.iter().find(|(s, _)| name == "default" && *s == Some("default")));
            if let Some((_, section)) = section {
                props.extend(section.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())));
                found.push(p.display().to_string());
            }
        }
        if let Some(p) = &creds
            && let Some(ini) = read(p)?
            && let Some(section) = ini.section(Some(name.as_str()))
        {
            props.extend(section.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())));
            found.push(p.display().to_string());
        }
        if found.is_empty() {
            return match named {
                Some(n) => Err(format!(
                    "AWS_PROFILE={n}: no such profile in {} or {}",
                    shown_path(config.as_deref()),
                    shown_path(creds.as_deref())
                )),
                None => Ok(None),
            };
        }
        Ok(Some(Profile { name, props, from: found.join(" and ") }))
    }

    #[cfg(test)]
    pub fn of(name: &str, props: &[(&str, &str)]) -> Profile {
        let props = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Profile { name: name.into(), props, from: "test".into() }
    }
}

/// The profile a config file's section names: `profile NAME`, or `default`.
fn config_section(section: &str) -> Option<&str> {
    let mut words = section.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("profile"), Some(name), None) => Some(name),
        _ => None,
    }
}

/// The file `var` names (a leading `~/` is the home directory), else `~/.aws/NAME`; None when
/// there is no home to find it in.
fn path(env: Env, name: &str, file: &str) -> Option<PathBuf> {
    let home = var(env, "HOME");
    match var(env, name) {
        Some(p) => match (p.strip_prefix("~/"), &home) {
            (Some(rest), Some(h)) => Some(Path::new(h).join(rest)),
            _ => Some(PathBuf::from(p)),
        },
        None => home.map(|h| Path::new(&h).join(".aws").join(file)),
    }
}

fn shown_path(p: Option<&Path>) -> String {
    p.map_or("(no HOME)".to_string(), |p| p.display().to_string())
}

/// The parse options for AWS's files (see the module's note).
fn options() -> ParseOption {
    ParseOption {
        enabled_quote: false,
        enabled_escape: false,
        enabled_indented_mutiline_value: true,
        ..ParseOption::default()
    }
}

/// A file parsed, or None when it does not exist.
fn read(p: &Path) -> Result<Option<Ini>, String> {
    use std::io::Read;
    let f = match std::fs::File::open(p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read ({e})", p.display())),
    };
    let mut text = String::new();
    f.take(FILE_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: cannot read ({e})", p.display()))?;
    if text.len() as u64 > FILE_MAX {
        return Err(format!("{}: larger than {} KiB", p.display(), FILE_MAX >> 10));
    }
    parse(&text).map(Some).map_err(|e| format!("{}: {e}", p.display()))
}

/// A file's text parsed (`rust-ini`'s error names the line and column, never a value).
pub fn parse(text: &str) -> Result<Ini, String> {
    Ini::load_from_str_opt(text, options()).map_err(|e| e.to_string())
}

/// The region and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub name: String,
    /// False when none was configured and `us-east-1` is assumed (as aws-cli signs then).
    pub configured: bool,
}

/// AWS_REGION, else AWS_DEFAULT_REGION, else the profile's `region`, else `us-east-1`.
pub fn region(env: Env, profile: Option<&Profile>) -> Region {
    let found = var(env, "AWS_REGION")
        .or_else(|| var(env, "AWS_DEFAULT_REGION"))
        .or_else(|| profile.and_then(|p| p.get("region")).map(str::to_string));
    match found {
        Some(r) => Region { name: r.trim().to_string(), configured: true },
        None => Region { name: "us-east-1".to_string(), configured: false },
    }
}

/// The endpoint for `service` (`S3`, `STS`): `AWS_ENDPOINT_URL_<SERVICE>`, else
/// AWS_ENDPOINT_URL, else the profile's `endpoint_url`; none at all with
/// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true. None: AWS's own.
pub fn endpoint(env: Env, profile: Option<&Profile>, service: &str) -> Result<Option<Url>, String> {
    if var(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Ok(None);
    }
    let own = format!("AWS_ENDPOINT_URL_{service}");
    let (name, value) = match (var(env, &own), var(env, "AWS_ENDPOINT_URL")) {
        (Some(v), _) => (own, v),
        (None, Some(v)) => ("AWS_ENDPOINT_URL".to_string(), v),
        (None, None) => match profile.and_then(|p| p.get("endpoint_url")) {
            Some(v) => ("the profile's endpoint_url".to_string(), v.to_string()),
            None => return Ok(None),
        },
    };
    address::endpoint(&value).map(Some).map_err(|e| format!("{name}={value}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    /// The files' syntax as AWS's tools read it.
    #[test]
    fn profiles_from_both_files() {
        let td = tempfile::tempdir().unwrap();
        let config = td.path().join("config");
        let creds = td.path().join("credentials");
        std::fs::write(
            &config,
            "# comment\n[default]\nregion = eu-west-1\n\n[profile snap]\nregion=us-west-2\n; comment\n\
             credential_process = \"/opt/my tool\" --arg 'x;y'\ns3 =\n  addressing_style = path\n\
             [snap]\nregion = ignored\n",
        )
        .unwrap();
        std::fs::write(
            &creds,
            "[snap]\naws_access_key_id = AKIDSNAP\nAWS_Secret_Access_Key = se/cr+et #1\n; c\n",
        )
        .unwrap();
        let home = td.path().to_str().unwrap();
        let (c, k) = (config.to_str().unwrap(), creds.to_str().unwrap());
        let vars = [("HOME", home), ("AWS_CONFIG_FILE", c), ("AWS_SHARED_CREDENTIALS_FILE", k)];
        let p = Profile::load(&env(&vars)).unwrap().unwrap();
        assert_eq!(p.name, "default");
        assert_eq!(p.get("region"), Some("eu-west-1"));
        let snap = [&vars[..], &[("AWS_PROFILE", "snap")]].concat();
        let p = Profile::load(&env(&snap)).unwrap().unwrap();
        assert_eq!(p.get("region"), Some("us-west-2"));
        assert_eq!(p.get("credential_process"), Some("\"/opt/my tool\" --arg 'x;y'"));
        assert_eq!(p.get("aws_access_key_id"), Some("AKIDSNAP"));
        assert_eq!(p.get("aws_secret_access_key"), Some("se/cr+et #1"));
        assert!(!format!("{p:?}").contains("se/cr"), "no value in Debug: {p:?}");
        let missing = [&vars[..], &[("AWS_PROFILE", "nope")]].concat();
        assert!(Profile::load(&env(&missing)).unwrap_err().contains("AWS_PROFILE=nope"));
        // ~/.aws by default; none there: no profile, and no error.
        assert_eq!(Profile::load(&env(&[("HOME", home)])), Ok(None));
        assert_eq!(Profile::load(&env(&[])), Ok(None));
        std::fs::write(&config, "[default\nregion = x\n").unwrap();
        let e = Profile::load(&env(&vars)).unwrap_err();
        assert!(e.contains(c), "{e}");
    }

    #[test]
    fn region_and_endpoint_in_aws_order() {
        let p = Profile::of("default", &[("region", "eu-north-1"), ("endpoint_url", "https://p")]);
        let r = |vars: &[(&str, &str)], p: Option<&Profile>| region(&env(vars), p);
        assert_eq!(r(&[("AWS_REGION", "a"), ("AWS_DEFAULT_REGION", "b")], Some(&p)).name, "a");
        assert_eq!(r(&[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "b")], Some(&p)).name, "b");
        assert_eq!(r(&[], Some(&p)).name, "eu-north-1");
        assert_eq!(r(&[], None), Region { name: "us-east-1".into(), configured: false });
        let e = |vars: &[(&str, &str)], p: Option<&Profile>| {
            endpoint(&env(vars), p, "S3").map(|u| u.map(|u| u.to_string()))
        };
        let both =
            [("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000"), ("AWS_ENDPOINT_URL", "https://all")];
        assert_eq!(e(&both, Some(&p)).unwrap().as_deref(), Some("http://127.0.0.1:9000/"));
        assert_eq!(e(&both[1..], Some(&p)).unwrap().as_deref(), Some("https://all/"));
        assert_eq!(e(&[], Some(&p)).unwrap().as_deref(), Some("https://p/"));
        assert_eq!(e(&[], None).unwrap(), None);
        let ignore = [("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"), both[0]];
        assert_eq!(e(&ignore, Some(&p)).unwrap(), None);
        assert!(
            e(&[("AWS_ENDPOINT_URL", "minio:9000")], None)
                .unwrap_err()
                .contains("AWS_ENDPOINT_URL=minio:9000")
        );
    }
}
