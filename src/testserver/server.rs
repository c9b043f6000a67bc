//! Accepting connections, one thread each; routing a request to discovery, REST verbs or a watch.

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use super::errors::{self, ApiErr};
use super::faults::Faults;
use super::http::{self, Conn, Request, Response};
use super::kinds::{self, Kind};
use super::requestlog::{RequestLog, RequestRecord};
use super::seats::Seats;
use super::store::Store;
use super::{admin, core_events, discovery, managedfields, rest, watch};

/// State shared by every connection thread.
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) faults: Faults,
    /// RBAC denials a test put in force.
    pub(crate) denials: super::denials::Denials,
    pub(crate) log: RequestLog,
    /// Bearer tokens accepted and the user each authenticates as (kube-apiserver's static
    /// token file); empty: no authentication.
    pub(crate) users: RwLock<HashMap<String, String>>,
    /// Users that may impersonate others (see `authz`).
    pub(crate) impersonators: RwLock<std::collections::HashSet<String>>,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    pub(crate) addr: SocketAddr,
    pub(crate) bookmark_interval: Duration,
    /// Send API Priority and Fairness headers on API answers.
    pub(crate) flow_control: bool,
    /// kube-apiserver mode's controller, when on.
    pub(crate) kas: Option<super::kas::KubeApiserver>,
    pub(crate) stopping: AtomicBool,
    /// Playing a stopped server: connections are closed as soon as they are accepted.
    pub(crate) down: AtomicBool,
    /// Connections closed unanswered while `down`.
    pub(crate) refused: AtomicUsize,
    /// The seat limit (API Priority and Fairness) and requests in flight.
    pub(crate) seats: Seats,
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// The UIDs kube-apiserver's APF filter reports: which FlowSchema and PriorityLevel
/// classified the request (fixed here; a real server names its objects' UIDs).
const FLOW_SCHEMA_UID: &str = "6e4d6f53-7465-7374-2d66-6c6f77736368";
const PRIORITY_LEVEL_UID: &str = "6e4d6f53-7465-7374-2d70-72696f726974";

impl Shared {
    /// The API Priority and Fairness headers of an API answer (none when flow control is off).
    pub(crate) fn flow_control_headers(&self) -> Vec<(&'static str, String)> {
        if !self.flow_control {
            return Vec::new();
        }
        vec![
            (
                "X-Kubernetes-PF-FlowSchema-UID",
                FLOW_SCHEMA_UID.to_string(),
            ),
            (
                "X-Kubernetes-PF-PriorityLevel-UID",
                PRIORITY_LEVEL_UID.to_string(),
            ),
        ]
    }

