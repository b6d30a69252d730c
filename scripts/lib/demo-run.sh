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

# The modes the demo plays, one a line: the mode, its rating system, its teams and their size.
# Each is declared at the lobby (the modes file of `serve`, with exactly that shape) and the
# node's simulator plays them in turn (--simulate-modes).
demo_modes=(
  "ranked-5v5 elo 2 5"
  "ffa-8 openskill 8 1"
  "royale-trios openskill 20 3"
)

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

# The modes file of `verdict-lobby serve` (docs/modes.md), and the --simulate-modes list of
# verdict-node, both from demo_modes.
write_modes_file() {
  local line mode system teams size sep=""
  printf '{"modes": [' >"$work/modes.json"
  for line in "${demo_modes[@]}"; do
    read -r mode system teams size <<<"$line"
    printf '%s\n  {"mode": "%s", "rating": {"system": "%s"}, "shape": {"min_teams": %s, "max_teams": %s, "min_team_size": %s, "max_team_size": %s}}' \
      "$sep" "$mode" "$system" "$teams" "$teams" "$size" "$size" >>"$work/modes.json"
    sep=","
  done
  printf ']}\n' >>"$work/modes.json"
}
describe_modes() {  # "ranked-5v5 (elo, 2 teams of 5), …"
  local line mode system teams size list=""
  for line in "${demo_modes[@]}"; do
    read -r mode system teams size <<<"$line"
    list+="${list:+, }$mode ($system, $teams teams of $size)"
  done
  echo "$list"
}
simulate_modes() {
  local line mode system teams size list=""
  for line in "${demo_modes[@]}"; do
    read -r mode system teams size <<<"$line"
    list+="${list:+,}$mode=${teams}x$size"
  done
  echo "$list"
}

# The top five of a mode's ladder (GET /v1/modes/{mode}/leaderboard), one player a line. The
# answer is JSON with an entry {"player_id": …, "rating": {…}} per player, best first.
print_leaderboard() {
  curl -sf -H 'Authorization: Bearer demo-admin' \
    "http://127.0.0.1:$port/v1/modes/$1/leaderboard?limit=5" |
    sed 's/{ *"player_id" *:/\n/g' |
    awk 'function field(name, value) {  # the first scalar named `name` (not the "rating" object)
           if (!match($0, "\"" name "\" *: *\"?[^,}\"{ ]+")) return ""
           value = substr($0, RSTART, RLENGTH)
           sub(/^"[^"]*" *: *"?/, "", value)
           return value
         }
         NR == 2 {
           printf "  %-3s %-10s %10s %9s %9s %6s %5s %10s\n", "#", "player", "displayed", "rating",
                  "deviation", "games", "wins", "mean place"
         }
         NR >= 2 {
           id = $0
           sub(/^ *"/, "", id)
           sub(/".*/, "", id)
           printf "  %-3d %-10s %10.2f %9.2f %9.2f %6d %5d %10.2f\n", NR - 1, id, field("displayed"),
                  field("rating"), field("deviation"), field("games"), field("wins"),
                  field("mean_placement")
         }
         END { if (NR < 2) print "  (no rated player)" }'
}

# Starts the lobby on port $1 (0: any) and sets lobby_pid and port. It declares the demo's modes
# each time it starts (as before, the second time).
start_lobby() {
  : >"$work/lobby.out"
  "$lobby_bin" --log-level warn serve --listen "127.0.0.1:$1" \
    --node-token demo-node=demo-token --admin-token demo-admin --modes-file "$work/modes.json" \
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
write_modes_file
start_lobby 0
say "lobby listening on 127.0.0.1:$port"

say "battle node: $rooms simulated battles at $rate per second, of each mode in turn: $(describe_modes)"
"$node_bin" run --node-id demo-node --outbox "$work/outbox" \
  --lobby "http://127.0.0.1:$port" --token demo-token \
  --simulate-rooms "$rooms" --simulate-rate "$rate" --simulate-battle-ms 2000 \
  --simulate-modes "$(simulate_modes)" \
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
for line in "${demo_modes[@]}"; do
  read -r mode system teams size <<<"$line"
  echo
  echo "the top of $mode ($system, $teams teams of $size), by the displayed rating:"
  print_leaderboard "$mode"
done

[ "$(receipts)" -eq "$rooms" ] || { echo "expected $rooms receipts" >&2; exit 1; }
say "done: every room settled exactly once, the outbox is empty"
