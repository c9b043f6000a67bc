# The autoregister image: one static binary on `scratch` (no shell, no libc, no package
# manager), running as a numeric non-root user. The image is the binary: its size is the
# size of `make static`'s output.
#
#   make image            # docker or podman, whichever is installed and running
#   docker build -t autoregister:0.1.0 .

# Same toolchain as development (rust-version in Cargo.toml is the floor).
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Cargo.toml names the benches and examples, so they must exist for cargo to read it.
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY benches benches
COPY examples examples
# As `make static`: glibc static-pie. Static glibc still resolves names listed in
# /etc/hosts (which the kubelet mounts) without NSS modules; in a cluster the API server
# is reached by IP (KUBERNETES_SERVICE_HOST) anyway.
ENV CARGO_TARGET_DIR=/target
RUN RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target x86_64-unknown-linux-gnu --bin autoregister \
 && cp /target/x86_64-unknown-linux-gnu/release/autoregister /autoregister \
 && /autoregister version

FROM scratch
COPY --from=build /autoregister /autoregister
# The distroless "nonroot" ids; deploy/04-deployment.yaml sets the same numbers.
USER 65532:65532
ENTRYPOINT ["/autoregister"]
CMD ["run", "--manifests", "/etc/autoregister/manifests"]
