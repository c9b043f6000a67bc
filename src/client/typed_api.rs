//! Typed verbs for one kind: get, list, watch, create, update, apply, patch, delete.

use std::marker::PhantomData;
use std::time::Duration;

use serde::Serialize;

use super::rest::{Client, Verb};
use super::transport::Canceller;
use super::watch::WatchStream;
use super::Error;
use crate::api::{ObjectList, Resource};

/// Extra time a watch body may stay open beyond `timeoutSeconds` before we call it dead.
pub const WATCH_SLACK: Duration = Duration::from_secs(30);

/// Longest watch a server picks by itself when no `timeoutSeconds` is sent
/// (kube-apiserver: random in `[min-request-timeout, 2 × min-request-timeout]`, 1800 s default).
const SERVER_WATCH_TIMEOUT_MAX: Duration = Duration::from_secs(3600);

/// Parameters of a list call.
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// Page size (`limit`).
    pub limit: Option<u32>,
    /// Token from the previous page (`continue`).
    pub continue_token: Option<String>,
    /// `resourceVersion` semantics for the list (e.g. `0` for any cached version).
    pub resource_version: Option<String>,
    /// Label selector, e.g. `kube-aggregator.kubernetes.io/automanaged=true`.
    pub label_selector: Option<String>,
    /// Field selector, e.g. `metadata.name=NAME` (RBAC `resourceNames` can then allow it).
    pub field_selector: Option<String>,
}

/// Parameters of a watch call.
#[derive(Clone, Debug, Default)]
pub struct WatchParams {
    /// Start after this resourceVersion.
    pub resource_version: String,
    /// The server ends the watch after this many seconds; `0` leaves it to the server.
    pub timeout_seconds: u32,
    /// Ask for `BOOKMARK` events.
    pub allow_bookmarks: bool,
    /// Label selector.
    pub label_selector: Option<String>,
    /// Field selector, e.g. `metadata.name=NAME`.
    pub field_selector: Option<String>,
    /// The watch is dead when no byte (event or bookmark) arrives for this long, e.g. a
    /// half-open connection to a server that went away; `None`: only the timeout ends it.
    pub idle_timeout: Option<Duration>,
}

/// Preconditions of a delete.
#[derive(Clone, Debug, Default)]
pub struct DeleteParams {
    /// Delete only if the object still has this UID.
    pub uid: Option<String>,
    /// Delete only if the object still has this resourceVersion.
    pub resource_version: Option<String>,
}

/// A typed handle on one kind (in one namespace, for namespaced kinds).
pub struct Api<K> {
    client: Client,
    namespace: Option<String>,
    field_manager: Option<String>,
    dry_run: bool,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            field_manager: self.field_manager.clone(),
            dry_run: self.dry_run,
            _kind: PhantomData,
        }
    }
}

impl<K: Resource> Api<K> {
    /// All objects of a cluster-scoped kind (or of every namespace).
    pub fn all(client: Client) -> Self {
        Api {
            client,
            namespace: None,
            field_manager: None,
            dry_run: false,
            _kind: PhantomData,
        }
    }

