# Sourced by scripts/test and scripts/demo: makes sure the Debian packages verdict builds and
# runs with are installed. As root it installs what is missing (after one apt-get update);
# otherwise it prints the exact command to run and fails.

# What the lobby and the node need to build and run, and the demo to run them: all that
# ./scripts/demo installs.
VERDICT_DEMO_PACKAGES=(
  cmake g++ make pkg-config
  librocksdb-dev libboost-dev libpqxx-dev libprotobuf-dev protobuf-compiler
  libspdlog-dev libssl-dev libcli11-dev
  # initdb, pg_ctl and psql for the demo's own throwaway server
  postgresql
  curl
)
# What the tests, the benchmarks and the packages need besides: ./scripts/test installs both.
VERDICT_TEST_PACKAGES=(
  libgtest-dev
  # cpack's Debian packages (dpkg-shlibdeps) and their test
  dpkg-dev file
  # pg_virtualenv, for the test clusters
  postgresql-common
  # pg_auto_failover, for the failover test and the HA formation of scripts/lib/ha.sh
  postgresql-15-auto-failover pg-auto-failover-cli
  # the example ingest clients (examples/go, examples/python, examples/csharp), the test that
  # runs them, and the tests that check the docs and api/openapi.yaml
  golang-go python3 python3-yaml mono-mcs mono-runtime
  # promtool, for the alert rules' unit tests (packaging/prometheus)
  prometheus
  # the replicated tier's tests (three-member clusters) and etcdctl for operators
  etcd-server etcd-client
)

# ensure_packages [--no-install-recommends] PACKAGE...: installs those that are missing (and,
# without the option, the packages they recommend).
ensure_packages() {
  local missing=() pkg apt_options=()
  if [ "${1:-}" = --no-install-recommends ]; then
    apt_options=("$1")
    shift
  fi
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "verdict needs these Debian packages, which are not installed:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${apt_options[*]} ${missing[*]}" >&2
    return 1
  fi
  echo "installing missing packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_options[@]}" "${missing[@]}" >/dev/null
}

# build_verdict [TARGET...]: configures build/ (once) and builds it, reusing it between runs.
# Without targets it builds everything, the tests included, as RelWithDebInfo. With targets (the
# demo's) it builds only those, and a build/ it configures is of the Demo build type (-O1, no
# debug information: about two thirds of the compile time) without the tests, which need
# GoogleTest; a later build of everything reconfigures that build/ and builds it anew.
build_verdict() {
  if [ $# -eq 0 ] && grep -qE '^(CMAKE_BUILD_TYPE:STRING=Demo|VERDICT_TESTS:BOOL=OFF)$' \
    build/CMakeCache.txt 2>/dev/null; then
    cmake build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVERDICT_TESTS=ON >/dev/null
  fi
  if [ $# -gt 0 ] && [ -f build/CMakeCache.txt ]; then
    cmake build >/dev/null  # a target newer than the build/ (make knows no rule for it yet)
  fi
  if [ ! -f build/CMakeCache.txt ]; then
    local type=RelWithDebInfo tests=ON
    [ $# -gt 0 ] && type=Demo tests=OFF
    # Configured for /usr so that the same build also makes the Debian packages.
    cmake -S . -B build -DCMAKE_BUILD_TYPE=$type -DVERDICT_TESTS=$tests \
      -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  fi
  cmake --build build -j2 ${1:+--target "$@"}
}

# A run killed mid-way can leave pg_virtualenv's cluster behind, which blocks the next one.
# One killed before its cluster had a data directory leaves only the configuration directory,
# which pg_lsclusters does not list and pg_dropcluster does not remove, yet pg_virtualenv refuses
# to overwrite: that is removed when pg_virtualenv's own marker says it made it.
clear_stale_test_cluster() {
  local version config
  for version in $(pg_lsclusters -h 2>/dev/null | awk '$2 == "regress" {print $1}'); do
    echo "removing stale test cluster $version/regress"
    pg_dropcluster --stop "$version" regress || true
  done
  for config in /etc/postgresql/*/regress; do
    if [ -f "$config/.by_pg_virtualenv" ] && [ ! -f "$config/postgresql.conf" ]; then
      echo "removing the remains of a test cluster in $config"
      rm -rf "$config"
    fi
  done
}
