//! Restoring from S3 (issue 42, point 5): `fastuntar -x s3://BUCKET/KEY` against moto's S3
//! server on 127.0.0.1 with its signature checks enforced (tests/util/moto.rs and
//! moto_s3.py), each credential source with its own stand-in on 127.0.0.1 for STS, the
//! container agent and EC2 instance metadata (tests/util/standin.rs). What succeeds is GNU
//! tar's tree of the same archive; what fails is one line naming the object, exit 2. The
//! server's log says how each request was signed and with which key, so a test sees which
//! credentials were used, not only that the run worked.
//!
//! Every run gets an environment of its own: no AWS_* variable of the test process, HOME and
//! the AWS files in the test directory, instance metadata off unless the case is about it,
//! AWS_ENDPOINT_URL_S3 naming moto (path-style addressing).

use crate::util;
use crate::util::moto::{self, Key, Moto, PRIVATE, PUBLIC};
use crate::util::standin::{Response, StandIn};

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use util::rawtar::Tar;
use util::snapshot::{Compare, Snapshot, assert_same, snapshot};
use util::{Cmd, Output, Rng, TestDir};

/// Every variable that would steer the run from the test's own environment.
const AWS_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_STS",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// 4 connections and 256 KiB pieces: a 1.6 MB archive is several signed ranged requests.
const PIECES: &[&str] = &["--connections", "4", "--memory", "8M"];

/// A case: its directory, its archive in the private bucket and GNU tar's tree of it.
struct Case {
    td: TestDir,
    moto: &'static Moto,
    key: String,
    want: Snapshot,
    started: SystemTime,
}

/// A tree of 30 files (1 byte to 200 KiB, random) as a plain tar, seeded by `seed`.
fn archive(seed: u64) -> Vec<u8> {
    let mut t = Tar::new();
    let mut rng = Rng::new(seed);
    t.dir("d/");
    for i in 0..30u64 {
        let size = [1, 4096, 200 << 10, 77_777, 1543][(i % 5) as usize];
        t.file(format!("d/f{i}"), &rng.bytes(size));
    }
    t.finish()
}

/// The case for `test`: its archive uploaded as `private/t/<test>.tar`; None (a SKIP line,
/// under CI a failure) without GNU tar or moto.
fn set_up(test: &str) -> Option<Case> {
    if !util::have_tools(test, &["tar"]) {
        return None;
    }
    let moto = moto::moto(test)?;
    let td = TestDir::new(test);
    let seed = test.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let tar = archive(seed);
    let key = format!("t/{test}.tar");
    moto.put(PRIVATE, &key, &tar);
    let started = SystemTime::now() - Duration::from_secs(1);
    let file = td.write("oracle.tar", &tar);
    let gnu = td.fresh("gnu");
    let g = Cmd::new("tar").extract(&file, &gnu).run();
    assert!(g.success(), "GNU tar failed\n{}", g.describe());
    std::fs::create_dir_all(td.join("home")).unwrap();
    Some(Case { td, moto, key, want: snapshot(&gnu), started })
}

impl Case {
    fn operand(&self) -> String {
        format!("s3://{PRIVATE}/{}", self.key)
    }

    /// The object's path on the server (path-style: /bucket/key).
    fn path(&self) -> String {
        format!("/{PRIVATE}/{}", self.key)
    }

    /// fastuntar in the case's own environment (see the module's note).
    fn cmd(&self) -> Cmd {
        let mut c = util::fastuntar();
        for v in AWS_VARS {
            c.env_remove(v);
        }
        c.env("HOME", self.td.join("home"))
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_ENDPOINT_URL_S3", &self.moto.endpoint)
            .env("AWS_REGION", &self.moto.region);
        c
    }

    /// With `key` in the environment.
    fn with_key(&self, key: &Key) -> Cmd {
        let mut c = self.cmd();
        c.env("AWS_ACCESS_KEY_ID", &key.id).env("AWS_SECRET_ACCESS_KEY", &key.secret);
        if let Some(t) = &key.token {
            c.env("AWS_SESSION_TOKEN", t);
        }
        c
    }

