//! Property tests on hostile and broken input: thousands of mutated manifests, kubeconfigs,
//! watch events and Status bodies through the public decoders. None may panic; errors keep
//! their contract (a manifest error names its file and a line within it, a kubeconfig error
//! names its file). Seeded, so a failure reproduces; no extra crates.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use autoregister::api::DEFAULT_LABEL_KEY;
use autoregister::api::{APIService, Status, WatchEvent};
use autoregister::client::{Config, ConnectOptions, InferEnv};
use autoregister::controller::manifests::parse_file;

/// xorshift64*: tiny, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    /// `seed`, or `AR_FUZZ_SEED` mixed in to explore further by hand.
    fn new(seed: u64) -> Rng {
        let extra = std::env::var("AR_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        Rng((seed ^ extra.wrapping_mul(0x9e37_79b9_7f4a_7c15)).max(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Snippets that stress a YAML/JSON parser when dropped anywhere.
const SNIPPETS: &[&str] = &[
    "\n---\n",
    "---",
    "\n...\n",
    "&a ",
    "*a",
    "&b [*a, *a, *a, *a]",
    "!!binary ",
    "!tag ",
    "%YAML 1.2\n",
    "<<: *a\n",
    "? ",
    "1e999999",
    "-1e999999",
    "99999999999999999999999999999999",
    "0x7fffffffffffffffffff",
    ".nan",
    "\"\\uD800\"",
    "\"\\U0010FFFF\"",
    "'",
    "\"",
    "|",
    ">-",
    "\t",
    "\r",
    "\u{feff}",
    "\u{0}",
    "{",
    "}",
    "[",
    "]",
    ",",
    ": ",
    "#",
    "null",
    "~",
];

/// One to three random mutations of `base`, made lossy UTF-8 where bytes were flipped.
fn mutate(rng: &mut Rng, base: &[u8]) -> String {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(b.len() + 1);
        match rng.below(9) {
            0 => b.truncate(at),
            1 => {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = rng.next() as u8;
                }
            }
            2 => {
                let s = rng.pick(SNIPPETS).as_bytes().to_vec();
                b.splice(at..at, s);
            }
            3 => {
                // Deep nesting, past any recursion limit.
                let depth = 1 + rng.below(5000);
                let open = *rng.pick(&["[", "{a: ", "- ", "{\"a\":"]);
                b.splice(at..at, open.repeat(depth).into_bytes());
            }
            4 => {
                // Duplicate a slice (repeated keys, documents, lines).
                let end = (at + rng.below(200)).min(b.len());
                let dup = b[at..end].to_vec();
                b.splice(at..at, dup);
            }
            5 => {
                let end = (at + rng.below(50)).min(b.len());
                b.drain(at..end);
            }
            6 => {
                // Swap two lines' worth of indentation.
                let n = rng.below(12);
                b.splice(at..at, std::iter::repeat_n(b' ', n));
            }
            7 => {
                let s = rng.pick(SNIPPETS).as_bytes().to_vec();
                let n = 1 + rng.below(64);
                b.splice(at..at, s.repeat(n));
            }
            _ => {
                let s = rng
                    .pick(&["\n", "\r\n", "\n\n", " ", "-"])
                    .as_bytes()
                    .to_vec();
                b.splice(at..at, s);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn example_manifests() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/apiservices");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 3, "examples/apiservices has the fixtures");
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// Runs `f`, turning a panic into a test failure that shows the input.
fn no_panic<T>(what: &str, input: &str, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let shown: String = input.chars().take(2000).collect();
            panic!("{what} panicked ({msg}) on input:\n{shown}");
        }
    }
}

#[test]
fn mutated_manifests_never_panic_and_errors_name_file_and_line() {
    let examples = example_manifests();
    let mut rng = Rng::new(0x5eed_0001);
    let (mut ok, mut rejected) = (0, 0);
    for _ in 0..2500 {
        let (path, base) = rng.pick(&examples);
        let text = mutate(&mut rng, base);
        let lines = text.split('\n').count();
        match no_panic("parse_file", &text, || {
            parse_file(path, &text, DEFAULT_LABEL_KEY)
        }) {
            Ok(_) => ok += 1,
            Err(errors) => {
                rejected += 1;
                assert!(!errors.is_empty());
                for e in errors {
                    assert_eq!(e.file, *path, "{e}");
                    let line = e.line.unwrap_or_else(|| panic!("no line: {e}\n{text}"));
                    assert!(
                        (1..=lines + 1).contains(&line),
                        "line {line} of {lines}: {e}"
                    );
                    assert!(
                        e.to_string()
                            .starts_with(&format!("{}:{line}", path.display())),
                        "{e}"
                    );
                }
            }
        }
    }
    // The mutations must exercise both outcomes to mean anything.
    assert!(ok > 100 && rejected > 100, "ok {ok}, rejected {rejected}");
}

/// CPU time this thread has used (user and system), from /proc; `None` without it.
fn thread_cpu() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command: state, ppid, ... utime (12th), stime (13th).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // In USER_HZ, which Linux reports at 100 per second whatever its own tick rate.
    Some(std::time::Duration::from_millis(ticks * 10))
}

#[test]
fn billion_laughs_manifest_is_refused_quickly() {
    // Classic exponential form, and the quadratic form serde_yaml_ng's jump limit lets through.
    let mut laughs = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..12 {
        let p = i - 1;
        laughs.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let n = 30_000;
    let quadratic = format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.x\n  annotations:\n    a: &a [{}]\n    b: [{}]\n",
        vec!["xxxxxxxx"; n].join(","),
        vec!["*a"; n].join(",")
    );
    for text in [laughs, quadratic] {
        let started = std::time::Instant::now();
        let cpu = thread_cpu();
        let errors = parse_file(Path::new("laughs.yaml"), &text, DEFAULT_LABEL_KEY).unwrap_err();
        // The work done, not the wall clock: on a loaded machine the thread waits for a core.
        let spent = match (cpu, thread_cpu()) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => started.elapsed(),
        };
        eprintln!(
            "refused after {spent:?} of CPU, {:?} in all",
            started.elapsed()
        );
        assert!(
            spent < std::time::Duration::from_secs(3),
            "{spent:?} of CPU ({:?} in all)",
            started.elapsed()
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].line.is_some(), "{}", errors[0]);
        assert!(
            errors[0].message.contains("limit") || errors[0].message.contains("too much"),
            "{}",
            errors[0]
        );
    }
}

