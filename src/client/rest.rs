//! The blocking REST client: one driver that every verb goes through.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::http;

use super::auth::Authenticator;
use super::config::Config;
use super::metrics::{host_label, RestMetrics, ERROR_CODE};
use super::ratelimit::RequestLimiter;
use super::transport::{Canceller, Transport};
use super::Error;
use crate::api::Status;

/// Largest non-watch answer we read (a full page of 500 large objects fits easily).
pub const MAX_BODY_BYTES: u64 = 64 << 20;

/// A blocking client for one API server; cheap to clone, shares one connection pool.
///
/// Throttling answers (`429`, `503` with `Retry-After`) are returned to the caller as
/// [`Error::Api`] with [`Error::retry_after`] set; the client never sleeps and retries by
/// itself. The caller (workqueue, reflector) already has backoff and a stop signal, so a
/// shutdown is never stuck behind a hidden retry sleep inside a request.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// Per-handle so a test (or a caller expecting huge lists) can change it without
    /// touching the shared pool.
    max_body_bytes: u64,
    /// Per-handle override of `Config::timeout` (leader election bounds its requests tighter).
    timeout: Option<Duration>,
}

struct Inner {
    config: Config,
    transport: Transport,
    auth: Authenticator,
    limiter: RequestLimiter,
    metrics: Arc<RestMetrics>,
    /// `host` label of the metrics: the server URL's authority.
    host: String,
}

/// HTTP verbs the client uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    Put,
    Delete,
}

impl Verb {
    /// The verb as the `method`/`verb` metric labels spell it.
    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Delete => "DELETE",
        }
    }

    fn method(self) -> http::Method {
        match self {
            Verb::Get => http::Method::GET,
            Verb::Post => http::Method::POST,
            Verb::Put => http::Method::PUT,
            Verb::Delete => http::Method::DELETE,
        }
    }
}

impl Client {
    /// Builds a client (TLS, credentials, rate limiter) from `config`.
    pub fn new(config: Config) -> Result<Client, Error> {
        let transport = Transport::new(&config)?;
        let auth = Authenticator::new(&config)?;
        let limiter = RequestLimiter::new(&config);
        let host = host_label(&config.server);
        Ok(Client {
            inner: Arc::new(Inner {
                config,
                transport,
                auth,
                limiter,
                metrics: Arc::new(RestMetrics::new()),
                host,
            }),
            max_body_bytes: MAX_BODY_BYTES,
            timeout: None,
        })
    }

    /// This client with a different limit on non-watch answers (default [`MAX_BODY_BYTES`]).
    pub fn with_max_body_bytes(mut self, limit: u64) -> Client {
        self.max_body_bytes = limit;
        self
    }

    /// This client with a different total time for one non-watch request (default
    /// `Config::timeout`); shares the connection pool, credentials and rate limiter.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = Some(timeout);
        self
    }

    /// The configuration this client was built from.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Request counts and latencies of this client and all its clones (for `/metrics`).
    pub fn metrics(&self) -> &Arc<RestMetrics> {
        &self.inner.metrics
    }

    /// Sends a request and returns the body of a 2xx answer (at most the body limit).
    pub(crate) fn send(
        &self,
        verb: Verb,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, Error> {
        self.send_with(verb, path, body, None)
    }

    /// [`send`](Self::send) that `cancel` can end from another thread; it uses its own
    /// connection (not the pool), as a watch does.
    pub(crate) fn send_cancellable(
        &self,
        verb: Verb,
        path: &str,
        cancel: &Canceller,
    ) -> Result<Vec<u8>, Error> {
        self.send_with(verb, path, None, Some(cancel)).map_err(|e| {
            if cancel.is_cancelled() {
                Error::Cancelled
            } else {
                e
            }
        })
    }

    fn send_with(
        &self,
        verb: Verb,
        path: &str,
        body: Option<Vec<u8>>,
        cancel: Option<&Canceller>,
    ) -> Result<Vec<u8>, Error> {
        let own_agent = cancel.map(|c| self.inner.transport.watch_agent(c));
        let agent = own_agent
            .as_ref()
            .unwrap_or_else(|| self.inner.transport.agent());
        let deadline = Deadline {
            total: self.timeout.unwrap_or(self.inner.config.timeout),
            head: None,
        };
        let resp = self.execute(agent, verb, path, body, deadline)?;
        let limit = self.max_body_bytes;
        let mut buf = Vec::new();
        resp.into_body()
            .into_reader()
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|e| io_error(&e))?;
        if buf.len() as u64 > limit {
            return Err(Error::TooLarge(format!(
                "{verb:?} {path}: more than {limit} bytes"
            )));
        }
        Ok(buf)
    }

    /// Opens a streaming GET (a watch); the body may stay open for `timeout`, but the
    /// answer's head must arrive within the ordinary request timeout.
    pub(crate) fn open_stream(
        &self,
        path: &str,
        timeout: Duration,
        cancel: &Canceller,
    ) -> Result<ureq::BodyReader<'static>, Error> {
        let agent = self.inner.transport.watch_agent(cancel);
        let deadline = Deadline {
            total: timeout,
            head: Some(self.inner.config.timeout),
        };
        let resp = self
            .execute(&agent, Verb::Get, path, None, deadline)
            // A cancelled watch's connection fails in whatever way the closed socket shows.
            .map_err(|e| {
                if cancel.is_cancelled() {
                    Error::Cancelled
                } else {
                    e
                }
            })?;
        Ok(resp.into_body().into_reader())
    }

    /// The one driver: rate limit, credentials, send, classify; retries once after a 401
    /// when the credentials could be refreshed (rotated token file, expired exec token).
    fn execute(
        &self,
        agent: &ureq::Agent,
        verb: Verb,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Deadline,
    ) -> Result<http::Response<ureq::Body>, Error> {
        let url = format!("{}{}", self.inner.config.server, path);
        let mut retried_auth = false;
        loop {
            self.inner.limiter.acquire();
            let mut builder = http::Request::builder()
                .method(verb.method())
                .uri(&url)
                .header("Accept", "application/json");
            if body.is_some() {
                builder = builder.header("Content-Type", "application/json");
            }
            if let Some(auth) = self.inner.auth.header()? {
                builder = builder.header("Authorization", auth);
            }
            // No body at all (not an empty one) on GET: ureq would otherwise send
            // `Content-Length: 0`, which some proxies reject on a GET.
            let started = Instant::now();
            let result = match body.as_deref() {
                Some(b) => run_one(agent, builder.body(b), deadline, &url),
                None => run_one(agent, builder.body(()), deadline, &url),
            };
            // Every attempt is counted, with "<error>" when no answer came (as client-go).
            let code_label = match &result {
                Ok(resp) => resp.status().as_str().to_string(),
                Err(_) => ERROR_CODE.to_string(),
            };
            self.inner.metrics.observe(
                &code_label,
                verb.as_str(),
                &self.inner.host,
                started.elapsed(),
            );
            let resp = result?;
            self.inner.limiter.observe(resp.headers());
            let code = resp.status().as_u16();
            if (200..300).contains(&code) {
                return Ok(resp);
            }
            if code == 401 && !retried_auth && self.inner.auth.invalidate() {
                retried_auth = true;
                continue;
            }
            return Err(error_from_response(resp));
        }
    }
}

