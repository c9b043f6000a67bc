# The autoregister image: one static binary on `scratch` (no shell, no libc, no package
# manager), running as a numeric non-root user. The image is the binary: its size is the
# size of `make static`'s output.
#
#   make image            # docker or podman, whichever is installed and running
#   docker build -t autoregister:0.1.0 .

# Same toolchain as development (rust-version in Cargo.toml is the floor).
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-bookworm AS build
# As `make static`: musl, statically linked. ring compiles a little C, with musl-gcc.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
# Cargo.toml names the benches and examples, so they must exist for cargo to read it.
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY link link
COPY src src
COPY benches benches
COPY examples examples
ENV CARGO_TARGET_DIR=/target
RUN CC_x86_64_unknown_linux_musl=musl-gcc \
    cargo build --profile static --locked --target x86_64-unknown-linux-musl --bin autoregister \
 && cp /target/x86_64-unknown-linux-musl/static/autoregister /autoregister \
 && /autoregister version

FROM scratch
COPY --from=build /autoregister /autoregister
# The distroless "nonroot" ids; deploy/04-deployment.yaml sets the same numbers.
USER 65532:65532
ENTRYPOINT ["/autoregister"]
CMD ["run", "--manifests", "/etc/autoregister/manifests"]
