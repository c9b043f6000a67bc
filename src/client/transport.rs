//! Connections to the API server: the shared pooled agent, TLS, and cancellable watch connections.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout,
    ShutdownHandle, SocksConnector, Transport as UreqTransport, TransportAdapter,
};
use ureq::ProxyProtocol;

use super::config::{AuthConfig, Config, TlsConfig};
use super::exec::{ExecClientCert, ExecPlugin};
use super::proxy::Route;
use super::Error;

/// Builds ureq agents for one API server.
pub(crate) struct Transport {
    agent: ureq::Agent,
    connector: TlsConnector,
    config: Config,
    /// The proxy every connection goes through, if any.
    route: Option<Route>,
}

impl Transport {
    /// Prepares TLS and the shared agent for `config`.
    pub(crate) fn new(config: &Config) -> Result<Self, Error> {
        let https = config.server.starts_with("https://");
        if !https && !config.server.starts_with("http://") {
            return Err(Error::Config(format!(
                "server {:?} must start with http:// or https://",
                config.server
            )));
        }
        if let Some(name) = &config.tls.server_name {
            // Checked here so a bad tls-server-name is a configuration error, not a TLS failure.
            super::tls::server_name(&config.tls, name)?;
        }
        let route = super::proxy::route(&config.server, config.proxy_url.as_deref(), &|k| {
            std::env::var(k).ok()
        })?;
        if !https
            && route
                .as_ref()
                .is_some_and(|r| r.proxy.protocol() == ProxyProtocol::Https)
        {
            // Go checks an https proxy with the cluster's TLS settings, which an http server lacks.
            return Err(Error::Config(
                "an https proxy needs an https server: the proxy's certificate is checked \
                 against the cluster's certificate-authority"
                    .into(),
            ));
        }
        let rustls = if https {
            // An exec plugin may answer with a client certificate instead of (or besides) a token.
            let exec_cert: Option<Arc<dyn rustls::client::ResolvesClientCert>> = match &config.auth
            {
                AuthConfig::Exec(exec) => {
                    Some(Arc::new(ExecClientCert(ExecPlugin::shared(config, exec)?)))
                }
                _ => None,
            };
            Some(super::tls::client_config(&config.tls, exec_cert)?)
        } else {
            None
        };
        let connector = TlsConnector {
            rustls,
            tls: config.tls.clone(),
            cancel: Vec::new(),
            idle: None,
        };
        Ok(Transport {
            agent: build_agent(config, route.as_ref(), connector.clone(), true),
            connector,
            config: config.clone(),
            route,
        })
    }

    /// The proxy connections go through and where it was configured, e.g.
    /// `http://proxy:3128 (from HTTPS_PROXY)`; never its credentials.
    pub(crate) fn proxy(&self) -> Option<&str> {
        self.route.as_ref().map(|r| r.description.as_str())
    }

    /// The shared, pooled agent for ordinary requests.
    pub(crate) fn agent(&self) -> &ureq::Agent {
        &self.agent
    }

    /// An agent for one watch; each of `cancel` can close its connection from another
    /// thread, and a read that waits longer than `idle` for a byte fails (the connection
    /// is dead).
    pub(crate) fn watch_agent(&self, cancel: &[&Canceller], idle: Option<Duration>) -> ureq::Agent {
        let connector = TlsConnector {
            cancel: cancel.iter().map(|c| (*c).clone()).collect(),
            idle,
            ..self.connector.clone()
        };
        build_agent(&self.config, self.route.as_ref(), connector, false)
    }

    /// A pooled agent of its own whose every connection `cancel` closes: a client handle
    /// that must stop at once (controller shutdown) does not share sockets it cannot close.
    pub(crate) fn cancellable_agent(&self, cancel: &Canceller) -> ureq::Agent {
        let connector = TlsConnector {
            cancel: vec![cancel.clone()],
            ..self.connector.clone()
        };
        build_agent(&self.config, self.route.as_ref(), connector, true)
    }
}

/// Input and output buffer of each connection, and the longest response head accepted.
const CONNECTION_BUFFER: usize = 32 * 1024;