    /// Runs `cmd` on `operand` into a fresh DEST: the output and DEST.
    fn run(&self, mut cmd: Cmd, operand: &str, extra: &[&str]) -> (Output, PathBuf) {
        let dest = self.td.fresh("dest");
        let out = cmd
            .args(["-x", "--json", "-f", operand, "-C"])
            .arg(&dest)
            .args(PIECES)
            .args(extra)
            .run();
        (out, dest)
    }

    fn same(&self, dest: &Path, out: &Output, ctx: &str) {
        assert!(out.success(), "{ctx}\n{}", out.describe());
        let cmp = Compare::extraction(self.started);
        assert_same(&self.want, "GNU tar", &snapshot(dest), "fastuntar", &cmp, ctx);
    }

    /// The GETs of the object since `skip` of them.
    fn requests(&self, skip: usize) -> Vec<Value> {
        gets(self.moto.log(&self.path())).into_iter().skip(skip).collect()
    }
}

/// The GETs among `requests` (the test's own upload left out).
fn gets(requests: Vec<Value>) -> Vec<Value> {
    requests.into_iter().filter(|r| r["method"] == "GET").collect()
}

/// The access keys a run's requests were signed with (`auth` header), each once, in order;
/// panics on a request signed another way.
fn keys_used(requests: &[Value]) -> Vec<String> {
    let mut keys = Vec::new();
    for r in requests {
        assert_eq!(r["auth"], "header", "every request signed in its headers: {r}");
        let k = r["key"].as_str().unwrap().to_string();
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys
}

/// Every request of `requests` signed with the key `id`, and no other.
fn only(requests: &[Value], id: &str) {
    assert_eq!(keys_used(requests), vec![id.to_string()]);
}

/// One line naming the object, exit 2, saying `words`.
fn fails_in_one_line(out: &Output, operand: &str, words: &[&str], ctx: &str) {
    out.expect_code(2);
    let lines = out.diagnostics();
    assert_eq!(lines.len(), 1, "{ctx}: one line\n{}", out.describe());
    assert!(lines[0].contains(operand), "{ctx}: names {operand}\n{}", out.describe());
    for w in words {
        assert!(lines[0].contains(w), "{ctx}: says {w:?}\n{}", out.describe());
    }
}

/// No secret of `keys` anywhere in what the run printed.
fn nothing_secret(out: &Output, keys: &[&Key], ctx: &str) {
    let text = format!("{}\n{}", out.stdout_str(), out.stderr_str());
    for k in keys {
        let mut secrets = vec![&k.secret, &k.id];
        secrets.extend(&k.token);
        for s in secrets {
            assert!(
                !text.contains(s.as_str()),
                "{ctx}: a credential in the output\n{}",
                out.describe()
            );
        }
    }
}

/// Signed with keys from the environment, in pieces: the tree is GNU tar's, and every request
/// carried the user's key. The same with a wrong secret is refused by the server
/// (SignatureDoesNotMatch): the signature is checked, so a pass above means it was right.
#[test]
fn environment_keys_sign_and_a_wrong_secret_is_refused() {
    let Some(c) = set_up("environment_keys_sign_and_a_wrong_secret_is_refused") else { return };
    let m = c.moto;
    let (out, dest) = c.run(c.with_key(&m.user), &c.operand(), &[]);
    c.same(&dest, &out, "environment keys");
    let reqs = c.requests(0);
    assert!(reqs.len() >= 4, "pieces on several requests: {reqs:?}");
    assert!(reqs.iter().all(|r| r["range"].is_string() && r["token"] == false), "{reqs:?}");
    only(&reqs, &m.user.id);
    // A session's temporary key carries its token.
    let before = c.requests(0).len();
    let (out, dest) = c.run(c.with_key(&m.sessions[0]), &c.operand(), &[]);
    c.same(&dest, &out, "session keys");
    let reqs = c.requests(before);
    assert!(reqs.iter().all(|r| r["token"] == true), "{reqs:?}");
    only(&reqs, &m.sessions[0].id);

    let wrong = Key { secret: format!("{}x", &m.user.secret[1..]), ..m.user.clone() };
    let (out, _) = c.run(c.with_key(&wrong), &c.operand(), &[]);
    fails_in_one_line(&out, &c.operand(), &["403", "SignatureDoesNotMatch"], "wrong secret");
    nothing_secret(&out, &[&wrong, &m.user], "wrong secret");
    let unknown = Key { id: "AKIAUNKNOWNKEY000000".into(), ..m.user.clone() };
    let (out, _) = c.run(c.with_key(&unknown), &c.operand(), &[]);
    fails_in_one_line(&out, &c.operand(), &["403", "InvalidAccessKeyId"], "unknown key");
}

/// AWS_PROFILE with static keys (and a session token) in the credentials file and the region
/// in the config file, both where AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE say; and the
/// default profile in ~/.aws.
#[test]
fn profile_static_keys() {
    let Some(c) = set_up("profile_static_keys") else { return };
    let s = &c.moto.sessions[1];
    let creds = c.td.write(
        "creds.ini",
        format!(
            "[default]\naws_access_key_id = AKIAWRONG\naws_secret_access_key = wrong\n\n[snap]\n\
             aws_access_key_id = {}\naws_secret_access_key = {}\naws_session_token = {}\n",
            s.id,
            s.secret,
            s.token.as_deref().unwrap()
        ),
    );
    let config = c.td.write("config.ini", "[profile snap]\nregion = us-east-1\n");
    let mut cmd = c.cmd();
    cmd.env_remove("AWS_REGION")
        .env("AWS_PROFILE", "snap")
        .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
        .env("AWS_CONFIG_FILE", &config);
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "AWS_PROFILE=snap");
    only(&c.requests(0), &s.id);

    let u = &c.moto.user;
    let aws = c.td.join("home/.aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        format!("[default]\naws_access_key_id={}\naws_secret_access_key={}\n", u.id, u.secret),
    )
    .unwrap();
    let before = c.requests(0).len();
    let (out, dest) = c.run(c.cmd(), &c.operand(), &[]);
    c.same(&dest, &out, "~/.aws/credentials");
    only(&c.requests(before), &u.id);
    // AWS_PROFILE naming a profile that is nowhere: one line.
    let mut cmd = c.cmd();
    cmd.env("AWS_PROFILE", "nowhere");
    let (out, _) = c.run(cmd, &c.operand(), &[]);
    fails_in_one_line(&out, &c.operand(), &["AWS_PROFILE=nowhere"], "no such profile");
}

