//! The REST client core against real loopback HTTP servers: verbs, errors, transport
//! failures, watch streams and connection reuse.

#[path = "support/scripted.rs"]
mod scripted;

use std::sync::mpsc;
use std::time::Duration;

use autoregister::api::{APIService, ObjectList, Resource, WatchEvent};
use autoregister::client::{
    Api, Canceller, Client, Config, DeleteParams, Error, ListParams, WatchParams, WatchStream,
    USER_AGENT,
};
use scripted::{status_json, Answer, Request, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(5);
const COLLECTION: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

fn client_for(server: &Server) -> Client {
    let mut cfg = Config::new(server.url());
    cfg.qps = 0.0;
    cfg.timeout = Duration::from_secs(5);
    Client::new(cfg).unwrap()
}

fn api(server: &Server) -> Api<APIService> {
    Api::all(client_for(server))
}

fn apiservice_json(name: &str, rv: &str) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": name,
            "uid": format!("uid-{name}"),
            "resourceVersion": rv,
            "labels": {"kube-aggregator.kubernetes.io/automanaged": "true"},
        },
        "spec": {
            "group": "example.com",
            "version": "v1",
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
            "service": {"namespace": "ns", "name": "svc", "port": 443},
        },
    })
}

fn apiservice(name: &str, rv: &str) -> APIService {
    serde_json::from_value(apiservice_json(name, rv)).unwrap()
}

/// The headers every request must carry.
fn assert_common_headers(r: &Request) {
    // A program embedding the library (this test) is named before autoregister's token.
    let program = std::env::current_exe().unwrap();
    let program = program.file_stem().unwrap().to_str().unwrap();
    assert_eq!(
        r.header("user-agent"),
        Some(format!("{program} {USER_AGENT}").as_str()),
        "{r:?}"
    );
    assert!(USER_AGENT.starts_with("autoregister/"));
    assert_eq!(r.header_count("accept"), 1, "{r:?}");
    assert_eq!(r.header("accept"), Some("application/json"));
}

fn assert_json_body_headers(r: &Request) {
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    assert_eq!(
        r.header("content-length")
            .map(|v| v.parse::<usize>().unwrap()),
        Some(r.body.len())
    );
}

fn only_request(server: &Server) -> Request {
    let seen = server.wait_for_requests(1, WAIT);
    assert_eq!(seen.len(), 1, "{seen:?}");
    seen.into_iter().next().unwrap()
}

// ---------------------------------------------------------------- verbs

#[test]
fn get_reads_one_object_from_its_path() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("v1.example.com", "7")));
    let got = api(&server).get("v1.example.com").unwrap();
    assert_eq!(got, apiservice("v1.example.com", "7"));

    let r = only_request(&server);
    assert_eq!(r.method, "GET");
    assert_eq!(r.target, format!("{COLLECTION}/v1.example.com"));
    assert_common_headers(&r);
    assert!(r.body.is_empty());
    assert_eq!(r.header("content-type"), None, "a GET has no body to type");
    assert_eq!(r.header("content-length"), None, "a GET has no body at all");
    assert_eq!(r.header("transfer-encoding"), None);
}

