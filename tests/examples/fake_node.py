#!/usr/bin/env python3
"""A stand-in for verdict-node's ingest API on a Unix socket, answering by room id what the real
node answers only in rare moments, so that each example client is seen handling every documented
answer and the traps of issue-worthy moments:

    room 200   200, duplicate (the node still holds the first copy)
    room 400   400 INVALID_ARGUMENT        room 401   401 UNAUTHENTICATED
    room 404   404 NOT_FOUND               room 405   405 METHOD_NOT_ALLOWED
    room 413   413 PAYLOAD_TOO_LARGE       room 415   415 UNSUPPORTED_MEDIA_TYPE
    room 422   422 IDEMPOTENCY_MISMATCH    room 500   500 from something else (text/html)
    room 503   503 UNAVAILABLE with Retry-After: 1 the first time, then 201
    room 666   the first time, the request is read and the connection closed without an answer
               (the node's idle close meeting a request), then 201
    any other  201, stored
    batches: room 7001's item is a retryable problem the first time, then stored; room 7002's is
    INVALID_ARGUMENT; any other is stored.

Every request is appended to LOG as one JSON line, {"path": ..., "rooms": [...]}.
    fake_node.py SOCKET LOG
"""
import http.server
import json
import os
import socketserver
import sys
import threading

socket_path, log_path = sys.argv[1], sys.argv[2]
lock = threading.Lock()
seen = {}  # room -> times asked

PROBLEMS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
            405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE",
            422: "IDEMPOTENCY_MISMATCH", 503: "UNAVAILABLE"}


def times(room):
    with lock:
        seen[room] = seen.get(room, 0) + 1
        return seen[room]


def stored(room, duplicate=False):
    return {"room_id": str(room), "shard": 1, "sequence": str(room), "duplicate": duplicate}


def problem(status, detail="fake node"):
    return {"type": "about:blank", "title": PROBLEMS[status], "status": status,
            "code": PROBLEMS[status], "retryable": status == 503, "detail": detail}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, document, content_type="application/json", headers=()):
        body = (json.dumps(document) if not isinstance(document, str) else document).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        results = body["results"] if self.path == "/v1/results:batch" else [body]
        rooms = [int(r["room_id"]) for r in results]
        with lock, open(log_path, "a") as log:
            log.write(json.dumps({"path": self.path, "rooms": rooms}) + "\n")
        if self.path == "/v1/results:batch":
            items = []
            for room in rooms:
                if room == 7001 and times(room) == 1:
                    items.append({"problem": {"code": "UNAVAILABLE", "status": 503, "retryable": True,
                                              "detail": "fsyncs lag behind"}})
                elif room == 7002:
                    items.append({"problem": {"code": "INVALID_ARGUMENT", "status": 400,
                                              "retryable": False, "detail": "fake refusal"}})
                else:
                    items.append({"stored": stored(room)})
            return self.answer(200, {"items": items})
        room = rooms[0]
        if room == 666 and times(room) == 1:
            self.close_connection = True  # read, and closed without an answer
            return
        if room == 503:
            if times(room) == 1:
                return self.answer(503, problem(503), "application/problem+json",
                                   [("Retry-After", "1")])
            return self.answer(201, stored(room))
        if room == 200:
            return self.answer(200, stored(room, duplicate=True))
        if room == 500:
            return self.answer(500, "<html>bad gateway</html>", "text/html")
        if room in PROBLEMS:
            return self.answer(room, problem(room), "application/problem+json")
        self.answer(201, stored(room))


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


if os.path.exists(socket_path):
    os.unlink(socket_path)
with Server(socket_path, Handler) as server:
    print("listening", flush=True)
    server.serve_forever()
