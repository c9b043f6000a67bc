//! The blocking REST client: one driver that every verb goes through.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::http;

use super::auth::Authenticator;
use super::config::Config;
use super::metrics::{host_label, RestMetrics, ERROR_CODE};
use super::ratelimit::RequestLimiter;
use super::throttle::WriteThrottle;
use super::transport::{Canceller, Transport};
use super::Error;
use crate::api::Status;

/// Largest non-watch answer we read (a full page of 500 large objects fits easily).
pub const MAX_BODY_BYTES: u64 = 64 << 20;

/// A blocking client for one API server; cheap to clone, shares one connection pool.
///
/// # Example
///
/// ```
/// use autoregister::{Client, Config, Controller, ControllerOptions};
///
/// let client = Client::new(Config::new("http://127.0.0.1:8080"))?;
/// assert_eq!(client.config().server, "http://127.0.0.1:8080");
/// // Nothing is sent until the controller starts.
/// let controller = Controller::new(client, ControllerOptions::new("example.com/registered-by"));
/// # drop(controller);
/// # Ok::<(), autoregister::Error>(())
/// ```
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
    /// Set by [`with_canceller`](Client::with_canceller): the canceller and the pooled agent
    /// whose connections it closes.
    cancel: Option<Arc<Cancellable>>,
    /// Asked right before each write is sent (see [`with_write_gate`](Client::with_write_gate)).
    write_gate: Option<WriteGate>,
}

/// Asked right before a write (POST, PUT, DELETE) is sent; `Err(why)` withholds it.
pub type WriteGate = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

struct Cancellable {
    canceller: Canceller,
    agent: ureq::Agent,
}

struct Inner {
    config: Config,
    transport: Transport,
    auth: Authenticator,
    limiter: RequestLimiter,
    /// Holds and paces writes after a 429 (shared by every clone).
    throttle: WriteThrottle,
    metrics: Arc<RestMetrics>,
    /// `host` label of the metrics: the server URL's authority.
    host: String,
    /// `Impersonate-*` headers sent with every request.
    impersonate: Vec<(String, String)>,
}

/// HTTP verbs the client uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    Put,
    /// A server-side apply: `PATCH` of an applied configuration.
    Apply,
    /// An RFC 6902 JSON patch.
    JsonPatch,
    Delete,
}

impl Verb {
    /// The verb as the `method`/`verb` metric labels spell it.
    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Apply | Verb::JsonPatch => "PATCH",
            Verb::Delete => "DELETE",
        }
    }

    fn method(self) -> http::Method {
        match self {
            Verb::Get => http::Method::GET,
            Verb::Post => http::Method::POST,
            Verb::Put => http::Method::PUT,
            Verb::Apply | Verb::JsonPatch => http::Method::PATCH,
            Verb::Delete => http::Method::DELETE,
        }
    }

    /// The `Content-Type` of this verb's body. An apply's configuration is YAML to the
    /// server (`application/apply-patch+yaml`); JSON is YAML, so it is sent as JSON.
    fn content_type(self) -> &'static str {
        match self {
            Verb::Apply => "application/apply-patch+yaml",
            Verb::JsonPatch => "application/json-patch+json",
            _ => "application/json",
        }
    }
}

impl Client {
    /// Builds a client (TLS, credentials, rate limiter) from `config`.
    ///
    /// A server given as a bare `host:port` gets a scheme as kubectl gives it (see
    /// [`Config::with_default_scheme`]); userinfo in the server URL becomes basic auth (see
    /// [`Config::normalize_server`]). Credentials go only over TLS: toward an `http://`
    /// server none is sent (no token, password, client certificate or exec plugin run), as
    /// client-go loads none, and a warning says so.
    pub fn new(config: Config) -> Result<Client, Error> {
        Client::build(config, true)
    }

    /// A client of the same configuration with its own connections and rate limiter (so
    /// its requests never queue behind this one's), which does not log the rate-limit
    /// choice again: this client has (the Events client).
    pub fn sibling(&self) -> Result<Client, Error> {
        Client::build(self.inner.config.clone(), false)
    }