    /// Objects of a namespaced kind in `namespace`.
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Api {
            client,
            namespace: Some(namespace.to_string()),
            field_manager: None,
            dry_run: false,
            _kind: PhantomData,
        }
    }

    /// The namespace this handle works in (`None`: a cluster-scoped kind, or all).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// This handle with a different total time for each non-watch request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.client = self.client.with_timeout(timeout);
        self
    }

    /// This handle with every request ended by `cancel` (see [`Client::with_canceller`]).
    pub fn with_canceller(mut self, cancel: &crate::client::Canceller) -> Self {
        self.client = self.client.with_canceller(cancel);
        self
    }

    /// This handle naming `manager` as the `fieldManager` of every write, so
    /// `metadata.managedFields` shows who wrote what; a server-side apply needs one.
    pub fn with_field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = Some(manager.into()).filter(|m| !m.is_empty());
        self
    }

    /// This handle sending every write as a dry run (`dryRun: [All]`): the server validates
    /// and admits it and answers as for a real write, storing nothing. Creates, updates and
    /// patches (applies too) carry it in the query, deletes in their `DeleteOptions` body,
    /// where kube-apiserver reads each.
    pub fn with_dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// The `fieldManager` this handle writes as, if any.
    pub fn field_manager(&self) -> Option<&str> {
        self.field_manager.as_deref()
    }

    /// A write's query: our field manager, and strict field validation, so a field the
    /// server does not know is refused rather than silently dropped or stored.
    fn with_manager(&self, path: String) -> String {
        self.write_query(false).finish(path)
    }

    /// The query of a write: our field manager, strict validation, a dry run when asked,
    /// and for an apply `force`.
    fn write_query(&self, force: bool) -> Query {
        let mut q = Query::default();
        q.opt("fieldManager", self.field_manager.as_deref());
        q.opt("fieldValidation", Some("Strict"));
        q.opt("dryRun", self.dry_run.then_some("All"));
        q.opt("force", force.then_some("true"));
        q
    }

    /// The client under this handle.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn collection_path(&self) -> String {
        match &self.namespace {
            Some(ns) => format!(
                "{}/namespaces/{}/{}",
                K::group_version_path(),
                encode(ns),
                K::PLURAL
            ),
            None => format!("{}/{}", K::group_version_path(), K::PLURAL),
        }
    }

    fn object_path(&self, name: &str) -> Result<String, Error> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::Config(format!("invalid object name {name:?}")));
        }
        Ok(format!("{}/{}", self.collection_path(), encode(name)))
    }

    /// Reads one object.
    pub fn get(&self, name: &str) -> Result<K, Error> {
        let body = self
            .client
            .send(Verb::Get, &self.object_path(name)?, None)?;
        decode(&body)
    }

    /// Reads one page of objects.
    pub fn list(&self, p: &ListParams) -> Result<ObjectList<K>, Error> {
        let body = self.client.send(Verb::Get, &self.list_path(p), None)?;
        decode(&body)
    }

    /// Reads one page of objects; `cancel` ends the request from another thread (shutdown
    /// during a list from a server that does not answer).
    pub fn list_cancellable(
        &self,
        p: &ListParams,
        cancel: &Canceller,
    ) -> Result<ObjectList<K>, Error> {
        let body = self
            .client
            .send_cancellable(Verb::Get, &self.list_path(p), cancel)?;
        decode(&body)
    }

    fn list_path(&self, p: &ListParams) -> String {
        let mut q = Query::default();
        q.opt("limit", p.limit.map(|l| l.to_string()).as_deref());
        q.opt("continue", p.continue_token.as_deref());
        q.opt("resourceVersion", p.resource_version.as_deref());
        q.opt("labelSelector", p.label_selector.as_deref());
        q.opt("fieldSelector", p.field_selector.as_deref());
        q.finish(self.collection_path())
    }

    /// Opens a watch; events are decoded as they arrive.
    pub fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchStream<K>, Error> {
        let mut q = Query::default();
        q.opt("watch", Some("true"));
        q.opt(
            "resourceVersion",
            Some(&p.resource_version)
                .filter(|v| !v.is_empty())
                .map(String::as_str),
        );
        q.opt("allowWatchBookmarks", p.allow_bookmarks.then_some("true"));
        // `0` omits the parameter: the server then picks up to an hour, and our own body
        // timeout must not cut that short (it once was 0 s + slack = 30 s).
        let server_timeout = if p.timeout_seconds == 0 {
            SERVER_WATCH_TIMEOUT_MAX
        } else {
            q.opt("timeoutSeconds", Some(&p.timeout_seconds.to_string()));
            Duration::from_secs(u64::from(p.timeout_seconds))
        };
        q.opt("labelSelector", p.label_selector.as_deref());
        q.opt("fieldSelector", p.field_selector.as_deref());
        let timeout = server_timeout + WATCH_SLACK;
        let reader = self.client.open_stream(
            &q.finish(self.collection_path()),
            timeout,
            p.idle_timeout,
            cancel,
        )?;
        Ok(WatchStream::new(reader, cancel.clone()))
    }

    /// Creates `obj`; answers the stored object.
    pub fn create(&self, obj: &K) -> Result<K, Error> {
        let path = self.with_manager(self.collection_path());
        let body = self
            .client
            .send(Verb::Post, &path, Some(encode_json(obj)?))?;
        decode(&body)
    }

    /// Creates `obj` without decoding the stored object the server answers with: the
    /// controller's writes learn the result from the watch, and decoding each answer was
    /// a tenth of a create's cost.
    pub fn create_unread(&self, obj: &K) -> Result<(), Error> {
        let path = self.with_manager(self.collection_path());
        self.client
            .send(Verb::Post, &path, Some(encode_json(obj)?))?;
        Ok(())
    }

    /// Creates `obj` and reads only the UID the server gave it (for an Event naming the
    /// object); the answer is read up to the UID and no further.
    pub fn create_uid(&self, obj: &K) -> Result<Option<String>, Error> {
        let path = self.with_manager(self.collection_path());
        let body = self
            .client
            .send(Verb::Post, &path, Some(encode_json(obj)?))?;
        super::created_uid::created_uid(&body).map_err(|e| Error::Decode(e.to_string()))
    }

    /// [`update`](Self::update) without decoding the answer (see [`create_unread`](Self::create_unread)).
    pub fn update_unread(&self, obj: &K) -> Result<(), Error> {
        let path = self.with_manager(self.object_path(obj.name())?);
        self.client
            .send(Verb::Put, &path, Some(encode_json(obj)?))?;
        Ok(())
    }

    /// Replaces `obj` (PUT); its `metadata.resourceVersion` makes it conditional.
    pub fn update(&self, obj: &K) -> Result<K, Error> {
        let path = self.with_manager(self.object_path(obj.name())?);
        let body = self
            .client
            .send(Verb::Put, &path, Some(encode_json(obj)?))?;
        decode(&body)
    }

    /// Server-side apply of `config`, an applied configuration: the fields it sets become
    /// owned by this handle's field manager, a field it set last time and sets no more is
    /// released (the server removes it unless another manager owns it), and fields it does
    /// not set are left as they are. An absent object is created. With `force`, fields
    /// another manager owns are taken over instead of answered `409 Conflict`. Answers the
    /// stored object.
    ///
    /// kube-apiserver refuses an apply without a `fieldManager` (422), so this handle must
    /// have one ([`with_field_manager`](Self::with_field_manager)).
    pub fn apply(&self, config: &K, force: bool) -> Result<K, Error> {
        let body = self.send_apply(config, force)?;
        decode(&body)
    }

    /// [`apply`](Self::apply) without decoding the answer (see [`create_unread`](Self::create_unread)).
    pub fn apply_unread(&self, config: &K, force: bool) -> Result<(), Error> {
        self.send_apply(config, force).map(drop)
    }

    fn send_apply(&self, config: &K, force: bool) -> Result<Vec<u8>, Error> {
        if self.field_manager.is_none() {
            return Err(Error::Config(
                "a server-side apply needs a fieldManager (with_field_manager)".into(),
            ));
        }
        // kube-apiserver reads a patch's options from the query (handlers/patch.go).
        let path = self
            .write_query(force)
            .finish(self.object_path(config.name())?);
        self.client
            .send(Verb::Apply, &path, Some(encode_json(config)?))
    }

    /// Applies an RFC 6902 JSON patch (`ops`, an array of operations) to `name`; answers
    /// the stored object. A `replace` of `/metadata/resourceVersion` makes it conditional,
    /// as kubectl's managed-fields upgrade does.
    pub fn json_patch(&self, name: &str, ops: &serde_json::Value) -> Result<K, Error> {
        let path = self.with_manager(self.object_path(name)?);
        let body = self
            .client
            .send(Verb::JsonPatch, &path, Some(encode_json(ops)?))?;
        decode(&body)
    }

    /// Deletes `name`, subject to the preconditions in `p`.
    pub fn delete(&self, name: &str, p: &DeleteParams) -> Result<(), Error> {
        // kube-apiserver reads a delete's options from its body when there is one and from
        // the query only when the body is empty (apiserver/pkg/endpoints/handlers/delete.go):
        // `dryRun` must travel inside the DeleteOptions beside the preconditions, or a
        // "dry" delete is real. Creates, updates and patches read theirs from the query.
        let opts = DeleteOptions {
            api_version: "v1",
            kind: "DeleteOptions",
            preconditions: (p.uid.is_some() || p.resource_version.is_some()).then(|| {
                Preconditions {
                    uid: p.uid.clone(),
                    resource_version: p.resource_version.clone(),
                }
            }),
            dry_run: if self.dry_run { &["All"] } else { &[] },
        };
        self.client.send(
            Verb::Delete,
            &self.object_path(name)?,
            Some(encode_json(&opts)?),
        )?;
        Ok(())
    }
}

