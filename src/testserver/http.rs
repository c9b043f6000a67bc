//! HTTP/1.1 on a plain or TLS stream: request parsing, fixed-length and chunked responses.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// Largest request head (request line plus headers) accepted.
const MAX_HEAD_BYTES: usize = 64 << 10;
/// Largest request body accepted (the real server's limit is 3 MiB per object; leave room).
const MAX_BODY_BYTES: usize = 16 << 20;

/// The error inside an `io::Error` when a request body is over [`MAX_BODY_BYTES`]: the
/// connection answers 413 and reads (discards) what the client still sends, as a real
/// server does, so the client reads the answer instead of failing with "Broken pipe".
#[derive(Debug)]
pub(crate) struct BodyTooLarge {
    /// Bytes of the body still on the wire, when the request said (Content-Length).
    pub(crate) unread: Option<u64>,
}

impl std::fmt::Display for BodyTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "request body over the limit of {MAX_BODY_BYTES} bytes")
    }
}

impl std::error::Error for BodyTooLarge {}

impl BodyTooLarge {
    /// The marker inside `e`, if `e` is one.
    pub(crate) fn of(e: &io::Error) -> Option<&BodyTooLarge> {
        e.get_ref().and_then(|inner| inner.downcast_ref())
    }

    fn error(unread: Option<u64>) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, BodyTooLarge { unread })
    }
}

/// Reads and drops up to `limit` bytes, so that a client still sending a refused body
/// can finish and read the answer; stops at EOF or the first error (a read timeout).
pub(crate) fn drain<R: Read>(r: &mut R, limit: u64) {
    let _ = io::copy(&mut r.take(limit), &mut io::sink());
}

/// A connection, plain or TLS.
pub(crate) enum Conn {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// One parsed request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// Path without the query, percent-decoded per segment later.
    pub(crate) path: String,
    /// The raw query string (without `?`).
    pub(crate) raw_query: String,
    query: Vec<(String, String)>,
    /// Header names lower-cased.
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// Whether the connection stays open after the answer.
    pub(crate) keep_alive: bool,
}

impl Request {
    /// The first value of header `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name` (case-insensitive), in order.
    pub(crate) fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> {
        self.headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether a header name starts with `prefix` (lower-case).
    pub(crate) fn has_header_prefix(&self, prefix: &str) -> bool {
        self.headers.iter().any(|(k, _)| k.starts_with(prefix))
    }

    /// The first value of query parameter `key`, percent-decoded.
    pub(crate) fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether query parameter `key` is `true` or `1`.
    pub(crate) fn query_bool(&self, key: &str) -> bool {
        matches!(self.query(key), Some("true" | "1"))
    }
}

/// Decodes `%XX` escapes (and `+` as space in queries when `plus` is set).
pub(crate) fn percent_decode(s: &str, plus: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read_line<R: BufRead>(r: &mut R, budget: &mut usize) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "request head too large",
        ));
    }
    *budget -= n;
    while line.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// Reads the next request; `Ok(None)` when the peer closed the connection between requests.
pub(crate) fn read_request(r: &mut BufReader<Conn>) -> io::Result<Option<Request>> {
    let mut budget = MAX_HEAD_BYTES;
    let mut first = None;
    while first.is_none() {
        match read_line(r, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue, // tolerate stray CRLF between requests
            Some(l) => first = Some(l),
        }
    }
    let first = first.unwrap_or_default();
    let mut parts = first.split_whitespace();
    let (Some(method), Some(target), version) = (parts.next(), parts.next(), parts.next()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad request line",
        ));
    };
    let mut headers = Vec::new();
    loop {
        let Some(line) = read_line(r, &mut budget)? else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "eof in headers",
            ));
        };
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let (path, raw_query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    let query = raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k, true), percent_decode(v, true)),
            None => (percent_decode(p, true), String::new()),
        })
        .collect();
    let mut req = Request {
        method: method.to_string(),
        path,
        raw_query,
        query,
        headers,
        body: Vec::new(),
        keep_alive: version != Some("HTTP/1.0"),
    };
    if let Some(c) = req.header("connection") {
        if c.eq_ignore_ascii_case("close") {
            req.keep_alive = false;
        } else if c.eq_ignore_ascii_case("keep-alive") {
            req.keep_alive = true;
        }
    }
    if req
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        r.get_mut().write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        r.get_mut().flush()?;
    }
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    if chunked {
        req.body = read_chunked(r)?;
    } else if let Some(len) = req.header("content-length") {
        let len: u64 = len
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?;
        let len = match usize::try_from(len) {
            Ok(l) if l <= MAX_BODY_BYTES => l,
            _ => return Err(BodyTooLarge::error(Some(len))),
        };
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        req.body = body;
    }
    Ok(Some(req))
}

