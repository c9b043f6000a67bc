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

#[path = "support/tls_backend.rs"]
mod tls_backend;

use std::net::TcpListener;
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

#[test]
fn the_apiserver_example_registers_itself_repairs_and_deregisters_on_stop() {
    let server = TestServer::start();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = std::sync::mpsc::channel();
    let config = server.client_config();
    let options = apiserver::Options::default();
    let host = options.host();
    let example = std::thread::spawn(move || {
        apiserver::run(Some(config), options, listener, stopped).map_err(|e| e.to_string())
    });
    let registered = || {
        server
            .get_object("apiservices", None, apiserver::NAME)
            .is_some()
    };
    wait_for("the registration", registered);
    // TLS, verified by the CA it registered (no insecureSkipTLSVerify) for its Service's name.
    let obj = server
        .get_object("apiservices", None, apiserver::NAME)
        .unwrap();
    assert!(obj["spec"].get("insecureSkipTLSVerify").is_none(), "{obj}");
    let ca = {
        use base64::Engine as _;
        let b64 = obj["spec"]["caBundle"].as_str().unwrap();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
    };
    let get = |path: &str| tls_backend::tls_get(&addr.to_string(), &host, &ca, path);
    let (code, discovery) = get("/apis/widgets.example.com/v1alpha1");
    assert_eq!(code, 200, "{discovery}");
    assert!(discovery.contains(r#""groupVersion":"widgets.example.com/v1alpha1""#));
    let (code, group) = get("/apis/widgets.example.com");
    assert_eq!(code, 200, "{group}");
    assert!(group.contains(r#""kind":"APIGroup""#), "{group}");
    let (code, list) = get("/apis/widgets.example.com/v1alpha1/namespaces/default/widgets");
    assert_eq!(code, 200, "{list}");
    assert!(list.contains(r#""name":"sprocket""#), "{list}");
    assert_eq!(
        get("/apis/widgets.example.com/v1alpha1/namespaces/default/widgets/none").0,
        404
    );

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
    // It stopped serving too.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

/// With `--tls-cert`/`--tls-key`, the example registers the CA source it is given (not a
/// bundle) and serves the files, and serves the new pair once they are replaced.
#[test]
fn the_apiserver_example_serves_certificate_files_and_their_renewal() {
    let server = TestServer::start();
    let dir = std::env::temp_dir().join(format!("autoregister-example-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |issued: &tls_backend::Issued| {
        // As a kubelet updates a Secret volume: each file replaced whole.
        for (name, text) in [
            ("ca.crt", &issued.ca_pem),
            ("tls.crt", &issued.cert_pem),
            ("tls.key", &issued.key_pem),
        ] {
            std::fs::write(dir.join(format!(".{name}")), text).unwrap();
            std::fs::rename(dir.join(format!(".{name}")), dir.join(name)).unwrap();
        }
    };
    let host = "api.w.svc";
    let first = tls_backend::Issued::new("first-ca", &[host]);
    write(&first);
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let options = apiserver::Options::parse(
        [
            "--service",
            "w/api",
            "--tls-cert",
            &path("tls.crt"),
            "--tls-key",
            &path("tls.key"),
            "--ca-file",
            &path("ca.crt"),
        ]
        .map(String::from),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = std::sync::mpsc::channel();
    let config = server.client_config();
    let example = std::thread::spawn(move || {
        apiserver::run(Some(config), options, listener, stopped).map_err(|e| e.to_string())
    });
    wait_for("the registration", || {
        server
            .get_object("apiservices", None, apiserver::NAME)
            .is_some()
    });
    let obj = server
        .get_object("apiservices", None, apiserver::NAME)
        .unwrap();
    // The controller fills caBundle from the file it names.
    assert_eq!(
        obj["metadata"]["annotations"]["autoregister.dev/inject-ca-from-file"],
        path("ca.crt"),
        "{obj}"
    );
    let bundle = |o: &serde_json::Value| {
        use base64::Engine as _;
        let b64 = o["spec"]["caBundle"].as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
    };
    assert_eq!(bundle(&obj), first.ca_pem.as_bytes());
    let get = |ca: &str| {
        let path = "/apis/widgets.example.com/v1alpha1";
        tls_backend::try_tls_get(&addr, host, ca.as_bytes(), path)
            .ok()
            .map(|(code, _)| code)
    };
    assert_eq!(get(&first.ca_pem), Some(200));

    // Renewed by a new CA: the files change, the server serves the new pair and the
    // registration carries the new CA.
    let second = tls_backend::Issued::new("second-ca", &[host]);
    write(&second);
    wait_for("the new certificate served", || {
        get(&second.ca_pem) == Some(200)
    });
    assert_eq!(get(&first.ca_pem), None, "the old CA no longer verifies it");
    wait_for("the new CA registered", || {
        server
            .get_object("apiservices", None, apiserver::NAME)
            .is_some_and(|o| bundle(&o) == second.ca_pem.as_bytes())
    });
    stop.send(()).unwrap();
    example.join().unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The example's command line: a certificate from files needs a CA source beside it.
#[test]
fn the_apiserver_example_reads_its_command_line() {
    let parse = |args: &[&str]| apiserver::Options::parse(args.iter().map(|s| s.to_string()));
    let o = parse(&[
        "--listen",
        "127.1.0.9:8443",
        "--service",
        "w/api",
        "--port=6443",
    ])
    .unwrap();
    assert_eq!(
        (o.listen.as_str(), o.host(), o.port, o.register),
        ("127.1.0.9:8443", "api.w.svc".to_string(), 6443, true)
    );
    assert!(matches!(o.tls, apiserver::Tls::Generate));
    let o = parse(&[
        "--tls-cert",
        "/tls/tls.crt",
        "--tls-key",
        "/tls/tls.key",
        "--ca-from-secret",
        "w/api-tls",
        "--no-register",
    ])
    .unwrap();
    assert!(!o.register);
    match o.tls {
        apiserver::Tls::Files { ca, .. } => assert_eq!(
            ca,
            Some(autoregister::CaSource::Secret {
                namespace: "w".into(),
                name: "api-tls".into(),
                key: "ca.crt".into()
            })
        ),
        other => panic!("{other:?}"),
    }
    let e = parse(&["--tls-cert", "a", "--tls-key", "b"]).unwrap_err();
    assert!(
        e.to_string().contains("--ca-file or --ca-from-secret"),
        "{e}"
    );
    assert!(parse(&["--tls-cert", "a"]).is_err());
    // Serving only: whoever registers it knows the CA.
    assert!(parse(&["--tls-cert", "a", "--tls-key", "b", "--no-register"]).is_ok());
    assert!(parse(&["--bogus", "x"]).is_err());
}