#[test]
fn list_sends_its_parameters_and_decodes_items_and_list_meta() {
    let server = Server::start();
    server.push(Answer::json(
        200,
        &json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIServiceList",
            "metadata": {"resourceVersion": "42"},
            "items": [apiservice_json("a", "1"), apiservice_json("b", "2")],
        }),
    ));
    let page = api(&server)
        .list(&ListParams {
            limit: Some(500),
            resource_version: Some("0".into()),
            label_selector: Some("kube-aggregator.kubernetes.io/automanaged".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(page.metadata.continue_, None);
    let names: Vec<_> = page.items.iter().map(|o| o.name().to_string()).collect();
    assert_eq!(names, ["a", "b"]);

    let r = only_request(&server);
    assert_eq!(r.method, "GET");
    assert_eq!(r.path(), COLLECTION);
    assert_eq!(r.query("limit").as_deref(), Some("500"));
    assert_eq!(r.query("resourceVersion").as_deref(), Some("0"));
    assert_eq!(
        r.query("labelSelector").as_deref(),
        Some("kube-aggregator.kubernetes.io/automanaged")
    );
    assert_eq!(r.query("continue"), None);
    // The selector's '/' is percent-encoded on the wire.
    assert!(r
        .query_string()
        .contains("labelSelector=kube-aggregator.kubernetes.io%2Fautomanaged"));
    assert_common_headers(&r);
}

#[test]
fn create_posts_the_object_to_the_collection() {
    let server = Server::start();
    let mut stored = apiservice_json("v1.example.com", "9");
    stored["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    server.push(Answer::json(201, &stored));

    let mut obj = apiservice("v1.example.com", "");
    obj.metadata.resource_version = None;
    obj.metadata.uid = None;
    let created = api(&server).create(&obj).unwrap();
    assert_eq!(created.metadata.resource_version.as_deref(), Some("9"));
    assert_eq!(
        created.metadata.creation_timestamp.as_deref(),
        Some("2024-01-01T00:00:00Z")
    );

    let r = only_request(&server);
    assert_eq!(r.method, "POST");
    // Strict field validation: an unknown field is refused, never silently dropped.
    assert_eq!(r.target, format!("{COLLECTION}?fieldValidation=Strict"));
    assert_common_headers(&r);
    assert_json_body_headers(&r);
    assert_eq!(r.json(), serde_json::to_value(&obj).unwrap());
    assert_eq!(r.json()["metadata"]["name"], "v1.example.com");
}

#[test]
fn update_puts_to_the_object_path_with_its_resource_version() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("v1.example.com", "11")));
    let mut obj = apiservice("v1.example.com", "10");
    obj.spec.version_priority = 20;
    let updated = api(&server).update(&obj).unwrap();
    assert_eq!(updated.metadata.resource_version.as_deref(), Some("11"));

    let r = only_request(&server);
    assert_eq!(r.method, "PUT");
    assert_eq!(
        r.target,
        format!("{COLLECTION}/v1.example.com?fieldValidation=Strict")
    );
    assert_common_headers(&r);
    assert_json_body_headers(&r);
    let body = r.json();
    assert_eq!(body["metadata"]["resourceVersion"], "10");
    assert_eq!(body["spec"]["versionPriority"], 20);
    assert_eq!(body, serde_json::to_value(&obj).unwrap());
}

#[test]
fn delete_sends_delete_options_with_uid_and_resource_version_preconditions() {
    let server = Server::start();
    server.push(Answer::json(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    ));
    api(&server)
        .delete(
            "v1.example.com",
            &DeleteParams {
                uid: Some("uid-1".into()),
                resource_version: Some("5".into()),
            },
        )
        .unwrap();

    let r = only_request(&server);
    assert_eq!(r.method, "DELETE");
    assert_eq!(r.target, format!("{COLLECTION}/v1.example.com"));
    assert_common_headers(&r);
    assert_json_body_headers(&r);
    assert_eq!(
        r.json(),
        json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": "uid-1", "resourceVersion": "5"},
        })
    );
}

#[test]
fn delete_without_preconditions_sends_bare_delete_options() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("x", "1")));
    api(&server).delete("x", &DeleteParams::default()).unwrap();
    let r = only_request(&server);
    assert_eq!(
        r.json(),
        json!({"apiVersion": "v1", "kind": "DeleteOptions"})
    );
}

#[test]
fn object_names_are_percent_encoded_and_path_tricks_rejected() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("a b", "1")));
    api(&server).get("a b").unwrap();
    assert_eq!(only_request(&server).target, format!("{COLLECTION}/a%20b"));
    for bad in ["", "..", ".", "a/b"] {
        let e = api(&server).get(bad).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{bad:?}: {e:?}");
    }
    assert_eq!(
        server.requests().len(),
        1,
        "rejected names never reach the server"
    );
}

#[test]
fn watch_query_has_watch_resource_version_bookmarks_and_timeout() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let params = WatchParams {
        resource_version: "123".into(),
        timeout_seconds: 317,
        allow_bookmarks: true,
        label_selector: None,
        ..Default::default()
    };
    let mut stream = api(&server).watch(&params, &Canceller::new()).unwrap();
    feed.end();
    assert!(stream.next().is_none());

    let r = only_request(&server);
    assert_eq!(r.method, "GET");
    assert_eq!(r.path(), COLLECTION);
    assert_eq!(r.query("watch").as_deref(), Some("true"));
    assert_eq!(r.query("resourceVersion").as_deref(), Some("123"));
    assert_eq!(r.query("allowWatchBookmarks").as_deref(), Some("true"));
    assert_eq!(r.query("timeoutSeconds").as_deref(), Some("317"));
    assert_common_headers(&r);
}

