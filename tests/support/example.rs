//! The examples as programs: built once per test binary with the features the tests are
//! built with, so a test never runs a stale example (`cargo test --test X` does not build
//! examples, and an older binary may lie in the target directory).
//!
//! Use with `#[path = "support/example.rs"] mod example;`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// The path of example `name`, built (or found up to date) by cargo first.
pub fn path(name: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap();
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args(["build", "--example", name, "--features", "testing"])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    // What cargo set for this test's own run (OUT_DIR, LD_LIBRARY_PATH, CARGO_PKG_*, ...)
    // would make it rebuild the dependencies as if their build environment had changed,
    // and the next `cargo test` rebuild them back.
    cargo.env_clear();
    for (k, v) in std::env::vars_os() {
        let keep = k.to_str().is_some_and(|k| {
            matches!(
                k,
                "PATH"
                    | "HOME"
                    | "CARGO_HOME"
                    | "CARGO_TARGET_DIR"
                    | "RUSTUP_HOME"
                    | "RUSTUP_TOOLCHAIN"
            )
        });
        if keep {
            cargo.env(k, v);
        }
    }
    let out = cargo.output().expect("cargo");
    assert!(
        out.status.success(),
        "cargo build --example {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .and_then(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo named no executable for example {name}"));
    built.insert(name.to_string(), exe.clone());
    exe
}
