#!/usr/bin/env python3
"""Hands battle results to a running verdict-node through its ingest listener.

Python 3 standard library only: copy this file into a battle host, or run it.

    from verdict_ingest import IngestClient, battle_result
    node = IngestClient(socket_path="node.sock")            # the node's --ingest-listen unix:PATH
    node = IngestClient(url="http://127.0.0.1:9465", token="...")   # a TCP listener and its token
    stored = node.post_result(battle_result(42, [("1", 1), ("2", 2)], winner_team=1,
                                            ended_at_ms=ended_at_ms))
    # {'room_id': '42', 'shard': 5, 'sequence': '17', 'duplicate': False}
    node.post_result(battle_result(43, [("a", 1), {"player_id": "b", "team": 2, "share": 0.5},
                                        ("c", 3)], placements=[(1, 2), (2, 1), (3, 2)],
                                   ended_at_ms=ended_at_ms))

A result the node answers 2xx is fsync-durable in the node's outbox, and the node delivers it
to the lobby from then on. Until then the client retries, on transport errors and on 503
UNAVAILABLE (honouring Retry-After), never on any other answer: those raise Problem. A retry of
the identical result is always safe. What the client does about the node's ways:

- 200 and 201 are the same success. The node answers 200 ("duplicate": true) only while its
  outbox still holds the first copy; once delivered, the same post is stored again (201) and
  the lobby answers that redelivery as the duplicate it is.
- A restarting node removes its Unix socket: connecting fails with FileNotFoundError (ENOENT)
  as well as ConnectionRefusedError. Both are retried, as is every failure to connect.
- The node closes a connection idle for 10 s. The client keeps one connection and drops it
  after 5 s idle; a request on a connection the node closed meanwhile is retried on a new one.
- A batch's items are retried by their own "retryable" member, alone of the others, after 1 s,
  doubling up to 30 s (an item carries no Retry-After).

A SETTLED result places its teams by exactly one of "placements", one {"team": t, "rank": r} per
team (rank 1 best, equal ranks tie, some team at rank 1) for a room of any number of teams, or
"winner_team" for two (1, 2, or 0 for a draw: a draw is said, never implied); a player may carry
"share", the part of the battle it played (0 to 1; absent: all of it). The node refuses with 400
a SETTLED result that names neither, one that names both (a winner_team of 0 beside placements
too) and placements that rank no team 1. A result or batch with a member the schema does not have
(a misspelt "winer_team", a placement's "rnk"), a SETTLED result naming neither or both, or a
string that is not UTF-8 (a lone surrogate, "\\ud800") is refused with ValueError before anything
is posted. Player ids are strings (any 1 to 64 bytes of UTF-8; an integer id is its decimal
string).

As a command (exit 0 stored or already stored, 1 refused or not stored in time, 2 usage). A
SETTLED result from flags needs --winner or --placements, and every result from flags needs
--ended-at-ms, the battle's end: with the room it names the result, so that running the command
again posts the same result (a duplicate), never a second one for the battle.

    verdict_ingest.py --socket node.sock --room 42 --winner 1 --ended-at-ms 1700000000000 \
        --players 1:1,2:2
    verdict_ingest.py --socket node.sock --room 43 --placements 1:2,2:1,3:3 \
        --ended-at-ms 1700000000000 --players a:1,b:2,c:3
    verdict_ingest.py --url http://127.0.0.1:9465 --token-file ingest.token --file result.json
"""

import argparse
import http.client
import json
import os
import random
import socket
import sys
import time
import urllib.parse

MAX_BATCH = 256  # results per batch request (and 4 MiB)
IDLE_S = 5.0  # a kept connection idle longer is dropped: the node closes it at 10 s
# The wait before a batch's retryable items are sent again, by docs/sidecar.md's retry rule for
# batch items: 1 s, doubling up to 30 s.
FIRST_ITEM_BACKOFF_S = 1.0
MAX_ITEM_BACKOFF_S = 30.0

# The members of verdict.v1.BattleResult, PlayerResult and TeamPlacement
# (proto/verdict/v1/verdict.proto).
RESULT_MEMBERS = {"room_id", "outcome", "winner_team", "placements", "suspect", "ended_at_ms",
                  "node_id", "replay_path", "players", "abort_reason"}