fn build_agent(
    config: &Config,
    route: Option<&Route>,
    connector: TlsConnector,
    pooled: bool,
) -> ureq::Agent {
    let mut builder = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(config.connect_timeout))
        .user_agent(&config.user_agent)
        // Only the proxy chosen by client-go's rules (proxy.rs), never ureq's own reading
        // of the environment (which has no loopback rule nor CIDRs in NO_PROXY).
        .proxy(route.map(|r| r.proxy.clone()))
        // The REST API never redirects. Following one would replay a write as a GET (a 302
        // to a POST) and hand our client certificate to whatever host it names; a 3xx is
        // returned and classified as an error instead.
        .max_redirects(0)
        // 32 KiB buffers a connection, not ureq's 128 KiB for each direction: requests are
        // a few KB, answers are read in a stream, and with 2 workers, the watch and a list
        // the default was ~1 MB of the process. Response heads beyond 32 KiB are refused
        // (kube-apiserver's are under 1 KB; the limit must not exceed the input buffer).
        .input_buffer_size(CONNECTION_BUFFER)
        .output_buffer_size(CONNECTION_BUFFER)
        .max_response_header_size(CONNECTION_BUFFER);
    if !pooled {
        // A watch connection is used once and closed when the watch ends.
        builder = builder.max_idle_connections(0);
    }
    // Not ureq's DefaultResolver: it starts a thread per request (see resolver.rs).
    ureq::Agent::with_parts(
        builder.build(),
        connector,
        super::resolver::ServerResolver::default(),
    )
}

/// TCP (with cancellation) plus our own rustls handshake, so the verified name can differ
/// from the URL's host (`tls-server-name`), which ureq's TLS config cannot do.
#[derive(Clone)]
struct TlsConnector {
    rustls: Option<Arc<ClientConfig>>,
    tls: TlsConfig,
    /// Each closes this connector's connections when cancelled (none: not cancellable).
    cancel: Vec<Canceller>,
    /// Longest wait for a byte on a watch connection.
    idle: Option<Duration>,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector")
            .field("tls", &self.rustls.is_some())
            .finish()
    }
}

impl Connector<()> for TlsConnector {
    type Out = Either<Connection, Tunneled>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if self.cancel.iter().any(Canceller::is_cancelled) {
            return Err(cancelled());
        }
        // The agent's config carries a proxy only when this server is to be proxied; the
        // connection to the proxy itself comes back here without one.
        match details.config.proxy() {
            Some(proxy) => self
                .connect_proxied(details, proxy)
                .map(|c| Some(Either::B(c))),
            None => self.connect_direct(details).map(|c| Some(Either::A(c))),
        }
    }
}

impl TlsConnector {
    /// TCP to the address ureq resolved, then TLS when the URL is https.
    fn connect_direct(&self, details: &ConnectionDetails) -> Result<Connection, ureq::Error> {
        let stream = Arc::new(connect_tcp(details)?);
        let weak: Weak<dyn ShutdownHandle> = Arc::downgrade(&stream) as Weak<dyn ShutdownHandle>;
        (details.register_shutdown)(weak.clone())?;
        for cancel in &self.cancel {
            cancel.register(weak.clone())?;
        }
        let io = if details.needs_tls() {
            let config = self.rustls.clone().ok_or(ureq::Error::Tls(
                "https URL but the client was built for http",
            ))?;
            let host = details.uri.host().unwrap_or_default();
            let name = super::tls::server_name(&self.tls, host)
                .map_err(|_| ureq::Error::Tls("invalid TLS server name"))?;
            let mut conn = ClientConnection::new(config, name)?;
            let mut sock = Shared(stream.clone());
            // The handshake counts against the connect timeout.
            let t = details.timeout.not_zero().map(|d| *d);
            stream.set_read_timeout(t)?;
            stream.set_write_timeout(t)?;
            while conn.is_handshaking() {
                conn.complete_io(&mut sock)
                    .map_err(|e| map_io(e, details.timeout))?;
            }
            Io::Tls(Box::new(StreamOwned::new(conn, sock)))
        } else {
            Io::Plain(Shared(stream.clone()))
        };
        let c = details.config;
        Ok(Connection {
            stream,
            io,
            buffers: LazyBuffers::new(c.input_buffer_size(), c.output_buffer_size()),
            read_timeout: None,
            write_timeout: None,
            idle: self.idle,
        })
    }

