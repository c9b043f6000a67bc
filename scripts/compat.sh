#!/usr/bin/env bash
# `make compat`: builds each VERSION (scripts/kube-build.sh) and runs the real-server test
# binaries (TESTS, "--test NAME ...") against it, then prints a table: version, tests
# passed and failed, time. Each version's output is in OUT/VERSION.log. Fails when any
# version fails, after running every one.
# Usage: scripts/compat.sh KUBE_DIR OUT "TESTS" VERSION...
set -uo pipefail
kube_dir="$1" out="$2" tests="$3"
shift 3
cargo="${CARGO:-cargo}"
mkdir -p "$out"
# Compile once, before the clock starts for the first version.
# shellcheck disable=SC2086
"$cargo" test --features testing $tests --no-run || exit 1

rows=()
failed=0
for v in "$@"; do
  log="$out/$v.log"
  start=$(date +%s)
  if ! "$(dirname "$0")/kube-build.sh" "$kube_dir" "$v"; then
    rows+=("$v|build failed|-|-")
    failed=1
    continue
  fi
  built=$(date +%s)
  echo "make compat: the real-server tests on Kubernetes $v (output in $log)"
  # shellcheck disable=SC2086
  AUTOREGISTER_KUBE_BIN="$kube_dir" AUTOREGISTER_KUBE_VERSION="$v" \
    "$cargo" test --no-fail-fast --features testing $tests -- --skip test_server >"$log" 2>&1
  status=$?
  secs=$(( $(date +%s) - built ))
  # libtest's summary lines: "test result: ok. 7 passed; 0 failed; ..."
  passed=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  fails=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$log" | awk '{s += $1} END {print s + 0}')
  if [ "$status" != 0 ]; then
    failed=1
    [ "$fails" = 0 ] && fails="? (see log)"
    grep -E '^test .* FAILED$' "$log" | sed "s/^/  $v: /"
  fi
  rows+=("$v|$passed|$fails|${secs} s (build $(( built - start )) s)")
done

echo
echo "| Kubernetes | passed | failed | time |"
echo "|---|---|---|---|"
for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
exit "$failed"
