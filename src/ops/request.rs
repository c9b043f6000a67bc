//! Reading and parsing one HTTP/1.x request head, with a size limit; bodies are never read.

use std::io::{self, Read};

/// Largest request head (request line and headers) accepted; a probe or scraper sends a few
/// hundred bytes.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// What the server needs of a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Request {
    /// The method as sent (`GET`, `HEAD`, ...).
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string without `?`, or empty.
    pub query: String,
}

/// Why no request could be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed before sending anything (a TCP probe, or our own wake-up): no answer.
    Closed,
    /// Not a request we accept; answered with `400` and this message.
    Bad(&'static str),
    /// The socket failed or timed out; the connection is dropped without an answer.
    Io(io::Error),
}

/// Reads up to the end of the head (`\r\n\r\n`, or `\n\n` from lenient clients) and parses it.
pub(crate) fn read_request(r: &mut impl Read) -> Result<Request, ReadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::Io(e)),
        };
        if n == 0 {
            return Err(if buf.is_empty() {
                ReadError::Closed
            } else {
                ReadError::Bad("incomplete request head")
            });
        }
        // Search only the new bytes plus the three before them.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf[from..]) {
            return parse_head(&buf[..from + end]);
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(ReadError::Bad("request head too large"));
        }
    }
}

/// Offset just past the blank line ending the head, if present.
fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Parses the request line and checks the header lines' shape.
pub(crate) fn parse_head(head: &[u8]) -> Result<Request, ReadError> {
    if head.len() > MAX_HEAD_BYTES {
        return Err(ReadError::Bad("request head too large"));
    }
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = lines.next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| ReadError::Bad("request line is not text"))?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad("malformed request line"));
    };
    if method.is_empty() || method.len() > 16 || !method.bytes().all(is_tchar) {
        return Err(ReadError::Bad("malformed method"));
    }
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Err(ReadError::Bad("unsupported HTTP version"));
    }
    if !target.starts_with('/') || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ReadError::Bad("malformed request target"));
    }
    for header in lines.filter(|l| !l.is_empty()) {
        let Some(colon) = header.iter().position(|&b| b == b':') else {
            return Err(ReadError::Bad("malformed header line"));
        };
        if colon == 0 || !header[..colon].iter().copied().all(is_tchar) {
            return Err(ReadError::Bad("malformed header name"));
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
    })
}

/// RFC 9110 token characters (methods, header names).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Request, ReadError> {
        read_request(&mut s.as_bytes())
    }

    fn bad(s: &str) -> &'static str {
        match parse(s) {
            Err(ReadError::Bad(m)) => m,
            other => panic!("expected Bad for {s:?}, got {other:?}"),
        }
    }

    #[test]
    fn a_plain_get_is_parsed() {
        let r = parse("GET /readyz?verbose HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n").unwrap();
        assert_eq!(
            r,
            Request {
                method: "GET".into(),
                path: "/readyz".into(),
                query: "verbose".into()
            }
        );
    }

    #[test]
    fn bare_newlines_and_http_1_0_are_accepted() {
        let r = parse("HEAD /metrics HTTP/1.0\nHost: x\n\n").unwrap();
        assert_eq!(r.method, "HEAD");
        assert_eq!(r.path, "/metrics");
    }

    #[test]
    fn bytes_after_the_head_are_ignored() {
        let r = parse("POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").unwrap();
        assert_eq!(r.method, "POST");
    }

    #[test]
    fn malformed_requests_are_bad() {
        assert_eq!(bad("garbage\r\n\r\n"), "malformed request line");
        assert_eq!(bad("GET  /x HTTP/1.1\r\n\r\n"), "malformed request line");
        assert_eq!(bad("GET /x HTTP/2\r\n\r\n"), "unsupported HTTP version");
        assert_eq!(
            bad("GET http://h/x HTTP/1.1\r\n\r\n"),
            "malformed request target"
        );
        assert_eq!(bad("G(T /x HTTP/1.1\r\n\r\n"), "malformed method");
        assert_eq!(
            bad("GET /x HTTP/1.1\r\nno colon\r\n\r\n"),
            "malformed header line"
        );
        assert_eq!(
            bad("GET /x HTTP/1.1\r\n: v\r\n\r\n"),
            "malformed header name"
        );
        assert_eq!(
            bad("GET /\u{e9} HTTP/1.1\r\n\r\n"),
            "malformed request target"
        );
        assert_eq!(
            bad("GET /x HTTP/1.1\r\nHost: x\r\n"),
            "incomplete request head"
        );
        let binary: &[u8] = &[0xff, 0xfe, b'\n', b'\n'];
        assert!(matches!(
            read_request(&mut &binary[..]),
            Err(ReadError::Bad("request line is not text"))
        ));
    }

    #[test]
    fn an_oversized_head_is_refused_without_reading_it_all() {
        let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(1 << 20));
        let mut reader = huge.as_bytes();
        assert!(matches!(
            read_request(&mut reader),
            Err(ReadError::Bad("request head too large"))
        ));
        // Stopped shortly after the limit, not at the end of the megabyte.
        assert!(reader.len() > (1 << 20) - 2 * MAX_HEAD_BYTES);
    }

    #[test]
    fn a_head_split_across_reads_is_found() {
        // A reader handing out one byte at a time exercises the boundary search.
        struct OneByte<'a>(&'a [u8]);
        impl Read for OneByte<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let Some((&b, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buf[0] = b;
                self.0 = rest;
                Ok(1)
            }
        }
        let r = read_request(&mut OneByte(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")).unwrap();
        assert_eq!(r.path, "/healthz");
    }

    #[test]
    fn an_empty_connection_is_closed_not_bad() {
        assert!(matches!(parse(""), Err(ReadError::Closed)));
    }
}
