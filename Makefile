# Everyday commands. `make test` is what CI runs.
CARGO ?= cargo
TARGET := x86_64-unknown-linux-gnu

.PHONY: build test demo static image bench fmt clippy

build:
	$(CARGO) build --release

test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets --features testing -- -D warnings
	$(CARGO) test --features testing

demo:
	$(CARGO) build --bin autoregister
	$(CARGO) run --quiet --features testing --example demo -- target/debug/autoregister

static:
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --release --target $(TARGET) --bin autoregister
	@ls -l target/$(TARGET)/release/autoregister | awk '{print "size:", $$5, "bytes"}'
	@scripts/static-check.sh target/$(TARGET)/release/autoregister

# The container image (Dockerfile: the static binary on scratch). Needs a running docker
# or podman; says so instead of pretending when there is none.
IMAGE ?= autoregister:$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
image:
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
	  engine=docker; \
	elif command -v podman >/dev/null 2>&1 && podman info >/dev/null 2>&1; then \
	  engine=podman; \
	else \
	  echo "make image: no running container engine (docker or podman) found" >&2; exit 1; \
	fi; \
	$$engine build -t $(IMAGE) . && $$engine image ls $(IMAGE)

bench:
	$(CARGO) bench --bench workqueue
	$(CARGO) bench --features testing --bench testserver
	$(CARGO) bench --features testing --bench controller

fmt:
	$(CARGO) fmt --all
