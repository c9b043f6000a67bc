//! Embedding the controller in a plain `fn main`, no async runtime.
//!
//! `cargo run --example embed -- http://127.0.0.1:8080` (any API server URL).

use std::time::Duration;

use autoregister::api::{APIService, APIServiceSpec, ServiceReference};
use autoregister::client::{Client, Config};
use autoregister::controller::{Controller, ControllerOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let client = Client::new(Config::new(server))?;
    let controller = Controller::new(client, ControllerOptions::default());

    // The upstream registration interface: sync continuously, or once at start.
    controller.add_api_service_to_sync(APIService::new(
        "v1beta1.metrics.example.com",
        APIServiceSpec {
            service: Some(ServiceReference {
                namespace: "kube-system".into(),
                name: "metrics".into(),
                port: Some(443),
                ..Default::default()
            }),
            group: "metrics.example.com".into(),
            version: "v1beta1".into(),
            insecure_skip_tls_verify: true,
            group_priority_minimum: 100,
            version_priority: 100,
            ..Default::default()
        },
    ));

    controller.start();
    match controller.wait_converged(Duration::from_secs(10)) {
        Ok(()) => println!("registered"),
        Err(pending) => println!("still pending: {pending:?}"),
    }
    // The handle is Clone + Send + Sync: other threads may add or remove names meanwhile.
    controller.shutdown();
    Ok(())
}