#[test]
fn deeply_nested_manifests_are_errors_not_stack_overflows() {
    for (name, text) in [
        ("deep.yaml", "[".repeat(200_000)),
        ("deep.yaml", "a: ".to_string() + &"{a: ".repeat(100_000)),
        ("deep.yaml", "- ".repeat(50_000) + "x"),
        ("deep.json", "[".repeat(200_000) + &"]".repeat(200_000)),
        ("deep.json", "{\"a\":".repeat(100_000)),
    ] {
        let errors = parse_file(Path::new(name), &text, DEFAULT_LABEL_KEY).unwrap_err();
        assert!(errors[0].line.is_some(), "{}", errors[0]);
    }
}

const KUBECONFIG: &str = r#"apiVersion: v1
kind: Config
current-context: main
clusters:
- name: main
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    tls-server-name: kubernetes
- name: other
  cluster: {server: "http://localhost:8080", insecure-skip-tls-verify: true}
users:
- name: admin
  user:
    token: abc.def
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./helper
      args: [--a, --b]
      env: [{name: X, value: y}]
      interactiveMode: Never
- name: basic
  user: {username: u, password: p}
contexts:
- name: main
  context: {cluster: main, user: admin, namespace: default}
- name: e
  context: {cluster: other, user: exec}
"#;