// ---------------------------------------------------------------- pagination

#[test]
fn list_pages_through_continue_tokens_until_the_last_page() {
    let server = Server::with_handler(|r| {
        let page = |items: Vec<Value>, cont: Option<&str>| {
            let mut meta = json!({"resourceVersion": "77"});
            if let Some(c) = cont {
                meta["continue"] = json!(c);
            }
            Answer::json(
                200,
                &json!({"kind": "APIServiceList", "metadata": meta, "items": items}),
            )
        };
        assert_eq!(r.query("limit").as_deref(), Some("2"));
        match r.query("continue").as_deref() {
            None => page(
                vec![apiservice_json("a", "1"), apiservice_json("b", "2")],
                Some("tok/1="),
            ),
            Some("tok/1=") => page(
                vec![apiservice_json("c", "3"), apiservice_json("d", "4")],
                Some("tok2"),
            ),
            Some("tok2") => page(vec![apiservice_json("e", "5")], Some("")),
            Some(other) => Answer::status(410, "Expired", &format!("bad token {other}")),
        }
    });
    let api = api(&server);
    let mut params = ListParams {
        limit: Some(2),
        ..Default::default()
    };
    let mut names = Vec::new();
    let mut pages = 0;
    loop {
        let page: ObjectList<APIService> = api.list(&params).unwrap();
        pages += 1;
        names.extend(page.items.iter().map(|o| o.name().to_string()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => params.continue_token = Some(c),
            None => break,
        }
        assert!(pages < 10, "pagination does not terminate");
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    let seen = server.requests();
    assert_eq!(seen.len(), 3);
    // The token travels percent-encoded and arrives intact.
    assert!(
        seen[1].query_string().contains("continue=tok%2F1%3D"),
        "{:?}",
        seen[1]
    );
}

// ---------------------------------------------------------------- API errors

fn get_err(answer: Answer) -> (Error, Server) {
    let server = Server::start();
    server.push(answer);
    let e = api(&server).get("v1.example.com").unwrap_err();
    (e, server)
}

#[test]
fn not_found_404_status_is_not_found() {
    let (e, _s) = get_err(Answer::status(
        404,
        "NotFound",
        "apiservices \"x\" not found",
    ));
    assert!(e.is_not_found(), "{e:?}");
    assert!(!e.is_conflict() && !e.is_gone() && !e.is_server_error());
    let api = e.as_api().unwrap();
    assert_eq!(api.code, 404);
    assert_eq!(api.message(), "apiservices \"x\" not found");
    assert_eq!(e.to_string(), "NotFound (404): apiservices \"x\" not found");
}

#[test]
fn already_exists_409_is_already_exists_not_conflict() {
    let server = Server::start();
    server.push(Answer::status(
        409,
        "AlreadyExists",
        "apiservices \"x\" already exists",
    ));
    let e = api(&server).create(&apiservice("x", "")).unwrap_err();
    assert!(e.is_already_exists(), "{e:?}");
    assert!(!e.is_conflict());
}

#[test]
fn conflict_409_is_conflict_not_already_exists() {
    let server = Server::start();
    server.push(Answer::status(
        409,
        "Conflict",
        "Operation cannot be fulfilled on apiservices \"x\": the object has been modified",
    ));
    let e = api(&server).update(&apiservice("x", "3")).unwrap_err();
    assert!(e.is_conflict(), "{e:?}");
    assert!(!e.is_already_exists());
    assert!(
        !e.is_apply_conflict(),
        "a stale resourceVersion is no field conflict"
    );
}

#[test]
fn apply_conflict_409_names_its_field_manager_causes() {
    let server = Server::start();
    // As apimachinery's NewApplyConflict words it (managedfields/internal/conflict.go).
    server.push(Answer::json(
        409,
        &json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
            "reason": "Conflict",
            "message": "Apply failed with 1 conflict: conflict with \"cainjector\" using apiregistration.k8s.io/v1: .spec.caBundle",
            "details": {"causes": [{"reason": "FieldManagerConflict",
                "message": "conflict with \"cainjector\" using apiregistration.k8s.io/v1",
                "field": ".spec.caBundle"}]}
        }),
    ));
    let e = api(&server)
        .with_field_manager("autoregister")
        .apply(&apiservice("x", ""), false)
        .unwrap_err();
    assert!(e.is_conflict() && e.is_apply_conflict(), "{e:?}");
    assert!(e.to_string().contains("cainjector"), "{e}");
}