PLAYER_MEMBERS = {"player_id", "team", "kills", "deaths", "assists", "score", "disconnected",
                  "share"}
PLACEMENT_MEMBERS = {"team", "rank"}


class Problem(Exception):
    """An answer of the node that is not a success: its problem+json members."""

    def __init__(self, status, code, detail, retryable=False):
        super().__init__(f"verdict-node answered {status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.retryable = retryable


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix stream socket; the host name only fills the Host header."""

    def __init__(self, path, timeout):
        super().__init__("verdict-node", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _check_placed(result, room_id):
    """Raises ValueError if a SETTLED result does not say where its teams placed by exactly one
    of winner_team and placements: naming neither would be settled as a draw where the node
    reads protobuf, and both contradict each other (a winner_team of 0, a draw, included)."""
    if result.get("outcome") not in ("SETTLED", 1):
        return
    has_winner = result.get("winner_team") is not None
    has_placements = bool(result.get("placements"))
    if not has_winner and not has_placements:
        raise ValueError(f"room {room_id}: a SETTLED result names its winner_team (1 or 2, 0 for "
                         "a draw) or its placements; it has neither")
    if has_winner and has_placements:
        raise ValueError(f"room {room_id}: give winner_team or placements, not both (a "
                         "winner_team of 0, a draw, included)")


def _check_text(value, name, room_id):
    """Raises ValueError if a string member is not UTF-8: a lone surrogate ("\\ud800") names no
    character."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"room {room_id}: {name} {value!r} is not UTF-8 (it holds half of a "
                             "UTF-16 surrogate pair)") from None


def check_result(result):
    """Raises ValueError naming a member of `result` (or of one of its players or placements)
    that a BattleResult does not have: the node would refuse it, and dropping it would change
    it. Raises ValueError as well for a SETTLED result that names neither winner_team nor
    placements, or both, and for a string that is not UTF-8."""
    if not isinstance(result, dict):
        raise ValueError(f"a result is a JSON object, not {type(result).__name__}")
    unknown = sorted(set(result) - RESULT_MEMBERS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} in the result of room {result.get('room_id')}")
    for list_name, members, what in (("players", PLAYER_MEMBERS, "a player"),
                                     ("placements", PLACEMENT_MEMBERS, "a placement")):
        for item in result.get(list_name) or []:
            unknown = sorted(set(item) - members) if isinstance(item, dict) else ["?"]
            if unknown:
                raise ValueError(f"unknown field {unknown[0]!r} in {what} of room "
                                 f"{result.get('room_id')}")
    room_id = result.get("room_id")
    _check_placed(result, room_id)
    for name in ("node_id", "replay_path", "abort_reason"):
        _check_text(result.get(name), name, room_id)
    for player in result.get("players") or []:
        _check_text(player.get("player_id"), "player_id", room_id)


def read_results(text):
    """Reads a file's JSON: one result, or a batch {"results": [...]}. Returns (results, batch);
    raises ValueError for anything else, a member the schema does not have included."""
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if "results" not in document:
        check_result(document)
        return [document], False
    unknown = sorted(set(document) - {"results"})
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} in the batch")
    results = document["results"]
    if not isinstance(results, list) or not results:
        raise ValueError("the batch holds no results")
    for result in results:
        check_result(result)
    return results, True


