//! The alerts (`charts/autoregister/files/alerts.yaml`) and the dashboard
//! (`charts/autoregister/files/dashboard.json`) against the binary's real `/metrics`.
//!
//! One run of two replicas against the test server in kube-apiserver mode is recorded,
//! one scrape of each replica per tick: a backend dies and is withdrawn, one CA bundle
//! expires within days and one has expired, one name's writes are refused, the leader is
//! killed (the standby reports 0 until it takes over), then every replica is gone. The
//! ticks become promtool input series, one minute apart, with timestamps moved to the
//! test's clock; every alert's unit test is evaluated on them. A metric renamed in the
//! binary leaves a rule without series, and its test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use autoregister::testserver::TestServer;
use serde_json::{json, Value};

use crate::binary::{http_get, wait_until_for, Proc, Scratch};
use crate::tls_backend::{service_on, set_ready_on, Issued, TlsBackend};
use crate::tools::promtool;
use crate::{chart_dir, repo, yaml_docs};

/// A CA certificate valid until `days` from now (negative: expired), PEM.
fn ca_pem(days: i64) -> String {
    let (y, m, d) = crate::binary::date_in_days(days);
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, format!("ca-{days}-days"));
    p.not_before = rcgen::date_time_ymd(2000, 1, 1);
    p.not_after = rcgen::date_time_ymd(y, m, d);
    let key = rcgen::KeyPair::generate().unwrap();
    p.self_signed(&key).unwrap().pem()
}

/// [`ca_pem`] in base64 (a Secret's `data` value, an APIService's `caBundle`).
pub fn ca_pem_base64(days: i64) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(ca_pem(days))
}

/// One tick: every replica's samples (an `instance` and a `job` label added, as a
/// Prometheus scrape does), and when it was taken (Unix seconds).
struct Tick {
    at: f64,
    samples: Vec<crate::promtext::Sample>,
}

/// The recorded run: ticks, and the tick indexes where its phases began.
struct Recording {
    ticks: Vec<Tick>,
    /// First tick after the leader was killed.
    leader_killed: usize,
    /// First tick after the standby stopped too.
    all_down: usize,
}

const UP: &str = "v1.up.example.com";
const OLD: &str = "v1.old.example.com";
const DIES: &str = "v1.dies.example.com";
const DENIED: &str = "v1.denied.example.com";
/// Real time between ticks; each becomes one minute of the rules' clock.
const TICK: Duration = Duration::from_millis(250);

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The APIService `name` (`v1.<group>`) served by Service `ns/svc` on `port`, trusting `bundle`.
fn manifest(name: &str, svc: Option<(&str, u16)>, bundle: &str, annotation: &str) -> String {
    use base64::Engine as _;
    let group = name.strip_prefix("v1.").unwrap();
    let service = match svc {
        Some((svc, port)) => format!(
            "  service:\n    namespace: ns\n    name: {svc}\n    port: {port}\n  caBundle: {}\n",
            base64::engine::general_purpose::STANDARD.encode(bundle)
        ),
        None => String::new(),
    };
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\n{annotation}spec:\n  group: {group}\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n{service}---\n"
    )
}

/// A TLS backend for `v1.<group>` behind Service `ns/svc` on the test server, and its CA.
fn backend(server: &TestServer, svc: &str, group: &str) -> (TlsBackend, String, u16) {
    let listener = service_on(server, "ns", svc);
    let port = listener.local_addr().unwrap().port();
    let issued = Issued::new(&format!("{svc}-ca"), &[&format!("{svc}.ns.svc")]);
    (
        TlsBackend::start(listener, &issued, group, "v1"),
        issued.ca_pem,
        port,
    )
}