/// `credential_process` in the config file: its JSON gives the keys; a process that fails
/// stops the run in one line.
#[test]
fn profile_credential_process() {
    let Some(c) = set_up("profile_credential_process") else { return };
    let u = &c.moto.user;
    let json = c.td.write(
        "creds.json",
        format!(
            r#"{{"Version": 1, "AccessKeyId": "{}", "SecretAccessKey": "{}"}}"#,
            u.id, u.secret
        ),
    );
    let config =
        c.td.write("config", format!("[default]\ncredential_process = cat '{}'\n", json.display()));
    let mut cmd = c.cmd();
    cmd.env("AWS_CONFIG_FILE", &config);
    let (out, dest) = c.run(cmd, &c.operand(), &["-v"]);
    c.same(&dest, &out, "credential_process");
    nothing_secret(&out, &[u], "credential_process -v");
    only(&c.requests(0), &u.id);
    let config = c.td.write("config-bad", "[default]\ncredential_process = exit 7\n");
    let mut cmd = c.cmd();
    cmd.env("AWS_CONFIG_FILE", &config);
    let (out, _) = c.run(cmd, &c.operand(), &[]);
    fails_in_one_line(
        &out,
        &c.operand(),
        &["credential_process", "exit status: 7"],
        "failing process",
    );
}

