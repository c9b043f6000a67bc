#!/usr/bin/env bash
# Checks a static binary: built for ARCH, a static PIE, no dynamic dependencies, and it still
# resolves `localhost` (through /etc/hosts, no NSS modules) and talks to a loopback API server.
# A binary of another architecture runs under qemu-user when it is installed; `make test`
# runs every architecture's binary either way (tests/static_binaries.rs) and fails without it.
# Usage: scripts/static-check.sh path/to/static/autoregister [x86_64|aarch64]
set -euo pipefail
bin=$1
arch=${2:-x86_64}
case $arch in
  x86_64) machine='x86-64' ;;
  aarch64) machine='ARM aarch64' ;;
  *) echo "static-check: unknown architecture $arch: supported are x86_64 aarch64" >&2; exit 1 ;;
esac
file "$bin" | grep -q 'static' || { echo "not static: $(file "$bin")"; exit 1; }
file "$bin" | grep -q "$machine" || { echo "not an $arch binary: $(file "$bin")"; exit 1; }
# Position independent, so the kernel loads it at a random address (ASLR), on each architecture.
file "$bin" | grep -q 'static-pie linked' || { echo "not a static PIE: $(file "$bin")"; exit 1; }
if ldd "$bin" >/dev/null 2>&1 && ! ldd "$bin" 2>&1 | grep -q 'statically linked'; then
  echo "ldd lists dynamic dependencies:"; ldd "$bin"; exit 1
fi
runner=()
if [ "$arch" != "$(uname -m)" ]; then
  qemu=$(command -v "qemu-$arch" || command -v "qemu-$arch-static" || true)
  if [ -z "$qemu" ]; then
    echo "static binary ($arch): statically linked; not run here: qemu-$arch is missing (Debian's qemu-user)"
    exit 0
  fi
  runner=("$qemu")
fi
cargo build --quiet --features testing --bin autoregister-testserver
# CARGO_TARGET_DIR (or a cargo config) may move the target directory: ask cargo.
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
out=$(mktemp)
"$target_dir/debug/autoregister-testserver" --addr 127.0.0.1:0 >"$out" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
port=$(head -1 "$out" | sed 's/.*://')
RUST_LOG=warn "${runner[@]}" "$bin" run --once --timeout 20s --manifests examples/apiservices \
  --server "http://localhost:$port"
echo "static binary ($arch${runner:+, under ${runner[0]##*/}}): static PIE, resolved localhost, converged against 127.0.0.1:$port"
