#!/usr/bin/env bash
# Builds the real Kubernetes components the end-to-end tests run against — kube-apiserver,
# etcd and sample-apiserver — from the Go module in tests/kube into DIR, once per version:
# the build is skipped while DIR/stamp matches the module's files.
# Usage: scripts/kube-build.sh DIR
set -euo pipefail
dir="$1"
src="$(cd "$(dirname "$0")/../tests/kube" && pwd)"

if ! command -v go >/dev/null 2>&1; then
  echo "make kube: go is not on the PATH (the tests build the real kube-apiserver, etcd and sample-apiserver with it); install Go 1.26" >&2
  exit 1
fi
# Go 1.27 turns GOEXPERIMENT=jsonv2 on by default, and kube-apiserver v1.36 built with it
# serves a malformed /openapi/v2 (kubectl apply then fails validation).
gover="$(go env GOVERSION)"
case "$gover" in
  go1.2[7-9]*|go1.[3-9]*) export GOEXPERIMENT="${GOEXPERIMENT:+$GOEXPERIMENT,}nojsonv2" ;;
esac

stamp="$( (cat "$0" "$src/go.mod" "$src/go.sum" "$src"/etcd/*.go; echo "$gover") | sha256sum | cut -c1-16)"
bins=(kube-apiserver etcd sample-apiserver)
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
  ok=1
  for b in "${bins[@]}"; do [ -x "$dir/$b" ] || ok=0; done
  if [ "$ok" = 1 ]; then
    echo "make kube: kube-apiserver, etcd and sample-apiserver up to date in $dir"
    exit 0
  fi
fi

mkdir -p "$dir"
rm -f "$dir/stamp"
k8s="$(sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\).*$/\1/p' "$src/go.mod")"
major="$(echo "$k8s" | cut -d. -f1 | tr -d v)"
minor="$(echo "$k8s" | cut -d. -f2)"
# The version kube-apiserver reports (/version): kubectl parses it.
ver="k8s.io/component-base/version"
ldflags="-s -w -X $ver.gitVersion=$k8s -X $ver.gitMajor=$major -X $ver.gitMinor=$minor -X $ver.buildDate=1970-01-01T00:00:00Z"
start=$(date +%s)
echo "make kube: building kube-apiserver $k8s, etcd and sample-apiserver into $dir (a cold build takes several minutes)"
log="$dir/build.log"
# A stalled module download must not hang make test: a cold build takes minutes, not half an hour.
if ! (cd "$src" && CGO_ENABLED=0 timeout 1800 go build -trimpath -ldflags "$ldflags" -o "$dir/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/sample-apiserver ./etcd) >"$log" 2>&1; then
  echo "make kube: building the Kubernetes test components failed; the end of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "$stamp" >"$dir/stamp"
echo "make kube: built ${bins[*]} in $(( $(date +%s) - start )) s"