#[test]
fn mutated_kubeconfigs_never_panic_and_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("ar-fuzz-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    let env = InferEnv {
        service_account_dir: dir.join("no-sa"),
        ..InferEnv::default()
    };
    let mut rng = Rng::new(0x5eed_0002);
    let (mut ok, mut rejected) = (0, 0);
    for i in 0..1500 {
        let text = mutate(&mut rng, KUBECONFIG.as_bytes());
        // Relative paths resolve against the file's directory, never a device or FIFO here.
        std::fs::write(&path, &text).unwrap();
        let opts = ConnectOptions {
            kubeconfig: Some(path.clone()),
            context: (i % 3 == 0).then(|| "e".to_string()),
            server: None,
            impersonate: Default::default(),
        };
        match no_panic("Config::infer_with", &text, || {
            Config::infer_with(&opts, &env)
        }) {
            Ok(_) => ok += 1,
            Err(e) => {
                rejected += 1;
                assert!(
                    e.to_string().contains(&path.display().to_string()),
                    "{e}\n{text}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok > 50 && rejected > 50, "ok {ok}, rejected {rejected}");
}

fn apiservice_event() -> String {
    serde_json::json!({
        "type": "MODIFIED",
        "object": {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1.a", "uid": "u", "resourceVersion": "7",
                          "labels": {"kube-aggregator.kubernetes.io/automanaged": "true"}},
            "spec": {"group": "a", "version": "v1", "groupPriorityMinimum": 100,
                     "versionPriority": 10, "caBundle": "AAEC",
                     "service": {"namespace": "n", "name": "s", "port": 443}},
            "status": {"conditions": [{"type": "Available", "status": "True",
                       "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        }
    })
    .to_string()
}

fn status_body() -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "too old resource version", "reason": "Expired", "code": 410,
        "details": {"name": "x", "causes": [{"reason": "R", "message": "m", "field": "f"}],
                    "retryAfterSeconds": 3}
    })
    .to_string()
}

#[test]
fn mutated_watch_events_and_status_bodies_never_panic() {
    let bases = [
        apiservice_event(),
        status_body(),
        format!("{{\"type\":\"ERROR\",\"object\":{}}}", status_body()),
        r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}"#.to_string(),
    ];
    let mut rng = Rng::new(0x5eed_0003);
    let mut decoded = 0;
    for _ in 0..4000 {
        let base = rng.pick(&bases).clone();
        let text = mutate(&mut rng, base.as_bytes());
        let event = no_panic("WatchEvent::from_json", &text, || {
            WatchEvent::<APIService>::from_json(text.as_bytes())
        });
        if let Ok(WatchEvent::Error(status)) = &event {
            // What the reflector does with an ERROR event.
            let e = no_panic("Error::from_status", &text, || {
                autoregister::client::Error::from_status((**status).clone())
            });
            let _ = e.to_string();
        }
        decoded += usize::from(event.is_ok());
        let status = no_panic("Status decode", &text, || {
            serde_json::from_str::<Status>(&text)
        });
        if let Ok(s) = status {
            no_panic("Error::from_status", &text, || {
                autoregister::client::Error::from_status(s).to_string()
            });
        }
        let _ = no_panic("APIService decode", &text, || {
            serde_json::from_str::<APIService>(&text)
        });
    }
    assert!(decoded > 100, "decoded {decoded}");
}

#[test]
fn absurd_status_fields_never_panic() {
    for code in [
        "0", "1", "99", "600", "65535", "65536", "99999", "-1", "1e3", "null",
    ] {
        let text = format!(
            r#"{{"type":"ERROR","object":{{"kind":"Status","code":{code},"reason":"Expired"}}}}"#
        );
        if let Ok(WatchEvent::Error(s)) = WatchEvent::<APIService>::from_json(text.as_bytes()) {
            let e = autoregister::client::Error::from_status(*s);
            let api = e.as_api().unwrap();
            assert!((100..600).contains(&api.code), "{code}: {e}");
        }
    }
}

#[test]
fn hostile_command_lines_are_usage_errors_not_panics() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let bin = env!("CARGO_BIN_EXE_autoregister");
    let cases: Vec<Vec<OsString>> = vec![
        vec![
            "run".into(),
            "--manifests".into(),
            "m".into(),
            "--timeout".into(),
            "99999999999999999999h".into(),
        ],
        vec![
            "run".into(),
            "--manifests".into(),
            "m".into(),
            "--timeout".into(),
            "18446744073709551615s1s".into(),
        ],
        vec![
            "run".into(),
            "--manifests".into(),
            "m".into(),
            "--resync".into(),
            "1e999s".into(),
        ],
        vec![
            "run".into(),
            "--manifests".into(),
            "m".into(),
            "--qps".into(),
            "NaN".into(),
        ],
        vec![
            "run".into(),
            "--manifests".into(),
            "m".into(),
            "--burst".into(),
            "99999999999".into(),
        ],
        vec![
            "run".into(),
            "--manifests".into(),
            "m".into(),
            "--workers".into(),
            "-1".into(),
        ],
        vec![
            "run".into(),
            "--manifests".into(),
            OsString::from_vec(vec![0xff, 0xfe]),
        ],
        vec![
            OsString::from_vec(vec![0xff]),
            "--manifests".into(),
            "m".into(),
        ],
        vec!["plan".into(), "--manifests=".into(), "--once".into()],
        vec!["run".into(), "--manifests".into()],
        vec!["run".into(), "-".repeat(10_000).into()],
    ];
    for args in cases {
        let out = std::process::Command::new(bin)
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