/// Web identity: the token file's token goes to STS (a stand-in at AWS_ENDPOINT_URL_STS) in
/// AssumeRoleWithWebIdentity with AWS_ROLE_ARN; the session it answers signs the requests.
#[test]
fn web_identity_through_sts() {
    let Some(c) = set_up("web_identity_through_sts") else { return };
    let s = c.moto.sessions[0].clone();
    let role = c.moto.role.clone();
    let token_file = c.td.write("token", "eyJ.web-identity-token.sig\n");
    let want_role = role.clone();
    let sts = StandIn::start(move |req| {
        let form: Vec<(String, String)> =
            url::form_urlencoded::parse(&req.body).into_owned().collect();
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let ok = req.method == "POST"
            && get("Action") == Some("AssumeRoleWithWebIdentity")
            && get("Version") == Some("2011-06-15")
            && get("RoleArn") == Some(want_role.as_str())
            && get("RoleSessionName").is_some_and(|n| !n.is_empty())
            && get("WebIdentityToken") == Some("eyJ.web-identity-token.sig")
            && req.header("authorization").is_none();
        if !ok {
            let err = "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>bad</Message></Error></ErrorResponse>";
            return Response::new(400, err);
        }
        let exp = "2099-01-01T00:00:00Z";
        Response::new(
            200,
            format!(
                "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
                 <AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey>\
                 <SessionToken>{}</SessionToken><Expiration>{exp}</Expiration></Credentials>\
                 </AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
                s.id,
                s.secret,
                s.token.as_deref().unwrap()
            ),
        )
        .header("Content-Type", "text/xml")
    });
    let mut cmd = c.cmd();
    cmd.env("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file)
        .env("AWS_ROLE_ARN", &role)
        .env("AWS_ENDPOINT_URL_STS", sts.url("/"));
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "web identity");
    assert_eq!(sts.seen().len(), 1, "one AssumeRoleWithWebIdentity");
    only(&c.requests(0), &c.moto.sessions[0].id);
    // STS refuses the token: one line with STS's reason.
    std::fs::write(&token_file, "other").unwrap();
    let mut cmd = c.cmd();
    cmd.env("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file)
        .env("AWS_ROLE_ARN", &role)
        .env("AWS_ENDPOINT_URL_STS", sts.url("/"));
    let (out, _) = c.run(cmd, &c.operand(), &[]);
    fails_in_one_line(
        &out,
        &c.operand(),
        &["web identity", "400", "InvalidIdentityToken"],
        "token refused",
    );
}

/// The JSON the container agent and instance metadata answer.
fn creds_json(k: &Key, expiration: &str) -> String {
    format!(
        r#"{{"Code":"Success","AccessKeyId":"{}","SecretAccessKey":"{}","Token":"{}","Expiration":"{expiration}"}}"#,
        k.id,
        k.secret,
        k.token.as_deref().unwrap_or("")
    )
}

/// Container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI with the token of
/// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE in Authorization.
#[test]
fn container_credentials() {
    let Some(c) = set_up("container_credentials") else { return };
    let s = c.moto.sessions[1].clone();
    let token = c.td.write("ecs-token", "ecs-auth-token\n");
    let agent = StandIn::start(move |req| match (req.path.as_str(), req.header("authorization")) {
        ("/v2/credentials/abc", Some("ecs-auth-token")) => {
            Response::new(200, creds_json(&s, "2099-01-01T00:00:00Z"))
        }
        _ => Response::new(403, "{}"),
    });
    let mut cmd = c.cmd();
    cmd.env("AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.url("/v2/credentials/abc"))
        .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token);
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "container credentials");
    assert_eq!(agent.seen().len(), 1);
    only(&c.requests(0), &c.moto.sessions[1].id);
    // A full URI over http to another host is refused before anything is asked.
    let mut cmd = c.cmd();
    cmd.env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.1/creds");
    let (out, _) = c.run(cmd, &c.operand(), &[]);
    fails_in_one_line(&out, &c.operand(), &["loopback"], "full URI off the machine");
}

/// EC2 instance metadata, IMDSv2: a PUT for the session token, then the role and its
/// credentials with the token; the stand-in refuses a GET without it.
#[test]
fn instance_metadata_v2() {
    let Some(c) = set_up("instance_metadata_v2") else { return };
    let s = c.moto.sessions[0].clone();
    let imds = StandIn::start(move |req| {
        let token = req.header("x-aws-ec2-metadata-token");
        match (req.method.as_str(), req.path.as_str()) {
            ("PUT", "/latest/api/token")
                if req.header("x-aws-ec2-metadata-token-ttl-seconds").is_some() =>
            {
                Response::new(200, "imds-session-token")
            }
            ("GET", _) if token != Some("imds-session-token") => Response::new(401, ""),
            ("GET", "/latest/meta-data/iam/security-credentials/") => {
                Response::new(200, "reader\n")
            }
            ("GET", "/latest/meta-data/iam/security-credentials/reader") => {
                Response::new(200, creds_json(&s, "2099-01-01T00:00:00Z"))
            }
            _ => Response::new(404, ""),
        }
    });
    let mut cmd = c.cmd();
    cmd.env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url("/"));
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "IMDSv2");
    let seen: Vec<String> =
        imds.seen().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(
        seen,
        [
            "PUT /latest/api/token",
            "GET /latest/meta-data/iam/security-credentials/",
            "GET /latest/meta-data/iam/security-credentials/reader"
        ]
    );
    only(&c.requests(0), &c.moto.sessions[0].id);
    // Nothing configured and no instance metadata answering: one line that says what was
    // looked at, and how to read a public bucket.
    drop(imds);
    let mut cmd = c.cmd();
    cmd.env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1/");
    let (out, _) = c.run(cmd, &c.operand(), &[]);
    fails_in_one_line(
        &out,
        &c.operand(),
        &["no AWS credentials found", "AWS_ACCESS_KEY_ID", "--no-sign-request"],
        "none",
    );
}

