//! What this build is: version, git commit and target, stamped by `build.rs`.

/// The crate version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit this was built from (12 hex digits), or `unknown` outside a checkout.
pub const COMMIT: &str = env!("AUTOREGISTER_COMMIT");
/// The target triple this was built for, e.g. `x86_64-unknown-linux-musl`.
pub const TARGET: &str = env!("AUTOREGISTER_TARGET");