    /// Fresh state for a server on `addr`.
    pub(crate) fn new(
        store: Store,
        log: RequestLog,
        users: HashMap<String, String>,
        tls: Option<Arc<rustls::ServerConfig>>,
        addr: SocketAddr,
        bookmark_interval: Duration,
        kas: Option<super::kas::KubeApiserver>,
    ) -> Self {
        Shared {
            store,
            faults: Faults::default(),
            denials: Default::default(),
            log,
            users: RwLock::new(users),
            impersonators: RwLock::new(Default::default()),
            tls,
            addr,
            bookmark_interval,
            // Every kube-apiserver since 1.20 does flow control; the Builder may say otherwise.
            flow_control: true,
            kas,
            stopping: AtomicBool::new(false),
            down: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
            seats: Seats::default(),
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Drops every open connection (watches included); the listener keeps accepting.
    pub(crate) fn drop_connections(&self) {
        for (_, s) in self.conns.lock().drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.faults.wake();
    }

    /// Joins every connection thread (after the connections were dropped).
    pub(crate) fn join_connections(&self) {
        let threads: Vec<JoinHandle<()>> = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Accepts until `stopping`; each connection gets its own thread.
pub(crate) fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        if shared.down.load(Ordering::SeqCst) {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        shared.conns.lock().insert(id, clone);
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("testserver-conn".into())
            .spawn(move || {
                serve_connection(&s, stream, id);
                s.conns.lock().remove(&id);
            });
        if let Ok(handle) = spawned {
            let mut threads = shared.threads.lock();
            if threads.len() >= 256 {
                // Reap finished threads so a long benchmark does not pile up handles.
                let (done, live): (Vec<_>, Vec<_>) =
                    threads.drain(..).partition(|h| h.is_finished());
                *threads = live;
                for h in done {
                    let _ = h.join();
                }
            }
            threads.push(handle);
        }
    }
}

/// The most of a refused request body read before closing (a client claiming a
/// terabyte is cut off here, as by any server).
const DRAIN_LIMIT: u64 = 256 << 20;

fn serve_connection(shared: &Shared, stream: TcpStream, id: u64) {
    let _ = stream.set_nodelay(true);
    let raw = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let conn = match &shared.tls {
        None => Conn::Plain(stream),
        Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
            Ok(c) => Conn::Tls(Box::new(rustls::StreamOwned::new(c, stream))),
            Err(_) => return,
        },
    };
    let mut reader = BufReader::with_capacity(16 << 10, conn);
    loop {
        let req = match http::read_request(&mut reader) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                if let Some(big) = http::BodyTooLarge::of(&e) {
                    let unread = big.unread;
                    let resp = status_response(&errors::too_large(big.to_string()));
                    let _ = http::write_response(reader.get_mut(), &resp, false, false);
                    // Read what the client still sends (bounded in bytes and time), then
                    // close: closing with unread data would reset the connection and the
                    // client would see "Broken pipe" instead of this answer.
                    let _ = raw.set_read_timeout(Some(Duration::from_secs(2)));
                    http::drain(&mut reader, unread.unwrap_or(u64::MAX).min(DRAIN_LIMIT));
                } else if e.kind() == io::ErrorKind::InvalidData {
                    let resp = status_response(&errors::bad_request(e.to_string()));
                    let _ = http::write_response(reader.get_mut(), &resp, false, false);
                }
                break;
            }
        };
        match handle(shared, &req, &mut reader, id) {
            Ok(true) if req.keep_alive => continue,
            _ => break,
        }
    }
    let _ = raw.shutdown(Shutdown::Both);
}

/// A Status answer.
pub(crate) fn status_response(e: &ApiErr) -> Response {
    let mut r = Response::json(e.code(), serde_json::to_vec(&e.status).unwrap_or_default());
    if let Some(s) = e.retry_after {
        r.headers.push(("Retry-After", s.to_string()));
    }
    r
}

/// What a path names.
enum Route {
    Public(Value),
    Discovery(Option<Value>),
    Resource {
        kind: &'static Kind,
        namespace: Option<String>,
        name: Option<String>,
        subresource: Option<String>,
    },
    /// `core/v1` Events: a read-only view of the `events.k8s.io/v1` ones.
    CoreEvents {
        namespace: Option<String>,
        name: Option<String>,
    },
    NotFound,
}

fn route(shared: &Shared, path: &str) -> Route {
    let segs: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| http::percent_decode(s, false))
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let addr = shared.addr.to_string();
    match s.as_slice() {
        ["version"] => Route::Public(discovery::version()),
        ["healthz"] | ["readyz"] | ["livez"] => Route::Public(Value::String("ok".into())),
        ["api"] => Route::Discovery(Some(discovery::core_versions(&addr))),
        ["api", "v1"] => Route::Discovery(Some(discovery::core_resources())),
        ["api", "v1", "events"] => Route::CoreEvents {
            namespace: None,
            name: None,
        },
        ["api", "v1", "namespaces", ns, "events", rest @ ..] if rest.len() <= 1 => {
            Route::CoreEvents {
                namespace: Some(ns.to_string()),
                name: rest.first().map(|n| n.to_string()),
            }
        }
        ["openapi", "v3"] => Route::Discovery(Some(discovery::openapi_v3_root())),
        ["openapi", "v3", "apis", g, v] => {
            Route::Discovery(discovery::openapi_v3_group_version(g, v))
        }
        ["apis"] => Route::Discovery(Some(discovery::group_list())),
        ["apis", g] => Route::Discovery(discovery::group(g)),
        ["apis", g, v] => Route::Discovery(discovery::resource_list(g, v)),
        ["api", "v1", rest @ ..] => resource_route("", "v1", rest),
        ["apis", g, v, rest @ ..] => resource_route(g, v, rest),
        _ => Route::NotFound,
    }
}

