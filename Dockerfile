# The autoregister image: one static binary on `scratch` (no shell, no libc, no package
# manager), running as a numeric non-root user. The image is the binary: its size is the
# size of `make static`'s output for the image's architecture (amd64: x86_64, arm64: aarch64).
#
#   make image                                       # this machine's architecture
#   make image PLATFORMS=linux/amd64,linux/arm64     # both, one name (docker buildx or podman)
#   docker build -t autoregister:0.1.0 .

# Same toolchain as development (rust-version in Cargo.toml is the floor).
ARG RUST_VERSION=1.95
# The build runs on the builder's own platform and cross-compiles for TARGETARCH, as
# `make static ARCH=…` does: no emulated compiler, the same binary either way.
FROM --platform=$BUILDPLATFORM rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH
# As `make static`: musl, statically linked by rust-lld (.cargo/config.toml). ring and
# mimalloc compile a little C: with musl-gcc natively, with Debian's cross gcc for the other
# architecture. /build.env keeps the choice for the next step.
RUN set -eu; \
    case "${TARGETARCH:-$(dpkg --print-architecture)}" in \
      amd64) arch=x86_64 ;; \
      arm64) arch=aarch64 ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}: supported are amd64 arm64" >&2; exit 1 ;; \
    esac; \
    if [ "$arch" = "$(uname -m)" ]; then \
      packages=musl-tools; cc=musl-gcc; \
    else \
      debarch=$(echo "$arch" | sed 's/x86_64/amd64/; s/aarch64/arm64/'); \
      packages="gcc-$(echo "$arch" | tr _ -)-linux-gnu libc6-dev-$debarch-cross"; cc="$arch-linux-gnu-gcc"; \
    fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $packages; \
    rm -rf /var/lib/apt/lists/*; \
    rustup target add "$arch-unknown-linux-musl"; \
    printf 'arch=%s\ncc=%s\n' "$arch" "$cc" > /build.env
WORKDIR /src
# Cargo.toml names the benches and examples, so they must exist for cargo to read it.
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY link link
COPY src src
COPY benches benches
COPY examples examples
ENV CARGO_TARGET_DIR=/target
# `version` runs only when the binary is for the builder's architecture (no emulation here).
RUN set -eu; . /build.env; target="$arch-unknown-linux-musl"; \
    env "CC_$(echo "$target" | tr - _)=$cc" \
      cargo build --profile static --locked --target "$target" --bin autoregister; \
    cp "/target/$target/static/autoregister" /autoregister; \
    if [ "$arch" = "$(uname -m)" ]; then /autoregister version; fi

FROM scratch
COPY --from=build /autoregister /autoregister
# The distroless "nonroot" ids; deploy/04-deployment.yaml sets the same numbers.
USER 65532:65532
ENTRYPOINT ["/autoregister"]
CMD ["run", "--manifests", "/etc/autoregister/manifests"]
