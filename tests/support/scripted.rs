//! A small scripted HTTP/1.1 server on `127.0.0.1:0` for client tests.
//!
//! One thread accepts, one thread serves each connection (keep-alive: several requests per
//! connection, as a pooled client sends them). Every request is recorded (method, path with
//! query, headers, body, connection number) before it is answered. Answers come from a FIFO
//! queue ([`Server::push`]) or from a closure ([`Server::with_handler`]); with an empty queue
//! the server answers `500` with a Status body saying so, so a missing script fails loudly.
//!
//! An [`Answer`] is a full response, or one of the misbehaviours tests need: a delay before
//! the head, a body cut after `n` bytes ([`Answer::truncate_after`]), a chunked body fed piece
//! by piece from the test ([`Answer::stream`] and [`StreamHandle`]), silence after reading the
//! request ([`Answer::silent`]) or a close without answering ([`Answer::hang_up`]).
//!
//! Use from any test crate with `#[path = "support/scripted.rs"] mod scripted;`. It depends
//! on `std` and `serde_json` only.
//!
//! ```ignore
//! let server = scripted::Server::start();
//! server.push(scripted::Answer::json(200, &serde_json::json!({"kind": "APIService"})));
//! // ... point a client at server.url() ...
//! let seen = server.requests();
//! assert_eq!(seen[0].method, "GET");
//! ```
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query exactly as sent, e.g. `/apis/x/v1/things?limit=2`.
    pub target: String,
    /// Header (name lower-cased, value) pairs in arrival order.
    pub headers: Vec<(String, String)>,
    /// The request body (de-chunked).
    pub body: Vec<u8>,
    /// Which connection carried it: 0 for the first accepted connection, 1 for the next...
    pub connection: usize,
}

impl Request {
    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The raw query string (without `?`), or `""`.
    pub fn query_string(&self) -> &str {
        self.target.split_once('?').map(|(_, q)| q).unwrap_or("")
    }

    /// Query parameters, percent-decoded, in order.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.query_string()
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => (percent_decode(k), percent_decode(v)),
                None => (percent_decode(kv), String::new()),
            })
            .collect()
    }

    /// The first value of query parameter `key`, percent-decoded.
    pub fn query(&self, key: &str) -> Option<String> {
        self.query_pairs()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// How many times header `name` was sent.
    pub fn header_count(&self, name: &str) -> usize {
        let name = name.to_ascii_lowercase();
        self.headers.iter().filter(|(k, _)| *k == name).count()
    }

    /// The body parsed as JSON (panics if it is not: a test helper).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// What to do with a body after the head.
enum Body {
    /// Send these bytes with `Content-Length`.
    Full(Vec<u8>),
    /// Declare `Content-Length` of the full body, send only the first `n` bytes, close.
    Truncated(Vec<u8>, usize),
    /// `Transfer-Encoding: chunked`, pieces from the test.
    Stream(Receiver<Piece>),
}

/// A piece of a streamed body.
enum Piece {
    Data(Vec<u8>),
    Cut,
}

/// How the server treats one request.
enum Kind {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: Body,
    },
    /// Read the request, then say nothing until the server is dropped.
    Silent,
    /// Read the request, then close the connection without a byte.
    HangUp,
}

/// A scripted answer to one request.
pub struct Answer {
    kind: Kind,
    delay: Duration,
    close: bool,
    /// Close after answering without announcing it (an idle-timeout close).
    quiet_close: bool,
}

impl Answer {
    /// A response with `status`, no extra headers and an empty body.
    pub fn new(status: u16) -> Answer {
        Answer {
            kind: Kind::Respond {
                status,
                headers: Vec::new(),
                body: Body::Full(Vec::new()),
            },
            delay: Duration::ZERO,
            close: false,
            quiet_close: false,
        }
    }

