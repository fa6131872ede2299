#!/bin/bash
# Fuzzes every target of tests/fuzz for SECONDS each (default 30), starting
# from its in-tree seed corpus. Needs the `fuzz` preset built:
#   cmake --preset fuzz && cmake --build --preset fuzz
#   tests/fuzz/run.sh 60 [TARGET...]
# New inputs go to build-fuzz/corpus/TARGET (the in-tree corpus stays as it
# is), crashes to build-fuzz/crashes/TARGET. Prints each target's executions,
# coverage and features; exits 1 when any target crashed.
set -u
seconds=${1:-30}
shift || true
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build=${FLOTILLA_FUZZ_BUILD:-$source_dir/build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(protocol_decode rank_record config sweep records)

case $seconds in
  '' | *[!0-9]*) echo "run.sh: SECONDS must be a whole number of seconds, got '$seconds'" >&2; exit 2 ;;
esac

failed=0
printf '%-16s %10s %10s %8s %9s %s\n' target seconds execs cov features result
for target in "${targets[@]}"; do
  binary=$build/bin/${target}_fuzz
  if [ ! -x "$binary" ]; then
    echo "run.sh: $binary is not built (cmake --build --preset fuzz)" >&2
    exit 2
  fi
  corpus=$build/corpus/$target
  crashes=$build/crashes/$target
  log=$build/fuzz-$target.log
  mkdir -p "$corpus" "$crashes"
  # libFuzzer writes new inputs into its first corpus folder only.
  "$binary" "$corpus" "$source_dir/tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=ok
  if [ $rc -ne 0 ]; then
    result="CRASH (rc $rc): $(ls "$crashes" | head -1), see $log"
    failed=1
  fi
  printf '%-16s %10s %10s %8s %9s %s\n' "$target" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
exit $failed