/// `meta/v1` DeleteOptions, the body of every delete.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    api_version: &'static str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    preconditions: Option<Preconditions>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    dry_run: &'static [&'static str],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<String>,
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Decode(e.to_string()))
}

fn encode_json<T: Serialize>(v: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(v).map_err(|e| Error::Decode(format!("cannot encode request: {e}")))
}

/// Builds `?a=b&c=d` with percent-encoded values, in one string (every write builds one).
#[derive(Default)]
struct Query(String);

impl Query {
    fn opt(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value {
            self.0.push(if self.0.is_empty() { '?' } else { '&' });
            self.0.push_str(key);
            self.0.push('=');
            encode_into(&mut self.0, v);
        }
    }
    fn finish(self, mut path: String) -> String {
        path.push_str(&self.0);
        path
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    encode_into(&mut out, s);
    out
}

/// [`encode`], appended to `out`.
fn encode_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded_and_joined() {
        assert_eq!(encode("a-z_0.9~"), "a-z_0.9~");
        assert_eq!(encode("a b/ü=&?"), "a%20b%2F%C3%BC%3D%26%3F");
        let mut q = Query::default();
        assert_eq!(Query::default().finish("/p".into()), "/p");
        q.opt("fieldManager", Some("my manager"));
        q.opt("dryRun", None);
        q.opt("labelSelector", Some("a=b,c"));
        assert_eq!(
            q.finish("/p".into()),
            "/p?fieldManager=my%20manager&labelSelector=a%3Db%2Cc"
        );
    }
}
