//! The embedding example, run as written against the test API server: it registers two
//! APIServices under its own label key, deregisters one and shuts down, touching nothing
//! the `autoregister` binary's key owns.
#![cfg(all(feature = "testing", feature = "cli"))]

#[allow(dead_code)]
#[path = "../examples/embed.rs"]
mod embed;

#[allow(dead_code)]
#[path = "../examples/apiserver.rs"]
mod apiserver;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use autoregister::api::DEFAULT_LABEL_KEY;
use autoregister::testserver::TestServer;
use serde_json::json;

#[test]
fn the_embed_example_registers_deregisters_and_leaves_other_keys_alone() {
    let server = TestServer::start();
    // An object the CLI's key owns: an embedder with its own key must never delete it.
    server.seed(
        "apiservices",
        None,
        json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1.cli.example.com", "labels": {DEFAULT_LABEL_KEY: "true"}},
            "spec": {"group": "cli.example.com", "version": "v1",
                     "groupPriorityMinimum": 1000, "versionPriority": 15},
        }),
    );
    embed::run(server.url()).unwrap();

    let writes: Vec<(String, String)> = server
        .requests()
        .into_iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "delete"))
        .map(|r| (r.verb, r.name.unwrap_or_default()))
        .collect();
    for name in ["v1.embed.example.com", "v1beta1.embed.example.com"] {
        assert!(
            writes.contains(&("create".into(), name.into())),
            "{name} created: {writes:?}"
        );
    }
    assert!(
        writes.contains(&("delete".into(), "v1.embed.example.com".into())),
        "the removed name deleted: {writes:?}"
    );
    assert!(
        writes.iter().all(|(_, n)| n != "v1.cli.example.com"),
        "the CLI's object was written: {writes:?}"
    );
    let left: Vec<(String, String)> = server
        .list_objects("apiservices", None)
        .iter()
        .map(|o| {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let labels = &o["metadata"]["labels"];
            (name, labels.to_string())
        })
        .collect();
    assert_eq!(
        left,
        [
            (
                "v1.cli.example.com".to_string(),
                json!({DEFAULT_LABEL_KEY: "true"}).to_string()
            ),
            // Synced on start: kept after removal, as upstream, labelled with the example's key only.
            (
                "v1beta1.embed.example.com".to_string(),
                json!({"example.com/embed-example": "onstart"}).to_string()
            ),
        ]
    );
    // Writes are attributed to the embedding program in managedFields.
    for r in server.requests() {
        if matches!(r.verb.as_str(), "create" | "update") {
            assert_eq!(r.field_manager.as_deref(), Some("embed-example"), "{r:?}");
        }
    }
    // Every request named the embedding program, not the autoregister binary.
    let agents: Vec<String> = server
        .requests()
        .into_iter()
        .map(|r| r.user_agent.unwrap_or_default())
        .collect();
    assert!(
        agents.iter().all(|a| a == "embed-example/0.1"),
        "{agents:?}"
    );
}

/// The library guide's complete program is the crate docs' example, which rustdoc compiles:
/// docs.rs and docs/library.md show the same code.
#[test]
fn the_library_guide_example_is_the_compiled_crate_example() {
    let root = env!("CARGO_MANIFEST_DIR");
    let lib = std::fs::read_to_string(format!("{root}/src/lib.rs")).unwrap();
    let guide = std::fs::read_to_string(format!("{root}/docs/library.md")).unwrap();
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let example = doc
        .split("```no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a no_run example in the crate docs");
    let section = guide
        .split("## A complete program")
        .nth(1)
        .expect("a section `A complete program` in docs/library.md");
    let snippet = section
        .split("```rust no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a rust snippet in that section");
    assert_eq!(snippet, example);
}

/// Polls `cond` every 20 ms until it holds or 10 s pass.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_apiserver_example_registers_itself_repairs_and_deregisters_on_stop() {
    let server = TestServer::start();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = std::sync::mpsc::channel();
    let config = server.client_config();
    let example = std::thread::spawn(move || {
        apiserver::run(config, listener, stopped).map_err(|e| e.to_string())
    });
    let registered = || {
        server
            .get_object("apiservices", None, apiserver::NAME)
            .is_some()
    };
    wait_for("the registration", registered);
    let discovery = http_get(addr, "/apis/widgets.example.com/v1alpha1");
    assert!(discovery.starts_with("HTTP/1.1 200"), "{discovery}");
    assert!(discovery.contains(r#""groupVersion":"widgets.example.com/v1alpha1""#));

    // Deleted behind its back while it runs: registered again.
    server.delete_object("apiservices", None, apiserver::NAME);
    wait_for("the registration to come back", registered);

    stop.send(()).unwrap();
    example.join().unwrap().unwrap();
    assert!(!registered(), "deregistered on stop");
    let last_write = server
        .requests()
        .into_iter()
        .rfind(|r| matches!(r.verb.as_str(), "create" | "update" | "delete"))
        .unwrap();
    assert_eq!(last_write.verb, "delete");
    assert_eq!(
        last_write.user_agent.as_deref(),
        Some(concat!("widgets-apiserver/", env!("CARGO_PKG_VERSION")))
    );
}
