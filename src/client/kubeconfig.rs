//! kubeconfig files: parsing, merging several files kubectl's way, and turning a context into a [`Config`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::config::{AuthConfig, Config, ExecConfig, TlsConfig};
use super::infer::ConfigError;

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
    insecure_skip_tls_verify: Option<bool>,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
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
    auth_provider: Option<serde_yaml_ng::Value>,
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
    #[serde(default)]
    provide_cluster_info: bool,
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
        let parsed: File = if text.trim().is_empty() {
            File::default()
        } else {
            crate::yaml::from_str(&text)
                .map_err(|e| ConfigError::in_file(path, format!("invalid kubeconfig: {e}")))?
        };
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

    /// The configuration for `context` (or current-context), with `server` overriding the cluster's.
    pub(crate) fn to_config(
        &self,
        context: Option<&str>,
        server: Option<&str>,
    ) -> Result<Config, ConfigError> {
        let files = self.describe_files();
        let Some(name) = context.or(self.current_context.as_deref()) else {
            return Err(ConfigError::new(format!(
                "kubeconfig {files}: no current-context set; pass --context"
            )));
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

        let server = server
            .map(str::to_string)
            .or_else(|| cluster.value.server.clone())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ConfigError::in_file(
                    &cluster.file,
                    format!("cluster {cluster_name:?} has no server"),
                )
            })?;
        let mut config = Config::new(server);
        config.tls = cluster_tls(cluster_name, cluster)?;
        config.proxy_url = cluster_proxy(cluster_name, cluster)?;
        if let Some(user) = user {
            let user_name = ctx.value.user.as_deref().unwrap_or_default();
            apply_user(user_name, user, &mut config)?;
        }
        config.origin = format!("kubeconfig {} (context {name})", ctx.file.display());
        Ok(config)
    }
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

fn cluster_tls(name: &str, c: &Entry<Cluster>) -> Result<TlsConfig, ConfigError> {
    let what = format!("cluster {name:?}");
    let mut tls = TlsConfig {
        ca_pem: data_or_file(
            &c.file,
            &what,
            "certificate-authority",
            &c.value.certificate_authority_data,
            &c.value.certificate_authority,
        )?,
        server_name: c.value.tls_server_name.clone().filter(|s| !s.is_empty()),
        ..TlsConfig::default()
    };
    if let Some(pem) = &tls.ca_pem {
        let source = match &c.value.certificate_authority_data {
            Some(d) if !d.trim().is_empty() => "certificate-authority-data".to_string(),
            _ => match &c.value.certificate_authority {
                Some(p) => format!("certificate-authority {}", p.display()),
                None => "certificate-authority".to_string(),
            },
        };
        pem_certificates(pem)
            .map_err(|m| ConfigError::in_file(&c.file, format!("{what}: {source}: {m}")))?;
    }
    if c.value.insecure_skip_tls_verify == Some(true) {
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

fn apply_user(name: &str, u: &Entry<User>, config: &mut Config) -> Result<(), ConfigError> {
    let what = format!("user {name:?}");
    let v = &u.value;
    let err = |m: String| ConfigError::in_file(&u.file, format!("{what}: {m}"));
    config.tls.client_cert_pem = data_or_file(
        &u.file,
        &what,
        "client-certificate",
        &v.client_certificate_data,
        &v.client_certificate,
    )?;
    config.tls.client_key_pem = data_or_file(
        &u.file,
        &what,
        "client-key",
        &v.client_key_data,
        &v.client_key,
    )?;
    if config.tls.client_cert_pem.is_some() != config.tls.client_key_pem.is_some() {
        return Err(err(
            "client-certificate and client-key must be given together".into(),
        ));
    }
    if v.auth_provider.is_some() {
        return Err(err(
            "auth-provider plugins are not supported; use an exec credential plugin".into(),
        ));
    }
    config.auth = if let Some(t) = v.token.as_ref().filter(|t| !t.is_empty()) {
        AuthConfig::Token(t.clone())
    } else if let Some(f) = &v.token_file {
        AuthConfig::TokenFile(f.clone())
    } else if let Some(username) = v.username.as_ref().filter(|u| !u.is_empty()) {
        AuthConfig::Basic {
            username: username.clone(),
            password: v.password.clone().unwrap_or_default(),
        }
    } else if let Some(e) = &v.exec {
        AuthConfig::Exec(exec_config(e).map_err(err)?)
    } else {
        AuthConfig::None
    };
    Ok(())
}

fn exec_config(e: &Exec) -> Result<ExecConfig, String> {
    let command = e
        .command
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or("exec: command is required")?;
    let api_version = e
        .api_version
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or("exec: apiVersion is required")?;
    Ok(ExecConfig {
        command,
        args: e.args.clone().unwrap_or_default(),
        env: e
            .env
            .iter()
            .flatten()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect(),
        api_version,
        install_hint: e.install_hint.clone().filter(|h| !h.is_empty()),
        provide_cluster_info: e.provide_cluster_info,
        interactive_mode: e.interactive_mode.clone().filter(|m| !m.is_empty()),
    })
}

/// Checks that `bytes` hold at least one PEM certificate and nothing unreadable, so a
/// DER or garbage CA is refused here, naming the file, rather than later without a name.
fn pem_certificates(bytes: &[u8]) -> Result<(), String> {
    use rustls_pki_types::pem::PemObject;
    let mut n = 0;
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(bytes) {
        cert.map_err(|e| format!("not a readable PEM certificate: {e}"))?;
        n += 1;
    }
    if n == 0 {
        return Err(
            "not PEM: no \"-----BEGIN CERTIFICATE-----\" block (a DER file must be converted: \
             openssl x509 -inform der -in FILE)"
                .into(),
        );
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
        let compact: String = d.split_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map(Some)
            .map_err(|e| {
                ConfigError::in_file(file, format!("{what}: {field}-data: bad base64: {e}"))
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
