# Sourced by scripts/test and scripts/demo: makes sure the Debian packages verdict builds and
# runs with are installed. As root it installs what is missing (after one apt-get update);
# otherwise it prints the exact command to run and fails.

VERDICT_PACKAGES=(
  cmake g++ make pkg-config dpkg-dev file
  librocksdb-dev libboost-dev libpqxx-dev libprotobuf-dev protobuf-compiler
  libspdlog-dev libgtest-dev libssl-dev libcli11-dev
  postgresql postgresql-common
  # pg_auto_failover, for the failover test and the HA formation of scripts/lib/ha.sh
  postgresql-15-auto-failover pg-auto-failover-cli
  # the example ingest clients (examples/go, examples/python, examples/csharp) and the test that
  # runs them
  golang-go python3 mono-mcs mono-runtime
  # promtool, for the alert rules' unit tests (packaging/prometheus), curl for the scrape, and
  # python3-yaml for the check of the rules' runbooks and the dashboard's queries
  prometheus curl python3-yaml
  # the replicated tier's tests (three-member clusters) and etcdctl for operators
  etcd-server etcd-client
)

ensure_packages() {
  local missing=() pkg
  for pkg in "${VERDICT_PACKAGES[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "verdict needs these Debian packages, which are not installed:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    return 1
  fi
  echo "installing missing packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Configures (once) and builds into build/, reusing it between runs.
build_verdict() {
  if [ ! -f build/CMakeCache.txt ]; then
    # Configured for /usr so that the same build also makes the Debian packages.
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  fi
  cmake --build build -j2
}

# A run killed mid-way can leave pg_virtualenv's cluster behind, which blocks the next one.
clear_stale_test_cluster() {
  local version
  for version in $(pg_lsclusters -h 2>/dev/null | awk '$2 == "regress" {print $1}'); do
    echo "removing stale test cluster $version/regress"
    pg_dropcluster --stop "$version" regress || true
  done
}
