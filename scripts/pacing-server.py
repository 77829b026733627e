#!/usr/bin/env python3
"""A static file server whose every TCP connection is capped, for scripts/bench-url.sh.

    python3 scripts/pacing-server.py DIR PORT RATE_BYTES_PER_S

Mirrors and CDNs shape each connection. nginx's `limit_rate` limits each *request* instead,
and lets every request start with a full second's worth of its rate at once
(ngx_http_write_filter: rate * (now - start + 1) - sent), so a client that asks for many small
ranges on one kept-alive connection is barely limited. This server caps the connection itself:
SO_MAX_PACING_RATE on every accepted socket, which the kernel's TCP pacing enforces (on
loopback too: a single connection measured 49.7 MB/s at 50,000,000), whatever the requests.
Bodies go out with sendfile(2). GET and HEAD; Range (one range), If-Range with the ETag or the
Last-Modified date; ETag and Last-Modified from the file's size and mtime.
"""

import email.utils
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SO_MAX_PACING_RATE = 47  # include/uapi/asm-generic/socket.h


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, RATE)

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.serve(body=False)

    def do_GET(self):
        try:
            self.serve(body=True)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (a download stopped early)

    def serve(self, body):
        path = os.path.join(ROOT, os.path.basename(self.path.split("?")[0]))
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404)
            return
        with f:
            st = os.fstat(f.fileno())
            size = st.st_size
            etag = '"%x-%x"' % (st.st_mtime_ns, size)
            modified = email.utils.formatdate(st.st_mtime, usegmt=True)
            start, end, status = 0, size, 200
            rng = self.headers.get("Range")
            if_range = self.headers.get("If-Range")
            if rng and rng.startswith("bytes=") and if_range in (None, etag, modified):
                a, _, b = rng[6:].partition("-")
                try:
                    start = int(a)
                    end = min(int(b) + 1, size) if b else size
                except ValueError:
                    start, end = 0, size
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            self.send_response(status)
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", modified)
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if not body:
                return
            self.wfile.flush()
            at = start
            while at < end:
                n = os.sendfile(self.connection.fileno(), f.fileno(), at, min(end - at, 1 << 24))
                if n == 0:
                    break
                at += n


if __name__ == "__main__":
    ROOT, PORT, RATE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