    /// A tunnel through the proxy, then our own TLS to the server over it, so
    /// `tls-server-name`, the cluster's CA and client certificates work as without a proxy.
    ///
    /// The tunnel is ureq's: its CONNECT connector (which opens the connection to the proxy
    /// through this connector again, so TCP keepalive, cancellation and an https proxy's TLS
    /// are ours) or its SOCKS connector. ureq's TLS connector cannot be chained after them:
    /// it cannot verify a name other than the URL's host.
    fn connect_proxied(
        &self,
        details: &ConnectionDetails,
        proxy: &ureq::Proxy,
    ) -> Result<Tunneled, ureq::Error> {
        // The SOCKS connector opens its own socket: our cancellers must be able to close it.
        let cancel = self.cancel.clone();
        let agent_register = details.register_shutdown.clone();
        let register_shutdown: Arc<RegisterShutdown> = Arc::new(move |handle| {
            agent_register(handle.clone())?;
            for c in &cancel {
                c.register(handle.clone())?;
            }
            Ok(())
        });
        let via = ConnectionDetails {
            uri: details.uri,
            addrs: details.addrs.clone(),
            config: details.config,
            request_level: details.request_level,
            resolver: details.resolver,
            now: details.now,
            timeout: details.timeout,
            current_time: details.current_time.clone(),
            run_connector: details.run_connector.clone(),
            register_shutdown,
        };
        let socks = matches!(
            proxy.protocol(),
            ProxyProtocol::Socks4
                | ProxyProtocol::Socks4A
                | ProxyProtocol::Socks5
                | ProxyProtocol::Socks5h
        );
        let tunnel: Option<Box<dyn UreqTransport>> = if socks {
            SocksConnector::default()
                .connect(&via, None::<()>)
                .map_err(|e| at_proxy(e, proxy))?
                .map(|t| Box::new(t) as Box<dyn UreqTransport>)
        } else {
            ConnectProxyConnector::default()
                .connect(&via, None::<()>)
                .map_err(|e| at_proxy(e, proxy))?
                .map(|t| Box::new(t) as Box<dyn UreqTransport>)
        };
        let tunnel = tunnel.ok_or(ureq::Error::ConnectionFailed)?;
        let mut adapter = TransportAdapter::new(tunnel, details.current_time.clone());
        let io = if details.needs_tls() {
            let config = self.rustls.clone().ok_or(ureq::Error::Tls(
                "https URL but the client was built for http",
            ))?;
            let host = details.uri.host().unwrap_or_default();
            let name = super::tls::server_name(&self.tls, host)
                .map_err(|_| ureq::Error::Tls("invalid TLS server name"))?;
            let mut conn = ClientConnection::new(config, name)?;
            // The handshake counts against the connect timeout.
            adapter.set_timeout(details.timeout);
            while conn.is_handshaking() {
                conn.complete_io(&mut adapter)
                    .map_err(|e| map_io(e, details.timeout))?;
            }
            TunnelIo::Tls(Box::new(StreamOwned::new(conn, adapter)))
        } else {
            TunnelIo::Plain(adapter)
        };
        let c = details.config;
        Ok(Tunneled {
            io,
            buffers: LazyBuffers::new(c.input_buffer_size(), c.output_buffer_size()),
            idle: self.idle,
        })
    }
}

/// Says that a failure to reach the server was the proxy's (kind kept for classification).
fn at_proxy(e: ureq::Error, proxy: &ureq::Proxy) -> ureq::Error {
    let at = format!("proxy {}:{}", proxy.host(), proxy.port());
    match e {
        ureq::Error::Io(io) => ureq::Error::Io(io::Error::new(io.kind(), format!("{at}: {io}"))),
        ureq::Error::HostNotFound => ureq::Error::Io(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{at}: host not found"),
        )),
        e => e,
    }
}

