#!/usr/bin/env bash
# Builds the operator tools the packaging tests run — helm (the chart's lint, template,
# install, upgrade and uninstall) and promtool (the alert rules' check and unit tests) —
# from the Go module in tests/tools into DIR, once per version: the build is skipped while
# DIR/stamp matches the module's files.
# Usage: scripts/tools-build.sh DIR
set -euo pipefail
dir="$1"
src="$(cd "$(dirname "$0")/../tests/tools" && pwd)"

if ! command -v go >/dev/null 2>&1; then
  echo "make tools: go is not on the PATH (the tests build helm and promtool with it); install Go 1.26" >&2
  exit 1
fi
gover="$(go env GOVERSION)"
stamp="$( (cat "$0" "$src/go.mod" "$src/go.sum"; echo "$gover") | sha256sum | cut -c1-16)"
bins=(helm promtool)
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
  ok=1
  for b in "${bins[@]}"; do [ -x "$dir/$b" ] || ok=0; done
  if [ "$ok" = 1 ]; then
    echo "make tools: helm and promtool up to date in $dir"
    exit 0
  fi
fi

mkdir -p "$dir"
rm -f "$dir/stamp"
version_of() { sed -n "s|^\t$1 \(v[0-9.]*\).*\$|\1|p" "$src/go.mod"; }
helm="$(version_of helm.sh/helm/v4)"
prom="$(version_of github.com/prometheus/prometheus)"
# The versions `helm version` and `promtool --version` report (the modules' own defaults
# are a bare "v4.3" and nothing). Prometheus tags v3.X.Y as the Go version v0.3XX.Y.
promver="$(echo "$prom" | sed -n 's/^v0\.\([0-9]\)\([0-9][0-9]\)\.\([0-9]*\)$/\1.\2.\3/p' | sed 's/\.0\([0-9]\)\./.\1./')"
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm -X github.com/prometheus/common/version.Version=$promver"
start=$(date +%s)
echo "make tools: building helm $helm and promtool $promver into $dir (a cold build takes several minutes)"
log="$dir/build.log"
# remove_all_sd: promtool without Prometheus's service discoveries (the AWS, Azure, GCE, …
# SDKs: most of its build); `check rules` and `test rules` use none.
tags=remove_all_sd
# A stalled module download must not hang make test.
if ! (cd "$src" && CGO_ENABLED=0 timeout 1800 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$dir/" \
      helm.sh/helm/v4/cmd/helm github.com/prometheus/prometheus/cmd/promtool) >"$log" 2>&1; then
  echo "make tools: building helm and promtool failed; the end of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "$stamp" >"$dir/stamp"
echo "make tools: built ${bins[*]} in $(( $(date +%s) - start )) s"
