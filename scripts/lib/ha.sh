#!/usr/bin/env bash
# A pg_auto_failover formation on one machine, for the failover test, the demo and for trying
# the HA setup of docs/operating.md: a monitor, a primary and a standby, each a PostgreSQL server with a
# directory of its own under DIR, its own port on 127.0.0.1 and its own socket directory, each
# run by its pg_autoctl keeper in the background (as the `postgres` user when started as root).
# The standby is synchronous: the primary answers a COMMIT only once the standby has the
# transaction. With --async it is not (the negative control).
#
#   ha.sh start DIR PORT [--async] [--fast]
#       The monitor on PORT, node1 on PORT+1, node2 on PORT+2. Returns once node1 is the primary
#       and node2 its standby, after printing the lobby's connection string (both nodes,
#       read-write only). --fast: no fsync, and the monitor decides a failover in seconds
#       instead of its default half a minute (tests and demos only, see docs/operating.md).
#   ha.sh run DIR PORT [--async] [--fast]
#       start, then wait for Ctrl-C (or SIGTERM) and stop.
#   ha.sh conninfo DIR          the lobby's connection string
#   ha.sh state DIR             the monitor's view: node name, port, reported/goal state
#   ha.sh primary DIR           the node that accepts writes now (node1 or node2), if any
#   ha.sh wait-primary DIR NODE [SECONDS]
#                               wait until the monitor has made NODE the primary and it writes
#   ha.sh kill-node DIR NODE    SIGKILL the node's keeper, postmaster and backends at once, the
#                               way the machine would die (killing the postmaster alone only
#                               gets it restarted in place by its keeper)
#   ha.sh pause-replication DIR / resume-replication DIR
#                               SIGSTOP / SIGCONT the primary's WAL sender and the standby's WAL
#                               receiver, so nothing more reaches the standby meanwhile
#   ha.sh stop DIR              stop everything and remove DIR
set -euo pipefail

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
readonly PG_BIN
readonly NODES=(node1 node2)
# The servers' owner and superuser.
OWNER=$([ "$(id -u)" -eq 0 ] && echo postgres || id -un)
readonly OWNER

die() {
  echo "ha.sh: $*" >&2
  exit 1
}

# The servers run as their owner: `postgres` when we are root, else ourselves. setpriv execs in
# place, so the pid of a background job is that of the command itself.
AS_OWNER=()
[ "$(id -u)" -ne 0 ] || AS_OWNER=(setpriv --reuid=postgres --regid=postgres --init-groups --)
readonly AS_OWNER

# The environment of every pg_autoctl run: its configuration, state and sockets under DIR.
autoctl_env() {
  local dir=$1
  echo "HOME=$dir" "XDG_CONFIG_HOME=$dir/config" "XDG_DATA_HOME=$dir/data" \
    "XDG_RUNTIME_DIR=$dir/run" "PG_REGRESS_SOCK_DIR=$dir/sock" "PGHOST=$dir/sock" \
    "PATH=$PG_BIN:/usr/bin:/bin"
}

port_of() { # DIR NAME
  cat "$1/$2.port"
}

# psql on a server of the formation (monitor, node1, node2), over TCP, as its superuser; prints
# bare rows, columns separated by a space.
sql() { # DIR NAME DB QUERY
  psql -X -q -A -t -F ' ' -h 127.0.0.1 -p "$(port_of "$1" "$2")" -U "$OWNER" -d "$3" -c "$4"
}

# Waits up to SECONDS for COMMAND to succeed; fails with MESSAGE.
wait_for() { # SECONDS MESSAGE COMMAND...
  local seconds=$1 message=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$message (waited ${seconds}s)"
    sleep 0.2
  done
}

