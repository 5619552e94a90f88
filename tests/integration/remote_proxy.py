#!/usr/bin/env python3
"""remote_proxy.py: a fault-injecting HTTP proxy on loopback for tests/integration/remote_http.sh. It forwards GETs
(with their Range) to an upstream server and, by a fixed pattern over the requests it sees (so that a run is
reproducible), answers some with 503 and cuts others mid-body (the headers promise the whole range; half of it is
sent, then the connection is closed). With RATE (bytes/s, 0: none) every body is paced through one shared budget of
RATE in 16 kB chunks: a full link that the requests in flight share. And with DELAYFILE, it waits the seconds that
file holds (read at each request; missing: none) before it answers: a latency the test raises during a run.
Usage: remote_proxy.py PORTFILE UPSTREAM STATSFILE [EVERY503 EVERYCUT [RATE [DELAYFILE]]]
(UPSTREAM: a port on 127.0.0.1, or HOST:PORT; bench/remote.py's fault check points it at its namespace's nginx).
It writes the port it listens on to PORTFILE and its counts to STATSFILE after each request; with PROXY_LOG in the
environment, a line per answered request to that file: when it came and when its body was sent (time.monotonic), its
path and its Range."""
import http.client
import http.server
import os
import socket
import sys
import threading
import time

port_file, stats_file = sys.argv[1], sys.argv[3]
up_host, _, up_port = sys.argv[2].rpartition(":")
up_host, upstream = up_host or "127.0.0.1", int(up_port)
every_503 = int(sys.argv[4]) if len(sys.argv) > 4 else 20  # 5% of the requests
every_cut = int(sys.argv[5]) if len(sys.argv) > 5 else 50  # 2%
rate = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
delay_file = sys.argv[7] if len(sys.argv) > 7 else None
lock = threading.Lock()
pace_lock = threading.Lock()
pace_next = [0.0]  # when the shared link is free again (time.monotonic)


def delay():
    try:
        with open(delay_file) as f:
            return max(0.0, min(float(f.read().strip() or 0), 5.0))
    except (TypeError, OSError, ValueError):
        return 0.0


def send(w, data):
    """Writes data, paced through the shared budget when RATE is set: each chunk waits for its slot on the link."""
    if not rate:
        w.write(data)
        return
    for i in range(0, len(data), 16384):
        chunk = data[i : i + 16384]
        with pace_lock:
            start = max(time.monotonic(), pace_next[0])
            pace_next[0] = start + len(chunk) / rate
            end = pace_next[0]
        time.sleep(max(0.0, end - time.monotonic()))
        w.write(chunk)
        w.flush()
counts = {"requests": 0, "503": 0, "cut": 0, "ok": 0}
log_file = os.environ.get("PROXY_LOG")


def log_request(t0, path, rng):
    if log_file:
        with lock:
            with open(log_file, "a") as f:
                f.write("%.6f %.6f %s %s\n" % (t0, time.monotonic(), path, rng or "-"))


def note(kind):
    with lock:
        counts[kind] += 1
        with open(stats_file, "w") as f:
            f.write(" ".join("%s=%d" % kv for kv in sorted(counts.items())) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        t0 = time.monotonic()
        with lock:
            counts["requests"] += 1
            n = counts["requests"]
        d = delay()
        if d:
            time.sleep(d)
        if n % every_503 == 3:
            note("503")
            body = b"busy"
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        conn = http.client.HTTPConnection(up_host, upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("range", "if-match")}
        conn.request("GET", self.path, headers=headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() in ("content-length", "content-range", "etag", "last-modified", "content-type"):
                self.send_header(k, v)
        self.end_headers()
        if n % every_cut == 7 and len(data) > 1:
            note("cut")
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        note("ok")
        send(self.wfile, data)
        log_request(t0, self.path, self.headers.get("Range"))


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