#[test]
fn gone_410_and_reason_expired_are_gone() {
    let (e, _s) = get_err(Answer::status(410, "Gone", "gone"));
    assert!(e.is_gone(), "{e:?}");
    let (e, _s) = get_err(Answer::status(
        410,
        "Expired",
        "too old resource version: 1 (50)",
    ));
    assert!(e.is_gone(), "{e:?}");
    assert_eq!(e.as_api().unwrap().reason(), "Expired");
}

#[test]
fn invalid_422_display_shows_each_field_and_message() {
    let mut body = status_json(
        422,
        "Invalid",
        "APIService.apiregistration.k8s.io \"x\" is invalid",
    );
    body["details"] = json!({
        "name": "x",
        "group": "apiregistration.k8s.io",
        "kind": "APIService",
        "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be positive",
             "field": "spec.groupPriorityMinimum"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.version"},
        ],
    });
    let (e, _s) = get_err(Answer::json(422, &body));
    assert!(e.is_invalid(), "{e:?}");
    assert_eq!(
        e.causes(),
        [
            "spec.groupPriorityMinimum: Invalid value: 0: must be positive",
            "spec.version: Required value"
        ]
    );
    let text = e.to_string();
    assert!(
        text.contains("spec.groupPriorityMinimum: Invalid value: 0: must be positive"),
        "{text}"
    );
    assert!(text.contains("spec.version: Required value"), "{text}");
}

