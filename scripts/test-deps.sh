#!/usr/bin/env bash
# What `make test` needs beyond cargo, checked in one line each:
# - kubectl on the PATH: the tests use it as the reference client;
# - Python's prometheus_client (tests/deploy.rs checks /metrics with the reference
#   parser): if python3 cannot import it, pip installs it into DIR, which `make test`
#   puts on PYTHONPATH; the system's Python stays untouched;
# - qemu-user's emulator for each architecture other than this machine's: tests/static_binaries.rs
#   runs every architecture's static binary (x86_64, aarch64), never skipping one.
# Usage: scripts/test-deps.sh DIR
set -euo pipefail
dir="$1"
if ! command -v kubectl >/dev/null 2>&1; then
  echo "make test: kubectl is not on the PATH (the tests use it as the reference client); install kubectl" >&2
  exit 1
fi
for arch in x86_64 aarch64; do
  [ "$arch" = "$(uname -m)" ] && continue
  if ! command -v "qemu-$arch" >/dev/null 2>&1 && ! command -v "qemu-$arch-static" >/dev/null 2>&1; then
    echo "make test: qemu-$arch is missing (the tests run the $arch static binary under it); install Debian's qemu-user" >&2
    exit 1
  fi
done
export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
if ! command -v python3 >/dev/null 2>&1; then
  echo "make test: python3 is missing (tests/deploy.rs runs the reference Prometheus parser in it); install python3 and python3-pip" >&2
  exit 1
fi
python3 -c 'import prometheus_client' >/dev/null 2>&1 && exit 0
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "make test: python3 has no pip to install prometheus-client into $dir; install python3-pip (or python3-prometheus-client)" >&2
  exit 1
fi
echo "make test: installing prometheus-client into $dir" >&2
export PIP_ROOT_USER_ACTION=ignore # CI runs as root; the --target install is ours alone
# A --target install leaves the system alone, but pip older than 23.0.1 still
# refuses it on an externally managed Python (PEP 668) without --break-system-packages.
python3 -m pip install -q --disable-pip-version-check --target "$dir" prometheus-client \
  || python3 -m pip install -q --disable-pip-version-check --break-system-packages --target "$dir" prometheus-client \
  || { echo "make test: could not install prometheus-client into $dir (see pip's message above)" >&2; exit 1; }
python3 -c 'import prometheus_client' >/dev/null 2>&1 \
  || { echo "make test: prometheus-client installed into $dir but python3 cannot import it" >&2; exit 1; }