    fn build(config: Config, announce: bool) -> Result<Client, Error> {
        let mut config = config.with_default_scheme();
        config.normalize_server();
        if !config.is_tls() && config.has_credentials() {
            log::warn!(
                "credentials were not sent: the server {} is not TLS (http://), and \
                 credentials go only over TLS",
                config.server
            );
            config.auth = super::config::AuthConfig::None;
            config.tls.client_cert_pem = None;
            config.tls.client_key_pem = None;
        }
        let transport = Transport::new(&config)?;
        let auth = Authenticator::new(&config)?;
        let limiter = RequestLimiter::new(&config, announce);
        let throttle = WriteThrottle::new(config.throttle_writes);
        let host = host_label(&config.server);
        let impersonate = config.impersonate.headers();
        for (name, value) in &impersonate {
            if http::HeaderValue::from_str(value).is_err() {
                return Err(Error::Config(format!(
                    "impersonation: {name} {value:?} is not a valid HTTP header value"
                )));
            }
        }
        Ok(Client {
            inner: Arc::new(Inner {
                impersonate,
                config,
                transport,
                auth,
                limiter,
                throttle,
                metrics: Arc::new(RestMetrics::new()),
                host,
            }),
            max_body_bytes: MAX_BODY_BYTES,
            timeout: None,
            cancel: None,
            write_gate: None,
        })
    }

    /// The proxy requests go through and where it was configured, e.g.
    /// `http://proxy:3128 (from HTTPS_PROXY)` (never its credentials); `None` when direct.
    pub fn proxy(&self) -> Option<&str> {
        self.inner.transport.proxy()
    }

    /// This client with `gate` asked right before every write is put on the wire (after
    /// the rate limiter and the credential, which may have waited): when it refuses, the
    /// write is not sent and fails with [`Error::Cancelled`]. Leader election uses it so a
    /// leader frozen (or starved) past its renew deadline sends nothing when it resumes.
    pub fn with_write_gate(mut self, gate: WriteGate) -> Client {
        self.write_gate = Some(gate);
        self
    }

    /// This client with every request (and watch) ended by `cancel`: a cancel closes the
    /// sockets of requests in flight, wakes a wait for the rate limiter or an exec plugin,
    /// and fails later requests at once with [`Error::Cancelled`]. The handle gets a
    /// connection pool of its own (only its own sockets are closed); credentials, rate
    /// limiter and metrics stay shared.
    pub fn with_canceller(mut self, cancel: &Canceller) -> Client {
        let agent = self.inner.transport.cancellable_agent(cancel);
        self.cancel = Some(Arc::new(Cancellable {
            canceller: cancel.clone(),
            agent,
        }));
        self
    }

