#!/bin/bash
# Fuzzes every target of tests/fuzz for SECONDS each (default 30), starting
# from its in-tree seed corpus. Needs the `sanitize` preset built:
#   cmake --preset sanitize && cmake --build --preset sanitize
#   tests/fuzz/run.sh 60 [TARGET...]
# FLOTILLA_FUZZ_JOBS targets run at once (default: one per core); each
# libFuzzer process uses one core, so 5 targets of 30 s take about 90 s on 2.
# New inputs go to build-sanitize/corpus/TARGET (the in-tree corpus stays as
# it is), crashes to build-sanitize/crashes/TARGET. Prints each target's
# executions, coverage and features; exits 1 when any target crashed.
set -u
seconds=${1:-30}
shift || true
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build=${FLOTILLA_FUZZ_BUILD:-$source_dir/build-sanitize}
jobs=${FLOTILLA_FUZZ_JOBS:-$(nproc)}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(protocol_decode rank_record config sweep records)

# 0 would be libFuzzer's "no limit": a run that never ends.
case $seconds in
  '' | 0 | *[!0-9]*) echo "run.sh: SECONDS must be a whole number of seconds above 0, got '$seconds'" >&2; exit 2 ;;
esac
case $jobs in
  '' | 0 | *[!0-9]*) echo "run.sh: FLOTILLA_FUZZ_JOBS must be a whole number above 0, got '$jobs'" >&2; exit 2 ;;
esac
for target in "${targets[@]}"; do
  if [ ! -x "$build/bin/${target}_fuzz" ]; then
    echo "run.sh: $build/bin/${target}_fuzz is not built (cmake --build --preset sanitize)" >&2
    exit 2
  fi
done

# Fuzzes one target and writes its line of the table to fuzz-TARGET.result.
fuzz_one() {
  local target=$1
  local corpus=$build/corpus/$target crashes=$build/crashes/$target log=$build/fuzz-$target.log
  mkdir -p "$corpus" "$crashes"
  # libFuzzer writes new inputs into its first corpus folder only.
  "$build/bin/${target}_fuzz" "$corpus" "$source_dir/tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" >"$log" 2>&1
  local rc=$?
  local execs cov ft result=ok
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  [ $rc -eq 0 ] || result="CRASH (rc $rc): $(ls "$crashes" | head -1), see $log"
  printf '%-16s %10s %10s %8s %9s %s\n' "$target" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "$result" >"$build/fuzz-$target.result"
}

running=0
for target in "${targets[@]}"; do
  rm -f "$build/fuzz-$target.result"
  if [ $running -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
wait

failed=0
printf '%-16s %10s %10s %8s %9s %s\n' target seconds execs cov features result
for target in "${targets[@]}"; do
  if [ ! -f "$build/fuzz-$target.result" ]; then
    echo "$target: no result (see $build/fuzz-$target.log)"
    failed=1
    continue
  fi
  cat "$build/fuzz-$target.result"
  grep -q ' ok$' "$build/fuzz-$target.result" || failed=1
done
# CI keeps only this script's output, not build-sanitize: for each crash, the
# end of its report and the input itself (base64), enough to reproduce it.
for target in "${targets[@]}"; do
  grep -q ' ok$' "$build/fuzz-$target.result" 2>/dev/null && continue
  echo "--- $target: the end of $build/fuzz-$target.log"
  tail -n 40 "$build/fuzz-$target.log"
  for input in "$build/crashes/$target"/*; do
    [ -f "$input" ] || continue
    echo "--- $target: $(basename "$input"), $(stat -c %s "$input") bytes, base64:"
    head -c 4096 "$input" | base64
  done
done
exit $failed
