//! kubeconfig files: parsing, merging several files kubectl's way, and turning a context into a [`Config`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::config::{Config, Impersonation, TlsConfig};
use super::infer::ConfigError;

mod user;

pub(crate) use user::check_impersonation;
use user::{apply_user, impersonation, ExecCluster};

/// One kubeconfig file as written; unknown fields are ignored.
#[derive(Deserialize, Default)]
struct File {
    #[serde(default)]
    clusters: Option<Vec<NamedCluster>>,
    #[serde(default)]
    users: Option<Vec<NamedUser>>,
    #[serde(default)]
    contexts: Option<Vec<NamedContext>>,
    #[serde(default, rename = "current-context")]
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    #[serde(default)]
    cluster: Cluster,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default)]
    context: Context,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default, deserialize_with = "yaml11_bool")]
    insecure_skip_tls_verify: Option<bool>,
    tls_server_name: Option<String>,
    extensions: Option<Vec<NamedExtension>>,
    proxy_url: Option<String>,
}

/// A cluster's `extensions` entry; `client.authentication.k8s.io/exec` is given to exec plugins.
#[derive(Deserialize, Clone)]
struct NamedExtension {
    name: String,
    #[serde(default)]
    extension: serde_json::Value,
}

/// The extension name client-go reserves for exec plugin configuration.
const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// A boolean as kubectl reads it: its YAML parser is YAML 1.1, where `yes`, `on`, `y`
/// (and their negations, in three cases) are booleans too.
fn yaml11_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum B {
        Bool(bool),
        Text(String),
    }
    Ok(match Option::<B>::deserialize(d)? {
        None => None,
        Some(B::Bool(b)) => Some(b),
        Some(B::Text(t)) => Some(match t.as_str() {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
                true
            }
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False"
            | "FALSE" => false,
            _ => {
                return Err(serde::de::Error::custom(format!(
                    "invalid boolean {t:?} (true or false)"
                )))
            }
        }),
    })
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    username: Option<String>,
    password: Option<String>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    exec: Option<Exec>,
    // Only whether it is there matters (it is refused); skipped, not built as a tree.
    auth_provider: Option<serde::de::IgnoredAny>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    as_uid: Option<String>,
    as_groups: Option<Vec<String>>,
    as_user_extra: Option<BTreeMap<String, Vec<String>>>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase")]
struct Exec {
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<EnvVar>>,
    api_version: Option<String>,
    install_hint: Option<String>,
    #[serde(default, deserialize_with = "yaml11_bool")]
    provide_cluster_info: Option<bool>,
    interactive_mode: Option<String>,
}

#[derive(Deserialize, Clone)]
struct EnvVar {
    name: String,
    #[serde(default)]
    value: String,
}

/// A context; its `namespace` is irrelevant to a cluster-scoped controller and ignored.
#[derive(Deserialize, Default, Clone)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
}

/// An entry and the file it was first defined in.
struct Entry<T> {
    value: T,
    file: PathBuf,
}

/// One or more kubeconfig files merged: the first file naming an entry wins it whole.
#[derive(Default)]
pub(crate) struct Kubeconfig {
    files: Vec<PathBuf>,
    clusters: BTreeMap<String, Entry<Cluster>>,
    users: BTreeMap<String, Entry<User>>,
    contexts: BTreeMap<String, Entry<Context>>,
    current_context: Option<String>,
}

