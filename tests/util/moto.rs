//! The S3 server the S3 suite talks to (tests/suite/s3.rs): `moto_s3.py` beside this file,
//! moto's server on 127.0.0.1 with its signature checks enforced, started once for the test
//! process and driven through its stdin (put an object, presign a URL, read its request log,
//! delay requests). It stops when this process ends (its stdin closes), or after its own
//! watchdog. Without python3 and moto[server] the tests print SKIP (under CI: a failure;
//! scripts/test.sh installs moto in a venv and names its python in FASTUNTAR_TEST_PYTHON).

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

/// How long the server may take to start and set its fixtures up (moto imports in ~0.6 s,
/// sets up in ~0.5 s on an idle machine), and to answer one command.
const START: Duration = Duration::from_secs(90);
const ANSWER: Duration = Duration::from_secs(60);

/// The private bucket (every request signed) and the public one (anonymous GETs served).
pub const PRIVATE: &str = "private";
pub const PUBLIC: &str = "public";

/// An access key moto knows.
#[derive(Clone, Debug)]
pub struct Key {
    pub id: String,
    pub secret: String,
    pub token: Option<String>,
}

pub struct Moto {
    pub endpoint: String,
    pub region: String,
    pub role: String,
    /// The IAM user's long-term key.
    pub user: Key,
    /// Two sessions of the role (temporary keys with a session token).
    pub sessions: Vec<Key>,
    /// Commands go one at a time; tests share the server and run at once.
    io: Mutex<(ChildStdin, Receiver<String>)>,
}

/// The python that has moto: FASTUNTAR_TEST_PYTHON (scripts/test.sh's venv), else python3.
fn python() -> String {
    std::env::var("FASTUNTAR_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn key(v: &Value) -> Key {
    let s = |k: &str| v[k].as_str().map(str::to_string);
    Key { id: s("id").unwrap(), secret: s("secret").unwrap(), token: s("token") }
}

fn start() -> Result<Moto, String> {
    let py = python();
    let probe = Command::new(&py).args(["-c", "import moto.server, boto3"]).output();
    match probe {
        Ok(o) if o.status.success() => {}
        _ => {
            return Err(format!(
                "{py} with moto[server] not installed (pip install 'moto[server]')"
            ));
        }
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/util/moto_s3.py");
    let mut child = Command::new(&py)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {py} {script}: {e}"))?;
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let first = lines.recv_timeout(START).map_err(|e| format!("moto did not start: {e:?}"))?;
    let v: Value = serde_json::from_str(&first).map_err(|e| format!("moto said {first:?}: {e}"))?;
    // The child is left to run: it ends when this process's end closes its stdin.
    std::mem::forget(child);
    Ok(Moto {
        endpoint: v["endpoint"].as_str().unwrap().to_string(),
        region: v["region"].as_str().unwrap().to_string(),
        role: v["role"].as_str().unwrap().to_string(),
        user: key(&v["user"]),
        sessions: v["sessions"].as_array().unwrap().iter().map(key).collect(),
        io: Mutex::new((stdin, lines)),
    })
}

/// The server, started at the first call; None (after a SKIP line, under CI a failure) when
/// moto is not installed.
pub fn moto(test: &str) -> Option<&'static Moto> {
    static MOTO: OnceLock<Result<Moto, String>> = OnceLock::new();
    match MOTO.get_or_init(start) {
        Ok(m) => Some(m),
        Err(why) => {
            super::skip(test, why);
            None
        }
    }
}

impl Moto {
    fn ask(&self, cmd: Value) -> Value {
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(io.0, "{cmd}").expect("moto's stdin");
        let line = match io.1.recv_timeout(ANSWER) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!("moto did not answer {cmd} in {ANSWER:?}"),
            Err(e) => panic!("moto is gone: {e}"),
        };
        let v: Value = serde_json::from_str(&line).expect("moto's answer is JSON");
        assert!(v.get("error").is_none(), "moto: {cmd} failed: {v}");
        v
    }

    /// Uploads `data` as `s3://bucket/key` (as the user, signed by boto3).
    pub fn put(&self, bucket: &str, key: &str, data: &[u8]) {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), data).unwrap();
        self.ask(json!({"op": "put", "bucket": bucket, "key": key, "file": file.path()}));
    }

    /// A presigned GET URL (SigV4 in the query string, by boto3) of `s3://bucket/key`.
    pub fn presign(&self, bucket: &str, key: &str) -> String {
        let v = self.ask(json!({"op": "presign", "bucket": bucket, "key": key, "expires": 600}));
        v["url"].as_str().unwrap().to_string()
    }

    /// The requests seen whose path starts with `prefix`: method, path, query, auth
    /// (`header`, `query`, `none`), key (the access key ID), token (a session token came),
    /// range.
    pub fn log(&self, prefix: &str) -> Vec<Value> {
        let v = self.ask(json!({"op": "log", "prefix": prefix}));
        v["requests"].as_array().unwrap().clone()
    }

    /// Each later request whose path starts with `prefix` waits `seconds` before it is served.
    pub fn delay(&self, prefix: &str, seconds: f64) {
        self.ask(json!({"op": "delay", "prefix": prefix, "seconds": seconds}));
    }
}
