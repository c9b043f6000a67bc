//! `make demo` as a test: the demo runs to its summary, each step of its story shown.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/example.rs"]
mod example;

use std::process::Command;

#[test]
fn the_demo_tells_registered_means_served_to_the_end() {
    let out = Command::new(example::path("demo"))
        .arg(binary::exe())
        .arg(example::path("apiserver"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    // Each heading, in the story's order, with the line that shows its step.
    let steps = [
        "Setup",
        "example server (examples/apiserver.rs) serving TLS on 127.1.0.",
        "Plan: autoregister plan",
        "v1alpha1.widgets.example.com  2C    create",
        "caBundle from Secret widgets/widgets-apiserver-tls key ca.crt: 1 certificate",
        "Register: autoregister run --withdraw-unavailable 2s",
        "caBundle = ca.crt of Secret widgets/widgets-apiserver-tls",
        "Available=True (Passed)",
        "The backend stops",
        "Available=False (MissingEndpoints)",
        "withdrawn ",
        "It returns",
        "registered again: v1alpha1.widgets.example.com restored",
        "Available=True (Passed)",
        "stopped cleanly on SIGTERM",
        "Summary",
        "kube-apiserver's own 21 APIServices were never touched.",
    ];
    let mut rest: &str = &stdout;
    for step in steps {
        let at = rest
            .find(step)
            .unwrap_or_else(|| panic!("{step:?} missing or out of order:\n{stdout}"));
        rest = &rest[at + step.len()..];
    }
    println!("{stdout}");
}