/// Temporary credentials that expire during the restore are fetched again and the requests
/// after go out with the new ones: the agent hands out credentials with 2 s to live (due for
/// a refresh after 1 s), alternating two sessions, and the server holds each request 0.5 s:
/// 256 KiB pieces of 1.75 MB on 2 connections make one connection's fourth request start at
/// least 1.5 s after its first, past the refresh.
#[test]
fn expiring_credentials_are_refreshed() {
    let Some(c) = set_up("expiring_credentials_are_refreshed") else { return };
    let sessions = c.moto.sessions.clone();
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = n.clone();
    let agent = StandIn::start(move |_| {
        let i = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let exp = SystemTime::now() + Duration::from_secs(2);
        let secs = exp.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        Response::new(200, creds_json(&sessions[i % 2], &rfc3339(secs)))
    });
    c.moto.delay(&c.path(), 0.5);
    let mut cmd = c.cmd();
    cmd.env("AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.url("/creds"));
    let (out, dest) = c.run(cmd, &c.operand(), &["--connections", "2", "--memory", "4M"]);
    c.same(&dest, &out, "refreshed credentials");
    let reqs = c.requests(0);
    assert!(reqs.len() >= 7, "the run's requests: {reqs:?}");
    let asked = agent.seen().len();
    assert!(asked >= 2, "credentials fetched again (asked {asked} times)");
    let used = keys_used(&reqs);
    assert_eq!(used.len(), 2, "both sessions signed requests: {used:?}");
}

/// `secs` since the epoch as RFC 3339 (UTC), as AWS writes an Expiration.
fn rfc3339(secs: u64) -> String {
    let out = Cmd::new("date").args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"]).run();
    out.stdout_str().trim().to_string()
}

/// The endpoint: AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL, which serves alone too;
/// the profile's endpoint_url last. Path-style: the requests' path is /bucket/key.
#[test]
fn endpoint_override() {
    let Some(c) = set_up("endpoint_override") else { return };
    let u = &c.moto.user;
    let mut cmd = c.with_key(u);
    cmd.env("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL");
    let mut cmd = c.with_key(u);
    cmd.env_remove("AWS_ENDPOINT_URL_S3").env("AWS_ENDPOINT_URL", &c.moto.endpoint);
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "AWS_ENDPOINT_URL");
    let config = c.td.write("config", format!("[default]\nendpoint_url = {}\n", c.moto.endpoint));
    let mut cmd = c.with_key(u);
    cmd.env_remove("AWS_ENDPOINT_URL_S3").env("AWS_CONFIG_FILE", &config);
    let (out, dest) = c.run(cmd, &c.operand(), &[]);
    c.same(&dest, &out, "the profile's endpoint_url");
    assert!(c.requests(0).len() >= 3 * 4, "three runs in pieces, all by path /{PRIVATE}/KEY");
    // The json summary names the address the object was read from.
    let summary = out.stdout_str();
    assert!(summary.contains(&format!("{}/{PRIVATE}/{}", c.moto.endpoint, c.key)), "{summary}");
    // No endpoint: AWS in the region, virtual-hosted (not reached here: AWS_ENDPOINT_URL_S3
    // pointed at a closed port shows the address asked).
    let mut cmd = c.with_key(u);
    cmd.env("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1");
    let (out, _) = c.run(cmd, &c.operand(), &["--retries", "0"]);
    fails_in_one_line(&out, &c.operand(), &["cannot connect"], "closed endpoint");
}

