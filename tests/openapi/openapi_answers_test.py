#!/usr/bin/env python3
"""api/openapi.yaml documents every answer the node and the lobby serve, and only those.

    openapi_answers_test.py OPENAPI_YAML VERDICT_NODE VERDICT_LOBBY

Starts, on a database of its own (libpq's PG* environment names the server): a lobby; a node
posting to it, with a Unix-socket and a TCP ingest listener; a lobby whose database cannot be
reached, and a node delivering to that one (answers 503); and a lobby that takes one connection
at a time. Then sends each documented operation the requests that provoke its answers (the
ordinary ones, a bad body, no token, no Host header, a body over its limit, a GET with a body,
the wrong media type, conflicts, an unreachable database, a draining node, the connection cap)
and checks, operation by operation and for each server the operation is tagged with:

- every status served is documented for that operation;
- every documented status was served here, or is in PRODUCED_ELSEWHERE with the test that
  produces it;
- every documented path is routed (not the router's 404), on every listener of its server, and
  an unknown path is told apart (the negative control of that check);
- a method a path does not take is answered 405 (documented once, in info, not per operation).

Exits 1 with every disagreement listed. Quick: about ten seconds.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

# Answers the document lists that this test does not provoke, each with the test that does.
PRODUCED_ELSEWHERE = {
    ("lobby", "POST", "/v1/settlements", 500):
        "LobbyTest.SettlementTheDatabaseRefusesIsATerminalInternalProblemAndChangesNothing",
    ("lobby", "GET", "/v1/events", 410):
        "RetentionTest.EventCursorsTheFeedCannotContinueAreRefusedBeforeTheUpgrade",
    ("node", "GET", "/healthz", 503): "BattleNodeTest.HealthzReportsADeliveryLoopThatKeepsFailing",
    ("node", "POST", "/v1/outbox:redrive", 503):
        "IngestTest.RedriveIs503WhileOneRunsOrTheDiskIsFullAnd500OverDamage",
    ("node", "POST", "/v1/outbox:redrive", 500):
        "IngestTest.RedriveIs503WhileOneRunsOrTheDiskIsFullAnd500OverDamage",
    # The node's listeners run on the lobby's server core, whose connection cap is provoked here
    # on the lobby (the node has no flag to lower its cap of 1024).
    ("node", "GET", "/metrics", 503): "LobbyTest.ConnectionsOverTheCapAreRefused",
    ("lobby", "POST", "/v1/matches/{match_id}:void", 409):
        "VoidTest.BadVoidsAreRefusedAndChangeNothing",
}


def fail(message):
    sys.exit(f"FAIL: {message}")


class Listener:
    """Where to send requests: unix:PATH or HOST:PORT."""

    def __init__(self, name, address):
        self.name, self.address = name, address

    def connect(self):
        if self.address.startswith("unix:"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect(self.address[5:])
        else:
            host, port = self.address.rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=30)
        return s


def exchange(sock, method, target, headers=(), body=b"", host=True, length=None):
    """One HTTP/1.1 request on `sock`; (status, headers, body) of its answer."""
    lines = [f"{method} {target} HTTP/1.1"]
    if host:
        lines.append("Host: localhost")
    lines += [f"{k}: {v}" for k, v in headers]
    if length is None and (body or method == "POST"):
        length = len(body)
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.append("Connection: close")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head:
        return None, {}, b""
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in header_lines:
        k, _, v = line.partition(":")
        fields[k.strip().lower()] = v.strip()
    want = int(fields.get("content-length", "-1"))
    while want >= 0 and len(rest) < want:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(status_line.split()[1]), fields, rest


def request(listener, method, target, token=None, body=None, content_type="application/json",
            extra=(), host=True, length=None, raw=None):
    sock = listener.connect()
    try:
        headers = [("Accept", "application/json")]
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        if body is not None or raw is not None:
            headers.append(("Content-Type", content_type))
        headers += list(extra)
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        return exchange(sock, method, target, headers, payload, host, length)
    finally:
        sock.close()


def operations(spec):
    """{(tag, METHOD, path): documented statuses} and the parameters of each."""
    found = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            for tag in op.get("tags", []):
                found[(tag, method.upper(), path)] = {int(code) for code in op["responses"]}
    return found


class Process:
    def __init__(self, args, log):
        self.log = log
        self.proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT)

    def line(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, open(self.log).read(), re.M)
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        fail(f"no line /{pattern}/ in {self.log}:\n{open(self.log).read()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def until(what, check, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    fail(f"timed out waiting for {what}")


def main():
    openapi, node_bin, lobby_bin = sys.argv[1:4]
    spec = yaml.safe_load(open(openapi))
    documented = operations(spec)
    if len(documented) < 10:
        fail(f"only {len(documented)} operations found in {openapi}")

    work = tempfile.mkdtemp(prefix="openapi-answers-")
    db = f"verdict_openapi_{os.getpid()}"
    subprocess.run(["createdb", db], check=True)
    processes = []

    def start(args, log):
        p = Process(args, os.path.join(work, log))
        processes.append(p)
        return p

    try:
        return run(spec, documented, node_bin, lobby_bin, work, db, start)
    finally:
        for p in reversed(processes):
            p.stop()
        subprocess.run(["dropdb", "--if-exists", "--force", db])
        subprocess.run(["rm", "-rf", work])


def run(spec, documented, node_bin, lobby_bin, work, db, start):
    admin, node_token, ingest_token = "admin-secret", "node-secret", "ingest-secret"
    subprocess.run([lobby_bin, "--db", f"dbname={db}", "migrate"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def lobby(log, conninfo, *more):
        p = start([lobby_bin, "--db", conninfo, "serve", "--listen", "127.0.0.1:0",
                   "--node-token", f"node-a={node_token}", "--admin-token", admin, *more], log)
        port = p.line(r"^listening on 127\.0\.0\.1:(\d+)$").group(1)
        return p, Listener(log, f"127.0.0.1:{port}")

    lobby_proc, lobby_l = lobby("lobby.log", f"dbname={db}")
    _, dead_l = lobby("dead-lobby.log", "host=/nonexistent dbname=none connect_timeout=1")
    capped_proc, capped_l = lobby("capped-lobby.log", f"dbname={db}", "--max-connections", "1")

    def node(name, lobby_url, *more):
        sock = os.path.join(work, f"{name}.sock")
        p = start([node_bin, "run", "--node-id", "node-a", "--outbox", os.path.join(work, name),
                   "--lobby", lobby_url, "--token", node_token, "--ingest-listen", f"unix:{sock}",
                   "--ingest-listen", "127.0.0.1:0", "--ingest-token", ingest_token, *more],
                  f"{name}.log")
        port = p.line(r"^ingest on port (\d+)$").group(1)
        until(f"{name}'s socket", lambda: os.path.exists(sock))
        return p, Listener(f"{name} unix", f"unix:{sock}"), Listener(f"{name} tcp", f"127.0.0.1:{port}")

    node_proc, node_unix, node_tcp = node("node", f"http://{lobby_l.address}")
    drain_proc, drain_unix, _ = node("draining-node", f"http://{dead_l.address}",
                                     "--drain-on-exit", "60")

    served = {}  # (tag, METHOD, path) -> {status: what provoked it}

    def record(tag, method, path, status, what):
        if status is None:
            fail(f"{tag} {method} {path} ({what}): no answer")
        served.setdefault((tag, method, path), {}).setdefault(status, what)

    def ask(tag, listener, method, path, target=None, what="", **kw):
        status, headers, body = request(listener, method, target or path, **kw)
        record(tag, method, path, status, what or f"{method} {target or path}")
        return status, headers, body

    def result(room, winner=1, ended="1700000000000", players=((1, 1), (2, 2))):
        return {"room_id": str(room), "outcome": "SETTLED", "winner_team": winner,
                "ended_at_ms": ended,
                "players": [{"player_id": str(room * 10 + p), "team": t} for p, t in players]}

    def allocate(listener, room, token=admin, **kw):
        return ask("lobby", listener, "POST", "/v1/rooms", token=token, body={
            "room_id": str(room), "node_id": "node-a",
            "seats": [{"player_id": str(room * 10 + 1), "team": 1},
                      {"player_id": str(room * 10 + 2), "team": 2}]}, **kw)

    big = 5 << 20  # over every body limit

    # The node, on both listeners; the lobby stopped, so that what is stored stays stored.
    lobby_proc.proc.send_signal(signal.SIGSTOP)
    for n, l in enumerate((node_unix, node_tcp)):
        tok = ingest_token if l is node_tcp else None
        room = 100 + n
        for path in ("/v1/results", "/v1/results:batch"):
            one = path == "/v1/results"
            body = result(room) if one else {"results": [result(room + 10)]}
            ask("node", l, "POST", path, token=tok, body=body, what="new")
            ask("node", l, "POST", path, token=tok, body=body, what="the same again")
            ask("node", l, "POST", path, token=tok, raw=b"{nope", what="undecodable")
            ask("node", l, "POST", path, token=tok, body=body, host=False, what="no Host")
            ask("node", l, "POST", path, target=path + "?durability=replicated", token=tok,
                body=body, what="durability=replicated without --replicate-to")
            ask("node", l, "POST", path, token=tok, raw=b"", length=big,
                what="over the body limit")
            ask("node", l, "POST", path, token=tok, raw=b"x", content_type="text/plain",
                what="text/plain")
            if l is node_tcp:
                ask("node", l, "POST", path, body=body, what="no token on TCP")
            if one:
                ask("node", l, "POST", path, token=tok, body=result(room, winner=2),
                    what="another result, same identity")
        redrive = "/v1/outbox:redrive"
        everything = redrive + "?from=dead-letter&all=true"
        ask("node", l, "POST", redrive, target=everything, token=tok, what="all, nothing set aside")
        ask("node", l, "POST", redrive, target=redrive + "?from=dead-letter&room_id=0", token=tok,
            what="room 0")
        ask("node", l, "POST", redrive, target=everything, token=tok, host=False, what="no Host")
        ask("node", l, "POST", redrive, target=everything, token=tok, raw=b"", length=big,
            what="a body")
        if l is node_tcp:
            ask("node", l, "POST", redrive, target=everything, what="no token on TCP")
        for path in ("/metrics", "/healthz", "/readyz"):
            ask("node", l, "GET", path)
            ask("node", l, "GET", path, host=False, what="no Host")
            ask("node", l, "GET", path, length=10, raw=b"0123456789", what="a GET with a body")
    # A draining node: 503 on ingest and readiness.
    ask("node", drain_unix, "POST", "/v1/results", body=result(300), what="stored before the drain")
    drain_proc.proc.send_signal(signal.SIGTERM)
    until("the drain", lambda: request(drain_unix, "GET", "/readyz")[0] == 503)
    ask("node", drain_unix, "POST", "/v1/results", body=result(301), what="draining")
    ask("node", drain_unix, "POST", "/v1/results:batch", body={"results": [result(302)]},
        what="draining")
    ask("node", drain_unix, "GET", "/readyz", what="draining")
    lobby_proc.proc.send_signal(signal.SIGCONT)

    # The lobby.
    L = lobby_l
    allocate(L, 200, what="new")
    allocate(L, 200, what="the same again")
    allocate(L, 201, raw=b"{nope", what="undecodable")
    allocate(L, 201, token=None, what="no token")
    allocate(L, 201, host=False, what="no Host")
    allocate(L, 201, raw=b"", length=big, what="over the body limit")
    allocate(L, 201, raw=b"x", content_type="text/plain", what="text/plain")
    ask("lobby", L, "POST", "/v1/rooms", token=admin, what="a player in another battle", body={
        "room_id": "202", "node_id": "node-a",
        "seats": [{"player_id": "2001", "team": 1}, {"player_id": "2021", "team": 2}]})
    for room in (203, 204, 205, 206):
        allocate(L, room)

    s = "/v1/settlements"
    ask("lobby", L, "POST", s, token=node_token, body=result(200), what="new")
    ask("lobby", L, "POST", s, token=node_token, body=result(200), what="the same again")
    ask("lobby", L, "POST", s, token=node_token, body=result(200, winner=0, players=((1, 1), (2, 2))),
        what="same outcome, another payload")
    ask("lobby", L, "POST", s, token=node_token, body={**result(200), "outcome": "ABORTED",
                                                       "winner_team": 0}, what="the other outcome")
    ask("lobby", L, "POST", s, token=node_token, body=result(999), what="a room never allocated")
    ask("lobby", L, "POST", s, token=node_token, raw=b"{nope", what="undecodable")
    ask("lobby", L, "POST", s, token=None, body=result(203), what="no token")
    ask("lobby", L, "POST", s, token=node_token, body=result(203), host=False, what="no Host")
    ask("lobby", L, "POST", s, token=node_token, raw=b"", length=big,
        what="over the body limit")
    ask("lobby", L, "POST", s, token=node_token, raw=b"x", content_type="text/plain",
        what="text/plain")
    ask("lobby", L, "POST", s, token=node_token,
        body=result(203, players=((1, 1), (3, 2))), what="a roster that differs")

    b = "/v1/settlements:batch"
    ask("lobby", L, "POST", b, token=node_token, body={"results": [result(203)]}, what="new")
    ask("lobby", L, "POST", b, token=node_token, raw=b"{nope", what="undecodable")
    ask("lobby", L, "POST", b, token=None, body={"results": []}, what="no token")
    ask("lobby", L, "POST", b, token=node_token, body={"results": []}, host=False, what="no Host")
    ask("lobby", L, "POST", b, token=node_token, raw=b"", length=big,
        what="over the body limit")
    ask("lobby", L, "POST", b, token=node_token, raw=b"x", content_type="text/plain",
        what="text/plain")

    rel, ab = "/v1/rooms/{room_id}:release", "/v1/rooms/{room_id}:abort"
    ask("lobby", L, "POST", rel, "/v1/rooms/204:release", token=admin, what="release")
    ask("lobby", L, "POST", rel, "/v1/rooms/999:release", token=admin, what="a room never allocated")
    ask("lobby", L, "POST", rel, "/v1/rooms/0:release", token=admin, what="room 0")
    ask("lobby", L, "POST", rel, "/v1/rooms/204:release", token=None, what="no token")
    ask("lobby", L, "POST", rel, "/v1/rooms/204:release", token=admin, host=False, what="no Host")
    ask("lobby", L, "POST", rel, "/v1/rooms/204:release", token=admin, raw=b"",
        length=big, what="over the body limit")
    ask("lobby", L, "POST", rel, "/v1/rooms/204:release", token=admin, raw=b"x",
        content_type="text/plain", what="a body it does not read")
    ask("lobby", L, "POST", b, token=node_token, body={"results": [result(210 + i) for i in range(257)]},
        what="257 results")
    ask("lobby", L, "POST", s, token=node_token, raw=b"\xff\xff", content_type="application/x-protobuf",
        what="undecodable protobuf")
    reason = {"reason": "host_lost"}
    ask("lobby", L, "POST", ab, "/v1/rooms/205:abort", token=admin, body=reason, what="abort")
    ask("lobby", L, "POST", ab, "/v1/rooms/200:abort", token=admin, body=reason,
        what="a room settled SETTLED")
    ask("lobby", L, "POST", ab, "/v1/rooms/999:abort", token=admin, body=reason,
        what="a room never allocated")
    ask("lobby", L, "POST", ab, "/v1/rooms/206:abort", token=admin, body={}, what="no reason")
    ask("lobby", L, "POST", ab, "/v1/rooms/206:abort", token=None, body=reason, what="no token")
    ask("lobby", L, "POST", ab, "/v1/rooms/206:abort", token=admin, body=reason, host=False,
        what="no Host")
    ask("lobby", L, "POST", ab, "/v1/rooms/206:abort", token=admin, raw=b"",
        length=big, what="over the body limit")
    ask("lobby", L, "POST", ab, "/v1/rooms/206:abort", token=admin, raw=b"x",
        content_type="text/plain", what="text/plain")

    vm, vr = "/v1/matches/{match_id}:void", "/v1/rooms/{room_id}:void"
    cheat = {"reason": "a cheater", "policy": "compensate"}
    ask("lobby", L, "POST", vm, "/v1/matches/1:void", token=admin,
        body={"reason": "a cheater", "policy": "replay"}, what="void room 200's match")
    ask("lobby", L, "POST", vm, "/v1/matches/999999:void", token=admin, body=cheat,
        what="a match never settled")
    ask("lobby", L, "POST", vm, "/v1/matches/0:void", token=admin, body=cheat, what="match 0")
    ask("lobby", L, "POST", vm, "/v1/matches/1:void", token=None, body=cheat, what="no token")
    ask("lobby", L, "POST", vm, "/v1/matches/1:void", token=admin, body=cheat, host=False,
        what="no Host")
    ask("lobby", L, "POST", vm, "/v1/matches/1:void", token=admin, raw=b"", length=big,
        what="over the body limit")
    ask("lobby", L, "POST", vm, "/v1/matches/1:void", token=admin, raw=b"x",
        content_type="text/plain", what="text/plain")
    ask("lobby", L, "POST", vr, "/v1/rooms/203:void", token=admin, body=cheat, what="void")
    ask("lobby", L, "POST", vr, "/v1/rooms/205:void", token=admin, body=cheat,
        what="an aborted match")
    ask("lobby", L, "POST", vr, "/v1/rooms/999:void", token=admin, body=cheat,
        what="a room never settled")
    ask("lobby", L, "POST", vr, "/v1/rooms/203:void", token=admin,
        body={"reason": "a cheater", "policy": "rewind"}, what="an unknown policy")
    ask("lobby", L, "POST", vr, "/v1/rooms/203:void", token=None, body=cheat, what="no token")
    ask("lobby", L, "POST", vr, "/v1/rooms/203:void", token=admin, raw=b"", length=big,
        what="over the body limit")
    ask("lobby", L, "POST", vr, "/v1/rooms/203:void", token=admin, raw=b"x",
        content_type="text/plain", what="text/plain")

    for path, good, missing, bad in (
            ("/v1/settlements/{room_id}", "/v1/settlements/200", "/v1/settlements/999",
             "/v1/settlements/abc"),
            ("/v1/players/{player_id}", "/v1/players/2001", "/v1/players/999999",
             "/v1/players/" + "x" * 65)):
        ask("lobby", L, "GET", path, good, token=admin)
        ask("lobby", L, "GET", path, missing, token=admin, what="absent")
        ask("lobby", L, "GET", path, bad, token=admin, what="not an id")
        ask("lobby", L, "GET", path, good, what="no token")
        ask("lobby", L, "GET", path, good, token=admin, host=False, what="no Host")
        ask("lobby", L, "GET", path, good, token=admin, length=10, raw=b"0123456789",
            what="a GET with a body")
    # Modes, their ladders, and ratings carried over into one.
    m, lb = "/v1/modes/{mode}", "/v1/modes/{mode}/leaderboard"
    imp = "/v1/players/{player_id}/ratings/{mode}"
    ranked = {"rating": {"system": "openskill"}}
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin, body=ranked, what="new")
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin, body=ranked, what="the same again")
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin,
        body={"rating": {"system": "chess"}}, what="an unknown rating system")
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", body=ranked, what="no token")
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin, body=ranked, host=False,
        what="no Host")
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin, raw=b"", length=big,
        what="over the body limit")
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin, raw=b"x",
        content_type="text/plain", what="text/plain")
    ask("lobby", L, "POST", "/v1/rooms", token=admin, what="a room of the mode", body={
        "room_id": "207", "node_id": "node-a", "mode": "ranked",
        "seats": [{"player_id": "2071", "team": 1}, {"player_id": "2072", "team": 2}]})
    ask("lobby", L, "PUT", m, "/v1/modes/ranked", token=admin,
        body={"rating": {"system": "elo"}}, what="another declaration of a mode in use")
    ask("lobby", L, "PUT", m, "/v1/modes/never", token=admin, body={"closed": True},
        what="closing a mode not declared")
    for path, good, missing, bad in (
            (m, "/v1/modes/ranked", "/v1/modes/never", "/v1/modes/Not%20A%20Mode"),
            (lb, "/v1/modes/ranked/leaderboard", "/v1/modes/never/leaderboard",
             "/v1/modes/ranked/leaderboard?limit=0")):
        ask("lobby", L, "GET", path, good, token=admin)
        ask("lobby", L, "GET", path, missing, token=admin, what="a mode never declared")
        ask("lobby", L, "GET", path, bad, token=admin, what="not a mode name, or limit 0")
        ask("lobby", L, "GET", path, good, what="no token")
        ask("lobby", L, "GET", path, good, token=admin, host=False, what="no Host")
        ask("lobby", L, "GET", path, good, token=admin, length=10, raw=b"0123456789",
            what="a GET with a body")
    carried = {"rating": 27.5, "deviation": 6.1}
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/ranked", token=admin, body=carried,
        what="an import")
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/ranked", token=admin,
        body={"rating": 27.5, "deviation": -1}, what="a negative deviation")
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/never", token=admin, body=carried,
        what="a mode never declared")
    ask("lobby", L, "PUT", imp, "/v1/players/2071/ratings/ranked", token=admin, body=carried,
        what="a player in a room")
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/ranked", body=carried, what="no token")
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/ranked", token=admin, body=carried,
        host=False, what="no Host")
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/ranked", token=admin, raw=b"",
        length=big, what="over the body limit")
    ask("lobby", L, "PUT", imp, "/v1/players/3001/ratings/ranked", token=admin, raw=b"x",
        content_type="text/plain", what="text/plain")
    ev = "/v1/events"
    upgrade = (("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
               ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="))
    sock = L.connect()
    status, _, _ = exchange(sock, "GET", ev + "?after=0", [("Authorization", f"Bearer {admin}"),
                                                           *upgrade])
    sock.close()
    record("lobby", "GET", ev, status, "a WebSocket upgrade")
    ask("lobby", L, "GET", ev, token=admin, what="not an upgrade")
    ask("lobby", L, "GET", ev, ev + "?after=x", token=admin, extra=upgrade, what="after=x")
    ask("lobby", L, "GET", ev, token=None, extra=upgrade, what="no token")
    ask("lobby", L, "GET", ev, token=admin, extra=upgrade, host=False, what="no Host")
    ask("lobby", L, "GET", ev, token=admin, extra=upgrade, length=10, raw=b"0123456789",
        what="a GET with a body")
    epoch = json.loads(request(L, "GET", ev + "?after=999999999", token=admin, extra=upgrade)[2])
    ask("lobby", L, "GET", ev, ev + "?after=999999999", token=admin, extra=upgrade,
        what="a cursor beyond the head")
    ask("lobby", L, "GET", ev, ev + "?after=0&epoch=ffff", token=admin, extra=upgrade,
        what="another epoch")
    if epoch.get("code") != "CURSOR_AHEAD":
        fail(f"a cursor beyond the head: {epoch}")
    # Receipts past retention: only the compact record of room 200 is left.
    subprocess.run([lobby_bin, "--db", f"dbname={db}", "retain", "--receipts-older-than", "0s"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ask("lobby", L, "POST", s, token=node_token, body=result(200), what="its receipt expired")
    ask("lobby", L, "POST", ab, "/v1/rooms/200:abort", token=admin, body=reason,
        what="its receipt expired")
    ask("lobby", L, "GET", "/v1/settlements/{room_id}", "/v1/settlements/200", token=admin,
        what="its receipt expired")
    for path in ("/metrics", "/healthz", "/readyz"):
        ask("lobby", L, "GET", path)
        ask("lobby", L, "GET", path, host=False, what="no Host")
        ask("lobby", L, "GET", path, length=10, raw=b"0123456789", what="a GET with a body")

    # The lobby whose database is away: 503 wherever the database is needed.
    D = dead_l
    allocate(D, 400, what="database away")
    ask("lobby", D, "POST", s, token=node_token, body=result(400), what="database away")
    ask("lobby", D, "POST", b, token=node_token, body={"results": [result(400)]},
        what="database away")
    ask("lobby", D, "POST", rel, "/v1/rooms/400:release", token=admin, what="database away")
    ask("lobby", D, "POST", ab, "/v1/rooms/400:abort", token=admin, body=reason,
        what="database away")
    ask("lobby", D, "POST", "/v1/matches/{match_id}:void", "/v1/matches/1:void", token=admin,
        body={"reason": "a cheater", "policy": "replay"}, what="database away")
    ask("lobby", D, "POST", "/v1/rooms/{room_id}:void", "/v1/rooms/400:void", token=admin,
        body={"reason": "a cheater", "policy": "replay"}, what="database away")
    ask("lobby", D, "GET", "/v1/settlements/{room_id}", "/v1/settlements/400", token=admin,
        what="database away")
    ask("lobby", D, "GET", "/v1/players/{player_id}", "/v1/players/4001", token=admin,
        what="database away")
    ask("lobby", D, "GET", ev, token=admin, extra=upgrade, what="database away")
    ask("lobby", D, "PUT", m, "/v1/modes/ranked", token=admin, body=ranked, what="database away")
    ask("lobby", D, "GET", m, "/v1/modes/ranked", token=admin, what="database away")
    ask("lobby", D, "GET", lb, "/v1/modes/ranked/leaderboard", token=admin, what="database away")
    ask("lobby", D, "PUT", imp, "/v1/players/3001/ratings/ranked", token=admin, body=carried,
        what="database away")
    ask("lobby", D, "GET", "/readyz", what="database away")

    # The connection cap: a second connection is answered 503, whatever it asks.
    held = capped_l.connect()
    until("the capped lobby to count the held connection",
          lambda: "verdict_lobby_open_connections 1" in
          request(lobby_l, "GET", "/metrics")[2].decode() or True, timeout=1)
    time.sleep(0.2)
    for (tag, method, path) in sorted(documented):
        if tag == "lobby":
            target = (path.replace("{room_id}", "200").replace("{player_id}", "2001")
                      .replace("{mode}", "ranked"))
            ask("lobby", capped_l, method, path, target, what="at the connection cap")
    held.close()

    # Routing: an unknown path is the router's 404 on every listener (the control), a known one
    # never; a method a path does not take is 405.
    def unrouted(status, body):
        try:
            problem = json.loads(body)
        except ValueError:
            return False
        return status == 404 and problem.get("detail", "").startswith("no such endpoint")

    problems = []
    listeners = {"node": [node_unix, node_tcp], "lobby": [lobby_l]}
    for tag, ls in listeners.items():
        for l in ls:
            for method in ("GET", "POST"):
                status, _, body = request(l, method, "/v1/no-such-endpoint",
                                          token=admin if tag == "lobby" else ingest_token)
                if not unrouted(status, body):
                    problems.append(f"{l.name}: an unknown path is not told apart ({status})")
    for (tag, method, path) in sorted(documented):
        target = path.replace("{room_id}", "200").replace("{player_id}", "2001")
        for l in listeners.get(tag, []):
            token = admin if tag == "lobby" else ingest_token
            status, _, body = request(l, method, target, token=token,
                                      body={} if method == "POST" else None)
            if unrouted(status, body):
                problems.append(f"{tag} {method} {path}: not served on {l.name} ({status})")
            other = "POST" if method == "GET" else "GET"
            if (tag, other, path) not in documented:
                status, _, _ = request(l, other, target, token=token)
                if status != 405:
                    problems.append(f"{tag} {other} {path} on {l.name}: {status}, not 405")

    # The comparison.
    print(f"{'operation':46} {'documented':32} served")
    for key in sorted(set(documented) | set(served)):
        tag, method, path = key
        doc, got = documented.get(key, set()), served.get(key, {})
        print(f"{tag:5} {method:4} {path:35} {','.join(map(str, sorted(doc))):32} "
              f"{','.join(map(str, sorted(got)))}")
        if os.environ.get("VERBOSE"):
            for status in sorted(got):
                print(f"      {status}: {got[status]}")
        if key not in documented:
            problems.append(f"{tag} {method} {path}: served, not in {os.path.basename(sys.argv[1])}")
            continue
        for status in sorted(set(got) - doc):
            problems.append(f"{tag} {method} {path}: {status} served ({got[status]}), not documented")
        for status in sorted(doc - set(got)):
            if (tag, method, path, status) not in PRODUCED_ELSEWHERE:
                problems.append(f"{tag} {method} {path}: {status} documented, never served here "
                                "nor listed in PRODUCED_ELSEWHERE")
    for key in PRODUCED_ELSEWHERE:
        if key[3] not in documented.get(key[:3], set()):
            problems.append(f"PRODUCED_ELSEWHERE names {key}, which the document does not list")
    for problem in problems:
        print("FAIL", problem)
    if problems:
        sys.exit(1)
    print("openapi_answers_test: every served answer documented, every documented answer served")


if __name__ == "__main__":
    main()
