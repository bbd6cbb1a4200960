//! The connection side of the HTTP API: an accept loop on hyper's HTTP/1 server, so that nothing
//! hostile on the port can exhaust the hub's file descriptors.
//!
//! Each connection holds a permit of a semaphore of `max_connections`. Request headers must
//! arrive within `header_timeout` (hyper's `header_read_timeout`), and a connection with no
//! request in hand for `idle_timeout` is closed (hyper has no keep-alive timeout of its own). At
//! the cap, a new connection closes the oldest idle one and takes its place, so `/health` keeps
//! answering while idle sockets pile up; when every connection is busy the new one is refused at
//! once. On shutdown the listener stops, idle connections close, and requests in hand finish
//! (bounded by the request and header time limits).

use super::HttpOptions;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;

/// One open connection, as the accept loop sees it.
struct Connection {
    /// Requests being handled (HTTP/1: zero or one).
    busy: AtomicUsize,
    /// When the last request was answered (or the connection opened).
    idle_since: Mutex<Instant>,
    /// Told to close: the cap was reached and this one was the oldest idle.
    evict: Notify,
}

impl Connection {
    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::SeqCst) == 0
    }

    fn idle_since(&self) -> Instant {
        *self.idle_since.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Marks a connection busy while a request is in hand.
struct Busy(Arc<Connection>);

impl Busy {
    fn begin(connection: &Arc<Connection>) -> Self {
        connection.busy.fetch_add(1, Ordering::SeqCst);
        Busy(connection.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The open connections in the order they were accepted.
#[derive(Default)]
struct Registry {
    next: Mutex<u64>,
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
}

impl Registry {
    fn add(&self) -> (u64, Arc<Connection>) {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        let connection = Arc::new(Connection {
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            evict: Notify::new(),
        });
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, connection.clone());
        (id, connection)
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Tells the oldest idle connection to close; false when every connection is busy.
    fn evict_oldest_idle(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let oldest = open
            .iter()
            .find(|(_, connection)| connection.is_idle())
            .map(|(id, _)| *id);
        match oldest.and_then(|id| open.remove(&id)) {
            Some(connection) => {
                // `notify_one` keeps the wake-up if the task is not waiting yet.
                connection.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Logs a repeated condition at most once per interval.
struct Throttled {
    last: Option<Instant>,
}

impl Throttled {
    fn due(&mut self) -> bool {
        let now = Instant::now();
        if self
            .last
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(10))
        {
            self.last = Some(now);
            true
        } else {
            false
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then drains.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    options: HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = options.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(max));
    let registry = Arc::new(Registry::default());
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut refused_log = Throttled { last: None };
    let mut accept_error_log = Throttled { last: None };
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer),
                Err(error) => {
                    // Out of descriptors (EMFILE) and the like pass; the loop must not spin.
                    if accept_error_log.due() {
                        tracing::warn!(%error, "accepting an HTTP connection failed");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (stream, peer) = stream;
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At the cap: the oldest idle connection makes room, at once.
                let permit = if registry.evict_oldest_idle() {
                    tokio::time::timeout(Duration::from_secs(1), permits.clone().acquire_owned())
                        .await
                        .ok()
                        .and_then(Result::ok)
                } else {
                    None
                };
                match permit {
                    Some(permit) => permit,
                    None => {
                        if refused_log.due() {
                            tracing::warn!(
                                max,
                                "HTTP connection refused: every connection is busy"
                            );
                        }
                        drop(stream);
                        continue;
                    }
                }
            }
        };
        let (id, connection) = registry.add();
        let router = router.clone();
        let registry = registry.clone();
        let stopping = stopping.clone();
        let options = options.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, router, &options, &connection, stopping).await;
            registry.remove(id);
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // Every permit back means every connection has ended.
    let drain = options.request_timeout.max(options.header_timeout) + Duration::from_secs(1);
    if tokio::time::timeout(drain, permits.acquire_many(max as u32))
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open after the drain time; leaving them");
    }
    Ok(())
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    router: Router,
    options: &HttpOptions,
    connection: &Arc<Connection>,
    mut stopping: watch::Receiver<bool>,
) {
    let inner = TowerToHyperService::new(router);
    let tracked = connection.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        // The peer's address, for what is limited per client (the console's sign-in).
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let busy = Busy::begin(&tracked);
        let answer = inner.call(request);
        async move {
            let response = answer.await;
            drop(busy);
            response
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout)
        .keep_alive(true);
    let http = builder.serve_connection(TokioIo::new(stream), service);
    let mut http = std::pin::pin!(http);
    let mut draining = false;
    loop {
        let idle_deadline = if connection.is_idle() {
            connection.idle_since() + options.idle_timeout
        } else {
            Instant::now() + options.idle_timeout
        };
        tokio::select! {
            result = http.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
                return;
            }
            () = connection.evict.notified() => {
                tracing::debug!("idle HTTP connection closed to make room for a new one");
                return;
            }
            () = tokio::time::sleep_until(idle_deadline) => {
                if connection.is_idle()
                    && connection.idle_since().elapsed() >= options.idle_timeout
                {
                    tracing::debug!("idle HTTP connection closed");
                    return;
                }
            }
            _ = stopping.wait_for(|stop| *stop), if !draining => {
                draining = true;
                http.as_mut().graceful_shutdown();
            }
        }
    }
}