    /// A JSON response.
    pub fn json(status: u16, value: &serde_json::Value) -> Answer {
        Answer::new(status)
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(value).expect("JSON encodes"))
    }

    /// A `metav1.Status` failure answer, as the API server sends it.
    pub fn status(code: u16, reason: &str, message: &str) -> Answer {
        Answer::json(code, &status_json(code, reason, message))
    }

    /// A chunked streaming answer (`200`, JSON) whose pieces the returned handle sends.
    pub fn stream() -> (StreamHandle, Answer) {
        let (tx, rx) = channel();
        let answer = Answer {
            kind: Kind::Respond {
                status: 200,
                headers: vec![("Content-Type".into(), "application/json".into())],
                body: Body::Stream(rx),
            },
            delay: Duration::ZERO,
            close: true,
            quiet_close: false,
        };
        (StreamHandle { tx: Some(tx) }, answer)
    }

    /// Accepts the request and then never answers (until the server is dropped).
    pub fn silent() -> Answer {
        Answer {
            kind: Kind::Silent,
            delay: Duration::ZERO,
            close: true,
            quiet_close: false,
        }
    }

    /// Reads the request, then closes the connection without answering.
    pub fn hang_up() -> Answer {
        Answer {
            kind: Kind::HangUp,
            delay: Duration::ZERO,
            close: true,
            quiet_close: false,
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Answer {
        if let Kind::Respond { headers, .. } = &mut self.kind {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Sets the body (sent with `Content-Length`).
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Answer {
        if let Kind::Respond { body, .. } = &mut self.kind {
            *body = Body::Full(bytes.into());
        }
        self
    }

    /// Declares the full body's length but sends only its first `n` bytes, then closes.
    pub fn truncate_after(mut self, n: usize) -> Answer {
        if let Kind::Respond { body, .. } = &mut self.kind {
            if let Body::Full(b) = std::mem::replace(body, Body::Full(Vec::new())) {
                *body = Body::Truncated(b, n);
            }
        }
        self.close = true;
        self
    }

    /// Waits `d` after reading the request before sending anything.
    pub fn delay(mut self, d: Duration) -> Answer {
        self.delay = d;
        self
    }

    /// Closes the connection after this answer (`Connection: close`).
    pub fn close(mut self) -> Answer {
        self.close = true;
        self
    }

    /// Closes the connection after this answer without saying so, as a server or load
    /// balancer does when a kept-alive connection has been idle too long.
    pub fn close_quietly(mut self) -> Answer {
        self.quiet_close = true;
        self
    }
}

/// The test's end of a streamed (chunked) body.
///
/// Each [`send`](Self::send) becomes one HTTP chunk, written and flushed at once.
/// [`end`](Self::end) (or dropping the handle) finishes the body cleanly with the last
/// chunk; [`cut`](Self::cut) closes the connection without it (a broken stream).
pub struct StreamHandle {
    tx: Option<Sender<Piece>>,
}

impl StreamHandle {
    /// Sends `bytes` as one chunk.
    pub fn send(&self, bytes: impl Into<Vec<u8>>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Piece::Data(bytes.into()));
        }
    }

    /// Sends `value` as one JSON line (the watch wire format).
    pub fn send_json_line(&self, value: &serde_json::Value) {
        let mut line = serde_json::to_vec(value).expect("JSON encodes");
        line.push(b'\n');
        self.send(line);
    }

    /// Sends a watch event `{"type": type_, "object": object}` as one line.
    pub fn send_event(&self, type_: &str, object: &serde_json::Value) {
        self.send_json_line(&serde_json::json!({"type": type_, "object": object}));
    }

    /// Ends the body cleanly (terminating chunk) and closes the connection.
    pub fn end(mut self) {
        self.tx = None;
    }

    /// Closes the connection without the terminating chunk.
    pub fn cut(mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Piece::Cut);
        }
    }
}

type Handler = Box<dyn Fn(&Request) -> Answer + Send + Sync>;

struct Shared {
    queue: Mutex<VecDeque<Answer>>,
    handler: Option<Handler>,
    requests: Mutex<Vec<Request>>,
    seen: Condvar,
    connections: AtomicUsize,
    closed: AtomicUsize,
    stopped: Mutex<bool>,
    stop: Condvar,
    stop_flag: AtomicBool,
}

/// The scripted server; stops (and releases silent connections) when dropped.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<thread::JoinHandle<()>>,
}

impl Server {
    /// Starts a server that answers from the queue filled by [`push`](Self::push).
    pub fn start() -> Server {
        Server::spawn(None)
    }