/// One scrape of the replica at `addr`, its samples labelled as Prometheus would; none
/// when it does not answer (a failed scrape).
fn scrape(addr: &str, instance: &str, out: &mut Vec<crate::promtext::Sample>) {
    if std::net::TcpStream::connect(addr).is_err() {
        return;
    }
    let (code, body) = http_get(addr, "/metrics");
    if code != 200 {
        return;
    }
    let parsed = crate::promtext::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    for mut s in parsed.samples {
        s.labels.insert("instance".into(), instance.into());
        s.labels.insert("job".into(), "autoregister".into());
        out.push(s);
    }
}

fn value_of(t: &Tick, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    t.samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

fn recording() -> &'static Recording {
    static R: OnceLock<Recording> = OnceLock::new();
    R.get_or_init(record)
}

fn record() -> Recording {
    let server = TestServer::builder()
        .kube_apiserver(true)
        .start()
        .expect("test server");
    let (up, up_ca, up_port) = backend(&server, "up", "up.example.com");
    let (old, old_ca, old_port) = backend(&server, "old", "old.example.com");
    let (mut dies, dies_ca, dies_port) = backend(&server, "dies", "dies.example.com");
    // Bundles: the backend's CA, plus one that expires in 7 days / expired yesterday (its
    // earliest notAfter is the metric; the backend's own CA still verifies it).
    let s = Scratch::new("monitoring-run");
    s.write(
        "up.yaml",
        &manifest(
            UP,
            Some(("up", up_port)),
            &format!("{up_ca}{}", ca_pem(7)),
            "",
        ),
    );
    s.write(
        "old.yaml",
        &manifest(
            OLD,
            Some(("old", old_port)),
            &format!("{old_ca}{}", ca_pem(-1)),
            "",
        ),
    );
    s.write(
        "dies.yaml",
        &manifest(
            DIES,
            Some(("dies", dies_port)),
            &dies_ca,
            "  annotations:\n    autoregister.dev/withdraw-unavailable-after: 8s\n",
        ),
    );
    let args = [
        "--leader-elect",
        "--lease-namespace",
        "autoregister",
        "--health-addr",
        "127.0.0.1:0",
    ];
    let leader = Proc::run(&server, &s, &args);
    leader.wait_log("leader election: leading as ");
    let standby = Proc::run(&server, &s, &args);
    let (la, sa) = (leader.ops_addr(), standby.ops_addr());
    assert!(
        wait_until_for(Duration::from_secs(20), || {
            let body = http_get(&la, "/metrics").1;
            let p = crate::promtext::parse(&body).unwrap();
            [UP, OLD, DIES].iter().all(|n| {
                p.value("autoregister_apiservice_available", &[("apiservice", n)]) == Some(1.0)
            })
        }),
        "the backends did not become available:\n{}",
        leader.log()
    );

    // From now on the server refuses to create or apply APIServices (403, as a missing
    // RBAC grant would): a name added to the set fails to sync, again and again.
    server.deny("create", "apiservices", None, None);
    server.deny("patch", "apiservices", None, None);
    s.write("denied.yaml", &manifest(DENIED, None, "", ""));

    let mut ticks = Vec::new();
    let tick = |ticks: &mut Vec<Tick>, addrs: &[(&str, &str)]| {
        let at = now();
        let mut samples = Vec::new();
        for (addr, instance) in addrs {
            scrape(addr, instance, &mut samples);
        }
        ticks.push(Tick { at, samples });
        std::thread::sleep(TICK);
    };
    let both = [(la.as_str(), "replica-0"), (sa.as_str(), "replica-1")];
    // Healthy: a few minutes of the rules' clock.
    for _ in 0..4 {
        tick(&mut ticks, &both);
    }
    // The backend dies as a pod does: its endpoint turns unready, the process goes.
    set_ready_on(&server, "ns", "dies", false);
    dies.stop();
    // Unavailable, then withdrawn after 8 s (32 ticks; the 10m alert needs 12, so a tick
    // may take up to 660 ms on a busy machine); then held withdrawn.
    let withdrawn = |t: &Tick| {
        value_of(
            t,
            "autoregister_apiservice_withdrawn",
            &[("apiservice", DIES), ("instance", "replica-0")],
        ) == Some(1.0)
    };
    while !ticks.last().is_some_and(withdrawn) {
        assert!(ticks.len() < 200, "not withdrawn:\n{}", leader.log());
        tick(&mut ticks, &both);
    }
    for _ in 0..8 {
        tick(&mut ticks, &both);
    }
    // The leader dies without releasing the Lease: the standby reports 0 until the lease
    // expires (15 s), then leads.
    leader.kill();
    let leader_killed = ticks.len();
    let standby_only = [(sa.as_str(), "replica-1")];
    let leads = |t: &Tick| {
        value_of(
            t,
            "leader_election_master_status",
            &[("instance", "replica-1")],
        ) == Some(1.0)
    };
    while !ticks.last().is_some_and(leads) {
        assert!(
            ticks.len() < leader_killed + 200,
            "the standby never took over:\n{}",
            standby.log()
        );
        tick(&mut ticks, &standby_only);
    }
    for _ in 0..4 {
        tick(&mut ticks, &standby_only);
    }
    // Every replica gone: scrapes fail.
    standby.kill();
    let all_down = ticks.len();
    for _ in 0..10 {
        tick(&mut ticks, &standby_only);
    }
    drop(up);
    drop(old);
    Recording {
        ticks,
        leader_killed,
        all_down,
    }
}

