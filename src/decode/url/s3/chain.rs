//! Which credentials, in the order of AWS's SDKs' default chain (the Rust SDK's
//! `DefaultCredentialsChain`; aws-cli's is the same for these sources):
//!
//! 1. the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, with AWS_SESSION_TOKEN;
//! 2. the profile (AWS_PROFILE, else `default`) in the config and credentials files:
//!    `role_arn` with `web_identity_token_file`, else static keys (`aws_access_key_id`,
//!    `aws_secret_access_key`, `aws_session_token`), else `credential_process`;
//! 3. web identity from the environment: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN;
//! 4. the container agent: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI;
//! 5. EC2 instance metadata (IMDSv2), unless AWS_EC2_METADATA_DISABLED=true.
//!
//! A source that is not configured passes to the next; one that is configured but broken
//! (a variable without its pair, a profile that names what fastuntar cannot do) stops the
//! chain with its reason, as the SDKs do. If nothing is found, the line says what each step
//! found, and points to --no-sign-request.

use std::path::PathBuf;
use std::time::SystemTime;

use url::Url;

use super::config::{Profile, Region};
use super::credentials::{Credentials, Provider, Secret};
use super::ecs::Container;
use super::imds::Imds;
use super::process::Process;
use super::web_identity::WebIdentity;
use super::{Clients, Env, config, ecs, imds, var};
use crate::decode::url::failed::Failed;

/// What the chain looks at.
pub struct Context<'a> {
    pub env: Env<'a>,
    pub profile: Option<&'a Profile>,
    pub region: &'a Region,
    pub http: &'a Clients,
}

/// The chosen provider, and what the steps before it found (for the line that says no
/// credentials were found, when instance metadata, the last step, gives none either).
pub struct Found {
    pub provider: Box<dyn Provider>,
    pub last_resort: bool,
    pub tried: Vec<String>,
}

/// Long-term or session keys given as they are (the environment, a profile).
pub struct Fixed {
    pub creds: Credentials,
    pub from: String,
}

impl Provider for Fixed {
    fn name(&self) -> String {
        self.from.clone()
    }

    fn fetch(&self) -> Result<Credentials, Failed> {
        Ok(self.creds.clone())
    }
}

/// One step of the chain: Found, Absent (why), or Err (configured but broken).
type StepFn = fn(&Context) -> Result<Step, String>;

enum Step {
    Found(Box<dyn Provider>),
    Absent(String),
}

/// The first source that is configured, or why none is.
pub fn find(ctx: &Context) -> Result<Found, String> {
    let steps: [StepFn; 4] = [environment, profile, web_identity, container];
    let mut tried = Vec::new();
    for step in steps {
        match step(ctx)? {
            Step::Found(provider) => return Ok(Found { provider, last_resort: false, tried }),
            Step::Absent(why) => tried.push(why),
        }
    }
    match imds::configured(ctx.env, ctx.profile) {
        Some(Ok(endpoint)) => {
            let provider = Box::new(Imds { endpoint, http: ctx.http.local.clone() });
            Ok(Found { provider, last_resort: true, tried })
        }
        Some(Err(e)) => Err(e),
        None => {
            tried.push("EC2 instance metadata: AWS_EC2_METADATA_DISABLED=true".into());
            Err(none_found(&tried))
        }
    }
}

/// The line for a run that found no credentials.
pub fn none_found(tried: &[String]) -> String {
    format!(
        "no AWS credentials found ({}); for a public bucket, use --no-sign-request",
        tried.join("; ")
    )
}

fn environment(ctx: &Context) -> Result<Step, String> {
    let env = ctx.env;
    match (var(env, "AWS_ACCESS_KEY_ID"), var(env, "AWS_SECRET_ACCESS_KEY")) {
        (Some(id), Some(secret)) => {
            let creds = Credentials {
                key_id: Secret::new(id.trim()),
                secret: Secret::new(secret.trim()),
                token: var(env, "AWS_SESSION_TOKEN").map(|t| Secret::new(t.trim())),
                expiry: None,
            };
            Ok(Step::Found(Box::new(Fixed {
                creds,
                from: "the environment (AWS_ACCESS_KEY_ID)".into(),
            })))
        }
        (Some(_), None) => Ok(Step::Absent("environment: AWS_SECRET_ACCESS_KEY not set".into())),
        (None, Some(_)) => Ok(Step::Absent("environment: AWS_ACCESS_KEY_ID not set".into())),
        (None, None) => Ok(Step::Absent("environment: AWS_ACCESS_KEY_ID not set".into())),
    }
}

