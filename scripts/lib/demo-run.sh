# The demo itself; scripts/demo runs it with libpq's PG* variables pointing at its own throwaway
# PostgreSQL.
set -euo pipefail

rooms=${VERDICT_DEMO_ROOMS:-2000}
rate=${VERDICT_DEMO_RATE:-150}
lobby_bin=build/lobby/verdict-lobby
node_bin=build/node/verdict-node
work=$(mktemp -d)
lobby_pid=""
node_pid=""

cleanup() {
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null || true
  [ -n "$lobby_pid" ] && kill "$lobby_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n[demo] %s\n' "$*"; }
receipts() { psql -Atqc "SELECT count(*) FROM settlement_receipts"; }
duplicates_of() {  # the lobby's count of redeliveries it answered as duplicates
  curl -s "http://127.0.0.1:$1/metrics" |
    awk '/^verdict_lobby_settlements_total\{code="DUPLICATE"\}/ {print $2}' | grep . || echo 0
}

# Starts the lobby on port $1 (0: any) and sets lobby_pid and port.
start_lobby() {
  : >"$work/lobby.out"
  "$lobby_bin" --log-level warn serve --listen "127.0.0.1:$1" \
    --node-token demo-node=demo-token --admin-token demo-admin \
    >"$work/lobby.out" 2>>"$work/lobby.log" &
  lobby_pid=$!
  for _ in $(seq 100); do
    grep -q '^listening on' "$work/lobby.out" && break
    sleep 0.1
  done
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/lobby.out")
  [ -n "$port" ] || { cat "$work/lobby.log"; echo "the lobby did not start" >&2; exit 1; }
}

command -v curl >/dev/null || { echo "the demo needs curl" >&2; exit 1; }
say "PostgreSQL at ${PGHOST}${PGPORT:+ port $PGPORT}; applying the schema"
"$lobby_bin" migrate
start_lobby 0
say "lobby listening on 127.0.0.1:$port"

say "battle node: $rooms simulated ten-player battles at $rate per second"
"$node_bin" run --node-id demo-node --outbox "$work/outbox" \
  --lobby "http://127.0.0.1:$port" --token demo-token \
  --simulate-rooms "$rooms" --simulate-rate "$rate" --simulate-battle-ms 2000 \
  --admin-token demo-admin --exit-when-drained --progress-ms 1000 \
  2>"$work/node.log" | sed -u 's/^/[node] /' | tee "$work/node.out" &
node_pid=$!

# Once about 40 % of the rooms are settled: stop the lobby, or kill the database's primary.
until [ "$(receipts)" -ge $((rooms * 2 / 5)) ]; do sleep 0.2; done
duplicates_before=$(duplicates_of "$port")
if [ -n "${VERDICT_DEMO_HA_DIR:-}" ]; then
  say "the primary database node dies: $(bash scripts/lib/ha.sh kill-node "$VERDICT_DEMO_HA_DIR" node1)"
  killed_at=$SECONDS
  until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
    printf '[ha] %ss: /readyz %s; %s\n' $((SECONDS - killed_at)) \
      "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" \
      "$(bash scripts/lib/ha.sh state "$VERDICT_DEMO_HA_DIR" | xargs)"
    sleep 1
  done
  say "after $((SECONDS - killed_at)) s the standby is the primary and the lobby writes to it: $(bash scripts/lib/ha.sh state "$VERDICT_DEMO_HA_DIR" | xargs)"
else
  kill -TERM "$lobby_pid"
  wait "$lobby_pid" || true
  say "lobby stopped: battles in play keep finishing, their results wait in the node's outbox"
  sleep 5
  "$node_bin" outbox --outbox "$work/outbox" stats | tail -n 1 | sed 's/^/[outbox] /'
  start_lobby "$port"
  say "lobby back on port $port: watch the backlog drain"
fi

wait "$node_pid"
node_pid=""
duplicates_after=$(duplicates_of "$port")

say "summary"
produced=$(sed -n 's/^\[node\] simulated rooms: \([0-9]*\) finished.*/\1/p' "$work/node.out")
delivered=$(tail -n 2 "$work/node.out" | sed -n 's/.*delivered \([0-9]*\),.*/\1/p' | head -n 1)
echo "results produced:           $produced $(grep -o '([^)]*aborted[^)]*)' "$work/node.out" | tail -n 1)"
echo "results delivered:          $delivered"
echo "duplicates absorbed:        $((duplicates_before + duplicates_after)) (redeliveries the lobby answered with the original match)"
echo "receipts in the lobby:      $(receipts)"
echo "rooms allocated, unsettled: $("$lobby_bin" reconcile --older-than 0 | tail -n 1)"
"$node_bin" outbox --outbox "$work/outbox" stats | tail -n 1 | sed 's/^/outbox:                     /'
echo
echo "ten best players by Elo:"
psql -q -P pager=off -c "SELECT player_id, rating AS elo, games, wins, losses, draws
                          FROM player_ratings WHERE mode = 'default'
                          ORDER BY displayed DESC, player_id DESC LIMIT 10"

[ "$(receipts)" -eq "$rooms" ] || { echo "expected $rooms receipts" >&2; exit 1; }
say "done: every room settled exactly once, the outbox is empty"
