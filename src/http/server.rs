//! The connection side of the HTTP API: an accept loop on hyper's HTTP/1 server, so that nothing
//! hostile on the port can exhaust the hub's file descriptors or hold its connections.
//!
//! Each connection holds a permit of a semaphore of `max_connections`. A connection is
//! *anonymous* until one of its requests carries a valid credential (the client or agent token,
//! or a live console session; see [`Trust`]), and anonymous connections also hold a permit of
//! their own, smaller semaphore (`max_anonymous_connections`), so the rest of the connections is
//! always room for agents and clients. At the anonymous cap a new connection closes the oldest
//! anonymous one (busy or not) and takes its place: the newest wins, so `/health` and an
//! agent's or client's new connection (anonymous until its headers are read) are answered
//! however many strangers hold connections. An anonymous connection gets
//! [`ANONYMOUS_TIMEOUT`](super::ANONYMOUS_TIMEOUT) (`anonymous_timeout`) for each request: from
//! the end of the last answer (or the accept) to its whole request read, headers and body, and
//! answered; past it the request is answered 408 and the connection closed. A connection that
//! has shown a valid credential keeps the longer limits: request headers must arrive within
//! `header_timeout` (hyper's `header_read_timeout`), a request takes up to `request_timeout` (a
//! claim its wait more), and a connection with no request in hand for `idle_timeout` is closed
//! (hyper has no keep-alive timeout of its own). At the total cap, a new connection closes the
//! oldest anonymous one, or else the oldest idle one, and takes its place; when every connection is busy
//! the new one is refused at once. On shutdown the listener stops, idle connections close, and
//! requests in hand finish (bounded by the request and header time limits).
//!
//! A request is *served* once its body is read whole (its handler is working on the
//! answer), and a connection whose request is served is never the one closed at a cap: only
//! idle connections and those still sending a request are. Each request is sorted by its
//! bearer token as soon as its headers are read ([`Kind`], checked in memory), and each
//! credential has a lane of its own: the agent token's requests in hand (bodies being read,
//! claims waiting, answers being made) take at most half the connections, the client token's all
//! but an eighth, the metrics token's a sixteenth (within the eighth the client's lane leaves), so
//! no credential takes every connection, the metrics token never takes the client's or the
//! agent's places, and `/health` always has room; a request without a token of its own on a
//! connection that showed one goes in that credential's lane; a request past its lane's cap is
//! answered 503 at once. A body must be read whole within `body_timeout` of its headers, or of its
//! turn when it waits for one ([`BodyTurn`]; 408 after).

use super::HttpOptions;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

/// How long past its anonymous deadline a request in hand may still take to be answered (the
/// 408 written) before its connection is closed without more ado.
const ANONYMOUS_GRACE: Duration = Duration::from_secs(1);

/// How long the accept loop waits for a connection it told to close to give its place back.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// One open connection, as the accept loop sees it.
struct Connection {
    /// Requests being handled (HTTP/1: zero or one).
    busy: AtomicUsize,
    /// When the last request was answered (or the connection opened).
    idle_since: Mutex<Instant>,
    /// When the request in hand began (its headers were read).
    request_since: Mutex<Instant>,
    /// The credential one of its requests carried ([`Kind`] as a number; anonymous until
    /// then): the longer limits apply to a trusted one.
    kind: AtomicU8,
    /// The request in hand is read whole: its answer is being made. Never closed at a cap.
    serving: AtomicBool,
    /// Its place among the anonymous connections, given back when it is trusted or ends.
    anonymous: Mutex<Option<OwnedSemaphorePermit>>,
    /// Told to close: a cap was reached and this one was the oldest that could make room.
    evict: Notify,
}

