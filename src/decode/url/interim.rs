//! A layer on top of ureq's connections that hands their bytes to ureq at most `STEP` at a
//! time: the workaround for interim answers (issue 40).
//!
//! ureq 3.5.2 reads a response head by filling its input buffer (128 KiB) and parsing it; when
//! what it parsed was an interim answer (`100 Continue`, `103 Early Hints`), it checks the
//! whole buffer against the header bound (`run.rs` `recv_response`: `check_size =
//! input.len()` when no final answer came), so the final answer's head and body bytes that
//! came in the same read count as header, and the request fails with "response header is too
//! big: 128176 > 65536". A server that flushes its 1xx with the answer (most do) failed most
//! requests (`tests/suite/url.rs` `interim_answers_before_the_answer`: 15 of 20 runs without
//! this layer). Remove it once ureq checks only what it parsed after a 1xx (reported
//! upstream with issue 40).
//!
//! Handed over at most `STEP` bytes a read, ureq holds at most the interim answer's head and
//! `STEP` more when it parses one, so a head under `MAX_HEADER_BYTES - STEP` (32 KiB; real
//! ones are under 1 KiB) never trips the bound; a final head that does not end keeps coming
//! `STEP` at a time until past the bound, which still stops it.
//!
//! Only an answer that starts with an interim status needs that. The layer reads each
//! answer's status line as it passes (`httparse`, the parser ureq-proto itself uses; a head
//! cut short waits for more): after an interim status the whole answer stays stepped; after a
//! final one (2xx-5xx), once ureq has consumed what was stepped, the layer steps aside and
//! ureq reads the connection below (TCP, TLS) through its own buffers, whole reads and no
//! copy here, until the next request on the connection. Stepping every byte cost one more
//! copy and reads of 32 KiB: `-t` of a 600 MiB tar from nginx on 127.0.0.1 took 0.53 CPU s
//! against 0.49 without this layer with 8 connections (issue 40; medians of 5 interleaved
//! rounds, load 10); what stepping aside saves is in docs/PERFORMANCE.md ("The fast link").

use std::fmt;
use std::io::{Read, Write};

use ureq::Error;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport, TransportAdapter,
};

/// The most header bytes a response may have (ureq stops reading at this bound and fails the
/// request: a server sending endless headers costs at most this much). Real responses carry
/// under 2 KiB; S3's and CDNs' with their x-amz-*/cf-* headers under 4 KiB.
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// The most bytes handed to ureq a read: half the header bound (`MAX_HEADER_BYTES`),
/// so an interim head of up to the other half and what follows it fit under the bound.
pub const STEP: usize = MAX_HEADER_BYTES / 2;

/// The connector, last in ureq's chain (after TCP, a CONNECT proxy, TLS): wraps each
/// connection in `Stepped`.
#[derive(Debug)]
pub struct Stepping;

impl<In: Transport> Connector<In> for Stepping {
    type Out = Stepped<In>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, Error> {
        Ok(chained.map(|inner| Stepped {
            buffers: LazyBuffers::new(
                details.config.input_buffer_size(),
                details.config.output_buffer_size(),
            ),
            inner: TransportAdapter::new(inner, details.current_time.clone()),
            answer: Answer::Head,
            head: Vec::with_capacity(STATUS_LINE),
        }))
    }
}

/// The bytes of an answer's start looked at for its status line: "HTTP/1.1 103 " is 13.
const STATUS_LINE: usize = 64;

/// Where the answer being read stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// Its status is not read yet: stepped, its first bytes kept in `head`.
    Head,
    /// It started with an interim status (or with bytes that are no status line: ureq will
    /// say what is wrong with them): stepped to the next request.
    Interim,
    /// A final status: stepped until ureq has consumed what this layer holds, then `Through`.
    Final,
    /// ureq reads the connection below through its buffers.
    Through,
}

/// A connection whose answers' heads reach ureq at most `STEP` a read.
pub struct Stepped<In: Transport> {
    buffers: LazyBuffers,
    inner: TransportAdapter<In>,
    answer: Answer,
    /// The first bytes of the answer (up to `STATUS_LINE`), while its status is not read.
    head: Vec<u8>,
}

impl<In: Transport> fmt::Debug for Stepped<In> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stepped")
            .field("inner", &self.inner.inner())
            .field("answer", &self.answer)
            .finish()
    }
}

/// Keeps the answer's first bytes (`more` having just come after `head`) and reads its status
/// from them.
fn look(head: &mut Vec<u8>, more: &[u8]) -> Answer {
    let want = STATUS_LINE - head.len();
    head.extend_from_slice(&more[..more.len().min(want)]);
    match status(head) {
        Answer::Head if head.len() == STATUS_LINE => Answer::Interim,
        seen => seen,
    }
}

