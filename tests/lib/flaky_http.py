#!/usr/bin/env python3
# flaky_http.py - an HTTP server on loopback that fails on purpose, for the
# endpoint library's retry and resume paths (tests/t/0120-endpoints.t).
#
#   flaky_http.py DIR     serve DIR on a free port; print the port on
#                         stdout, log requests to DIR/requests.log
#
# GET /NAME            the first GET of each file stops after half of it
#                      (the connection is closed); later ones honour
#                      Range and If-Range (ETag "v1")
# PUT /NAME            the first PUT of each name answers 503; later
#                      ones store the body as DIR/NAME.put
import http.server
import os
import sys

DIR = sys.argv[1]
LOG = open(os.path.join(DIR, "requests.log"), "a", buffering=1)
seen = {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def note(self):
        LOG.write("%s %s range=%s if-range=%s\n" % (
            self.command, self.path, self.headers.get("Range", "-"),
            self.headers.get("If-Range", "-")))

    def do_GET(self):
        self.note()
        path = os.path.join(DIR, os.path.basename(self.path))
        try:
            data = open(path, "rb").read()
        except OSError:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        first = ("GET", self.path) not in seen
        seen[("GET", self.path)] = True
        rng = self.headers.get("Range")
        if rng and self.headers.get("If-Range", '"v1"') == '"v1"':
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (
                start, len(data) - 1, len(data)))
            body = data[start:]
        else:
            self.send_response(200)
            body = data
        self.send_header("ETag", '"v1"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if first:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def do_PUT(self):
        self.note()
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        first = ("PUT", self.path) not in seen
        seen[("PUT", self.path)] = True
        if first:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(os.path.join(DIR, os.path.basename(self.path) + ".put"),
                  "wb") as f:
            f.write(body)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
