#!/usr/bin/env bash
# Installs the build into a temporary DESTDIR (the Debian layout: prefix /usr, /etc/verdict) and
# builds the embedding example against the installed CMake package, as a battle host would; then
# installs it with `--prefix DIR`, as a user without root does, and checks that nothing is
# written outside DIR.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

DESTDIR="$work/root" cmake --install "$build" >/dev/null
prefix="$work/root$(cmake -L -N "$build" | sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p')"

fail() { echo "FAIL: $*" >&2; exit 1; }
for f in bin/verdict-lobby bin/verdict-node include/verdict/node/battle_node.h \
         include/verdict/v1/verdict.pb.h lib/systemd/system/verdict-lobby.service \
         lib/systemd/system/verdict-lobby-retain.service \
         lib/systemd/system/verdict-lobby-retain.timer \
         lib/systemd/system/verdict-node.service; do
  [ -e "$prefix/$f" ] || fail "missing $f"
done
# Only what a host needs: the library's internals are not installed.
for f in node/outbox_writer.h node/result_channel.h node/ingest.h node/room_table.h \
         delivery/deliverer.h server/http_server.h; do
  [ ! -e "$prefix/include/verdict/$f" ] || fail "installs the internal header $f"
done
# The test builds of the programs, with the negative controls' switches, never ship.
for f in bin/verdict-lobby-testing bin/verdict-node-testing; do
  [ ! -e "$prefix/$f" ] || fail "installs $f, a test build"
done
ls "$prefix"/lib/*/cmake/verdict/verdictConfig.cmake >/dev/null || fail "no CMake package config"
ls "$prefix"/lib/*/libverdict_node.a >/dev/null || fail "no libverdict_node.a"
for sql in "$source"/sql/[0-9][0-9][0-9]_*.sql "$source"/sql/functions/*.sql; do
  name=${sql#"$source"/sql/}
  cmp -s "$sql" "$prefix/share/verdict/sql/$name" || fail "migration $name"
done
conf_dir="$work/root/etc/verdict"
[ "$prefix" = "$work/root/usr" ] || conf_dir="$prefix/etc/verdict"
[ -f "$conf_dir/lobby.conf" ] && [ -f "$conf_dir/node.conf" ] || fail "config files not in $conf_dir"

# The shipped configuration files parse: every key they set is a flag the binary knows.
"$prefix/bin/verdict-lobby" --config "$conf_dir/lobby.conf" serve --help >/dev/null ||
  fail "lobby.conf does not parse"
"$prefix/bin/verdict-node" --config "$conf_dir/node.conf" run --help >/dev/null ||
  fail "node.conf does not parse"

# `cmake --install BUILD --prefix DIR`: every file under DIR (install_manifest.txt lists each one
# written, without the DESTDIR), the configuration in DIR/etc/verdict, and units that name what
# this install put where. Run inside a DESTDIR so that a file meant for /etc lands in the scratch
# directory, not on this machine, and shows in the manifest as outside DIR.
jail="$work/jail" own="$work/own"
DESTDIR="$jail" cmake --install "$build" --prefix "$own" >/dev/null
[ -s "$build/install_manifest.txt" ] || fail "no install manifest"
while read -r f; do
  case "$f" in "$own"/*) ;; *) fail "--prefix $own installs $f, outside the prefix" ;; esac
done <"$build/install_manifest.txt"
for f in etc/verdict/lobby.conf etc/verdict/node.conf bin/verdict-node \
         include/verdict/node/battle_node.h; do
  [ -e "$jail$own/$f" ] || fail "--prefix $own: missing $f"
done
grep -qx "ExecStart=$own/bin/verdict-node --config $own/etc/verdict/node.conf run" \
  "$jail$own/lib/systemd/system/verdict-node.service" || fail "verdict-node.service names other paths"
grep -qx "ExecStart=$own/bin/verdict-lobby --config $own/etc/verdict/lobby.conf serve" \
  "$jail$own/lib/systemd/system/verdict-lobby.service" || fail "verdict-lobby.service names other paths"

# A battle host's own project: find_package(verdict), link verdict::node. Its include path comes
# first and has headers of its own under the names verdict's headers have in its source tree; the
# installed headers include each other as "verdict/…", so none of these is ever read.
for h in common/status.h common/clock.h common/metrics.h node/room.h node/options.h \
         storage/outbox.h delivery/deliverer_options.h; do
  mkdir -p "$work/host/$(dirname "$h")"
  echo "#error the host's own $h was included from inside verdict's headers" >"$work/host/$h"
done
cmake -S "$source/examples" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="-I$work/host" \
  -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "example does not configure against the installed package"; }
grep -q "verdict" "$work/example/CMakeCache.txt"
verdict_dir=$(sed -n 's/^verdict_DIR:PATH=//p' "$work/example/CMakeCache.txt")
case "$verdict_dir" in "$prefix"/*) ;; *) fail "found verdict at '$verdict_dir', not in $prefix" ;; esac
cmake --build "$work/example" -j2 >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "example does not build against the installed package"; }
[ -x "$work/example/embed_battle_host" ] || fail "no example binary"
echo "installed into $prefix and under --prefix $own; the embedding example built against it"
