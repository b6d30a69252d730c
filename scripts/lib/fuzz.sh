# Sourced by scripts/test: builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz/
# (reused between runs) and runs each for VERDICT_FUZZ_SECONDS (default 30) from its checked-in
# seed corpus. Fails on a crash, a leak or a sanitizer report; the input that did it is left in
# build-fuzz/ as crash-* / leak-*.

VERDICT_FUZZ_PACKAGES=(clang-14 libclang-rt-14-dev)
VERDICT_FUZZ_TARGETS=(lobby_request outbox_value)

run_fuzzers() {
  local seconds=${VERDICT_FUZZ_SECONDS:-30} failed=0 target corpus
  if [ ! -f build-fuzz/CMakeCache.txt ]; then
    cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  fi
  if ! cmake --build build-fuzz -j2; then
    echo "FUZZ FAILURE: the fuzz targets do not build (tests/fuzz/CMakeLists.txt)"
    return 1
  fi
  for target in "${VERDICT_FUZZ_TARGETS[@]}"; do
    corpus=$(mktemp -d)
    echo "fuzzing $target for ${seconds}s"
    if ! build-fuzz/fuzz_"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=build-fuzz/ -print_final_stats=1 "$corpus" \
        tests/fuzz/corpus/"$target" >build-fuzz/"$target".log 2>&1; then
      echo "FUZZ FAILURE in $target:"
      tail -n 40 build-fuzz/"$target".log
      failed=1
    else
      grep -E "stat::number_of_executed_units|stat::new_units_added" build-fuzz/"$target".log |
        tr '\n' ' '
      echo
    fi
    rm -rf "$corpus"
  done
  return $failed
}