    /// Whether this handle's canceller (see [`with_canceller`](Self::with_canceller)) has fired.
    pub fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.canceller.is_cancelled())
    }

    /// Any error of a request whose canceller fired is reported as [`Error::Cancelled`]:
    /// a closed socket shows in whatever way it happens to.
    fn cancelled_as(&self, e: Error, watch: Option<&Canceller>) -> Error {
        if self.is_cancelled() || watch.is_some_and(Canceller::is_cancelled) {
            Error::Cancelled
        } else {
            e
        }
    }

    /// The cancellers that end a request of this handle (plus a watch's own).
    fn cancellers<'a>(&'a self, watch: Option<&'a Canceller>) -> Vec<&'a Canceller> {
        self.cancel
            .as_ref()
            .map(|c| &c.canceller)
            .into_iter()
            .chain(watch)
            .collect()
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

    /// GETs `path` (e.g. `/api/v1/namespaces/kube-system`) as JSON: for reads of kinds the
    /// program has no type for, and of the Service proxy.
    pub fn get_json(&self, path: &str) -> Result<serde_json::Value, Error> {
        let body = self.send(Verb::Get, path, None)?;
        serde_json::from_slice(&body).map_err(|e| Error::Decode(e.to_string()))
    }

    /// POSTs `body` to `path` and reads the answer as JSON (a review such as
    /// `SubjectAccessReview`, which the server answers without storing anything).
    pub fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        let sent = serde_json::to_vec(body).map_err(|e| Error::Decode(e.to_string()))?;
        let answer = self.send(Verb::Post, path, Some(sent))?;
        serde_json::from_slice(&answer).map_err(|e| Error::Decode(e.to_string()))
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
        self.send_with(verb, path, None, Some(cancel))
    }

    fn send_with(
        &self,
        verb: Verb,
        path: &str,
        body: Option<Vec<u8>>,
        cancel: Option<&Canceller>,
    ) -> Result<Vec<u8>, Error> {
        let own_agent = cancel.map(|c| {
            self.inner
                .transport
                .watch_agent(&self.cancellers(Some(c)), None)
        });
        let agent = own_agent
            .as_ref()
            .or(self.cancel.as_ref().map(|c| &c.agent))
            .unwrap_or_else(|| self.inner.transport.agent());
        let deadline = Deadline {
            total: self.timeout.unwrap_or(self.inner.config.timeout),
            head: None,
        };
        let resp = self
            .execute(agent, verb, path, body, deadline, cancel)
            .map_err(|e| self.cancelled_as(e, cancel))?;
        let limit = self.max_body_bytes;
        let mut buf = Vec::new();
        resp.into_body()
            .into_reader()
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|e| self.cancelled_as(io_error(&e), cancel))?;
        if buf.len() as u64 > limit {
            return Err(Error::TooLarge(format!(
                "{verb:?} {path}: more than {limit} bytes"
            )));
        }
        Ok(buf)
    }

    /// Opens a streaming GET (a watch); the body may stay open for `timeout`, but the
    /// answer's head must arrive within the ordinary request timeout, and no read may wait
    /// longer than `idle` for a byte.
    pub(crate) fn open_stream(
        &self,
        path: &str,
        timeout: Duration,
        idle: Option<Duration>,
        cancel: &Canceller,
    ) -> Result<ureq::BodyReader<'static>, Error> {
        let agent = self
            .inner
            .transport
            .watch_agent(&self.cancellers(Some(cancel)), idle);
        let deadline = Deadline {
            total: timeout,
            head: Some(self.inner.config.timeout),
        };
        let resp = self
            .execute(&agent, Verb::Get, path, None, deadline, Some(cancel))
            // A cancelled watch's connection fails in whatever way the closed socket shows.
            .map_err(|e| self.cancelled_as(e, Some(cancel)))?;
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
        watch: Option<&Canceller>,
    ) -> Result<http::Response<ureq::Body>, Error> {
        let url = format!("{}{}", self.inner.config.server, path);
        let cancellers = self.cancellers(watch);
        let cancelled = || cancellers.iter().any(|c| c.is_cancelled());
        let mut retried_auth = false;
        let started_all = Instant::now();
        loop {
            // Fail fast once cancelled: a stopping controller sends nothing more.
            if cancelled() || !self.inner.limiter.acquire(cancelled) {
                return Err(Error::Cancelled);
            }
            // Writes wait out a 429's hold and the write window; reads (the reflector's)
            // have their own backoff.
            let permit = match verb {
                Verb::Get => None,
                _ => match self.inner.throttle.acquire(cancelled) {
                    Some(p) => Some(p),
                    None => return Err(Error::Cancelled),
                },
            };
            let mut builder = http::Request::builder()
                .method(verb.method())
                .uri(&url)
                .header("Accept", "application/json");
            if body.is_some() {
                builder = builder.header("Content-Type", verb.content_type());
            }
            // The credential (an exec plugin may run) counts against the request's time.
            let auth_until = crate::runtime::clock::deadline_after(
                started_all,
                deadline.head.unwrap_or(deadline.total),
            );
            if let Some(auth) = self.inner.auth.header(auth_until, &cancelled)? {
                builder = builder.header("Authorization", auth);
            }
            for (name, value) in &self.inner.impersonate {
                builder = builder.header(name.as_str(), value.as_str());
            }
            if let (Some(gate), false) = (&self.write_gate, verb == Verb::Get) {
                if let Err(why) = gate() {
                    log::debug!("{} {path}: not sent: {why}", verb.as_str());
                    return Err(Error::Cancelled);
                }
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
            let e = error_from_response(resp);
            if let (Some(p), true) = (&permit, e.is_too_many_requests()) {
                if let Some(ra) = e.retry_after() {
                    p.throttled(ra);
                }
            }
            return Err(e);
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
