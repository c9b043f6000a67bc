//! The test API server's kube-apiserver mode and its managedFields, over HTTP as clients see them.
#![cfg(feature = "testing")]

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use autoregister::testserver::{builtin_apiservices, RvChange, TestServer, KUBE_APISERVER_MANAGER};
use serde_json::{json, Value};

const LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
const PATH: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

fn kas() -> TestServer {
    TestServer::builder().kube_apiserver(true).start().unwrap()
}

/// One raw request with a User-Agent; answers (code, JSON body).
fn http(s: &TestServer, method: &str, path: &str, ua: &str, body: &Value) -> (u16, Value) {
    let mut c = std::net::TcpStream::connect(s.addr()).unwrap();
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let ctype = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nUser-Agent: {ua}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(rest).unwrap_or(Value::Null))
}

fn apiservice(name: &str, group: &str, label: Option<(&str, &str)>) -> Value {
    let mut o = json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10},
    });
    if let Some((k, v)) = label {
        o["metadata"]["labels"] = json!({k: v});
    }
    o
}

fn create(s: &TestServer, obj: &Value) -> Value {
    let (code, body) = http(s, "POST", PATH, "test/1", obj);
    assert_eq!(code, 201, "{body}");
    body
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap().to_string()
}

fn get(s: &TestServer, name: &str) -> Option<Value> {
    s.get_object("apiservices", None, name)
}

/// Polls `cond` every 2 ms; panics after a generous deadline. Returns how long it took.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    start.elapsed()
}

/// A synchronisation point: a foreign `true` object created now is deleted only after
/// kube-apiserver's controller made a pass over everything before it.
fn settle(s: &TestServer) {
    let probe = format!("v1.probe-{}.example.com", s.resource_version());
    let group = probe.trim_start_matches("v1.").to_string();
    create(s, &apiservice(&probe, &group, Some((LABEL, "true"))));
    wait_until("the probe's deletion", || get(s, &probe).is_none());
}

