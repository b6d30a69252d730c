#!/usr/bin/env bash
# Operations as files: packaging/prometheus/verdict.rules.yml passes `promtool check rules`, its
# unit tests (verdict.rules.test.yml) pass and cover every alert, and every metric that a rule or
# a panel of packaging/grafana/verdict-dashboard.json names is one that a real verdict-node and
# verdict-lobby export (scraped from their /metrics, HELP and TYPE lines included, so a counter
# that has not moved yet counts; the node replicates to a one-member etcd, so the replicated
# tier's metrics count too). Runs against the PostgreSQL server the PG* environment names.
#   ops_test.sh VERDICT_NODE VERDICT_LOBBY SOURCE_DIR
set -euo pipefail
node_bin=$1 lobby_bin=$2 source=$3
rules=$source/packaging/prometheus/verdict.rules.yml
rule_tests=$source/packaging/prometheus/verdict.rules.test.yml
dashboard=$source/packaging/grafana/verdict-dashboard.json

fail() {
  echo "FAIL: $*" >&2
  for log in "${work:-}"/lobby.log "${work:-}"/node.log "${work:-}"/etcd.log; do
    [ -s "$log" ] && { echo "--- last lines of $(basename "$log"):" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}
step() { echo "== $*"; }

command -v promtool >/dev/null || fail "promtool is missing: install the Debian package prometheus"
command -v python3 >/dev/null || fail "python3 is missing: install the Debian package python3"
command -v curl >/dev/null || fail "curl is missing: install the Debian package curl"
[ -x /usr/bin/etcd ] || fail "etcd is missing: install the Debian package etcd-server"
psql -Atqc 'SELECT 1' postgres >/dev/null 2>&1 ||
  fail "no PostgreSQL server answers (PGHOST=${PGHOST:-unset}): run inside pg_virtualenv"

work=$(mktemp -d)
db="verdict_ops_$$_$RANDOM"
lobby_pid="" node_pid="" etcd_pid="" db_created=""
cleanup() {
  local status=$?
  set +e
  for pid in $node_pid $lobby_pid $etcd_pid; do
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
trap 'exit 143' TERM

step "promtool check rules"
promtool check rules "$rules" || fail "promtool check rules"
step "promtool test rules"
(cd "$(dirname "$rule_tests")" && promtool test rules "$(basename "$rule_tests")") ||
  fail "promtool test rules"

step "every alert has a unit test"
alerts=$(sed -n 's/^ *- alert: *//p' "$rules" | sort -u)
tested=$(sed -n 's/^ *alertname: *//p' "$rule_tests" | sort -u)
untested=$(comm -23 <(echo "$alerts") <(echo "$tested"))
[ -z "$untested" ] || fail "alerts without a unit test: $untested"
[ "$(echo "$alerts" | wc -l)" -ge 10 ] || fail "fewer alerts than expected in $rules"

# The metric names a file mentions: its expressions, and the names its descriptions cite.
names_in() { grep -oE '\b(verdict|process)_[a-z0-9_]+' "$1" | sort -u; }

# missing EXPORTED NAME...: prints each NAME that is not exported (a histogram's _bucket, _sum
# and _count count as its own name); fails if any.
missing() {
  local exported=$1 name base status=0
  shift
  for name in "$@"; do
    base=$(echo "$name" | sed -E 's/_(bucket|sum|count)$//')
    grep -qx "$name" "$exported" || grep -qx "$base" "$exported" || { echo "$name"; status=1; }
  done
  return $status
}

step "start a one-member etcd, a lobby and a node"
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
etcd_port=$(free_port) etcd_peer=$(free_port)
/usr/bin/etcd --name ops --data-dir "$work/etcd" --log-level warn \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "ops=http://127.0.0.1:$etcd_peer" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$etcd_port/health" | grep -q '"true"' && break
  kill -0 "$etcd_pid" 2>/dev/null || fail "etcd exited"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$etcd_port/health" | grep -q '"true"' || fail "etcd is not healthy"
createdb "$db" && db_created=1
admin="admin-$RANDOM" token="node-$RANDOM"
"$lobby_bin" --db "dbname=$db" migrate >"$work/migrate.log" 2>&1 || fail "migrate"
"$lobby_bin" --db "dbname=$db" serve --listen 127.0.0.1:0 --admin-token "$admin" \
  --node-token "ops-node=$token" >"$work/lobby.log" 2>&1 &
lobby_pid=$!
lobby_port=""
for _ in $(seq 300); do
  lobby_port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$work/lobby.log" | head -n 1)
  [ -n "$lobby_port" ] && break
  kill -0 "$lobby_pid" 2>/dev/null || fail "the lobby exited"
  sleep 0.1
done
[ -n "$lobby_port" ] || fail "the lobby did not say where it listens"
"$node_bin" run --outbox "$work/outbox" --node-id ops-node --token "$token" \
  --lobby "http://127.0.0.1:$lobby_port" --admin-token "$admin" --simulate-rooms 2 \
  --metrics-listen 127.0.0.1:0 --ingest-listen "unix:$work/ingest.sock" \
  --replicate-to "etcd://127.0.0.1:$etcd_port" >"$work/node.log" 2>&1 &
node_pid=$!
node_port=""
for _ in $(seq 300); do
  node_port=$(sed -n 's/^metrics on port \([0-9][0-9]*\)$/\1/p' "$work/node.log" | head -n 1)
  [ -n "$node_port" ] && break
  kill -0 "$node_pid" 2>/dev/null || fail "the node exited"
  sleep 0.1
done
[ -n "$node_port" ] || fail "the node did not say where it serves metrics"

step "scrape both"
scrape() {  # URL: every metric name it declares or reports
  curl -sf "$1" | sed -nE 's/^# (HELP|TYPE) ([a-z_:][a-z0-9_:]*) .*/\2/p; s/^([a-z_:][a-z0-9_:]*)[{ ].*/\1/p'
}
{ scrape "http://127.0.0.1:$node_port/metrics"; scrape "http://127.0.0.1:$lobby_port/metrics"; } |
  sort -u >"$work/exported"
grep -q '^verdict_node_outbox_records$' "$work/exported" || fail "the node's scrape is empty"
grep -q '^verdict_node_replication_unreplicated_records$' "$work/exported" ||
  fail "the node's scrape has no replication metrics"
grep -q '^verdict_lobby_settle_seconds$' "$work/exported" || fail "the lobby's scrape is empty"

step "the check catches a name nobody exports (negative control)"
if missing "$work/exported" verdict_node_outbox_records verdict_node_no_such_metric >/dev/null; then
  fail "a made-up metric name passed the check"
fi

step "every metric the rules and the dashboard name is exported"
python3 -c 'import json, sys
for panel in json.load(open(sys.argv[1]))["panels"]:
    assert panel.get("targets"), "a panel without a query: " + panel["title"]' "$dashboard" ||
  fail "the dashboard is not valid JSON, or a panel has no query"
mapfile -t in_rules < <(names_in "$rules")
mapfile -t in_dashboard < <(names_in "$dashboard")
[ ${#in_rules[@]} -gt 0 ] && [ ${#in_dashboard[@]} -gt 0 ] || fail "no metric names found"
unknown=$(missing "$work/exported" "${in_rules[@]}" "${in_dashboard[@]}") ||
  fail "named by the rules or the dashboard but exported by neither binary: $unknown"
echo "ok: ${#in_rules[@]} metric names in the rules, ${#in_dashboard[@]} in the dashboard, all exported"