def battle_result(room_id, players, outcome="SETTLED", winner_team=None, ended_at_ms=None,
                  placements=None, **fields):
    """A verdict.v1.BattleResult in protobuf's JSON mapping (64-bit integers as strings).

    players: (player_id, team) pairs or dicts of PlayerResult fields (a dict may carry "share");
    a player id is a string (an integer is written as its decimal string). A SETTLED result
    places its teams by exactly one of winner_team, for two teams (1, 2, or 0 for a draw: a draw
    is said, never implied), and placements, (team, rank) pairs or dicts, one per team of a room
    of any number of teams; ValueError if it is given neither or both. ended_at_ms, the battle's
    end in Unix milliseconds, is required (ValueError without it): with room_id it is the result's
    identity, so a retry sends the same value, never "now" again. Other BattleResult fields
    (node_id, suspect, replay_path, abort_reason) may be given by name.
    """
    if ended_at_ms is None:
        raise ValueError(f"room {room_id}: ended_at_ms is required (the battle's end, kept for "
                         "every retry: with room_id it is the result's identity)")
    lines = []
    for p in players:
        line = dict(p) if isinstance(p, dict) else {"player_id": p[0], "team": p[1]}
        line["player_id"] = str(line["player_id"])
        if "score" in line:
            line["score"] = str(line["score"])
        lines.append(line)
    result = {"room_id": str(room_id), "outcome": outcome, "ended_at_ms": str(ended_at_ms),
              "players": lines}
    if winner_team is not None:
        result["winner_team"] = winner_team
    if placements is not None:
        result["placements"] = [dict(p) if isinstance(p, dict) else {"team": p[0], "rank": p[1]}
                                for p in placements]
    result.update(fields)
    _check_placed(result, room_id)
    return result


