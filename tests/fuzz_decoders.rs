//! The remaining decoders under seeded mutation (as `fuzz_inputs.rs` does for manifests,
//! kubeconfigs, watch events and Status): exec credential output, CLI durations, the ops
//! endpoint's request parser, the watch stream's line framing, and paginated list bodies
//! with `continue` tokens. Every case must end without a panic, within a time bound, with
//! its error in the documented class. `AR_FUZZ_SEED=N` explores other cases.
#![cfg(feature = "testing")]

#[path = "support/rng.rs"]
mod rng;
#[path = "support/scripted.rs"]
mod scripted;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// The duration parser of the flags and the withdrawal annotation.
use autoregister::api::{APIService, WatchEvent};
use autoregister::client::{
    Api, AuthConfig, Canceller, Client, Config, Error, ExecConfig, WatchParams,
};
use autoregister::ops::{OpsServer, OpsSources};
use autoregister::runtime::duration;
use autoregister::runtime::reflector::list_all;
use rng::{mutate, Rng};
use scripted::{Answer, Server};
use serde_json::json;

/// A case slower than this counts as a hang.
const CASE_LIMIT: Duration = Duration::from_secs(5);

fn seed(base: u64) -> u64 {
    let extra = std::env::var("AR_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    base ^ extra.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Runs `f` on its own thread and fails if it does not end within `limit` (a hang
/// shows as a failure naming the batch, not as a stuck test run).
fn bounded(what: &str, limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => t.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The thread panicked: rethrow its message.
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(_) => panic!("{what}: did not finish within {limit:?} (a hang)"),
    }
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    assert!(
        started.elapsed() < CASE_LIMIT,
        "{what}: took {:?}",
        started.elapsed()
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Durations

#[test]
fn mutated_durations_never_panic_and_stay_within_the_maximum() {
    bounded("durations", Duration::from_secs(60), || {
        let bases: &[&str] = &[
            "500ms",
            "30s",
            "2m",
            "1h",
            "1m30s",
            "1.5h",
            "2562047h",
            "2562047h47m16.854775807s",
            "0s",
            "1h2m3s4ms",
            ".5s",
            "9223372036s",
            "  10s ",
        ];
        let mut rng = Rng::new(seed(0xd0_7a71));
        let (mut ok, mut refused) = (0, 0);
        for case in 0..6000 {
            let base = rng.pick(bases);
            let text = String::from_utf8_lossy(&mutate(&mut rng, base.as_bytes())).into_owned();
            match duration::parse(&text) {
                Ok(d) => {
                    assert!(d <= duration::MAX, "case {case} {text:?}: {d:?} over MAX");
                    ok += 1;
                }
                Err(e) => {
                    assert!(e.contains("duration"), "case {case} {text:?}: {e}");
                    assert!(
                        e.len() < 64 + 2 * text.len() * 6,
                        "case {case}: {} bytes",
                        e.len()
                    );
                    refused += 1;
                }
            }
        }
        // The mutations must exercise both outcomes, or the test proves little.
        assert!(ok > 100 && refused > 1000, "ok {ok}, refused {refused}");
    });
}

// ---------------------------------------------------------------------------------------------
// The ops endpoint's request parser, through the real listener

#[test]
fn mutated_requests_to_the_ops_endpoint_get_an_answer_or_a_close_and_it_keeps_serving() {
    let server = OpsServer::start("127.0.0.1:0", OpsSources::new()).unwrap();
    let addr = server.local_addr();
    bounded("ops requests", Duration::from_secs(90), move || {
        let bases: &[&[u8]] = &[
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /metrics?name=x HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n",
            b"HEAD /readyz HTTP/1.0\r\nConnection: close\r\n\r\n",
            b"GET /readyz?verbose HTTP/1.1\nHost: x\n\n",
        ];
        let mut rng = Rng::new(seed(0x0e5));
        let mut codes: HashMap<String, usize> = HashMap::new();
        for case in 0..1500 {
            let base = rng.below(bases.len());
            let req = mutate(&mut rng, bases[base]);
            let answer = timed(&format!("case {case}"), || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(CASE_LIMIT)).unwrap();
                c.set_write_timeout(Some(CASE_LIMIT)).unwrap();
                let _ = c.write_all(&req);
                let _ = c.shutdown(Shutdown::Write);
                let mut out = Vec::new();
                let _ = c.read_to_end(&mut out);
                out
            });
            if answer.is_empty() {
                *codes.entry("closed".into()).or_default() += 1;
                continue;
            }
            let head = String::from_utf8_lossy(&answer[..answer.len().min(12)]).into_owned();
            let code = head.strip_prefix("HTTP/1.1 ").map(|c| c.trim().to_string());
            let Some(code) = code.filter(|c| c.len() == 3 && c.parse::<u16>().is_ok()) else {
                panic!("case {case} {req:?}: not an HTTP answer: {head:?}");
            };
            assert!(
                !code.starts_with('5') || code == "503",
                "case {case} {req:?}: {code}"
            );
            *codes.entry(code).or_default() += 1;
        }
        assert!(codes.get("200").copied().unwrap_or(0) > 50, "{codes:?}");
        assert!(codes.get("400").copied().unwrap_or(0) > 50, "{codes:?}");
        // Still serving after all that.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    });
}

// ---------------------------------------------------------------------------------------------
// Exec credential output, through a client running a plugin

fn exec_bases() -> Vec<Vec<u8>> {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["me".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let v = "client.authentication.k8s.io/v1beta1";
    [
        json!({"apiVersion": v, "kind": "ExecCredential",
               "status": {"token": "tok-123", "expirationTimestamp": "2099-01-01T00:00:00Z"}}),
        json!({"apiVersion": v, "kind": "ExecCredential", "status": {"token": "t"}}),
        json!({"apiVersion": v, "kind": "ExecCredential",
               "status": {"clientCertificateData": cert.pem(), "clientKeyData": key.serialize_pem(),
                          "expirationTimestamp": "2099-12-31T23:59:59.123456Z"}}),
    ]
    .iter()
    .map(|j| serde_json::to_vec_pretty(j).unwrap())
    .collect()
}

#[test]
fn mutated_exec_credential_output_is_an_auth_error_or_a_credential() {
    // Credentials go only over TLS: the test API server with TLS, holding object "x".
    let server = autoregister::testserver::TestServer::builder()
        .tls(true)
        .start()
        .unwrap();
    server.seed(
        "apiservices",
        None,
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "x"},
               "spec": {"group": "x", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}}),
    );
    let url = server.url().to_string();
    let ca = server.ca_pem();
    let dir = std::env::temp_dir().join(format!("ar-fuzz-exec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("answer.json");
    let bases = exec_bases();
    bounded("exec output", Duration::from_secs(90), move || {
        let mut rng = Rng::new(seed(0xe7ec));
        let (mut ok, mut refused) = (0, 0);
        for case in 0..300 {
            let base = rng.below(bases.len());
            let answer = mutate(&mut rng, &bases[base]);
            std::fs::write(&file, &answer).unwrap();
            let mut cfg = Config::new(url.clone());
            cfg.tls.ca_pem = ca.clone();
            cfg.qps = 0.0;
            cfg.timeout = Duration::from_secs(3);
            cfg.auth = AuthConfig::Exec(ExecConfig {
                command: "cat".into(),
                args: vec![file.to_string_lossy().into_owned()],
                // Plugins are shared per configuration: a fresh one per case.
                env: vec![("CASE".into(), case.to_string())],
                api_version: "client.authentication.k8s.io/v1beta1".into(),
                install_hint: None,
                provide_cluster_info: false,
                interactive_mode: None,
                cluster_server: None,
                cluster_config: None,
            });
            let result = timed(&format!("case {case}"), || {
                Client::new(cfg).and_then(|c| Api::<APIService>::all(c).get("x"))
            });
            match result {
                Ok(_) => ok += 1,
                Err(Error::Auth(m)) => {
                    assert!(m.starts_with("exec plugin cat: "), "case {case}: {m}");
                    assert!(m.len() < 4096, "case {case}: {} bytes of message", m.len());
                    refused += 1;
                }
                Err(e) => panic!(
                    "case {case} {:?}: want an auth error, got {e:?}",
                    String::from_utf8_lossy(&answer)
                ),
            }
        }
        assert!(ok > 2 && refused > 100, "ok {ok}, refused {refused}");
        let _ = std::fs::remove_dir_all(&dir);
    });
}

// ---------------------------------------------------------------------------------------------
// Watch stream framing: partial, blank, huge, interleaved and cut lines

fn event_line(i: usize) -> Vec<u8> {
    let mut l = serde_json::to_vec(&json!({"type": "ADDED", "object": {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("v1.g{i}.example.com"), "resourceVersion": (i + 1).to_string()},
        "spec": {"group": format!("g{i}.example.com"), "version": "v1"}}}))
    .unwrap();
    l.push(b'\n');
    l
}

/// What one watch case sends and what a correct reader must report.
struct WatchCase {
    chunks: Vec<Vec<u8>>,
    /// Events that must come out first, in order (by name).
    prefix: Vec<String>,
    /// Whether exactly `prefix` and then a clean end must follow (else: anything, but it ends).
    exact: bool,
}

const WATCH_LIMIT: usize = 8192;

fn watch_case(rng: &mut Rng) -> WatchCase {
    let n = 1 + rng.below(6);
    let lines: Vec<Vec<u8>> = (0..n).map(event_line).collect();
    let names: Vec<String> = (0..n).map(|i| format!("v1.g{i}.example.com")).collect();
    let mut stream = Vec::new();
    let (prefix, exact) = match rng.below(6) {
        // Partial lines only: every event arrives whatever the chunking.
        0 => {
            stream = lines.concat();
            (names, true)
        }
        // Blank and whitespace-only lines between events are skipped.
        1 => {
            for l in &lines {
                let sep: &[u8] = rng.pick::<&[u8]>(&[&b"\n"[..], b"\r\n", b"  \n", b""]);
                stream.extend_from_slice(sep);
                stream.extend_from_slice(l);
            }
            (names, true)
        }
        // A line over the limit ends the stream after the events before it.
        2 => {
            let at = rng.below(n);
            for (i, l) in lines.iter().enumerate() {
                if i == at {
                    stream.extend(std::iter::repeat_n(b'x', WATCH_LIMIT + rng.below(50_000)));
                    stream.push(b'\n');
                }
                stream.extend_from_slice(l);
            }
            (names[..at].to_vec(), false)
        }
        // Two events interleaved: the ones before are intact.
        3 => {
            let at = rng.below(n);
            for (i, l) in lines.iter().enumerate() {
                if i == at {
                    let other = event_line(99);
                    let cut = 1 + rng.below(l.len() - 2);
                    stream.extend_from_slice(&l[..cut]);
                    stream.extend_from_slice(&other[..rng.below(other.len())]);
                    stream.extend_from_slice(&l[cut..]);
                } else {
                    stream.extend_from_slice(l);
                }
            }
            (names[..at].to_vec(), false)
        }
        // Cut in the middle of the last event.
        4 => {
            stream = lines.concat();
            let last = lines[n - 1].len();
            stream.truncate(stream.len() - 1 - rng.below(last - 1));
            (names[..n - 1].to_vec(), false)
        }
        // Anything: random edits of the whole stream.
        _ => {
            stream = mutate(rng, &lines.concat());
            (Vec::new(), false)
        }
    };
    // Split into 1..12 chunks at random points (lines split across chunks).
    let mut cuts: Vec<usize> = (0..rng.below(12))
        .map(|_| rng.below(stream.len() + 1))
        .collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for c in cuts.into_iter().chain([stream.len()]) {
        if c > from {
            chunks.push(stream[from..c].to_vec());
            from = c;
        }
    }
    WatchCase {
        chunks,
        prefix,
        exact,
    }
}

#[test]
fn mutated_watch_streams_yield_the_intact_events_and_always_end() {
    let server = Server::start();
    let url = server.url();
    bounded("watch framing", Duration::from_secs(90), move || {
        let mut cfg = Config::new(url);
        cfg.qps = 0.0;
        cfg.timeout = Duration::from_secs(3);
        let api = Api::<APIService>::all(Client::new(cfg).unwrap());
        let params = WatchParams {
            resource_version: "1".into(),
            timeout_seconds: 5,
            allow_bookmarks: true,
            label_selector: None,
            field_selector: None,
            idle_timeout: None,
        };
        let mut rng = Rng::new(seed(0x3a7c4));
        for case in 0..300 {
            let c = watch_case(&mut rng);
            let (feed, answer) = Answer::stream();
            server.push(answer);
            for chunk in &c.chunks {
                feed.send(chunk.clone());
            }
            feed.end();
            let got = timed(&format!("case {case}"), || {
                let stream = api
                    .watch(&params, &Canceller::new())
                    .unwrap()
                    .with_max_event_bytes(WATCH_LIMIT);
                let mut got = Vec::new();
                for item in stream.take(100) {
                    got.push(match item {
                        Ok(
                            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o),
                        ) => o.metadata.name.unwrap_or_default().into(),
                        Ok(other) => format!("{other:?}"),
                        Err(e) => format!("error: {e}"),
                    });
                }
                got
            });
            assert!(got.len() < 100, "case {case}: the stream did not end");
            assert!(
                got.len() >= c.prefix.len() && got[..c.prefix.len()] == c.prefix[..],
                "case {case}: want {:?} first, got {got:?}",
                c.prefix
            );
            if c.exact {
                assert_eq!(got, c.prefix, "case {case}");
            }
            if got.iter().any(|g| g.contains("over")) {
                let last = got.last().unwrap();
                assert!(
                    last.contains("over"),
                    "case {case}: too large ends it: {got:?}"
                );
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Paginated lists with continue tokens

/// Tokens that stress query encoding: reserved characters, spaces, non-ASCII, long.
fn token(rng: &mut Rng, i: usize) -> String {
    let special = [
        "&",
        "=",
        "+",
        " ",
        "%",
        "%20",
        "#",
        "?",
        "/",
        "é",
        "\u{1F600}",
        ";",
        "\\",
    ];
    let mut t = format!("t{i}-");
    for _ in 0..rng.below(8) {
        t.push_str(rng.pick::<&str>(&special));
    }
    if rng.chance(0.1) {
        t.push_str(&"k".repeat(4096));
    }
    t
}

#[derive(Default)]
struct Pages {
    /// The answer body for each continue token ("" = first page).
    bodies: HashMap<String, Vec<u8>>,
    /// Continue values received that the script never handed out.
    unknown: Vec<String>,
}

#[test]
fn mutated_list_pages_and_continue_tokens_end_in_a_list_or_a_classified_error() {
    let pages = Arc::new(Mutex::new(Pages::default()));
    let p = pages.clone();
    let server = Server::with_handler(move |req| {
        let token = req.query("continue").unwrap_or_default();
        let mut p = p.lock().unwrap();
        match p.bodies.get(&token) {
            Some(b) => Answer::new(200)
                .header("Content-Type", "application/json")
                .body(b.clone()),
            None => {
                p.unknown.push(token);
                Answer::status(400, "BadRequest", "unknown continue token")
            }
        }
    });
    let url = server.url();
    bounded("list pages", Duration::from_secs(90), move || {
        let mut cfg = Config::new(url);
        cfg.qps = 0.0;
        cfg.timeout = Duration::from_secs(3);
        let api = Api::<APIService>::all(Client::new(cfg).unwrap());
        let mut rng = Rng::new(seed(0x1157));
        let (mut listed, mut refused) = (0, 0);
        for case in 0..300 {
            let n = 1 + rng.below(4);
            let tokens: Vec<String> = (0..n).map(|i| token(&mut rng, i)).collect();
            let mutated = rng.chance(0.5);
            // A cycle: the last page points back to an earlier token.
            let cycle = !mutated && n > 1 && rng.chance(0.2);
            let mut bodies = HashMap::new();
            let mut total = 0;
            for i in 0..n {
                let items: Vec<_> = (0..rng.below(3))
                    .map(|k| {
                        json!({"metadata": {"name": format!("v1.p{i}k{k}.example.com")},
                                    "spec": {"group": "g", "version": "v1"}})
                    })
                    .collect();
                total += items.len();
                let next = if i + 1 < n {
                    tokens[i + 1].clone()
                } else if cycle {
                    tokens[1 + rng.below(n - 1)].clone()
                } else {
                    String::new()
                };
                let body = serde_json::to_vec(&json!({
                    "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIServiceList",
                    "metadata": {"resourceVersion": "42", "continue": next}, "items": items}))
                .unwrap();
                let key = if i == 0 {
                    String::new()
                } else {
                    tokens[i].clone()
                };
                bodies.insert(
                    key,
                    if mutated {
                        mutate(&mut rng, &body)
                    } else {
                        body
                    },
                );
            }
            {
                let mut p = pages.lock().unwrap();
                p.bodies = bodies;
                p.unknown.clear();
            }
            let result = timed(&format!("case {case}"), || {
                list_all(&api, 2, None, &Canceller::new())
            });
            match result {
                Ok(Some(l)) => {
                    assert!(!cycle, "case {case}: a token cycle must be refused");
                    if !mutated {
                        assert_eq!(l.items.len(), total, "case {case}");
                        assert_eq!(l.resource_version, "42", "case {case}");
                    }
                    listed += 1;
                }
                Ok(None) => panic!("case {case}: not cancelled, yet no list"),
                Err(e) => {
                    assert!(
                        mutated || cycle,
                        "case {case}: a well-formed list failed: {e}"
                    );
                    assert!(
                        matches!(e, Error::Decode(_) | Error::Api(_)),
                        "case {case}: {e:?}"
                    );
                    assert!(e.to_string().len() < 20_000, "case {case}");
                    refused += 1;
                }
            }
            if !mutated {
                let p = pages.lock().unwrap();
                assert!(
                    p.unknown.is_empty(),
                    "case {case}: tokens came back changed: {:?}",
                    p.unknown
                );
            }
        }
        assert!(
            listed > 50 && refused > 50,
            "listed {listed}, refused {refused}"
        );
    });
}

/// Found by the case above (seed 0x1157, case 6): tokens A → B → A were followed forever,
/// the item list growing on every lap.
#[test]
fn a_continue_token_cycle_is_refused_not_followed_forever() {
    let server = Server::with_handler(|req| {
        let next = match req.query("continue").as_deref() {
            None | Some("") => "A",
            Some("A") => "B",
            _ => "A",
        };
        Answer::json(
            200,
            &json!({"kind": "APIServiceList", "metadata": {"resourceVersion": "1", "continue": next},
                    "items": [{"metadata": {"name": "v1.x"}, "spec": {}}]}),
        )
    });
    let url = server.url();
    bounded("token cycle", Duration::from_secs(20), move || {
        let mut cfg = Config::new(url);
        cfg.qps = 0.0;
        let api = Api::<APIService>::all(Client::new(cfg).unwrap());
        let e = list_all(&api, 1, None, &Canceller::new()).err();
        match e {
            Some(Error::Decode(m)) => assert!(m.contains("repeated continue token \"A\""), "{m}"),
            other => panic!("want a decode error, got {other:?}"),
        }
    });
    assert_eq!(
        server.requests().len(),
        3,
        "first page, A, B; A again is refused"
    );
}
