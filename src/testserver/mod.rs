//! An in-process Kubernetes API server with real semantics, for tests, benchmarks and the demo.
//!
//! Serves `apiregistration.k8s.io/v1` APIServices, `coordination.k8s.io/v1` Leases and
//! `events.k8s.io/v1` Events over
//! HTTP/1.1 (optionally TLS) on loopback, one thread per connection, with the real server's
//! resourceVersion, validation, pagination and watch semantics, plus fault injection and a
//! request log. See [`TestServer`].
//!
//! Behaviour worth knowing when writing tests against it:
//! - A watch from a resourceVersion older than the history gets an `ERROR` event with a 410
//!   `Expired` Status; one newer than the current resourceVersion gets an `ERROR` event with a
//!   504 "Too large resource version" Status (cause `ResourceVersionTooLarge`), as the watch
//!   cache answers; both then end the stream. A list with a too-new resourceVersion is an
//!   HTTP 504 with the same Status.
//! - Without `timeoutSeconds` a watch lasts 1800 s; bookmarks every
//!   [`DEFAULT_BOOKMARK_INTERVAL`] unless [`Builder::bookmark_interval`] says otherwise.
//! - Unknown fields are stored and returned as given, except that `fieldValidation=Strict`
//!   (which kubectl sends) refuses undeclared APIService fields with 400.
//! - `dryRun=All` on a create, update, patch or delete validates and admits (see
//!   [`TestServer::set_admission`]) and answers as kube-apiserver does, storing nothing: no
//!   watch event, the resourceVersion unchanged. Any other `dryRun` value is a 400.
//! - `/openapi/v3` is a stub that only tells kubectl that PATCH takes `fieldValidation`;
//!   `/openapi/v2` is 404, so kubectl before 1.29 needs `apply --validate=false`.
//! - Lists are JSON; kubectl's `as=Table` request gets the plain list and kubectl falls back
//!   to NAME/AGE columns.
//! - Events written through `events.k8s.io/v1` also read through `core/v1` (get and list,
//!   with kube-apiserver's `involvedObject.*`, `reason`, `type`, `source` and
//!   `reportingComponent` field selectors), as kube-apiserver serves one store in both
//!   versions: `kubectl describe` shows them. Writes and watches are `events.k8s.io/v1` only.
//! - Every create, update and patch records `metadata.managedFields` as the real server does
//!   for `Update` operations: one entry per manager (and subresource), updated in place with a
//!   new time. The manager is the `fieldManager` query parameter, else the User-Agent before
//!   its first `/`; a `fieldManager` over 128 bytes is refused with 422 Invalid, as the real
//!   server refuses it. A body's non-empty `managedFields` replaces the stored ones, an empty
//!   list strips them. Field sets are at leaf granularity, without `k:`/`v:` list keys.
//!   [`seed`](TestServer::seed) stores objects as given, without an entry.
//! - Server-side apply (`PATCH` with `application/apply-patch+yaml`, YAML or JSON) as
//!   kube-apiserver's field manager does it: an absent object is created (201); the
//!   manager's `Apply` entry owns exactly the applied fields; a field it stops applying is
//!   removed unless another entry owns it; a changed field another manager owns is a 409
//!   `Conflict` worded as kube-apiserver words it, unless `force=true` takes it over; an
//!   `Update` by another manager takes the fields it changes from appliers. `fieldManager`
//!   is required (422), `force` on another patch type is a 422, an unknown patch type a 415.
//! - The request log ([`RequestRecord`]) keeps each request's query string, User-Agent,
//!   `Content-Type`, `fieldManager` and a delete's UID precondition.
//!
//! **kube-apiserver mode** ([`Builder::kube_apiserver`], `--kube-apiserver` for the binary)
//! makes the server behave as a real kube-apiserver towards APIServices labelled
//! `kube-aggregator.kubernetes.io/automanaged`, so a controller can be tested for
//! real-cluster safety:
//! - It registers the built-in local APIServices of a 1.34+ kube-apiserver (`v1.`, `v1.apps`,
//!   …, see [`builtin_apiservices`]): no `spec.service`, label `onstart`, upstream's group and
//!   version priorities, status `Available=True` (reason `Local`).
//! - It registers the APIServices of the CRD groups it is given
//!   ([`Builder::kube_apiserver_crd_group`], [`TestServer::add_crd_group`]): label `true`,
//!   `groupPriorityMinimum` 1000, `versionPriority` 100, recreated when deleted and their spec
//!   restored when changed.
//! - It runs kube-aggregator's autoregister rules for its own desired set, reacting to every
//!   change at once: it deletes (with a UID precondition) every APIService labelled `true`
//!   that it does not declare (6A), deletes `onstart`-labelled ones it does not declare only
//!   once at its start (5A: objects present when it (re)started), and does not recreate a
//!   deleted built-in (the once rule). Objects without that label are never touched.
//! - Its writes go through the same store code paths as API requests (watches see them),
//!   with the field manager `kube-apiserver`; they are not in the request log (which holds
//!   client requests only) but in [`TestServer::kube_apiserver_writes`].
//! - [`restart`](TestServer::restart) starts its autoregister afresh, as a new process: the
//!   built-ins deleted meanwhile come back and foreign `onstart` objects go (5A).
//! - It plays kube-aggregator's availability controller for APIServices backed by a Service:
//!   `Available` from the Service and its EndpointSlices, then a real discovery check —
//!   `GET /apis/GROUP/VERSION` over TLS to the Service's ClusterIP and port, the serving
//!   certificate verified against `spec.caBundle` for `SERVICE.NAMESPACE.svc` (or not, with
//!   `insecureSkipTLSVerify`), within 5 s — with upstream's reasons and messages
//!   (`FailedDiscoveryCheck` and Go's words for the TLS or HTTP failure, else `Passed`),
//!   repeated every second. Services get a ClusterIP from [`SERVICE_RANGE`], inside
//!   loopback, so a backend listening there is reached without leaving the machine. No
//!   credential is sent to a backend.
//!
//! The same controls are available over HTTP under `/_testserver/` for out-of-process use
//! (not logged, not authenticated, not paused):
//! `GET|DELETE requests`, `GET counts`, `GET rv`, `POST|DELETE faults` (JSON body with any of
//! `latencyMs`, `failNext {count, code, verb}`, `failFraction {fraction, code}`, `retryAfter`,
//! `closeWatchesAfterMs`, `expireNextWatch`, `cutNextResponse`, `pause`), `POST pause`,
//! `POST resume`, `POST restart[?jumpRV=N|rewindRV=N][&empty=true]`, `POST seed/<plural>[?namespace=NS]`,
//! and in kube-apiserver mode `GET kube-apiserver/writes` and `POST|DELETE
//! kube-apiserver/crd-groups` (JSON body `{"group", "version"}`).