    /// Starts a server that answers every request with `handler(&request)`.
    pub fn with_handler(handler: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Server {
        Server::spawn(Some(Box::new(handler)))
    }

    fn spawn(handler: Option<Handler>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            handler,
            requests: Mutex::new(Vec::new()),
            seen: Condvar::new(),
            connections: AtomicUsize::new(0),
            closed: AtomicUsize::new(0),
            stopped: Mutex::new(false),
            stop: Condvar::new(),
            stop_flag: AtomicBool::new(false),
        });
        let s = shared.clone();
        let accept = thread::spawn(move || {
            for stream in listener.incoming() {
                if s.stop_flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let id = s.connections.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                thread::spawn(move || {
                    serve(stream, id, &s);
                    s.closed.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Server {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Queues the answer to the next unanswered request.
    pub fn push(&self, answer: Answer) {
        self.shared.queue.lock().unwrap().push_back(answer);
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests arrived (panics after `timeout`); returns them all.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Request> {
        let deadline = Instant::now() + timeout;
        let mut seen = self.shared.requests.lock().unwrap();
        while seen.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "waited {timeout:?} for {n} requests, saw {}",
                seen.len()
            );
            seen = self.shared.seen.wait_timeout(seen, left).unwrap().0;
        }
        seen.clone()
    }

    /// How many TCP connections were accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// How many connections the server has finished with (closed) so far.
    pub fn closed_connections(&self) -> usize {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Waits until the server has closed at least `n` connections (panics after `timeout`).
    pub fn wait_for_closed(&self, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.closed_connections() < n {
            assert!(
                Instant::now() < deadline,
                "waited {timeout:?} for {n} closed connections"
            );
            thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop_flag.store(true, Ordering::SeqCst);
        *self.shared.stopped.lock().unwrap() = true;
        self.shared.stop.notify_all();
        // Wake the accept loop so its thread ends.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// A `metav1.Status` failure body.
pub fn status_json(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// Serves one connection until the client closes it or an answer closes it.
fn serve(stream: TcpStream, id: usize, shared: &Shared) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    loop {
        let Some(req) = read_request(&mut reader, id) else {
            return;
        };
        let client_close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let answer = match &shared.handler {
            Some(h) => h(&req),
            None => shared.queue.lock().unwrap().pop_front().unwrap_or_else(|| {
                Answer::status(
                    500,
                    "InternalError",
                    &format!("no scripted answer for {}", req.target),
                )
            }),
        };
        {
            let mut seen = shared.requests.lock().unwrap();
            seen.push(req);
            shared.seen.notify_all();
        }
        if !answer.delay.is_zero() {
            thread::sleep(answer.delay);
        }
        let close = answer.close || client_close;
        let quiet_close = answer.quiet_close;
        let keep = match answer.kind {
            Kind::Silent => {
                let mut stopped = shared.stopped.lock().unwrap();
                while !*stopped {
                    stopped = shared.stop.wait(stopped).unwrap();
                }
                false
            }
            Kind::HangUp => false,
            Kind::Respond {
                status,
                headers,
                body,
            } => {
                write_response(&mut out, status, &headers, body, close).is_ok()
                    && !close
                    && !quiet_close
            }
        };
        if !keep {
            let _ = out.shutdown(Shutdown::Both);
            return;
        }
    }
}

fn write_response(
    out: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: Body,
    close: bool,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    match body {
        Body::Full(b) => {
            head.push_str(&format!("Content-Length: {}\r\n\r\n", b.len()));
            out.write_all(head.as_bytes())?;
            out.write_all(&b)?;
        }
        Body::Truncated(b, n) => {
            head.push_str(&format!("Content-Length: {}\r\n\r\n", b.len()));
            out.write_all(head.as_bytes())?;
            out.write_all(&b[..n.min(b.len())])?;
        }
        Body::Stream(rx) => {
            head.push_str("Transfer-Encoding: chunked\r\n\r\n");
            out.write_all(head.as_bytes())?;
            out.flush()?;
            loop {
                match rx.recv() {
                    Ok(Piece::Data(d)) if d.is_empty() => {}
                    Ok(Piece::Data(d)) => {
                        out.write_all(format!("{:x}\r\n", d.len()).as_bytes())?;
                        out.write_all(&d)?;
                        out.write_all(b"\r\n")?;
                        out.flush()?;
                    }
                    Ok(Piece::Cut) => return Ok(()),
                    Err(_) => {
                        out.write_all(b"0\r\n\r\n")?;
                        break;
                    }
                }
            }
        }
    }
    out.flush()
}

/// Reads one request; `None` when the client closed the connection (or sent garbage).
fn read_request(r: &mut BufReader<TcpStream>, connection: usize) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = find("content-length") {
        let n: usize = n.parse().ok()?;
        body.resize(n, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some(Request {
        method,
        target,
        headers,
        body,
        connection,
    })
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        410 => "Gone",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