/// What the first bytes of an answer say: `Head` while the status line is cut short.
fn status(head: &[u8]) -> Answer {
    let mut headers = [httparse::EMPTY_HEADER; 4];
    let mut parsed = httparse::Response::new(&mut headers);
    // The status code is set once its three digits are read, whatever follows (a head cut
    // short, more headers than the four slots): only an error before it leaves it unset.
    let result = parsed.parse(head);
    match parsed.code {
        Some(code) if (100..200).contains(&code) => Answer::Interim,
        Some(_) => Answer::Final,
        None if result.is_err() => Answer::Interim,
        None => Answer::Head,
    }
}

impl<In: Transport> Transport for Stepped<In> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        match self.answer {
            Answer::Through => self.inner.get_mut().buffers(),
            _ => &mut self.buffers,
        }
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        // A request: written from the buffers ureq was given, and its answer starts afresh.
        if self.answer == Answer::Through {
            self.inner.get_mut().transmit_output(amount, timeout)?;
        } else {
            self.inner.set_timeout(timeout);
            self.inner.write_all(&self.buffers.output()[..amount])?;
        }
        self.answer = Answer::Head;
        self.head.clear();
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        if self.answer == Answer::Final && self.buffers.input().is_empty() {
            // ureq has consumed every byte stepped to it: the rest of the answer (and what
            // the connection below already holds of it) is read through that connection's
            // buffers.
            self.answer = Answer::Through;
            if !self.inner.get_mut().buffers().input().is_empty() {
                return Ok(true);
            }
        }
        if self.answer == Answer::Through {
            return self.inner.get_mut().await_input(timeout);
        }
        self.inner.set_timeout(timeout);
        let free = self.buffers.input_append_buf();
        let room = free.len().min(STEP);
        if room == 0 {
            // As a socket read into a full buffer: no progress (ureq's TcpTransport).
            return Ok(false);
        }
        let n = self.inner.read(&mut free[..room])?;
        if self.answer == Answer::Head {
            let came = &self.buffers.input_append_buf()[..n];
            self.answer = look(&mut self.head, came);
        }
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    /// Open and reusable: nothing left unread here or below (bytes after a body mean the
    /// connection is not at a response boundary, as ureq's own check of its buffer) and the
    /// socket open.
    fn is_open(&mut self) -> bool {
        let inner = self.inner.get_mut();
        self.buffers.input().is_empty() && inner.buffers().input().is_empty() && inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.get_ref().is_tls()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which answers are stepped to their end (interim, or no status line) and which are let
    /// through once their status is read, however their first bytes are cut.
    #[test]
    fn status_lines() {
        let cases: &[(&[u8], Answer)] = &[
            (b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/10\r\n\r\n", Answer::Final),
            (b"HTTP/1.1 200 OK\r\n", Answer::Final),
            (b"HTTP/1.1 404 ", Answer::Final),
            (b"HTTP/1.0 503", Answer::Final),
            (b"HTTP/1.0 50", Answer::Head),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 206 Partial", Answer::Interim),
            (b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n", Answer::Interim),
            (b"HTTP/1.1 1", Answer::Head),
            (b"HTTP/", Answer::Head),
            (b"", Answer::Head),
            (b"\r\n\r\n", Answer::Head),
            (b"SSH-2.0-OpenSSH\r\n", Answer::Interim),
            (b"HTTP/1.1 2x0 OK\r\n", Answer::Interim),
        ];
        for (bytes, want) in cases {
            assert_eq!(&status(bytes), want, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    /// The status read across reads of any size, and a head that names none within
    /// `STATUS_LINE` bytes stays stepped.
    #[test]
    fn status_across_reads() {
        let answer = b"HTTP/1.1 100 Continue\r\n\r\n";
        let mut head = Vec::new();
        let mut seen = Vec::new();
        for b in answer.chunks(1) {
            seen.push(look(&mut head, b));
        }
        assert_eq!(seen[..11], [Answer::Head; 11], "{seen:?}");
        assert_eq!(seen[11], Answer::Interim);
        // Empty lines before a status line are passed over (RFC 9112 2.2), and never end.
        let mut head = Vec::new();
        let long = b"\r\n".repeat(STATUS_LINE);
        assert_eq!(look(&mut head, &long[..STATUS_LINE - 1]), Answer::Head);
        assert_eq!(look(&mut head, &long[STATUS_LINE - 1..]), Answer::Interim);
        assert_eq!(head.len(), STATUS_LINE);
    }
}
