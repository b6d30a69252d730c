# Sourced by the scripts here that build examples/go: the Go settings of every such build, with
# its caches under $work (which the sourcing script makes and removes), no network and the
# installed toolchain, so nothing outside $work is read or written.
export GOCACHE="$work/go/cache" GOPATH="$work/go/path" GOENV=off GOFLAGS='' GOWORK=off \
  GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
