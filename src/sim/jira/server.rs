//! The HTTP server: a loopback listener on its own runtime thread, the connection layer that can
//! drop an answer, and the one handler every request goes through (rate limit and credentials,
//! faults, then Jira's behaviour).

use super::*;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The running fake; stops when dropped.
pub struct FakeJira {
    pub(super) url: String,
    pub(super) state: Shared,
    pub(super) stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FakeJira {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub(super) struct KillListener(tokio::net::TcpListener);

pub(super) struct KillStream {
    pub(super) inner: tokio::net::TcpStream,
    pub(super) kill: Arc<AtomicBool>,
}

impl axum::serve::Listener for KillListener {
    type Io = KillStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    let _ = inner.set_nodelay(true);
                    return (
                        KillStream {
                            inner,
                            kill: Arc::new(AtomicBool::new(false)),
                        },
                        addr,
                    );
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl tokio::io::AsyncRead for KillStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for KillStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.kill.load(Ordering::SeqCst) {
            return std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionAborted.into()));
        }
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[derive(Clone)]
pub(super) struct Conn(Arc<AtomicBool>);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, KillListener>>
    for Conn
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, KillListener>) -> Self {
        Conn(stream.io().kill.clone())
    }
}

pub(super) async fn handle(
    State(state): State<Shared>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // A request counts from its arrival: a pause must see no request start inside it.
    let arrived = SystemTime::now();
    let path = uri.path().to_string();
    let raw_query = uri.query().unwrap_or("").to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let endpoint = classify(&method, &segments);
    let body = strip_properties(&state, endpoint, body);
    let request = Request {
        method: method.clone(),
        segments: segments.iter().map(|s| decode_segment(s)).collect(),
        query: parse_query(&raw_query),
        body,
    };
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();

    // Before the request touches anything: rate limit, credentials, faults.
    let (early, fault) = {
        let mut s = lock(&state);
        // People and rules act between requests: what is due once the earlier ones arrived.
        let so_far: usize = s.calls.values().sum();
        s.apply_due_changes(so_far);
        *s.calls.entry(endpoint).or_insert(0) += 1;
        s.next_node();
        let early = s.gate(&auth, endpoint);
        let fault = if early.is_none() {
            s.take_fault(endpoint)
        } else {
            None
        };
        (early, fault)
    };
    let sent = request.body.to_vec();
    let record = |status: u16| {
        lock(&state).seen.push(Seen {
            at: arrived,
            method: method.to_string(),
            path: path.clone(),
            query: raw_query.clone(),
            endpoint,
            status,
            body: sent.clone(),
        });
    };
    if let Some(mut reply) = early {
        lock(&state).stamp_node(&mut reply);
        record(reply.status);
        return reply.into_response();
    }
    let reply = match fault {
        None => {
            let half = lock(&state).latency / 2;
            if !half.is_zero() {
                tokio::time::sleep(half).await;
            }
            let reply = {
                let mut state = lock(&state);
                let mut reply = state.apply(endpoint, &request);
                // An answer of Jira's own to an authenticated request, whatever its status.
                state.stamp(&mut reply);
                state.stamp_rate_limit(&mut reply);
                state.stamp_node(&mut reply);
                if endpoint.is_write() && (200..300).contains(&reply.status) {
                    state.changes += 1;
                }
                reply
            };
            if !half.is_zero() {
                tokio::time::sleep(half).await;
            }
            reply
        }
        Some(Fault::TooManyRequests { retry_after, html }) => {
            let mut reply = if html {
                Reply {
                    status: 429,
                    headers: Vec::new(),
                    body: Body::Html(OOPS_429.to_string()),
                }
            } else {
                Reply::error(429, "Rate limit exceeded.")
            };
            if let Some(seconds) = retry_after {
                reply.headers.push(("retry-after", seconds.to_string()));
            }
            reply
        }
        Some(Fault::Unavailable) => Reply::error(503, "Service Unavailable"),
        Some(Fault::CloudRateLimit {
            retry_after,
            reset_in,
            reason,
        }) => {
            let mut reply = Reply::error(429, "Rate limit exceeded.");
            if let Some(seconds) = retry_after {
                reply.headers.push(("retry-after", seconds.to_string()));
            }
            if let Some(seconds) = reset_in {
                // To the minute, rounded up so that the reset is never early.
                let at = now_ms() / 1000 + seconds as i64 + 59;
                let at = time::OffsetDateTime::from_unix_timestamp(at - at % 60)
                    .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
                reply.headers.push((
                    "x-ratelimit-reset",
                    format!(
                        "{:04}-{:02}-{:02}T{:02}:{:02}Z",
                        at.year(),
                        u8::from(at.month()),
                        at.day(),
                        at.hour(),
                        at.minute()
                    ),
                ));
            }
            reply.headers.push(("x-ratelimit-limit", "350".into()));
            reply.headers.push(("x-ratelimit-remaining", "0".into()));
            reply.headers.push(("x-ratelimit-nearlimit", "true".into()));
            reply.headers.push(("ratelimit-reason", reason.into()));
            reply
        }
        Some(Fault::DataCenterRateLimit { retry_after }) => {
            let mut reply = Reply::error(429, "Rate limit exceeded.");
            reply.headers.push(("x-ratelimit-limit", "20".into()));
            reply.headers.push(("x-ratelimit-remaining", "0".into()));
            reply
                .headers
                .push(("x-ratelimit-interval-seconds", "1".into()));
            reply.headers.push(("x-ratelimit-fillrate", "10".into()));
            reply.headers.push(("retry-after", retry_after.to_string()));
            // Data Center limits each authenticated user's bucket: Seraph has passed the
            // request, so its stamp is there (the recorded 200 carries `X-Seraph-LoginReason:
            // OK` beside `X-RateLimit-*`, docs/jira-field-notes.md).
            lock(&state).stamp(&mut reply);
            reply
        }
        Some(Fault::ForwardedThen503 { retry_after }) => {
            // The request reached Jira and was applied; the proxy's answer is all the client
            // gets.
            let _ = lock(&state).apply(endpoint, &request);
            let mut reply = Reply {
                status: 503,
                headers: Vec::new(),
                body: Body::Html(ENVOY_UPSTREAM_RESET.to_string()),
            };
            reply.headers.push(("retry-after", retry_after.to_string()));
            reply
        }
        Some(Fault::UnavailableFor(seconds)) => {
            let mut reply = Reply::error(503, "Service Unavailable");
            reply.headers.push(("retry-after", seconds.to_string()));
            reply
        }
        Some(Fault::RedirectToLogin) => {
            let base = lock(&state).base.clone();
            let mut reply = Reply {
                status: 302,
                headers: Vec::new(),
                body: Body::Empty,
            };
            reply.headers.push((
                "location",
                format!("{base}/login.jsp?os_destination=%2Frest%2Fapi%2F2%2FserverInfo"),
            ));
            reply
        }
        Some(Fault::CaptchaRequired) => lock(&state).captcha_reply(),
        Some(Fault::FrontProxyUnauthorized) => {
            // The proxy's own login, in front of Jira: nginx's `auth_basic` answers 401 with
            // `WWW-Authenticate: Basic realm="…"` and its HTML page «401 Authorization
            // Required» (nginx.org/en/docs/http/ngx_http_auth_basic_module.html; RFC 9110
            // §15.5.2). Nothing reached Jira, so no Seraph header (`X-Seraph-LoginReason`,
            // `X-AUSERNAME`) is on it, and a wrong secret stays wrong however often it is sent.
            let mut reply = Reply {
                status: 401,
                headers: Vec::new(),
                body: Body::Html(NGINX_401.to_string()),
            };
            reply
                .headers
                .push(("www-authenticate", "Basic realm=\"jira\"".into()));
            lock(&state).note_refused_login(&auth);
            reply
        }
        Some(Fault::DropBeforeApply) => {
            conn.0.store(true, Ordering::SeqCst);
            record(0);
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        Some(Fault::DropAfterApply) => {
            let reply = lock(&state).apply(endpoint, &request);
            conn.0.store(true, Ordering::SeqCst);
            let _ = reply;
            record(0);
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        Some(Fault::ProxyTimeout { apply_after }) => {
            // Jira goes on with the request whatever the proxy told the client.
            if apply_after.is_zero() {
                let _ = lock(&state).apply(endpoint, &request);
            } else {
                lock(&state).in_flight += 1;
                let state = state.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(apply_after).await;
                    let mut state = lock(&state);
                    let _ = state.apply(endpoint, &request);
                    state.in_flight -= 1;
                });
            }
            Reply {
                status: 504,
                headers: Vec::new(),
                body: Body::Html(GATEWAY_TIMEOUT_504.to_string()),
            }
        }
        Some(Fault::Broken(kind)) => {
            let body = match kind {
                Broken::Html => Body::Html(LOGIN_PAGE.to_string()),
                Broken::NoIssues => Body::Json(json!({"startAt": 0, "maxResults": 50, "total": 0})),
                Broken::Truncated => {
                    let reply = lock(&state).apply(endpoint, &request);
                    let text = match reply.body {
                        Body::Json(value) => value.to_string(),
                        Body::Html(text) | Body::Cut(text) => text,
                        Body::Empty => String::new(),
                    };
                    let mut cut = text.len() / 2;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    Body::Cut(text[..cut].to_string())
                }
            };
            Reply {
                status: 200,
                headers: Vec::new(),
                body,
            }
        }
        Some(Fault::Slow(delay)) => {
            // In a task of its own: the client hanging up must not cancel the write.
            let state = state.clone();
            let task = tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                lock(&state).apply(endpoint, &request)
            });
            match task.await {
                Ok(reply) => reply,
                Err(_) => Reply::error(500, "internal error"),
            }
        }
    };
    record(reply.status);
    reply.into_response()
}

