"""A tiny ticket-triage service: the system under test of the `http` example.

It stands in for your deployed endpoint. Start it in one terminal:

    python service.py                 # http://127.0.0.1:8765/triage
    python service.py --port 9000     # another port (then edit oloproof.yaml)
    python service.py --flaky         # each ticket's first request gets 503 + Retry-After: 1

POST /triage with {"text": "..."} answers

    {"result": {"label": "billing", "priority": "normal"},
     "usage": {"prompt_tokens": 12, "completion_tokens": 3}}

It wants `Authorization: Bearer <token>`, where the token is $INTAKE_TOKEN in
the service's environment, or `demo-token` when that is not set. Only the
standard library is used.
"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RULES = [
    ("billing", ("invoice", "charged", "charge", "refund", "payment")),
    ("bug", ("crash", "error", "broken", "doesn't work", "blank")),
    ("account", ("password", "log in", "login", "2fa", "email address")),
]
URGENT = ("urgent", "asap", "down", "all users", "production")


def triage(text):
    lowered = text.lower()
    label = "other"
    for name, keywords in RULES:
        if any(word in lowered for word in keywords):
            label = name
            break
    priority = "high" if any(word in lowered for word in URGENT) else "normal"
    return {"label": label, "priority": priority}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    token = "demo-token"
    delay_s = 0.05
    flaky = False
    seen = set()
    seen_lock = threading.Lock()

    def log_message(self, format, *args):
        pass  # quiet

    def reply(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/triage":
            return self.reply(404, {"error": "POST /triage"})
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            return self.reply(401, {"error": "missing or wrong bearer token"})
        try:
            text = json.loads(raw)["text"]
        except (ValueError, KeyError, TypeError):
            return self.reply(400, {"error": 'send {"text": "..."}'})
        if self.flaky:
            with self.seen_lock:
                first = text not in self.seen
                self.seen.add(text)
            if first:
                return self.reply(503, {"error": "busy, try again"}, [("Retry-After", "1")])
        time.sleep(self.delay_s)  # pretend to think
        result = triage(text)
        usage = {"prompt_tokens": len(text.split()), "completion_tokens": 3}
        self.reply(200, {"result": result, "usage": usage})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per answer")
    parser.add_argument("--flaky", action="store_true", help="503 on each ticket's first request")
    args = parser.parse_args()
    Handler.token = os.environ.get("INTAKE_TOKEN") or "demo-token"
    Handler.delay_s = args.delay
    Handler.flaky = args.flaky
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"triage service on http://127.0.0.1:{server.server_port}/triage", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
