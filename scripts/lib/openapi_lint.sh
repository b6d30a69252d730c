# Sourced by scripts/test: installs the OpenAPI linter that tests/openapi runs on api/openapi.yaml
# (Redocly's CLI, pinned by tests/openapi/package-lock.json) into build/openapi-lint/, when it is
# missing or the lock changed. npm comes from Debian (nodejs, npm) when the machine has none.

ensure_openapi_linter() {
  local dir=build/openapi-lint
  if cmp -s tests/openapi/package-lock.json "$dir/package-lock.json" &&
    [ -x "$dir/node_modules/.bin/redocly" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null; then
    ensure_packages nodejs npm || return 1
  fi
  echo "installing the OpenAPI linter (tests/openapi/package-lock.json) into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  cp tests/openapi/package.json tests/openapi/package-lock.json "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
}
