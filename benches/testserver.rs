//! Throughput of the test API server on loopback, through the crate's own client:
//! GETs and creates per second with several client threads.
//!
//! `cargo bench --features testing --bench testserver [-- SECONDS THREADS]`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoregister::api::{APIService, APIServiceSpec, ServiceReference};
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;

fn spec(group: &str) -> APIServiceSpec {
    APIServiceSpec {
        group: group.into(),
        version: "v1".into(),
        group_priority_minimum: 1000,
        version_priority: 15,
        service: Some(ServiceReference {
            namespace: "default".into(),
            name: "svc".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Runs `op(thread, i)` on `threads` threads for `secs`; answers requests per second.
fn measure(threads: usize, secs: f64, op: impl Fn(usize, usize) + Send + Sync + 'static) -> f64 {
    let op = Arc::new(op);
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let op = op.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                while Instant::now() < until {
                    op(t, i);
                    i += 1;
                }
                done.fetch_add(i, Ordering::Relaxed);
            })
        })
        .collect();
    for h in handles {
        h.join().expect("bench thread");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let threads: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    // A small log so the benchmark measures serving, not an ever-growing Vec.
    let server = TestServer::builder()
        .log_capacity(10_000)
        .start()
        .expect("start server");
    let client = Client::new(server.client_config()).expect("client");
    let api: Api<APIService> = Api::all(client);
    api.create(&APIService::new("v1.bench.io", spec("bench.io")))
        .expect("seed object");

    let a = api.clone();
    let gets = measure(threads, secs, move |_, _| {
        a.get("v1.bench.io").expect("get");
    });
    println!("testserver GET:    {gets:>9.0} requests/s ({threads} client threads, {secs} s)");

    let a = api.clone();
    let creates = measure(threads, secs, move |t, i| {
        let group = format!("g{t}-{i}.bench.io");
        a.create(&APIService::new(format!("v1.{group}"), spec(&group)))
            .expect("create");
    });
    println!("testserver create: {creates:>9.0} requests/s ({threads} client threads, {secs} s)");
    println!(
        "objects stored: {}, resourceVersion {}",
        server.list_objects("apiservices", None).len(),
        server.resource_version()
    );
}