impl Kubeconfig {
    /// Reads `path` and merges it under the entries already loaded.
    pub(crate) fn merge_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::in_file(path, format!("cannot read kubeconfig: {e}")))?;
        // A byte-order mark (Windows editors write one) is not part of the document.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let parsed: File = if text.trim().is_empty() {
            File::default()
        } else {
            crate::yaml::from_str(text)
                .map_err(|e| ConfigError::in_file(path, format!("invalid kubeconfig: {e}")))?
        };
        // client-go refuses a name defined twice in one file (its lists become maps).
        let in_file = |m: String| ConfigError::in_file(path, m);
        no_duplicates(parsed.clusters.iter().flatten().map(|c| &c.name), "cluster")
            .map_err(in_file)?;
        no_duplicates(parsed.users.iter().flatten().map(|c| &c.name), "user").map_err(in_file)?;
        no_duplicates(parsed.contexts.iter().flatten().map(|c| &c.name), "context")
            .map_err(in_file)?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let file = path.to_path_buf();
        for c in parsed.clusters.unwrap_or_default() {
            let mut value = c.cluster;
            resolve(&dir, &mut value.certificate_authority);
            self.clusters.entry(c.name).or_insert(Entry {
                value,
                file: file.clone(),
            });
        }
        for u in parsed.users.unwrap_or_default() {
            let mut value = u.user;
            resolve(&dir, &mut value.client_certificate);
            resolve(&dir, &mut value.client_key);
            resolve(&dir, &mut value.token_file);
            if let Some(exec) = &mut value.exec {
                // Like kubectl: a command with a '/' is a path relative to the file; a bare
                // name is looked up in PATH.
                if let Some(cmd) = &mut exec.command {
                    if cmd.contains('/') && Path::new(cmd.as_str()).is_relative() {
                        *cmd = dir.join(&*cmd).to_string_lossy().into_owned();
                    }
                }
            }
            self.users.entry(u.name).or_insert(Entry {
                value,
                file: file.clone(),
            });
        }
        for c in parsed.contexts.unwrap_or_default() {
            self.contexts.entry(c.name).or_insert(Entry {
                value: c.context,
                file: file.clone(),
            });
        }
        if self.current_context.is_none() {
            self.current_context = parsed.current_context.filter(|c| !c.is_empty());
        }
        self.files.push(file);
        Ok(())
    }

    /// The files merged, for messages.
    fn describe_files(&self) -> String {
        let names: Vec<String> = self.files.iter().map(|f| f.display().to_string()).collect();
        names.join(", ")
    }

    /// The configuration for `context` (or current-context), with `server` overriding the
    /// cluster's and `imp` (the `--as*` flags) the user's impersonation. `Ok(None)` when
    /// neither names a context: client-go then falls back to the in-cluster configuration.
    pub(crate) fn to_config(
        &self,
        context: Option<&str>,
        server: Option<&str>,
        imp: &Impersonation,
    ) -> Result<Option<Config>, ConfigError> {
        let files = self.describe_files();
        let Some(name) = context.or(self.current_context.as_deref()) else {
            return Ok(None);
        };
        let ctx = self.contexts.get(name).ok_or_else(|| {
            ConfigError::new(format!("kubeconfig {files}: context {name:?} not found"))
        })?;
        let in_ctx =
            |what: &str| ConfigError::in_file(&ctx.file, format!("context {name:?}: {what}"));
        let cluster_name = ctx
            .value
            .cluster
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| in_ctx("names no cluster"))?;
        let cluster = self.clusters.get(cluster_name).ok_or_else(|| {
            in_ctx(&format!(
                "cluster {cluster_name:?} is not defined in {files}"
            ))
        })?;
        let user = match ctx.value.user.as_deref().filter(|u| !u.is_empty()) {
            None => None,
            Some(u) => Some(
                self.users
                    .get(u)
                    .ok_or_else(|| in_ctx(&format!("user {u:?} is not defined in {files}")))?,
            ),
        };

        let written = server
            .map(str::to_string)
            .or_else(|| cluster.value.server.clone())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ConfigError::in_file(
                    &cluster.file,
                    format!("cluster {cluster_name:?} has no server"),
                )
            })?;
        let mut config = Config::new(written.clone());
        if !config.server.contains("://") {
            // A bare host:port: https:// when TLS is configured, as client-go's
            // DefaultServerURL decides before it loads any credential.
            let (c, u) = (&cluster.value, user.map(|u| &u.value));
            let set = |s: &Option<String>| s.as_ref().is_some_and(|s| !s.is_empty());
            let tls_configured = c.certificate_authority.is_some()
                || set(&c.certificate_authority_data)
                || c.insecure_skip_tls_verify == Some(true)
                || u.is_some_and(|u| {
                    u.client_certificate.is_some() || set(&u.client_certificate_data)
                });
            let scheme = if tls_configured { "https" } else { "http" };
            config.server = format!("{scheme}://{}", config.server);
        }
        config.normalize_server();
        let tls = config.is_tls();
        config.tls = cluster_tls(cluster_name, cluster, tls)?;
        config.proxy_url = cluster_proxy(cluster_name, cluster)?;
        // As client-go: `--server` clears the kubeconfig's tls-server-name (it named the old host).
        if server.is_some() {
            config.tls.server_name = None;
        }
        let user_name = ctx.value.user.as_deref().unwrap_or_default();
        let empty = Entry {
            value: User::default(),
            file: ctx.file.clone(),
        };
        let user = user.unwrap_or(&empty);
        let exec_cluster = ExecCluster {
            server: written,
            config: cluster
                .value
                .extensions
                .iter()
                .flatten()
                .find(|e| e.name == EXEC_EXTENSION)
                .map(|e| e.extension.to_string()),
        };
        apply_user(user_name, user, &mut config, tls, &exec_cluster)?;
        config.impersonate = impersonation(&user.value, imp)
            .map_err(|m| ConfigError::in_file(&user.file, format!("user {user_name:?}: {m}")))?;
        config.origin = format!("kubeconfig {} (context {name})", ctx.file.display());
        Ok(Some(config))
    }
}

fn no_duplicates<'a>(names: impl Iterator<Item = &'a String>, what: &str) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(format!("{what} {n:?} is defined twice"));
        }
    }
    Ok(())
}