#[test]
fn builtins_are_seeded_as_a_real_kube_apiserver_registers_them() {
    let s = kas();
    let (code, list) = http(&s, "GET", PATH, "test/1", &Value::Null);
    assert_eq!(code, 200);
    let items = list["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, builtin_apiservices());
    assert_eq!(names.len(), 21);
    for want in [
        "v1.",
        "v1.apps",
        "v2.autoscaling",
        "v1.rbac.authorization.k8s.io",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for o in items {
        let name = o["metadata"]["name"].as_str().unwrap();
        assert_eq!(o["metadata"]["labels"], json!({LABEL: "onstart"}), "{name}");
        assert!(o["spec"].get("service").is_none(), "{name} is local");
        let (group, version) = (
            o["spec"]["group"].as_str().unwrap(),
            o["spec"]["version"].as_str().unwrap(),
        );
        assert_eq!(format!("{version}.{group}"), name);
        let conds = o["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["type"], "Available", "{name}");
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[0]["reason"], "Local");
        let managers: Vec<&str> = o["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(
            managers,
            [KUBE_APISERVER_MANAGER, KUBE_APISERVER_MANAGER],
            "spec and status"
        );
    }
    let core = &items[0]["spec"];
    assert_eq!(
        (
            core["group"].clone(),
            core["groupPriorityMinimum"].clone(),
            core["versionPriority"].clone()
        ),
        (json!(""), json!(18000), json!(1))
    );
    let apps = get(&s, "v1.apps").unwrap();
    assert_eq!(apps["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(
        get(&s, "v2.autoscaling").unwrap()["spec"]["versionPriority"],
        30
    );
    // Its writes are not client requests.
    assert!(s.requests().iter().all(|r| r.verb != "create"));
    assert_eq!(
        s.kube_apiserver_writes()
            .iter()
            .filter(|w| w.verb == "create")
            .count(),
        21
    );
}

#[test]
fn a_foreign_automanaged_true_object_is_deleted_at_once() {
    let s = kas();
    let created = create(
        &s,
        &apiservice(
            "v1.intruder.example.com",
            "intruder.example.com",
            Some((LABEL, "true")),
        ),
    );
    let took = wait_until("6A delete", || get(&s, "v1.intruder.example.com").is_none());
    eprintln!("foreign automanaged=true object deleted after {took:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let w = s.kube_apiserver_writes();
    let del = w.iter().find(|w| w.verb == "delete").unwrap();
    assert_eq!(
        (del.name.as_str(), del.cell.as_str(), del.code),
        ("v1.intruder.example.com", "6A", 200)
    );
    // Recreated by someone else: deleted again, every time (no once rule for 6A).
    let again = create(
        &s,
        &apiservice(
            "v1.intruder.example.com",
            "intruder.example.com",
            Some((LABEL, "true")),
        ),
    );
    assert_ne!(uid(&again), uid(&created));
    wait_until("second 6A delete", || {
        get(&s, "v1.intruder.example.com").is_none()
    });
}

#[test]
fn a_deleted_or_edited_builtin_stays_so_until_restart_reseeds_it() {
    let s = kas();
    let before = get(&s, "v1.apps").unwrap();
    let (code, _) = http(
        &s,
        "DELETE",
        &format!("{PATH}/v1.apps"),
        "intruder/1",
        &Value::Null,
    );
    assert_eq!(code, 200);
    let (code, _) = http(
        &s,
        "PATCH",
        &format!("{PATH}/v1.batch"),
        "intruder/1",
        &json!({"spec": {"groupPriorityMinimum": 5}}),
    );
    assert_eq!(code, 200);
    settle(&s);
    assert!(
        get(&s, "v1.apps").is_none(),
        "once rule: a deleted built-in is not recreated"
    );
    assert_eq!(
        get(&s, "v1.batch").unwrap()["spec"]["groupPriorityMinimum"],
        5,
        "nor restored"
    );

    s.restart(RvChange::Keep);
    let after = get(&s, "v1.apps").expect("a restart registers the built-ins again");
    assert_ne!(uid(&after), uid(&before));
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(after["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        get(&s, "v1.batch").unwrap()["spec"]["groupPriorityMinimum"],
        17400,
        "5B update once"
    );
}

#[test]
fn crd_group_apiservices_are_kept_registered_and_their_spec_restored() {
    let s = TestServer::builder()
        .kube_apiserver(true)
        .kube_apiserver_crd_group("widgets.example.com", "v1")
        .start()
        .unwrap();
    let name = "v1.widgets.example.com";
    let first = get(&s, name).expect("registered at start");
    assert_eq!(first["metadata"]["labels"], json!({LABEL: "true"}));
    assert_eq!(first["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(first["spec"]["versionPriority"], 100);

    let (code, _) = http(
        &s,
        "DELETE",
        &format!("{PATH}/{name}"),
        "intruder/1",
        &Value::Null,
    );
    assert_eq!(code, 200);
    wait_until("2C recreate", || {
        get(&s, name).is_some_and(|o| uid(&o) != uid(&first))
    });

    let (code, _) = http(
        &s,
        "PATCH",
        &format!("{PATH}/{name}"),
        "intruder/1",
        &json!({"spec": {"versionPriority": 1}}),
    );
    assert_eq!(code, 200);
    wait_until("6C restore", || {
        get(&s, name).is_some_and(|o| o["spec"]["versionPriority"] == 100)
    });

    s.remove_crd_group("widgets.example.com", "v1");
    assert!(get(&s, name).is_none(), "6A once the CRD group is gone");
    s.add_crd_group("gadgets.example.com", "v2");
    assert!(
        get(&s, "v2.gadgets.example.com").is_some(),
        "2C for a new CRD group"
    );
}

#[test]
fn objects_it_does_not_own_are_untouched_and_foreign_onstart_goes_only_at_its_start() {
    let s = kas();
    let plain = create(
        &s,
        &apiservice("v1.plain.example.com", "plain.example.com", None),
    );
    let other = create(
        &s,
        &apiservice(
            "v1.other.example.com",
            "other.example.com",
            Some(("autoregister.dev/automanaged", "true")),
        ),
    );
    let onstart = create(
        &s,
        &apiservice(
            "v1.late.example.com",
            "late.example.com",
            Some((LABEL, "onstart")),
        ),
    );
    settle(&s);
    for o in [&plain, &other, &onstart] {
        let name = o["metadata"]["name"].as_str().unwrap();
        let now = get(&s, name).unwrap_or_else(|| panic!("{name} was deleted"));
        assert_eq!(
            now["metadata"]["resourceVersion"], o["metadata"]["resourceVersion"],
            "{name} was written"
        );
    }
    assert!(s
        .kube_apiserver_writes()
        .iter()
        .all(|w| !w.name.contains("plain")
            && !w.name.contains("other")
            && !w.name.contains("late")));

    // A restarted kube-apiserver deletes the onstart object present at its start (5A), once.
    s.restart(RvChange::Keep);
    assert!(get(&s, "v1.late.example.com").is_none(), "5A at start");
    let del = s
        .kube_apiserver_writes()
        .into_iter()
        .find(|w| w.name == "v1.late.example.com")
        .unwrap();
    assert_eq!((del.verb.as_str(), del.cell.as_str()), ("delete", "5A"));
    create(
        &s,
        &apiservice(
            "v1.late.example.com",
            "late.example.com",
            Some((LABEL, "onstart")),
        ),
    );
    settle(&s);
    assert!(
        get(&s, "v1.late.example.com").is_some(),
        "not present at start: 4A, left alone"
    );
    assert!(get(&s, "v1.plain.example.com").is_some() && get(&s, "v1.other.example.com").is_some());
}

#[test]
fn without_the_mode_nothing_is_seeded_and_crd_groups_are_refused() {
    let s = TestServer::start();
    assert!(s.list_objects("apiservices", None).is_empty());
    assert!(s.kube_apiserver_writes().is_empty());
    create(
        &s,
        &apiservice("v1.x.example.com", "x.example.com", Some((LABEL, "true"))),
    );
    assert!(get(&s, "v1.x.example.com").is_some());
    let err = TestServer::builder()
        .kube_apiserver_crd_group("a.example.com", "v1")
        .start()
        .err()
        .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

// ---------- managedFields (every mode) ----------

fn entries(o: &Value) -> Vec<(String, String)> {
    o["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e.get("subresource")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn managed_fields_name_the_field_manager_or_the_user_agent_one_entry_each() {
    let s = TestServer::start();
    let (code, o) = http(
        &s,
        "POST",
        PATH,
        "mytool/1.2.3 (linux/amd64) abc",
        &apiservice("v1.a.example.com", "a.example.com", None),
    );
    assert_eq!(code, 201);
    let e = &o["metadata"]["managedFields"][0];
    assert_eq!(e["manager"], "mytool");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "apiregistration.k8s.io/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["fieldsV1"]["f:spec"]["f:group"], json!({}));
    let t = e["time"].as_str().unwrap();
    assert!(
        t.len() == 20 && t.ends_with('Z') && autoregister::api::time::parse_rfc3339(t).is_some(),
        "{t}"
    );

    let item = format!("{PATH}/v1.a.example.com");
    let (code, o) = http(
        &s,
        "PATCH",
        &format!("{item}?fieldManager=other"),
        "mytool/1",
        &json!({"spec": {"versionPriority": 20}}),
    );
    assert_eq!(code, 200);
    assert_eq!(
        entries(&o),
        [("mytool".into(), "".into()), ("other".into(), "".into())]
    );
    assert_eq!(
        o["metadata"]["managedFields"][1]["fieldsV1"],
        json!({"f:spec": {"f:versionPriority": {}}})
    );
    assert!(
        o["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
            .get("f:versionPriority")
            .is_none(),
        "moved to its new owner"
    );

    // The same manager again: its entry is updated, not added.
    let mut put = o.clone();
    put["spec"]["versionPriority"] = json!(21);
    let (code, o) = http(&s, "PUT", &format!("{item}?fieldManager=other"), "x", &put);
    assert_eq!(code, 200);
    assert_eq!(
        entries(&o),
        [("mytool".into(), "".into()), ("other".into(), "".into())]
    );
    // A no-op write is no write: same resourceVersion, same entries.
    let (_, same) = http(&s, "PUT", &format!("{item}?fieldManager=third"), "x", &o);
    assert_eq!(
        same["metadata"]["resourceVersion"],
        o["metadata"]["resourceVersion"]
    );
    assert_eq!(entries(&same), entries(&o));

    // Status has its own entry; a body's empty managedFields strips them all.
    let mut st = o.clone();
    st["status"] = json!({"conditions": [{"type": "Available", "status": "False", "reason": "X"}]});
    let (code, o) = http(&s, "PUT", &format!("{item}/status"), "statuswriter/1", &st);
    assert_eq!(code, 200);
    assert_eq!(entries(&o)[2], ("statuswriter".into(), "status".into()));
    let mut reset = o.clone();
    reset["metadata"]["managedFields"] = json!([]);
    reset["spec"]["versionPriority"] = json!(22);
    let (code, o) = http(&s, "PUT", &item, "x", &reset);
    assert_eq!(code, 200);
    assert!(o["metadata"].get("managedFields").is_none(), "{o}");
}

#[test]
fn a_field_manager_over_128_bytes_is_refused_as_the_real_server_does() {
    let s = TestServer::start();
    let long = "m".repeat(129);
    let (code, status) = http(
        &s,
        "POST",
        &format!("{PATH}?fieldManager={long}"),
        "x",
        &apiservice("v1.a.example.com", "a.example.com", None),
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "CreateOptions");
    assert_eq!(status["details"]["causes"][0]["field"], "fieldManager");
    assert!(get(&s, "v1.a.example.com").is_none());
    let ok = "m".repeat(128);
    let (code, o) = http(
        &s,
        "POST",
        &format!("{PATH}?fieldManager={ok}"),
        "x",
        &apiservice("v1.a.example.com", "a.example.com", None),
    );
    assert_eq!(code, 201);
    assert_eq!(o["metadata"]["managedFields"][0]["manager"], ok);
    let (code, status) = http(
        &s,
        "PATCH",
        &format!("{PATH}/v1.a.example.com?fieldManager={long}"),
        "x",
        &json!({}),
    );
    assert_eq!(
        (code, status["details"]["kind"].as_str()),
        (422, Some("PatchOptions"))
    );
}

#[test]
fn request_log_keeps_user_agent_field_manager_and_uid_precondition() {
    let s = TestServer::start();
    let o = create(&s, &apiservice("v1.a.example.com", "a.example.com", None));
    http(
        &s,
        "PATCH",
        &format!("{PATH}/v1.a.example.com?fieldManager=fm"),
        "ua/2",
        &json!({"metadata": {"annotations": {"a": "b"}}}),
    );
    let pre = json!({"preconditions": {"uid": uid(&o)}});
    http(
        &s,
        "DELETE",
        &format!("{PATH}/v1.a.example.com"),
        "ua/3",
        &pre,
    );
    let recs = s.requests();
    type Row<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let got: Vec<Row> = recs
        .iter()
        .map(|r| {
            (
                r.verb.as_str(),
                r.user_agent.as_deref(),
                r.field_manager.as_deref(),
                r.uid_precondition.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("create", Some("test/1"), None, None),
            ("patch", Some("ua/2"), Some("fm"), None),
            ("delete", Some("ua/3"), None, Some(uid(&o).as_str())),
        ]
    );
    assert_eq!(recs[1].query, "fieldManager=fm");
}

#[test]
fn another_writer_in_process_goes_through_the_api_code_paths() {
    let s = kas();
    let before = get(&s, "v1.apps").unwrap();
    let after = s
        .update_object_as("other-controller", "apiservices", None, "v1.apps", |o| {
            o["metadata"]["labels"]["team"] = json!("x");
        })
        .unwrap();
    assert_ne!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert!(entries(&after).contains(&("other-controller".into(), "".into())));
    // Validation applies as to any request.
    let err = s
        .update_object_as("other-controller", "apiservices", None, "v1.apps", |o| {
            o["spec"]["versionPriority"] = json!(0);
        })
        .unwrap_err();
    assert_eq!(err.code, Some(422));
    // A create through it is seen by kube-apiserver's rules like any other.
    s.create_object_as(
        "other-controller",
        "apiservices",
        None,
        apiservice("v1.b.example.com", "b.example.com", Some((LABEL, "true"))),
    )
    .unwrap();
    wait_until("6A of an in-process create", || {
        get(&s, "v1.b.example.com").is_none()
    });
}

#[test]
fn its_writes_are_seen_by_watches_like_any_other() {
    use autoregister::api::{APIService, Resource, WatchEvent};
    use autoregister::client::{Api, Canceller, Client, WatchParams};
    let s = kas();
    let a: Api<APIService> = Api::all(Client::new(s.client_config()).unwrap());
    let w = a
        .watch(
            &WatchParams {
                resource_version: s.resource_version().to_string(),
                timeout_seconds: 10,
                allow_bookmarks: false,
                label_selector: None,
                ..Default::default()
            },
            &Canceller::new(),
        )
        .unwrap();
    create(
        &s,
        &apiservice("v1.w.example.com", "w.example.com", Some((LABEL, "true"))),
    );
    let mut seen = Vec::new();
    for ev in w {
        match ev.unwrap() {
            WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.name())),
            WatchEvent::Deleted(o) => {
                seen.push(format!("DELETED {}", o.name()));
                break;
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["ADDED v1.w.example.com", "DELETED v1.w.example.com"]);
}