mod admin;
mod apply;
mod authz;
mod core_events;
mod core_kinds;
mod denials;
mod discovery;
mod errors;
mod event_validation;
mod faults;
mod http;
mod kas;
mod kinds;
mod managedfields;
mod patch;
mod requestlog;
mod rest;
mod seats;
mod selector;
mod server;
mod store;
mod tls;
mod util;
mod validation;
mod watch;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

pub use core_kinds::SERVICE_RANGE;
pub use faults::{Faults, DEFAULT_RETRY_AFTER};
pub use kas::{builtin_apiservices, KubeApiserverWrite, KUBE_APISERVER_MANAGER};
pub use requestlog::{RequestRecord, DEFAULT_LOG_CAPACITY};
pub use store::{Admission, Mutation, RvChange};

use server::Shared;

/// The user the [`Builder::token`] authenticates as.
pub const TOKEN_USER: &str = "testserver";

/// Events kept for watch replay unless set otherwise.
pub const DEFAULT_HISTORY: usize = 1000;
/// Interval of BOOKMARK events unless set otherwise (the real server sends one about every
/// minute; tests want to see them quickly).
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// A running test API server; stops on [`shutdown`](TestServer::shutdown) or drop.
pub struct TestServer {
    shared: Arc<Shared>,
    url: String,
    ca_pem: Option<Vec<u8>>,
    token: Option<String>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// Options for [`TestServer`].
#[derive(Clone, Debug)]
pub struct Builder {
    addr: String,
    tls: bool,
    client_ca: Option<Vec<u8>>,
    token: Option<String>,
    users: HashMap<String, String>,
    impersonators: Vec<String>,
    history: usize,
    bookmark_interval: Duration,
    log_capacity: usize,
    flow_control: bool,
    kube_apiserver: bool,
    crd_groups: Vec<(String, String)>,
    seat_limit: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            addr: "127.0.0.1:0".into(),
            tls: false,
            client_ca: None,
            token: None,
            users: HashMap::new(),
            impersonators: Vec::new(),
            history: DEFAULT_HISTORY,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            log_capacity: DEFAULT_LOG_CAPACITY,
            flow_control: true,
            kube_apiserver: false,
            crd_groups: Vec::new(),
            seat_limit: 0,
        }
    }
}