fn connect_tcp(details: &ConnectionDetails) -> Result<TcpStream, ureq::Error> {
    let timeout = details.timeout.not_zero().map(|d| *d);
    let mut last = None;
    for addr in details.addrs.iter() {
        let r = match timeout {
            Some(t) => TcpStream::connect_timeout(addr, t),
            None => TcpStream::connect(addr),
        };
        match r {
            Ok(s) => {
                if details.config.no_delay() {
                    s.set_nodelay(true)?;
                }
                set_keepalive(&s)?;
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => map_io(e, details.timeout),
        None => ureq::Error::HostNotFound,
    })
}

/// Idle time before the first keepalive probe and between probes: client-go's dialer (Go's
/// `net.Dialer{KeepAlive: 30s}` sets both), so a peer that vanished without a FIN or RST
/// (power loss, a dropped NAT entry) is noticed in minutes, not the kernel's two hours.
pub(crate) const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

fn set_keepalive(s: &TcpStream) -> io::Result<()> {
    let params = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "freebsd",
        target_os = "windows"
    ))]
    let params = params.with_interval(TCP_KEEPALIVE);
    socket2::SockRef::from(s).set_tcp_keepalive(&params)
}

/// The error of an operation on a cancelled watch connection; rest.rs reports it as
/// [`Error::Cancelled`] by checking the canceller.
fn cancelled() -> ureq::Error {
    ureq::Error::Io(io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "request cancelled",
    ))
}

/// Timeouts become ureq timeouts and TLS failures `ureq::Error::Rustls`, so the REST
/// client classifies them as [`Error::Timeout`] and [`Error::Tls`].
fn map_io(e: io::Error, timeout: NextTimeout) -> ureq::Error {
    if e.get_ref().is_some_and(|i| i.is::<ureq::Error>()) {
        // A ureq error from under a tunnel, passed up through `std::io`.
        return ureq::Error::from(e);
    }
    if matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) {
        return ureq::Error::Timeout(timeout.reason);
    }
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return ureq::Error::Rustls(tls.clone());
    }
    ureq::Error::Io(e)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// A socket shared between the connection and its shutdown handles.
struct Shared(Arc<TcpStream>);

impl Read for Shared {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

enum Io {
    Plain(Shared),
    Tls(Box<StreamOwned<ClientConnection, Shared>>),
}

impl Io {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Io::Plain(s) => s.read(buf),
            Io::Tls(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Io::Plain(s) => s.write_all(buf),
            Io::Tls(s) => s.write_all(buf).and_then(|()| s.flush()),
        }
    }
}

/// One connection to the API server, plain or TLS.
struct Connection {
    stream: Arc<TcpStream>,
    io: Io,
    buffers: LazyBuffers,
    // Last values set on the socket, to skip redundant syscalls.
    read_timeout: Option<Option<Duration>>,
    write_timeout: Option<Option<Duration>>,
    /// Longest wait for a byte (watches); the request's own deadline still applies.
    idle: Option<Duration>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.stream.peer_addr().ok())
            .field("tls", &matches!(self.io, Io::Tls(_)))
            .finish()
    }
}

impl UreqTransport for Connection {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        let t = timeout.not_zero().map(|d| *d);
        if self.write_timeout != Some(t) {
            self.stream.set_write_timeout(t)?;
            self.write_timeout = Some(t);
        }
        let output = &self.buffers.output()[..amount];
        self.io.write_all(output).map_err(|e| map_io(e, timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        let deadline = timeout.not_zero().map(|d| *d);
        // The idle limit is binding when it is shorter than what the request has left.
        let idle = self
            .idle
            .filter(|i| deadline.is_none_or(|d| *i < d) && !i.is_zero());
        let t = idle.or(deadline);
        if self.read_timeout != Some(t) {
            self.stream.set_read_timeout(t)?;
            self.read_timeout = Some(t);
        }
        let input = self.buffers.input_append_buf();
        let n = loop {
            match self.io.read(input) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if idle.is_some() && is_timeout(&e) => {
                    return Err(ureq::Error::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "no data for {:?}: the connection is presumed dead",
                            idle.unwrap_or_default()
                        ),
                    )))
                }
                r => break r.map_err(|e| map_io(e, timeout))?,
            }
        };
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        // A pooled connection is reusable when reading would block: the server neither
        // closed it nor sent anything unasked.
        let s = &*self.stream;
        if s.set_nonblocking(true).is_err() {
            return false;
        }
        let mut buf = [0u8; 1];
        let open = matches!(s.peek(&mut buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        s.set_nonblocking(false).is_ok() && open
    }

    fn is_tls(&self) -> bool {
        matches!(self.io, Io::Tls(_))
    }
}

