//! Reads what the chain needs for many APIServices at once: one list per namespace and
//! kind (Services, endpoints, pods), the rest only where a link needs it (the serving
//! certificate's Secret, the backend's permissions, the Service proxy). A read the user
//! may not make is recorded as such and the walk goes on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use base64::Engine as _;
use serde_json::{json, Value};

use super::facts::{Backends, Crd, Facts, Permission, Probe, Read, ServingCert};
use crate::api::{APIService, EndpointSlice, Pod, Secret, Service};
use crate::client::{Api, Client, Error, ListParams};
use crate::controller::availability::Observed;
use crate::controller::ca::CaBundle;

/// Reads the facts for each of `services`, batched by namespace.
pub fn gather(client: &Client, services: Vec<APIService>) -> Vec<Facts> {
    let now = SystemTime::now();
    let legacy_endpoints = reads_endpoints_objects(client);
    let namespaces: BTreeSet<String> = services
        .iter()
        .filter_map(|o| o.spec.service.as_ref().map(|s| s.namespace.to_string()))
        .collect();
    let mut per_ns: BTreeMap<String, Namespace> = BTreeMap::new();
    for ns in namespaces {
        per_ns.insert(ns.clone(), Namespace::read(client, &ns, legacy_endpoints));
    }
    let crds = services
        .iter()
        .any(|o| o.spec.service.is_none() && !Observed::of(o).is_available())
        .then(|| list_crds(client));
    let mut front_proxy: Option<Read<bool>> = None;
    services
        .into_iter()
        .map(|o| {
            let mut f = Facts::only(o, now);
            let o = f.api_service.clone();
            let Some(svc) = o.spec.service.as_ref() else {
                if let Some(c) = &crds {
                    f.crds = match c {
                        Read::Got(all) => Read::Got(
                            all.iter()
                                .filter(|(g, _)| **g == *o.spec.group)
                                .map(|(_, c)| c.clone())
                                .collect(),
                        ),
                        other => map_unread(other),
                    };
                }
                return f;
            };
            let Some(ns) = per_ns.get(&*svc.namespace) else {
                return f;
            };
            f.namespace = ns.exists.clone();
            f.services_nearby = ns.service_names();
            f.service = ns.service(&svc.name);
            let Read::Got(service) = &f.service else {
                return f;
            };
            let port_name = service
                .port_name(svc.port.unwrap_or(443))
                .map(str::to_string);
            f.backends = ns.backends(&svc.name, port_name.as_deref().unwrap_or(""));
            f.pods = ns.selected(service);
            // Read for an available APIService too: kube-aggregator v1.35 and older check
            // availability without verifying the certificate (their condition reads Passed
            // under a wrong caBundle while every proxied request fails); the chain verifies
            // it itself.
            f.serving_cert = serving_cert(client, &svc.namespace, &f.pods);
            let available = Observed::of(&o).is_available();
            if available {
                return f;
            }
            let condition = Observed::of(&o).to_string();
            if condition.contains(": 401") || condition.contains(": 403") {
                f.permissions = permissions(client, &svc.namespace, &f.pods);
                f.front_proxy = front_proxy
                    .get_or_insert_with(|| read_front_proxy(client))
                    .clone();
            }
            let port = svc.port.unwrap_or(443);
            let gv = format!("/apis/{}/{}", o.spec.group, o.spec.version);
            f.probe = probe(client, &svc.namespace, &svc.name, port, &gv);
            if condition.contains(": 404") {
                f.backend_versions =
                    backend_versions(client, &svc.namespace, &svc.name, port, &o.spec.group);
            }
            f
        })
        .collect()
}

/// Before v1.34 kube-aggregator reads a Service's Endpoints object, from v1.34 on its
/// EndpointSlices (`kube-aggregator/pkg/controllers/status/remote`, v0.34.0): which one
/// this server's does, from `/version`.
fn reads_endpoints_objects(client: &Client) -> bool {
    let Ok(v) = client.get_json("/version") else {
        return false;
    };
    let minor: u32 = v["minor"]
        .as_str()
        .unwrap_or("")
        .trim_end_matches('+')
        .parse()
        .unwrap_or(u32::MAX);
    v["major"].as_str() == Some("1") && minor < 34
}

