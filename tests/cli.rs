//! The command line as a Unix and Kubernetes tool: a closed stdout, per-command help,
//! `help [COMMAND]`, the version, both flag forms, a bare `--server`, and errors that name
//! the flag. Through the real binary.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

use autoregister::testserver::TestServer;
use binary::{exe, manifest, Proc, Scratch, WAIT};

fn run(args: &[&str]) -> Output {
    Command::new(exe())
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .expect("run the binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` with stdout on a pipe that has no reader left, so the first write fails
/// with EPIPE every time (a FIFO opened read-write, then write-only, then the read-write
/// end closed: no race with a reader such as `head` exiting).
fn with_closed_stdout(scratch: &Scratch, args: &[&str]) -> Output {
    let fifo = scratch.path("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    drop(reader);
    let out = Command::new(exe())
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("run the binary");
    std::fs::remove_file(&fifo).unwrap();
    out
}

/// `autoregister plan … | head -2` and `--help | head -1`: the process dies of SIGPIPE, as
/// `seq` or `cat` do (a shell reports 141), with no panic or "Broken pipe" message.
#[test]
fn a_closed_stdout_ends_the_process_by_sigpipe_quietly() {
    let server = TestServer::start();
    let s = Scratch::new("cli-sigpipe");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let kc = s.kubeconfig(&server);
    let m = s.manifests();
    let plan = [
        "plan",
        "--manifests",
        m.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
    ];
    for args in [&["--help"][..], &["run", "--help"], &["version"], &plan] {
        let out = with_closed_stdout(&s, args);
        let err = stderr(&out);
        assert_eq!(
            out.status.signal(),
            Some(13),
            "{args:?}: {:?}\n{err}",
            out.status
        );
        assert!(!out.status.core_dumped(), "{args:?}");
        for noise in ["panicked", "Broken pipe", "failed printing"] {
            assert!(!err.contains(noise), "{args:?}: {err}");
        }
    }
}

/// Help entries: each `  --flag` entry with its continuation lines.
fn flag_entries(help: &str) -> Vec<String> {
    let mut entries: Vec<String> = Vec::new();
    let mut in_flags = false;
    for line in help.lines() {
        if line == "flags:" {
            in_flags = true;
            continue;
        }
        if !in_flags {
            continue;
        }
        if line.is_empty() {
            break;
        }
        if line.trim_start().starts_with("--") {
            entries.push(line.trim().to_string());
        } else if let Some(last) = entries.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    entries
}

#[test]
fn each_command_has_its_own_help_with_every_flag_default_rust_log_and_exit_codes() {
    let run_help = run(&["run", "--help"]);
    assert!(run_help.status.success());
    let run_text = stdout(&run_help);
    assert_eq!(stdout(&run(&["help", "run"])), run_text);
    let plan_text = stdout(&run(&["plan", "--help"]));
    assert_eq!(stdout(&run(&["help", "plan"])), plan_text);
    let top = stdout(&run(&["--help"]));
    assert_eq!(stdout(&run(&["help"])), top);
    assert_ne!(run_text, plan_text);
    assert_ne!(run_text, top);
    assert!(
        run_text.starts_with("autoregister run: keeps"),
        "{run_text}"
    );
    assert!(
        plan_text.starts_with("autoregister plan: prints"),
        "{plan_text}"
    );
    for (cmd, text) in [("run", &run_text), ("plan", &plan_text)] {
        let entries = flag_entries(text);
        assert!(entries.len() >= 10, "{cmd}: {entries:#?}");
        for e in &entries {
            assert!(
                e.contains("default") || e.contains("required"),
                "{cmd}: no default for {e:?}"
            );
        }
        for must in ["RUST_LOG", "exit codes:", "  2  bad usage", "--flag=VALUE"] {
            assert!(text.contains(must), "{cmd} help lacks {must:?}");
        }
    }
    assert!(flag_entries(&run_text)
        .iter()
        .any(|e| e.starts_with("--workers")));
    assert!(!flag_entries(&plan_text)
        .iter()
        .any(|e| e.starts_with("--workers")));
    // The overview names each command with one line.
    for cmd in ["run ", "plan ", "version ", "help "] {
        assert!(
            top.lines().any(|l| l.starts_with(&format!("  {cmd}"))),
            "{cmd}: {top}"
        );
    }
    let unknown = run(&["help", "frobnicate"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("unknown command \"frobnicate\""));
}

#[test]
fn version_names_the_commit_and_target_in_all_three_spellings() {
    let v = stdout(&run(&["version"]));
    assert_eq!(stdout(&run(&["--version"])), v);
    assert_eq!(stdout(&run(&["-V"])), v);
    assert!(
        v.starts_with(&format!(
            "autoregister {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{v}"
    );
    assert!(v.contains(std::env::consts::ARCH), "{v}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match head {
        Ok(h) if h.status.success() => {
            let commit = String::from_utf8_lossy(&h.stdout).trim().to_string();
            assert!(
                v.contains(&format!("(commit {commit}, ")),
                "{v} vs {commit}"
            );
        }
        // No git or no checkout: the build says so.
        _ => assert!(v.contains("(commit unknown, "), "{v}"),
    }
}

#[test]
fn a_missing_manifests_path_is_a_usage_error_naming_the_flag() {
    for args in [
        &["run", "--manifests", "/nonexistent/apiservices"][..],
        &["plan", "--manifests=/nonexistent/apiservices"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("--manifests /nonexistent/apiservices: No such file"),
            "{}",
            stderr(&out)
        );
    }
}

/// `--server HOST:PORT` gets the scheme kubectl gives it: http without TLS settings, https
/// when the kubeconfig has a CA; both forms of every value flag and `--events false` work.
#[test]
fn a_bare_server_gets_kubectls_scheme_and_both_flag_forms_work() {
    let plain = TestServer::start();
    let s = Scratch::new("cli-server");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let m = s.manifests();
    let bare = plain.addr().to_string();
    let (code, out) = Proc::spawn(&[
        "plan",
        "--manifests",
        m.to_str().unwrap(),
        &format!("--server={bare}"),
        "--timeout=20s",
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("connecting to http://{bare} ")),
        "{out}"
    );

    let tls = TestServer::builder().tls(true).start().unwrap();
    let kc = s.kubeconfig(&tls);
    let bare = tls.addr().to_string();
    let (code, out) = Proc::spawn(&[
        "run",
        "--manifests",
        m.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--server",
        &bare,
        "--once",
        "true",
        "--events",
        "false",
        "--workers=1",
        "--timeout",
        "20s",
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("connecting to https://{bare} ")),
        "{out}"
    );
    assert!(binary::stored(&tls, "v1.a.example.com").is_some());
    // --events false: no Event was written.
    assert!(
        !tls.requests()
            .iter()
            .any(|r| r.resource.as_deref() == Some("events")),
        "Events written with --events false"
    );
}