# Starts `pg_autoctl ARGS…` in the background as the servers' owner, in a process group of
# its own (its pid), logging to DIR/NAME.log, and records its pid in DIR/NAME.pid.
start_keeper() { # DIR NAME ARGS...
  local dir=$1 name=$2
  shift 2
  # shellcheck disable=SC2046 # the environment words are meant to split
  setsid "${AS_OWNER[@]}" env $(autoctl_env "$dir") pg_autoctl "$@" \
    </dev/null >>"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

node_states() { # DIR: "node1 primary primary" per line
  sql "$1" monitor pg_auto_failover \
    "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid"
}

# True once the monitor reports NODE in STATE as both its reported and its goal state.
node_in_state() { # DIR NODE STATE
  node_states "$1" | grep -qx "$2 $3 $3"
}

formation_ready() { # DIR MODE
  local dir=$1 mode=$2
  if ! node_in_state "$dir" node2 secondary; then
    # The standby's base backup begins with a checkpoint of the primary, spread over minutes
    # by default; an immediate one ends it at once.
    sql "$dir" node1 postgres "CHECKPOINT" >/dev/null
    return 1
  fi
  node_in_state "$dir" node1 primary || return 1
  local sync
  sync=$(sql "$dir" node1 postgres "SELECT string_agg(sync_state, ',') FROM pg_stat_replication")
  if [ "$mode" = async ]; then
    [ "$sync" = async ]
  else
    [ "$sync" = quorum ] || [ "$sync" = sync ]
  fi
}

cmd_start() { # DIR PORT [--async] [--fast]
  local dir=$1 port=$2 mode=sync fast=0
  shift 2
  for arg in "$@"; do
    case $arg in
      --async) mode=async ;;
      --fast) fast=1 ;;
      *) die "unknown option $arg" ;;
    esac
  done
  [ -n "$PG_BIN" ] || die "no PostgreSQL under /usr/lib/postgresql"
  command -v pg_autoctl >/dev/null ||
    die "pg_autoctl is not installed (postgresql-15-auto-failover, pg-auto-failover-cli)"
  [ ! -e "$dir/monitor.pid" ] || die "$dir already holds a formation"
  mkdir -p "$dir"/{config,data,run,sock}
  echo "$mode" >"$dir/mode"
  echo "$port" >"$dir/monitor.port"
  echo $((port + 1)) >"$dir/node1.port"
  echo $((port + 2)) >"$dir/node2.port"
  [ "$(id -u)" -ne 0 ] || chown -R postgres:postgres "$dir"

  local common=(--hostname 127.0.0.1 --auth trust --no-ssl)
  # The monitor has no --listen: created first, then told to listen on 127.0.0.1 only.
  # shellcheck disable=SC2046
  "${AS_OWNER[@]}" env $(autoctl_env "$dir") pg_autoctl create monitor --pgdata "$dir/monitor" \
    --pgport "$port" "${common[@]}" >>"$dir/monitor.log" 2>&1 ||
    die "cannot create the monitor; see $dir/monitor.log"
  # shellcheck disable=SC2046
  "${AS_OWNER[@]}" env $(autoctl_env "$dir") pg_autoctl config set --pgdata "$dir/monitor" \
    postgresql.listen_addresses 127.0.0.1 >>"$dir/monitor.log" 2>&1
  start_keeper "$dir" monitor run --pgdata "$dir/monitor"
  echo "postgres://autoctl_node@127.0.0.1:$port/pg_auto_failover?sslmode=disable" \
    >"$dir/monitor.uri"
  wait_for 60 "the monitor did not come up; see $dir/monitor.log" node_states "$dir"
  if [ $fast -eq 1 ]; then
    # Decide a failover within seconds: health checks every second (retried twice, a second
    # apart; a dead node refuses at once, a slow one still has the default 5 s to answer), a
    # node unhealthy after 3 s without a report, and the old primary given 2 s to stop before
    # the standby takes over. (The defaults, which also let a partitioned primary demote
    # itself in time, take about 30 s longer.)
    local setting
    for setting in health_check_period=1000 health_check_retry_delay=1000 \
      node_considered_unhealthy_timeout=3000 primary_demote_timeout=2000 \
      startup_grace_period=1000; do
      sql "$dir" monitor pg_auto_failover \
        "ALTER SYSTEM SET pgautofailover.${setting%=*} = ${setting#*=}" >/dev/null
    done
    sql "$dir" monitor pg_auto_failover "SELECT pg_reload_conf()" >/dev/null
  fi

  local name quorum
  for name in "${NODES[@]}"; do
    quorum=true
    [ "$name" = node2 ] && [ "$mode" = async ] && quorum=false
    start_keeper "$dir" "$name" create postgres --pgdata "$dir/$name" \
      --pgport "$(port_of "$dir" "$name")" --listen 127.0.0.1 --name "$name" \
      --dbname verdict --monitor "$(cat "$dir/monitor.uri")" --replication-quorum $quorum \
      "${common[@]}" --run
    if [ "$name" = node1 ]; then
      wait_for 120 "node1 did not start; see $dir/node1.log, which ended:
