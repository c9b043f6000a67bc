# Everyday commands. `make test` is what CI runs.
CARGO ?= cargo
# The static binary is linked against musl: static glibc alone is ~1.2 MB of the binary
# (and warns about NSS); musl's resolver reads /etc/hosts and resolv.conf without modules.
STATIC_TARGET := x86_64-unknown-linux-musl
# ring compiles a little C and assembly; without a musl cross compiler the system cc does
# (ring's C uses no libc beyond mem* functions, which musl provides with the same ABI).
MUSL_CC ?= $(shell command -v x86_64-linux-musl-gcc || command -v musl-gcc || echo cc)
# Where cargo puts its output (CARGO_TARGET_DIR, .cargo/config, else ./target): asked, never assumed.
TARGET_DIR = $(shell $(CARGO) metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
# The `static` profile (Cargo.toml): the release build optimised for size.
STATIC_BIN = $(TARGET_DIR)/$(STATIC_TARGET)/static/autoregister
# `make test` fails when the static binary is larger (DESIGN.md: size is a feature).
SIZE_BUDGET ?= 3000000
# Python packages the tests need (prometheus_client, the reference /metrics parser) go
# here when the system lacks them: inside the target dir, so `cargo clean` removes them.
PY_DIR = $(TARGET_DIR)/py
# The real kube-apiserver, etcd and sample-apiserver the end-to-end tests also run against,
# built from tests/kube with Go into a folder per Kubernetes version (scripts/kube-build.sh).
KUBE_DIR = $(TARGET_DIR)/kube
# The supported Kubernetes versions, newest first (tests/kube/versions).
KUBE_VERSIONS := $(shell sed 's/\#.*//' tests/kube/versions | awk 'NF {print $$1}')
KUBE_NEWEST := $(firstword $(KUBE_VERSIONS))
KUBE_OLDEST := $(lastword $(KUBE_VERSIONS))
# The test binaries that start the real kube-apiserver: `make test` runs them on the oldest
# version too, and `make compat` on every version.
KUBE_TESTS := $(patsubst tests/%.rs,--test %,$(shell grep -l 'support/kube.rs' tests/*.rs))

.PHONY: build test compat kube soak demo static check-size image bench bench-micro fmt clippy chaos msrv

build:
	$(CARGO) build --release

# `cargo doc` as docs.rs builds the crate: no broken intra-doc link, no warning. The doc
# checks (tests/docs.rs) and the guides' doctests run with the other tests.
test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets --features testing -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --no-default-features
	scripts/test-deps.sh "$(PY_DIR)"
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_NEWEST) $(KUBE_OLDEST)
	PYTHONPATH="$(PY_DIR)$${PYTHONPATH:+:$$PYTHONPATH}" AUTOREGISTER_KUBE_BIN="$(KUBE_DIR)" AUTOREGISTER_KUBE_VERSION=$(KUBE_NEWEST) $(CARGO) test --features testing
	@echo "make test: the real-server tests again on the oldest supported Kubernetes, $(KUBE_OLDEST)"
	PYTHONPATH="$(PY_DIR)$${PYTHONPATH:+:$$PYTHONPATH}" AUTOREGISTER_KUBE_BIN="$(KUBE_DIR)" AUTOREGISTER_KUBE_VERSION=$(KUBE_OLDEST) $(CARGO) test --features testing $(KUBE_TESTS) -- --skip test_server
	$(MAKE) check-size

# The real-server tests on every supported Kubernetes version, then a table: version,
# tests passed and failed, time. COMPAT="v1.33.13 v1.32.13" runs only those.
COMPAT ?= $(KUBE_VERSIONS)
compat:
	scripts/test-deps.sh "$(PY_DIR)"
	PYTHONPATH="$(PY_DIR)$${PYTHONPATH:+:$$PYTHONPATH}" CARGO="$(CARGO)" \
	  scripts/compat.sh "$(KUBE_DIR)" "$(TARGET_DIR)/compat" "$(KUBE_TESTS)" $(COMPAT)

kube:
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_VERSIONS)

# Flaky-test hunt, not part of `make test`: the whole suite SOAK times with one core kept
# busy (scripts/soak.sh), then each failing test with its count and first failure's output.
# CHAOS_SEEDS=N runs N fresh chaos seeds each round (from CHAOS_FIRST, default 51).
SOAK ?= 5
soak:
	scripts/test-deps.sh "$(PY_DIR)"
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_NEWEST)
	PYTHONPATH="$(PY_DIR)$${PYTHONPATH:+:$$PYTHONPATH}" AUTOREGISTER_KUBE_BIN="$(KUBE_DIR)" \
	  AUTOREGISTER_KUBE_VERSION=$(KUBE_NEWEST) CARGO="$(CARGO)" SOAK_DIR="$(TARGET_DIR)/soak" \
	  CHAOS_SEEDS="$(CHAOS_SEEDS)" CHAOS_FIRST="$(CHAOS_FIRST)" scripts/soak.sh $(SOAK)

# Long chaos runs: `make chaos SEEDS=1000` (CHAOS_FIRST=N starts elsewhere); a failing
# seed prints the one command that replays it.
SEEDS ?= 500
chaos:
	CHAOS_SEEDS=$(SEEDS) $(CARGO) test --features testing --test chaos -- --nocapture

demo:
	$(CARGO) build --bin autoregister
	$(CARGO) build --features testing --example apiserver
	$(CARGO) run --quiet --features testing --example demo -- "$(TARGET_DIR)/debug/autoregister" "$(TARGET_DIR)/debug/examples/apiserver"

static:
	@rustup target list --installed 2>/dev/null | grep -qx $(STATIC_TARGET) || rustup target add $(STATIC_TARGET)
	CC_x86_64_unknown_linux_musl="$(MUSL_CC)" $(CARGO) build --profile static --target $(STATIC_TARGET) --bin autoregister
	@ls -l "$(STATIC_BIN)" | awk '{print "size:", $$5, "bytes"}'
	@scripts/static-check.sh "$(STATIC_BIN)"

# The size budget: builds (and checks) the static binary, fails when it is over.
check-size: static
	@size=$$(stat -c %s "$(STATIC_BIN)"); \
	echo "static binary: $$size bytes, budget $(SIZE_BUDGET) bytes"; \
	if [ "$$size" -gt "$(SIZE_BUDGET)" ]; then \
	  echo "make check-size: the static binary is $$((size - $(SIZE_BUDGET))) bytes over its budget" >&2; exit 1; \
	fi

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

# Benchmarks stay out of `make test`: they take a minute or two and want a quiet machine.
# `bench` prints the table the README quotes, for the release binary and the static one.
bench: static
	$(CARGO) build --release --bin autoregister
	BENCH_BINS="release=$(TARGET_DIR)/release/autoregister,static=$(STATIC_BIN)" $(CARGO) bench --features testing --bench controller
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_NEWEST)
	AUTOREGISTER_KUBE_BIN="$(KUBE_DIR)" AUTOREGISTER_KUBE_VERSION=$(KUBE_NEWEST) BENCH_BINS="release=$(TARGET_DIR)/release/autoregister,static=$(STATIC_BIN)" $(CARGO) bench --features testing --bench real_server
	@echo "crates an embedder compiles (default-features = false), autoregister included: $$($(CARGO) tree -e normal --no-default-features --prefix none | sed 's/ (\*)//' | sort -u | wc -l)"
	@echo "crates the binary compiles: $$($(CARGO) tree -e normal --prefix none | sed 's/ (\*)//' | sort -u | wc -l)"

# The parts on their own: workqueue cycles/s and the test server's requests/s.
bench-micro:
	$(CARGO) bench --bench workqueue
	$(CARGO) bench --features testing --bench testserver

fmt:
	$(CARGO) fmt --all

# The oldest Rust the locked dependencies build the library and the binary with (Cargo.toml
# rust-version; the tests' certificate generator needs a newer one). Installs that toolchain,
# so it is not part of `make test`.
MSRV = $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
msrv:
	rustup toolchain install $(MSRV) --profile minimal
	$(CARGO) +$(MSRV) check --locked
	$(CARGO) +$(MSRV) check --locked --lib --no-default-features
