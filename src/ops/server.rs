//! The listener: an accept thread, one short-lived thread per connection, routing, shutdown.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::health::{liveness, readiness};
use super::metrics::{render_all, CONTENT_TYPE};
use super::request::{read_request, ReadError, Request};
use super::sources::OpsSources;
use crate::runtime::clock::deadline_after;

/// Time allowed to receive a request head, and to send an answer: a scraper's default
/// timeout is 10 s, and a client slower than that only holds its own thread.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once, each on its own small thread: far more than a probe storm
/// or a handful of stalled clients, so `/healthz` is answered while others idle. Beyond
/// it a connection is answered `503` at once and closed, so a flood cannot pile up threads.
pub const MAX_CONNECTIONS: usize = 512;

/// Stack of a connection thread: it parses one small request head and renders text.
const CONN_STACK: usize = 128 * 1024;

/// Time allowed to send the `503` answer to a connection over the limit.
const BUSY_WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// After answering, unread request bytes are drained for at most this long (and
/// [`LINGER_BYTES`]) before closing: closing a socket with unread input resets it, and the
/// client could lose the answer (a `400` for an oversized head, say).
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: u64 = 64 * 1024;

const TEXT: &str = "text/plain; charset=utf-8";

/// A running operations endpoint; stops on [`shutdown`](OpsServer::shutdown) or drop.
pub struct OpsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    sources: OpsSources,
    stopping: AtomicBool,
    conns: Mutex<Conns>,
}

/// Open connections (clones of their sockets, so shutdown can unblock their threads).
#[derive(Default)]
struct Conns {
    next_id: u64,
    open: HashMap<u64, TcpStream>,
    threads: Vec<JoinHandle<()>>,
}

impl OpsServer {
    /// Binds `addr` (`host:port`; `:port` means every IPv4 interface; port 0 picks a free
    /// port) and serves `/livez`, `/healthz`, `/readyz` and `/metrics` from `sources`.
    pub fn start(addr: &str, sources: OpsSources) -> io::Result<OpsServer> {
        let listener = TcpListener::bind(bind_addr(addr).as_str())?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            sources,
            stopping: AtomicBool::new(false),
            conns: Mutex::new(Conns::default()),
        });
        let s = shared.clone();
        let accept = thread::Builder::new()
            .name("ops-accept".into())
            .spawn(move || accept_loop(&listener, &s))?;
        info!("operations endpoint on http://{local} (/livez, /healthz, /readyz, /metrics)");
        Ok(OpsServer {
            addr: local,
            shared,
            accept: Mutex::new(Some(accept)),
        })
    }

    /// The address actually bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes open connections and joins every thread. Idempotent.
    pub fn shutdown(&self) {
        let Some(accept) = self.accept.lock().take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with one last connection of our own.
        match TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1)) {
            Ok(_) => {
                let _ = accept.join();
            }
            // Leave the thread: it ends at the next connection it accepts.
            Err(e) => warn!("operations endpoint: cannot wake the accept thread: {e}"),
        }
        let threads = {
            let mut conns = self.shared.conns.lock();
            for stream in conns.open.values() {
                let _ = stream.shutdown(Shutdown::Both);
            }
            std::mem::take(&mut conns.threads)
        };
        for t in threads {
            let _ = t.join();
        }
        debug!("operations endpoint on {} stopped", self.addr);
    }
}

impl Drop for OpsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for OpsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// `:port` is Go's (and Kubernetes flags') spelling of "every interface".
fn bind_addr(addr: &str) -> String {
    if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_string()
    }
}

