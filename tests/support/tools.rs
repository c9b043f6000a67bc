//! helm and promtool, built by `make tools` from `tests/tools` (scripts/tools-build.sh):
//! where they are, and running them with nothing read from or written to the user's home.
//!
//! Use with `#[path = "support/tools.rs"] mod tools;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Where `make tools` put helm and promtool: `AUTOREGISTER_TOOLS_BIN`, else `tools/` in the
/// target directory this test binary runs from (`<target>/debug/deps/<test>`).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("AUTOREGISTER_TOOLS_BIN") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().join("tools")
}

/// The path of tool `name` (`helm`, `promtool`), or a panic saying how to build it.
pub fn tool(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{name} is not built in {}: run `make tools` (make test does), or set AUTOREGISTER_TOOLS_BIN",
        bin_dir().display()
    );
    p
}

/// A finished command: its exit status, stdout and stderr.
pub struct Ran {
    /// Exit code 0.
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    fn from(out: Output) -> Ran {
        Ran {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// stdout, or a panic showing what `what` printed when it failed.
    pub fn expect_ok(self, what: &str) -> String {
        assert!(self.ok, "{what} failed:\n{}{}", self.stdout, self.stderr);
        self.stdout
    }
}

/// `helm ARGS` with its config, cache and data folders in `home` (and KUBECONFIG, when
/// given): no repository, plugin or registry login of the machine's user is read.
pub fn helm(home: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> Ran {
    let mut c = Command::new(tool("helm"));
    c.args(args)
        .env("HOME", home)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("HELM_NAMESPACE")
        .env_remove("HELM_KUBECONTEXT")
        .stdin(Stdio::null());
    match kubeconfig {
        Some(k) => c.env("KUBECONFIG", k),
        None => c.env("KUBECONFIG", home.join("no-kubeconfig")),
    };
    Ran::from(c.output().expect("helm runs"))
}

/// `promtool ARGS` in folder `dir`.
pub fn promtool(dir: &Path, args: &[&str]) -> Ran {
    let out = Command::new(tool("promtool"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("promtool runs");
    Ran::from(out)
}