/// A series' identity: name and labels, in the exposition's syntax.
fn series_key(s: &crate::promtext::Sample) -> String {
    let labels: Vec<String> = s
        .labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{}{{{}}}", s.name, labels.join(","))
}

/// A number as promtool's series notation reads it.
fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// The recording as promtool input series: tick i at minute i. A series missing from a
/// tick after it was seen is `stale` (as Prometheus marks a failed scrape's series), then
/// absent. Unix timestamps become times on the test's clock (tick i is 60·i seconds), so
/// "expires in 7 days" stays 7 days.
fn input_series(r: &Recording) -> Vec<Value> {
    let mut values: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for (i, t) in r.ticks.iter().enumerate() {
        for s in &t.samples {
            let mut v = s.value;
            if s.name.ends_with("_timestamp_seconds") || s.name == "process_start_time_seconds" {
                v = v - t.at + 60.0 * i as f64;
            }
            let e = values
                .entry(series_key(s))
                .or_insert_with(|| vec![None; r.ticks.len()]);
            e[i] = Some(v);
        }
    }
    values
        .into_iter()
        .map(|(series, vals)| {
            let mut seen = false;
            let mut prev_some = false;
            let words: Vec<String> = vals
                .iter()
                .map(|v| {
                    let w = match v {
                        Some(v) => num(*v),
                        None if seen && prev_some => "stale".into(),
                        None => "_".into(),
                    };
                    seen |= v.is_some();
                    prev_some = v.is_some();
                    w
                })
                .collect();
            json!({"series": series, "values": words.join(" ")})
        })
        .collect()
}

/// The rules file, as data.
fn rules() -> Vec<Value> {
    let text = std::fs::read_to_string(chart_dir().join("files/alerts.yaml")).unwrap();
    let doc = &yaml_docs(&text, "alerts.yaml")[0];
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

/// An alert's annotations with `{{ $labels.X }}` filled in from `labels` (the only
/// template the rules' annotations may use, so the expected text is known exactly).
fn expected_annotations(rule: &Value, labels: &BTreeMap<&str, String>) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in rule["annotations"].as_object().unwrap() {
        let mut text = v.as_str().unwrap().to_string();
        while let Some(start) = text.find("{{") {
            let end = start + text[start..].find("}}").unwrap() + 2;
            let inner = text[start + 2..end - 2].trim();
            let label = inner.strip_prefix("$labels.").unwrap_or_else(|| {
                panic!(
                    "{}: annotation {k} uses {inner:?}: only $labels.NAME",
                    rule["alert"]
                )
            });
            text.replace_range(start..end, &labels[label]);
        }
        out.insert(k.clone(), json!(text));
    }
    Value::Object(out)
}