#[test]
fn too_many_requests_429_surfaces_retry_after_and_does_not_retry() {
    let server = Server::start();
    server.push(
        Answer::status(429, "TooManyRequests", "storage is (re)initializing")
            .header("Retry-After", "3"),
    );
    server.push(Answer::json(200, &apiservice_json("v1.example.com", "1")));
    let e = api(&server).get("v1.example.com").unwrap_err();
    assert!(e.is_too_many_requests(), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    // The client does not sleep and retry by itself: the caller backs off.
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn retry_after_seconds_in_status_details_is_used_without_the_header() {
    let mut body = status_json(429, "TooManyRequests", "slow down");
    body["details"] = json!({"retryAfterSeconds": 7});
    let (e, _s) = get_err(Answer::json(429, &body));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
}

#[test]
fn unauthorized_401_is_unauthorized() {
    let (e, s) = get_err(Answer::status(401, "Unauthorized", "Unauthorized"));
    assert!(e.is_unauthorized(), "{e:?}");
    assert!(!e.is_forbidden());
    assert_eq!(
        s.requests().len(),
        1,
        "static credentials: no pointless retry"
    );
}

#[test]
fn forbidden_403_is_forbidden() {
    let (e, _s) = get_err(Answer::status(
        403,
        "Forbidden",
        "apiservices is forbidden: User \"x\" cannot get resource",
    ));
    assert!(e.is_forbidden(), "{e:?}");
    assert!(!e.is_unauthorized());
}

#[test]
fn internal_error_500_is_server_error() {
    let (e, _s) = get_err(Answer::status(500, "InternalError", "etcd is sad"));
    assert!(e.is_server_error(), "{e:?}");
    assert_eq!(e.as_api().unwrap().reason(), "InternalError");
    assert!(!e.is_not_found() && !e.is_gone());
}

#[test]
fn server_timeout_504_is_server_error_but_not_resource_version_too_large() {
    let (e, _s) = get_err(Answer::status(
        504,
        "Timeout",
        "Timeout: request did not complete",
    ));
    assert!(e.is_server_error(), "{e:?}");
    assert!(!e.is_resource_version_too_large());
    let (e, _s) = get_err(Answer::status(
        500,
        "ServerTimeout",
        "the server cannot complete",
    ));
    assert!(e.is_server_error(), "{e:?}");
}

#[test]
fn too_large_resource_version_504_is_recognised() {
    let mut body = status_json(
        504,
        "Timeout",
        "Too large resource version: 20, current: 10",
    );
    body["details"] = json!({"causes": [{
        "reason": "ResourceVersionTooLarge",
        "message": "Too large resource version",
    }], "retryAfterSeconds": 1});
    let (e, _s) = get_err(Answer::json(504, &body));
    assert!(e.is_resource_version_too_large(), "{e:?}");
    assert!(e.is_server_error());
    // Also recognised from the message alone (older servers send no cause).
    let (e, _s) = get_err(Answer::status(
        504,
        "Timeout",
        "Too large resource version: 20, current: 10",
    ));
    assert!(e.is_resource_version_too_large(), "{e:?}");
}

#[test]
fn html_error_page_from_a_proxy_is_classified_from_the_code() {
    let page = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
    for (code, check) in [
        (404, Error::is_not_found as fn(&Error) -> bool),
        (403, Error::is_forbidden),
        (429, Error::is_too_many_requests),
        (502, Error::is_server_error),
        (503, Error::is_server_error),
    ] {
        let (e, _s) = get_err(
            Answer::new(code)
                .header("Content-Type", "text/html")
                .body(page),
        );
        assert!(check(&e), "{code}: {e:?}");
        assert_eq!(e.as_api().unwrap().code, code);
        assert!(e.to_string().contains("Bad Gateway"), "{e}");
    }
    // A JSON body that is not a Status is also classified from the code.
    let (e, _s) = get_err(Answer::json(404, &json!({"error": "no route"})));
    assert!(e.is_not_found(), "{e:?}");
    // An empty body too.
    let (e, _s) = get_err(Answer::new(409));
    assert!(e.is_conflict(), "{e:?}");
}

#[test]
fn non_json_2xx_body_is_a_decode_error() {
    let (e, _s) = get_err(
        Answer::new(200)
            .header("Content-Type", "text/html")
            .body("<html>ok</html>"),
    );
    assert!(matches!(e, Error::Decode(_)), "{e:?}");
    let (e, _s) = get_err(Answer::json(200, &json!({"metadata": "not an object"})));
    assert!(matches!(e, Error::Decode(_)), "{e:?}");
    let (e, _s) = get_err(Answer::new(200));
    assert!(matches!(e, Error::Decode(_)), "{e:?}");
}

// ---------------------------------------------------------------- transport errors

#[test]
fn connection_refused_is_a_connect_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = Config::new(format!("http://127.0.0.1:{port}"));
    cfg.qps = 0.0;
    let e = Api::<APIService>::all(Client::new(cfg).unwrap())
        .get("x")
        .unwrap_err();
    assert!(matches!(e, Error::Connect(_)), "{e:?}");
    assert!(e.is_transport());
}

#[test]
fn silent_server_hits_the_configured_request_timeout() {
    let server = Server::start();
    server.push(Answer::silent());
    let mut cfg = Config::new(server.url());
    cfg.qps = 0.0;
    cfg.timeout = Duration::from_millis(300);
    let e = Api::<APIService>::all(Client::new(cfg).unwrap())
        .get("x")
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
    assert!(e.is_transport());
}

#[test]
fn body_that_stalls_midway_hits_the_request_timeout() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    feed.send(&b"{\"kind\":\"APIService\","[..]);
    let mut cfg = Config::new(server.url());
    cfg.qps = 0.0;
    cfg.timeout = Duration::from_millis(300);
    let e = Api::<APIService>::all(Client::new(cfg).unwrap())
        .get("x")
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
    drop(feed);
}

#[test]
fn answer_over_the_body_limit_is_too_large() {
    let server = Server::start();
    let mut big = apiservice_json("x", "1");
    big["metadata"]["annotations"] = json!({"big": "y".repeat(4096)});
    server.push(Answer::json(200, &big));
    server.push(Answer::json(200, &apiservice_json("x", "1")));
    let client = client_for(&server).with_max_body_bytes(1024);
    let api = Api::<APIService>::all(client);
    let e = api.get("x").unwrap_err();
    assert!(matches!(e, Error::TooLarge(_)), "{e:?}");
    // A small answer under the same limit is fine.
    api.get("x").unwrap();
}

#[test]
fn body_cut_before_its_content_length_is_an_io_error() {
    let (e, _s) = get_err(Answer::json(200, &apiservice_json("x", "1")).truncate_after(20));
    assert!(matches!(e, Error::Io(_)), "{e:?}");
}

#[test]
fn connection_closed_without_an_answer_is_a_transport_error() {
    let (e, _s) = get_err(Answer::hang_up());
    assert!(e.is_transport(), "{e:?}");
}

// ---------------------------------------------------------------- connection reuse

