//! The `autoregister` command line: argument parsing and the `run` / `plan` commands.

pub mod args;
pub mod connect;
pub mod duration;
pub mod plan;
pub mod run;
pub mod signals;

/// Process exit codes, as documented in the README.
pub mod exit {
    /// Everything converged / stopped cleanly.
    pub const OK: i32 = 0;
    /// Did not converge, or a runtime failure.
    pub const FAILED: i32 = 1;
    /// Bad usage, bad manifest or bad kubeconfig.
    pub const USAGE: i32 = 2;
}
