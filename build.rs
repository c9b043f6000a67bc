//! Stamps the build with its git commit and target triple for `autoregister version` and
//! the `autoregister_build_info` metric. Without git or a checkout (a crate download, a
//! container build context without `.git`) the commit is "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    (out.status.success() && !s.is_empty()).then(|| s.to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=AUTOREGISTER_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=AUTOREGISTER_TARGET={target}");
    // Re-run when HEAD moves (a commit, a checkout); only for files that exist, as a
    // missing one would re-run this on every build.
    println!("cargo:rerun-if-changed=build.rs");
    for what in ["HEAD", "logs/HEAD"] {
        if let Some(path) = git(&["rev-parse", "--git-path", what]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
