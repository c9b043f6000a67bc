//! The `autoregister` command line: argument parsing and the `run` / `plan` commands.

pub mod args;
mod available;
pub mod connect;
pub mod duration;
pub mod explain;
pub mod logging;
pub mod output;
pub mod plan;
pub mod run;
pub mod server_version;
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

/// Why a command stopped early: the exit code and the messages to print.
pub struct Failure {
    /// Process exit code.
    pub code: i32,
    /// One line each, printed to stderr.
    pub messages: Vec<String>,
}

impl Failure {
    /// Exit 2: bad usage, manifest or kubeconfig.
    pub fn usage(messages: impl IntoIterator<Item = impl ToString>) -> Failure {
        Failure {
            code: exit::USAGE,
            messages: messages.into_iter().map(|m| m.to_string()).collect(),
        }
    }

    /// Exit 1: a runtime failure.
    pub fn failed(message: impl ToString) -> Failure {
        Failure {
            code: exit::FAILED,
            messages: vec![message.to_string()],
        }
    }
}
