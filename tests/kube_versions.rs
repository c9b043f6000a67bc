//! The supported Kubernetes versions are one list (`tests/kube/versions`): each has its Go
//! module, the users' table (docs/compatibility.md) names exactly them, and a version that
//! is not listed is refused in one line naming the listed ones, by the test harness and by
//! `scripts/kube-build.sh`. Nothing here builds or starts a kube-apiserver.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/kube.rs"]
mod kube;

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Set in the child this test binary starts to ask the harness for a version.
const CHILD: &str = "AUTOREGISTER_TEST_VERSION_CHILD";

/// `(version, sample-apiserver)` per line of tests/kube/versions.
fn listed() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("tests/kube/versions")).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut w = l.split('#').next()?.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

fn minor(v: &str) -> u32 {
    v.split('.').nth(1).unwrap().parse().unwrap()
}

#[test]
fn every_version_has_its_go_module_and_the_list_is_newest_first() {
    let listed = listed();
    assert!(!listed.is_empty());
    let minors: Vec<u32> = listed.iter().map(|(v, _)| minor(v)).collect();
    assert!(
        minors.windows(2).all(|w| w[0] > w[1]),
        "tests/kube/versions is not one line per minor, newest first: {minors:?}"
    );
    assert_eq!(
        kube::versions(),
        listed.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(),
        "the harness reads the list as this test does"
    );
    for (v, sample) in &listed {
        let gomod = Path::new(ROOT).join("tests/kube").join(v).join("go.mod");
        let text = std::fs::read_to_string(&gomod)
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/kube-module.sh {v})", gomod.display()));
        assert!(
            text.contains(&format!("\nrequire k8s.io/kubernetes {v}\n")),
            "{} does not build kube-apiserver {v}",
            gomod.display()
        );
        // sample-apiserver is built by the listed version of its minor.
        let from = listed
            .iter()
            .find(|(w, _)| minor(w) == minor(sample))
            .unwrap_or_else(|| {
                panic!("{v}: no listed version of sample-apiserver {sample}'s minor")
            });
        let from_mod = std::fs::read_to_string(
            Path::new(ROOT)
                .join("tests/kube")
                .join(&from.0)
                .join("go.mod"),
        )
        .unwrap();
        assert!(
            from_mod.contains(&format!("\nrequire k8s.io/sample-apiserver {sample}\n")),
            "{v}: sample-apiserver {sample} is not in {}'s module",
            from.0
        );
    }
}

#[test]
fn the_supported_versions_table_names_the_listed_versions() {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/compatibility.md")).unwrap();
    // The table's rows: "| v1.37.2 | ..." in the order of the list.
    let rows: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| v1."))
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    let want: Vec<String> = listed()
        .iter()
        .map(|(v, _)| v.trim_start_matches("v1.").to_string())
        .collect();
    assert_eq!(
        rows, want,
        "docs/compatibility.md's table does not match tests/kube/versions"
    );
}

#[test]
fn an_unknown_version_is_refused_naming_the_listed_ones() {
    if std::env::var_os(CHILD).is_some() {
        // The child: ask the harness, as every real-server test does first.
        kube::version();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_unknown_version_is_refused_naming_the_listed_ones",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("AUTOREGISTER_KUBE_VERSION", "v1.99.0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let names = listed()
        .iter()
        .map(|(v, _)| v.clone())
        .collect::<Vec<_>>()
        .join(", ");
    let line = format!(
        "AUTOREGISTER_KUBE_VERSION=\"v1.99.0\" is not a listed Kubernetes version (tests/kube/versions): {names}"
    );
    assert!(
        err.lines().any(|l| l.trim() == line),
        "no line {line:?} in:\n{err}"
    );

    let build = Command::new(Path::new(ROOT).join("scripts/kube-build.sh"))
        .args([std::env::temp_dir().to_str().unwrap(), "v1.99.0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&build.stderr);
    assert!(!build.status.success(), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "make kube: Kubernetes v1.99.0 is not listed in tests/kube/versions; listed: {}",
            names.replace(", ", " ")
        )
    );
}
