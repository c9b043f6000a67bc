//! The server URL as Go reads it: case-insensitive scheme, userinfo turned into basic auth
//! and kept out of every message.

use super::config::{AuthConfig, Config};

/// Stands in for URL userinfo in messages.
const REDACTED: &str = "<redacted>";

/// `url` with any `user:password@` replaced by `REDACTED@`, for messages.
pub fn redact_url(url: &str) -> String {
    match split_userinfo(url) {
        Some((scheme, _, rest)) => format!("{scheme}://{REDACTED}@{rest}"),
        None => url.to_string(),
    }
}

/// `scheme`, userinfo and the rest of `url` when its authority has a userinfo part.
fn split_userinfo(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (userinfo, _) = rest[..end].rsplit_once('@')?;
    Some((scheme, userinfo, &rest[userinfo.len() + 1..]))
}

/// Percent-decoding of URL userinfo (`%40` is `@`); a bad escape is kept as written.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Config {
    /// Brings `server` to the form every other part relies on, as Go's URL parser and HTTP
    /// client do: a lower-case scheme (`HTTPS://` works in kubectl), and userinfo
    /// (`https://user:pw@host`) taken out of the URL, so it reaches no message, and turned
    /// into basic auth when no other credential is set.
    pub fn normalize_server(&mut self) {
        if let Some((scheme, rest)) = self.server.split_once("://") {
            if scheme.bytes().any(|c| c.is_ascii_uppercase()) {
                self.server = format!("{}://{rest}", scheme.to_ascii_lowercase());
            }
        }
        let Some((scheme, userinfo, rest)) = split_userinfo(&self.server) else {
            return;
        };
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let (user, password) = (percent_decode(user), percent_decode(password));
        let server = format!("{scheme}://{rest}");
        self.server = server;
        if matches!(self.auth, AuthConfig::None) && !user.is_empty() {
            self.auth = AuthConfig::Basic {
                username: user,
                password,
            };
        }
    }

    /// Whether the server is reached over TLS (credentials are sent only then).
    pub fn is_tls(&self) -> bool {
        self.server.starts_with("https://")
    }

    /// Whether any credential (token, password, client certificate, exec plugin) is set.
    pub fn has_credentials(&self) -> bool {
        !matches!(self.auth, AuthConfig::None)
            || self.tls.client_cert_pem.is_some()
            || self.tls.client_key_pem.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_userinfo_becomes_basic_auth_and_is_redacted() {
        assert_eq!(
            redact_url("https://u:pw@h:6443/p?q"),
            "https://<redacted>@h:6443/p?q"
        );
        assert_eq!(redact_url("https://h:6443/a@b"), "https://h:6443/a@b");
        let mut c = Config::new("HTTPS://us%65r:p%40ss:w@h:6443");
        c.normalize_server();
        assert_eq!(c.server, "https://h:6443");
        assert!(matches!(&c.auth, AuthConfig::Basic { username, password }
            if username == "user" && password == "p@ss:w"));
        // A credential already set wins (Go's client adds URL basic auth only without one).
        let mut c = Config::new("https://u:pw@h");
        c.auth = AuthConfig::Token("t".into());
        c.normalize_server();
        assert!(matches!(c.auth, AuthConfig::Token(_)));
        assert!(!format!("{c:?}").contains("pw"));
    }
}