/// A presigned URL (SigV4 in the query string) is read as a plain https URL: nothing added,
/// the query string as given; the server checks its signature, and a changed one is refused.
/// Credentials in the environment are not sent with it.
#[test]
fn presigned_url_works_as_a_plain_url() {
    let Some(c) = set_up("presigned_url_works_as_a_plain_url") else { return };
    let url = c.moto.presign(PRIVATE, &c.key);
    assert!(url.contains("X-Amz-Signature="), "{url}");
    let (out, dest) = c.run(c.with_key(&c.moto.sessions[0]), &url, &[]);
    c.same(&dest, &out, "presigned");
    let reqs = c.requests(0);
    assert!(
        reqs.len() >= 4 && reqs.iter().all(|r| r["auth"] == "query" && r["token"] == false),
        "{reqs:?}"
    );
    let bad = url.replace("X-Amz-Signature=", "X-Amz-Signature=0");
    let (out, _) = c.run(c.cmd(), &bad, &[]);
    fails_in_one_line(&out, "X-Amz-Signature=0", &["403"], "tampered presigned URL");
}

/// `--no-sign-request`: a public bucket is read without credentials (none sent, though the
/// environment has some); a private one is refused with S3's AccessDenied.
#[test]
fn no_sign_request_reads_a_public_bucket() {
    let Some(c) = set_up("no_sign_request_reads_a_public_bucket") else { return };
    let tar = archive(7);
    c.moto.put(PUBLIC, &c.key, &tar);
    let public = format!("s3://{PUBLIC}/{}", c.key);
    let td = &c.td;
    let want = {
        let gnu = td.fresh("gnu-public");
        let file = td.write("public.tar", &tar);
        assert!(Cmd::new("tar").extract(&file, &gnu).run().success());
        snapshot(&gnu)
    };
    let (out, dest) = c.run(c.with_key(&c.moto.user), &public, &["--no-sign-request"]);
    assert!(out.success(), "{}", out.describe());
    assert_same(
        &want,
        "GNU tar",
        &snapshot(&dest),
        "fastuntar",
        &Compare::extraction(c.started),
        "public",
    );
    let reqs = gets(c.moto.log(&format!("/{PUBLIC}/{}", c.key)));
    assert!(reqs.len() >= 4 && reqs.iter().all(|r| r["auth"] == "none"), "{reqs:?}");
    let (out, _) = c.run(c.with_key(&c.moto.user), &c.operand(), &["--no-sign-request"]);
    fails_in_one_line(&out, &c.operand(), &["403", "AccessDenied"], "private, unsigned");
    // A public object as the mirror of an http archive (issue 42): --no-sign-request is
    // taken for it, it is admitted and read unsigned, and the tree is the same.
    let before = gets(c.moto.log(&format!("/{PUBLIC}/{}", c.key))).len();
    let http = crate::util::http::Server::start(tar.clone(), Default::default());
    let url = http.url(crate::util::http::ARCHIVE);
    let flags = ["--no-sign-request", "--mirror", &public];
    let (out, dest) = c.run(c.with_key(&c.moto.user), &url, &flags);
    assert!(out.success(), "{}", out.describe());
    let json: Value = serde_json::from_str(out.stdout_str().trim()).unwrap();
    let states: Vec<&Value> =
        json["sources"].as_array().unwrap().iter().map(|s| &s["state"]).collect();
    assert_eq!(states, ["in use", "in use"], "{json}");
    assert_same(
        &want,
        "GNU tar",
        &snapshot(&dest),
        "fastuntar",
        &Compare::extraction(c.started),
        "public mirror",
    );
    let reqs = gets(c.moto.log(&format!("/{PUBLIC}/{}", c.key)));
    assert!(reqs.len() > before && reqs.iter().all(|r| r["auth"] == "none"), "{reqs:?}");
    // Only for s3://.
    let (out, _) = c.run(c.cmd(), &c.moto.presign(PRIVATE, &c.key), &["--no-sign-request"]);
    out.expect_code(2);
    assert!(out.stderr_str().contains("--no-sign-request applies to"), "{}", out.describe());
}

