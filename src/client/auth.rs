//! Credentials for each request: static token, rotating token file, basic auth, exec plugin.

use base64::Engine as _;

use super::config::AuthConfig;
use super::Error;

/// Produces the `Authorization` header for each request.
pub(crate) struct Authenticator {
    config: AuthConfig,
}

impl Authenticator {
    /// Prepares credentials from the configuration.
    pub(crate) fn new(config: &AuthConfig) -> Result<Self, Error> {
        Ok(Authenticator {
            config: config.clone(),
        })
    }

    /// The `Authorization` header value for the next request, if any.
    pub(crate) fn header(&self) -> Result<Option<String>, Error> {
        Ok(match &self.config {
            AuthConfig::None => None,
            AuthConfig::Token(t) => Some(format!("Bearer {t}")),
            AuthConfig::TokenFile(path) => {
                let t = std::fs::read_to_string(path).map_err(|e| {
                    Error::Auth(format!("cannot read token file {}: {e}", path.display()))
                })?;
                Some(format!("Bearer {}", t.trim()))
            }
            AuthConfig::Basic { username, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
        })
    }

    /// Called after a 401: drops cached credentials; true when a retry may now succeed.
    pub(crate) fn invalidate(&self) -> bool {
        false
    }
}