/// A proxy in front of Jira that rewrites request bodies and drops `properties` from creates
/// and comments (`FakeJira::drop_create_properties`; docs/jira-field-notes.md, "Properties in
/// the create body": check that the marker landed rather than trust a version). Jira answers
/// such a create as any other: 201, nothing says the member was lost.
fn strip_properties(state: &Shared, endpoint: Endpoint, body: Bytes) -> Bytes {
    if !matches!(endpoint, Endpoint::CreateIssue | Endpoint::AddComment)
        || !lock(state).proxy_drops_properties
    {
        return body;
    }
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Object(mut object)) => {
            object.remove("properties");
            Bytes::from(serde_json::to_vec(&object).unwrap_or_default())
        }
        _ => body,
    }
}

impl StateInner {
    /// The node this request reaches: the next one of a cluster (no sticky session).
    fn next_node(&mut self) {
        if let Some(cluster) = &mut self.cluster {
            self.node = cluster.next % cluster.nodes;
            cluster.next += 1;
        }
    }

    /// A cluster node names itself on every answer it makes (`X-ANODEID`: Atlassian KB
    /// "Lucene Index Synchronization in Jira Data Center" and the clustering docs; the
    /// header identifies the node that served the request).
    fn stamp_node(&self, reply: &mut Reply) {
        if self.cluster.is_some() {
            reply
                .headers
                .push(("x-anodeid", format!("node{}", self.node + 1)));
        }
    }
}

