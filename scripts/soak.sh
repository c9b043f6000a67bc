#!/bin/sh
# Runs the whole test suite ROUNDS times (default 5) while a CPU-bound process keeps one
# core busy (as a shared CI machine does), then prints each test that failed with how many
# rounds it failed in and the output of its first failure. With CHAOS_SEEDS=N each round
# runs N chaos seeds of its own (round r starts at CHAOS_FIRST + (r-1)*N; CHAOS_FIRST
# defaults to 51, past the seeds `make test` runs) instead of the usual ones.
#
# Usage: scripts/soak.sh [ROUNDS]   (`make soak SOAK=N` passes the cargo and paths in)
# Environment: CARGO (default cargo), SOAK_DIR (where each round's output is kept; default
# a temporary directory), CHAOS_SEEDS, CHAOS_FIRST. Exits 1 when any round failed.
set -u

rounds=${1:-5}
cargo=${CARGO:-cargo}
dir=${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/autoregister-soak.XXXXXX")}
seeds=${CHAOS_SEEDS:-}
first=${CHAOS_FIRST:-51}
case $rounds in '' | *[!0-9]* | 0)
    echo "soak: ROUNDS must be a positive number, not '$rounds'" >&2
    exit 2
    ;;
esac
case $seeds in *[!0-9]*)
    echo "soak: CHAOS_SEEDS must be a number, not '$seeds'" >&2
    exit 2
    ;;
esac
mkdir -p "$dir" || exit 2
rm -f "$dir"/round-*.log "$dir"/failures

# Built before the load starts: the rounds measure the tests, not the compiler.
echo "soak: building the tests"
if ! $cargo test --features testing --no-run >"$dir/build.log" 2>&1; then
    cat "$dir/build.log" >&2
    echo "soak: the tests do not build" >&2
    exit 2
fi

# The other core's load: killed on every way out (done, failure, Ctrl-C).
sh -c 'while :; do :; done' &
hog=$!
trap 'kill "$hog" 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "soak: $rounds rounds, one core kept busy (pid $hog), output in $dir"

failed_rounds=0
r=1
while [ "$r" -le "$rounds" ]; do
    log="$dir/round-$r.log"
    started=$(date +%s)
    if [ -n "$seeds" ]; then
        from=$((first + (r - 1) * seeds))
        echo "soak: round $r of $rounds (chaos seeds $from..$((from + seeds - 1)))"
        CHAOS_FIRST=$from CHAOS_SEEDS=$seeds $cargo test --features testing --no-fail-fast >"$log" 2>&1
    else
        echo "soak: round $r of $rounds"
        $cargo test --features testing --no-fail-fast >"$log" 2>&1
    fi
    code=$?
    # Each failing test as `BINARY TEST`, BINARY from the `Running` line before it.
    awk -v round="$r" '
        /^ *Running / { bin = ($2 == "unittests") ? $3 : $2 }
        /^ *Doc-tests / { bin = "doc-tests " $2 }
        /^test .* \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print round "\t" bin "\t" $0; n++ }
        END { exit n == 0 }
    ' "$log" >>"$dir/failures"
    found=$?
    if [ "$code" -ne 0 ] && [ "$found" -ne 0 ]; then
        # A crash, a build error or a binary that died: no test line names it.
        printf '%s\t%s\t%s\n' "$r" "(cargo test)" "exit $code without a failing test line" >>"$dir/failures"
    fi
    if [ "$code" -ne 0 ]; then
        failed_rounds=$((failed_rounds + 1))
    fi
    echo "soak: round $r: $([ "$code" -eq 0 ] && echo ok || echo FAILED) in $(($(date +%s) - started)) s"
    r=$((r + 1))
done

echo
if [ "$failed_rounds" -eq 0 ]; then
    echo "soak: all $rounds rounds passed"
    exit 0
fi
echo "soak: $failed_rounds of $rounds rounds failed; each failing test, most frequent first:"
tab=$(printf '\t')
# count, round of the first failure, binary, test; most failures first.
awk -F'\t' '
    { k = $2 FS $3; if (!(k in n)) first[k] = $1; n[k]++ }
    END { for (k in n) print n[k] FS first[k] FS k }
' "$dir/failures" | sort -t "$tab" -k1,1nr -k3 | while IFS=$tab read -r count first_round bin name; do
    echo
    echo "=== $name ($bin): failed in $count of $rounds rounds; first in round $first_round ($dir/round-$first_round.log):"
    if [ "$bin" = "(cargo test)" ]; then
        tail -n 40 "$dir/round-$first_round.log"
        continue
    fi
    # The failure's captured output: from its `---- NAME stdout ----` header to the next one.
    awk -v b="$bin" -v t="$name" '
        /^ *Running / { inbin = ((($2 == "unittests") ? $3 : $2) == b) }
        /^ *Doc-tests / { inbin = ("doc-tests " $2 == b) }
        /^---- .* stdout ----$/ { show = inbin && ($0 == "---- " t " stdout ----") }
        /^failures:$/ { show = 0 }
        show { print }
    ' "$dir/round-$first_round.log"
done
exit 1