/// No credential in any output: a run with -v and --json, and the failures (no such key,
/// a wrong secret, an endpoint that is down, no credentials at all), with a session's key,
/// secret and token in the environment.
#[test]
fn no_credential_in_any_output() {
    let Some(c) = set_up("no_credential_in_any_output") else { return };
    let s = &c.moto.sessions[1];
    let (out, dest) = c.run(c.with_key(s), &c.operand(), &["-v", "--totals"]);
    c.same(&dest, &out, "-v --json");
    nothing_secret(&out, &[s], "-v --json");
    let missing = format!("s3://{PRIVATE}/t/none.tar");
    let (out, _) = c.run(c.with_key(s), &missing, &["-v"]);
    fails_in_one_line(&out, &missing, &["404", "NoSuchKey"], "no such key");
    nothing_secret(&out, &[s], "no such key");
    let wrong = Key { secret: "wrong".into(), ..s.clone() };
    let (out, _) = c.run(c.with_key(&wrong), &c.operand(), &["-v"]);
    nothing_secret(&out, &[s, &wrong], "wrong secret");
    let mut cmd = c.with_key(s);
    cmd.env("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1");
    let (out, _) = c.run(cmd, &c.operand(), &["-v"]);
    nothing_secret(&out, &[s], "endpoint down");
    let (out, _) = c.run(c.cmd(), &c.operand(), &["-v"]);
    fails_in_one_line(&out, &c.operand(), &["no AWS credentials found"], "none");
}

/// A redirect from the endpoint to another host drops the signature: the endpoint (a stand-in)
/// got a signed request; the host it redirected to got no Authorization and no x-amz-*
/// header, and served the archive.
#[test]
fn a_redirect_to_another_host_drops_credentials() {
    let test = "a_redirect_to_another_host_drops_credentials";
    if !util::have_tools(test, &["tar"]) {
        return;
    }
    let td = TestDir::new(test);
    let tar = archive(42);
    let other = util::http::Server::start(tar.clone(), util::http::Faults::default());
    let to = other.url_as("localhost", util::http::ARCHIVE);
    let endpoint = StandIn::start(move |_| Response::new(307, "").header("Location", &to));
    let mut cmd = util::fastuntar();
    for v in AWS_VARS {
        cmd.env_remove(v);
    }
    cmd.env("HOME", td.path())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL_S3", endpoint.url(""))
        .env("AWS_ACCESS_KEY_ID", "AKIAREDIRECTTEST0000")
        .env("AWS_SECRET_ACCESS_KEY", "secret-never-sent")
        .env("AWS_SESSION_TOKEN", "token-never-sent");
    let dest = td.fresh("dest");
    let out =
        cmd.args(["-x", "-v", "-f", "s3://bucket/snap.tar", "-C"]).arg(&dest).args(PIECES).run();
    assert!(out.success(), "{}", out.describe());
    let first = endpoint.seen();
    assert!(!first.is_empty());
    let auth = first[0].header("authorization").unwrap_or("");
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIAREDIRECTTEST0000/"), "{first:?}");
    assert_eq!(first[0].header("x-amz-security-token"), Some("token-never-sent"));
    let seen = other.seen();
    assert!(seen.len() >= 2, "{seen:?}");
    for r in &seen {
        assert!(
            r.authorization.is_none() && r.amz_headers.is_empty(),
            "credentials went to another host: {r:?}"
        );
    }
    assert!(out.stderr_str().contains("redirected to http://localhost:"), "{}", out.describe());
    assert!(
        !out.stderr_str().contains("secret-never-sent")
            && !out.stderr_str().contains("token-never-sent")
    );
}