/// How long one request may take.
#[derive(Clone, Copy, Debug)]
struct Deadline {
    /// Everything: connect, send, head and the whole body.
    total: Duration,
    /// Waiting for the answer's head alone (watches: far shorter than `total`).
    head: Option<Duration>,
}

/// Sends one request under `deadline`.
fn run_one<S: ureq::AsSendBody>(
    agent: &ureq::Agent,
    request: Result<http::Request<S>, http::Error>,
    deadline: Deadline,
    url: &str,
) -> Result<http::Response<ureq::Body>, Error> {
    let request = request.map_err(|e| Error::Config(format!("bad request {url}: {e}")))?;
    // The request-level config starts as a copy of the agent's (status-as-error off,
    // user agent), so only the deadlines change here.
    let request = agent
        .configure_request(request)
        .timeout_global(Some(deadline.total))
        .timeout_recv_response(deadline.head)
        .build();
    agent.run(request).map_err(|e| map_ureq(e, url))
}

/// Turns a non-2xx answer into a classified [`Error`], reading at most 1 MiB of its body.
fn error_from_response(resp: http::Response<ureq::Body>) -> Error {
    let code = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("Retry-After")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut buf = Vec::new();
    // A broken error body still leaves us the code; ignore read errors here.
    let _ = resp
        .into_body()
        .into_reader()
        .take(1 << 20)
        .read_to_end(&mut buf);
    let status = serde_json::from_slice::<Status>(&buf)
        .ok()
        .filter(|s| s.kind.as_deref() == Some("Status"));
    let status = status.or_else(|| {
        let text = String::from_utf8_lossy(&buf).trim().to_string();
        (!text.is_empty()).then(|| {
            let mut s = Status::failure(code, super::error::reason_for_code(code), text);
            s.message = s.message.map(|m| m.chars().take(512).collect());
            s
        })
    });
    Error::api(code, status, retry_after)
}

/// Maps a ureq failure (no HTTP answer) to our classification.
pub(crate) fn map_ureq(e: ureq::Error, url: &str) -> Error {
    match e {
        ureq::Error::Timeout(t) => Error::Timeout(format!("{url}: {t:?}")),
        ureq::Error::HostNotFound => Error::Connect(format!("{url}: host not found")),
        ureq::Error::ConnectionFailed => Error::Connect(format!("{url}: connection failed")),
        ureq::Error::Tls(m) => Error::Tls(format!("{url}: {m}")),
        ureq::Error::Rustls(e) => Error::Tls(format!("{url}: {e}")),
        ureq::Error::Pem(e) => Error::Config(format!("{url}: PEM: {e}")),
        ureq::Error::BadUri(m) => Error::Config(format!("bad URL {url}: {m}")),
        ureq::Error::Http(e) => Error::Config(format!("bad request {url}: {e}")),
        ureq::Error::BodyExceedsLimit(n) => Error::TooLarge(format!("{url}: more than {n} bytes")),
        ureq::Error::Io(io) => {
            let m = format!("{url}: {io}");
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::AddrNotAvailable
                | std::io::ErrorKind::NotFound => Error::Connect(m),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Error::Timeout(m),
                _ => Error::Io(m),
            }
        }
        other => Error::Io(format!("{url}: {other}")),
    }
}

/// Maps an error from reading a body (ureq wraps its own errors in io::Error).
pub(crate) fn io_error(e: &std::io::Error) -> Error {
    let text = e.to_string();
    match e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>()) {
        Some(ureq::Error::Timeout(_)) => return Error::Timeout(text),
        Some(ureq::Error::BodyExceedsLimit(_)) => return Error::TooLarge(text),
        _ => {}
    }
    match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Error::Timeout(text),
        _ if text.contains("timeout") || text.contains("Timeout") => Error::Timeout(text),
        _ => Error::Io(text),
    }
}
