//! Every architecture's static binary (`make static ARCH=…`), run: `--version`, `plan` and
//! `run --once` converging a small manifest folder against the test server on loopback,
//! reached as `localhost` (musl resolves it from /etc/hosts, without NSS modules). A binary
//! of another architecture than this machine's runs under qemu-user; without qemu the test
//! fails and says which package provides it.
//!
//! `make test` builds the binaries first and passes them in `AUTOREGISTER_STATIC_BINS`
//! (`x86_64=PATH,aarch64=PATH`); without it they are looked for where `make static` puts them.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autoregister::testserver::TestServer;
use binary::{manifest, object, stored, Scratch, PROXY_VARS};

/// An APIService of the manifest folder: group, labels, versionPriority.
type Declared = (&'static str, &'static [(&'static str, &'static str)], i64);

/// The APIServices of the manifest folder.
const DECLARED: [Declared; 3] = [
    ("alpha.static.example.com", &[], 10),
    ("beta.static.example.com", &[("team", "platform")], 20),
    ("gamma.static.example.com", &[], 30),
];

/// The static binary `make` built for `arch`.
fn static_bin(arch: &str) -> PathBuf {
    let from_make = std::env::var("AUTOREGISTER_STATIC_BINS")
        .ok()
        .and_then(|list| {
            list.split(',')
                .find_map(|entry| entry.strip_prefix(&format!("{arch}=")).map(PathBuf::from))
        });
    let bin = from_make.unwrap_or_else(|| {
        // <target>/debug/deps/<this test> -> <target>/<arch>-unknown-linux-musl/static/autoregister
        let exe = std::env::current_exe().unwrap();
        let target = exe.ancestors().nth(3).unwrap().to_path_buf();
        target.join(format!("{arch}-unknown-linux-musl/static/autoregister"))
    });
    assert!(
        bin.is_file(),
        "the {arch} static binary is not built at {}: run `make static ARCH={arch}` (make test does), \
         or set AUTOREGISTER_STATIC_BINS",
        bin.display()
    );
    bin
}

/// How to start a binary for `arch` here: directly on this architecture, else under
/// qemu-user's emulator for it, found on PATH.
fn launcher(arch: &str, bin: &Path) -> Command {
    if arch == std::env::consts::ARCH {
        return Command::new(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let qemu = [format!("qemu-{arch}"), format!("qemu-{arch}-static")]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file());
    let Some(qemu) = qemu else {
        panic!(
            "qemu-{arch} is not installed: it runs the {arch} static binary on this {} machine; \
             install Debian's qemu-user (apt-get install qemu-user; .ci/run does)",
            std::env::consts::ARCH
        );
    };
    let mut command = Command::new(qemu);
    command.arg(bin);
    command
}

/// Runs the `arch` binary with `args` at `RUST_LOG=info`, without the runner's proxies or
/// kubeconfig.
fn run(arch: &str, bin: &Path, args: &[&str]) -> Output {
    let mut command = launcher(arch, bin);
    for var in PROXY_VARS {
        command.env_remove(var);
    }
    let out = command
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{arch}: autoregister {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The version, a plan of creates, `run --once` writing every declared object as declared,
/// and a plan of nothing to do after it.
fn converges(arch: &str) {
    let bin = static_bin(arch);
    let version = String::from_utf8_lossy(&run(arch, &bin, &["--version"]).stdout).into_owned();
    let expected = format!("autoregister {} (", env!("CARGO_PKG_VERSION"));
    assert!(
        version.starts_with(&expected),
        "{arch}: --version printed {version:?}"
    );
    assert!(
        version.contains(&format!("{arch}-unknown-linux-musl)")),
        "{arch}: --version names another target: {version:?}"
    );

    let server = TestServer::start();
    let scratch = Scratch::new(&format!("static-{arch}"));
    for (group, labels, priority) in DECLARED {
        scratch.write(&format!("{group}.yaml"), &manifest(group, labels, priority));
    }
    let url = format!("http://localhost:{}", server.addr().port());
    let manifests = scratch.manifests();
    let manifests = manifests.to_str().unwrap();
    let common = [
        "--manifests",
        manifests,
        "--server",
        &url,
        "--timeout",
        "20s",
    ];

    let plan = |what: &str| {
        let out = run(arch, &bin, &[&["plan"][..], &common].concat());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for (group, _, _) in DECLARED {
            let row = text
                .lines()
                .find(|l| l.starts_with(&format!("v1.{group} ")));
            let Some(row) = row else {
                panic!("{arch}: plan has no row for v1.{group}:\n{text}")
            };
            assert!(
                row.split_whitespace().nth(2) == Some(what),
                "{arch}: plan's action for v1.{group} is not {what}: {row}"
            );
        }
        let total = format!("plan: {} {what}", DECLARED.len());
        assert!(
            text.lines().any(|l| l == total),
            "{arch}: plan does not end with {total:?}:\n{text}"
        );
    };
    plan("create");
    assert!(
        server.list_objects("apiservices", None).is_empty(),
        "{arch}: plan wrote"
    );

    let out = run(arch, &bin, &[&["run", "--once"][..], &common].concat());
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let converged = format!("converged: {} APIServices", DECLARED.len());
    assert!(
        log.contains(&converged),
        "{arch}: no {converged:?} in:\n{log}"
    );
    for (group, labels, priority) in DECLARED {
        let name = format!("v1.{group}");
        let Some(got) = stored(&server, &name) else {
            panic!("{arch}: run --once did not create {name}:\n{log}")
        };
        let want = object(group, labels, priority);
        assert_eq!(got["spec"], want["spec"], "{arch}: {name}'s spec");
        for (key, value) in labels {
            assert_eq!(
                got["metadata"]["labels"][key], *value,
                "{arch}: {name}'s label {key}"
            );
        }
        assert_eq!(
            got["metadata"]["labels"]["autoregister.dev/automanaged"], "true",
            "{arch}: {name} is not marked as managed"
        );
    }
    plan("none");
}

#[test]
fn x86_64_static_binary_runs_and_converges() {
    converges("x86_64");
}

#[test]
fn aarch64_static_binary_runs_and_converges() {
    converges("aarch64");
}