/// The tunnel to the server through a proxy.
enum TunnelIo {
    Plain(TransportAdapter),
    Tls(Box<StreamOwned<ClientConnection, TransportAdapter>>),
}

impl TunnelIo {
    fn adapter(&mut self) -> &mut TransportAdapter {
        match self {
            TunnelIo::Plain(a) => a,
            TunnelIo::Tls(s) => &mut s.sock,
        }
    }
}

/// What [`ConnectionDetails::register_shutdown`] holds.
type RegisterShutdown = dyn Fn(Weak<dyn ShutdownHandle>) -> Result<(), ureq::Error> + Send + Sync;

/// One connection to the API server through a proxy tunnel, plain or TLS.
struct Tunneled {
    io: TunnelIo,
    buffers: LazyBuffers,
    /// Longest wait for a byte (watches); the request's own deadline still applies.
    idle: Option<Duration>,
}

impl std::fmt::Debug for Tunneled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunneled")
            .field("tls", &matches!(self.io, TunnelIo::Tls(_)))
            .finish()
    }
}

impl UreqTransport for Tunneled {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        // The transport under the tunnel applies the per-write limit: a TLS write may read.
        self.io.adapter().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        let r = match &mut self.io {
            TunnelIo::Plain(a) => a.write_all(output),
            TunnelIo::Tls(s) => s.write_all(output).and_then(|()| s.flush()),
        };
        r.map_err(|e| map_io(e, timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        // The idle limit is binding when it is shorter than what the request has left.
        let deadline = timeout.not_zero().map(|d| *d);
        let idle = self
            .idle
            .filter(|i| deadline.is_none_or(|d| *i < d) && !i.is_zero());
        let mut wait = timeout;
        if let Some(i) = idle {
            wait.after = i.into();
        }
        self.io.adapter().set_timeout(wait);
        let input = self.buffers.input_append_buf();
        let n = loop {
            let r = match &mut self.io {
                TunnelIo::Plain(a) => a.read(input),
                TunnelIo::Tls(s) => s.read(input),
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => match map_io(e, wait) {
                    ureq::Error::Timeout(_) if idle.is_some() => {
                        return Err(ureq::Error::Io(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "no data for {:?}: the connection is presumed dead",
                                idle.unwrap_or_default()
                            ),
                        )))
                    }
                    e => return Err(e),
                },
                Ok(n) => break n,
            }
        };
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        self.io.adapter().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        matches!(self.io, TunnelIo::Tls(_))
    }
}

/// Closes connections from another thread (a watch's, or every one of a client handle made
/// with [`Client::with_canceller`](super::Client::with_canceller)), so shutdown never waits
/// on a socket; requests started after the cancel fail at once with [`Error::Cancelled`].
#[derive(Clone, Default)]
pub struct Canceller {
    state: Arc<CancelState>,
}

#[derive(Default)]
struct CancelState {
    cancelled: AtomicBool,
    // Weak: a finished watch's socket is closed when its connection drops, not kept here.
    sockets: Mutex<Vec<Weak<dyn ShutdownHandle>>>,
}

impl Canceller {
    /// A fresh, not yet cancelled canceller.
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes the connection; blocked reads return [`Error::Cancelled`].
    pub fn cancel(&self) {
        let sockets = {
            let mut sockets = self.state.sockets.lock();
            // Set under the lock so a connection registering concurrently is either
            // seen here or refused by `register`.
            self.state.cancelled.store(true, Ordering::SeqCst);
            std::mem::take(&mut *sockets)
        };
        for s in sockets.iter().filter_map(Weak::upgrade) {
            s.shutdown();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(Ordering::SeqCst)
    }

    fn register(&self, socket: Weak<dyn ShutdownHandle>) -> Result<(), ureq::Error> {
        let mut sockets = self.state.sockets.lock();
        if self.state.cancelled.load(Ordering::SeqCst) {
            if let Some(s) = socket.upgrade() {
                s.shutdown();
            }
            return Err(cancelled());
        }
        sockets.retain(|w| w.strong_count() > 0);
        sockets.push(socket);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_get_tcp_keepalive() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(!socket2::SockRef::from(&s).keepalive().unwrap());
        set_keepalive(&s).unwrap();
        assert!(socket2::SockRef::from(&s).keepalive().unwrap());
    }
}
