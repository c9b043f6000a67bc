# Everyday commands. `make test` is what CI runs.
CARGO ?= cargo
comma := ,
# The static binaries are linked against musl: static glibc alone is ~1.2 MB of the binary
# (and warns about NSS); musl's resolver reads /etc/hosts and resolv.conf without modules.
# One per architecture clusters run on: `make static ARCH=aarch64`; x86_64 is the default.
# Debian's and Docker's names (amd64, arm64) are taken too.
ARCHES := x86_64 aarch64
ARCH ?= x86_64
ARCH_ORIGIN := $(origin ARCH)
override ARCH := $(patsubst amd64,x86_64,$(patsubst arm64,aarch64,$(ARCH)))
ifeq ($(filter $(ARCH),$(ARCHES)),)
$(error unknown ARCH=$(ARCH)$(if $(filter environment,$(ARCH_ORIGIN)), (from the environment)): supported are $(ARCHES))
endif
static_target = $(1)-unknown-linux-musl
STATIC_TARGET := $(call static_target,$(ARCH))
# ring and mimalloc compile a little C (and ring some assembly). A musl cross compiler when
# there is one; else, natively, the system cc, and across architectures Debian's cross gcc
# (ring's C uses no libc beyond mem* functions, mimalloc's only what musl provides with the
# same ABI; rust-lld links them with the target's own musl). STATIC_CC=... overrides.
HOST_ARCH := $(shell uname -m)
static_cc = $(shell command -v $(1)-linux-musl-gcc || { [ $(1) = $(HOST_ARCH) ] && { command -v musl-gcc || command -v cc; }; } || command -v $(1)-linux-gnu-gcc)
STATIC_CC ?= $(call static_cc,$(ARCH))
# The Debian package of that gcc (gcc natively, else gcc-aarch64-linux-gnu, gcc-x86-64-linux-gnu).
CROSS_CC_PACKAGE = $(if $(filter $(ARCH),$(HOST_ARCH)),gcc,gcc-$(subst _,-,$(ARCH))-linux-gnu)
# Where cargo puts its output (CARGO_TARGET_DIR, .cargo/config, else ./target): asked, never assumed.
TARGET_DIR = $(shell $(CARGO) metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
# The `static` profile (Cargo.toml): the release build optimised for size.
static_bin = $(TARGET_DIR)/$(call static_target,$(1))/static/autoregister
STATIC_BIN = $(call static_bin,$(ARCH))
# Every architecture's binary, as `arch=path,...`, for tests/static_binaries.rs (which runs
# each: natively, or under qemu-user).
STATIC_BINS = $(shell echo $(foreach a,$(ARCHES),$(a)=$(call static_bin,$(a))) | tr ' ' ',')
# `make test` fails when a static binary is larger (DESIGN.md: size is a feature).
SIZE_BUDGET ?= 3000000
# Python packages the tests need (prometheus_client, the reference /metrics parser) go
# here when the system lacks them: inside the target dir, so `cargo clean` removes them.
PY_DIR = $(TARGET_DIR)/py
# The real kube-apiserver, etcd and sample-apiserver the end-to-end tests also run against,
# built from tests/kube with Go into a folder per Kubernetes version (scripts/kube-build.sh).
KUBE_DIR = $(TARGET_DIR)/kube
# helm and promtool, which the chart's and the alerts' tests run, built from tests/tools
# with Go (once per version; see scripts/tools-build.sh).
TOOLS_DIR = $(TARGET_DIR)/tools
# The supported Kubernetes versions, newest first (tests/kube/versions).
KUBE_VERSIONS := $(shell sed 's/\#.*//' tests/kube/versions | awk 'NF {print $$1}')
KUBE_NEWEST := $(firstword $(KUBE_VERSIONS))
KUBE_OLDEST := $(lastword $(KUBE_VERSIONS))
# The test binaries that start the real kube-apiserver: `make test` runs them on the oldest
# version too, and `make compat` on every version.
KUBE_TEST_NAMES := $(patsubst tests/%.rs,%,$(shell grep -l 'support/kube.rs' tests/*.rs))
KUBE_TESTS := $(patsubst %,--test %,$(KUBE_TEST_NAMES))
# Test binaries run at once by `make test` (scripts/test-run.sh): they mostly wait on
# servers and timers, so three share 2 cores well.
TEST_JOBS ?= 3

.PHONY: build test test-go test-rust compat kube tools deploy soak demo static static-all check-size dist image bench bench-micro fmt clippy chaos msrv

build:
	$(CARGO) build --release

# The Rust builds and checks (first: a lint fails fast), the Go builds (the real servers,
# helm and promtool), then every test binary, three at a time (scripts/test-run.sh), and the
# real-server ones again on the oldest supported Kubernetes. The builds run one after the
# other: side by side on 2 cores they took longer (18.7 min cold against 16.1).
test:
	scripts/test-deps.sh "$(PY_DIR)"
	$(MAKE) --no-print-directory test-rust test-go
	PYTHONPATH="$(PY_DIR)$${PYTHONPATH:+:$$PYTHONPATH}" AUTOREGISTER_KUBE_BIN="$(KUBE_DIR)" \
	  AUTOREGISTER_KUBE_VERSION=$(KUBE_NEWEST) AUTOREGISTER_TOOLS_BIN="$(TOOLS_DIR)" \
	  AUTOREGISTER_STATIC_BINS="$(STATIC_BINS)" CARGO="$(CARGO)" \
	  scripts/test-run.sh "$(TARGET_DIR)/test-logs" $(TEST_JOBS) $(KUBE_OLDEST) "$(KUBE_TEST_NAMES)" --features testing

test-go:
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_NEWEST) $(KUBE_OLDEST)
	scripts/tools-build.sh "$(TOOLS_DIR)"

# `cargo doc` as docs.rs builds the crate: no broken intra-doc link, no warning. The doc
# checks (tests/docs.rs) and the guides' doctests run with the other tests.
test-rust:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets --features testing -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --no-default-features
	$(MAKE) --no-print-directory check-size
	$(CARGO) test --features testing --no-run

# The real-server tests on every supported Kubernetes version, then a table: version,
# tests passed and failed, time. COMPAT="v1.33.13 v1.32.13" runs only those.
COMPAT ?= $(KUBE_VERSIONS)
compat:
	scripts/test-deps.sh "$(PY_DIR)"
	PYTHONPATH="$(PY_DIR)$${PYTHONPATH:+:$$PYTHONPATH}" CARGO="$(CARGO)" \
	  scripts/compat.sh "$(KUBE_DIR)" "$(TARGET_DIR)/compat" "$(KUBE_TESTS)" $(COMPAT)

kube:
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_VERSIONS)

tools:
	scripts/tools-build.sh "$(TOOLS_DIR)"

# deploy/ is the Helm chart rendered with its defaults: after editing charts/autoregister,
# write deploy/ again (tests/packaging.rs fails while the two differ).
deploy: tools
	HELM="$(TOOLS_DIR)/helm" scripts/deploy-gen.sh

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
	@[ -n "$(STATIC_CC)" ] || { echo "make static ARCH=$(ARCH): no C compiler for $(ARCH) (ring and mimalloc compile C): install Debian's $(CROSS_CC_PACKAGE), or set STATIC_CC" >&2; exit 1; }
	@rustup target list --installed 2>/dev/null | grep -qx $(STATIC_TARGET) || rustup target add $(STATIC_TARGET)
	CC_$(subst -,_,$(STATIC_TARGET))="$(STATIC_CC)" $(CARGO) build --profile static --target $(STATIC_TARGET) --bin autoregister
	@ls -l "$(STATIC_BIN)" | awk '{print "size:", $$5, "bytes"}'
	@scripts/static-check.sh "$(STATIC_BIN)" $(ARCH)

# Every architecture's static binary.
static-all:
	@for arch in $(ARCHES); do $(MAKE) --no-print-directory static ARCH=$$arch || exit 1; done

# The size budget: builds (and checks) every architecture's static binary, fails when one
# is over.
check-size: static-all
	@over=0; for arch in $(ARCHES); do \
	  bin="$(TARGET_DIR)/$$arch-unknown-linux-musl/static/autoregister"; size=$$(stat -c %s "$$bin"); \
	  echo "static binary ($$arch): $$size bytes, budget $(SIZE_BUDGET) bytes"; \
	  if [ "$$size" -gt "$(SIZE_BUDGET)" ]; then \
	    echo "make check-size: the $$arch static binary is $$((size - $(SIZE_BUDGET))) bytes over its budget" >&2; over=1; \
	  fi; \
	done; exit $$over

# Release artifacts: every architecture's static binary (stripped by the profile) named
# autoregister-VERSION-linux-ARCH, the same as `autoregister` in a .tar.gz for krew
# (packaging/krew: it installs from archives), and their SHA256SUMS, in DIST_DIR. The
# archives are reproducible (fixed owner, mode and time), so their sums are too.
VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
DIST_DIR ?= $(TARGET_DIR)/dist
dist: check-size
	@rm -rf "$(DIST_DIR)" && mkdir -p "$(DIST_DIR)"
	@for arch in $(ARCHES); do \
	  bin="$(TARGET_DIR)/$$arch-unknown-linux-musl/static/autoregister"; \
	  file "$$bin" | grep -q ', stripped' || { echo "make dist: $$bin is not stripped" >&2; exit 1; }; \
	  name="autoregister-$(VERSION)-linux-$$arch"; \
	  cp "$$bin" "$(DIST_DIR)/$$name" || exit 1; \
	  mkdir "$(DIST_DIR)/$$name.d" && cp "$$bin" "$(DIST_DIR)/$$name.d/autoregister" || exit 1; \
	  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode=0755 \
	    -C "$(DIST_DIR)/$$name.d" -cf - autoregister | gzip -9n > "$(DIST_DIR)/$$name.tar.gz" || exit 1; \
	  rm -r "$(DIST_DIR)/$$name.d"; \
	done
	@cd "$(DIST_DIR)" && sha256sum autoregister-$(VERSION)-linux-* > SHA256SUMS && sha256sum --check --quiet SHA256SUMS
	@echo "$(DIST_DIR):" && cd "$(DIST_DIR)" && ls -l | tail -n +2 && cat SHA256SUMS

# The container image (Dockerfile: the static binary on scratch). Needs a running docker
# or podman; says so instead of pretending when there is none. PLATFORMS=linux/amd64,linux/arm64
# builds one image per platform under one name (a manifest list): docker buildx, or podman
# --manifest. Docker's classic image store cannot hold a list: IMAGE_OUTPUT=--push sends it to
# the registry in IMAGE, IMAGE_OUTPUT=--output=type=oci,dest=FILE writes an OCI archive.
IMAGE ?= autoregister:$(VERSION)
PLATFORMS ?=
IMAGE_OUTPUT ?= --load
IMAGE_PLATFORMS := linux/amd64 linux/arm64
image:
	@for p in $(subst $(comma), ,$(PLATFORMS)); do \
	  case " $(IMAGE_PLATFORMS) " in *" $$p "*) ;; \
	  *) echo "make image: unknown platform $$p in PLATFORMS: supported are $(IMAGE_PLATFORMS)" >&2; exit 1;; esac; \
	done
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
	  engine=docker; \
	elif command -v podman >/dev/null 2>&1 && podman info >/dev/null 2>&1; then \
	  engine=podman; \
	else \
	  echo "make image: no running container engine (docker or podman) found" >&2; exit 1; \
	fi; \
	if [ -z "$(PLATFORMS)" ]; then \
	  $$engine build -t $(IMAGE) . && $$engine image ls $(IMAGE); \
	elif [ $$engine = podman ]; then \
	  podman build --platform $(PLATFORMS) --manifest $(IMAGE) . && podman manifest inspect $(IMAGE); \
	elif docker buildx version >/dev/null 2>&1; then \
	  docker buildx build --platform $(PLATFORMS) -t $(IMAGE) $(IMAGE_OUTPUT) .; \
	else \
	  echo "make image: PLATFORMS needs the docker buildx plugin, or podman; neither found" >&2; exit 1; \
	fi

# Benchmarks stay out of `make test`: they take a minute or two and want a quiet machine.
# `bench` prints the table the README quotes, for the release binary and the static one.
# REAL_SERVER_ARGS="--save FILE" keeps the real-server medians, "--compare FILE" prints the
# change against them (CPU per 1,000 objects included).
# The real-server bench also runs the kube-rs baseline (benches/kube-rs: the same job on
# kube-runtime and tokio, its own workspace and Cargo.lock, so the root crate's lock stays
# free of an async runtime), built into a target folder of its own.
REAL_SERVER_ARGS ?=
KUBE_RS_DIR = $(TARGET_DIR)/kube-rs
KUBE_RS_BIN = $(KUBE_RS_DIR)/release/autoregister-kube-rs
bench: static
	$(CARGO) build --release --bin autoregister
	BENCH_BINS="release=$(TARGET_DIR)/release/autoregister,static=$(STATIC_BIN)" $(CARGO) bench --features testing --bench controller
	$(CARGO) build --release --locked --manifest-path benches/kube-rs/Cargo.toml --target-dir "$(KUBE_RS_DIR)"
	scripts/kube-build.sh "$(KUBE_DIR)" $(KUBE_NEWEST)
	AUTOREGISTER_KUBE_BIN="$(KUBE_DIR)" AUTOREGISTER_KUBE_VERSION=$(KUBE_NEWEST) BENCH_BINS="release=$(TARGET_DIR)/release/autoregister,static=$(STATIC_BIN),kube-rs=$(KUBE_RS_BIN)" $(CARGO) bench --features testing --bench real_server -- $(REAL_SERVER_ARGS)
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