impl Builder {
    /// Listen address; port 0 picks a free port (default `127.0.0.1:0`).
    pub fn addr(mut self, addr: impl Into<String>) -> Self {
        self.addr = addr.into();
        self
    }

    /// Serve HTTPS with a generated CA and certificate for 127.0.0.1/localhost.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Serve HTTPS (as [`tls`](Self::tls)) and require, in the handshake, a client
    /// certificate signed by this CA (PEM): x509 client authentication. A bad or missing
    /// certificate fails the handshake; a token, if also set, is still required.
    pub fn client_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls = true;
        self.client_ca = Some(pem.into());
        self
    }

    /// Require `Authorization: Bearer <token>` on API requests (401 otherwise).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Accept `Authorization: Bearer <token>` as user `name`, as kube-apiserver's static token
    /// file does (the request log names the user); repeatable, and beside
    /// [`token`](Self::token). With any token set, requests without a known one get 401.
    pub fn user(mut self, token: impl Into<String>, name: impl Into<String>) -> Self {
        self.users.insert(token.into(), name.into());
        self
    }

    /// Let user `name` impersonate (kube-apiserver's `impersonate` verb on users, groups,
    /// uids and extras); repeatable. Others sending `Impersonate-*` headers get 403.
    pub fn impersonator(mut self, name: impl Into<String>) -> Self {
        self.impersonators.push(name.into());
        self
    }

    /// Events kept for watch replay; older resourceVersions get 410 Expired.
    pub fn history(mut self, events: usize) -> Self {
        self.history = events;
        self
    }

    /// Interval between BOOKMARK events on watches that allow them.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// Answer API requests with API Priority and Fairness headers (`X-Kubernetes-PF-*`), as
    /// every kube-apiserver since 1.20 does (default on); off plays an older or proxied server.
    pub fn flow_control(mut self, on: bool) -> Self {
        self.flow_control = on;
        self
    }

    /// Most request records kept (counters are unbounded).
    pub fn log_capacity(mut self, n: usize) -> Self {
        self.log_capacity = n;
        self
    }

    /// kube-apiserver mode: built-in APIServices and kube-apiserver's own autoregister rules
    /// for the kube-aggregator label (see the module documentation).
    pub fn kube_apiserver(mut self, on: bool) -> Self {
        self.kube_apiserver = on;
        self
    }

    /// In kube-apiserver mode, also keep `<version>.<group>` registered as kube-apiserver does
    /// for a CRD group (label `true`, recreated and restored). Repeatable.
    pub fn kube_apiserver_crd_group(
        mut self,
        group: impl Into<String>,
        version: impl Into<String>,
    ) -> Self {
        self.crd_groups.push((group.into(), version.into()));
        self
    }

    /// Serve at most `k` API requests at once (watches not counted) and answer the rest
    /// `429` with `Retry-After` at once, as API Priority and Fairness does for a saturated
    /// priority level; 0 (the default): no limit. See [`TestServer::set_seat_limit`].
    pub fn seat_limit(mut self, k: usize) -> Self {
        self.seat_limit = k;
        self
    }

    /// Binds and starts serving; returns once connections are accepted (in kube-apiserver
    /// mode, once the built-in APIServices are registered).
    pub fn start(self) -> std::io::Result<TestServer> {
        if !self.crd_groups.is_empty() && !self.kube_apiserver {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "CRD groups need kube-apiserver mode",
            ));
        }
        let listener = TcpListener::bind(&self.addr)?;
        let addr = listener.local_addr()?;
        let tls = if self.tls {
            Some(tls::generate(self.client_ca.as_deref())?)
        } else {
            None
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let mut shared = Shared::new(
            store::Store::new(self.history),
            requestlog::RequestLog::new(self.log_capacity),
            {
                let mut users = self.users;
                if let Some(t) = &self.token {
                    users.insert(t.clone(), TOKEN_USER.to_string());
                }
                users
            },
            tls.as_ref().map(|t| t.config.clone()),
            addr,
            self.bookmark_interval,
            self.kube_apiserver
                .then(|| kas::KubeApiserver::new(&self.crd_groups)),
        );
        shared.flow_control = self.flow_control;
        shared.impersonators = RwLock::new(self.impersonators.into_iter().collect());
        shared.seats.set_limit(self.seat_limit);
        let shared = Arc::new(shared);
        if let Err(e) = kas::KubeApiserver::start(&shared) {
            shared.store.shutdown();
            return Err(e);
        }
        let s = shared.clone();
        let accept = match std::thread::Builder::new()
            .name("testserver-accept".into())
            .spawn(move || server::accept_loop(s, listener))
        {
            Ok(a) => a,
            Err(e) => {
                shared.store.shutdown();
                if let Some(k) = &shared.kas {
                    k.join();
                }
                return Err(e);
            }
        };
        Ok(TestServer {
            shared,
            url,
            ca_pem: tls.map(|t| t.ca_pem),
            token: self.token,
            accept: Mutex::new(Some(accept)),
        })
    }
}