fn read_chunked<R: BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut budget = 1024;
        let line = read_line(r, &mut budget)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "eof in chunk"))?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            // Trailers until the empty line.
            loop {
                let mut budget = MAX_HEAD_BYTES;
                match read_line(r, &mut budget)? {
                    None => return Ok(body),
                    Some(l) if l.is_empty() => return Ok(body),
                    Some(_) => {}
                }
            }
        }
        // Subtracted, not added: a chunk size of ffffffffffffffff overflowed the sum.
        if size > MAX_BODY_BYTES - body.len() {
            return Err(BodyTooLarge::error(None));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)?;
    }
}

/// The reason phrase for a status code.
pub(crate) fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        413 => "Payload Too Large",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// A complete answer with a known length.
pub(crate) struct Response {
    pub(crate) code: u16,
    pub(crate) content_type: &'static str,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// A JSON answer.
    pub(crate) fn json(code: u16, body: Vec<u8>) -> Self {
        Response {
            code,
            content_type: "application/json",
            headers: Vec::new(),
            body,
        }
    }
}

fn head(
    code: u16,
    content_type: &str,
    headers: &[(&'static str, String)],
    keep_alive: bool,
) -> String {
    let mut h = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nCache-Control: no-cache, private\r\n",
        reason_phrase(code)
    );
    for (k, v) in headers {
        h.push_str(k);
        h.push_str(": ");
        h.push_str(v);
        h.push_str("\r\n");
    }
    if !keep_alive {
        h.push_str("Connection: close\r\n");
    }
    h
}

/// Writes `resp`; with `cut` only half the body is sent (the caller then drops the connection).
pub(crate) fn write_response<W: Write>(
    w: &mut W,
    resp: &Response,
    keep_alive: bool,
    cut: bool,
) -> io::Result<()> {
    let mut out = head(resp.code, resp.content_type, &resp.headers, keep_alive).into_bytes();
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", resp.body.len()).as_bytes());
    let body = if cut {
        &resp.body[..resp.body.len() / 2]
    } else {
        &resp.body[..]
    };
    out.extend_from_slice(body);
    w.write_all(&out)?;
    w.flush()
}

/// Writes the head of a chunked answer (a watch) with `headers`.
pub(crate) fn write_chunked_head<W: Write>(
    w: &mut W,
    content_type: &str,
    headers: &[(&'static str, String)],
) -> io::Result<()> {
    let h = head(200, content_type, headers, true) + "Transfer-Encoding: chunked\r\n\r\n";
    w.write_all(h.as_bytes())?;
    w.flush()
}

/// Writes one chunk and flushes so the client sees it now.
pub(crate) fn write_chunk<W: Write>(w: &mut W, data: &[u8]) -> io::Result<()> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    w.write_all(&out)?;
    w.flush()
}

/// Writes several chunks with one write and one flush.
pub(crate) fn write_chunks<W: Write>(
    w: &mut W,
    chunks: impl Iterator<Item = Vec<u8>>,
) -> io::Result<()> {
    let mut out = Vec::new();
    for data in chunks {
        out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        out.extend_from_slice(&data);
        out.extend_from_slice(b"\r\n");
    }
    w.write_all(&out)?;
    w.flush()
}

/// Ends a chunked body.
pub(crate) fn write_last_chunk<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%3Db%2Cc+d", true), "a=b,c d");
        assert_eq!(percent_decode("a%2", false), "a%2");
        assert_eq!(percent_decode("%", false), "%");
    }

    #[test]
    fn absurd_chunk_sizes_are_bad_requests() {
        for size in ["ffffffffffffffff", "1000001", "-1", "zz", ""] {
            let text = format!("{size}\r\nabc\r\n0\r\n\r\n");
            let e = read_chunked(&mut text.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{size}: {e}");
        }
        let ok = read_chunked(&mut &b"3\r\nabc\r\n0\r\n\r\n"[..]).unwrap();
        assert_eq!(ok, b"abc");
    }
}