/// One promtool alert test: at minute `at`, alert `name` fires with exactly these label
/// sets (each with its severity), or none.
fn case(rules: &[Value], name: &str, at: usize, firing: &[&[(&str, &str)]]) -> Value {
    let rule = rules
        .iter()
        .find(|r| r["alert"] == name)
        .unwrap_or_else(|| panic!("no alert {name} in alerts.yaml"));
    let exp: Vec<Value> = firing
        .iter()
        .map(|labels| {
            let mut l: BTreeMap<&str, String> =
                labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
            l.insert(
                "severity",
                rule["labels"]["severity"].as_str().unwrap().to_string(),
            );
            let ann = expected_annotations(rule, &l);
            json!({"exp_labels": l, "exp_annotations": ann})
        })
        .collect();
    json!({"eval_time": format!("{at}m"), "alertname": name, "exp_alerts": exp})
}

fn first(r: &Recording, from: usize, what: &str, f: impl Fn(&Tick) -> bool) -> usize {
    r.ticks[from..]
        .iter()
        .position(f)
        .map(|i| i + from)
        .unwrap_or_else(|| panic!("the recording never shows {what}"))
}

/// Every alert fires in promtool on the recorded series, at the minute the run says it
/// should (and not before its `for`), with its labels and annotations.
#[test]
fn every_alert_has_a_passing_promtool_test_on_series_recorded_from_the_binary() {
    let r = recording();
    let rules = rules();
    let s = Scratch::new("monitoring-promtool");
    let rules_file = chart_dir().join("files/alerts.yaml");
    let rules_path = rules_file.to_str().unwrap();
    promtool(&s.0, &["check", "rules", rules_path]).expect_ok("promtool check rules");

    let leader = [("instance", "replica-0")];
    // The dying backend: unavailable (with kube-aggregator's reason), then withdrawn.
    let down = first(r, 0, "v1.dies unavailable", |t| {
        value_of(
            t,
            "autoregister_apiservice_available",
            &[("apiservice", DIES), leader[0]],
        ) == Some(0.0)
    });
    let (reason, cause) = r.ticks[down]
        .samples
        .iter()
        .find(|x| {
            x.name == "autoregister_apiservice_availability_info"
                && x.labels["apiservice"] == DIES
                && x.labels["status"] == "False"
        })
        .map(|x| (x.labels["reason"].clone(), x.labels["cause"].clone()))
        .expect("availability_info names the reason and the cause");
    let gone = first(r, down, "v1.dies withdrawn", |t| {
        value_of(
            t,
            "autoregister_apiservice_withdrawn",
            &[("apiservice", DIES), leader[0]],
        ) == Some(1.0)
    });
    assert!(
        gone - down >= 12,
        "unavailable for {} ticks only: the recording is too short for the 10m alert",
        gone - down
    );
    let errors = first(r, 0, "a failed sync", |t| {
        t.samples.iter().any(|x| {
            x.name == "autoregister_syncs_total" && x.labels["result"] == "error" && x.value > 0.0
        })
    });
    let ca = first(r, 0, "the CA expiry", |t| {
        value_of(
            t,
            "autoregister_ca_bundle_expiry_timestamp_seconds",
            &[("apiservice", UP)],
        )
        .is_some()
    });
    let standby_leads = first(r, r.leader_killed, "the standby leading", |t| {
        value_of(
            t,
            "leader_election_master_status",
            &[("instance", "replica-1")],
        ) == Some(1.0)
    });
    assert!(
        standby_leads - r.leader_killed >= 7,
        "no leader for {} ticks only",
        standby_leads - r.leader_killed
    );
    assert!(r.ticks.len() - r.all_down >= 7);

    let unavailable = [
        ("apiservice", DIES),
        ("reason", reason.as_str()),
        ("cause", cause.as_str()),
    ];
    let tests = vec![
        case(&rules, "AutoregisterAPIServiceUnavailable", down + 5, &[]),
        case(
            &rules,
            "AutoregisterAPIServiceUnavailable",
            down + 11,
            &[&unavailable],
        ),
        case(&rules, "AutoregisterAPIServiceWithdrawn", gone, &[]),
        case(
            &rules,
            "AutoregisterAPIServiceWithdrawn",
            gone + 2,
            &[&[("apiservice", DIES)]],
        ),
        case(
            &rules,
            "AutoregisterCABundleExpiringSoon",
            ca + 11,
            &[&[("apiservice", UP)]],
        ),
        case(
            &rules,
            "AutoregisterCABundleExpired",
            ca + 2,
            &[&[("apiservice", OLD)]],
        ),
        // The refused name is retried 5 ms, 10 ms, … apart (one tick is 250 ms): its
        // counter grows in the ticks after the first error, so the condition holds from a
        // tick or two later, and the 15m are up by +20.
        case(&rules, "AutoregisterSyncsFailing", errors + 5, &[]),
        case(&rules, "AutoregisterSyncsFailing", errors + 20, &[&[]]),
        case(&rules, "AutoregisterNoLeader", r.leader_killed + 2, &[]),
        case(
            &rules,
            "AutoregisterNoLeader",
            r.leader_killed + 6,
            &[&[("name", "autoregister")]],
        ),
        case(&rules, "AutoregisterNoLeader", standby_leads + 1, &[]),
        case(&rules, "AutoregisterDown", r.all_down - 1, &[]),
        case(&rules, "AutoregisterDown", r.all_down + 7, &[&[]]),
    ];
    // Every alert of the rules has a case that fires.
    let tested: BTreeSet<&str> = tests
        .iter()
        .filter(|t| !t["exp_alerts"].as_array().unwrap().is_empty())
        .map(|t| t["alertname"].as_str().unwrap())
        .collect();
    let all: BTreeSet<&str> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
    assert_eq!(tested, all, "an alert without a firing test");

    let file = json!({
        "rule_files": [rules_path],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": input_series(r),
            "alert_rule_test": tests,
        }],
    });
    let test_path = s.path("alerts_test.yaml");
    std::fs::write(&test_path, serde_yaml_ng::to_string(&file).unwrap()).unwrap();
    let ran = promtool(&s.0, &["test", "rules", test_path.to_str().unwrap()]);
    if !ran.ok {
        // Kept for the reader: the recorded series and the cases.
        std::mem::forget(s);
        panic!(
            "promtool test rules failed (series and cases in {}):\n{}{}",
            test_path.display(),
            ran.stdout,
            ran.stderr
        );
    }
}