#[test]
fn sequential_requests_reuse_one_connection_even_after_error_answers() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("a", "1")));
    server.push(Answer::status(404, "NotFound", "not found"));
    server.push(Answer::json(201, &apiservice_json("b", "2")));
    server.push(Answer::status(409, "Conflict", "modified"));
    server.push(Answer::json(200, &apiservice_json("a", "3")));
    let api = api(&server);
    api.get("a").unwrap();
    assert!(api.get("zz").unwrap_err().is_not_found());
    api.create(&apiservice("b", "")).unwrap();
    assert!(api.update(&apiservice("a", "1")).unwrap_err().is_conflict());
    api.get("a").unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|r| r.connection == 0), "{seen:?}");
    assert_eq!(server.connections(), 1);
}

#[test]
fn pooled_connection_closed_by_the_server_is_replaced_not_an_error() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("a", "1")).close_quietly());
    server.push(Answer::json(200, &apiservice_json("a", "2")));
    let api = api(&server);
    api.get("a").unwrap();
    // The server dropped the kept-alive connection (idle timeout); the next request must
    // notice before using it rather than fail with a broken connection.
    server.wait_for_closed(1, WAIT);
    let got = api.get("a").unwrap();
    assert_eq!(got.metadata.resource_version.as_deref(), Some("2"));
    assert_eq!(server.connections(), 2);
}

#[test]
fn clones_of_a_client_share_its_connection_pool() {
    let server = Server::start();
    for _ in 0..3 {
        server.push(Answer::json(200, &apiservice_json("a", "1")));
    }
    let client = client_for(&server);
    for _ in 0..3 {
        Api::<APIService>::all(client.clone()).get("a").unwrap();
    }
    assert_eq!(server.connections(), 1);
}

// ---------------------------------------------------------------- rate limiter

#[test]
fn qps_zero_sends_every_request_without_a_limiter() {
    // With burst 1 any limiter at qps 0 would never refill; every request must still go out.
    let server = Server::with_handler(|_| Answer::json(200, &apiservice_json("a", "1")));
    let mut cfg = Config::new(server.url());
    cfg.qps = 0.0;
    cfg.burst = 1;
    let api = Api::<APIService>::all(Client::new(cfg).unwrap());
    for _ in 0..20 {
        api.get("a").unwrap();
    }
    assert_eq!(server.requests().len(), 20);
}

// ---------------------------------------------------------------- watch

/// Reads a watch on its own thread so a stuck read fails the test instead of hanging it.
struct Reader {
    rx: mpsc::Receiver<Option<Result<WatchEvent<APIService>, Error>>>,
}

impl Reader {
    fn spawn(mut stream: WatchStream<APIService>) -> Reader {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || loop {
            let item = stream.next();
            let end = item.is_none();
            if tx.send(item).is_err() || end {
                return;
            }
        });
        Reader { rx }
    }

    fn next(&self) -> Option<Result<WatchEvent<APIService>, Error>> {
        self.rx
            .recv_timeout(WAIT)
            .expect("watch produced nothing in time")
    }

    fn event(&self) -> WatchEvent<APIService> {
        self.next()
            .expect("an event, not the end")
            .expect("an event, not an error")
    }

    fn error(&self) -> Error {
        self.next()
            .expect("an error, not the end")
            .expect_err("an error")
    }
}

fn open_watch(server: &Server) -> WatchStream<APIService> {
    let params = WatchParams {
        resource_version: "1".into(),
        timeout_seconds: 300,
        allow_bookmarks: true,
        label_selector: None,
        ..Default::default()
    };
    api(server).watch(&params, &Canceller::new()).unwrap()
}

#[test]
fn watch_events_arrive_one_by_one_while_the_stream_stays_open() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));

    // Each event is read before the server sends the next: nothing waits for the whole body.
    feed.send_event("ADDED", &apiservice_json("a", "2"));
    match reader.event() {
        WatchEvent::Added(o) => assert_eq!(o, apiservice("a", "2")),
        other => panic!("{other:?}"),
    }
    feed.send_event("MODIFIED", &apiservice_json("a", "3"));
    match reader.event() {
        WatchEvent::Modified(o) => assert_eq!(o.metadata.resource_version.as_deref(), Some("3")),
        other => panic!("{other:?}"),
    }
    // An event split across chunks is reassembled.
    let line = format!(
        "{}\n",
        json!({"type": "DELETED", "object": apiservice_json("a", "4")})
    );
    let (head, tail) = line.split_at(17);
    feed.send(head.as_bytes().to_vec());
    feed.send(tail.as_bytes().to_vec());
    match reader.event() {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.name.as_deref(), Some("a")),
        other => panic!("{other:?}"),
    }
    feed.end();
    assert!(reader.next().is_none());
}