class IngestClient:
    """Posts results to one verdict-node, over its Unix socket or a TCP listener.

    Give socket_path, or url ("http://HOST:PORT") and token. timeout bounds one attempt;
    first_backoff and max_backoff bound the wait between attempts of a request when the node
    gave no Retry-After (a batch's retryable items wait 1 s doubling up to 30 s instead, by the
    documented rule). on_retry, if given, is called as on_retry(problem, wait_s) before each wait
    (to log it). clock and sleep are time.monotonic and time.sleep unless a test gives its own.
    Not shared between threads: make one client per thread.
    """

    def __init__(self, socket_path=None, url=None, token=None, timeout=30.0,
                 first_backoff=0.1, max_backoff=5.0, on_retry=None, clock=time.monotonic,
                 sleep=time.sleep):
        if (socket_path is None) == (url is None):
            raise ValueError("give exactly one of socket_path and url")
        if socket_path is None:
            parsed = urllib.parse.urlsplit(url)
            if parsed.scheme != "http" or not parsed.hostname:
                raise ValueError(f"url must be http://HOST:PORT, not {url!r}")
            if not token:
                raise ValueError("a TCP listener needs the node's ingest token")
            self._host, self._port = parsed.hostname, parsed.port or 80
        self._socket_path = socket_path
        self._token = token
        self._timeout = timeout
        self._first_backoff = first_backoff
        self._max_backoff = max_backoff
        self._on_retry = on_retry
        self._clock = clock
        self._sleep = sleep
        self._conn = None  # kept between requests
        self._conn_used_at = 0.0

    def post_result(self, result, deadline_s=60.0):
        """Stores one result (POST /v1/results) and returns the node's StoredResult as a dict.

        "duplicate" is true when the node already had it. Retries for up to deadline_s
        seconds; raises Problem for a refusal (400, 401, 413, 415, 422) or when the time is up
        (with the last answer), and ValueError (nothing posted) for a member the schema does not
        have.
        """
        check_result(result)
        stored = self._post("/v1/results", result, deadline_s)
        if stored.get("room_id") != str(result["room_id"]):
            raise Problem(0, "BAD_REPLY", f"an answer for room {stored.get('room_id')}")
        return stored

    def post_batch(self, results, deadline_s=60.0):
        """Stores up to MAX_BATCH results with one fsync (POST /v1/results:batch).

        Returns one item per result, in order: {"stored": {...}} or {"problem": {...}}.
        Results whose items are retryable problems are posted again, after 1 s doubling up to
        30 s, until they are stored or deadline_s has passed; their items then hold what the node
        last answered. Raises Problem when the request as a whole is refused or not answered in
        time, and ValueError (nothing posted) for a result check_result refuses.
        """
        if len(results) > MAX_BATCH:
            raise ValueError(f"a batch holds at most {MAX_BATCH} results")
        for result in results:
            check_result(result)
        end = self._clock() + deadline_s
        items = [None] * len(results)
        pending = list(range(len(results)))
        retry = 0
        while pending:
            if retry:
                wait = item_backoff(retry)
                if self._on_retry:
                    first = items[pending[0]]["problem"]
                    self._on_retry(Problem(first.get("status"), first.get("code"),
                                           f"{len(pending)} item(s) retryable, first: "
                                           f"{first.get('detail')}", retryable=True), wait)
                self._sleep_until(wait, end)
            retry += 1
            reply = self._post("/v1/results:batch",
                               {"results": [results[i] for i in pending]},
                               end - self._clock())
            answered = reply.get("items", [])
            if len(answered) != len(pending):
                raise Problem(0, "BAD_REPLY", f"{len(answered)} items for {len(pending)} results")
            again = []
            for i, item in zip(pending, answered):
                items[i] = item
                if item.get("problem", {}).get("retryable"):
                    again.append(i)
            if again and self._clock() >= end:
                break
            pending = again
        return items

    def _post(self, path, document, deadline_s):
        body = json.dumps(document).encode()
        end = self._clock() + max(deadline_s, 0)
        retry = 1
        while True:
            try:
                return self._attempt(path, body)
            except Problem as problem:
                if not problem.retryable:
                    raise
                last, wait = problem, getattr(problem, "retry_after", None)
            except (OSError, http.client.HTTPException) as error:
                last, wait = Problem(0, "TRANSPORT", str(error), retryable=True), None
            if wait is None:
                wait = self._backoff(retry)
            retry += 1
            if self._clock() + wait >= end:
                raise Problem(last.status, last.code,
                              f"not stored within {deadline_s:.0f} s; last answer: {last.detail}",
                              retryable=True)
            if self._on_retry:
                self._on_retry(last, wait)
            self._sleep(wait)

    def _connection(self):
        """The kept connection, or a new one if there is none or it was idle past IDLE_S."""
        if self._conn is not None and time.monotonic() - self._conn_used_at > IDLE_S:
            self._conn.close()
            self._conn = None
        if self._conn is None:
            if self._socket_path is not None:
                self._conn = _UnixConnection(self._socket_path, self._timeout)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port,
                                                        timeout=self._timeout)
        return self._conn

    def close(self):
        """Closes the kept connection (a later request opens another)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _attempt(self, path, body):
        conn = self._connection()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except BaseException:
            # No socket (FileNotFoundError: a restarting node), refused, reset, or a kept
            # connection the node closed: the caller retries on a new connection.
            self.close()
            raise
        self._conn_used_at = time.monotonic()
        if response.will_close:
            self.close()
        # 200 (the node still held it) and 201 (stored now) are the same success.
        if response.status in (200, 201):
            try:
                return json.loads(data)
            except ValueError as error:
                raise Problem(response.status, "BAD_REPLY", f"undecodable reply: {error}")
        detail, code = data.decode(errors="replace"), f"HTTP_{response.status}"
        if response.getheader("Content-Type", "").startswith("application/problem+json"):
            try:
                members = json.loads(data)
                detail, code = members.get("detail", detail), members.get("code", code)
            except ValueError:
                pass  # keeps the raw text
        # Only 503 is retried, whatever a body says: any other status is final.
        problem = Problem(response.status, code, detail, retryable=response.status == 503)
        try:
            problem.retry_after = float(response.getheader("Retry-After"))
        except (TypeError, ValueError):
            problem.retry_after = None
        raise problem

    def _backoff(self, retry):
        """The wait before a retry (1 for the first): doubling, capped, jittered."""
        d = min(self._first_backoff * 2 ** (retry - 1), self._max_backoff)
        return d / 2 + random.uniform(0, d / 2)

    def _sleep_until(self, wait, end):
        self._sleep(max(0.0, min(wait, end - self._clock())))


def item_backoff(resend):
    """The wait before the given resend (1 for the first) of a batch's retryable items:
    FIRST_ITEM_BACKOFF_S doubling up to MAX_ITEM_BACKOFF_S."""
    return min(FIRST_ITEM_BACKOFF_S * 2 ** min(resend - 1, 16), MAX_ITEM_BACKOFF_S)


def _players(spec):
    players = []
    for item in spec.split(","):
        parts = item.split(":")
        if len(parts) not in (2, 5) or not parts[0]:
            raise argparse.ArgumentTypeError(f"{item!r} is not PLAYER_ID:TEAM[:KILLS:DEATHS:ASSISTS]")
        try:
            numbers = [int(v) for v in parts[1:]]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: TEAM, KILLS, DEATHS, ASSISTS are numbers")
        line = {"player_id": parts[0], "team": numbers[0]}
        if len(parts) == 5:
            line.update(kills=numbers[1], deaths=numbers[2], assists=numbers[3])
        players.append(line)
    return players


def _placements(spec):
    placements = []
    for item in spec.split(","):
        parts = item.split(":")
        if len(parts) != 2 or not all(v.isascii() and v.isdigit() for v in parts):
            raise argparse.ArgumentTypeError(f"{item!r} is not TEAM:RANK")
        placements.append({"team": int(parts[0]), "rank": int(parts[1])})
    return placements


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Post a battle result to a running verdict-node; prints the StoredResult.")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="the node's Unix socket (its --ingest-listen unix:PATH)")
    where.add_argument("--url", help="a TCP ingest listener, http://HOST:PORT")
    parser.add_argument("--token", default=os.environ.get("VERDICT_INGEST_TOKEN"),
                        help="ingest token for --url (default $VERDICT_INGEST_TOKEN)")
    parser.add_argument("--token-file", help="read the ingest token from FILE")
    parser.add_argument("--file", help='JSON BattleResult or {"results": [...]}; - for stdin')
    parser.add_argument("--room", type=int, help="room_id (without --file)")
    parser.add_argument("--outcome", default="SETTLED", choices=["SETTLED", "ABORTED"])
    placed = parser.add_mutually_exclusive_group()
    placed.add_argument("--winner", type=int,
                        help="winner_team of two teams: 1, 2, or 0 for a draw (a SETTLED result "
                             "needs it or --placements)")
    placed.add_argument("--placements", type=_placements,
                        help="TEAM:RANK,... one rank per team, 1 best, equal ranks tie "
                             "(any number of teams)")
    parser.add_argument("--ended-at-ms", type=int,
                        help="ended_at_ms, the battle's end (required without --file); the same "
                             "value makes a re-run a duplicate")
    parser.add_argument("--players", type=_players, help="PLAYER_ID:TEAM[:KILLS:DEATHS:ASSISTS],...")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after SECONDS")
    args = parser.parse_args(argv)

    token = args.token
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    def on_retry(problem, wait):
        print(f"verdict_ingest: retrying in {wait:.3f} s: {problem}", file=sys.stderr)

    try:
        client = IngestClient(socket_path=args.socket, url=args.url,
                              token=token if args.url else None, on_retry=on_retry)
    except ValueError as error:
        parser.error(str(error))

    try:
        if args.file:
            if args.file == "-":
                text = sys.stdin.read()
            else:
                with open(args.file) as f:
                    text = f.read()
            try:
                results, batch = read_results(text)
            except ValueError as error:  # json.JSONDecodeError is one
                print(f"verdict_ingest: {args.file}: {error} (nothing was posted)", file=sys.stderr)
                return 1
            if batch:
                items = client.post_batch(results, args.timeout)
                print(json.dumps({"items": items}))
                refused = [item["problem"] for item in items if "problem" in item]
                if refused:
                    print(f"verdict_ingest: {len(refused)} result(s) refused, first: "
                          f"{refused[0].get('code')}: {refused[0].get('detail')}",
                          file=sys.stderr)
                    return 1
                return 0
            result = results[0]
        elif args.room and args.players:
            if args.ended_at_ms is None:
                parser.error("give --ended-at-ms, the battle's end in ms since the epoch: with "
                             "the room it names the result, so that running this again posts "
                             "the same one")
            if args.outcome == "SETTLED" and args.winner is None and args.placements is None:
                parser.error("a SETTLED result needs --winner (1 or 2, or 0 for a draw) or "
                             "--placements: a draw is said, never implied")
            result = battle_result(args.room, args.players, args.outcome, args.winner,
                                   args.ended_at_ms, args.placements)
        else:
            parser.error("give --room and --players, or --file")
        print(json.dumps(client.post_result(result, args.timeout)))
        return 0
    except Problem as problem:
        print(f"verdict_ingest: {problem}", file=sys.stderr)
        return 1
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
