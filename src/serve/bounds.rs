//! Serving HTTP with bounds, for the tool server (and anything else toolloop serves).
//!
//! tiny_http, which served the tool API before, could be killed by one request: a
//! `Content-Length: 100000000000` on a request whose body was not read made it allocate
//! the declared length, a 1 GiB header line took the process to 1 GB, and idle connections
//! held a thread each for ever. So serving is hyper (through axum's router) on a small
//! tokio runtime of its own, with every resource bounded here:
//! - **headers**: at most [`Bounds::max_header_bytes`] and 64 header lines (hyper answers
//!   431 past them, having buffered no more than that);
//! - **time**: a connection must send a whole request head within
//!   [`Bounds::header_timeout`], which also closes keep-alive connections left idle; a
//!   body must arrive within [`Bounds::body_timeout`];
//! - **bodies**: read up to [`Bounds::max_body`], never allocated from a declared length
//!   ([`read_body`]);
//! - **connections**: at most [`Bounds::max_connections`] open; more wait in the kernel's
//!   backlog;
//! - **threads**: two for the network, and blocking work (a tool call) on tokio's blocking
//!   pool, at most [`Bounds::max_blocking`] at once.
//!
//! The library stays blocking: [`bind`] starts the runtime (the part that can fail), and
//! [`Bound::serve`] runs it on its own thread, returning a handle whose drop stops it.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, watch};

/// The limits a server keeps.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// The most bytes of a request head (request line and headers).
    pub max_header_bytes: usize,
    /// The longest a connection may take to send a request head, and the longest an idle
    /// keep-alive connection stays open.
    pub header_timeout: Duration,
    /// The longest a request body may take to arrive.
    pub body_timeout: Duration,
    /// The largest request body read.
    pub max_body: usize,
    /// The most connections open at once.
    pub max_connections: usize,
    /// The most blocking jobs (tool calls) running at once.
    pub max_blocking: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_header_bytes: 64 << 10,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_body: 1 << 20,
            max_connections: 256,
            max_blocking: 32,
        }
    }
}

/// The `Host` values a server answers to, and the check of `Host` and `Origin` that
/// keeps other sites out: a page the person visits could otherwise drive the server
/// through their browser (a foreign `Origin`), or reach it under a name of its own that
/// resolves to 127.0.0.1 (DNS rebinding: a foreign `Host`).
#[cfg(feature = "web")]
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    names: Vec<String>,
    /// Bound to every interface (`0.0.0.0`, `::`): any IP address with the port served is
    /// accepted too. A DNS rebinding attack needs a name, so an address typed as digits
    /// is safe; names other than `localhost` are still refused.
    any_ip_on: Option<u16>,
}

#[cfg(feature = "web")]
impl Hosts {
    /// The address itself; on loopback `localhost` with its port too; bound to every
    /// interface, any IP address with its port (never another name).
    pub(crate) fn serving(addr: SocketAddr) -> Self {
        let mut names = vec![addr.to_string()];
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            names.push(format!("localhost:{}", addr.port()));
            names.push(format!("127.0.0.1:{}", addr.port()));
            names.push(format!("[::1]:{}", addr.port()));
        }
        Hosts {
            names,
            any_ip_on: addr.ip().is_unspecified().then_some(addr.port()),
        }
    }

    fn allows(&self, host: &str) -> bool {
        self.names.iter().any(|h| h.eq_ignore_ascii_case(host))
            || self
                .any_ip_on
                .is_some_and(|port| host.parse::<SocketAddr>().is_ok_and(|a| a.port() == port))
    }

    /// Why a request with `headers` is refused, or `None`.
    pub(crate) fn refuses(&self, headers: &axum::http::HeaderMap) -> Option<&'static str> {
        use axum::http::header;
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.allows(host) {
            return Some("this server answers only to the address it serves (Host header)");
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let same = origin
                .strip_prefix("http://")
                .is_some_and(|o| self.allows(o));
            if !same {
                return Some("requests from other sites are refused");
            }
        }
        let cross_site = headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes() == b"cross-site");
        cross_site.then_some("requests from other sites are refused")
    }
}

/// Why a body could not be read ([`read_body`]).
#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Larger than the limit.
    TooLarge,
    /// It did not arrive in time.
    TooSlow,
    /// The connection failed while it was read.
    Broken,
}

/// Reads a request body of at most `max` bytes within `timeout`. The declared length is
/// only a hint to refuse early; the buffer grows with what actually arrives.
pub async fn read_body(body: Body, max: usize, timeout: Duration) -> Result<Bytes, BodyError> {
    use axum::body::HttpBody;
    if body.size_hint().lower() > max as u64 {
        return Err(BodyError::TooLarge);
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, max)).await {
        Err(_) => Err(BodyError::TooSlow),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            // axum reports a body past the limit as a `LengthLimitError` in its source
            // chain; anything else is the connection.
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(s) = source {
                if s.is::<http_body_util::LengthLimitError>() {
                    return Err(BodyError::TooLarge);
                }
                source = s.source();
            }
            Err(BodyError::Broken)
        }
    }
}

/// A server running on its own thread; dropping it stops the server.
pub struct Serving {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Serving {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Blocks until the server stops (it stops when the handle is dropped elsewhere; a
    /// server that [`Serving::wait`]s runs until the process ends).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A listener with the runtime that will serve it: everything that can fail is done, so
/// [`Bound::serve`] cannot (the tool server binds at `bind` and serves at `spawn`).
pub struct Bound {
    listener: tokio::net::TcpListener,
    runtime: tokio::runtime::Runtime,
    bounds: Bounds,
}

/// Prepares to serve `listener` within `bounds`: the runtime and its threads are started
/// and the listener handed to it, so a failure is an error here, not a server that
/// silently never answers.
pub fn bind(listener: TcpListener, bounds: &Bounds) -> std::io::Result<Bound> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(bounds.max_blocking)
        .thread_name("toolloop-serve")
        .enable_all()
        .build()?;
    let listener = {
        let _context = runtime.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    Ok(Bound {
        listener,
        runtime,
        bounds: bounds.clone(),
    })
}

impl Bound {
    /// The address it listens on.
    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `router` on a thread of its own.
    ///
    /// # Panics
    /// When the operating system refuses one more thread.
    pub fn serve(self, router: Router) -> Serving {
        let (stop, stopped) = watch::channel(false);
        let addr = self
            .listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let Bound {
            listener,
            runtime,
            bounds,
        } = self;
        let thread = std::thread::Builder::new()
            .name("toolloop-serve".into())
            .spawn(move || {
                runtime.block_on(accept(listener, router, bounds, stopped));
                // Tool calls still running finish on their own; the server does not wait.
                runtime.shutdown_background();
            })
            .expect("the operating system starts a thread");
        Serving {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    router: Router,
    bounds: Bounds,
    mut stopped: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(bounds.max_connections));
    loop {
        let permit = tokio::select! {
            _ = stopped.changed() => return,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, _) = tokio::select! {
            _ = stopped.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of file descriptors or a connection reset before it was taken:
                // wait a moment rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(router.clone());
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(bounds.header_timeout)
            .max_buf_size(bounds.max_header_bytes)
            .max_headers(64);
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let conn = builder
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped.changed() => {}
            }
            drop(permit);
        });
    }
}