#[test]
fn watch_bookmark_yields_its_resource_version() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));
    feed.send_event(
        "BOOKMARK",
        &json!({"kind": "APIService", "apiVersion": "apiregistration.k8s.io/v1",
                "metadata": {"resourceVersion": "12345",
                             "annotations": {"k8s.io/initial-events-end": "true"}},
                "spec": {}}),
    );
    assert_eq!(reader.event(), WatchEvent::Bookmark("12345".into()));
    feed.end();
    assert!(reader.next().is_none());
}

#[test]
fn watch_error_event_410_expired_is_gone() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));
    feed.send_event(
        "ERROR",
        &status_json(410, "Expired", "too old resource version: 1 (1234)"),
    );
    feed.end();
    let WatchEvent::Error(status) = reader.event() else {
        panic!("expected an ERROR event")
    };
    assert_eq!(status.code, Some(410));
    let e = Error::from_status(*status);
    assert!(e.is_gone(), "{e:?}");
    assert_eq!(e.as_api().unwrap().code, 410);
    assert!(reader.next().is_none());
}

#[test]
fn watch_stream_cut_mid_line_is_an_io_error() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));
    feed.send_event("ADDED", &apiservice_json("a", "2"));
    assert!(matches!(reader.event(), WatchEvent::Added(_)));
    feed.send(&b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\""[..]);
    feed.cut();
    let e = reader.error();
    assert!(matches!(e, Error::Io(_)), "{e:?}");
    assert!(reader.next().is_none(), "the stream ends after an error");
}

#[test]
fn watch_event_over_the_limit_is_too_large() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let stream = open_watch(&server).with_max_event_bytes(1024);
    let reader = Reader::spawn(stream);
    // A fitting event passes.
    feed.send_event("ADDED", &apiservice_json("a", "2"));
    assert!(matches!(reader.event(), WatchEvent::Added(_)));
    // A line that never ends within the limit is refused without buffering further.
    feed.send(format!(
        "{{\"type\":\"ADDED\",\"object\":{{\"x\":\"{}",
        "y".repeat(700)
    ));
    feed.send("z".repeat(700));
    let e = reader.error();
    assert!(matches!(e, Error::TooLarge(_)), "{e:?}");
    assert!(reader.next().is_none());
    drop(feed);
}

#[test]
fn watch_closed_cleanly_at_its_timeout_ends_with_none() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));
    feed.send_event("ADDED", &apiservice_json("a", "2"));
    assert!(matches!(reader.event(), WatchEvent::Added(_)));
    feed.end();
    assert!(reader.next().is_none());
}

#[test]
fn watch_skips_blank_keep_alive_lines() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));
    feed.send("\n");
    feed.send("\r\n  \n");
    feed.send_event("ADDED", &apiservice_json("a", "2"));
    feed.send("\n\n");
    feed.send_event("ADDED", &apiservice_json("b", "3"));
    feed.send("\n");
    feed.end();
    let names: Vec<_> = [reader.event(), reader.event()]
        .into_iter()
        .map(|e| match e {
            WatchEvent::Added(o) => o.name().to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(reader.next().is_none());
}

#[test]
fn watch_line_that_is_not_json_is_a_decode_error_and_the_stream_goes_on() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let reader = Reader::spawn(open_watch(&server));
    feed.send("this is not json\n");
    feed.send_event("ADDED", &apiservice_json("a", "2"));
    feed.end();
    assert!(matches!(reader.error(), Error::Decode(_)));
    assert!(matches!(reader.event(), WatchEvent::Added(_)));
    assert!(reader.next().is_none());
}

#[test]
fn watch_refused_with_a_status_is_an_api_error() {
    let server = Server::start();
    server.push(Answer::status(
        410,
        "Expired",
        "too old resource version: 1 (99)",
    ));
    let params = WatchParams {
        resource_version: "1".into(),
        timeout_seconds: 300,
        allow_bookmarks: true,
        label_selector: None,
        ..Default::default()
    };
    let e = api(&server)
        .watch(&params, &Canceller::new())
        .err()
        .expect("an error");
    assert!(e.is_gone(), "{e:?}");
}

