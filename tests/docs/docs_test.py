#!/usr/bin/env python3
"""The docs' links and flags (check_links.py, check_flags.py): the real README.md and docs/ pass,
and the broken/ tree, every fault of it marked BAD, fails with exactly those faults, so the checks
can fail. Quick: a few files and --help runs.

    VERDICT_NODE=... VERDICT_LOBBY=... VERDICT_BENCH=... docs_test.py SOURCE_DIR [TEST...]
"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = None


def run(script, root, *args):
    out = subprocess.run([sys.executable, os.path.join(HERE, script), root, *args],
                         capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr


def programs():
    return [os.environ[v] for v in ("VERDICT_NODE", "VERDICT_LOBBY", "VERDICT_BENCH")]


class DocsTest(unittest.TestCase):
    def test_links_resolve(self):
        status, out = run("check_links.py", SOURCE)
        self.assertEqual(status, 0, out)
        self.assertIn(" 0 broken", out)

    def test_broken_links_are_reported(self):
        status, out = run("check_links.py", os.path.join(HERE, "broken"))
        self.assertEqual(status, 1, out)
        reported = sorted(line.split(": (")[1].split(")")[0] for line in out.splitlines()
                          if ": (" in line)
        self.assertEqual(reported, sorted(["docs/missing.md", "docs/guide.md#no-such-heading",
                                           "#no-such-heading", "docs/guide.md#twice-2",
                                           "../README.md#not-there", "docs/operating.md#verdictgone",
                                           "alert VerdictUndocumented"]), out)

    def test_flags_exist(self):
        status, out = run("check_flags.py", SOURCE, *programs())
        self.assertEqual(status, 0, out)
        self.assertIn(" 0 unknown", out)

    def test_invented_flags_are_reported(self):
        status, out = run("check_flags.py", os.path.join(HERE, "broken"), *programs())
        self.assertEqual(status, 1, out)
        reported = sorted(line.split(": ", 1)[1] for line in out.splitlines()
                          if line.startswith("README.md:"))
        self.assertEqual(reported, sorted([
            "verdict-node run has no --no-such-flag",
            "verdict-lobby serve has no --drain-on-exit",
            "verdict-node outbox ls has no --to",
            "--invented-flag is a flag of none of verdict-bench, verdict-lobby, verdict-node",
        ]), out)


if __name__ == "__main__":
    SOURCE = os.path.abspath(sys.argv.pop(1))
    unittest.main()