/// The metric names a PromQL expression reads: its identifiers, less functions, keywords,
/// label matchers, grouping labels, range durations and Grafana's `$variables`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut text = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut in_string = false;
    for c in expr.chars() {
        match c {
            '"' if depth_brace > 0 || in_string => in_string = !in_string,
            _ if in_string => {}
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace > 0 || depth_bracket > 0 => {}
            _ => text.push(c),
        }
    }
    // Grouping lists name labels, not metrics.
    for kw in [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ] {
        while let Some(i) = find_word_then_paren(&text, kw) {
            let open = i + text[i..].find('(').unwrap();
            let close = open + text[open..].find(')').unwrap();
            text.replace_range(i..=close, " ");
        }
    }
    let keywords = ["and", "or", "unless", "bool", "offset"];
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '$' || c == '.' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b"_:$.".contains(&b[i]))
            {
                i += 1;
            }
            let word = &text[start..i];
            let next = text[i..].trim_start().chars().next();
            let first = word.chars().next().unwrap();
            if next != Some('(')
                && !first.is_ascii_digit()
                && first != '$'
                && first != '.'
                && !keywords.contains(&word)
            {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Where keyword `kw` stands as a word followed by `(`.
fn find_word_then_paren(text: &str, kw: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = text[from..].find(kw) {
        let i = from + p;
        let before = text[..i].chars().last();
        let after = &text[i + kw.len()..];
        let word_start = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if word_start && after.trim_start().starts_with('(') {
            return Some(i);
        }
        from = i + kw.len();
    }
    None
}

#[test]
fn metric_names_reads_only_metrics() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, verb) (rate(a_bucket{job=~"$job", x="by (y)"}[$__rate_interval]))) - on (apiservice) group_left (reason) b == bool 0 and time() < 14 * 86400"#,
    );
    assert_eq!(
        names,
        BTreeSet::from(["a_bucket".to_string(), "b".to_string()])
    );
}