fn profile(ctx: &Context) -> Result<Step, String> {
    let Some(p) = ctx.profile else {
        return Ok(Step::Absent("profile: none in the config or credentials file".into()));
    };
    let from = format!("profile {} ({})", p.name, p.from);
    if let Some(role) = p.get("role_arn") {
        if let Some(file) = p.get("web_identity_token_file") {
            let session = p.get("role_session_name").map(str::to_string);
            return Ok(Step::Found(Box::new(web_identity_provider(
                ctx,
                file.into(),
                role,
                session,
                from,
            )?)));
        }
        return Err(format!(
            "{from}: role_arn with source_profile or credential_source (AssumeRole) is not \
             supported; give the role's credentials another way (credential_process, or \
             `aws configure export-credentials --format env`)"
        ));
    }
    match (p.get("aws_access_key_id"), p.get("aws_secret_access_key")) {
        (Some(id), Some(secret)) => {
            let creds = Credentials {
                key_id: Secret::new(id),
                secret: Secret::new(secret),
                token: p.get("aws_session_token").map(Secret::new),
                expiry: None,
            };
            return Ok(Step::Found(Box::new(Fixed { creds, from })));
        }
        (Some(_), None) => {
            return Err(format!("{from}: aws_access_key_id without aws_secret_access_key"));
        }
        _ => {}
    }
    if let Some(command) = p.get("credential_process") {
        return Ok(Step::Found(Box::new(Process { command: command.to_string(), from })));
    }
    if p.get("sso_session").is_some() || p.get("sso_start_url").is_some() {
        return Err(format!(
            "{from}: IAM Identity Center (SSO) profiles are not supported; use \
             `credential_process = aws configure export-credentials --profile {} --format process`",
            p.name
        ));
    }
    Ok(Step::Absent(format!("{from}: no credentials in it")))
}

fn web_identity(ctx: &Context) -> Result<Step, String> {
    let env = ctx.env;
    match (var(env, "AWS_WEB_IDENTITY_TOKEN_FILE"), var(env, "AWS_ROLE_ARN")) {
        (Some(file), Some(role)) => {
            let session = var(env, "AWS_ROLE_SESSION_NAME");
            let from = "AWS_WEB_IDENTITY_TOKEN_FILE".to_string();
            Ok(Step::Found(Box::new(web_identity_provider(
                ctx,
                file.into(),
                &role,
                session,
                from,
            )?)))
        }
        (Some(_), None) => Err("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not".into()),
        (None, _) => Ok(Step::Absent("web identity: AWS_WEB_IDENTITY_TOKEN_FILE not set".into())),
    }
}

fn web_identity_provider(
    ctx: &Context,
    token_file: PathBuf,
    role: &str,
    session: Option<String>,
    from: String,
) -> Result<WebIdentity, String> {
    let sts = match config::endpoint(ctx.env, ctx.profile, "STS")? {
        Some(u) => u,
        None => sts_url(ctx.region)?,
    };
    let session = session.unwrap_or_else(|| {
        let secs =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        format!("fastuntar-{secs}")
    });
    Ok(WebIdentity {
        token_file,
        role_arn: role.to_string(),
        session_name: session,
        sts,
        http: ctx.http.sts.clone(),
        from,
    })
}

/// STS in the region (the SDKs' regional endpoint), or the global one when no region is set.
pub fn sts_url(region: &Region) -> Result<Url, String> {
    let r = &region.name;
    if !r.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        return Err(format!("'{r}' is not a region name"));
    }
    let text = match (region.configured, r.starts_with("cn-")) {
        (false, _) => "https://sts.amazonaws.com/".to_string(),
        (true, true) => format!("https://sts.{r}.amazonaws.com.cn/"),
        (true, false) => format!("https://sts.{r}.amazonaws.com/"),
    };
    Url::parse(&text).map_err(|e| e.to_string())
}

