//! The real client against servers that misbehave on purpose: endless lines and headers,
//! lying Content-Lengths, absurd Retry-After and Status values, deeply nested JSON and
//! redirects. Every one must end in a classified error within the request timeout: no
//! panic, no hang, no unbounded buffering, no credentials sent elsewhere.

#[path = "support/scripted.rs"]
mod scripted;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use autoregister::api::{APIService, Status};
use autoregister::client::{
    Api, AuthConfig, Canceller, Client, Config, Error, WatchParams, MAX_EVENT_BYTES,
    MAX_RETRY_AFTER,
};
use scripted::{Answer, Server};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(2);

fn client(url: &str) -> Client {
    let mut cfg = Config::new(url.to_string());
    cfg.qps = 0.0;
    cfg.timeout = TIMEOUT;
    cfg.auth = AuthConfig::Token("secret-token".into());
    Client::new(cfg).unwrap()
}

fn api(url: &str) -> Api<APIService> {
    Api::all(client(url))
}

/// A raw server: reads one request head, then runs `answer` on the socket (once per connection).
fn raw_server(answer: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let answer = answer.clone();
            thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                answer(&mut conn);
            });
        }
    });
    url
}

/// Runs `f` and checks it returned within the timeout plus a margin.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    assert!(
        started.elapsed() < TIMEOUT + Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    out
}

#[test]
fn endless_watch_line_ends_too_large_at_the_default_limit() {
    let server = Server::start();
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let params = WatchParams {
        resource_version: "1".into(),
        timeout_seconds: 60,
        allow_bookmarks: true,
        label_selector: None,
        ..Default::default()
    };
    let mut stream = api(&server.url())
        .watch(&params, &Canceller::new())
        .unwrap();
    let chunk = "y".repeat(1 << 20);
    feed.send("{\"type\":\"ADDED\",\"object\":{\"x\":\"");
    for _ in 0..=(MAX_EVENT_BYTES >> 20) {
        feed.send(chunk.clone());
    }
    let e = stream.next().unwrap().unwrap_err();
    assert!(matches!(e, Error::TooLarge(_)), "{e:?}");
    assert!(stream.next().is_none());
}

#[test]
fn huge_content_length_with_a_short_body_is_an_io_error() {
    let url = raw_server(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000000000\r\n\r\n{\"kind\":",
        );
    });
    let e = timed(|| api(&url).get("x").unwrap_err());
    assert!(matches!(e, Error::Io(_)), "{e:?}");
}

#[test]
fn huge_content_length_on_an_open_connection_times_out() {
    let url = raw_server(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n{");
        thread::sleep(TIMEOUT * 3);
    });
    let e = timed(|| api(&url).get("x").unwrap_err());
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
}

#[test]
fn headers_that_never_end_are_refused() {
    // Fast: the head outgrows ureq's header limit.
    let url = raw_server(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\n");
        let line = format!("X-Pad: {}\r\n", "a".repeat(1000));
        while c.write_all(line.as_bytes()).is_ok() {}
    });
    let e = timed(|| api(&url).get("x").unwrap_err());
    assert!(e.is_transport(), "{e:?}");
    // Slow: a header line now and then, never the blank line.
    let url = raw_server(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\n");
        while c.write_all(b"X-Slow: 1\r\n").is_ok() {
            thread::sleep(Duration::from_millis(50));
        }
    });
    let e = timed(|| api(&url).get("x").unwrap_err());
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
}

#[test]
fn odd_status_codes_are_errors() {
    let url = raw_server(|c| {
        let _ = c.write_all(b"HTTP/1.1 999 Whatever\r\nContent-Length: 2\r\n\r\nno");
    });
    let e = timed(|| api(&url).get("x").unwrap_err());
    assert_eq!(e.as_api().map(|a| a.code), Some(999), "{e:?}");
    let url = raw_server(|c| {
        let _ = c.write_all(b"HTTP/1.1 0 Zero\r\nContent-Length: 0\r\n\r\n");
    });
    let e = timed(|| api(&url).get("x").unwrap_err());
    assert!(e.is_transport(), "{e:?}");
}