$(tail -n 20 "$dir/node1.log" 2>/dev/null)" node_in_state "$dir" node1 single
      if [ $fast -eq 1 ]; then
        sql "$dir" node1 postgres "ALTER SYSTEM SET fsync = off" >/dev/null
        sql "$dir" node1 postgres "SELECT pg_reload_conf()" >/dev/null
      fi
    fi
  done
  if ! (wait_for 180 "the formation did not become ready" formation_ready "$dir" "$mode"); then
    cmd_state "$dir" >&2 || true
    tail -n 15 "$dir"/*.log >&2
    exit 1
  fi
  cmd_conninfo "$dir"
}

cmd_conninfo() { # DIR
  echo "host=127.0.0.1,127.0.0.1 port=$(port_of "$1" node1),$(port_of "$1" node2)" \
    "dbname=verdict user=$OWNER target_session_attrs=read-write"
}

cmd_state() { # DIR
  local name state goal
  while read -r name state goal; do
    echo "$name 127.0.0.1:$(port_of "$1" "$name") $state/$goal"
  done < <(node_states "$1")
}

cmd_primary() { # DIR
  local name
  for name in "${NODES[@]}"; do
    if [ "$(sql "$1" "$name" postgres "SELECT NOT pg_is_in_recovery()" 2>/dev/null)" = t ]; then
      echo "$name"
      return 0
    fi
  done
  return 1
}

writable_primary() { # DIR NODE
  { node_in_state "$1" "$2" primary || node_in_state "$1" "$2" wait_primary; } &&
    [ "$(cmd_primary "$1")" = "$2" ]
}

cmd_wait_primary() { # DIR NODE [SECONDS]
  wait_for "${3:-120}" "$2 did not become the primary" writable_primary "$1" "$2"
}

# The processes of a node: those of the keeper's process group (its pid), which holds the
# keeper, its services and the postmaster even once orphaned, and all their descendants (the
# postmaster's children lead process groups of their own).
node_processes() { # DIR NAME
  ps -e -o pid=,ppid=,pgid= | awk -v group="$(cat "$1/$2.pid")" '
    { parent[$1] = $2; grp[$1] = $3 }
    END {
      for (pid in grp) {
        for (p = pid; p in grp; p = parent[p]) {
          if (grp[p] == group) { printf "%s ", pid; break }
          if (p == parent[p]) break
        }
      }
    }'
}

# SIGKILLs the node's processes; true if it had any. The dynamic shared memory segments its
# servers had mapped are removed after them (a server killed this way leaves them behind).
kill_node() { # DIR NAME
  local pids segments
  read -r -a pids <<<"$(node_processes "$1" "$2")"
  [ ${#pids[@]} -gt 0 ] || return 1
  segments=$(for pid in "${pids[@]}"; do
    grep -o '/dev/shm/PostgreSQL\.[0-9]*' "/proc/$pid/maps" 2>/dev/null || true
  done | sort -u)
  # Frozen first, so that no process of the node reacts (a keeper restarting its postmaster)
  # before all are gone.
  kill -STOP "${pids[@]}" 2>/dev/null || true
  kill -KILL "${pids[@]}" 2>/dev/null || true
  # shellcheck disable=SC2086
  [ -z "$segments" ] || rm -f $segments
  echo "killed $2: ${#pids[@]} processes (keeper, postmaster, backends)"
}

cmd_kill_node() { # DIR NODE
  kill_node "$1" "$2" || die "$2 has no processes"
}

cmd_pause_replication() { # DIR
  local primary standby senders receiver
  primary=$(cmd_primary "$1") || die "no primary to pause"
  standby=$([ "$primary" = node1 ] && echo node2 || echo node1)
  senders=$(sql "$1" "$primary" postgres "SELECT pid FROM pg_stat_replication")
  receiver=$(sql "$1" "$standby" postgres "SELECT pid FROM pg_stat_wal_receiver")
  [ -n "$senders" ] && [ -n "$receiver" ] || die "no replication to pause"
  # The sender first: what it has not yet written to its socket can no longer reach the
  # standby, whatever the kernel's buffers hold.
  # shellcheck disable=SC2086
  kill -STOP $senders $receiver
  echo $senders $receiver >"$1/paused"
  echo "paused replication: WAL sender $senders on $primary, WAL receiver $receiver on $standby"
}

cmd_resume_replication() { # DIR
  [ -f "$1/paused" ] || return 0
  # shellcheck disable=SC2046
  kill -CONT $(cat "$1/paused") 2>/dev/null || true
  rm -f "$1/paused"
}

cmd_stop() { # DIR
  local dir=$1 name
  [ -d "$dir" ] || return 0
  # Everything under DIR goes, so nothing needs a clean shutdown.
  for name in node2 node1 monitor; do
    [ ! -f "$dir/$name.pid" ] || kill_node "$dir" "$name" >/dev/null || true
  done
  rm -rf "$dir"
}

cmd_run() { # DIR PORT [options]
  local dir=$1
  trap 'cmd_stop "$dir"' EXIT
  trap 'exit 0' INT TERM
  cmd_start "$@"
  disown -a # the keepers are killed by cmd_stop, which needs no word from the shell about it
  echo "the formation runs; Ctrl-C stops it and removes $dir"
  while :; do sleep 1; done
}

main() {
  [ $# -ge 2 ] || die "usage: ha.sh start|run|conninfo|state|primary|wait-primary|kill-node|pause-replication|resume-replication|stop DIR …"
  local command=$1
  shift
  case $command in
    start) [ $# -ge 2 ] || die "usage: ha.sh start DIR PORT [--async] [--fast]"; cmd_start "$@" ;;
    run) [ $# -ge 2 ] || die "usage: ha.sh run DIR PORT [--async] [--fast]"; cmd_run "$@" ;;
    conninfo) cmd_conninfo "$1" ;;
    state) cmd_state "$1" ;;
    primary) cmd_primary "$1" ;;
    wait-primary) [ $# -ge 2 ] || die "usage: ha.sh wait-primary DIR NODE [SECONDS]"; cmd_wait_primary "$@" ;;
    kill-node) [ $# -ge 2 ] || die "usage: ha.sh kill-node DIR NODE"; cmd_kill_node "$1" "$2" ;;
    pause-replication) cmd_pause_replication "$1" ;;
    resume-replication) cmd_resume_replication "$1" ;;
    stop) cmd_stop "$1" ;;
    *) die "unknown command $command" ;;
  esac
}

main "$@"
