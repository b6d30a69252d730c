#!/usr/bin/env bash
# The node's ingest API from outside, as a battle host in another language uses it: the Go,
# Python and C# examples (examples/go, examples/python, examples/csharp) post results to a real
# verdict-node over its Unix socket and over TCP with its ingest token; the node delivers them to
# a real lobby, which settles each room exactly once (tests/openapi checks api/openapi.yaml
# against what both serve). Each example also refuses a file with a misspelt member, a SETTLED
# result without a winner or a lone surrogate before posting anything, and a command without a
# winner or an end time; waits out a node that restarts (its socket gone, then refused), takes
# 200 and 201 alike, and, against a stand-in node (fake_node.py), handles every documented
# answer, a connection closed under a request, and batch items retried by their `retryable`
# member. Runs
# against the PostgreSQL server the PG* environment names (pg_virtualenv), in a database of its
# own. The examples' own tests are clients_unit_test.sh's.
#   examples_test.sh VERDICT_NODE VERDICT_LOBBY SOURCE_DIR
set -euo pipefail
node_bin=$1 lobby_bin=$2 source=$3

fail() {
  echo "FAIL: $*" >&2
  for log in "${work:-}"/lobby.log "${work:-}"/node.log; do
    [ -s "$log" ] && { echo "--- last lines of $(basename "$log"):" >&2; tail -n 30 "$log" >&2; }
  done
  exit 1
}
step() { echo "== $*"; }

. "$source/tests/examples/client_tools.sh"
require_client_tools
command -v createdb >/dev/null && command -v psql >/dev/null ||
  fail "createdb and psql are missing: install the Debian package postgresql-client"
psql -Atqc 'SELECT 1' postgres >/dev/null 2>&1 ||
  fail "no PostgreSQL server answers (PGHOST=${PGHOST:-unset}): run inside pg_virtualenv"

export PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree
work=$(mktemp -d)
db="verdict_examples_$$_$RANDOM"
lobby_pid="" node_pid="" fake_pid="" db_created=""
cleanup() {
  local status=$?
  set +e
  # A stopped lobby would never see its SIGTERM.
  [ -n "$lobby_pid" ] && kill -CONT "$lobby_pid" 2>/dev/null
  for pid in $node_pid $lobby_pid $fake_pid; do
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  [ -n "$db_created" ] && dropdb --if-exists --force "$db" 2>/dev/null
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # ctest's timeout: still clean up

node_id=examples-node
node_token="node-$RANDOM$RANDOM" admin_token="admin-$RANDOM$RANDOM"
ingest_token="ingest-$RANDOM$RANDOM"
ended=1700000000000

# request.py TARGET METHOD PATH [--token T] [--data JSON] [--expect STATUS]: one request to
# "unix:PATH" or "http://HOST:PORT"; prints the status and the body, fails on another status.
cat >"$work/request.py" <<'PY'
import argparse, http.client, json, socket, sys

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)

