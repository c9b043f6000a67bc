//! The client's error type, classified the way the API server reports failures.

use std::fmt;
use std::time::Duration;

use crate::api::Status;

/// Why a request to the API server failed.
#[derive(Debug, Clone)]
pub enum Error {
    /// The server answered with an error status (and usually a `Status` body).
    Api(Box<ApiError>),
    /// TCP connection could not be established (refused, unreachable, DNS).
    Connect(String),
    /// TLS handshake or certificate verification failed.
    Tls(String),
    /// A connect, request or watch timeout expired.
    Timeout(String),
    /// The connection broke mid-request or mid-body.
    Io(String),
    /// The answer could not be decoded (not JSON, wrong shape).
    Decode(String),
    /// The answer (or one watch event) exceeded the size limit.
    TooLarge(String),
    /// Credentials could not be obtained (token file, exec plugin).
    Auth(String),
    /// The client configuration is unusable (bad CA, bad key, bad URL).
    Config(String),
    /// The request was cancelled from another thread (shutdown).
    Cancelled,
}

/// An error answer from the API server.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The `Status` body, or one synthesised from the code when the body was not a Status.
    pub status: Status,
    /// `Retry-After` (header, or `details.retryAfterSeconds`), if given.
    pub retry_after: Option<Duration>,
}

impl ApiError {
    /// The Status reason, e.g. `NotFound`, or `""`.
    pub fn reason(&self) -> &str {
        self.status.reason.as_deref().unwrap_or("")
    }

    /// The Status message, or `""`.
    pub fn message(&self) -> &str {
        self.status.message.as_deref().unwrap_or("")
    }
}

/// Longest wait a `Retry-After` may ask for; longer ones are cut to this, so a broken or
/// hostile answer cannot park a key (or the reflector) for years.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Longest Status message (and cause message) kept, in bytes; the rest is cut so one
/// answer cannot flood logs. Reasons and field paths are kept to [`MAX_STATUS_WORD`].
const MAX_STATUS_MESSAGE: usize = 4096;
/// Longest Status reason, kind or cause field kept, in bytes.
const MAX_STATUS_WORD: usize = 256;
/// Most field causes kept from one Status.
const MAX_STATUS_CAUSES: usize = 32;

/// Cuts `s` to at most `max` bytes on a char boundary, marking the cut.
fn bound(s: &mut Option<String>, max: usize) {
    if let Some(text) = s.as_mut().filter(|t| t.len() > max) {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
}

/// A server's Status, with its free-text fields bounded for logs and errors.
fn bounded(mut status: Status) -> Status {
    bound(&mut status.message, MAX_STATUS_MESSAGE);
    bound(&mut status.reason, MAX_STATUS_WORD);
    bound(&mut status.kind, MAX_STATUS_WORD);
    if let Some(d) = status.details.as_mut() {
        bound(&mut d.name, MAX_STATUS_WORD);
        bound(&mut d.kind, MAX_STATUS_WORD);
        d.causes.truncate(MAX_STATUS_CAUSES);
        for c in &mut d.causes {
            bound(&mut c.reason, MAX_STATUS_WORD);
            bound(&mut c.field, MAX_STATUS_WORD);
            bound(&mut c.message, MAX_STATUS_MESSAGE);
        }
    }
    status
}

impl Error {
    /// Builds an API error from a code, an optional Status body and a Retry-After (at most
    /// [`MAX_RETRY_AFTER`]); the Status's messages are bounded in length.
    pub fn api(code: u16, status: Option<Status>, retry_after: Option<Duration>) -> Error {
        let status = status.map(bounded).unwrap_or_else(|| {
            Status::failure(
                code,
                reason_for_code(code),
                format!("the server answered HTTP {code}"),
            )
        });
        let retry_after = retry_after
            .or_else(|| {
                status
                    .details
                    .as_ref()
                    .and_then(|d| d.retry_after_seconds)
                    .map(|s| Duration::from_secs(u64::from(s)))
            })
            .map(|d| d.min(MAX_RETRY_AFTER));
        Error::Api(Box::new(ApiError {
            code,
            status,
            retry_after,
        }))
    }

    /// The error a `Status` stands for, e.g. the object of a watch `ERROR` event.
    /// Its `code` is taken as the HTTP code; without one, the code is inferred from the reason.
    pub fn from_status(status: Status) -> Error {
        let code = status
            .code
            .filter(|c| (100..600).contains(c))
            .unwrap_or_else(|| code_for_reason(status.reason.as_deref().unwrap_or("")));
        Error::api(code, Some(status), None)
    }

    /// The API error, when the server answered.
    pub fn as_api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            _ => None,
        }
    }

    fn is(&self, reason: &str, code: u16) -> bool {
        self.as_api().is_some_and(|e| {
            let r = e.reason();
            r == reason || (r.is_empty() || r == "Unknown") && e.code == code
        })
    }

    /// The request was cancelled (shutdown), not answered.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled)
    }
    /// 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.is("NotFound", 404)
    }
    /// 409 AlreadyExists.
    pub fn is_already_exists(&self) -> bool {
        self.as_api().is_some_and(|e| e.reason() == "AlreadyExists")
    }
    /// 409 Conflict (stale resourceVersion or failed precondition).
    pub fn is_conflict(&self) -> bool {
        self.as_api().is_some_and(|e| {
            e.reason() == "Conflict" || (e.code == 409 && e.reason() != "AlreadyExists")
        })
    }
    /// 409 Conflict of a server-side apply without `force`: a field it sets is owned by
    /// another manager (causes of type `FieldManagerConflict`, apimachinery's
    /// `NewApplyConflict`). Waiting does not resolve it, unlike a stale resourceVersion.
    pub fn is_apply_conflict(&self) -> bool {
        self.as_api().is_some_and(|e| {
            e.code == 409
                && e.status.details.as_ref().is_some_and(|d| {
                    d.causes
                        .iter()
                        .any(|c| c.reason.as_deref() == Some("FieldManagerConflict"))
                })
        })
    }
    /// 415 UnsupportedMediaType: the server does not take this body's type (e.g. no
    /// server-side apply).
    pub fn is_unsupported_media_type(&self) -> bool {
        self.is("UnsupportedMediaType", 415)
    }
    /// 410 Gone or reason Expired: the requested resourceVersion is too old; relist.
    pub fn is_gone(&self) -> bool {
        self.as_api()
            .is_some_and(|e| e.code == 410 || matches!(e.reason(), "Gone" | "Expired"))
    }
    /// 422 Invalid.
    pub fn is_invalid(&self) -> bool {
        self.is("Invalid", 422)
    }
    /// 429 TooManyRequests.
    pub fn is_too_many_requests(&self) -> bool {
        self.is("TooManyRequests", 429)
    }
    /// 401 Unauthorized.
    pub fn is_unauthorized(&self) -> bool {
        self.is("Unauthorized", 401)
    }
    /// 403 Forbidden.
    pub fn is_forbidden(&self) -> bool {
        self.is("Forbidden", 403)
    }
    /// 500 InternalError, 503 ServiceUnavailable, 504 ServerTimeout/Timeout and other 5xx.
    pub fn is_server_error(&self) -> bool {
        self.as_api().is_some_and(|e| e.code >= 500)
    }
    /// The watch asked for a resourceVersion newer than the server has:
    /// the server's history moved backwards (restore, restart); relist from scratch.
    pub fn is_resource_version_too_large(&self) -> bool {
        self.as_api().is_some_and(|e| {
            let causes = e
                .status
                .details
                .as_ref()
                .map(|d| d.causes.as_slice())
                .unwrap_or(&[]);
            causes
                .iter()
                .any(|c| c.reason.as_deref() == Some("ResourceVersionTooLarge"))
                || e.message().contains("Too large resource version")
        })
    }
    /// No answer from the server: connect, TLS, timeout or a cut connection.
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            Error::Connect(_) | Error::Tls(_) | Error::Timeout(_) | Error::Io(_)
        )
    }
    /// The server could not be reached: refused or reset connection, failed TLS handshake,
    /// timeout. The same transport failures as [`is_transport`](Self::is_transport), named
    /// for what callers do with them: a controller whose server answered before (its cache
    /// synced) takes one of these as "the server is down", not as a fault of one request.
    pub fn is_unreachable(&self) -> bool {
        self.is_transport()
    }
    /// How long the server asked us to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        self.as_api().and_then(|e| e.retry_after)
    }
    /// The field causes of an `Invalid` answer as `field: message` strings.
    pub fn causes(&self) -> Vec<String> {
        let Some(e) = self.as_api() else {
            return Vec::new();
        };
        let Some(details) = &e.status.details else {
            return Vec::new();
        };
        details
            .causes
            .iter()
            .map(|c| match (&c.field, &c.message) {
                (Some(f), Some(m)) => format!("{f}: {m}"),
                (None, Some(m)) => m.clone(),
                (Some(f), None) => f.clone(),
                (None, None) => c.reason.clone().unwrap_or_default(),
            })
            .collect()
    }
}