impl TestServer {
    /// A plain-HTTP server on `127.0.0.1:0` with default options.
    ///
    /// Panics when loopback cannot be bound (a broken test machine).
    pub fn start() -> TestServer {
        match Builder::default().start() {
            Ok(s) => s,
            Err(e) => panic!("cannot start the test API server: {e}"),
        }
    }

    /// Options for a server.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The CA certificate (PEM) to trust, when serving TLS.
    pub fn ca_pem(&self) -> Option<Vec<u8>> {
        self.ca_pem.clone()
    }

    /// The bearer token required, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Accepts `token` as user `name` from now on (see [`Builder::user`]).
    pub fn add_user(&self, token: impl Into<String>, name: impl Into<String>) {
        self.shared.users.write().insert(token.into(), name.into());
    }

    /// A client configuration for this server: URL, CA, token, and no client-side rate limit.
    pub fn client_config(&self) -> crate::client::Config {
        let mut c = crate::client::Config::new(self.url.clone());
        c.tls.ca_pem = self.ca_pem.clone();
        if let Some(t) = &self.token {
            c.auth = crate::client::AuthConfig::Token(t.clone());
        }
        c.qps = 0.0;
        c.origin = format!("test server {}", self.url);
        c
    }

    /// Writes a kubeconfig (cluster, user, context `testserver`) pointing at this server.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// The kubeconfig text [`write_kubeconfig`](Self::write_kubeconfig) writes.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with_token(self.token.as_deref())
    }

    /// A kubeconfig for this server that authenticates with `token` (none: anonymous).
    pub fn kubeconfig_with_token(&self, token: Option<&str>) -> String {
        use base64::Engine as _;
        let mut cluster = format!("    server: {}\n", self.url);
        if let Some(ca) = &self.ca_pem {
            cluster.push_str(&format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(ca)
            ));
        }
        let user = match token {
            Some(t) => format!("  user:\n    token: {t}\n"),
            None => "  user: {}\n".to_string(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: testserver\n  cluster:\n{cluster}users:\n- name: testserver\n{user}contexts:\n- name: testserver\n  context:\n    cluster: testserver\n    user: testserver\ncurrent-context: testserver\n"
        )
    }

    /// Every request answered, in the order they arrived (a cause before its effects),
    /// admin requests excluded. Requests being handled are waited for, so a write whose
    /// effect the store already shows is in the log.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.records()
    }

    /// Forgets the request log and the counters.
    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Requests of `verb` (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `discovery`) since the last clear.
    pub fn count(&self, verb: &str) -> usize {
        self.shared.log.count(verb)
    }

    /// Every per-verb counter.
    pub fn counts(&self) -> HashMap<String, usize> {
        self.shared.log.counts()
    }

    /// Stores `obj` as given, bypassing validation (creates or replaces; the server fills
    /// resourceVersion, and uid/creationTimestamp/generation when missing). Watches see it.
    ///
    /// Panics on an unknown `kind_plural` or an object without a name (a broken test).
    pub fn seed(&self, kind_plural: &str, namespace: Option<&str>, obj: Value) -> Value {
        let Some(kind) = kinds::by_plural(kind_plural) else {
            panic!("seed: unknown resource {kind_plural:?}");
        };
        match self.shared.store.seed(kind, namespace.unwrap_or(""), obj) {
            Ok(o) => (*o).clone(),
            Err(e) => panic!("seed: {:?}", e.status.message),
        }
    }

    /// The stored object, if any.
    pub fn get_object(
        &self,
        kind_plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let kind = kinds::by_plural(kind_plural)?;
        self.shared
            .store
            .get(kind, namespace.unwrap_or(""), name)
            .ok()
            .map(|o| (*o).clone())
    }

    /// Every stored object of a kind (in one namespace, or all), in key order.
    pub fn list_objects(&self, kind_plural: &str, namespace: Option<&str>) -> Vec<Value> {
        let st = self.shared.store.state.lock();
        st.objects
            .iter()
            .filter(|((p, ns, _), _)| *p == kind_plural && namespace.is_none_or(|n| n == ns))
            .map(|(_, o)| (**o).clone())
            .collect()
    }

    /// Creates an object as another writer would through the API (defaulting, validation,
    /// managedFields entry for `manager`, watch event); the error is the Status the API
    /// would answer.
    ///
    /// Panics on an unknown `kind_plural` (a broken test).
    pub fn create_object_as(
        &self,
        manager: &str,
        kind_plural: &str,
        namespace: Option<&str>,
        obj: Value,
    ) -> Result<Value, Box<crate::api::Status>> {
        let kind = known_kind(kind_plural);
        self.shared
            .store
            .create(kind, namespace.unwrap_or(""), obj, manager, false)
            .map(|o| (*o).clone())
            .map_err(|e| e.status)
    }

    /// Edits an object as another writer would with a PUT of the current object (validation,
    /// resourceVersion bump, managedFields entry for `manager`, watch event; a no-op edit is
    /// not a write). `edit` runs under the store lock on a copy of the current object and must
    /// not call back into the server.
    ///
    /// Panics on an unknown `kind_plural` (a broken test).
    pub fn update_object_as(
        &self,
        manager: &str,
        kind_plural: &str,
        namespace: Option<&str>,
        name: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<Value, Box<crate::api::Status>> {
        let kind = known_kind(kind_plural);
        self.shared
            .store
            .update(
                kind,
                namespace.unwrap_or(""),
                name,
                false,
                manager,
                false,
                |cur| {
                    let mut new = cur.clone();
                    edit(&mut new);
                    Ok(new)
                },
            )
            .map(|o| (*o).clone())
            .map_err(|e| e.status)
    }

    /// Deletes an object as a client would without preconditions; returns what was deleted.
    /// (A delete names no manager in the API; this is "another writer deletes it".)
    pub fn delete_object(
        &self,
        kind_plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let kind = kinds::by_plural(kind_plural)?;
        self.shared
            .store
            .delete(
                kind,
                namespace.unwrap_or(""),
                name,
                &Default::default(),
                false,
            )
            .ok()
            .map(|o| (*o).clone())
    }

    /// Forbids `verb` (`get`, `list`, `watch`, `create`, ...) on `resource` (plural) as a
    /// missing RBAC grant would: 403 Forbidden, worded as kube-apiserver's RBAC authorizer.
    /// `namespace` and `name` narrow it (a list or watch is named by a `metadata.name=`
    /// field selector, as for `resourceNames`).
    pub fn deny(&self, verb: &str, resource: &str, namespace: Option<&str>, name: Option<&str>) {
        self.shared.denials.deny(verb, resource, namespace, name);
    }

    /// Lifts every [`deny`](Self::deny).
    pub fn allow_all(&self) {
        self.shared.denials.allow_all();
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.current_rv()
    }

    /// Every write kube-apiserver's own controllers made (kube-apiserver mode; else empty).
    pub fn kube_apiserver_writes(&self) -> Vec<KubeApiserverWrite> {
        self.shared
            .kas
            .as_ref()
            .map_or_else(Vec::new, |k| k.writes())
    }

    /// kube-apiserver mode: a CRD group version appears (as when a CRD is created); returns
    /// once its autoregister has seen it (the APIService exists then).
    ///
    /// Panics when the server is not in kube-apiserver mode (a broken test).
    pub fn add_crd_group(&self, group: &str, version: &str) {
        self.kube_apiserver_mode()
            .set_crd_group(&self.shared, group, version, true);
    }

    /// kube-apiserver mode: a CRD group version goes away (as when its CRD is deleted); its
    /// APIService is deleted (6A) before this returns.
    ///
    /// Panics when the server is not in kube-apiserver mode (a broken test).
    pub fn remove_crd_group(&self, group: &str, version: &str) {
        self.kube_apiserver_mode()
            .set_crd_group(&self.shared, group, version, false);
    }

    fn kube_apiserver_mode(&self) -> &kas::KubeApiserver {
        match &self.shared.kas {
            Some(k) => k,
            None => panic!("the test server is not in kube-apiserver mode"),
        }
    }

    /// Installs an admission policy, as a ValidatingAdmissionPolicy would be: every create
    /// and update (dry runs included) of an object passes `policy(plural, object)` after
    /// validation, and `Some(why)` refuses it with 422 Invalid. `None` removes the policy.
    pub fn set_admission(&self, policy: Option<Admission>) {
        *self.shared.store.admission.lock() = policy;
    }

    /// Installs a mutating admission policy for creates, as a MutatingAdmissionPolicy or a
    /// webhook would be: every create of an object passes through `mutation(plural,
    /// object)` before validation. `None` removes it.
    pub fn set_mutation(&self, mutation: Option<Mutation>) {
        *self.shared.store.mutation.lock() = mutation;
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Sets the seat limit (see [`Builder::seat_limit`]; 0: none) from the next request on.
    pub fn set_seat_limit(&self, k: usize) {
        self.shared.seats.set_limit(k);
    }

    /// Requests answered `429` for want of a seat so far.
    pub fn seat_rejections(&self) -> usize {
        self.shared.seats.rejected()
    }

    /// Stops answering, as a stopped API server: every open connection (watches too) is
    /// dropped, and from now on every new one is closed as soon as it is accepted (and
    /// counted, see [`refused_connections`](Self::refused_connections)), until
    /// [`come_back`](Self::come_back). The data stays.
    pub fn go_down(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        self.shared.drop_connections();
    }

    /// Answers again after [`go_down`](Self::go_down), with the data it had.
    pub fn come_back(&self) {
        self.shared.down.store(false, Ordering::SeqCst);
    }

    /// Connections closed unanswered while down, since start: every attempt a client
    /// made to reach the stopped server.
    pub fn refused_connections(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Drops every connection (watches included) and keeps the data, as an API server restart
    /// does; `rv` can move the resourceVersion forward or back. In kube-apiserver mode its
    /// autoregister starts afresh and has made its first pass when this returns.
    pub fn restart(&self, rv: RvChange) {
        self.shared.restart(rv);
    }

    /// Like [`restart`](Self::restart), but the server comes back with no objects (an etcd
    /// lost or restored from a backup older than everything); the resourceVersion moves on
    /// by one (or as `rv` says), and a watch from an older version is answered 410, as by a
    /// restarted kube-apiserver, whose watch cache begins at its restart. (Data lost under a
    /// running server, which only a relist notices: [`wipe_silently`](Self::wipe_silently).)
    pub fn restart_empty(&self, rv: RvChange) {
        self.shared.restart_empty(rv);
    }

    /// Loses every object without dropping a connection or sending an event, as an etcd
    /// restored under a running API server: only a client's periodic relist notices.
    pub fn wipe_silently(&self) {
        self.shared.store.wipe();
    }

    /// Stops accepting, drops every connection, ends watches and joins every thread. Idempotent.
    pub fn shutdown(&self) {
        let Some(accept) = self.accept.lock().take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with one last connection.
        let _ = TcpStream::connect_timeout(&self.shared.addr, Duration::from_secs(1));
        let _ = accept.join();
        self.shared.store.shutdown();
        if let Some(k) = &self.shared.kas {
            k.join();
        }
        self.shared.faults.wake();
        self.shared.drop_connections();
        self.shared.join_connections();
    }
}

fn known_kind(kind_plural: &str) -> &'static kinds::Kind {
    match kinds::by_plural(kind_plural) {
        Some(k) => k,
        None => panic!("unknown resource {kind_plural:?}"),
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