/// The dashboard as data.
fn dashboard() -> Value {
    let text = std::fs::read_to_string(chart_dir().join("files/dashboard.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every metric name the rules and the dashboard read is one the binary exports: a sample
/// name of the recorded scrapes (histograms by their `_bucket`, `_sum`, `_count`).
#[test]
fn the_rules_and_the_dashboard_use_only_metric_names_the_binary_exports() {
    let r = recording();
    let exported: BTreeSet<&str> = r
        .ticks
        .iter()
        .flat_map(|t| t.samples.iter().map(|s| s.name.as_str()))
        .collect();
    let mut used: BTreeMap<String, String> = BTreeMap::new();
    for rule in rules() {
        for n in metric_names(rule["expr"].as_str().unwrap()) {
            used.insert(n, format!("alert {}", rule["alert"]));
        }
    }
    let d = dashboard();
    let mut panels = 0;
    for p in d["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            continue;
        }
        panels += 1;
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "panel {}: the data source is the variable",
            p["title"]
        );
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {}", p["title"]);
        for t in targets {
            for n in metric_names(t["expr"].as_str().unwrap()) {
                used.insert(n, format!("panel {}", p["title"]));
            }
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(def) = v["definition"].as_str() {
            let inner = def
                .strip_prefix("label_values(")
                .and_then(|d| d.split(',').next())
                .unwrap();
            used.insert(inner.trim().to_string(), format!("variable {}", v["name"]));
        }
    }
    assert!(panels >= 10, "{panels} panels");
    let unknown: Vec<String> = used
        .iter()
        .filter(|(n, _)| !exported.contains(n.as_str()))
        .map(|(n, w)| format!("{n} ({w})"))
        .collect();
    assert!(
        unknown.is_empty(),
        "not exported by the binary: {unknown:?}\nexported: {exported:?}"
    );
    // What operators look for is on the dashboard.
    for metric in [
        "autoregister_apiservice_available",
        "autoregister_syncs_total",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "rest_client_request_duration_seconds_bucket",
        "rest_client_requests_total",
        "autoregister_ca_bundle_expiry_timestamp_seconds",
        "leader_election_master_status",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(
            used.contains_key(metric),
            "the dashboard does not show {metric}"
        );
    }
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(vars.contains(&"datasource"), "{vars:?}");
}

/// Every alert says how bad (severity), what and why (summary, description) and where to
/// read what to do: a `runbook_url` whose section exists in docs/running.md.
#[test]
fn every_alert_has_a_severity_and_a_runbook_section_in_the_docs() {
    let doc = crate::markdown::load(&repo(), std::path::Path::new("docs/running.md"));
    let anchors: BTreeSet<String> = doc.headings().into_iter().map(|(_, _, a)| a).collect();
    for rule in rules() {
        let name = rule["alert"].as_str().unwrap();
        assert!(
            ["warning", "critical"].contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
            "{name}"
        );
        for a in ["summary", "description", "runbook_url"] {
            assert!(rule["annotations"][a].is_string(), "{name}: {a}");
        }
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url
            .strip_prefix("docs/running.md#")
            .unwrap_or_else(|| panic!("{name}: {url}"));
        assert!(
            anchors.contains(anchor),
            "{name}: docs/running.md has no section #{anchor}"
        );
    }
}
