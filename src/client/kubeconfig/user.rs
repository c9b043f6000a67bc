//! A kubeconfig user: its credentials with client-go's validation and precedence, its exec
//! plugin, and its impersonation with the `--as*` flags over it.

use super::super::config::{AuthConfig, Config, ExecConfig, Impersonation};
use super::super::infer::ConfigError;
use super::{data_or_file, Entry, Exec, User};

/// The user's credentials, with client-go's validation and precedence: a readable
/// `tokenFile` over `token`; a client certificate, token or password makes the exec
/// plugin unused. Toward an `http://` server no credential is loaded (files are still
/// checked, as client-go's validation does).
pub(super) fn apply_user(
    name: &str,
    u: &Entry<User>,
    config: &mut Config,
    https: bool,
    cluster: &ExecCluster,
) -> Result<(), ConfigError> {
    let what = format!("user {name:?}");
    let v = &u.value;
    let err = |m: String| ConfigError::in_file(&u.file, format!("{what}: {m}"));
    let set = |s: &Option<String>| s.as_ref().is_some_and(|s| !s.is_empty());
    if set(&v.client_certificate_data) && v.client_certificate.is_some() {
        return Err(err(
            "client-certificate-data and client-certificate are both set; keep one".into(),
        ));
    }
    if set(&v.client_key_data) && v.client_key.is_some() {
        return Err(err(
            "client-key-data and client-key are both set; keep one".into()
        ));
    }
    let token = v.token.clone().filter(|t| !t.is_empty());
    let basic = set(&v.username) || set(&v.password);
    if token.is_some() && basic {
        return Err(err(
            "more than one authentication method: token and username/password; keep one".into(),
        ));
    }
    if https && v.token_file.is_some() && set(&v.username) {
        return Err(err(
            "username/password or a bearer token (tokenFile) may be set, but not both".into(),
        ));
    }
    if let Some(e) = &v.exec {
        if v.auth_provider.is_some() {
            return Err(err(
                "auth-provider cannot be given together with an exec plugin".into(),
            ));
        }
        check_exec(e).map_err(err)?;
    }
    if v.auth_provider.is_some() {
        return Err(err(
            "auth-provider plugins (oidc, gcp, azure) are not supported; use an exec credential \
             plugin instead, e.g. kubelogin for OIDC (kubectl oidc-login)"
                .into(),
        ));
    }
    let cert = data_or_file(
        &u.file,
        &what,
        "client-certificate",
        &v.client_certificate_data,
        &v.client_certificate,
    )?;
    let key = data_or_file(
        &u.file,
        &what,
        "client-key",
        &v.client_key_data,
        &v.client_key,
    )?;
    if cert.is_some() && key.is_none() {
        return Err(err(
            "client-key-data or client-key must be given with a client certificate".into(),
        ));
    }
    if !https {
        // client-go loads no credential for a plain-HTTP server; say so rather than fail later
        // with a puzzling 401.
        if cert.is_some() || token.is_some() || basic || v.token_file.is_some() || v.exec.is_some()
        {
            log::warn!(
                "{what}: credentials were not sent: the server {} is not TLS (http://), and \
                 credentials go only over TLS",
                config.server
            );
        }
        return Ok(());
    }
    let has_cert = cert.is_some();
    config.tls.client_cert_pem = cert;
    config.tls.client_key_pem = key.filter(|_| has_cert);
    config.auth = match (&v.token_file, token) {
        (Some(f), Some(t)) => AuthConfig::TokenFileOr {
            path: f.clone(),
            token: t,
        },
        (Some(f), None) => AuthConfig::TokenFile(f.clone()),
        (None, Some(t)) => AuthConfig::Token(t),
        (None, None) if set(&v.username) => AuthConfig::Basic {
            username: v.username.clone().unwrap_or_default(),
            password: v.password.clone().unwrap_or_default(),
        },
        // A certificate, token or password makes client-go skip the exec plugin.
        (None, None) => match &v.exec {
            Some(e) if !has_cert && !basic => {
                AuthConfig::Exec(exec_config(e, cluster).map_err(err)?)
            }
            // Basic auth from the server URL's userinfo, if any.
            _ => std::mem::take(&mut config.auth),
        },
    };
    Ok(())
}

/// client-go's validation of an exec entry (whatever the server's scheme).
fn check_exec(e: &Exec) -> Result<(), String> {
    if e.command.as_deref().unwrap_or_default().is_empty() {
        return Err("exec: command is required".into());
    }
    if e.api_version.as_deref().unwrap_or_default().is_empty() {
        return Err("exec: apiVersion is required".into());
    }
    if e.env.iter().flatten().any(|v| v.name.is_empty()) {
        return Err("exec: every env entry needs a name".into());
    }
    Ok(())
}

fn exec_config(e: &Exec, cluster: &ExecCluster) -> Result<ExecConfig, String> {
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
        provide_cluster_info: e.provide_cluster_info == Some(true),
        interactive_mode: e.interactive_mode.clone().filter(|m| !m.is_empty()),
        cluster_server: Some(cluster.server.clone()),
        cluster_config: cluster.config.clone(),
    })
}

/// The user's impersonation with the `--as*` flags over it (each flag given replaces its field).
pub(super) fn impersonation(u: &User, flags: &Impersonation) -> Result<Impersonation, String> {
    let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let imp = Impersonation {
        user: nonempty(&flags.user).or(nonempty(&u.impersonate)),
        uid: nonempty(&flags.uid).or(nonempty(&u.as_uid)),
        groups: if flags.groups.is_empty() {
            u.as_groups.clone().unwrap_or_default()
        } else {
            flags.groups.clone()
        },
        extra: if flags.extra.is_empty() {
            u.as_user_extra
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            flags.extra.clone()
        },
    };
    check_impersonation(&imp)?;
    Ok(imp)
}

/// client-go's rule: a uid, groups or extra are only sent for an impersonated user.
pub(crate) fn check_impersonation(imp: &Impersonation) -> Result<(), String> {
    if imp.user.is_none() && !imp.is_empty() {
        return Err(
            "impersonating a uid, groups or user-extra needs a user to impersonate (as / --as)"
                .into(),
        );
    }
    Ok(())
}

/// What an exec plugin with `provideClusterInfo` is told besides the TLS settings.
pub(super) struct ExecCluster {
    /// The server as written (client-go passes it unchanged).
    pub(super) server: String,
    /// The `client.authentication.k8s.io/exec` extension as JSON.
    pub(super) config: Option<String>,
}
