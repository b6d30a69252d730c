#!/usr/bin/env python3
"""Unit tests of examples/python/verdict_ingest.py against a stand-in node on 127.0.0.1 that
records what it is sent: a result with placements and shares is read and posted as the file says;
a member the schema does not have (a placement's "rnk" included), a SETTLED result without one
winner, and a lone surrogate refuse the file; the command needs a winner and an end time; and a
batch's retryable items are resent by the documented schedule.

    python3 tests/examples/verdict_ingest_test.py [-v]
"""
import contextlib
import http.server
import io
import json
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "python"))
import verdict_ingest  # noqa: E402

# A free-for-all of three teams, 1 and 3 tied second, with a player who played half the battle,
# one who played none of it (a share of 0, not to be dropped as a default) and one who played
# all of it (no share); no winner_team.
PLACED = {"room_id": "43", "outcome": "SETTLED",
          "placements": [{"team": 1, "rank": 2}, {"team": 2, "rank": 1}, {"team": 3, "rank": 2}],
          "ended_at_ms": "1700000000000",
          "players": [{"player_id": "steam:76561197960287930", "team": 1, "kills": 4,
                       "disconnected": True, "share": 0.5},
                      {"player_id": "b", "team": 2, "score": "-5", "share": 0},
                      {"player_id": "c", "team": 3}]}


class StandInNode(http.server.ThreadingHTTPServer):
    """Stores every result it is sent (201, or a batch's items), and keeps each body. While
    retryable_batches is above 0, a batch is answered with a retryable problem for each item
    instead, and the count goes down."""

    def __init__(self):
        self.bodies = []
        self.retryable_batches = 0
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, args=(0.01,), daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self):
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        def stored(result):
            return {"room_id": result["room_id"], "shard": 1, "sequence": "9", "duplicate": False}
        if "results" in body and self.server.retryable_batches > 0:
            self.server.retryable_batches -= 1
            reply = {"items": [{"problem": {"code": "UNAVAILABLE", "status": 503,
                                            "retryable": True, "detail": "stand-in"}}
                               for _ in body["results"]]}
        elif "results" in body:
            reply = {"items": [{"stored": stored(result)} for result in body["results"]]}
        else:
            reply = stored(body)
        reply = json.dumps(reply).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


