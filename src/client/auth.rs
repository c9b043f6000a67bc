//! Credentials for each request: static token, rotating token file, basic auth, exec plugin.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use parking_lot::Mutex;

use super::config::{AuthConfig, Config};
use super::exec::ExecPlugin;
use super::Error;

/// How long a token read from a file is trusted before reading it again; client-go re-reads
/// service-account tokens at least every minute so rotation is picked up.
pub(crate) const TOKEN_FILE_TTL: Duration = Duration::from_secs(60);

/// The time source for the token-file cache; injectable so tests move time instead of sleeping.
pub(crate) type Now = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Produces the `Authorization` header for each request.
pub(crate) struct Authenticator {
    source: Source,
}

enum Source {
    None,
    /// A fixed header value (bearer token or basic auth).
    Fixed(String),
    TokenFile(TokenFile),
    /// The file's token while readable, else the fixed one.
    TokenFileOr(TokenFile, String),
    Exec(Arc<ExecPlugin>),
}

impl Authenticator {
    /// Prepares credentials from the configuration (the exec plugin runs at the first request).
    pub(crate) fn new(config: &Config) -> Result<Self, Error> {
        let source = match &config.auth {
            AuthConfig::None => Source::None,
            AuthConfig::Token(t) => Source::Fixed(format!("Bearer {}", t.trim())),
            AuthConfig::TokenFile(path) => {
                Source::TokenFile(TokenFile::new(path.clone(), Arc::new(Instant::now)))
            }
            AuthConfig::TokenFileOr { path, token } => Source::TokenFileOr(
                TokenFile::new(path.clone(), Arc::new(Instant::now)),
                format!("Bearer {}", token.trim()),
            ),
            AuthConfig::Basic { username, password } => Source::Fixed(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
            AuthConfig::Exec(exec) => Source::Exec(ExecPlugin::shared(config, exec)?),
        };
        Ok(Authenticator { source })
    }

    /// The `Authorization` header value for the next request, if any, checked to be a valid
    /// header value. An exec plugin gets
    /// until `until` (and is killed when `cancelled()` turns true).
    pub(crate) fn header(
        &self,
        until: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<String>, Error> {
        let header = self.raw_header(until, cancelled)?;
        // A value HTTP cannot carry (a line break inside a token) is a credential problem;
        // said here, without the value, rather than as a malformed request.
        if let Some(h) = &header {
            if ureq::http::HeaderValue::from_str(h).is_err() {
                return Err(Error::Auth(format!(
                    "the {} holds a character an HTTP header cannot carry (a line break or \
                     control character inside the token?)",
                    self.describe()
                )));
            }
        }
        Ok(header)
    }

    /// Where the credential comes from, for messages (never its value).
    fn describe(&self) -> String {
        match &self.source {
            Source::None => "credential".into(),
            Source::Fixed(_) => "kubeconfig token or password".into(),
            Source::TokenFile(f) | Source::TokenFileOr(f, _) => {
                format!("token file {}", f.path.display())
            }
            Source::Exec(_) => "exec plugin's token".into(),
        }
    }

    fn raw_header(
        &self,
        until: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<String>, Error> {
        Ok(match &self.source {
            Source::None => None,
            Source::Fixed(h) => Some(h.clone()),
            Source::TokenFile(f) => Some(format!("Bearer {}", f.token()?)),
            Source::TokenFileOr(f, fixed) => Some(match f.token() {
                Ok(t) => format!("Bearer {t}"),
                Err(_) => fixed.clone(),
            }),
            Source::Exec(p) => p.token(until, cancelled)?.map(|t| format!("Bearer {t}")),
        })
    }

    /// Called after a 401: drops cached credentials; true when a retry may now succeed.
    pub(crate) fn invalidate(&self) -> bool {
        match &self.source {
            Source::None | Source::Fixed(_) => false,
            Source::TokenFile(f) | Source::TokenFileOr(f, _) => f.invalidate(),
            Source::Exec(p) => p.invalidate(),
        }
    }
}

/// A bearer token kept in a file that is rewritten when the token rotates.
pub(crate) struct TokenFile {
    path: PathBuf,
    now: Now,
    /// The token and when it was read.
    cache: Mutex<Option<(String, Instant)>>,
}

impl TokenFile {
    pub(crate) fn new(path: PathBuf, now: Now) -> Self {
        TokenFile {
            path,
            now,
            cache: Mutex::new(None),
        }
    }

    fn read(&self) -> Result<String, Error> {
        let t = std::fs::read_to_string(&self.path).map_err(|e| {
            Error::Auth(format!(
                "cannot read token file {}: {e}",
                self.path.display()
            ))
        })?;
        let t = t.trim();
        if t.is_empty() {
            return Err(Error::Auth(format!(
                "token file {} is empty",
                self.path.display()
            )));
        }
        Ok(t.to_string())
    }

    /// The cached token, re-read when older than [`TOKEN_FILE_TTL`].
    pub(crate) fn token(&self) -> Result<String, Error> {
        let mut cache = self.cache.lock();
        let now = (self.now)();
        if let Some((t, at)) = cache.as_ref() {
            if now.saturating_duration_since(*at) < TOKEN_FILE_TTL {
                return Ok(t.clone());
            }
        }
        let t = self.read()?;
        *cache = Some((t.clone(), now));
        Ok(t)
    }

    /// Re-reads the file now; true when it holds a different token than the one that was refused.
    pub(crate) fn invalidate(&self) -> bool {
        let mut cache = self.cache.lock();
        let old = cache.take();
        match self.read() {
            Ok(t) => {
                let changed = old.as_ref().is_none_or(|(o, _)| *o != t);
                *cache = Some((t, (self.now)()));
                changed
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_is_reread_after_a_minute() {
        let dir = std::env::temp_dir().join(format!("ar-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "one\n").unwrap();
        let start = Instant::now();
        let offset = Arc::new(Mutex::new(Duration::ZERO));
        let o = offset.clone();
        let f = TokenFile::new(path.clone(), Arc::new(move || start + *o.lock()));
        assert_eq!(f.token().unwrap(), "one");
        std::fs::write(&path, "two").unwrap();
        *offset.lock() = Duration::from_secs(59);
        assert_eq!(f.token().unwrap(), "one", "cached within the minute");
        *offset.lock() = Duration::from_secs(61);
        assert_eq!(f.token().unwrap(), "two", "re-read after the minute");
        // A 401 re-reads at once and reports whether retrying can help.
        std::fs::write(&path, "three").unwrap();
        assert!(f.invalidate());
        assert_eq!(f.token().unwrap(), "three");
        assert!(!f.invalidate(), "same token: retrying cannot help");
        // Surrounding whitespace of any kind is not part of the token (client-go trims it).
        std::fs::write(&path, " \t four \r\n\n").unwrap();
        assert!(f.invalidate());
        assert_eq!(f.token().unwrap(), "four");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_token_that_cannot_be_a_header_is_a_credential_error_naming_its_source() {
        let dir = std::env::temp_dir().join(format!("ar-auth-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first-line\nsecond-line\n").unwrap();
        let mut config = Config::new("https://x");
        config.auth = AuthConfig::TokenFile(path.clone());
        let a = Authenticator::new(&config).unwrap();
        let far = Instant::now() + Duration::from_secs(5);
        match a.header(far, &|| false) {
            Err(Error::Auth(m)) => {
                assert!(m.contains(&path.display().to_string()), "{m}");
                assert!(!m.contains("first-line"), "the token is not quoted: {m}");
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
