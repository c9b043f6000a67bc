#!/usr/bin/env bash
# Writes the Go module that builds kube-apiserver VERSION (and, where tests/kube/versions
# names a sample-apiserver of the same minor, that sample-apiserver) into tests/kube/VERSION:
# go.mod with the `go` and `godebug` lines of that Kubernetes release's own go.mod (so the
# build gets that release's language version and GODEBUG defaults), k8s.io/kubernetes'
# staging modules replaced by their published releases, then `go mod tidy` for go.sum.
# Run it once when a version is added to tests/kube/versions; the result is committed, and
# scripts/kube-build.sh only builds it (no resolution at build time).
# Usage: scripts/kube-module.sh VERSION
set -euo pipefail
k8s="${1:?usage: scripts/kube-module.sh VERSION (a line of tests/kube/versions)}"
kube="$(cd "$(dirname "$0")/../tests/kube" && pwd)"
sample="$(sed 's/#.*//' "$kube/versions" | awk -v v="$k8s" '$1 == v {print $2}')"
if [ -z "$sample" ]; then
  echo "kube-module: $k8s is not listed in $kube/versions" >&2
  exit 1
fi
minor() { echo "$1" | cut -d. -f2; }
staging="v0.$(minor "$k8s").$(echo "$k8s" | cut -d. -f3)"

upstream="$(go mod download -json "k8s.io/kubernetes@$k8s" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
[ -f "$upstream" ] || { echo "kube-module: the Go module proxy has no k8s.io/kubernetes $k8s" >&2; exit 1; }

mod="$kube/$k8s"
mkdir -p "$mod"
{
  echo "// kube-apiserver $k8s for the end-to-end tests (written by scripts/kube-module.sh; test-only)."
  echo "module autoregister.test/kube"
  echo
  # The release's own language version and GODEBUG defaults (a godebug block or lines).
  sed -n '/^go [0-9]/p' "$upstream"
  sed -n '/^godebug [^(]/p; /^godebug (/,/^)/p' "$upstream"
  echo
  echo "require k8s.io/kubernetes $k8s"
  if [ "$(minor "$sample")" = "$(minor "$k8s")" ]; then
    echo "require k8s.io/sample-apiserver $sample"
  fi
  echo
  echo "// k8s.io/kubernetes replaces its staging modules with local paths; a consumer uses the published ones."
  echo "replace ("
  sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$upstream" | while read -r m; do
    if [ "$m" = k8s.io/sample-apiserver ]; then
      [ "$(minor "$sample")" = "$(minor "$k8s")" ] && printf '\t%s => %s %s\n' "$m" "$m" "$sample"
    else
      printf '\t%s => %s %s\n' "$m" "$m" "$staging"
    fi
  done
  echo ")"
} >"$mod/go.mod"
cat >"$mod/tools.go" <<'EOF'
//go:build tools

// The commands this module builds, imported so that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
EOF
if [ "$(minor "$sample")" = "$(minor "$k8s")" ]; then
  printf '\t_ "k8s.io/sample-apiserver"\n' >>"$mod/tools.go"
fi
echo ")" >>"$mod/tools.go"
(cd "$mod" && GOFLAGS=-mod=mod go mod tidy)
echo "kube-module: wrote $mod (go.mod, go.sum, tools.go)"