def request(target, method, path, token=None, data=None):
    if target.startswith("unix:"):
        conn = Unix(target[5:])
    else:
        host, port = target.split("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if data is not None:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read().decode()
    finally:
        conn.close()

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("target"); p.add_argument("method"); p.add_argument("path")
    p.add_argument("--token"); p.add_argument("--data"); p.add_argument("--expect", type=int)
    a = p.parse_args()
    status, _, body = request(a.target, a.method, a.path, a.token, a.data)
    print(status, body)
    if a.expect is not None and status != a.expect:
        sys.exit(f"{a.method} {a.path} answered {status}, not {a.expect}: {body}")
PY
http() { python3 "$work/request.py" "$@"; }
# field JSON KEY...: the member at that path of a JSON document, e.g. field "$out" items 0 stored.
field() {
  python3 -c 'import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if isinstance(v, (dict, list)) else str(v).lower() if isinstance(v, bool) else v)' "$@"
}
# The first line of FILE matching a sed expression that prints, waited for up to 30 s while
# process PID runs.
wait_for_line() {
  local file=$1 expr=$2 pid=$3 line=""
  for _ in $(seq 300); do
    line=$(sed -n "$expr" "$file" 2>/dev/null | head -n 1)
    [ -n "$line" ] && { echo "$line"; return 0; }
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

step "database $db, lobby"
createdb "$db" && db_created=1
"$lobby_bin" --db "dbname=$db" migrate >"$work/migrate.log" 2>&1 ||
  { cat "$work/migrate.log" >&2; fail "verdict-lobby migrate failed"; }
"$lobby_bin" --db "dbname=$db" serve --listen 127.0.0.1:0 --node-token "$node_id=$node_token" \
  --admin-token "$admin_token" >"$work/lobby.log" 2>&1 &
lobby_pid=$!
lobby_port=$(wait_for_line "$work/lobby.log" 's/^listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
  "$lobby_pid") || fail "the lobby did not start"
lobby="http://127.0.0.1:$lobby_port"
echo "lobby on $lobby"

# Rooms 1001..1013, each with two players of its own: ROOM*10+1 on team 1, ROOM*10+2 on team 2.
rooms=(1001 1002 1003 1004 1005 1006 1007 1008 1009 1010 1011 1012 1013)
for room in "${rooms[@]}"; do
  http "$lobby" POST /v1/rooms --token "$admin_token" --expect 201 --data \
    "{\"room_id\":\"$room\",\"node_id\":\"$node_id\",\"seats\":[{\"player_id\":\"${room}1\",\"team\":1},{\"player_id\":\"${room}2\",\"team\":2}]}" \
    >/dev/null || fail "allocating room $room"
done
echo "allocated rooms ${rooms[*]}"
# result ROOM [WINNER]: the room's BattleResult as JSON.
result() {
  echo "{\"room_id\":\"$1\",\"outcome\":\"SETTLED\",\"winner_team\":${2:-1},\"ended_at_ms\":\"$ended\",\"players\":[{\"player_id\":\"${1}1\",\"team\":1,\"kills\":3},{\"player_id\":\"${1}2\",\"team\":2,\"deaths\":3}]}"
}

step "node"
# start_node: a node on the outbox and socket of the last one (a restart), with a TCP listener
# on a new port; sets node_pid and node_port.
start_node() {
  "$node_bin" run --node-id "$node_id" --outbox "$work/outbox" --lobby "$lobby" --token "$node_token" \
    --ingest-listen "unix:$work/node.sock" --ingest-listen 127.0.0.1:0 \
    --ingest-token "$ingest_token" >"$work/node.log" 2>&1 &
  node_pid=$!
  node_port=$(wait_for_line "$work/node.log" 's/^ingest on port \([0-9]*\)$/\1/p' "$node_pid") ||
    fail "the node did not start (no 'ingest on port' line)"
}
start_node
[ -S "$work/node.sock" ] || fail "the node has no socket at $work/node.sock"
mode=$(stat -c %a "$work/node.sock")
[ "$mode" = 660 ] || fail "the node's socket has mode $mode, not 660"
node_tcp="http://127.0.0.1:$node_port"
node_unix="unix:$work/node.sock"
echo "node on $node_tcp and $node_unix"
# The results the node was asked to store or found stored, whatever it answered: the misspelt
# files below must not reach it.
ingest_answers() {
  python3 - "$work/request.py" "$1" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("h", sys.argv[1]); h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
_, _, text = h.request(sys.argv[2], "GET", "/metrics")
print(int(sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
              if l.startswith("verdict_node_ingest_results_total{"))))
PY
}

step "build the Go example"
. "$source/tests/examples/go_env.sh"
(cd "$source/examples/go" && go build -o "$work/verdict-ingest" ./cmd/verdict-ingest) \
  >"$work/go.log" 2>&1 || { cat "$work/go.log" >&2; fail "the Go example does not build"; }
py="$source/examples/python/verdict_ingest.py"
python3 -c 'import py_compile, sys; py_compile.compile(sys.argv[1], sys.argv[2], doraise=True)' \
  "$py" "$work/verdict_ingest.pyc" || fail "the Python example does not compile"
pyingest() { python3 "$py" --timeout 20 "$@"; }

step "build the C# example"
mcs -warnaserror -out:"$work/verdict-ingest.exe" "$source/examples/csharp/VerdictIngest.cs" \
  "$source/examples/csharp/VerdictIngestCommand.cs" >"$work/mcs.log" 2>&1 ||
  { cat "$work/mcs.log" >&2; fail "the C# example does not compile"; }
csingest() { mono "$work/verdict-ingest.exe" --timeout 20 "$@"; }
# ingest EXAMPLE SOCKET FILE|ROOM [TIMEOUT_S]: EXAMPLE (goingest, pyingest or csingest) posts
# FILE, or room ROOM won by team 1 of players 1 and 2, to the node at SOCKET, its flags spelt its
# way.
ingest() {
  local example=$1 socket=$2 what=$3 timeout=${4:-} dash=-- unit=""
  [ "$example" = goingest ] && dash=- unit=s
  local args=("${dash}socket" "$socket")
  if [ -f "$what" ]; then
    args+=("${dash}file" "$what")
  else
    args+=("${dash}room" "$what" "${dash}winner" 1 "${dash}ended-at-ms" "$ended" "${dash}players" 1:1,2:2)
  fi
  [ -n "$timeout" ] && args+=("${dash}timeout" "$timeout$unit")
  "$example" "${args[@]}"
}

# While the lobby is stopped the node delivers nothing, so every result posted stays in its
# outbox: a repeat is then answered as a duplicate by the node itself.
kill -STOP "$lobby_pid"
echo "lobby paused: results stay in the node's outbox"

step "(a) Go over the Unix socket"
goingest() { "$work/verdict-ingest" -timeout 20s "$@"; }
out=$(goingest -socket "$work/node.sock" -room 1001 -winner 1 -ended-at-ms "$ended" \
  -players 10011:1:3:0:0,10012:2:0:3:0) || fail "Go: posting room 1001"
echo "first:  $out"
[ "$(field "$out" room_id)" = 1001 ] && [ "$(field "$out" duplicate)" = false ] ||
  fail "Go: room 1001 was not newly stored: $out"
again=$(goingest -socket "$work/node.sock" -room 1001 -winner 1 -ended-at-ms "$ended" \
  -players 10011:1:3:0:0,10012:2:0:3:0) || fail "Go: posting room 1001 again"
echo "again:  $again"
[ "$(field "$again" duplicate)" = true ] || fail "Go: the repeat of room 1001 is not a duplicate: $again"
[ "$(field "$again" sequence)" = "$(field "$out" sequence)" ] &&
  [ "$(field "$again" shard)" = "$(field "$out" shard)" ] ||
  fail "Go: the duplicate names another record ($again, first $out)"
status=0
started=$SECONDS
goingest -socket "$work/node.sock" -room 1001 -winner 2 -ended-at-ms "$ended" \
  -players 10011:1,10012:2 >"$work/mismatch.out" 2>"$work/mismatch.err" || status=$?
echo "differs: $(cat "$work/mismatch.err")"
[ "$status" -eq 1 ] && grep -q '422 IDEMPOTENCY_MISMATCH' "$work/mismatch.err" ||
  fail "Go: a different result for room 1001 was not refused 422 (status $status)"
[ $((SECONDS - started)) -lt 10 ] || fail "Go: the 422 was retried"
printf '{"results":[%s,%s]}\n' "$(result 1002)" "$(result 1003 2)" >"$work/batch.json"
out=$(goingest -socket "$work/node.sock" -file "$work/batch.json") || fail "Go: batch 1002, 1003"
echo "batch:  $out"
for i in 0 1; do
  [ "$(field "$out" items $i stored room_id)" = $((1002 + i)) ] &&
    [ "$(field "$out" items $i stored duplicate)" = false ] ||
    fail "Go: batch item $i was not stored: $out"
done

step "(b) Python over the Unix socket and TCP"
out=$(python3 "$py" --socket "$work/node.sock" --room 1004 --winner 1 --ended-at-ms "$ended" \
  --players 10041:1,10042:2 --timeout 20) || fail "Python: posting room 1004 over the socket"
echo "socket: $out"
[ "$(field "$out" room_id)" = 1004 ] && [ "$(field "$out" duplicate)" = false ] ||
  fail "Python: room 1004 was not newly stored: $out"
out=$(result 1005 | python3 "$py" --url "$node_tcp" --token "$ingest_token" --file - --timeout 20) ||
  fail "Python: posting room 1005 over TCP"
echo "tcp:    $out"
[ "$(field "$out" room_id)" = 1005 ] && [ "$(field "$out" duplicate)" = false ] ||
  fail "Python: room 1005 was not newly stored: $out"
printf '{"results":[%s,%s]}\n' "$(result 1006)" "$(result 1005)" >"$work/batch.json"
out=$(VERDICT_INGEST_TOKEN="$ingest_token" python3 "$py" --url "$node_tcp" \
  --file "$work/batch.json" --timeout 20) || fail "Python: batch 1006, 1005 over TCP"
echo "batch:  $out"
[ "$(field "$out" items 0 stored duplicate)" = false ] &&
  [ "$(field "$out" items 1 stored duplicate)" = true ] ||
  fail "Python: the batch was not [1006 new, 1005 duplicate]: $out"
status=0
result 1006 | python3 "$py" --url "$node_tcp" --token wrong-token --file - --timeout 20 \
  >/dev/null 2>"$work/wrong.err" || status=$?
echo "wrong token: $(cat "$work/wrong.err")"
[ "$status" -eq 1 ] && grep -q '401 UNAUTHENTICATED' "$work/wrong.err" ||
  fail "Python: a wrong ingest token was not refused 401 (status $status)"
out=$(http "$node_tcp" POST /v1/results --data "$(result 1006)" --expect 401) ||
  fail "TCP without a token was not refused 401: $out"
echo "no token:    $out"
[ "$(field "${out#* }" code)" = UNAUTHENTICATED ] || fail "401 without the UNAUTHENTICATED code"

step "(c) C# over the Unix socket and TCP"
out=$(csingest --socket "$work/node.sock" --room 1007 --winner 1 --ended-at-ms "$ended" \
  --players 10071:1:3:0:0,10072:2:0:3:0) || fail "C#: posting room 1007 over the socket"
echo "socket: $out"
[ "$(field "$out" room_id)" = 1007 ] && [ "$(field "$out" duplicate)" = false ] ||
  fail "C#: room 1007 was not newly stored: $out"
again=$(csingest --socket "$work/node.sock" --room 1007 --winner 1 --ended-at-ms "$ended" \
  --players 10071:1:3:0:0,10072:2:0:3:0) || fail "C#: posting room 1007 again"
[ "$(field "$again" duplicate)" = true ] && [ "$(field "$again" sequence)" = "$(field "$out" sequence)" ] ||
  fail "C#: the repeat of room 1007 is not the duplicate of the first ($again, first $out)"
status=0
started=$SECONDS
csingest --socket "$work/node.sock" --room 1007 --winner 2 --ended-at-ms "$ended" \
  --players 10071:1,10072:2 >/dev/null 2>"$work/mismatch.err" || status=$?
echo "differs: $(cat "$work/mismatch.err")"
[ "$status" -eq 1 ] && grep -q '422 IDEMPOTENCY_MISMATCH' "$work/mismatch.err" ||
  fail "C#: a different result for room 1007 was not refused 422 (status $status)"
[ $((SECONDS - started)) -lt 10 ] || fail "C#: the 422 was retried"
printf '{"results":[%s,%s,%s]}\n' "$(result 1008)" "$(result 1009 2)" "$(result 1007)" >"$work/batch.json"
out=$(csingest --url "$node_tcp" --token "$ingest_token" --file "$work/batch.json") ||
  fail "C#: batch 1008, 1009, 1007 over TCP"
echo "batch:  $out"
[ "$(field "$out" items 0 stored room_id)" = 1008 ] && [ "$(field "$out" items 0 stored duplicate)" = false ] &&
  [ "$(field "$out" items 1 stored room_id)" = 1009 ] && [ "$(field "$out" items 2 stored duplicate)" = true ] ||
  fail "C#: the batch was not [1008 new, 1009 new, 1007 duplicate]: $out"
out=$(result 1010 | VERDICT_INGEST_TOKEN="$ingest_token" csingest --url "$node_tcp" --file -) ||
  fail "C#: room 1010 over TCP from standard input"
[ "$(field "$out" room_id)" = 1010 ] || fail "C#: room 1010 was not stored: $out"
status=0
result 1010 | csingest --url "$node_tcp" --token wrong-token --file - >/dev/null 2>"$work/wrong.err" ||
  status=$?
echo "wrong token: $(cat "$work/wrong.err")"
[ "$status" -eq 1 ] && grep -q '401 UNAUTHENTICATED' "$work/wrong.err" ||
  fail "C#: a wrong ingest token was not refused 401 (status $status)"

step "(d) a misspelt member, a result without a winner or a lone surrogate refuses the whole file, in every example, before anything is posted"
misspelt() { sed 's/"winner_team"/"winer_team"/'; }
result 1011 2 | misspelt >"$work/misspelt.json"
printf '{"results":[%s,%s]}\n' "$(result 1012)" "$(result 1013 2 | misspelt)" >"$work/misspelt-item.json"
printf '{"results":[%s],"sent_at":"now"}\n' "$(result 1012)" >"$work/misspelt-batch.json"
sed 's/"kills"/"kils"/' <(result 1011) >"$work/misspelt-player.json"
sed 's/"winner_team":2/"placements":[{"team":1,"rank":2},{"team":2,"rnk":1}]/' <(result 1011 2) \
  >"$work/misspelt-placement.json"
asked=$(ingest_answers "$node_tcp")
for file in misspelt misspelt-item misspelt-batch misspelt-player misspelt-placement; do
  for example in goingest pyingest csingest; do
    status=0
    ingest "$example" "$work/node.sock" "$work/$file.json" >"$work/out" 2>"$work/err" || status=$?
    echo "$example $file: status $status: $(head -c 200 "$work/err")"
    [ "$status" -eq 1 ] && grep -qiE "unknown field.*(winer_team|sent_at|kils|rnk)" "$work/err" ||
      fail "$example took $file.json (status $status): $(cat "$work/out" "$work/err")"
  done
done
# A SETTLED result without a winner would be settled as a draw, and a lone surrogate would be
# posted as U+FFFD: each example refuses the file itself.
sed 's/"winner_team":1,//' <(result 1011) >"$work/no-winner.json"
printf '{"results":[%s,%s]}\n' "$(result 1012)" "$(result 1013 | sed 's/"winner_team":1,//')" \
  >"$work/no-winner-item.json"
sed 's/"player_id":"10111"/"player_id":"\\ud800x"/' <(result 1011) >"$work/lone-surrogate.json"
grep -qF '"\ud800x"' "$work/lone-surrogate.json" || fail "no lone surrogate in the file"
for file in no-winner no-winner-item lone-surrogate; do
  for example in goingest pyingest csingest; do
    status=0
    ingest "$example" "$work/node.sock" "$work/$file.json" >"$work/out" 2>"$work/err" || status=$?
    echo "$example $file: status $status: $(head -c 200 "$work/err")"
    [ "$status" -eq 1 ] && grep -qiE "nothing was posted" "$work/err" &&
      grep -qiE "winner_team|surrogate|not UTF-8" "$work/err" ||
      fail "$example took $file.json (status $status): $(cat "$work/out" "$work/err")"
  done
done
# A command needs the winner and the end time: it makes up neither.
for example in goingest pyingest csingest; do
  [ "$example" = goingest ] && dash=- || dash=--
  status=0
  "$example" "${dash}socket" "$work/node.sock" "${dash}room" 1011 "${dash}ended-at-ms" "$ended" \
    "${dash}players" 10111:1,10112:2 >/dev/null 2>"$work/err" || status=$?
  [ "$status" -eq 2 ] && grep -qE -- "needs -+winner" "$work/err" ||
    fail "$example posted a result without a winner (status $status): $(cat "$work/err")"
  status=0
  "$example" "${dash}socket" "$work/node.sock" "${dash}room" 1011 "${dash}winner" 1 \
    "${dash}players" 10111:1,10112:2 >/dev/null 2>"$work/err" || status=$?
  [ "$status" -eq 2 ] && grep -qE -- "give -+ended-at-ms" "$work/err" ||
    fail "$example posted a result without an end time (status $status): $(cat "$work/err")"
done
echo "every example refuses a result without a winner or an end time"
[ "$(ingest_answers "$node_tcp")" = "$asked" ] ||
  fail "a refused file reached the node ($asked answers before, $(ingest_answers "$node_tcp") after)"

kill -CONT "$lobby_pid"
echo "lobby resumed"

step "(e) a node that restarts: its socket gone, the examples wait and then store"
kill -TERM "$node_pid"
wait "$node_pid" || true
node_pid=""
[ ! -e "$work/node.sock" ] || fail "the stopped node left its socket behind"
goingest -timeout 60s -socket "$work/node.sock" -room 1011 -winner 1 -ended-at-ms "$ended" \
  -players 10111:1,10112:2 >"$work/restart-go.out" 2>"$work/restart-go.err" &
go_pid=$!
python3 "$py" --timeout 60 --socket "$work/node.sock" --room 1012 --winner 1 --ended-at-ms "$ended" \
  --players 10121:1,10122:2 >"$work/restart-py.out" 2>"$work/restart-py.err" &
py_pid=$!
mono "$work/verdict-ingest.exe" --timeout 60 --socket "$work/node.sock" --room 1013 --winner 1 \
  --ended-at-ms "$ended" --players 10131:1,10132:2 >"$work/restart-cs.out" 2>"$work/restart-cs.err" &
cs_pid=$!
for example in go py cs; do
  pid_var="${example}_pid"
  wait_for_line "$work/restart-$example.err" '/retrying/p' "${!pid_var}" >/dev/null ||
    fail "$example: no retry while the socket was gone: $(cat "$work/restart-$example.err")"
done
grep -q 'no such file or directory' "$work/restart-go.err" ||
  fail "Go: the missing socket was not what it retried: $(cat "$work/restart-go.err")"
grep -q 'FileNotFoundError\|No such file' "$work/restart-py.err" ||
  fail "Python: the missing socket was not what it retried: $(cat "$work/restart-py.err")"
echo "while the node is away: $(head -n 1 "$work/restart-go.err")"
start_node
node_tcp="http://127.0.0.1:$node_port"
for example in go py cs; do
  pid_var="${example}_pid"
  wait "${!pid_var}" || fail "$example: not stored once the node was back: $(cat "$work/restart-$example.err")"
  out=$(cat "$work/restart-$example.out")
  [ "$(field "$out" duplicate)" = false ] || fail "$example: not newly stored after the restart: $out"
  echo "$example after the restart: $out"
done

step "(f) every room settled exactly once"
python3 - "$work/request.py" "$lobby" "$admin_token" "${rooms[@]}" <<'PY' || fail "rooms without a receipt"
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("h", sys.argv[1]); h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
lobby, token, rooms = sys.argv[2], sys.argv[3], sys.argv[4:]
deadline = time.monotonic() + 60
missing = list(rooms)
while missing and time.monotonic() < deadline:
    still = []
    for room in missing:
        status, _, body = h.request(lobby, "GET", "/v1/settlements/" + room, token)
        if status != 200:
            still.append(room)
        elif json.loads(body)["room_id"] != room:
            sys.exit(f"receipt of room {room} names another room: {body}")
    missing = still
    time.sleep(0.2)
if missing:
    sys.exit(f"no receipt after 60 s for rooms {missing}")
print("receipts for", " ".join(rooms))
PY
# An identical result posted after the node delivered it: the node no longer holds it and stores
# it again (201, not a duplicate), which every example takes as the success it is; the lobby
# must still settle the room only once.
out=$(goingest -socket "$work/node.sock" -room 1001 -winner 1 -ended-at-ms "$ended" \
  -players 10011:1:3:0:0,10012:2:0:3:0) || fail "Go: posting room 1001 after its delivery"
echo "Go: room 1001 again after delivery: $out"
[ "$(field "$out" duplicate)" = false ] || fail "Go: room 1001 after delivery was a duplicate: $out"
out=$(pyingest --socket "$work/node.sock" --room 1004 --winner 1 --ended-at-ms "$ended" \
  --players 10041:1,10042:2) || fail "Python: posting room 1004 after its delivery"
echo "Python: room 1004 again after delivery: $out"
[ "$(field "$out" duplicate)" = false ] || fail "Python: room 1004 after delivery was a duplicate: $out"
out=$(csingest --socket "$work/node.sock" --room 1007 --winner 1 --ended-at-ms "$ended" \
  --players 10071:1:3:0:0,10072:2:0:3:0) || fail "C#: posting room 1007 after its delivery"
echo "C#: room 1007 again after delivery: $out"
[ "$(field "$out" duplicate)" = false ] || fail "C#: room 1007 after delivery was a duplicate: $out"
python3 - "$work/request.py" "$node_tcp" <<'PY' || fail "the node's outbox did not empty"
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("h", sys.argv[1]); h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
deadline = time.monotonic() + 60
while True:
    _, _, text = h.request(sys.argv[2], "GET", "/metrics")
    shards = [l for l in text.splitlines() if l.startswith("verdict_node_outbox_records{")]
    left = sum(float(l.rsplit(" ", 1)[1]) for l in shards)
    if shards and left == 0:
        break
    if time.monotonic() > deadline:
        sys.exit(f"{left} record(s) still in the outbox after 60 s (or no outbox metric: {shards})")
    time.sleep(0.2)
print("node outbox empty")
PY
in_list=$(IFS=,; echo "${rooms[*]}")
counts=$(psql -d "$db" -AtqX -c "
  SELECT r.room_id, (SELECT count(*) FROM settlement_receipts s WHERE s.room_id = r.room_id),
         (SELECT count(*) FROM matches m WHERE m.room_id = r.room_id),
         (SELECT count(*) FROM match_players p JOIN matches m USING (match_id)
           WHERE m.room_id = r.room_id)
  FROM unnest(ARRAY[$in_list]::bigint[]) AS r(room_id) ORDER BY 1") ||
  fail "psql could not read the settlements"
echo "room|receipts|matches|match_players"
echo "$counts"
while IFS='|' read -r room receipts matches players; do
  [ "$receipts" = 1 ] && [ "$matches" = 1 ] && [ "$players" = 2 ] ||
    fail "room $room has $receipts receipt(s), $matches match(es), $players match player(s)"
done <<<"$counts"
total=$(psql -d "$db" -AtqX -c "SELECT count(*) FROM settlement_receipts")
[ "$total" = "${#rooms[@]}" ] || fail "$total receipts for ${#rooms[@]} rooms"

step "(g) against a stand-in node: a refused socket, every documented answer, a closed connection, batch items"
# start_fake: a stand-in with no requests seen yet (its answers depend on how often a room was
# asked).
start_fake() {
  [ -n "$fake_pid" ] && { kill "$fake_pid"; wait "$fake_pid" 2>/dev/null || true; }
  : >"$work/fake.log"
  python3 "$source/tests/examples/fake_node.py" "$work/fake.sock" "$work/fake.log" >"$work/fake.out" 2>&1 &
  fake_pid=$!
  wait_for_line "$work/fake.out" '/listening/p' "$fake_pid" >/dev/null || fail "the stand-in node did not start"
}
# asked ROOM: how many requests the stand-in had for ROOM.
asked() { grep -c "\"rooms\": \[$1\]" "$work/fake.log" || true; }
# room;expected exit status;what the answer must say;requests expected
answers=('201;0;"duplicate": *false;1' '200;0;"duplicate": *true;1' '503;0;"room_id": *"503";2'
  '666;0;"room_id": *"666";2' '400;1;400 INVALID_ARGUMENT;1' '401;1;401 UNAUTHENTICATED;1'
  '404;1;404 NOT_FOUND;1' '405;1;405 METHOD_NOT_ALLOWED;1' '413;1;413 PAYLOAD_TOO_LARGE;1'
  '415;1;415 UNSUPPORTED_MEDIA_TYPE;1' '422;1;422 IDEMPOTENCY_MISMATCH;1' '500;1;500 HTTP_500;1')
for example in goingest pyingest csingest; do
  # A node killed outright leaves its socket file: connecting is refused until one listens again.
  [ -n "$fake_pid" ] || start_fake
  kill -KILL "$fake_pid"
  wait "$fake_pid" 2>/dev/null || true
  fake_pid=""
  [ -S "$work/fake.sock" ] || fail "the killed stand-in left no socket file"
  ingest "$example" "$work/fake.sock" 202 30 >"$work/refused.out" 2>"$work/refused.err" &
  client_pid=$!
  wait_for_line "$work/refused.err" '/[Rr]efused/p' "$client_pid" >/dev/null ||
    fail "$example: no retry on a refused socket: $(cat "$work/refused.err")"
  start_fake
  wait "$client_pid" || fail "$example: not stored once the socket answered: $(cat "$work/refused.err")"
  [ "$(field "$(cat "$work/refused.out")" room_id)" = 202 ] ||
    fail "$example: not stored once the socket answered: $(cat "$work/refused.out")"
  echo "$example: retried a refused socket until it answered: $(head -n 1 "$work/refused.err")"
  for answer in "${answers[@]}"; do
    IFS=';' read -r room expected says requests <<<"$answer"
    status=0
    ingest "$example" "$work/fake.sock" "$room" >"$work/out" 2>"$work/err" || status=$?
    [ "$status" -eq "$expected" ] && grep -qE "$says" "$work/out" "$work/err" ||
      fail "$example, room $room: status $status, not $expected with '$says': $(cat "$work/out" "$work/err")"
    [ "$(asked "$room")" = "$requests" ] ||
      fail "$example, room $room: $(asked "$room") request(s), not $requests"
  done
  echo "$example: 201, 200, 503 then 201, a closed connection then 201, and 8 final refusals"
  printf '{"results":[%s,%s,%s]}\n' "$(result 7000)" "$(result 7001)" "$(result 7002)" >"$work/batch.json"
  status=0
  ingest "$example" "$work/fake.sock" "$work/batch.json" >"$work/out" 2>"$work/err" || status=$?
  out=$(cat "$work/out")
  [ "$status" -eq 1 ] && [ "$(field "$out" items 0 stored room_id)" = 7000 ] &&
    [ "$(field "$out" items 1 stored room_id)" = 7001 ] &&
    [ "$(field "$out" items 2 problem code)" = INVALID_ARGUMENT ] ||
    fail "$example: the batch was not [stored, stored after a retry, refused] (status $status): $out $(cat "$work/err")"
  [ "$(grep -c '"path": "/v1/results:batch"' "$work/fake.log")" = 2 ] && asked 7001 | grep -qx 1 ||
    fail "$example: the retry did not post room 7001 alone: $(cat "$work/fake.log")"
  echo "$example: batch items retried by their retryable member: $out"
done


echo "examples_test: all checks passed"
