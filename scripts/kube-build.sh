#!/usr/bin/env bash
# Builds the real Kubernetes components the end-to-end tests run against, for each VERSION
# named (a line of tests/kube/versions; none = the newest): kube-apiserver and
# sample-apiserver from that version's Go module (tests/kube/VERSION) into DIR/VERSION, and
# one etcd (tests/kube/etcd) shared by every version, linked into each folder. Each folder is
# built once: skipped while its stamp matches the module's files and the Go version.
# Usage: scripts/kube-build.sh DIR [VERSION...]
set -euo pipefail
dir="${1:?usage: scripts/kube-build.sh DIR [VERSION...]}"
shift
kube="$(cd "$(dirname "$0")/../tests/kube" && pwd)"

# The list: "VERSION SAMPLE" per line, newest first.
listed="$(sed 's/#.*//' "$kube/versions" | awk 'NF {print $1, $2}')"
[ "$#" -gt 0 ] || set -- "$(echo "$listed" | head -n1 | cut -d' ' -f1)"
minor() { echo "$1" | cut -d. -f2; }
for k8s in "$@"; do
  if ! echo "$listed" | awk -v v="$k8s" '$1 == v {found = 1} END {exit !found}'; then
    echo "make kube: Kubernetes $k8s is not listed in tests/kube/versions; listed: $(echo "$listed" | cut -d' ' -f1 | paste -sd' ')" >&2
    exit 1
  fi
done

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

# go build PKG... in module MOD (a tests/kube folder) into OUT, logging to LOG; on failure
# prints the end of the log and exits. VERSION goes into the binaries' /version.
build() {
  local mod="$1" version="$2" out="$3" log="$4"
  shift 4
  local ver="k8s.io/component-base/version"
  local ldflags="-s -w -X $ver.gitVersion=$version -X $ver.gitMajor=$(echo "$version" | cut -d. -f1 | tr -d v) -X $ver.gitMinor=$(minor "$version") -X $ver.buildDate=1970-01-01T00:00:00Z"
  # A stalled module download must not hang make test: a cold build takes minutes, not half an hour.
  if ! (cd "$mod" && CGO_ENABLED=0 timeout 1800 go build -trimpath -ldflags "$ldflags" -o "$out/" "$@") >>"$log" 2>&1; then
    echo "make kube: building $* ($version) failed; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}

# Whether DIR/stamp says STAMP and every named binary is there.
fresh() {
  local d="$1" stamp="$2"
  shift 2
  [ -f "$d/stamp" ] && [ "$(cat "$d/stamp")" = "$stamp" ] || return 1
  for b in "$@"; do [ -x "$d/$b" ] || return 1; done
}

# etcd: one build for every version.
etcd_stamp="$( (cat "$0" "$kube"/etcd/go.mod "$kube"/etcd/go.sum "$kube"/etcd/*.go; echo "$gover") | sha256sum | cut -c1-16)"
if ! fresh "$dir/etcd" "$etcd_stamp" etcd; then
  # A folder from before builds were kept per version held the binaries themselves.
  [ -d "$dir/etcd" ] || rm -f "$dir/etcd" "$dir/kube-apiserver" "$dir/sample-apiserver" "$dir/stamp" "$dir/build.log"
  mkdir -p "$dir/etcd"
  rm -f "$dir/etcd/stamp" "$dir/etcd/build.log"
  start=$(date +%s)
  echo "make kube: building etcd into $dir/etcd"
  build "$kube/etcd" v0.0.0 "$dir/etcd" "$dir/etcd/build.log" .
  echo "$etcd_stamp" >"$dir/etcd/stamp"
  echo "make kube: built etcd in $(( $(date +%s) - start )) s"
fi

for k8s in "$@"; do
  sample="$(echo "$listed" | awk -v v="$k8s" '$1 == v {print $2}')"
  mod="$kube/$k8s"
  if [ ! -f "$mod/go.mod" ]; then
    echo "make kube: $mod/go.mod is missing; write it with scripts/kube-module.sh $k8s" >&2
    exit 1
  fi
  # sample-apiserver comes from the first listed version of its minor (this one, when
  # the module proxy serves sample-apiserver of this minor).
  from="$(echo "$listed" | awk -v m="$(minor "$sample")" '{split($1, p, "."); if (p[2] == m) {print $1; exit}}')"
  if [ -z "$from" ] || ! grep -q "k8s.io/sample-apiserver $sample\$" "$kube/$from/go.mod"; then
    echo "make kube: sample-apiserver $sample (for $k8s) is built by no listed version's module" >&2
    exit 1
  fi
  out="$dir/$k8s"
  stamp="$( (cat "$0" "$mod"/go.mod "$mod"/go.sum "$kube/$from"/go.mod "$kube/$from"/go.sum; echo "$sample $etcd_stamp $gover") | sha256sum | cut -c1-16)"
  if fresh "$out" "$stamp" kube-apiserver etcd sample-apiserver; then
    echo "make kube: kube-apiserver $k8s, etcd and sample-apiserver $sample up to date in $out"
    continue
  fi
  mkdir -p "$out"
  rm -f "$out/stamp" "$out/build.log"
  start=$(date +%s)
  echo "make kube: building kube-apiserver $k8s and sample-apiserver $sample into $out (a cold build takes several minutes)"
  if [ "$from" = "$k8s" ]; then
    build "$mod" "$k8s" "$out" "$out/build.log" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/sample-apiserver
  else
    build "$mod" "$k8s" "$out" "$out/build.log" k8s.io/kubernetes/cmd/kube-apiserver
    build "$kube/$from" "$from" "$out" "$out/build.log" k8s.io/sample-apiserver
  fi
  ln -sf ../etcd/etcd "$out/etcd"
  echo "$stamp" >"$out/stamp"
  echo "make kube: built kube-apiserver $k8s and sample-apiserver $sample in $(( $(date +%s) - start )) s"
done