#[test]
fn watch_without_a_timeout_leaves_timeout_seconds_to_the_server() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let params = WatchParams {
        resource_version: "5".into(),
        timeout_seconds: 0,
        allow_bookmarks: false,
        label_selector: Some("a=b".into()),
        ..Default::default()
    };
    let stream = api(&server).watch(&params, &Canceller::new()).unwrap();
    let r = only_request(&server);
    assert_eq!(r.query("timeoutSeconds"), None);
    assert_eq!(r.query("allowWatchBookmarks"), None);
    assert_eq!(r.query("labelSelector").as_deref(), Some("a=b"));
    feed.end();
    drop(stream);
}

#[test]
fn watch_whose_head_never_comes_times_out_at_the_request_timeout() {
    // The stream may stay open for timeoutSeconds, but the answer's head must come as fast as
    // any other request's: a server that accepts and says nothing is not a 5-minute wait.
    let server = Server::start();
    server.push(Answer::silent());
    let mut cfg = Config::new(server.url());
    cfg.qps = 0.0;
    cfg.timeout = Duration::from_millis(300);
    let api = Api::<APIService>::all(Client::new(cfg).unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let params = WatchParams {
            resource_version: "1".into(),
            timeout_seconds: 300,
            allow_bookmarks: true,
            label_selector: None,
            ..Default::default()
        };
        let _ = tx.send(api.watch(&params, &Canceller::new()).err());
    });
    let e = rx
        .recv_timeout(WAIT)
        .expect("watch open returned in time")
        .expect("an error");
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
}

// ---------------------------------------------------------------- server-side apply

#[test]
fn apply_patches_the_object_path_as_apply_yaml_with_manager_force_and_strict_validation() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("v1.example.com", "12")));
    server.push(Answer::json(200, &apiservice_json("v1.example.com", "12")));
    let mut config = apiservice("v1.example.com", "");
    config.metadata.resource_version = None;
    config.metadata.uid = None;
    let api = api(&server).with_field_manager("autoregister");
    let got = api.apply(&config, true).unwrap();
    assert_eq!(got.metadata.resource_version.as_deref(), Some("12"));
    api.clone()
        .with_dry_run()
        .apply_unread(&config, false)
        .unwrap();

    let seen = server.wait_for_requests(2, WAIT);
    let r = &seen[0];
    assert_eq!(r.method, "PATCH");
    // A patch's options travel in the query, where kube-apiserver reads them.
    assert_eq!(
        r.target,
        format!(
            "{COLLECTION}/v1.example.com?fieldManager=autoregister&fieldValidation=Strict&force=true"
        )
    );
    assert_common_headers(r);
    // JSON is YAML: the configuration goes as JSON under the apply media type.
    assert_eq!(
        r.header("content-type"),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(r.json(), serde_json::to_value(&config).unwrap());
    assert_eq!(
        seen[1].target,
        format!("{COLLECTION}/v1.example.com?fieldManager=autoregister&fieldValidation=Strict&dryRun=All")
    );
}

#[test]
fn apply_without_a_field_manager_is_refused_before_sending() {
    let server = Server::start();
    let e = api(&server)
        .apply(&apiservice("v1.example.com", ""), true)
        .unwrap_err();
    assert!(
        matches!(e, Error::Config(ref m) if m.contains("fieldManager")),
        "{e:?}"
    );
    // Refused synchronously: a request sent would have been recorded before its answer.
    assert!(server.requests().is_empty());
}

#[test]
fn json_patch_sends_its_operations_as_json_patch() {
    let server = Server::start();
    server.push(Answer::json(200, &apiservice_json("v1.example.com", "13")));
    let ops = json!([
        {"op": "replace", "path": "/metadata/managedFields", "value": []},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "12"},
    ]);
    let api = api(&server).with_field_manager("autoregister");
    api.json_patch("v1.example.com", &ops).unwrap();
    let r = only_request(&server);
    assert_eq!(r.method, "PATCH");
    assert_eq!(
        r.target,
        format!("{COLLECTION}/v1.example.com?fieldManager=autoregister&fieldValidation=Strict")
    );
    assert_eq!(
        r.header("content-type"),
        Some("application/json-patch+json")
    );
    assert_eq!(r.json(), ops);
}
