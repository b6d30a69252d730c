#!/usr/bin/env bash
# Builds the Debian packages with CPack into a temporary directory and inspects them: their
# files (dpkg-deb -c), their control data and dependencies (dpkg-deb -I), and their systemd
# units (offline security analysis, which also parses them).
#   packages_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$work" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }

deb() { ls "$work"/"$1"_*.deb 2>/dev/null | head -1; }
contents() { dpkg-deb -c "$1" | awk '{print $NF}'; }
expect_file() { contents "$1" | grep -qx "$2" || fail "$(basename "$1") lacks $2"; }
expect_field() {  # deb, field, extended regex its value must match
  local value
  value=$(dpkg-deb -f "$1" "$2")
  [[ "$value" =~ $3 ]] || fail "$(basename "$1") $2: '$value' does not match '$3'"
}

lobby=$(deb verdict-lobby) node=$(deb verdict-node) dev=$(deb libverdict-dev)
[ -n "$lobby" ] && [ -n "$node" ] && [ -n "$dev" ] || fail "missing packages: $(ls "$work")"

expect_file "$lobby" ./usr/bin/verdict-lobby
expect_file "$lobby" ./usr/lib/systemd/system/verdict-lobby.service
expect_file "$lobby" ./usr/lib/systemd/system/verdict-lobby-retain.service
expect_file "$lobby" ./usr/lib/systemd/system/verdict-lobby-retain.timer
expect_file "$lobby" ./etc/verdict/lobby.conf
expect_file "$lobby" ./usr/share/verdict/sql/001_baseline.sql
expect_file "$lobby" ./usr/share/verdict/sql/functions/verdict_settle_prepare.sql
expect_file "$lobby" ./usr/share/verdict/prometheus/verdict.rules.yml
expect_file "$lobby" ./usr/share/verdict/grafana/verdict-dashboard.json
expect_field "$lobby" Depends '(^|, )adduser(,|$)'
expect_field "$lobby" Depends 'libpqxx-[0-9.]+'
expect_field "$lobby" Depends 'libprotobuf[0-9]+'
expect_field "$lobby" Recommends 'postgresql'

expect_file "$node" ./usr/bin/verdict-node
expect_file "$node" ./usr/lib/systemd/system/verdict-node.service
expect_file "$node" ./etc/verdict/node.conf
expect_field "$node" Depends 'librocksdb[0-9.]+'
expect_field "$node" Depends '(^|, )adduser(,|$)'
if contents "$node" | grep -q verdict-lobby; then fail "verdict-node ships the lobby"; fi

expect_file "$dev" ./usr/include/verdict/node/battle_node.h
contents "$dev" | grep -q '/cmake/verdict/verdictConfig.cmake$' || fail "dev lacks the config"
contents "$dev" | grep -q '/libverdict_node.a$' || fail "dev lacks libverdict_node.a"
expect_field "$dev" Depends 'librocksdb-dev'
expect_field "$dev" Depends 'libprotobuf-dev'
if contents "$dev" | grep -q '/bin/'; then fail "libverdict-dev ships binaries"; fi

# Nothing of the negative controls ships: no test build of a program, no test-only SQL.
for pkg in "$lobby" "$node" "$dev"; do
  if contents "$pkg" | grep -Eq -- '-testing$|unguarded'; then
    fail "$(basename "$pkg") ships a test build or test-only SQL"
  fi
done

for pkg in "$lobby" "$node"; do
  name=$(dpkg-deb -f "$pkg" Package)
  dpkg-deb -e "$pkg" "$work/control-$name"
  for script in postinst prerm postrm; do
    [ -x "$work/control-$name/$script" ] || fail "$name has no executable $script"
    sh -n "$work/control-$name/$script" || fail "$name $script is not valid sh"
  done
  grep -qx "/etc/verdict/${name#verdict-}.conf" "$work/control-$name/conffiles" ||
    fail "$name does not mark its configuration as a conffile"
  grep -q "adduser --system" "$work/control-$name/postinst" || fail "$name creates no user"

  dpkg-deb -x "$pkg" "$work/root-$name"
  unit="$work/root-$name/usr/lib/systemd/system/$name.service"
  # Type=notify and RestartForceExitStatus=SIGHUP: no SIGHUP can end the program early and leave
  # it down (docs/operating.md, "A SIGHUP early in a program's start").
  for directive in "User=verdict" "Restart=on-failure" "ProtectSystem=strict" \
                   "NoNewPrivileges=yes" "ExecStart=/usr/bin/$name --config /etc/verdict/" \
                   "Type=notify" "RestartForceExitStatus=SIGHUP"; do
    grep -q "^$directive" "$unit" || fail "$name.service lacks $directive"
  done
  if command -v systemd-analyze >/dev/null; then
    systemd-analyze security --offline=true --threshold=30 "$unit" >"$work/security.log" 2>&1 ||
      { cat "$work/security.log"; fail "$name.service: exposure above 3.0 or does not parse"; }
  fi
done
grep -q "^StateDirectory=verdict-node" "$work/root-verdict-node/usr/lib/systemd/system/verdict-node.service" ||
  fail "verdict-node.service has no state directory under /var/lib"
grep -q "^outbox = /var/lib/verdict-node/" "$work/root-verdict-node/etc/verdict/node.conf" ||
  fail "node.conf does not put the outbox in the state directory"
grep -q "^ExecStartPre=/usr/bin/verdict-lobby --config /etc/verdict/lobby.conf migrate" \
  "$work/root-verdict-lobby/usr/lib/systemd/system/verdict-lobby.service" ||
  fail "verdict-lobby.service does not migrate on start"
# The retention pass: a oneshot service as confined as the lobby's, run by a timer.
retain_unit="$work/root-verdict-lobby/usr/lib/systemd/system/verdict-lobby-retain.service"
for directive in "Type=oneshot" "User=verdict" "ProtectSystem=strict" "NoNewPrivileges=yes" \
                 "ExecStart=/usr/bin/verdict-lobby --config /etc/verdict/lobby.conf retain"; do
  grep -q "^$directive" "$retain_unit" || fail "verdict-lobby-retain.service lacks $directive"
done
grep -q "^OnCalendar=" "$work/root-verdict-lobby/usr/lib/systemd/system/verdict-lobby-retain.timer" ||
  fail "verdict-lobby-retain.timer has no schedule"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze security --offline=true --threshold=30 "$retain_unit" >"$work/security.log" 2>&1 ||
    { cat "$work/security.log"; fail "verdict-lobby-retain.service: exposure above 3.0 or does not parse"; }
fi

echo "packages: $(cd "$work" && ls *.deb | tr '\n' ' ')"
