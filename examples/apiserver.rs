//! The canonical embedding: an aggregated API server in plain Rust (std only, no async
//! runtime) that registers its own APIService when it starts, keeps it registered while it
//! runs (an APIService deleted behind its back comes back), and deregisters it on SIGTERM.
//!
//! `cargo run --example apiserver -- https://KUBE-APISERVER:6443 127.0.0.1:8443` — or with
//! no arguments, kubectl's connection rules and 127.0.0.1:8443. A real deployment serves
//! TLS and puts its CA in `caBundle`; this example speaks plain HTTP to stay short.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use autoregister::{
    APIService, APIServiceSpec, Client, Config, ConnectOptions, Controller, ControllerOptions,
    ServiceReference,
};

/// This program's own ownership label.
const LABEL_KEY: &str = "widgets.example.com/registered-by";
/// The group and version this server serves, and the APIService naming them.
const GROUP: &str = "widgets.example.com";
const VERSION: &str = "v1alpha1";
/// `VERSION.GROUP`, as the API requires.
pub const NAME: &str = "v1alpha1.widgets.example.com";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let config = match args.next() {
        Some(server) => Config::new(server),
        None => Config::infer(&ConnectOptions::default())?,
    };
    let listener = TcpListener::bind(args.next().as_deref().unwrap_or("127.0.0.1:8443"))?;
    let (stop_tx, stop) = std::sync::mpsc::channel();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = stop_tx.send(());
        }
    });
    run(config, listener, stop)
}

/// Serves on `listener` and keeps this server's APIService registered through `config`'s
/// cluster until `stop` receives (or its sender is dropped), then deregisters it.
pub fn run(
    mut config: Config,
    listener: TcpListener,
    stop: Receiver<()>,
) -> Result<(), Box<dyn std::error::Error>> {
    config.user_agent = format!("widgets-apiserver/{}", env!("CARGO_PKG_VERSION"));
    let mut options = ControllerOptions::new(LABEL_KEY);
    // This program's one name is removed on shutdown, and must then be deleted.
    options.allow_empty = true;
    let controller = Controller::new(Client::new(config)?, options);
    controller.add_api_service_to_sync(APIService::new(
        NAME,
        APIServiceSpec {
            service: Some(ServiceReference {
                namespace: "widgets".into(),
                name: "widgets-apiserver".into(),
                port: Some(443),
                ..Default::default()
            }),
            group: GROUP.into(),
            version: VERSION.into(),
            // Plain HTTP in this example; a real server sets `ca_bundle` to its CA instead.
            insecure_skip_tls_verify: true,
            group_priority_minimum: 1000,
            version_priority: 15,
            ..Default::default()
        },
    ));
    controller.start();

    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    match controller.wait_converged(Duration::from_secs(30)) {
        Ok(()) => eprintln!("serving {GROUP}/{VERSION} on {addr}, registered as {NAME}"),
        Err(pending) => eprintln!("serving on {addr}; registration pending: {pending:?}"),
    }

    // Until told to stop; the controller repairs the registration meanwhile.
    let _ = stop.recv();
    controller.remove_api_service_to_sync(NAME);
    if let Err(pending) = controller.wait_converged(Duration::from_secs(10)) {
        eprintln!("could not deregister: {pending:?}");
    }
    controller.shutdown();
    eprintln!("deregistered {NAME}, stopped");
    Ok(())
}

/// Answers one request: the discovery document of the served version, else 404.
fn serve(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    // Drain the head; the requests served here have no body.
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    let path = line.split_whitespace().nth(1).unwrap_or_default();
    let (status, body) = if path == format!("/apis/{GROUP}/{VERSION}") {
        let doc = serde_json::json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{GROUP}/{VERSION}"),
            "resources": [{
                "name": "widgets", "singularName": "widget", "namespaced": true,
                "kind": "Widget", "verbs": ["get", "list"],
            }],
        });
        ("200 OK", doc.to_string())
    } else {
        (
            "404 Not Found",
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}"#.into(),
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