/// One namespace's lists.
struct Namespace {
    exists: Read<()>,
    services: Read<Vec<Service>>,
    slices: Read<Vec<EndpointSlice>>,
    endpoints: Option<Read<Vec<Value>>>,
    pods: Read<Vec<Pod>>,
}

impl Namespace {
    fn read(client: &Client, ns: &str, legacy_endpoints: bool) -> Namespace {
        let exists = match client.get_json(&format!("/api/v1/namespaces/{ns}")) {
            Ok(_) => Read::Got(()),
            Err(e) => unread(&e, &format!("get namespaces/{ns}")),
        };
        Namespace {
            exists,
            services: list::<Service>(client, ns),
            slices: if legacy_endpoints {
                Read::Skipped("this kube-aggregator reads Endpoints".into())
            } else {
                list::<EndpointSlice>(client, ns)
            },
            endpoints: legacy_endpoints.then(|| {
                match client.get_json(&format!("/api/v1/namespaces/{ns}/endpoints")) {
                    Ok(v) => Read::Got(v["items"].as_array().cloned().unwrap_or_default()),
                    Err(e) => unread(&e, &format!("list endpoints in {ns}")),
                }
            }),
            pods: list::<Pod>(client, ns),
        }
    }

    fn service_names(&self) -> Vec<String> {
        self.services
            .got()
            .map(|s| {
                s.iter()
                    .map(|s| s.metadata.name.as_deref().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn service(&self, name: &str) -> Read<Service> {
        match &self.services {
            Read::Got(all) => all
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .cloned()
                .map_or(Read::Absent, Read::Got),
            other => map_unread(other),
        }
    }

    /// The Service's endpoints, counted as the aggregator counts them for `port_name`.
    fn backends(&self, service: &str, port_name: &str) -> Read<Backends> {
        if let Some(endpoints) = &self.endpoints {
            let Read::Got(all) = endpoints else {
                return map_unread(endpoints);
            };
            let mine: Vec<&Value> = all
                .iter()
                .filter(|e| e["metadata"]["name"].as_str() == Some(service))
                .collect();
            let mut b = Backends {
                source: "Endpoints",
                objects: mine.len(),
                ..Backends::default()
            };
            for e in mine {
                for subset in e["subsets"].as_array().into_iter().flatten() {
                    let has_port = subset["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["name"].as_str().unwrap_or("") == port_name);
                    let ready = subset["addresses"].as_array().map_or(0, Vec::len);
                    b.not_ready += subset["notReadyAddresses"].as_array().map_or(0, Vec::len);
                    if has_port {
                        b.ready += ready;
                    } else {
                        b.not_ready += ready;
                    }
                }
            }
            return Read::Got(b);
        }
        let Read::Got(all) = &self.slices else {
            return map_unread(&self.slices);
        };
        let mine: Vec<&EndpointSlice> = all
            .iter()
            .filter(|s| s.service_name() == Some(service))
            .collect();
        let mut b = Backends {
            source: "EndpointSlice",
            objects: mine.len(),
            ..Backends::default()
        };
        for s in mine {
            let has_port = s
                .ports
                .iter()
                .any(|p| p.name.as_deref().unwrap_or("") == port_name && p.port.is_some());
            for e in &s.endpoints {
                if e.conditions.terminating == Some(true) {
                    b.terminating += 1;
                }
                if e.conditions.ready.unwrap_or(true) && has_port {
                    b.ready += 1;
                } else {
                    b.not_ready += 1;
                }
            }
        }
        Read::Got(b)
    }

    /// The pods `service` selects (a Service without a selector selects none by label).
    fn selected(&self, service: &Service) -> Read<Vec<Pod>> {
        let Some(selector) = &service.spec.selector else {
            return Read::Skipped("the Service has no selector".into());
        };
        match &self.pods {
            Read::Got(all) => Read::Got(
                all.iter()
                    .filter(|p| {
                        selector
                            .iter()
                            .all(|(k, v)| p.metadata.label(k) == Some(v.as_str()))
                    })
                    .cloned()
                    .collect(),
            ),
            other => map_unread(other),
        }
    }
}

fn list<K: crate::api::Resource>(client: &Client, ns: &str) -> Read<Vec<K>> {
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let mut items = Vec::new();
    let mut p = ListParams {
        limit: Some(500),
        ..ListParams::default()
    };
    loop {
        match api.list(&p) {
            Ok(page) => {
                items.extend(page.items);
                match page.metadata.continue_.filter(|t| !t.is_empty()) {
                    Some(t) => p.continue_token = Some(t),
                    None => return Read::Got(items),
                }
            }
            Err(e) => return unread(&e, &format!("list {} in {ns}", K::PLURAL)),
        }
    }
}

/// The CRDs of every group, as (group, CRD).
fn list_crds(client: &Client) -> Read<Vec<(String, Crd)>> {
    match client.get_json("/apis/apiextensions.k8s.io/v1/customresourcedefinitions") {
        Ok(v) => Read::Got(
            v["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let established = c["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|x| x["type"] == "Established" && x["status"] == "True");
                    let served = c["spec"]["versions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|v| v["served"] == true)
                        .filter_map(|v| v["name"].as_str().map(str::to_string))
                        .collect();
                    (
                        c["spec"]["group"].as_str().unwrap_or("").to_string(),
                        Crd {
                            name: c["metadata"]["name"].as_str().unwrap_or("").to_string(),
                            established,
                            served,
                        },
                    )
                })
                .collect(),
        ),
        Err(e) => unread(&e, "list customresourcedefinitions.apiextensions.k8s.io"),
    }
}

/// The serving certificate: `tls.crt` of the first Secret the selected pods mount that has
/// one. Only the certificate is decoded; the key is never read out of the Secret's map.
fn serving_cert(client: &Client, ns: &str, pods: &Read<Vec<Pod>>) -> Read<ServingCert> {
    let Read::Got(pods) = pods else {
        return Read::Skipped("no selected pods to find the Secret they mount".into());
    };
    let secrets: BTreeSet<String> = pods
        .iter()
        .flat_map(|p| p.spec.volumes.iter())
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    if secrets.is_empty() {
        return Read::Skipped(
            "the backend's pods mount no Secret: its serving certificate is unknown".into(),
        );
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut last = Read::Skipped(format!(
        "no Secret the pods mount ({}) has tls.crt",
        secrets.iter().cloned().collect::<Vec<_>>().join(", ")
    ));
    for name in secrets {
        match api.get(&name) {
            Ok(s) => {
                let Some(b64) = s.data.as_ref().and_then(|d| d.get("tls.crt")) else {
                    continue;
                };
                let from = format!("secret {ns}/{name} key tls.crt");
                return match base64::engine::general_purpose::STANDARD.decode(b64) {
                    Ok(pem) => match CaBundle::from_pem(&pem) {
                        Ok(chain) => Read::Got(ServingCert { from, chain }),
                        Err(e) => Read::Failed(format!("{from}: {e}")),
                    },
                    Err(e) => Read::Failed(format!("{from}: not base64: {e}")),
                };
            }
            Err(e) => last = unread(&e, &format!("get secrets/{name} in {ns}")),
        }
    }
    last
}

/// What an aggregated server's ServiceAccount must be allowed (delegated authentication
/// and authorization), asked of the server with SubjectAccessReviews.
fn permissions(client: &Client, ns: &str, pods: &Read<Vec<Pod>>) -> Read<Vec<Permission>> {
    let Read::Got(pods) = pods else {
        return Read::Skipped("no selected pods to find their ServiceAccount".into());
    };
    let Some(pod) = pods.first() else {
        return Read::Skipped("no selected pods to find their ServiceAccount".into());
    };
    let sa = pod
        .spec
        .service_account_name
        .clone()
        .unwrap_or_else(|| "default".into());
    let user = format!("system:serviceaccount:{ns}:{sa}");
    let checks = [
        (
            "get",
            "",
            "configmaps",
            Some("kube-system"),
            Some("extension-apiserver-authentication"),
        ),
        (
            "create",
            "authentication.k8s.io",
            "tokenreviews",
            None,
            None,
        ),
        (
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            None,
            None,
        ),
    ];
    let mut out = Vec::new();
    for (verb, group, resource, namespace, name) in checks {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
                "resourceAttributes": {
                    "verb": verb, "group": group, "resource": resource,
                    "namespace": namespace, "name": name,
                },
            },
        });
        let what = format!(
            "serviceaccount {ns}/{sa} may {verb} {resource}{}{}{}",
            if group.is_empty() {
                String::new()
            } else {
                format!(".{group}")
            },
            name.map(|n| format!("/{n}")).unwrap_or_default(),
            namespace.map(|n| format!(" in {n}")).unwrap_or_default(),
        );
        match client.post_json(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            &review,
        ) {
            Ok(v) => out.push(Permission {
                what,
                allowed: v["status"]["allowed"] == true,
            }),
            Err(e) => return unread(&e, "create subjectaccessreviews.authorization.k8s.io"),
        }
    }
    Read::Got(out)
}

/// Whether `kube-system/extension-apiserver-authentication` has the front-proxy keys.
fn read_front_proxy(client: &Client) -> Read<bool> {
    match client
        .get_json("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
    {
        Ok(v) => Read::Got(
            v["data"]["requestheader-client-ca-file"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
        ),
        Err(e) => unread(
            &e,
            "get configmaps/extension-apiserver-authentication in kube-system",
        ),
    }
}

/// `path` of the backend through kube-apiserver's Service proxy.
fn probe(client: &Client, ns: &str, name: &str, port: i32, path: &str) -> Read<Probe> {
    let url = format!("/api/v1/namespaces/{ns}/services/https:{name}:{port}/proxy{path}");
    match client.get_json(&url) {
        Ok(_) => Read::Got(Probe {
            path: path.to_string(),
            code: Some(200),
            message: String::new(),
        }),
        Err(e)
            if e.is_forbidden()
                && e.as_api()
                    .is_some_and(|a| a.message().contains("services/proxy")) =>
        {
            Read::Denied(format!("get services/proxy in {ns}"))
        }
        Err(e) => match e.as_api() {
            Some(a) => Read::Got(Probe {
                path: path.to_string(),
                code: Some(a.code),
                message: a.message().chars().take(300).collect(),
            }),
            None => Read::Got(Probe {
                path: path.to_string(),
                code: None,
                message: e.to_string(),
            }),
        },
    }
}

/// The versions of `group` the backend lists at `/apis/GROUP` (through the Service proxy).
fn backend_versions(
    client: &Client,
    ns: &str,
    name: &str,
    port: i32,
    group: &str,
) -> Read<Vec<String>> {
    let url = format!("/api/v1/namespaces/{ns}/services/https:{name}:{port}/proxy/apis/{group}");
    match client.get_json(&url) {
        Ok(v) => Read::Got(
            v["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v["groupVersion"].as_str().map(str::to_string))
                .collect(),
        ),
        Err(e) => unread(&e, &format!("get services/proxy in {ns}")),
    }
}

/// A failed read as a link's state: 404 absent, 403 the permission named by `what`.
fn unread<T>(e: &Error, what: &str) -> Read<T> {
    if e.is_not_found() {
        Read::Absent
    } else if e.is_forbidden() {
        Read::Denied(what.to_string())
    } else {
        Read::Failed(e.to_string())
    }
}

/// An unread state carried over to another type.
fn map_unread<T, U>(r: &Read<T>) -> Read<U> {
    match r {
        Read::Got(_) => Read::Skipped("not read".into()),
        Read::Absent => Read::Absent,
        Read::Denied(w) => Read::Denied(w.clone()),
        Read::Failed(w) => Read::Failed(w.clone()),
        Read::Skipped(w) => Read::Skipped(w.clone()),
    }
}
