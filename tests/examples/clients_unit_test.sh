#!/usr/bin/env bash
# The example clients' own tests, without a node or a database: Go's (go vet and go test in
# examples/go), Python's (verdict_ingest_test.py) and C#'s (VerdictIngestTest.cs, built with the
# client and its command by mcs -warnaserror and run by mono), each against stand-in nodes of
# its own. examples_test.sh runs the same clients against a real node and lobby.
#   clients_unit_test.sh SOURCE_DIR
set -euo pipefail
source=$1

fail() { echo "FAIL: $*" >&2; exit 1; }
. "$source/tests/examples/client_tools.sh"
require_client_tools

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree
. "$source/tests/examples/go_env.sh"

echo "== Go: examples/go"
(cd "$source/examples/go" && go vet ./... && go test ./...) || fail "the Go example's tests"
echo "== Python: examples/python"
python3 "$source/tests/examples/verdict_ingest_test.py" || fail "the Python example's tests"
echo "== C#: examples/csharp"
mcs -warnaserror -main:VerdictIngestTest -out:"$work/verdict-ingest-test.exe" \
  "$source/examples/csharp/VerdictIngest.cs" "$source/examples/csharp/VerdictIngestCommand.cs" \
  "$source/tests/examples/VerdictIngestTest.cs" || fail "the C# example's tests do not compile"
mono "$work/verdict-ingest-test.exe" || fail "the C# example's tests"
echo "clients_unit_test: all passed"
