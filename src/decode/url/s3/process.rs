//! `credential_process` (a profile's): the command is run by `sh -c`, as the AWS SDKs run it
//! on Unix, with our standard input and standard error (it may ask for an MFA code there);
//! its standard output is JSON, `Version` 1 with `AccessKeyId`, `SecretAccessKey` and
//! optionally `SessionToken` and `Expiration`, and is never printed.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::credentials::{Credentials, Provider, from_json};
use crate::decode::url::failed::Failed;
use crate::decode::url::retry::Failure;

/// The most output read from the process (its JSON is under 2 KiB).
const OUTPUT_MAX: u64 = 64 << 10;

/// How long the process may run: long enough for a person to type an MFA code, bounded so a
/// process that hangs does not hang the run.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Process {
    pub command: String,
    /// Where it was configured (the profile), for messages.
    pub from: String,
}

impl Provider for Process {
    fn name(&self) -> String {
        format!("credential_process of {}", self.from)
    }

    fn fetch(&self) -> Result<Credentials, Failed> {
        let fail = |why: String| Failed::new(Failure::Protocol, why);
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::inherit())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| fail(format!("cannot run sh -c: {e}")))?;
        let out = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let r = out.take(OUTPUT_MAX + 1).read_to_end(&mut buf);
            r.map(|_| buf)
        });
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(fail(format!(
                        "still running after {} s; stopped",
                        PROCESS_TIMEOUT.as_secs()
                    )));
                }
                Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
            }
        };
        let output = reader.join().map_err(|_| fail("its output was lost".into()))?;
        let output = output.map_err(|e| fail(format!("reading its output: {e}")))?;
        if !status.success() {
            return Err(fail(format!("it failed ({status})")));
        }
        if output.len() as u64 > OUTPUT_MAX {
            return Err(fail(format!("more than {} KiB of output", OUTPUT_MAX >> 10)));
        }
        parse(&output).map_err(|f| fail(format!("its output: {}", f.text)))
    }
}

/// The process's output (pure).
pub fn parse(output: &[u8]) -> Result<Credentials, Failed> {
    let v: Value = serde_json::from_slice(output)
        .map_err(|e| Failed::new(Failure::Protocol, format!("not JSON ({e})")))?;
    if v.get("Version").and_then(Value::as_u64) != Some(1) {
        return Err(Failed::new(Failure::Protocol, "Version is not 1".to_string()));
    }
    from_json(output, "SessionToken")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_version_1_only() {
        let c =
            parse(br#"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","SessionToken":"T"}"#)
                .unwrap();
        assert_eq!((c.key_id.expose(), c.token.unwrap().expose()), ("A", "T"));
        assert!(c.expiry.is_none());
        assert!(parse(br#"{"Version":2,"AccessKeyId":"A","SecretAccessKey":"S"}"#).is_err());
        assert!(parse(b"AccessKeyId=A").is_err());
    }

    #[test]
    fn a_command_that_fails_or_prints_garbage() {
        let p = |c: &str| Process { command: c.into(), from: "profile t".into() }.fetch();
        let ok = p(r#"printf '{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S"}'"#).unwrap();
        assert_eq!(ok.secret.expose(), "S");
        assert!(p("exit 3").unwrap_err().text.contains("exit status: 3"));
        let e = p("echo secretish-output").unwrap_err().text;
        assert!(e.contains("not JSON") && !e.contains("secretish"), "{e}");
    }
}