impl FakeJira {
    /// A proxy between the agent and Jira strips `properties` from the bodies of creates and
    /// comments (`true`) or passes them (`false`, the default).
    pub fn drop_create_properties(&self, dropped: bool) {
        lock(&self.state).proxy_drops_properties = dropped;
    }

    pub fn start(mode: Mode) -> FakeJira {
        let state = Arc::new(Mutex::new(StateInner {
            mode,
            base: String::new(),
            basic: format!("Basic {}", base64(&format!("{USER}:{PASSWORD}"))),
            bearer: format!("Bearer {TOKEN}"),
            max_results: 1000,
            search_lag: Duration::ZERO,
            account_name: USER.to_string(),
            users: Vec::new(),
            cluster: None,
            node: 0,
            proxy_drops_properties: false,
            latency: Duration::ZERO,
            issues: BTreeMap::new(),
            by_key: HashMap::new(),
            projects: HashMap::from([(PROJECT.to_string(), 1)]),
            links: BTreeMap::new(),
            next_id: 10_000,
            next_link: 20_000,
            next_comment: 30_000,
            creates: HashMap::new(),
            calls: HashMap::new(),
            seen: Vec::new(),
            rules: Vec::new(),
            rate_limit: None,
            window: VecDeque::new(),
            tokens: HashMap::new(),
            next_token: 1,
            boards: BTreeMap::from([
                (4216, ("AURORA board".to_string(), "scrum".to_string())),
                (4217, ("AURORA support".to_string(), "kanban".to_string())),
            ]),
            sprints: vec![
                Sprint {
                    id: 740,
                    board: 4216,
                    name: "Sprint 4".into(),
                    state: "closed".into(),
                },
                Sprint {
                    id: 741,
                    board: 4216,
                    name: "Sprint 5".into(),
                    state: "active".into(),
                },
                Sprint {
                    id: 742,
                    board: 4216,
                    name: "Sprint 6".into(),
                    state: "future".into(),
                },
            ],
            skew_ms: 0,
            // A create's `properties` are applied: Cloud documents them ("Details of issue
            // properties to be add or update", IssueUpdateDetails), and so does Server since 7.2
            // (REST 7.2.8, Issue Update schema: "properties can be set at issue create or update
            // time"). Older servers' `IssueUpdateBean` ignores the member
            // (`@JsonIgnoreProperties(ignoreUnknown = true)`): `set_create_properties(false)`.
            create_properties: true,
            withheld: HashSet::new(),
            off_screens: HashSet::new(),
            changes: 0,
            revoked: false,
            language: Language::English,
            markup_round_trip: false,
            summary_rewrite: None,
            refusals: Vec::new(),
            agile_licensed: true,
            captcha: false,
            failed_logins: 0,
            refused_logins: HashMap::new(),
            token_expired: false,
            token_expires_in_writes: None,
            open_to_anyone: false,
            anonymous: false,
            agile_absent: false,
            basic_auth_off: None,
            comment_properties: HashMap::new(),
            in_flight: 0,
            moved_keys: HashMap::new(),
            search_byte_limit: None,
            redirects: HashMap::new(),
            collisions: HashMap::new(),
            scheduled: Vec::new(),
            searches_served: 0,
            timed_changes: Vec::new(),
            next_history: 0,
        }));
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Jira");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let address = std_listener.local_addr().expect("address");
        let url = format!("http://{address}");
        lock(&state).base = url.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = state.clone();
        std::thread::Builder::new()
            .name("fake-jira".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let listener = KillListener(
                        tokio::net::TcpListener::from_std(std_listener).expect("listener"),
                    );
                    let router = axum::Router::new().fallback(handle).with_state(app);
                    let serve = axum::serve(
                        listener,
                        router.into_make_service_with_connect_info::<Conn>(),
                    );
                    tokio::select! {
                        _ = serve.into_future() => {}
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_background();
            })
            .expect("fake Jira thread");
        FakeJira {
            url,
            state,
            stop: Some(stop),
        }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn mode(&self) -> Mode {
        lock(&self.state).mode
    }
}
