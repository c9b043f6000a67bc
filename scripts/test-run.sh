#!/usr/bin/env bash
# Runs the test binaries of `cargo test` several at a time (cargo runs them one after
# another). Most of the suite's time is spent waiting on servers, timers and child
# processes, not computing: on 2 cores, three binaries at once take about a third of the
# time. Each binary's output is kept whole and printed when it ends; the last line is the
# total, `N passed, N failed`.
#
# Besides every test binary once (on $AUTOREGISTER_KUBE_VERSION, as the caller set it),
# the binaries named in KUBE_TESTS run again on the version OLDEST, their test-server cases
# skipped: the real-server suite on the oldest supported Kubernetes.
#
# Usage: scripts/test-run.sh LOG_DIR JOBS OLDEST "KUBE_TESTS" [cargo test args...]
#   e.g. scripts/test-run.sh target/test-logs 3 v1.31.14 "servers explain" --features testing
set -euo pipefail
log_dir="$1" jobs="$2" oldest="$3" kube_tests="$4"
shift 4
cargo="${CARGO:-cargo}"
rm -rf "$log_dir" && mkdir -p "$log_dir"

# The binaries cargo would run, as `kind name path` (kind: lib, bin or test).
"$cargo" test "$@" --no-run --message-format=json-render-diagnostics >"$log_dir/artifacts.json"
python3 - "$log_dir/artifacts.json" >"$log_dir/binaries" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        t = m["target"]
        print(t["kind"][0], t["name"], m["executable"])
EOF

# One job a line: `label|version|path|args`. The real-server binaries first: they are the
# longest, and a long one started last would leave the other slots idle at the end.
jobs_file="$log_dir/jobs"
: >"$jobs_file"
is_kube() { case " $kube_tests " in *" $1 "*) return 0;; esac; return 1; }
while read -r kind name path; do
  if [ "$kind" = test ] && is_kube "$name"; then
    echo "tests/$name.rs|${AUTOREGISTER_KUBE_VERSION:-}|$path|" >>"$jobs_file"
    echo "tests/$name.rs on $oldest|$oldest|$path|--skip test_server" >>"$jobs_file"
  fi
done <"$log_dir/binaries"
while read -r kind name path; do
  if [ "$kind" != test ] || ! is_kube "$name"; then
    case "$kind" in test) label="tests/$name.rs";; lib) label="unit tests (lib)";; *) label="unit tests ($kind $name)";; esac
    echo "$label|${AUTOREGISTER_KUBE_VERSION:-}|$path|" >>"$jobs_file"
  fi
done <"$log_dir/binaries"
for name in $kube_tests; do
  grep -q "^tests/$name.rs|" "$jobs_file" || { echo "test-run.sh: no test binary named $name" >&2; exit 2; }
done

# One job: run it (from the package root, as cargo does) into its own log, then print the
# log whole under one lock so outputs never interleave.
run_one() {
  local n="$1" label version path args start rc
  IFS='|' read -r label version path args <<<"$(sed -n "${n}p" "$jobs_file")"
  start=$(date +%s)
  # shellcheck disable=SC2086 # args are words
  env ${version:+AUTOREGISTER_KUBE_VERSION="$version"} "$path" $args >"$log_dir/$n.log" 2>&1 && rc=0 || rc=$?
  echo "$rc" >"$log_dir/$n.rc"
  {
    flock 9
    echo "     Running $label ($(( $(date +%s) - start )) s, exit $rc)"
    cat "$log_dir/$n.log"
  } 9>"$log_dir/print.lock"
}
export -f run_one
export log_dir jobs_file
count=$(wc -l <"$jobs_file")
echo "test-run.sh: $count test binaries, $jobs at a time"
seq 1 "$count" | xargs -P "$jobs" -I{} bash -c 'run_one {}' || true

# The doc tests: rustdoc compiles each at run time, so cargo runs them.
doc_rc=0
"$cargo" test "$@" --doc 2>&1 | tee "$log_dir/doc.log" || doc_rc=$?

failed_jobs=()
for n in $(seq 1 "$count"); do
  rc=$(cat "$log_dir/$n.rc" 2>/dev/null || echo missing)
  [ "$rc" = 0 ] || failed_jobs+=("$(sed -n "${n}p" "$jobs_file" | cut -d'|' -f1) (exit $rc, log $log_dir/$n.log)")
done
[ "$doc_rc" = 0 ] || failed_jobs+=("doc tests (exit $doc_rc, log $log_dir/doc.log)")
read -r passed failed < <(cat "$log_dir"/*.log | sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' \
  | awk '{p += $1; f += $2} END {print p + 0, f + 0}')
if [ ${#failed_jobs[@]} -gt 0 ]; then
  echo "test-run.sh: failed:" >&2
  printf '  %s\n' "${failed_jobs[@]}" >&2
  # A binary that died without its summary line still counts as a failure.
  [ "$failed" -gt 0 ] || failed=${#failed_jobs[@]}
fi
echo "$passed passed, $failed failed"
[ ${#failed_jobs[@]} -eq 0 ]
