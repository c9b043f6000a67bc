#!/usr/bin/env bash
# Checks the static binary: no dynamic dependencies, and it still resolves `localhost`
# (through /etc/hosts, no NSS modules) and talks to a loopback API server.
# Usage: scripts/static-check.sh path/to/static/autoregister
set -euo pipefail
bin=$1
file "$bin" | grep -q 'static' || { echo "not static: $(file "$bin")"; exit 1; }
if ldd "$bin" >/dev/null 2>&1 && ! ldd "$bin" 2>&1 | grep -q 'statically linked'; then
  echo "ldd lists dynamic dependencies:"; ldd "$bin"; exit 1
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
RUST_LOG=warn "$bin" run --once --timeout 20s --manifests examples/apiservices \
  --server "http://localhost:$port"
echo "static binary: statically linked, resolved localhost, converged against 127.0.0.1:$port"
