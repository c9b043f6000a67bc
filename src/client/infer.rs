//! Finding the connection settings: flags, `KUBECONFIG`, `~/.kube/config`, then in-cluster.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use super::config::{Config, Impersonation};
use super::incluster;
use super::kubeconfig::Kubeconfig;

/// The connection flags: `--kubeconfig`, `--context`, `--server`.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// `--kubeconfig FILE`: used alone; `KUBECONFIG` and `~/.kube/config` are not read.
    pub kubeconfig: Option<PathBuf>,
    /// `--context NAME`: overrides the kubeconfig's current-context.
    pub context: Option<String>,
    /// `--server URL`: overrides the cluster's server, or is the whole config without a kubeconfig.
    pub server: Option<String>,
    /// `--as`, `--as-uid`, `--as-group`: each given replaces the kubeconfig user's field.
    pub impersonate: Impersonation,
}

/// The process environment [`Config::infer_with`] reads; tests build one instead of mutating env.
#[derive(Clone, Debug, Default)]
pub struct InferEnv {
    /// `KUBECONFIG`: paths separated by ':'.
    pub kubeconfig: Option<OsString>,
    /// The home directory (for `~/.kube/config`).
    pub home: Option<PathBuf>,
    /// `KUBERNETES_SERVICE_HOST`.
    pub service_host: Option<String>,
    /// `KUBERNETES_SERVICE_PORT`.
    pub service_port: Option<String>,
    /// Where the service-account `token` and `ca.crt` are mounted.
    pub service_account_dir: PathBuf,
}

/// The standard mount point of a pod's service-account credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl InferEnv {
    /// Reads the real process environment.
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        InferEnv {
            kubeconfig: std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            service_host: var("KUBERNETES_SERVICE_HOST"),
            service_port: var("KUBERNETES_SERVICE_PORT"),
            service_account_dir: PathBuf::from(SERVICE_ACCOUNT_DIR),
        }
    }
}

/// A configuration that cannot be used; names the file and the problem. The binary exits 2 on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file at fault, when there is one.
    pub file: Option<PathBuf>,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error about `file`.
    pub fn in_file(file: &Path, message: impl Into<String>) -> Self {
        ConfigError {
            file: Some(file.to_path_buf()),
            message: message.into(),
        }
    }

    /// An error not tied to one file (the message says which files were involved).
    pub fn new(message: impl Into<String>) -> Self {
        ConfigError {
            file: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The configuration kubectl would use for these flags in this process's environment.
    pub fn infer(opts: &ConnectOptions) -> Result<Config, ConfigError> {
        Self::infer_with(opts, &InferEnv::from_process())
    }

    /// [`infer`](Self::infer) with an explicit environment.
    ///
    /// As client-go's deferred loading: the kubeconfig files are merged and the context
    /// chosen; when none is (no `--context`, no current-context, e.g. an empty file) and no
    /// `--server` is given, the in-cluster configuration is used if this is a pod.
    pub fn infer_with(opts: &ConnectOptions, env: &InferEnv) -> Result<Config, ConfigError> {
        let server = opts.server.as_deref().filter(|s| !s.is_empty());
        let context = opts.context.as_deref().filter(|s| !s.is_empty());
        let kubeconfig = kubeconfig_files(opts, env)?;
        if let Some(kc) = &kubeconfig {
            if let Some(config) = kc.to_config(context, server, &opts.impersonate)? {
                return Ok(config);
            }
        }
        if context.is_some() {
            return Err(ConfigError::new(
                "--context given but no kubeconfig found (KUBECONFIG, ~/.kube/config)",
            ));
        }
        let mut config = if let Some(server) = server {
            let mut c = Config::new(server);
            c.normalize_server();
            c
        } else if let (Some(host), Some(port)) = (&env.service_host, &env.service_port) {
            incluster::config(host, port, &env.service_account_dir)?
        } else if kubeconfig.is_some() {
            return Err(ConfigError::new(format!(
                "kubeconfig {}: no current-context set, and not running in a cluster \
                 (KUBERNETES_SERVICE_HOST unset); pass --context",
                describe(opts, env)
            )));
        } else {
            return Err(ConfigError::new(
                "no kubeconfig found (--kubeconfig, KUBECONFIG, ~/.kube/config) and not running \
                 in a cluster (KUBERNETES_SERVICE_HOST unset); use --kubeconfig or --server",
            ));
        };
        super::kubeconfig::check_impersonation(&opts.impersonate).map_err(ConfigError::new)?;
        config.impersonate = opts.impersonate.clone();
        Ok(config)
    }
}

/// The kubeconfig files read, for a message.
fn describe(opts: &ConnectOptions, env: &InferEnv) -> String {
    if let Some(p) = opts
        .kubeconfig
        .as_ref()
        .filter(|p| !p.as_os_str().is_empty())
    {
        return p.display().to_string();
    }
    if let Some(list) = &env.kubeconfig {
        return list.to_string_lossy().into_owned();
    }
    match &env.home {
        Some(h) => h.join(".kube").join("config").display().to_string(),
        None => "~/.kube/config".to_string(),
    }
}

/// Loads the kubeconfig files that apply, or None when there are none.
fn kubeconfig_files(
    opts: &ConnectOptions,
    env: &InferEnv,
) -> Result<Option<Kubeconfig>, ConfigError> {
    let mut kc = Kubeconfig::default();
    // `--kubeconfig ''` is "not given", as in kubectl.
    if let Some(path) = opts
        .kubeconfig
        .as_ref()
        .filter(|p| !p.as_os_str().is_empty())
    {
        kc.merge_file(path)?;
        return Ok(Some(kc));
    }
    if let Some(list) = &env.kubeconfig {
        let mut any = false;
        for path in std::env::split_paths(list) {
            // Missing files in the list are skipped, as kubectl does.
            if path.as_os_str().is_empty() || !path.exists() {
                continue;
            }
            kc.merge_file(&path)?;
            any = true;
        }
        return Ok(any.then_some(kc));
    }
    if let Some(home) = &env.home {
        let path = home.join(".kube").join("config");
        if path.exists() {
            kc.merge_file(&path)?;
            return Ok(Some(kc));
        }
    }
    Ok(None)
}
