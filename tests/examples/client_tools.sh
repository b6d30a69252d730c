# Sourced by the scripts here: require_client_tools fails (through the sourcing script's `fail`)
# naming the Debian package of each tool the three example clients need that is missing.
require_client_tools() {
  command -v go >/dev/null ||
    fail "go is missing: install the Debian package golang-go (apt-get install golang-go)"
  command -v python3 >/dev/null || fail "python3 is missing: install the Debian package python3"
  command -v mcs >/dev/null ||
    fail "mcs is missing: install the Debian package mono-mcs (apt-get install mono-mcs)"
  command -v mono >/dev/null ||
    fail "mono is missing: install the Debian package mono-runtime (apt-get install mono-runtime)"
}