/// The Status reason the API server uses for a bare HTTP code.
pub fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// The HTTP code the API server sends with a Status reason (500 when unknown).
fn code_for_reason(reason: &str) -> u16 {
    match reason {
        "Expired" => 410,
        "AlreadyExists" => 409,
        "ServerTimeout" => 500,
        _ => (400..=504)
            .find(|&c| reason_for_code(c) == reason && reason != "Unknown")
            .unwrap_or(500),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(e) => {
                write!(f, "{} ({}): {}", e.reason(), e.code, e.message())?;
                let causes = self.causes();
                if !causes.is_empty() && !e.message().contains(&causes[0]) {
                    write!(f, " [{}]", causes.join("; "))?;
                }
                Ok(())
            }
            Error::Connect(m) => write!(f, "connect failed: {m}"),
            Error::Tls(m) => write!(f, "TLS failed: {m}"),
            Error::Timeout(m) => write!(f, "timed out: {m}"),
            Error::Io(m) => write!(f, "connection broken: {m}"),
            Error::Decode(m) => write!(f, "cannot decode the answer: {m}"),
            Error::TooLarge(m) => write!(f, "answer too large: {m}"),
            Error::Auth(m) => write!(f, "credentials: {m}"),
            Error::Config(m) => write!(f, "client configuration: {m}"),
            Error::Cancelled => write!(f, "cancelled"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Option<u16>, reason: &str) -> Status {
        Status {
            code,
            ..Status::failure(0, reason, "m")
        }
    }

    #[test]
    fn from_status_uses_the_status_code() {
        let e = Error::from_status(status(Some(410), "Expired"));
        assert_eq!(e.as_api().unwrap().code, 410);
        assert!(e.is_gone() && !e.is_server_error());
    }

    #[test]
    fn from_status_without_a_code_infers_it_from_the_reason() {
        for (reason, code) in [
            ("Expired", 410),
            ("Gone", 410),
            ("NotFound", 404),
            ("Conflict", 409),
            ("AlreadyExists", 409),
            ("Invalid", 422),
            ("TooManyRequests", 429),
            ("Timeout", 504),
            ("InternalError", 500),
            ("SomethingNew", 500),
        ] {
            let e = Error::from_status(status(None, reason));
            assert_eq!(e.as_api().unwrap().code, code, "{reason}");
        }
        assert!(!Error::from_status(status(None, "Expired")).is_server_error());
    }
}