/// Resume (issue 30) of an s3:// restore: killed once a resume point is on disk, run again:
/// the tree is GNU tar's, the second run's requests start past the point (nothing before it
/// fetched again) and are sent If-Range with the ETag, and the state file holds no credential.
#[test]
fn resume_after_a_kill() {
    let Some(c) = set_up("resume_after_a_kill") else { return };
    let s = &c.moto.sessions[0];
    let dest = c.td.fresh("dest");
    let args = |cmd: &mut Cmd| {
        cmd.args(["-x", "-f", &c.operand(), "-C"])
            .arg(&dest)
            .args(PIECES)
            .args(["--writeback-every", "64K"]);
    };
    let mut k = Cmd::new(util::fastuntar_path());
    for v in AWS_VARS {
        k.env_remove(v);
    }
    k.env("HOME", c.td.join("home"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL_S3", &c.moto.endpoint)
        .env("AWS_REGION", &c.moto.region)
        .env("AWS_ACCESS_KEY_ID", &s.id)
        .env("AWS_SECRET_ACCESS_KEY", &s.secret)
        .env("AWS_SESSION_TOKEN", s.token.as_deref().unwrap());
    args(&mut k);
    let killed = k.arg("--debug-kill-at=renamed:1").run();
    assert_eq!(killed.signal, Some(libc::SIGKILL), "{}", killed.describe());
    let state = std::fs::read(dest.join(".fastuntar-resume")).expect("a state file");
    let text = String::from_utf8_lossy(&state);
    for secret in [&s.id, &s.secret, s.token.as_ref().unwrap()] {
        assert!(!text.contains(secret.as_str()), "a credential in the state file");
    }
    let before = c.requests(0).len();
    let mut again = c.with_key(s);
    args(&mut again);
    let out = again.arg("--json").run();
    c.same(&dest, &out, "resumed");
    assert!(!dest.join(".fastuntar-resume").exists());
    let reqs = c.requests(before);
    let starts: Vec<u64> = reqs
        .iter()
        .map(|r| crate::util::http::parse_range(r["range"].as_str().unwrap()).unwrap().0)
        .collect();
    assert!(starts.iter().all(|&s| s > 0), "the resumed run starts past the point: {starts:?}");
    assert!(out.stderr_str().contains("resumed at member"), "{}", out.describe());
}

/// An S3 object as a mirror of an http archive, and as the archive beside an http mirror:
/// both are admitted (same length, the same first bytes), the object serves pieces (the http
/// server is capped at 2 MB/s, so the faster object gets its share, and in the second run
/// nearly all), every request to the object is signed with the user's key, and the tree is
/// GNU tar's. With a wrong secret the object is dropped with one line (403) and the run goes
/// on.
#[test]
fn s3_as_a_mirror() {
    use crate::util::http::{ARCHIVE, Faults, Server};
    let Some(c) = set_up("s3_as_a_mirror") else { return };
    let m = c.moto;
    let tar = std::fs::read(c.td.join("oracle.tar")).unwrap();
    let capped = Faults { rate: Some(2_000_000), ..Faults::default() };
    let http = Server::start(tar, capped);
    let url = http.url(ARCHIVE);
    for (archive, mirror, s3_index) in
        [(url.clone(), c.operand(), 1), (c.operand(), url.clone(), 0)]
    {
        let before = c.requests(0).len();
        let (out, dest) = c.run(c.with_key(&m.user), &archive, &["--mirror", &mirror]);
        c.same(&dest, &out, &format!("s3 as source {s3_index}"));
        let json: Value = serde_json::from_str(out.stdout_str().trim()).unwrap();
        let sources = json["sources"].as_array().unwrap();
        assert_eq!(sources.len(), 2, "{json}");
        for s in sources {
            assert_eq!(s["state"], "in use", "{json}");
        }
        let s3_bytes = sources[s3_index]["bytes"].as_u64().unwrap();
        assert!(s3_bytes >= 256 << 10, "the object served pieces: {json}");
        let reqs = c.requests(before);
        assert!(reqs.len() >= 2, "the sample and a piece at least: {reqs:?}");
        only(&reqs, &m.user.id);
        nothing_secret(&out, &[&m.user], "s3 mirror");
    }
    let wrong = Key { secret: format!("{}x", &m.user.secret[1..]), ..m.user.clone() };
    let (out, dest) = c.run(c.with_key(&wrong), &url, &["--mirror", &c.operand()]);
    c.same(&dest, &out, "a mirror with a wrong secret");
    let lines = out.diagnostics();
    assert_eq!(lines.len(), 1, "one line for the refused mirror\n{}", out.describe());
    assert!(lines[0].contains(&c.operand()) && lines[0].contains("403"), "{lines:?}");
    nothing_secret(&out, &[&wrong, &m.user], "wrong secret");
}