/// A resource path under a group version: `[namespaces/NS/]PLURAL[/NAME[/status]]`.
fn resource_route(g: &str, v: &str, rest: &[&str]) -> Route {
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    let Some((plural, tail)) = rest.split_first() else {
        return Route::NotFound;
    };
    let Some(kind) = kinds::find(g, v, plural) else {
        return Route::NotFound;
    };
    if namespace.is_some() != kind.namespaced && !(kind.namespaced && tail.is_empty()) {
        return Route::NotFound;
    }
    let (name, subresource) = match tail {
        [] => (None, None),
        [n] => (Some(n.to_string()), None),
        [n, "status"] if kind.status_subresource => {
            (Some(n.to_string()), Some("status".to_string()))
        }
        _ => return Route::NotFound,
    };
    Route::Resource {
        kind,
        namespace,
        name,
        subresource,
    }
}

/// kube-apiserver's RBAC refusal, naming what `user` asked for.
fn no_rights(route: &Route, req: &Request, user: &str) -> String {
    match route {
        Route::Resource {
            kind,
            name,
            namespace,
            ..
        } => {
            let verb = verb_of(&req.method, name.is_some(), req.query_bool("watch"));
            let what = if kind.group.is_empty() {
                kind.plural.to_string()
            } else {
                format!("{}.{}", kind.plural, kind.group)
            };
            let name = name
                .as_deref()
                .map(|n| format!(" {n:?}"))
                .unwrap_or_default();
            let scope = match namespace {
                Some(ns) => format!("in the namespace {ns:?}"),
                None => "at the cluster scope".to_string(),
            };
            format!(
                "{what}{name} is forbidden: User {user:?} cannot {verb} resource {:?} in API \
                 group {:?} {scope}",
                kind.plural, kind.group
            )
        }
        _ => format!("forbidden: User {user:?} cannot get path {:?}", req.path),
    }
}

fn verb_of(method: &str, has_name: bool, watch: bool) -> &'static str {
    match (method, has_name) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "other",
    }
}