fn container(ctx: &Context) -> Result<Step, String> {
    match ecs::configured(ctx.env) {
        Some(Ok((url, token))) => {
            Ok(Step::Found(Box::new(Container { url, token, http: ctx.http.local.clone() })))
        }
        Some(Err(e)) => Err(e),
        None => Ok(Step::Absent("container: AWS_CONTAINER_CREDENTIALS_FULL_URI not set".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    fn clients() -> Clients {
        let opts =
            super::super::Options { no_sign: false, stall: Duration::from_secs(1), cacert: None };
        Clients::new(&opts).unwrap()
    }

    fn pick(vars: &[(&str, &str)], profile: Option<&Profile>) -> Result<(String, bool), String> {
        let http = clients();
        let e = env(vars);
        let region = config::region(&e, profile);
        let ctx = Context { env: &e, profile, region: &region, http: &http };
        find(&ctx).map(|f| (f.provider.name(), f.last_resort))
    }

    /// Each source in AWS's order, the first configured one winning.
    #[test]
    fn the_order_of_the_chain() {
        let keys = [("AWS_ACCESS_KEY_ID", "A"), ("AWS_SECRET_ACCESS_KEY", "S")];
        let wi = [("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"), ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r")];
        let ecs = [("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/c")];
        let stat = Profile::of("p", &[("aws_access_key_id", "A"), ("aws_secret_access_key", "S")]);
        let all: Vec<_> = [&keys[..], &wi[..], &ecs[..]].concat();
        assert!(pick(&all, Some(&stat)).unwrap().0.contains("environment"));
        assert!(pick(&all[2..], Some(&stat)).unwrap().0.contains("profile p"));
        assert!(pick(&all[2..], None).unwrap().0.contains("web identity"));
        assert!(pick(&all[4..], None).unwrap().0.contains("container"));
        assert_eq!(
            pick(&[], None).unwrap(),
            ("EC2 instance metadata (http://169.254.169.254/)".into(), true)
        );
        // Half a pair passes on; the profile's credential_process, web identity.
        assert!(pick(&[keys[0]], Some(&stat)).unwrap().0.contains("profile p"));
        let proc_ = Profile::of("p", &[("credential_process", "x")]);
        assert!(pick(&[], Some(&proc_)).unwrap().0.contains("credential_process of profile p"));
        let pwi = Profile::of(
            "p",
            &[("role_arn", "r"), ("web_identity_token_file", "/t"), ("aws_access_key_id", "A")],
        );
        assert!(pick(&[], Some(&pwi)).unwrap().0.contains("web identity (profile p"));
        // Configured but broken: the chain stops there.
        assert!(pick(&wi[..1], None).unwrap_err().contains("AWS_ROLE_ARN is not"));
        let assume = Profile::of("p", &[("role_arn", "r"), ("source_profile", "base")]);
        assert!(pick(&[], Some(&assume)).unwrap_err().contains("not supported"));
        let sso = Profile::of("p", &[("sso_session", "s")]);
        assert!(pick(&[], Some(&sso)).unwrap_err().contains("export-credentials"));
        let e = pick(&[("AWS_EC2_METADATA_DISABLED", "true")], None).unwrap_err();
        assert!(
            e.starts_with("no AWS credentials found (environment:")
                && e.contains("--no-sign-request"),
            "{e}"
        );
    }

    #[test]
    fn sts_in_the_region() {
        let r = |name: &str, configured| {
            sts_url(&Region { name: name.into(), configured }).map(|u| u.to_string())
        };
        assert_eq!(r("eu-west-1", true).unwrap(), "https://sts.eu-west-1.amazonaws.com/");
        assert_eq!(r("us-east-1", false).unwrap(), "https://sts.amazonaws.com/");
        assert_eq!(r("cn-north-1", true).unwrap(), "https://sts.cn-north-1.amazonaws.com.cn/");
        assert!(r("a/b", true).is_err());
    }
}
