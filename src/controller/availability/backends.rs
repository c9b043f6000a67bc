//! The backends of withdrawn APIServices: Services and EndpointSlices, watched only in the
//! namespaces that desired services with withdrawal on use, and only while they do.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::api::{EndpointSlice, Service, ServiceReference};
use crate::client::{Api, Client};
use crate::hash::Map;
use crate::runtime::reflector::{EventHandler, Reflector, ReflectorHandle, ReflectorOptions};
use crate::runtime::store::Store;

/// Called with the namespace whenever a Service or EndpointSlice there changes.
pub(crate) type OnChange = Arc<dyn Fn(&str) + Send + Sync>;

/// The watches of one namespace and how many desired names need them.
struct Watched {
    users: usize,
    services: Arc<Store<Service>>,
    slices: Arc<Store<EndpointSlice>>,
    /// Running reflectors (none before the controller starts).
    reflectors: Vec<ReflectorHandle>,
}

/// Namespace watches, reference-counted by the desired names that use them.
pub(crate) struct Backends {
    client: Client,
    options: ReflectorOptions,
    on_change: OnChange,
    state: Mutex<BackendState>,
}

#[derive(Default)]
struct BackendState {
    started: bool,
    stopped: bool,
    /// name → namespace of its service, for names with withdrawal on.
    users: Map<String, String>,
    namespaces: Map<String, Watched>,
}

/// Forwards every change in one namespace.
struct Notify {
    namespace: String,
    on_change: OnChange,
}

impl<K> EventHandler<K> for Notify {
    fn on_add(&self, _: &Arc<K>) {
        (self.on_change)(&self.namespace);
    }
    fn on_update(&self, _: &Arc<K>, _: &Arc<K>) {
        (self.on_change)(&self.namespace);
    }
    fn on_delete(&self, _: &Arc<K>) {
        (self.on_change)(&self.namespace);
    }
    fn on_relisted(&self) {
        (self.on_change)(&self.namespace);
    }
}

impl Backends {
    /// Watches through `client`, reporting changes to `on_change`; nothing runs before `start`.
    pub(crate) fn new(client: Client, options: ReflectorOptions, on_change: OnChange) -> Self {
        Backends {
            client,
            options,
            on_change,
            state: Mutex::new(BackendState::default()),
        }
    }

    /// `name` needs the namespace `namespace` watched (`None`: no longer needs any).
    pub(crate) fn track(&self, name: &str, namespace: Option<&str>) {
        let mut dropped = Vec::new();
        {
            let mut st = self.state.lock();
            let before = st.users.get(name).cloned();
            if before.as_deref() == namespace {
                return;
            }
            if let Some(old) = before {
                st.users.remove(name);
                let gone = st.namespaces.get_mut(&old).is_some_and(|w| {
                    w.users -= 1;
                    w.users == 0
                });
                if gone {
                    if let Some(w) = st.namespaces.remove(&old) {
                        log::info!("no longer watching Services and EndpointSlices in {old:?}");
                        dropped.extend(w.reflectors);
                    }
                }
            }
            if let Some(ns) = namespace {
                st.users.insert(name.to_string(), ns.to_string());
                let run = st.started && !st.stopped;
                if let Some(w) = st.namespaces.get_mut(ns) {
                    w.users += 1;
                } else {
                    let mut w = Watched {
                        users: 1,
                        services: Arc::new(Store::new()),
                        slices: Arc::new(Store::new()),
                        reflectors: Vec::new(),
                    };
                    if run {
                        self.spawn(ns, &mut w);
                    }
                    st.namespaces.insert(ns.to_string(), w);
                }
            }
        }
        // Stopping joins the reflector threads: never under the lock their handlers may want.
        for r in &dropped {
            r.stop();
        }
        drop(dropped);
    }

    fn spawn(&self, ns: &str, w: &mut Watched) {
        log::info!("watching Services and EndpointSlices in {ns:?} (withdrawal of unavailable APIServices)");
        let notify = Arc::new(Notify {
            namespace: ns.to_string(),
            on_change: self.on_change.clone(),
        });
        w.reflectors.push(Reflector::spawn(
            Api::<Service>::namespaced(self.client.clone(), ns),
            w.services.clone(),
            notify.clone(),
            self.options.clone(),
        ));
        w.reflectors.push(Reflector::spawn(
            Api::<EndpointSlice>::namespaced(self.client.clone(), ns),
            w.slices.clone(),
            notify,
            self.options.clone(),
        ));
    }

    /// Starts the watches of every namespace tracked so far (and of later ones).
    pub(crate) fn start(&self) {
        let mut st = self.state.lock();
        if st.started {
            return;
        }
        st.started = true;
        let st = &mut *st;
        for (ns, w) in st.namespaces.iter_mut() {
            self.spawn(ns, w);
        }
    }

    /// Stops every watch (no new one starts after this).
    pub(crate) fn stop(&self) {
        let mut st = self.state.lock();
        st.stopped = true;
        for w in st.namespaces.values() {
            for r in &w.reflectors {
                r.stop();
            }
        }
    }