fn resolve(dir: &Path, p: &mut Option<PathBuf>) {
    if let Some(path) = p {
        if path.as_os_str().is_empty() {
            *p = None;
        } else if path.is_relative() {
            *path = dir.join(&*path);
        }
    }
}

/// The cluster's TLS settings; toward an `http://` server client-go reads none of them.
fn cluster_tls(name: &str, c: &Entry<Cluster>, https: bool) -> Result<TlsConfig, ConfigError> {
    let what = format!("cluster {name:?}");
    let v = &c.value;
    let err = |m: String| ConfigError::in_file(&c.file, format!("{what}: {m}"));
    let data = v
        .certificate_authority_data
        .as_ref()
        .filter(|d| !d.is_empty());
    if data.is_some() && v.certificate_authority.is_some() {
        return Err(err(
            "certificate-authority-data and certificate-authority are both set; keep one".into(),
        ));
    }
    if let Some(p) = &v.certificate_authority {
        // client-go's validation opens the file whatever the scheme.
        std::fs::File::open(p).map_err(|e| {
            err(format!(
                "cannot read certificate-authority {}: {e}",
                p.display()
            ))
        })?;
    }
    if !https {
        return Ok(TlsConfig::default());
    }
    let insecure = v.insecure_skip_tls_verify == Some(true);
    if insecure && (data.is_some() || v.certificate_authority.is_some()) {
        return Err(err(
            "insecure-skip-tls-verify and a certificate-authority are both set: \
             a CA is not checked when verification is off; keep one"
                .into(),
        ));
    }
    let mut tls = TlsConfig {
        ca_pem: data_or_file(
            &c.file,
            &what,
            "certificate-authority",
            &v.certificate_authority_data,
            &v.certificate_authority,
        )?,
        server_name: v.tls_server_name.clone().filter(|s| !s.is_empty()),
        ..TlsConfig::default()
    };
    if let Some(pem) = &tls.ca_pem {
        let source = match &v.certificate_authority {
            Some(p) => format!("certificate-authority {}", p.display()),
            None => "certificate-authority-data".to_string(),
        };
        pem_certificates(pem).map_err(|m| err(format!("{source}: {m}")))?;
    }
    if insecure {
        log::warn!(
            "{what} in {}: insecure-skip-tls-verify is set, the server's certificate is not checked",
            c.file.display()
        );
        tls.insecure_skip_verify = true;
    }
    Ok(tls)
}

/// The cluster's `proxy-url`, checked as client-go does (http, https or socks5).
fn cluster_proxy(name: &str, c: &Entry<Cluster>) -> Result<Option<String>, ConfigError> {
    let Some(url) = c.value.proxy_url.as_ref().filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    super::proxy::check_proxy_url(url).map_err(|m| {
        // The URL may carry a password: the message names the cluster, not the URL.
        ConfigError::in_file(&c.file, format!("cluster {name:?}: invalid proxy-url: {m}"))
    })?;
    Ok(Some(url.clone()))
}

/// Checks that `bytes` hold at least one usable PEM certificate, so a DER or garbage CA is
/// refused here, naming the file, rather than later without a name. A bad block among good
/// ones is skipped, as Go's `AppendCertsFromPEM` does (see [`super::tls::pem_roots`]).
fn pem_certificates(bytes: &[u8]) -> Result<(), String> {
    let (roots, skipped) = super::tls::pem_roots(bytes);
    if roots.is_empty() {
        return Err(if skipped > 0 {
            "no readable certificate: every CERTIFICATE block is damaged".into()
        } else {
            "not PEM: no \"-----BEGIN CERTIFICATE-----\" block (a DER file must be converted: \
             openssl x509 -inform der -in FILE)"
                .into()
        });
    }
    if skipped > 0 {
        log::warn!("CA bundle: {skipped} unreadable certificate block(s) skipped");
    }
    Ok(())
}

/// Inline base64 `*-data` wins over the file, as in kubectl.
fn data_or_file(
    file: &Path,
    what: &str,
    field: &str,
    data: &Option<String>,
    path: &Option<PathBuf>,
) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(d) = data.as_ref().filter(|d| !d.trim().is_empty()) {
        // Go's base64 decoder skips line breaks, nothing else: a space is an error.
        let compact: String = d.chars().filter(|c| *c != '\n' && *c != '\r').collect();
        return base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map(Some)
            .map_err(|e| {
                ConfigError::in_file(
                    file,
                    format!("{what}: {field}-data: bad base64 (spaces are not allowed): {e}"),
                )
            });
    }
    match path {
        None => Ok(None),
        Some(p) => std::fs::read(p).map(Some).map_err(|e| {
            ConfigError::in_file(
                file,
                format!("{what}: cannot read {field} {}: {e}", p.display()),
            )
        }),
    }
}
