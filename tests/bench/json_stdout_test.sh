#!/usr/bin/env bash
# `verdict-bench ... --json` without a database runs itself inside pg_virtualenv, which reports
# on its stdout. Checks that stdout still holds exactly one JSON object and pg_virtualenv's lines
# go to stderr. A stand-in pg_virtualenv first in PATH talks the same way ("Creating new
# PostgreSQL cluster" before, "Dropping cluster" after the run) and runs the benchmark against
# the server the test environment names, so the real one (one per machine) is left alone.
#   json_stdout_test.sh VERDICT_BENCH
set -euo pipefail
bench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/pg_virtualenv" <<'WRAPPER'
#!/bin/sh
echo "Creating new PostgreSQL cluster 15/regress ..."
trap 'echo "Dropping cluster 15/regress ..."' EXIT
if [ -n "${STANDIN_PGHOST:-}" ]; then PGHOST=$STANDIN_PGHOST; export PGHOST; fi
"$@"
WRAPPER
chmod +x "$work/pg_virtualenv"

# Without PGHOST (and without --db) the benchmark goes through pg_virtualenv.
status=0
env -u PGHOST -u VERDICT_BENCH_PG_STARTED STANDIN_PGHOST="${PGHOST:-}" PATH="$work:$PATH" \
  "$bench" events --events 200 --payload 0 --json >"$work/stdout" 2>"$work/stderr" || status=$?
[ "$status" -eq 0 ] || { cat "$work/stderr" >&2; fail "verdict-bench exited with $status"; }

lines=$(wc -l <"$work/stdout")
[ "$lines" -eq 1 ] || { cat "$work/stdout" >&2; fail "stdout holds $lines lines, not one"; }
grep -Eq '^\{"events":200,.*"mode":"events",.*\}$' "$work/stdout" ||
  { cat "$work/stdout" >&2; fail "stdout is not the events JSON object"; }
grep -q "Creating new PostgreSQL cluster" "$work/stderr" ||
  fail "pg_virtualenv's first line is not on stderr (did the stand-in run?)"
grep -q "Dropping cluster" "$work/stderr" || fail "pg_virtualenv's last line is not on stderr"
echo "stdout: $(cat "$work/stdout")"