#[test]
fn retry_after_is_capped_and_garbage_is_ignored() {
    let server = Server::start();
    let cases = [
        ("99999999999", Some(MAX_RETRY_AFTER)),
        ("18446744073709551615", Some(MAX_RETRY_AFTER)),
        ("18446744073709551616", None),
        ("-5", None),
        ("soon", None),
        ("", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        ("7", Some(Duration::from_secs(7))),
    ];
    for (value, _) in cases {
        server
            .push(Answer::status(429, "TooManyRequests", "slow down").header("Retry-After", value));
    }
    let api = api(&server.url());
    for (value, want) in cases {
        let e = api.get("x").unwrap_err();
        assert!(e.is_too_many_requests(), "{e:?}");
        assert_eq!(e.retry_after(), want, "Retry-After: {value:?}");
    }
    // The Status's own retryAfterSeconds is capped too.
    let mut status = Status::failure(429, "TooManyRequests", "m");
    status.details = Some(autoregister::api::StatusDetails {
        retry_after_seconds: Some(u32::MAX),
        ..Default::default()
    });
    assert_eq!(
        Error::from_status(status).retry_after(),
        Some(MAX_RETRY_AFTER)
    );
}

#[test]
fn huge_status_fields_are_bounded_in_errors() {
    let server = Server::start();
    // Larger than the 1 MiB read of an error body: not JSON any more, the text is cut.
    let huge = "R".repeat(10 << 20);
    server.push(Answer::json(
        500,
        &json!({"kind": "Status", "code": 500, "reason": huge, "message": "m"}),
    ));
    // Fits the read: a real Status whose fields are absurd.
    let long = "M".repeat(500_000);
    let causes: Vec<_> = (0..10_000)
        .map(|i| json!({"field": long[..300].to_string(), "message": format!("c{i}")}))
        .collect();
    server.push(Answer::json(
        409,
        &json!({"kind": "Status", "code": 99999, "reason": long, "message": long}),
    ));
    server.push(Answer::json(
        422,
        &json!({"kind": "Status", "code": 0, "reason": "Invalid", "message": long,
                "details": {"causes": causes}}),
    ));
    let api = api(&server.url());
    for want in [500, 409, 422] {
        let e = timed(|| api.get("x").unwrap_err());
        assert_eq!(
            e.as_api().map(|a| a.code),
            Some(want),
            "{}",
            &e.to_string()[..200]
        );
        let text = e.to_string();
        assert!(text.len() < 20_000, "{want}: {} bytes", text.len());
        let debug = format!("{e:?}");
        assert!(
            debug.len() < 40_000,
            "{want}: {} bytes of Debug",
            debug.len()
        );
    }
    // The same for a watch ERROR event's Status.
    let status: Status = serde_json::from_value(
        json!({"kind": "Status", "code": 410, "reason": "Expired", "message": huge}),
    )
    .unwrap();
    let e = Error::from_status(status);
    assert!(e.is_gone());
    assert!(e.to_string().len() < 20_000);
}

#[test]
fn deeply_nested_json_answers_are_decode_errors() {
    let server = Server::start();
    server.push(Answer::new(200).body("[".repeat(1 << 20)));
    server.push(Answer::new(200).body(format!(
        "{{\"kind\":\"APIService\",\"metadata\":{}",
        "{\"a\":".repeat(100_000)
    )));
    let api = api(&server.url());
    for _ in 0..2 {
        let e = timed(|| api.get("x").unwrap_err());
        assert!(matches!(e, Error::Decode(_)), "{e:?}");
    }
    // And as one watch event.
    let (feed, answer) = Answer::stream();
    server.push(answer);
    let params = WatchParams {
        resource_version: "1".into(),
        timeout_seconds: 60,
        allow_bookmarks: true,
        label_selector: None,
        ..Default::default()
    };
    let mut stream = api.watch(&params, &Canceller::new()).unwrap();
    feed.send(format!(
        "{{\"type\":\"ADDED\",\"object\":{}\n",
        "[".repeat(100_000)
    ));
    let e = stream.next().unwrap().unwrap_err();
    assert!(matches!(e, Error::Decode(_)), "{e:?}");
}

#[test]
fn redirects_are_not_followed() {
    let elsewhere = Server::start();
    let server = Server::start();
    let target = format!(
        "{}/apis/apiregistration.k8s.io/v1/apiservices/x",
        elsewhere.url()
    );
    for code in [301, 302, 307, 308] {
        server.push(Answer::new(code).header("Location", &target));
    }
    server.push(Answer::new(303).header("Location", &target));
    let api = api(&server.url());
    for code in [301, 302, 307, 308] {
        let e = timed(|| api.get("x").unwrap_err());
        assert_eq!(e.as_api().map(|a| a.code), Some(code), "{e:?}");
    }
    // A write answered with a redirect is not replayed as a GET elsewhere.
    let obj: APIService = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "x"}, "spec": {"group": "g", "version": "v1"}
    }))
    .unwrap();
    let e = timed(|| api.create(&obj).unwrap_err());
    assert_eq!(e.as_api().map(|a| a.code), Some(303), "{e:?}");
    assert_eq!(server.requests().len(), 5);
    assert!(
        elsewhere.requests().is_empty(),
        "followed a redirect: {:?}",
        elsewhere.requests()
    );
}