    /// Stops and waits for every watch thread.
    pub(crate) fn shutdown(&self) {
        self.stop();
        let reflectors: Vec<ReflectorHandle> = {
            let mut st = self.state.lock();
            st.namespaces
                .values_mut()
                .flat_map(|w| w.reflectors.drain(..))
                .collect()
        };
        for r in reflectors {
            r.join();
        }
    }

    /// Namespaces watched now, sorted (for tests and logs).
    pub(crate) fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state.lock().namespaces.keys().cloned().collect();
        crate::sort::sort(&mut v);
        v
    }

    /// Whether the Services and EndpointSlices of `ns` are watched and listed: only then can a
    /// withdrawn APIService there be seen coming back.
    pub(crate) fn is_synced(&self, ns: &str) -> bool {
        self.state
            .lock()
            .namespaces
            .get(ns)
            .is_some_and(|w| w.services.has_synced() && w.slices.has_synced())
    }

    /// Whether the backend of `svc` looks ready, as kube-aggregator's checks would find it:
    /// `Ok`, or why not.
    pub(crate) fn ready(&self, svc: &ServiceReference) -> Result<(), String> {
        let (services, slices) = {
            let st = self.state.lock();
            let Some(w) = st.namespaces.get(&*svc.namespace) else {
                return Err(format!("namespace {:?} is not watched", svc.namespace));
            };
            (w.services.clone(), w.slices.clone())
        };
        if !services.has_synced() || !slices.has_synced() {
            return Err(format!(
                "Services and EndpointSlices in {:?} not listed yet",
                svc.namespace
            ));
        }
        ready_in(&services, &slices, svc)
    }
}

/// [`Backends::ready`] against two caches: the Service exists, listens on the port (a
/// ClusterIP one), and a slice labelled with its name has a ready endpoint on that port.
pub(crate) fn ready_in(
    services: &Store<Service>,
    slices: &Store<EndpointSlice>,
    svc: &ServiceReference,
) -> Result<(), String> {
    let (ns, name) = (&*svc.namespace, &*svc.name);
    let port = svc.port.unwrap_or(443);
    let Some(service) = services.get(&format!("{ns}/{name}")) else {
        return Err(format!("service/{name} in {ns:?} is not present"));
    };
    if !service.is_cluster_ip() {
        return Ok(());
    }
    let Some(port_name) = service.port_name(port) else {
        return Err(format!(
            "service/{name} in {ns:?} is not listening on port {port}"
        ));
    };
    let ours: Vec<Arc<EndpointSlice>> = slices
        .list()
        .into_iter()
        .filter(|s| s.service_name() == Some(name))
        .collect();
    if ours.is_empty() {
        return Err(format!(
            "cannot find endpointslices for service/{name} in {ns:?}"
        ));
    }
    if !ours.iter().any(|s| s.serves(port_name)) {
        return Err(format!(
            "endpointslices for service/{name} in {ns:?} have no ready addresses with port name {port_name:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc_ref() -> ServiceReference {
        ServiceReference {
            namespace: "ns".into(),
            name: "svc".into(),
            port: Some(443),
            ..Default::default()
        }
    }

    fn slice(name: &str, ready: Option<bool>, port_name: &str) -> Arc<EndpointSlice> {
        let mut ep = json!({"addresses": ["127.0.0.1"], "conditions": {}});
        if let Some(r) = ready {
            ep["conditions"]["ready"] = json!(r);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "svc"}},
                "endpoints": [ep],
                "ports": [{"name": port_name, "port": 8443}],
            }))
            .unwrap(),
        )
    }

    #[test]
    fn ready_follows_upstreams_checks_in_order() {
        let services = Store::<Service>::new();
        let slices = Store::<EndpointSlice>::new();
        let why = |s: &Store<Service>, e: &Store<EndpointSlice>| ready_in(s, e, &svc_ref());
        assert!(why(&services, &slices)
            .unwrap_err()
            .contains("is not present"));
        services.insert(Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "svc", "namespace": "ns"},
                "spec": {"ports": [{"name": "https", "port": 443}]},
            }))
            .unwrap(),
        ));
        assert!(why(&services, &slices)
            .unwrap_err()
            .contains("cannot find endpointslices"));
        slices.insert(slice("a", Some(false), "https"));
        assert!(why(&services, &slices)
            .unwrap_err()
            .contains("no ready addresses"));
        slices.insert(slice("b", None, "other"));
        assert!(
            why(&services, &slices).is_err(),
            "ready, but not on the port"
        );
        slices.insert(slice("c", Some(true), "https"));
        assert_eq!(why(&services, &slices), Ok(()));
        let other_port = ServiceReference {
            port: Some(8443),
            ..svc_ref()
        };
        assert!(ready_in(&services, &slices, &other_port)
            .unwrap_err()
            .contains("not listening on port 8443"));
    }
}