/// Where to connect to reach our own listener (a wildcard address is not a destination).
fn wake_addr(bound: SocketAddr) -> SocketAddr {
    let ip = match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, bound.port())
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            Ok(stream) => spawn_connection(shared, stream),
            Err(e) => {
                // Out of descriptors and the like fail again at once: do not spin on them.
                debug!("operations endpoint: accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn spawn_connection(shared: &Arc<Shared>, stream: TcpStream) {
    let mut conns = shared.conns.lock();
    conns.threads.retain(|t| !t.is_finished());
    if conns.open.len() >= MAX_CONNECTIONS {
        drop(conns);
        debug!("operations endpoint: {MAX_CONNECTIONS} connections open, answering 503");
        let mut stream = stream;
        let _ = stream.set_write_timeout(Some(BUSY_WRITE_TIMEOUT));
        let _ = Response::text(503, "too many connections\n".into()).write_to(&mut stream);
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let id = conns.next_id;
    conns.next_id += 1;
    conns.open.insert(id, clone);
    let s = shared.clone();
    let spawned = thread::Builder::new()
        .name("ops-conn".into())
        .stack_size(CONN_STACK)
        .spawn(move || {
            serve(&s, stream);
            s.conns.lock().open.remove(&id);
        });
    match spawned {
        Ok(t) => conns.threads.push(t),
        Err(e) => {
            conns.open.remove(&id);
            warn!("operations endpoint: cannot start a connection thread: {e}");
        }
    }
}

/// Reads one request, answers it and closes the connection.
fn serve(shared: &Shared, mut stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let deadline = deadline_after(Instant::now(), IO_TIMEOUT);
    let response = match read_request(&mut DeadlineReader::new(&stream, deadline)) {
        Ok(req) => route(shared, &req),
        Err(ReadError::Closed) => return,
        Err(ReadError::Io(e)) => {
            debug!("operations endpoint: {peer}: {e}");
            return;
        }
        Err(ReadError::Bad(why)) => {
            debug!("operations endpoint: {peer}: bad request: {why}");
            Response::text(400, format!("bad request: {why}\n"))
        }
    };
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    if let Err(e) = response.write_to(&mut stream) {
        debug!("operations endpoint: {peer}: writing the answer: {e}");
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let mut rest =
        DeadlineReader::new(&stream, deadline_after(Instant::now(), LINGER)).take(LINGER_BYTES);
    let _ = io::copy(&mut rest, &mut io::sink());
}

fn route(shared: &Shared, req: &Request) -> Response {
    let known = matches!(
        req.path.as_str(),
        "/livez" | "/healthz" | "/readyz" | "/metrics"
    );
    if !known {
        return Response::text(404, "404 page not found\n".into()).head_only(&req.method);
    }
    if req.method != "GET" && req.method != "HEAD" {
        let mut r = Response::text(405, "method not allowed\n".into());
        r.allow = true;
        return r;
    }
    let response = match req.path.as_str() {
        "/livez" | "/healthz" | "/readyz" => {
            let verbose = req
                .query
                .split('&')
                .any(|p| p == "verbose" || p.starts_with("verbose="));
            let r = if req.path == "/readyz" {
                readiness(&shared.sources.checks, verbose)
            } else {
                // As kube components: `/livez`, and `/healthz` (deprecated there) the same.
                liveness(&shared.sources.health, verbose, &req.path[1..])
            };
            Response::text(if r.ready { 200 } else { 503 }, r.body)
        }
        _ => Response {
            status: 200,
            content_type: CONTENT_TYPE,
            body: render_all(&shared.sources.metrics),
            allow: false,
            head_only: false,
        },
    };
    response.head_only(&req.method)
}

struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    /// Send `Allow: GET, HEAD` (a 405).
    allow: bool,
    /// A `HEAD` request: the headers of the `GET` answer, no body.
    head_only: bool,
}

impl Response {
    fn text(status: u16, body: String) -> Response {
        Response {
            status,
            content_type: TEXT,
            body,
            allow: false,
            head_only: false,
        }
    }

    fn head_only(mut self, method: &str) -> Response {
        self.head_only = method == "HEAD";
        self
    }

    fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            503 => "Service Unavailable",
            _ => "",
        };
        let allow = if self.allow {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        };
        let head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: no-cache, private\r\nX-Content-Type-Options: nosniff\r\n\
             {allow}Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        );
        // One write for small answers: fewer packets for a probe.
        let mut out = head.into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        w.write_all(&out)?;
        w.flush()
    }
}

/// Reads from a socket with one deadline for all reads together (a client trickling one
/// byte at a time cannot stretch it).
struct DeadlineReader<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl<'a> DeadlineReader<'a> {
    fn new(stream: &'a TcpStream, deadline: Instant) -> Self {
        DeadlineReader { stream, deadline }
    }
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out"));
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_port_binds_every_interface() {
        assert_eq!(bind_addr(":8080"), "0.0.0.0:8080");
        assert_eq!(bind_addr("127.0.0.1:0"), "127.0.0.1:0");
    }

    #[test]
    fn wildcard_addresses_are_woken_through_loopback() {
        let a: SocketAddr = "0.0.0.0:9".parse().unwrap();
        assert_eq!(wake_addr(a), "127.0.0.1:9".parse().unwrap());
        let a: SocketAddr = "[::]:9".parse().unwrap();
        assert_eq!(wake_addr(a), "[::1]:9".parse().unwrap());
        let a: SocketAddr = "10.1.2.3:9".parse().unwrap();
        assert_eq!(wake_addr(a), a);
    }

    #[test]
    fn head_answers_carry_the_get_length_without_a_body() {
        let r = Response::text(200, "ok\n".into()).head_only("HEAD");
        let mut out = Vec::new();
        r.write_to(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Content-Length: 3\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }
}