class VerdictIngestTest(unittest.TestCase):
    def setUp(self):
        self.node = StandInNode()
        self.addCleanup(self.node.stop)
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.dir = directory.name

    def command(self, *argv):
        """Runs the command against the stand-in; returns its exit status and standard error."""
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                status = verdict_ingest.main(["--url", self.node.url, "--token", "t",
                                              "--timeout", "5", *argv])
            except SystemExit as exit:
                status = exit.code
        return status, err.getvalue()

    def file(self, document):
        path = os.path.join(self.dir, "result.json")
        with open(path, "w") as f:
            f.write(json.dumps(document) if not isinstance(document, str) else document)
        return path

    def test_a_file_with_placements_and_shares_is_posted_as_it_says(self):
        results, batch = verdict_ingest.read_results(json.dumps(PLACED))
        self.assertEqual((results, batch), ([PLACED], False))
        self.assertEqual(self.command("--file", self.file(PLACED)), (0, ""))
        self.assertEqual(self.node.bodies, [PLACED])

    def test_a_batch_with_placements_and_shares_is_posted_as_it_says(self):
        self.assertEqual(self.command("--file", self.file({"results": [PLACED]})), (0, ""))
        self.assertEqual(self.node.bodies, [{"results": [PLACED]}])

    def test_a_misspelt_member_of_a_placement_refuses_the_file(self):
        misspelt = json.loads(json.dumps(PLACED))
        misspelt["placements"][1] = {"team": 2, "rnk": 1}
        for document in (misspelt, {"results": [PLACED, misspelt]}):
            with self.assertRaisesRegex(ValueError, "unknown field 'rnk' in a placement"):
                verdict_ingest.read_results(json.dumps(document))
            status, err = self.command("--file", self.file(document))
            self.assertEqual(status, 1)
            self.assertRegex(err, "unknown field 'rnk'.*nothing was posted")
        with self.assertRaisesRegex(ValueError, "unknown field 'rnk'"):
            verdict_ingest.IngestClient(url=self.node.url, token="t").post_result(misspelt)
        self.assertEqual(self.node.bodies, [])

    def test_a_misspelt_share_refuses_the_file(self):
        misspelt = json.loads(json.dumps(PLACED))
        misspelt["players"][0]["shar"] = misspelt["players"][0].pop("share")
        with self.assertRaisesRegex(ValueError, "unknown field 'shar' in a player"):
            verdict_ingest.read_results(json.dumps(misspelt))

    def test_the_command_posts_placements_in_place_of_a_winner(self):
        status, err = self.command("--room", "43", "--ended-at-ms", "1700000000000",
                                   "--placements", "1:2,2:1,3:2", "--players", "a:1,b:2,c:3")
        self.assertEqual((status, err), (0, ""))
        [sent] = self.node.bodies
        self.assertNotIn("winner_team", sent)
        self.assertEqual(sent["placements"], PLACED["placements"])
        self.assertEqual([p["team"] for p in sent["players"]], [1, 2, 3])

    def test_the_command_names_a_winner_or_a_draw_without_placements(self):
        for winner in ("2", "0"):
            status, err = self.command("--room", "42", "--winner", winner, "--ended-at-ms",
                                       "1700000000000", "--players", "1:1,2:2")
            self.assertEqual((status, err), (0, ""))
        self.assertEqual([(b["winner_team"], "placements" in b, b["ended_at_ms"])
                          for b in self.node.bodies],
                         [(2, False, "1700000000000"), (0, False, "1700000000000")])

    def test_the_command_needs_a_winner_and_an_end_time(self):
        # A draw is said, never implied; an end time made up at each run would make a second
        # result for the battle.
        status, err = self.command("--room", "42", "--ended-at-ms", "1700000000000",
                                   "--players", "1:1,2:2")
        self.assertEqual(status, 2)
        self.assertIn("--winner", err)
        status, err = self.command("--room", "42", "--winner", "1", "--players", "1:1,2:2")
        self.assertEqual(status, 2)
        self.assertIn("--ended-at-ms", err)
        status, err = self.command("--room", "42", "--outcome", "ABORTED", "--players", "1:1,2:2")
        self.assertEqual(status, 2)
        self.assertEqual(self.node.bodies, [])
        status, err = self.command("--room", "42", "--outcome", "ABORTED", "--ended-at-ms",
                                   "1700000000000", "--players", "1:1,2:2")
        self.assertEqual((status, err), (0, ""))
        self.assertNotIn("winner_team", self.node.bodies[0])

    def test_the_command_refuses_a_bad_placement_or_both(self):
        for argv in (["--placements", "1:2,2"], ["--placements", "1:first,2:1"],
                     ["--placements", "1:-1,2:1"], ["--winner", "1", "--placements", "1:1,2:2"]):
            status, err = self.command("--room", "43", "--ended-at-ms", "1700000000000",
                                       "--players", "a:1,b:2", *argv)
            self.assertEqual(status, 2, f"{argv}: {err}")
        self.assertEqual(self.node.bodies, [])

    def test_battle_result_needs_one_winner(self):
        with self.assertRaisesRegex(ValueError, "ended_at_ms is required"):
            verdict_ingest.battle_result(42, [("1", 1), ("2", 2)], winner_team=1)
        with self.assertRaisesRegex(ValueError, "neither"):
            verdict_ingest.battle_result(42, [("1", 1), ("2", 2)], ended_at_ms=1700000000000)
        with self.assertRaisesRegex(ValueError, "not both"):
            verdict_ingest.battle_result(42, [("1", 1), ("2", 2)], winner_team=0,
                                         placements=[(1, 1), (2, 2)], ended_at_ms=1700000000000)
        draw = verdict_ingest.battle_result(42, [("1", 1), ("2", 2)], winner_team=0,
                                            ended_at_ms=1700000000000)
        self.assertEqual(draw["winner_team"], 0)
        aborted = verdict_ingest.battle_result(42, [("1", 1), ("2", 2)], outcome="ABORTED",
                                               ended_at_ms=1700000000000)
        self.assertNotIn("winner_team", aborted)

    def test_a_result_without_one_winner_is_refused_before_anything_is_posted(self):
        neither = {k: v for k, v in PLACED.items() if k != "placements"}
        for name, result in (("neither", neither),
                             ("a null winner", {**neither, "winner_team": None}),
                             ("empty placements", {**neither, "placements": []}),
                             ("a draw and placements", {**PLACED, "winner_team": 0})):
            with self.assertRaisesRegex(ValueError, "winner_team", msg=name):
                verdict_ingest.read_results(json.dumps(result))
            status, err = self.command("--file", self.file({"results": [PLACED, result]}))
            self.assertEqual(status, 1, name)
            self.assertRegex(err, "winner_team.*nothing was posted")
            client = verdict_ingest.IngestClient(url=self.node.url, token="t")
            with self.assertRaisesRegex(ValueError, "winner_team", msg=name):
                client.post_result(result)
            with self.assertRaisesRegex(ValueError, "winner_team", msg=name):
                client.post_batch([PLACED, result])
        self.assertEqual(self.node.bodies, [])

    def test_a_lone_surrogate_is_refused_before_anything_is_posted(self):
        for player_id in ("\ud800x", "x\udc00"):
            result = json.loads(json.dumps(PLACED))
            result["players"][0]["player_id"] = player_id
            with self.assertRaisesRegex(ValueError, "player_id.*not UTF-8"):
                verdict_ingest.read_results(json.dumps(result))
            with self.assertRaisesRegex(ValueError, "player_id.*not UTF-8"):
                verdict_ingest.IngestClient(url=self.node.url, token="t").post_result(result)
        self.assertEqual(self.node.bodies, [])

    def test_retryable_items_are_resent_after_1_s_doubling_to_30_s(self):
        # docs/sidecar.md's rule for a batch's retryable items; the waits are seen, not spent.
        now, waits = [0.0], []
        def sleep(seconds):
            waits.append(seconds)
            now[0] += seconds
        client = verdict_ingest.IngestClient(url=self.node.url, token="t",
                                             clock=lambda: now[0], sleep=sleep)
        self.addCleanup(client.close)
        self.node.retryable_batches = 8
        items = client.post_batch([PLACED], deadline_s=600)
        self.assertEqual(items, [{"stored": {"room_id": "43", "shard": 1, "sequence": "9",
                                             "duplicate": False}}])
        self.assertEqual(len(self.node.bodies), 9)
        self.assertEqual(waits, [1, 2, 4, 8, 16, 30, 30, 30])

    def test_battle_result_writes_placements_and_shares_and_no_winner(self):
        result = verdict_ingest.battle_result(
            43, [{"player_id": "steam:76561197960287930", "team": 1, "kills": 4,
                  "disconnected": True, "share": 0.5},
                 {"player_id": "b", "team": 2, "score": -5, "share": 0}, ("c", 3)],
            ended_at_ms=1700000000000, placements=[(1, 2), {"team": 2, "rank": 1}, (3, 2)])
        self.assertEqual(result, PLACED)


if __name__ == "__main__":
    unittest.main()
