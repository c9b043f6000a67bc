//! A small forward proxy for tests: HTTP CONNECT or SOCKS5, on loopback, with std threads.
//!
//! It counts the tunnels it opened, keeps what each client sent before its tunnel (the
//! CONNECT head with any `Proxy-Authorization`, or the SOCKS5 user and password), can
//! require credentials, and resolves the names it is told about itself, so a server name
//! that no DNS knows is reachable only through the proxy.
//!
//! Use with `#[path = "support/proxy.rs"] mod proxy;`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which protocol the proxy speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HTTP `CONNECT host:port`.
    Connect,
    /// HTTP `CONNECT` inside TLS (an `https://` proxy), with a certificate for `localhost`
    /// and 127.0.0.1 from a CA of its own ([`TestProxy::ca_pem`]).
    HttpsConnect,
    /// SOCKS5 (RFC 1928), no authentication or user/password (RFC 1929).
    Socks5,
}

/// A running proxy; stops accepting on drop.
pub struct TestProxy {
    addr: SocketAddr,
    kind: Kind,
    state: Arc<State>,
    ca_pem: Option<String>,
}

struct State {
    /// Tunnels opened to a target.
    tunnels: AtomicUsize,
    /// Tunnels whose client has not finished sending (closed its socket) yet.
    open: AtomicUsize,
    /// What each client sent before its tunnel: the CONNECT head, or `SOCKS5 user:pw host:port`.
    heads: Mutex<Vec<String>>,
    /// Required credentials, `user:password`.
    auth: Option<String>,
    /// Names the proxy resolves itself.
    hosts: HashMap<String, SocketAddr>,
    stop: AtomicBool,
}

impl TestProxy {
    /// A proxy of `kind` that requires `auth` (`user:password`) when given and resolves
    /// each of `hosts` (name → address) itself.
    pub fn start(kind: Kind, auth: Option<&str>, hosts: &[(&str, SocketAddr)]) -> TestProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            tunnels: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            heads: Mutex::new(Vec::new()),
            auth: auth.map(str::to_string),
            hosts: hosts
                .iter()
                .map(|(n, a)| (n.to_ascii_lowercase(), *a))
                .collect(),
            stop: AtomicBool::new(false),
        });
        let (tls, ca_pem) = match kind {
            Kind::HttpsConnect => {
                let (config, ca) = tls_config();
                (Some(config), Some(ca))
            }
            _ => (None, None),
        };
        let s = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (s, tls) = (s.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = match (kind, tls) {
                        (Kind::HttpsConnect, Some(tls)) => serve_tls_connect(&s, tls, conn),
                        (Kind::Socks5, _) => serve_socks5(&s, conn),
                        _ => serve_connect(&s, conn),
                    };
                });
            }
        });
        TestProxy {
            addr,
            kind,
            state,
            ca_pem,
        }
    }

    /// `http://127.0.0.1:PORT` or `socks5://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.url_with("")
    }

    /// The URL with `userinfo@` (e.g. `user:pw@`) before the host.
    pub fn url_with(&self, userinfo: &str) -> String {
        let scheme = match self.kind {
            Kind::Connect => "http",
            Kind::HttpsConnect => "https",
            Kind::Socks5 => "socks5",
        };
        format!("{scheme}://{userinfo}{}", self.addr)
    }

    /// The CA (PEM) of an `https://` proxy's certificate.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Tunnels opened so far.
    pub fn tunnels(&self) -> usize {
        self.state.tunnels.load(Ordering::SeqCst)
    }

    /// Tunnels whose client still holds them open (has not closed or shut down its socket).
    pub fn open_tunnels(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// What the clients sent before their tunnels, oldest first.
    pub fn heads(&self) -> Vec<String> {
        self.state.heads.lock().unwrap().clone()
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn resolve(state: &State, host: &str, port: u16) -> Option<SocketAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Some(a) = state.hosts.get(&host.to_ascii_lowercase()) {
        return Some(*a);
    }
    (host, port).to_socket_addrs().ok()?.next()
}

/// Reads up to the blank line ending an HTTP head, a byte at a time (nothing past it).
fn read_head(conn: &mut impl Read) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || conn.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn serve_connect(state: &Arc<State>, mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    match open_tunnel(state, &mut conn)? {
        Some(upstream) => pipe(state, conn, upstream),
        None => Ok(()),
    }
}

fn serve_tls_connect(
    state: &Arc<State>,
    tls: Arc<rustls::ServerConfig>,
    conn: TcpStream,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let session = rustls::ServerConnection::new(tls).map_err(std::io::Error::other)?;
    let mut conn = rustls::StreamOwned::new(session, conn);
    let Some(mut upstream) = open_tunnel(state, &mut conn)? else {
        conn.flush()?;
        return Ok(());
    };
    state.tunnels.fetch_add(1, Ordering::SeqCst);
    state.open.fetch_add(1, Ordering::SeqCst);
    // One thread pumps both ways, polling each side briefly (a TLS stream cannot be split).
    let poll = Some(Duration::from_millis(10));
    conn.sock.set_read_timeout(poll)?;
    upstream.set_read_timeout(poll)?;
    let mut buf = vec![0u8; 16 * 1024];
    let quiet = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    };
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => upstream.write_all(&buf[..n])?,
            Err(e) if quiet(&e) => {}
            Err(_) => break,
        }
        match upstream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => conn.write_all(&buf[..n]).and_then(|()| conn.flush())?,
            Err(e) if quiet(&e) => {}
            Err(_) => break,
        }
    }
    state.open.fetch_sub(1, Ordering::SeqCst);
    let _ = upstream.shutdown(Shutdown::Both);
    Ok(())
}