impl Connection {
    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::SeqCst) == 0
    }

    fn is_trusted(&self) -> bool {
        self.kind.load(Ordering::SeqCst) != Kind::Anonymous as u8
    }

    fn is_serving(&self) -> bool {
        self.serving.load(Ordering::SeqCst)
    }

    fn idle_since(&self) -> Instant {
        *self.idle_since.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn request_since(&self) -> Instant {
        *self.request_since.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives back its place among the anonymous connections.
    fn leave_anonymous(&self) {
        drop(
            self.anonymous
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }
}

/// Which credential a request or a connection has shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Anonymous = 0,
    /// The client token, or a console session.
    Client = 1,
    Agent = 2,
    /// The metrics token (`--metrics-token-file`): a scraper's, kept in the monitoring's
    /// configuration, so a lane of its own that can never take the client's or the agent's.
    Metrics = 3,
}

impl Kind {
    fn from_u8(kind: u8) -> Kind {
        match kind {
            1 => Kind::Client,
            2 => Kind::Agent,
            3 => Kind::Metrics,
            _ => Kind::Anonymous,
        }
    }
}

/// What a request knows of its connection: put in every request's extensions, so that whoever
/// checks a credential can say it was valid ([`Trust::grant`]).
#[derive(Clone)]
pub(crate) struct Trust {
    connection: Arc<Connection>,
    /// This request carried a valid credential.
    request: Arc<AtomicBool>,
}

impl Trust {
    /// The request carried a valid token or session: it and every later request of its
    /// connection get the longer limits, and the connection leaves the anonymous ones.
    pub(crate) fn grant(&self, kind: Kind) {
        self.request.store(true, Ordering::SeqCst);
        if self.connection.kind.swap(kind as u8, Ordering::SeqCst) == Kind::Anonymous as u8 {
            self.connection.leave_anonymous();
        }
    }

    /// Whether this request carried a valid credential.
    pub(crate) fn granted(&self) -> bool {
        self.request.load(Ordering::SeqCst)
    }
}

/// Marks a connection busy while a request is in hand.
struct Busy(Arc<Connection>);

impl Busy {
    fn begin(connection: &Arc<Connection>) -> Self {
        *connection
            .request_since
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
        connection.serving.store(false, Ordering::SeqCst);
        connection.busy.fetch_add(1, Ordering::SeqCst);
        Busy(connection.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.serving.store(false, Ordering::SeqCst);
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
    fn add(&self, anonymous: OwnedSemaphorePermit) -> (u64, Arc<Connection>) {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        let now = Instant::now();
        let connection = Arc::new(Connection {
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(now),
            request_since: Mutex::new(now),
            kind: AtomicU8::new(Kind::Anonymous as u8),
            serving: AtomicBool::new(false),
            anonymous: Mutex::new(Some(anonymous)),
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

    /// Tells the oldest connection that `first` picks, or else the oldest that `then` picks, to
    /// close; false when neither picks one.
    fn evict(
        &self,
        first: impl Fn(&Connection) -> bool,
        then: impl Fn(&Connection) -> bool,
    ) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let pick = |choose: &dyn Fn(&Connection) -> bool| {
            open.iter()
                .find(|(_, connection)| choose(connection))
                .map(|(id, _)| *id)
        };
        let chosen = pick(&first).or_else(|| pick(&then));
        match chosen.and_then(|id| open.remove(&id)) {
            Some(connection) => {
                // `notify_one` keeps the wake-up if the task is not waiting yet.
                connection.evict.notify_one();
                true
            }
            None => false,
        }
    }

    /// Tells the oldest anonymous connection that is not being served to close, idle or still
    /// sending its request: each has its deadline anyway, and the newest (an agent whose
    /// headers are on their way) must not be the one to go just because the older ones have
    /// sent theirs. One whose request is read whole and being answered is never picked.
    fn evict_oldest_anonymous(&self) -> bool {
        self.evict(|c| !c.is_trusted() && !c.is_serving(), |_| false)
    }

    /// Tells the oldest anonymous connection not being served to close, or else the oldest
    /// idle one; false when every connection is trusted and busy, or being served.
    fn evict_for_room(&self) -> bool {
        self.evict(|c| !c.is_trusted() && !c.is_serving(), Connection::is_idle)
    }
}

/// A permit of `permits`: at once, or after telling a connection to make room (`evict`) and
/// waiting a moment for it to go; `None` when no connection can make room.
async fn admit(
    permits: &Arc<Semaphore>,
    evict: impl FnOnce() -> bool,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = permits.clone().try_acquire_owned() {
        return Some(permit);
    }
    if !evict() {
        return None;
    }
    tokio::time::timeout(EVICTION_WAIT, permits.clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
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

/// The anonymous connections' cap: as asked, but below the total (unless the total is one).
fn anonymous_cap(options: &HttpOptions, max: usize) -> usize {
    options
        .max_anonymous_connections
        .min(max.saturating_sub(1))
        .max(1)
}

/// One credential's lane: the requests in hand it may have at once.
#[derive(Clone)]
struct Lane {
    permits: Arc<Semaphore>,
    cap: usize,
}

impl Lane {
    fn new(cap: usize) -> Lane {
        let cap = cap.max(1);
        Lane {
            permits: Arc::new(Semaphore::new(cap)),
            cap,
        }
    }
}

/// The requests in hand each credential may have at once, each in its own lane: the agent
/// token's (which is in every relay request file on the share) at most half the connections, the
/// client token's all but an eighth, the metrics token's a sixteenth, so that `/health` and the
/// client always find room and the metrics token (kept in the monitoring's configuration) never
/// takes the client's places: the client's lane and the metrics token's together stay below the
/// connections.
#[derive(Clone)]
pub(crate) struct Caps {
    agent: Lane,
    client: Lane,
    metrics: Lane,
}

impl Caps {
    fn new(max: usize) -> Caps {
        Caps {
            agent: Lane::new(max / 2),
            client: Lane::new(max - max / 8),
            metrics: Lane::new(max / 16),
        }
    }

    /// A place for a request in `kind`'s lane; `Err` with the cap when that lane has none left.
    fn take(&self, kind: Kind) -> Result<Option<OwnedSemaphorePermit>, usize> {
        let lane = match kind {
            Kind::Anonymous => return Ok(None),
            Kind::Agent => &self.agent,
            Kind::Client => &self.client,
            Kind::Metrics => &self.metrics,
        };
        lane.permits
            .clone()
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| lane.cap)
    }
}

/// Who sends a request, from its headers: the bearer token checked in memory against the
/// tokens in force (and the metrics token); anything else is anonymous until a handler finds a
/// valid console session.
fn kind_of(
    headers: &hyper::HeaderMap,
    credentials: &crate::service::Credentials,
    options: &HttpOptions,
) -> Kind {
    let Some(token) = super::bearer_token(headers) else {
        return Kind::Anonymous;
    };
    let holder = credentials.holder(&token);
    if holder.agent {
        Kind::Agent
    } else if holder.client {
        Kind::Client
    } else if options
        .metrics_token
        .as_ref()
        .is_some_and(|t| t.matches(&token))
    {
        Kind::Metrics
    } else {
        Kind::Anonymous
    }
}

/// The request's turn to have its body read begins now (it waited for one): its body deadline
/// counts from here. Nothing happens to a request made without a connection (the tests' router).
pub(crate) fn begin_body_turn(extensions: &axum::http::Extensions) {
    if let Some(turn) = extensions.get::<BodyTurn>() {
        turn.begin();
    }
}

/// When a request's body may begin to come, for its read deadline: at its headers, or, for a
/// request that first waits for a turn (a report waiting for its share of the reports' memory
/// budget), when its turn comes ([`BodyTurn::begin`]): a body the hub does not read yet is not
/// late.
#[derive(Clone, Default)]
struct BodyTurn(Arc<AtomicBool>);

impl BodyTurn {
    /// The hub begins to read the body now: its deadline counts from here.
    fn begin(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the turn began since the last look.
    fn began(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// A request body with its own read deadline, which also marks its connection served once the
/// body is read whole.
pub(crate) struct DeadlineBody {
    inner: Incoming,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
    connection: Arc<Connection>,
    /// Set when the request's turn to be read comes: the deadline starts again from then.
    turn: BodyTurn,
}

/// A body not read whole within `--http-body-timeout-seconds`: answered 408.
#[derive(Debug)]
pub(crate) struct BodyTimedOut(pub Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body was not read whole within {} s",
            self.0.as_secs()
        )
    }
}

impl std::error::Error for BodyTimedOut {}

impl DeadlineBody {
    fn new(
        inner: Incoming,
        limit: Duration,
        connection: Arc<Connection>,
        turn: BodyTurn,
    ) -> DeadlineBody {
        if hyper::body::Body::is_end_stream(&inner) {
            connection.serving.store(true, Ordering::SeqCst);
        }
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
            connection,
            turn,
        }
    }
}

impl hyper::body::Body for DeadlineBody {
    type Data = axum::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future;
        use std::task::Poll;
        let this = &mut *self;
        if this.turn.began() {
            this.deadline.as_mut().reset(Instant::now() + this.limit);
        }
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.connection.serving.store(true, Ordering::SeqCst);
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => {
                if this.inner.is_end_stream() {
                    this.connection.serving.store(true, Ordering::SeqCst);
                }
                Poll::Ready(Some(frame.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(this.limit))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then drains.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    options: HttpOptions,
    credentials: Arc<crate::service::Credentials>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = options.max_connections.max(1);
    let caps = Caps::new(max);
    let permits = Arc::new(Semaphore::new(max));
    let anonymous = Arc::new(Semaphore::new(anonymous_cap(&options, max)));
    let registry = Arc::new(Registry::default());
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut refused_log = Throttled { last: None };
    let mut evicted_log = Throttled { last: None };
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
        // Every new connection is anonymous until it shows a credential: at their cap the
        // oldest anonymous one makes room.
        let mut evicted = false;
        let anonymous_permit = admit(&anonymous, || {
            evicted = registry.evict_oldest_anonymous();
            evicted
        })
        .await;
        if evicted && evicted_log.due() {
            tracing::warn!(
                anonymous = anonymous_cap(&options, max),
                "connections without a token at their cap: the oldest closed to make room"
            );
        }
        // At the total cap, the oldest anonymous connection makes room, or else the oldest idle.
        let permit = match anonymous_permit {
            Some(anonymous_permit) => admit(&permits, || registry.evict_for_room())
                .await
                .map(|permit| (permit, anonymous_permit)),
            None => None,
        };
        let Some((permit, anonymous_permit)) = permit else {
            if refused_log.due() {
                tracing::warn!(max, "HTTP connection refused: every connection is busy");
            }
            drop(stream);
            continue;
        };
        let (id, connection) = registry.add(anonymous_permit);
        let router = router.clone();
        let registry = registry.clone();
        let stopping = stopping.clone();
        let options = options.clone();
        let caps = caps.clone();
        let credentials = credentials.clone();
        tokio::spawn(async move {
            let limits = Limits {
                options: &options,
                caps,
                credentials,
            };
            serve_connection(stream, peer, router, &limits, &connection, stopping).await;
            connection.leave_anonymous();
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

/// When `connection` is due to close unless something changes, and whether it is due now.
fn deadline(connection: &Connection, options: &HttpOptions) -> (Instant, bool) {
    let now = Instant::now();
    let at = match (connection.is_idle(), connection.is_trusted()) {
        (true, true) => connection.idle_since() + options.idle_timeout,
        // Anonymous: the next request, headers and body, within its time from the last answer.
        (true, false) => connection.idle_since() + options.anonymous_timeout,
        // The request in hand is answered 408 at its deadline (`time_limit`); this is the
        // backstop should that answer not go out.
        (false, false) => connection.request_since() + options.anonymous_timeout + ANONYMOUS_GRACE,
        (false, true) => return (now + options.idle_timeout, false),
    };
    (at, at <= now)
}

/// What every connection is served under.
struct Limits<'a> {
    options: &'a HttpOptions,
    caps: Caps,
    credentials: Arc<crate::service::Credentials>,
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    router: Router,
    limits: &Limits<'_>,
    connection: &Arc<Connection>,
    mut stopping: watch::Receiver<bool>,
) {
    let options = limits.options;
    let inner = TowerToHyperService::new(router);
    let tracked = connection.clone();
    let caps = limits.caps.clone();
    let credentials = limits.credentials.clone();
    let body_timeout = options.body_timeout;
    let kind_options = options.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        // The peer's address, for what is limited per client (the console's sign-in).
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let busy = Busy::begin(&tracked);
        let trust = Trust {
            connection: tracked.clone(),
            request: Arc::new(AtomicBool::new(false)),
        };
        let kind = kind_of(request.headers(), &credentials, &kind_options);
        if kind != Kind::Anonymous {
            trust.grant(kind);
        }
        request.extensions_mut().insert(trust);
        // A request without a token of its own goes in the lane of the credential its
        // connection showed (a console page after the sign-in, a scraper's next request).
        let lane = Kind::from_u8(tracked.kind.load(Ordering::SeqCst));
        let place = caps.take(lane);
        let turn = BodyTurn::default();
        request.extensions_mut().insert(turn.clone());
        let request =
            request.map(|body| DeadlineBody::new(body, body_timeout, tracked.clone(), turn));
        let inner = inner.clone();
        async move {
            let place = match place {
                Ok(place) => place,
                Err(cap) => {
                    drop(busy);
                    return Ok(over_cap(lane, cap));
                }
            };
            let response = inner.call(request).await;
            drop(place);
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
        let (due_at, _) = deadline(connection, options);
        tokio::select! {
            result = http.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
                return;
            }
            () = connection.evict.notified() => {
                tracing::debug!("HTTP connection closed to make room for a new one");
                return;
            }
            () = tokio::time::sleep_until(due_at) => {
                // Looked at again: a request may have begun or ended, a credential been shown.
                if deadline(connection, options).1 {
                    tracing::debug!(trusted = connection.is_trusted(), "HTTP connection closed: its time is up");
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

/// The answer to a request whose credential has no place left: 503 at once, the connection
/// closed (its body is left unread), with a second to wait.
fn over_cap(kind: Kind, cap: usize) -> hyper::Response<axum::body::Body> {
    use axum::response::IntoResponse;
    let whose = match kind {
        Kind::Agent => "токена агента",
        Kind::Metrics => "токена метрик",
        _ => "токена клиента",
    };
    tracing::debug!(?kind, cap, "a request past its credential's cap refused");
    let mut response = super::ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        super::ErrorCode::Busy,
        None,
        format!(
            "у {whose} уже {cap} запросов в работе (это его предел соединений); повторите позже"
        ),
    )
    .into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    headers.insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At a cap, the connection told to close is the oldest one still sending its
    /// request (or idle), never one whose request is read whole and being answered.
    #[test]
    fn a_connection_being_served_is_never_the_one_closed() {
        let registry = Registry::default();
        let anonymous = Arc::new(Semaphore::new(4));
        let place = || anonymous.clone().try_acquire_owned().unwrap();
        let (served_id, served) = registry.add(place());
        let (sending_id, sending) = registry.add(place());
        let _served = Busy::begin(&served);
        served.serving.store(true, Ordering::SeqCst);
        let _sending = Busy::begin(&sending);
        assert!(registry.evict_oldest_anonymous());
        let open = |id| registry.open.lock().unwrap().contains_key(&id);
        assert!(open(served_id), "the served connection was closed");
        assert!(!open(sending_id), "the one still sending stayed");
        assert!(!registry.evict_oldest_anonymous());
        assert!(!registry.evict_for_room());
    }
}
