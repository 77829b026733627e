//! A small HTTP/1.1 server on 127.0.0.1 whose answers a test writes as a function of the
//! request: the stand-ins for STS, the container credentials agent and EC2 instance metadata,
//! and an S3 endpoint that redirects (tests/suite/s3.rs). Every request is kept (method, path,
//! headers, body) for the test to look at. One request a connection (`Connection: close`);
//! stopped when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A request as the stand-in read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// An answer: status, headers, body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response { status, headers: Vec::new(), body: body.into() }
    }

    pub fn header(mut self, k: &str, v: &str) -> Response {
        self.headers.push((k.into(), v.into()));
        self
    }
}

type Handler = dyn Fn(&Request) -> Response + Send + Sync;

pub struct StandIn {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

/// Connections accepted before the stand-in refuses more: bounds a runaway client loop.
const MAX_CONNECTIONS: usize = 2000;

impl StandIn {
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (sn, sp) = (seen.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            for (n, conn) in listener.incoming().enumerate() {
                if sp.load(Ordering::Relaxed) || n >= MAX_CONNECTIONS {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (sn, h) = (sn.clone(), handler.clone());
                std::thread::spawn(move || serve(conn, &sn, &*h));
            }
        });
        StandIn { addr, seen, stop, accept: Some(accept) }
    }

    /// `http://127.0.0.1:PORT` and `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.addr.port())
    }

    pub fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: TcpStream, seen: &Mutex<Vec<Request>>, handler: &Handler) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let (req, body_start) = loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(len)) = r.parse(&buf) {
            let req = Request {
                method: r.method.unwrap_or("").to_string(),
                path: r.path.unwrap_or("").to_string(),
                headers: r
                    .headers
                    .iter()
                    .map(|h| {
                        (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned())
                    })
                    .collect(),
                body: Vec::new(),
            };
            break (req, len);
        }
        let mut chunk = [0u8; 4096];
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 64 << 10 {
            return;
        }
    };
    let mut req = req;
    let want: usize =
        req.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0).min(1 << 20);
    let mut body = buf[body_start..].to_vec();
    while body.len() < want {
        let mut chunk = [0u8; 4096];
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    req.body = body;
    seen.lock().unwrap().push(req.clone());
    let resp = handler(&req);
    let mut head = format!(
        "HTTP/1.1 {} X\r\nConnection: close\r\nContent-Length: {}\r\n",
        resp.status,
        resp.body.len()
    );
    for (k, v) in &resp.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(&resp.body);
    let _ = conn.flush();
}