/// Reads a CONNECT head from `conn` and answers it; the connection to the target when the
/// tunnel is open.
fn open_tunnel(
    state: &Arc<State>,
    conn: &mut (impl Read + Write),
) -> std::io::Result<Option<TcpStream>> {
    let head = read_head(conn)?;
    state.heads.lock().unwrap().push(head.clone());
    let mut lines = head.split("\r\n");
    let request: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    if request.len() != 3 || request[0] != "CONNECT" {
        conn.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(None);
    }
    if let Some(auth) = &state.auth {
        use base64::Engine as _;
        let want = format!(
            "basic {}",
            base64::engine::general_purpose::STANDARD.encode(auth)
        );
        let given = lines.find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("proxy-authorization")
                .then(|| v.trim().to_string())
        });
        if !given.is_some_and(|g| g.eq_ignore_ascii_case(&want)) {
            conn.write_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                  Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n",
            )?;
            return Ok(None);
        }
    }
    let target = request[1];
    let upstream = target.rsplit_once(':').and_then(|(h, p)| {
        let port = p.parse().ok()?;
        resolve(state, h, port).and_then(|a| TcpStream::connect(a).ok())
    });
    let Some(upstream) = upstream else {
        conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(None);
    };
    conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    conn.flush()?;
    Ok(Some(upstream))
}

fn serve_socks5(state: &Arc<State>, mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut hdr = [0u8; 2];
    conn.read_exact(&mut hdr)?;
    let mut methods = vec![0u8; hdr[1] as usize];
    conn.read_exact(&mut methods)?;
    let mut sent = String::from("SOCKS5");
    if let Some(auth) = &state.auth {
        if !methods.contains(&2) {
            conn.write_all(&[5, 0xff])?;
            return Ok(());
        }
        conn.write_all(&[5, 2])?;
        let mut v = [0u8; 2];
        conn.read_exact(&mut v)?;
        let mut user = vec![0u8; v[1] as usize];
        conn.read_exact(&mut user)?;
        let mut len = [0u8; 1];
        conn.read_exact(&mut len)?;
        let mut pw = vec![0u8; len[0] as usize];
        conn.read_exact(&mut pw)?;
        let given = format!(
            "{}:{}",
            String::from_utf8_lossy(&user),
            String::from_utf8_lossy(&pw)
        );
        sent.push_str(&format!(" {given}"));
        if &given != auth {
            state.heads.lock().unwrap().push(sent);
            conn.write_all(&[1, 1])?;
            return Ok(());
        }
        conn.write_all(&[1, 0])?;
    } else {
        if !methods.contains(&0) {
            conn.write_all(&[5, 0xff])?;
            return Ok(());
        }
        conn.write_all(&[5, 0])?;
    }
    let mut req = [0u8; 4];
    conn.read_exact(&mut req)?;
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            conn.read_exact(&mut a)?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            conn.read_exact(&mut len)?;
            let mut name = vec![0u8; len[0] as usize];
            conn.read_exact(&mut name)?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut a = [0u8; 16];
            conn.read_exact(&mut a)?;
            std::net::Ipv6Addr::from(a).to_string()
        }
        _ => return Ok(()),
    };
    let mut port = [0u8; 2];
    conn.read_exact(&mut port)?;
    let port = u16::from_be_bytes(port);
    sent.push_str(&format!(" {host}:{port}"));
    state.heads.lock().unwrap().push(sent);
    let upstream = resolve(state, &host, port).and_then(|a| TcpStream::connect(a).ok());
    let Some(upstream) = upstream else {
        // Reply 5: connection refused.
        conn.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0])?;
        return Ok(());
    };
    conn.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0])?;
    pipe(state, conn, upstream)
}

/// Copies both ways until each side has finished sending.
fn pipe(state: &Arc<State>, client: TcpStream, upstream: TcpStream) -> std::io::Result<()> {
    state.tunnels.fetch_add(1, Ordering::SeqCst);
    state.open.fetch_add(1, Ordering::SeqCst);
    client.set_read_timeout(None)?;
    let (mut c_read, mut u_write) = (client.try_clone()?, upstream.try_clone()?);
    let s = state.clone();
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c_read, &mut u_write);
        s.open.fetch_sub(1, Ordering::SeqCst);
        // The server may keep streaming to a client that is gone: end both directions.
        let _ = u_write.shutdown(Shutdown::Both);
    });
    let (mut u_read, mut c_write) = (upstream, client);
    let _ = std::io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

/// A TLS server config with a certificate for `localhost` and 127.0.0.1 from a fresh CA,
/// and that CA as PEM.
fn tls_config() -> (Arc<rustls::ServerConfig>, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = p.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let p = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    (Arc::new(config), ca.pem())
}