/// Handles one request on connection `id`; `Ok(true)` when the connection may serve another.
fn handle(
    shared: &Shared,
    req: &Request,
    reader: &mut BufReader<Conn>,
    id: u64,
) -> io::Result<bool> {
    if req.path.starts_with(admin::PREFIX) {
        let (resp, restart) = admin::handle(shared, req);
        let Some(restart) = restart else {
            http::write_response(reader.get_mut(), &resp, req.keep_alive, false)?;
            return Ok(true);
        };
        // Done before the answer (a caller that has it finds every other connection dropped
        // and the data as the restart left it); this connection is answered, then closed.
        shared.conns.lock().remove(&id);
        restart();
        http::write_response(reader.get_mut(), &resp, false, false)?;
        return Ok(false);
    }
    let received = SystemTime::now();
    let epoch = shared.store.state.lock().epoch;
    shared.faults.wait_unpaused(|| {
        shared.stopping.load(Ordering::SeqCst) || shared.store.state.lock().epoch != epoch
    });
    if shared.stopping.load(Ordering::SeqCst) || shared.store.state.lock().epoch != epoch {
        return Ok(false);
    }
    // A seat for the whole request, latency included; watches take none. A rejection is
    // answered at once, as APF's is.
    let seat = if req.query_bool("watch") {
        Ok(None)
    } else {
        shared.seats.take().map(Some)
    };
    let latency = shared.faults.latency();
    if !latency.is_zero() && seat.is_ok() {
        std::thread::sleep(latency);
    }
    let route = route(shared, &req.path);
    // Until it is logged, a reader of the log waits for this request (not for a watch,
    // which logs itself and stays open).
    let handling = (!req.query_bool("watch")).then(|| shared.log.handling());
    let mut rec = RequestRecord {
        verb: "other".into(),
        method: req.method.clone(),
        path: req.path.clone(),
        query: req.raw_query.clone(),
        resource: None,
        subresource: None,
        namespace: None,
        name: None,
        code: 0,
        time: received,
        body: serde_json::from_slice(&req.body).ok(),
        user_agent: req.header("user-agent").map(str::to_string),
        content_type: req.header("content-type").map(str::to_string),
        field_manager: req.query("fieldManager").map(str::to_string),
        uid_precondition: None,
        user: None,
        groups: Vec::new(),
        impersonated_by: None,
    };
    rec.uid_precondition = rec
        .body
        .as_ref()
        .and_then(|b| b.pointer("/preconditions/uid"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let denied = match super::authz::identify(shared, req) {
        Ok(id) => {
            rec.user = id.user;
            rec.groups = id.groups;
            rec.impersonated_by = id.impersonated_by;
            None
        }
        Err(super::authz::Denied::Answer(e)) => Some(e),
        Err(super::authz::Denied::NoRights(user)) => {
            Some(errors::forbidden(no_rights(&route, req, &user)))
        }
    };
    let result: Result<Response, ApiErr> = match route {
        Route::Public(v) => {
            rec.verb = "discovery".into();
            Ok(rest::object(200, &v))
        }
        _ if denied.is_some() => Err(denied.clone().unwrap_or_else(errors::unauthorized)),
        Route::Discovery(doc) => {
            rec.verb = "discovery".into();
            match (req.method.as_str(), doc) {
                ("GET", Some(v)) => Ok(rest::object(200, &v)),
                ("GET", None) => Err(errors::path_not_found()),
                (m, _) => Err(errors::method_not_allowed(m)),
            }
        }
        Route::NotFound => Err(errors::path_not_found()),
        Route::CoreEvents { namespace, name } => {
            rec.verb = verb_of(&req.method, name.is_some(), req.query_bool("watch")).into();
            rec.resource = Some("events".into());
            rec.namespace = namespace.clone();
            rec.name = name.clone();
            core_events::serve(&shared.store, req, namespace.as_deref(), name.as_deref())
        }
        Route::Resource {
            kind,
            namespace,
            name,
            subresource,
        } => {
            let verb = verb_of(&req.method, name.is_some(), req.query_bool("watch"));
            rec.verb = verb.into();
            rec.resource = Some(kind.plural.into());
            rec.subresource = subresource.clone();
            rec.namespace = namespace.clone();
            // A create names its object in the body; log that name even when the request fails.
            rec.name = name.clone().or_else(|| {
                let body = rec.body.as_ref()?;
                Some(body.pointer("/metadata/name")?.as_str()?.to_string())
            });
            let pinned = req
                .query("fieldSelector")
                .and_then(|f| f.strip_prefix("metadata.name="));
            let denied = shared.denials.check(&super::denials::Attributes {
                verb,
                kind,
                namespace: namespace.as_deref(),
                name: name.as_deref().or(pinned),
                user: rec.user.as_deref(),
            });
            if let Err(e) = denied {
                Err(e)
            } else if let Err(retry_after) = &seat {
                Err(errors::injected(
                    429,
                    Some(u32::try_from(*retry_after).unwrap_or(u32::MAX)),
                ))
            } else if let Some((code, retry)) = shared.faults.take_failure(verb) {
                Err(errors::injected(code, retry))
            } else if verb == "watch" {
                return serve_watch(shared, req, kind, namespace.as_deref(), reader, rec, epoch);
            } else {
                resource_verb(
                    shared,
                    req,
                    verb,
                    kind,
                    namespace.as_deref(),
                    name.as_deref(),
                    subresource.is_some(),
                    &mut rec,
                )
            }
        }
    };
    let mut resp = match result {
        Ok(r) => r,
        Err(e) => status_response(&e),
    };
    if rec.verb == "list" && resp.code == 200 {
        if let Some(to) = shared.faults.take_pad() {
            let pad = to.saturating_sub(resp.body.len());
            resp.body.resize(resp.body.len() + pad, b' ');
        }
    }
    resp.headers.extend(shared.flow_control_headers());
    rec.code = resp.code;
    shared.log.push(rec);
    drop(handling);
    let cut = shared.faults.take_cut();
    http::write_response(reader.get_mut(), &resp, req.keep_alive && !cut, cut)?;
    Ok(!cut)
}

#[allow(clippy::too_many_arguments)]
fn resource_verb(
    shared: &Shared,
    req: &Request,
    verb: &str,
    kind: &'static Kind,
    namespace: Option<&str>,
    name: Option<&str>,
    status_only: bool,
    rec: &mut RequestRecord,
) -> Result<Response, ApiErr> {
    let store = &shared.store;
    let ns = namespace.unwrap_or("");
    let name = name.unwrap_or("");
    match verb {
        "get" => rest::get(store, kind, ns, name),
        "list" => rest::list(store, kind, namespace, req),
        "create" if namespace.is_none() && kind.namespaced => Err(errors::path_not_found()),
        "create" => {
            let manager = managedfields::manager_of(req, verb)?;
            let (resp, obj) = rest::create(store, kind, ns, req, &manager)?;
            // generateName: the stored name is known only now.
            rec.name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string);
            Ok(resp)
        }
        "update" => {
            if shared.faults.take_race(verb) {
                race(store, kind, ns, name);
            }
            let manager = managedfields::manager_of(req, verb)?;
            rest::update(store, kind, ns, name, status_only, req, &manager)
        }
        "patch" => {
            let manager = managedfields::manager_of(req, verb)?;
            rest::patch(store, kind, ns, name, status_only, req, &manager)
        }
        "delete" if status_only => Err(errors::method_not_allowed("DELETE")),
        "delete" => {
            if shared.faults.take_race(verb) {
                race(store, kind, ns, name);
            }
            rest::delete(store, kind, ns, name, req)
        }
        _ => Err(errors::method_not_allowed(&req.method)),
    }
}

/// Another writer changes the object (a counter annotation) just before a write lands.
fn race(store: &Store, kind: &'static Kind, ns: &str, name: &str) {
    if let Ok(cur) = store.get(kind, ns, name) {
        let mut o = (*cur).clone();
        let n: u64 = o["metadata"]["annotations"]["testserver/raced"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if !o["metadata"]["annotations"].is_object() {
            o["metadata"]["annotations"] = Value::Object(Default::default());
        }
        o["metadata"]["annotations"]["testserver/raced"] = Value::from((n + 1).to_string());
        let _ = store.seed(kind, ns, o);
    }
}

fn serve_watch(
    shared: &Shared,
    req: &Request,
    kind: &'static Kind,
    namespace: Option<&str>,
    reader: &mut BufReader<Conn>,
    mut rec: RequestRecord,
    epoch: u64,
) -> io::Result<bool> {
    let wr = match watch::parse(req, kind) {
        Ok(w) => w,
        Err(e) => {
            let mut resp = status_response(&e);
            resp.headers.extend(shared.flow_control_headers());
            rec.code = resp.code;
            shared.log.push(rec);
            http::write_response(reader.get_mut(), &resp, req.keep_alive, false)?;
            return Ok(true);
        }
    };
    rec.code = 200;
    shared.log.push(rec);
    match watch::serve(shared, kind, namespace, &wr, reader.get_mut(), epoch)? {
        watch::End::Clean => Ok(true),
        watch::End::Drop => Ok(false),
    }
}

impl Shared {
    /// Simulates an API server restart: every connection and watch drops, data stays; in
    /// kube-apiserver mode its autoregister starts afresh (built-ins re-created) before this returns.
    pub(crate) fn restart(&self, rv: super::store::RvChange) {
        self.store.restart(rv);
        self.drop_connections();
        if let Some(kas) = &self.kas {
            let epoch = self.store.state.lock().epoch;
            kas.wait_pass(epoch);
        }
    }

    /// Simulates an API server restarting on an empty etcd: connections drop, data is gone.
    pub(crate) fn restart_empty(&self, rv: super::store::RvChange) {
        self.store.wipe();
        self.store.restart(rv);
        // A rewind makes old versions "from the future" already; otherwise they are too old.
        if !matches!(rv, super::store::RvChange::Rewind(_)) {
            self.store.expire_history_before_now();
        }
        self.drop_connections();
    }
}
