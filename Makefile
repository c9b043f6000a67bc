# Everyday commands. `make test` is what CI runs.
CARGO ?= cargo
TARGET := x86_64-unknown-linux-gnu

.PHONY: build test demo static bench fmt clippy chaos

build:
	$(CARGO) build --release

test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets --features testing -- -D warnings
	$(CARGO) test --features testing

# Long chaos runs: `make chaos SEEDS=1000` (CHAOS_FIRST=N starts elsewhere); a failing
# seed prints the one command that replays it.
SEEDS ?= 500
chaos:
	CHAOS_SEEDS=$(SEEDS) $(CARGO) test --features testing --test chaos -- --nocapture

demo:
	$(CARGO) build --bin autoregister
	$(CARGO) run --quiet --features testing --example demo -- target/debug/autoregister

static:
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --release --target $(TARGET) --bin autoregister
	@ls -l target/$(TARGET)/release/autoregister | awk '{print "size:", $$5, "bytes"}'
	@scripts/static-check.sh target/$(TARGET)/release/autoregister

bench:
	$(CARGO) bench --bench workqueue
	$(CARGO) bench --features testing --bench testserver
	$(CARGO) bench --features testing --bench controller

fmt:
	$(CARGO) fmt --all
