//! Exec credential plugins that never answer, and the processes they leave: a kubeconfig
//! running a plugin script that records its pid and sleeps, and checks that its whole
//! process group is gone.
//!
//! Use with `#[path = "support/plugin.rs"] mod plugin;` beside `support/binary.rs`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use autoregister::testserver::TestServer;

use crate::binary::{wait_until, wait_until_for};

/// A kubeconfig whose user runs a plugin (which never answers) against `server`; the
/// kubeconfig and the file where the plugin writes its pid once it runs.
pub fn exec_kubeconfig(dir: &Path, server: &TestServer) -> (PathBuf, PathBuf) {
    let pidfile = dir.join("plugin.pid");
    let plugin = dir.join("plugin.sh");
    // No `exec`: the sleep is a grandchild, which a kill of the script alone would orphan.
    std::fs::write(
        &plugin,
        format!("#!/bin/sh\necho $$ > {}\nsleep 1000\n", pidfile.display()),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", plugin.to_str().unwrap()])
        .status()
        .unwrap();
    let kc = dir.join("exec-kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    \
             certificate-authority-data: {}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n\
             \x20     command: {}\n      interactiveMode: Never\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
            server.url(),
            {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(server.ca_pem().unwrap())
            },
            plugin.display()
        ),
    )
    .unwrap();
    (kc, pidfile)
}

/// Processes whose process group is `pgid` (the plugin script and what it started).
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state, ppid, pgrp, ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) && fields[0] != "Z" {
            found.push(pid);
        }
    }
    found
}

/// The plugin's pid, once it runs (it writes it first thing).
pub fn plugin_pid(pidfile: &Path) -> u32 {
    assert!(
        wait_until(
            || std::fs::read_to_string(pidfile).is_ok_and(|t| t.trim().parse::<u32>().is_ok())
        ),
        "the plugin never started"
    );
    std::fs::read_to_string(pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Fails the test unless every process of the plugin's group is gone (within 5 s).
pub fn assert_plugin_gone(pid: u32, log: &str) {
    assert!(
        wait_until_for(Duration::from_secs(5), || group_members(pid).is_empty()),
        "plugin processes left behind: {:?}\n{log}",
        group_members(pid)
    );
}

/// Whether /proc is there to find the plugin's processes (says so when not).
pub fn have_proc() -> bool {
    let ok = Path::new("/proc/self/stat").exists();
    if !ok {
        eprintln!("no /proc here; skipped");
    }
    ok
}
