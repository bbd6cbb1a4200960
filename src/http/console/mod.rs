//! The operator's web console: server-rendered HTML in Russian at `/` and under
//! `/ui/`, over the same service calls as the API.
//!
//! Signing in takes the client token once and opens a session: a random id in an `HttpOnly`,
//! `SameSite=Strict` cookie, kept by the hub (in memory, as its SHA-256) with its own random
//! anti-forgery token. The cookie never holds the client token. A session ends when the operator
//! signs out («Выйти» forgets it), after [`SESSION_IDLE`] without a request or [`SESSION_LIFE`]
//! in any case, when the client token is rotated, and when the hub restarts. Without a session
//! every page is the sign-in form (401).
//!
//! A sign-in reads its form (at most [`SIGN_IN_MAX_BODY`] bytes, within the anonymous deadline
//! of `server.rs`) and looks at the token first: the right client token always signs in at
//! once. Each wrong guess is counted when its form has been read, per client address (an IPv6
//! address by its /64); past [`FREE_FAILURES`] an address's guesses are answered 429 with
//! `Retry-After` for a wait that doubles with each one (at most [`FAILED_SIGN_IN_MAX_WAIT`]), and
//! logged in aggregate. Nothing waits on the hub's side, so a throttled guess holds no
//! connection; the client token is 256 random bits, so the throttle is against the load of
//! guesses, not against their finding the token (README, «Вход в консоль»).
//!
//! Every action is a POST that carries the session's anti-forgery token. A POST that the browser
//! says came from another site (`Sec-Fetch-Site`, or else an `Origin` that is neither this
//! `Host`, the `X-Forwarded-Host`/`Forwarded` host a proxy passed on, nor a `--public-url`) is
//! refused before anything else (403), and so is one without the right anti-forgery token.
//!
//! Parts of a page that change (`data-live` sections) are replaced in place by a small script
//! that fetches the same page every few seconds; without JavaScript the links and forms work.

mod batches;
mod charts;
mod conflict;
mod html;
pub(crate) use html::set_served_database;
mod overview;
mod pages;
mod secrets;
use secrets::{hex, same_text, sha256};

use super::{ApiError, AppState};
use crate::domain::command::BatchStatus;
use crate::service::{HubConnection, RefreshSince, ServiceError};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use html::{Frame, Section};
use maud::Markup;
use serde::Deserialize;
use std::sync::Arc;

/// The cookie that holds the session's id (hex of 32 random bytes).
const COOKIE: &str = "jira_hub_session";

/// A session unused for this long ends (the open pages' live updates use it).
pub(crate) const SESSION_IDLE: time::Duration = time::Duration::hours(12);

/// A session ends this long after its sign-in in any case; the cookie lives as long.
pub(crate) const SESSION_LIFE: time::Duration = time::Duration::days(7);

/// Sessions kept at most; at the cap the oldest goes.
const MAX_SESSIONS: usize = 10_000;

/// Wrong sign-ins from one client address answered at once; each one after sets a wait that
/// doubles ([`FAILED_SIGN_IN_MAX_WAIT`] at most), and a wrong guess within it is answered 429.
const FREE_FAILURES: u32 = 5;
const FAILED_SIGN_IN_MAX_WAIT: time::Duration = time::Duration::minutes(15);
/// A client's failures are forgotten this long after its last one.
const FAILURE_MEMORY: time::Duration = time::Duration::hours(1);
/// Client addresses whose failures are remembered at most (the oldest are forgotten).
const MAX_TRACKED_CLIENTS: usize = 10_000;
/// The largest sign-in form read (the token is 64 hex digits): a larger one is refused unread.
const SIGN_IN_MAX_BODY: usize = 4096;

/// How many batches, failed commands and runs a list shows.
const LIST_LIMIT: i64 = 200;

/// One signed-in browser.
struct Session {
    /// SHA-256 of the client token it signed in with: a rotated token ends it.
    token_hash: [u8; 32],
    /// The anti-forgery token of its forms (hex of 32 random bytes).
    csrf: String,
    created: time::OffsetDateTime,
    last_used: time::OffsetDateTime,
}

/// Failed sign-ins from one client address.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: time::OffsetDateTime,
    /// A wrong guess before this is answered 429.
    wait_until: Option<time::OffsetDateTime>,
}

/// The failed sign-ins the console remembers, by client.
#[derive(Default)]
struct Throttle {
    clients: std::collections::HashMap<std::net::IpAddr, Failures>,
    /// Failures since the last summary in the log, and when that was.
    unlogged: u32,
    logged_at: Option<time::OffsetDateTime>,
    /// The client with the most failures since the last summary, and how many it had then.
    loudest: Option<(std::net::IpAddr, u32)>,
}

/// Who a client is for the throttle: its IPv4 address, or the /64 of its IPv6 address (what one
/// site is given, RFC 6177), so that one host cannot spread its guesses over its addresses.
fn throttle_key(address: std::net::IpAddr) -> std::net::IpAddr {
    match address {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => std::net::IpAddr::V6(std::net::Ipv6Addr::from(
                v6.to_bits() & !((1u128 << 64) - 1),
            )),
        },
        v4 => v4,
    }
}

impl Throttle {
    /// A wrong guess of `client`, counted now that its form was read: the wait it came within,
    /// if it came too early (answered 429), else `None` (answered 401). Either way the next
    /// wait is set: past the free failures it doubles with each guess.
    fn wrong_guess(
        &mut self,
        client: std::net::IpAddr,
        now: time::OffsetDateTime,
    ) -> Option<time::Duration> {
        let client = throttle_key(client);
        if self.clients.len() >= MAX_TRACKED_CLIENTS && !self.clients.contains_key(&client) {
            self.clients
                .retain(|_, failures| failures.last + FAILURE_MEMORY > now);
            if self.clients.len() >= MAX_TRACKED_CLIENTS {
                // The tenth seen longest ago goes at once: guesses from ever new addresses cost
                // one pass per thousand addresses, not one per guess.
                let mut by_age: Vec<(time::OffsetDateTime, std::net::IpAddr)> = self
                    .clients
                    .iter()
                    .map(|(address, failures)| (failures.last, *address))
                    .collect();
                let forget = MAX_TRACKED_CLIENTS / 10;
                by_age.select_nth_unstable(forget);
                for (_, address) in &by_age[..forget] {
                    self.clients.remove(address);
                }
            }
        }
        let entry = self.clients.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            wait_until: None,
        });
        if entry.last + FAILURE_MEMORY <= now {
            entry.count = 0;
            entry.wait_until = None;
        }
        let early = entry
            .wait_until
            .filter(|until| *until > now)
            .map(|until| until - now);
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        entry.wait_until = (entry.count > FREE_FAILURES).then(|| {
            let doublings = (entry.count - FREE_FAILURES - 1).min(20);
            now + time::Duration::seconds(1_i64 << doublings).min(FAILED_SIGN_IN_MAX_WAIT)
        });
        let count = entry.count;
        let until = entry.wait_until;
        // In aggregate only (guesses from rotating addresses were a line each): a
        // summary at most once a minute, with the client that failed most since the last one.
        self.unlogged += 1;
        if self.loudest.is_none_or(|(_, most)| count > most) {
            self.loudest = Some((client, count));
        }
        if self
            .logged_at
            .is_none_or(|at| at + time::Duration::MINUTE <= now)
        {
            let (loudest, loudest_failures) = self.loudest.take().unzip();
            tracing::warn!(
                failures = self.unlogged,
                clients = self.clients.len(),
                loudest = loudest.map(tracing::field::display),
                loudest_failures,
                "failed console sign-ins since the last summary"
            );
            self.unlogged = 0;
            self.logged_at = Some(now);
        }
        // A guess within its wait is told the wait that is now in force.
        early.and(until.map(|until| until - now))
    }

    /// A successful sign-in: the client's failures are forgotten.
    fn succeeded(&mut self, client: std::net::IpAddr) {
        self.clients.remove(&throttle_key(client));
    }
}

/// The console's state: its sessions and its memory of failed sign-ins, for this process.
pub(super) struct Console {
    /// By the SHA-256 of the session id (the id itself is only in the browser's cookie).
    sessions: std::sync::Mutex<std::collections::HashMap<[u8; 32], Session>>,
    throttle: std::sync::Mutex<Throttle>,
    random: ring::rand::SystemRandom,
}

impl Console {
    fn new() -> Console {
        Console {
            sessions: std::sync::Mutex::new(std::collections::HashMap::new()),
            throttle: std::sync::Mutex::new(Throttle::default()),
            random: ring::rand::SystemRandom::new(),
        }
    }

    fn random_hex(&self) -> Option<String> {
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&self.random, &mut bytes).ok()?;
        Some(hex(&bytes))
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<[u8; 32], Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn throttle(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.throttle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a session for the client token `token`; its id (for the cookie) and anti-forgery
    /// token. `None` when the system gave no random bytes.
    fn open(&self, token: &str, now: time::OffsetDateTime) -> Option<String> {
        let id = self.random_hex()?;
        let csrf = self.random_hex()?;
        let mut sessions = self.sessions();
        sessions.retain(|_, session| alive(session, now));
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.created)
                .map(|(key, _)| *key)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            sha256(id.as_bytes()),
            Session {
                token_hash: sha256(token.as_bytes()),
                csrf,
                created: now,
                last_used: now,
            },
        );
        Some(id)
    }

    /// The anti-forgery token of the live session `id`, whose client token is still the one
    /// whose hash is `token_hash`; the session is used now. A session that ended is forgotten.
    fn session(
        &self,
        id: &str,
        token_hash: Option<[u8; 32]>,
        now: time::OffsetDateTime,
    ) -> Option<String> {
        let key = sha256(id.as_bytes());
        let mut sessions = self.sessions();
        let session = sessions.get_mut(&key)?;
        if !alive(session, now) || Some(session.token_hash) != token_hash {
            sessions.remove(&key);
            return None;
        }
        session.last_used = now;
        Some(session.csrf.clone())
    }

    /// Signs the session `id` out.
    fn close(&self, id: &str) {
        self.sessions().remove(&sha256(id.as_bytes()));
    }
}

/// Whether a session is within its idle time and its life.
fn alive(session: &Session, now: time::OffsetDateTime) -> bool {
    now < session.last_used + SESSION_IDLE && now < session.created + SESSION_LIFE
}

/// The console's routes, mounted beside the API's.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route("/ui/static/console.js", get(script))
        .route("/ui/static/console.css", get(style))
        .route(
            "/ui/sign-in",
            get(|| async { see_other("/") }).post(sign_in),
        )
        .route("/ui/sign-out", post(sign_out))
        .route("/ui/batches", get(batches))
        .route("/ui/batches/{id}", get(batch))
        .route(
            "/ui/batches/{id}/cancel",
            get(cancel_question).post(cancel_batch),
        )
        .route("/ui/commands/{id}", get(command))
        .route("/ui/sync-runs/{id}/confirm", post(confirm_run))
        .route("/ui/batches/{id}/retry-failed", post(retry_failed))
        .route("/ui/failed", get(failed))
        .route("/ui/commands/{id}/retry", post(retry_command))
        .route("/ui/commands/{id}/overwrite", post(overwrite_command))
        .route("/ui/commands/{id}/keep-jira", post(keep_jira))
        .route(
            "/ui/commands/{id}/enqueue-dependents",
            post(conflict::enqueue_dependents),
        )
        .route("/ui/mirror", get(mirror))
        .route("/ui/mirror/{label}", get(slice))
        .route("/ui/issues/{key}", get(issue))
        .route("/ui/issues/{key}/notes", post(add_note))
        .route("/ui/runs", get(runs))
        .route("/ui/refresh", post(refresh))
        .route("/ui/agents/forget", post(forget_agent))
        .route("/ui/{*rest}", get(missing))
        .layer(Extension(Arc::new(Console::new())))
}

/// An HTML answer with the headers every console page carries.
fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure_headers(headers);
    response
}

fn secure_headers(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

fn sign_in_form(status: StatusCode, error: Option<&str>) -> Response {
    html(status, html::sign_in_page(error))
}

/// 303 to a page of the console.
fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    secure_headers(response.headers_mut());
    response
}

/// The session id of the request's cookie, if it carries one (64 hex digits).
fn cookie_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|id| id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Set-Cookie` of the session `id` (`None`: the one that ends the session).
fn session_cookie(id: Option<&str>, headers: &HeaderMap) -> HeaderValue {
    // Secure only when the browser reached the hub over TLS (through a proxy that says so): the
    // hub itself serves plain HTTP, where a Secure cookie would never come back.
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let secure = if tls { "; Secure" } else { "" };
    let text = match id {
        Some(id) => format!(
            "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
            SESSION_LIFE.whole_seconds()
        ),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether the browser says the request came from another site.
///
/// `Sec-Fetch-Site`, when present, decides: the browser computes it from the page's origin and
/// the URL it asked for, so a proxy that rewrites `Host` changes nothing; `same-origin` and
/// `none` (typed by the person) pass. Without it (an older browser), an `Origin` must be this
/// site as the browser knows it: `Host`, the host a proxy passed on in `X-Forwarded-Host` or
/// `Forwarded: host=` (a page of another site cannot set those on a form or a simple request,
/// and any other request is preflighted and never allowed), or one of `public_origins`
/// (`--public-url`). A request with neither header (curl) still needs the anti-forgery token.
fn cross_site(headers: &HeaderMap, public_origins: &[String]) -> bool {
    let text = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{0}").trim().to_ascii_lowercase())
    };
    if let Some(site) = text("sec-fetch-site") {
        return site != "same-origin" && site != "none";
    }
    let Some(origin) = text("origin") else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        // `null` (a sandboxed frame, a redirect across sites) and anything else.
        return true;
    };
    if scheme != "http" && scheme != "https" {
        return true;
    }
    if public_origins.contains(&origin) {
        return false;
    }
    let forwarded = text("forwarded").and_then(|value| {
        value
            .split([';', ','])
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(key, _)| key.trim() == "host")
            .map(|(_, host)| host.trim().trim_matches('"').to_string())
    });
    let hosts = [text("host"), text("x-forwarded-host"), forwarded];
    !hosts.iter().flatten().any(|host| {
        // A proxy may list several hosts; the first is the browser's.
        host.split(',').next().map(str::trim) == Some(authority)
    })
}

/// What a notice code of a redirect says.
fn notice_words(code: &str) -> Option<&'static str> {
    Some(match code {
        "cancelled" => "Пакет отменён: его команды в очереди сняты.",
        "cancelled-at-agent" => {
            "Пакет отменён: команды в очереди сняты, а те, что уже у агента, отмена не прерывает."
        }
        "confirmed" => "Удаление подтверждено: задачи убраны из зеркала.",
        "retried" => "Команда снова в очереди.",
        "overwrite" => "Команда снова в очереди: поля из конфликта запишутся поверх значений Jira.",
        "kept-jira" => "Оставлено как в Jira: команда отменена, зависящие от неё пропущены.",
        "enqueued-dependents" => {
            "Новый пакет: копии команд, зависевших от оставленной как в Jira, в очереди."
        }
        "retried-batch" => "Неудачные команды пакета снова в очереди.",
        "note" => "Заметка добавлена.",
        "forgotten" => "Агент забыт; он появится снова, если обратится к хабу.",
        "refresh" => "Обновление зеркала поставлено в очередь.",
        "refresh-pending" => {
            "Такое обновление уже ждёт в очереди или идёт: второе не добавлено, ждите это."
        }
        _ => return None,
    })
}

/// `page` with a notice code for the page to show.
fn with_notice(page: &str, code: &str) -> String {
    let join = if page.contains('?') { '&' } else { '?' };
    format!("{page}{join}notice={code}")
}

/// A path of the console to go back to after an action, from a form's `back` field.
fn local_page(value: Option<&str>) -> Option<&str> {
    value.filter(|v| {
        (*v == "/" || v.starts_with("/ui/"))
            && !v.contains("//")
            && !v.contains('\\')
            && !v.chars().any(char::is_control)
    })
}

#[derive(Debug, Default, Deserialize)]
struct PageQuery {
    notice: Option<String>,
    project: Option<String>,
    status: Option<String>,
    /// A search in a list (the mirror's slice).
    q: Option<String>,
    /// A page of a list, from 1.
    page: Option<String>,
    /// The page to go back to after an action.
    back: Option<String>,
}

/// A request of a signed-in operator for a page.
struct Signed {
    state: AppState,
    csrf: String,
    query: PageQuery,
}

/// The session of a request: `Ok(None)` without a cookie, or with one of a session that ended
/// (signed out, idle, too old, its client token rotated, the hub restarted); its id and
/// anti-forgery token otherwise.
async fn session(
    state: &AppState,
    console: &Console,
    headers: &HeaderMap,
) -> Result<Option<(String, String)>, Response> {
    let Some(id) = cookie_session(headers) else {
        return Ok(None);
    };
    // The client token in force, from memory: a session is checked without a turn
    // at the database.
    let token_hash = state
        .pool
        .credentials
        .with_client(|client| client.map(|client| sha256(client.as_bytes())));
    let now = state.pool.now_utc();
    Ok(console.session(&id, token_hash, now).map(|csrf| (id, csrf)))
}

/// A problem shown before anyone is known to be signed in.
fn plain_problem(status: StatusCode, message: &str) -> Response {
    sign_in_form(status, Some(message))
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Some(console) = console_of(parts) else {
            return Err(internal_problem());
        };
        let Some((_, csrf)) = session(state, &console, &parts.headers).await? else {
            return Err(sign_in_form(StatusCode::UNAUTHORIZED, None));
        };
        super::grant_trust(&parts.extensions);
        let query =
            serde_urlencoded::from_str(parts.uri.query().unwrap_or_default()).unwrap_or_default();
        Ok(Signed {
            state: state.clone(),
            csrf,
            query,
        })
    }
}

/// The console's shared part, put in every request by [`routes`].
fn console_of(parts: &Parts) -> Option<Arc<Console>> {
    parts.extensions.get::<Arc<Console>>().cloned()
}

fn internal_problem() -> Response {
    plain_problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "внутренняя ошибка хаба, подробности в журнале",
    )
}

/// An action of a signed-in operator: from this site, with the session's anti-forgery token.
struct Posted {
    state: AppState,
    console: Arc<Console>,
    session: String,
    csrf: String,
    fields: Vec<(String, String)>,
    headers: HeaderMap,
}

impl Posted {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn frame<'a>(&'a self, title: &'a str, section: Section) -> Frame<'a> {
        Frame {
            title,
            section,
            csrf: &self.csrf,
            notice: None,
        }
    }
}

fn forbidden(message: &str) -> Response {
    html(StatusCode::FORBIDDEN, html::refusal_page(message))
}

/// A form body read whole (at most the API's body limit).
async fn form_fields(
    request: Request,
    state: &AppState,
) -> Result<Vec<(String, String)>, Response> {
    let bytes = Bytes::from_request(request, state)
        .await
        .map_err(|_| plain_problem(StatusCode::BAD_REQUEST, "Форма не прочитана целиком"))?;
    serde_urlencoded::from_bytes(&bytes)
        .map_err(|_| plain_problem(StatusCode::BAD_REQUEST, "Форма не разобрана"))
}

impl FromRequest<AppState> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        if cross_site(&parts.headers, &state.options.public_origins) {
            tracing::warn!("a cross-site console POST refused");
            return Err(forbidden("Запрос пришёл с другого сайта и отклонён"));
        }
        let Some(console) = console_of(&parts) else {
            return Err(internal_problem());
        };
        let Some((session, csrf)) = session(state, &console, &parts.headers).await? else {
            return Err(sign_in_form(StatusCode::UNAUTHORIZED, None));
        };
        super::grant_trust(&parts.extensions);
        let headers = parts.headers.clone();
        let fields = form_fields(Request::from_parts(parts, body), state).await?;
        let given = fields
            .iter()
            .find(|(key, _)| key == "csrf")
            .map(|(_, value)| value.as_str())
            .unwrap_or_default();
        if !same_text(&csrf, given) {
            tracing::warn!("a console POST without the right anti-forgery token refused");
            return Err(forbidden(
                "Форма устарела или пришла не со страницы хаба: обновите страницу и повторите",
            ));
        }
        Ok(Posted {
            state: state.clone(),
            console,
            session,
            csrf,
            fields,
            headers,
        })
    }
}

/// A signed-in page: `work` reads on a blocking thread, `render` makes the title and body from
/// what it read, the session's anti-forgery token and the hub's time (for the times shown).
async fn show<T: Send + 'static>(
    signed: Signed,
    section: Section,
    back: &str,
    work: impl FnOnce(&mut HubConnection) -> Result<T, ServiceError> + Send + 'static,
    render: impl FnOnce(T, &str, time::OffsetDateTime) -> (String, Markup),
) -> Response {
    let notice = signed.query.notice.as_deref().and_then(notice_words);
    let read = move |hub: &mut HubConnection| Ok((work(hub)?, hub.now_utc()));
    match signed.state.pool.run(read).await {
        Ok((value, now)) => {
            let (title, body) = render(value, &signed.csrf, now);
            let frame = Frame {
                title: &title,
                section,
                csrf: &signed.csrf,
                notice,
            };
            html(StatusCode::OK, html::page(&frame, body))
        }
        Err(error) => problem_page(
            &Frame {
                title: "Ошибка",
                section,
                csrf: &signed.csrf,
                notice: None,
            },
            &error,
            back,
        ),
    }
}

fn problem_page(frame: &Frame<'_>, error: &ApiError, back: &str) -> Response {
    html(
        error.status,
        html::page(frame, pages::problem(&error.message, back)),
    )
}

/// Runs an action; 303 to `to` when it succeeds, the refusal in a page otherwise.
async fn act<T: Send + 'static>(
    posted: Posted,
    section: Section,
    to: String,
    back: &str,
    work: impl FnOnce(&mut HubConnection) -> Result<T, ServiceError> + Send + 'static,
) -> Response {
    match posted.state.pool.run(work).await {
        Ok(_) => see_other(&to),
        Err(error) => problem_page(
            &posted.frame("Действие не выполнено", section),
            &error,
            back,
        ),
    }
}

fn not_found(signed: &Signed, section: Section, message: &str, back: &str) -> Response {
    let error = ApiError::new(
        StatusCode::NOT_FOUND,
        super::ErrorCode::NotFound,
        None,
        message,
    );
    problem_page(
        &Frame {
            title: "Не найдено",
            section,
            csrf: &signed.csrf,
            notice: None,
        },
        &error,
        back,
    )
}

// ---------------------------------------------------------------------------------------------
// Static parts

async fn script() -> Response {
    static_file("text/javascript; charset=utf-8", include_str!("console.js"))
}

async fn style() -> Response {
    static_file("text/css; charset=utf-8", include_str!("console.css"))
}

fn static_file(content_type: &'static str, text: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

// ---------------------------------------------------------------------------------------------
// Signing in and out

/// The client's address, for the limit on failed sign-ins (a reverse proxy's own, behind one:
/// the limit then holds for all its clients together).
fn client_address(request: &Request) -> std::net::IpAddr {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or(
            std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            |info| info.0.ip(),
        )
}

/// 429 with `Retry-After` (whole seconds, at least one).
fn too_many(wait: time::Duration) -> Response {
    let seconds = u64::try_from(wait.whole_milliseconds())
        .unwrap_or(0)
        .div_ceil(1000)
        .max(1);
    let mut response = sign_in_form(
        StatusCode::TOO_MANY_REQUESTS,
        Some(&format!(
            "Слишком много неверных токенов с этого адреса; следующий неверный принимается через {seconds} с (верный токен входит всегда)"
        )),
    );
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

async fn sign_in(State(state): State<AppState>, request: Request) -> Response {
    let headers = request.headers().clone();
    if cross_site(&headers, &state.options.public_origins) {
        tracing::warn!("a cross-site console sign-in refused");
        return forbidden("Запрос пришёл с другого сайта и отклонён");
    }
    let Some(console) = request.extensions().get::<Arc<Console>>().cloned() else {
        return internal_problem();
    };
    let client_address = client_address(&request);
    let extensions = request.extensions().clone();
    // The form first, small and within the anonymous deadline; then the token: the right one
    // signs in whatever wrong guesses came before it.
    let Ok(bytes) = axum::body::to_bytes(request.into_body(), SIGN_IN_MAX_BODY).await else {
        return plain_problem(
            StatusCode::BAD_REQUEST,
            &format!("Форма входа не прочитана целиком или больше {SIGN_IN_MAX_BODY} байт"),
        );
    };
    let Ok(fields) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes) else {
        return plain_problem(StatusCode::BAD_REQUEST, "Форма не разобрана");
    };
    let token = fields
        .into_iter()
        .find(|(key, _)| key == "token")
        .map(|(_, token)| token.trim().to_string())
        .unwrap_or_default();
    if token.is_empty() {
        return sign_in_form(StatusCode::UNAUTHORIZED, Some("Введите токен клиента"));
    }
    // Checked in memory: a guess takes no turn at the database.
    let crate::service::Holder {
        client,
        agent,
        initialised,
    } = state.pool.credentials.holder(&token);
    let now = state.pool.now_utc();
    if !client {
        // Counted now that its form is read: a burst of headers first and forms later is
        // counted guess by guess all the same.
        state.pool.metrics().sign_in_failed();
        if let Some(wait) = console.throttle().wrong_guess(client_address, now) {
            return too_many(wait);
        }
        let message = if !initialised {
            "У хаба нет токенов: база не инициализирована (jira-hub init --config FILE)"
        } else if agent {
            "Это токен агента; консоль открывается токеном клиента"
        } else {
            "Токен не подошёл"
        };
        return sign_in_form(StatusCode::UNAUTHORIZED, Some(message));
    }
    super::grant_trust(&extensions);
    console.throttle().succeeded(client_address);
    let Some(id) = console.open(&token, now) else {
        return plain_problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Вход невозможен: системе не хватило случайных байтов, подробности в журнале",
        );
    };
    let mut response = see_other("/");
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(Some(&id), &headers));
    response
}

/// «Выйти»: the session is forgotten by the hub, and the browser's cookie ends.
async fn sign_out(posted: Posted) -> Response {
    posted.console.close(&posted.session);
    let mut response = see_other("/");
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(None, &posted.headers));
    response
}

// ---------------------------------------------------------------------------------------------
// Pages

async fn overview(signed: Signed) -> Response {
    show(
        signed,
        Section::Overview,
        "/",
        |hub| hub.overview(),
        |view, csrf, _| ("Обзор".to_string(), overview::overview(&view, csrf)),
    )
    .await
}

async fn batches(signed: Signed) -> Response {
    let project = signed
        .query
        .project
        .clone()
        .filter(|p| !p.trim().is_empty());
    let status: Option<BatchStatus> = signed.query.status.as_deref().and_then(|s| s.parse().ok());
    let filter = project.clone();
    show(
        signed,
        Section::Batches,
        "/ui/batches",
        move |hub| {
            Ok((
                hub.batch_summaries(filter.as_deref(), status, LIST_LIMIT)?,
                hub.projects()?,
            ))
        },
        move |(list, projects), _, now| {
            (
                "Пакеты".to_string(),
                batches::batches(
                    &list,
                    &projects,
                    project.as_deref(),
                    status,
                    LIST_LIMIT,
                    now,
                ),
            )
        },
    )
    .await
}

async fn batch(signed: Signed, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return not_found(
            &signed,
            Section::Batches,
            "Такого пакета нет",
            "/ui/batches",
        );
    };
    show(
        signed,
        Section::Batches,
        "/ui/batches",
        move |hub| hub.batch(id),
        |view, csrf, now| {
            (
                format!("Пакет {}: {}", view.id, view.title),
                batches::batch(&view, csrf, now),
            )
        },
    )
    .await
}

/// A command's own page, named as people name it: «Пакет 5, команда 2».
async fn command(signed: Signed, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return not_found(
            &signed,
            Section::Batches,
            "такой команды нет",
            "/ui/batches",
        );
    };
    show(
        signed,
        Section::Batches,
        "/ui/batches",
        move |hub| hub.command_page(id),
        |page, csrf, now| {
            (
                format!(
                    "Пакет {}, команда {}",
                    page.command.batch_id, page.command.seq
                ),
                batches::command(&page, csrf, now),
            )
        },
    )
    .await
}

/// The step before cancelling: what it will do, and the button (a page: no JavaScript needed).
async fn cancel_question(signed: Signed, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return not_found(
            &signed,
            Section::Batches,
            "Такого пакета нет",
            "/ui/batches",
        );
    };
    let page = format!("/ui/batches/{id}");
    let back = local_page(signed.query.back.as_deref())
        .unwrap_or(&page)
        .to_string();
    show(
        signed,
        Section::Batches,
        "/ui/batches",
        move |hub| hub.batch(id),
        move |view, csrf, _| {
            (
                format!("Отменить пакет {}?", view.id),
                batches::cancel_confirmation(&view, csrf, &back),
            )
        },
    )
    .await
}

/// An action on the batch or command `id` of the path: 303 to the form's `back` page (else
/// `page(id)`) with `notice` when it succeeds, the refusal in a page otherwise.
async fn act_on<T: Send + 'static>(
    id: &str,
    posted: Posted,
    section: Section,
    page: impl FnOnce(i64) -> String,
    notice: &str,
    work: impl FnOnce(&mut HubConnection, i64) -> Result<T, ServiceError> + Send + 'static,
) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        let error = ApiError::new(
            StatusCode::NOT_FOUND,
            super::ErrorCode::NotFound,
            None,
            "Такого номера нет",
        );
        return problem_page(&posted.frame("Не найдено", section), &error, "/");
    };
    let page = page(id);
    let to = with_notice(local_page(posted.field("back")).unwrap_or(&page), notice);
    act(posted, section, to, &page, move |hub| work(hub, id)).await
}

/// Cancels a batch once asked (the form of [`cancel_question`] says `confirmed=yes`; a POST
/// without it is taken to that question, never cancelling); the notice says whether commands at
/// the agent go on (cancelling does not stop them).
async fn cancel_batch(Path(id): Path<String>, posted: Posted) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        let error = ApiError::new(
            StatusCode::NOT_FOUND,
            super::ErrorCode::NotFound,
            None,
            "Такого пакета нет",
        );
        return problem_page(
            &posted.frame("Не найдено", Section::Batches),
            &error,
            "/ui/batches",
        );
    };
    let page = format!("/ui/batches/{id}");
    if posted.field("confirmed") != Some("yes") {
        let question = match local_page(posted.field("back")) {
            Some(back) => format!("/ui/batches/{id}/cancel?back={}", html::segment(back)),
            None => format!("/ui/batches/{id}/cancel"),
        };
        return see_other(&question);
    }
    match posted.state.pool.run(move |hub| hub.cancel_batch(id)).await {
        Ok(view) => {
            let at_agent = view.counters.get("claimed").copied().unwrap_or(0) > 0;
            let notice = if at_agent {
                "cancelled-at-agent"
            } else {
                "cancelled"
            };
            see_other(&with_notice(
                local_page(posted.field("back")).unwrap_or(&page),
                notice,
            ))
        }
        Err(error) => problem_page(
            &posted.frame("Действие не выполнено", Section::Batches),
            &error,
            &page,
        ),
    }
}

/// A page of the console that does not exist: an HTML page (not the API's JSON) with the menu,
/// for whoever follows an old or mistyped link; a signed-in person keeps «Выйти» too.
pub(super) fn missing_page(csrf: Option<&str>) -> Response {
    html(StatusCode::NOT_FOUND, html::missing_page(csrf))
}

async fn missing(State(state): State<AppState>, parts: Parts) -> Response {
    let csrf = match console_of(&parts) {
        Some(console) => session(&state, &console, &parts.headers)
            .await
            .ok()
            .flatten()
            .map(|(_, csrf)| csrf),
        None => None,
    };
    missing_page(csrf.as_deref())
}

/// Whether a request for an unknown path came from a browser (it asks for HTML first), whose
/// person should see a page rather than the API's JSON error.
pub(super) fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

async fn confirm_run(Path(id): Path<String>, posted: Posted) -> Response {
    act_on(
        &id,
        posted,
        Section::Runs,
        |_| "/ui/runs".to_string(),
        "confirmed",
        |hub, id| hub.confirm_run(id, "console"),
    )
    .await
}

async fn retry_failed(Path(id): Path<String>, posted: Posted) -> Response {
    let page = |id| format!("/ui/batches/{id}");
    act_on(
        &id,
        posted,
        Section::Failed,
        page,
        "retried-batch",
        |hub, id| hub.retry_failed(id),
    )
    .await
}

async fn retry_command(Path(id): Path<String>, posted: Posted) -> Response {
    let page = |_| "/ui/failed".to_string();
    act_on(&id, posted, Section::Failed, page, "retried", |hub, id| {
        hub.retry_command(id)
    })
    .await
}

/// «Записать поверх» and «Оставить как в Jira»: back to the command's page.
async fn overwrite_command(Path(id): Path<String>, posted: Posted) -> Response {
    on_command_page(&id, posted, "overwrite", |hub, id| {
        hub.retry_overwriting(id)
    })
    .await
}

async fn keep_jira(Path(id): Path<String>, posted: Posted) -> Response {
    on_command_page(&id, posted, "kept-jira", |hub, id| {
        hub.keep_jira(id, "console")
    })
    .await
}

async fn on_command_page<T: Send + 'static>(
    id: &str,
    posted: Posted,
    notice: &str,
    work: impl FnOnce(&mut HubConnection, i64) -> Result<T, ServiceError> + Send + 'static,
) -> Response {
    let page = |id| format!("/ui/commands/{id}");
    act_on(id, posted, Section::Batches, page, notice, work).await
}

async fn failed(signed: Signed) -> Response {
    show(
        signed,
        Section::Failed,
        "/ui/failed",
        |hub| hub.failed_by_batch(LIST_LIMIT),
        |list, csrf, _| {
            (
                "Неудачные команды".to_string(),
                batches::failed(&list, csrf, LIST_LIMIT),
            )
        },
    )
    .await
}

async fn mirror(signed: Signed) -> Response {
    show(
        signed,
        Section::Mirror,
        "/ui/mirror",
        |hub| hub.project_issue_counts(),
        |(projects, total), _, _| ("Зеркало".to_string(), pages::mirror(&projects, total)),
    )
    .await
}

async fn slice(signed: Signed, Path(label): Path<String>) -> Response {
    let title = format!("Проект {label}");
    let query = signed.query.q.clone();
    let page = signed
        .query
        .page
        .as_deref()
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1);
    let asked = label.clone();
    show(
        signed,
        Section::Mirror,
        "/ui/mirror",
        move |hub| hub.project_issues(&asked),
        move |rows, _, _| (title, pages::slice(&rows, &label, query.as_deref(), page)),
    )
    .await
}

async fn issue(signed: Signed, Path(key): Path<String>) -> Response {
    show(
        signed,
        Section::Mirror,
        "/ui/mirror",
        move |hub| hub.issue(&key),
        |view, csrf, now| (view.issue.key.clone(), pages::issue(&view, csrf, now)),
    )
    .await
}

async fn add_note(Path(key): Path<String>, posted: Posted) -> Response {
    let author = posted.field("author").unwrap_or_default().to_string();
    let body = posted.field("body").unwrap_or_default().to_string();
    let page = format!("/ui/issues/{}", html::segment(&key));
    let to = format!("{page}?notice=note#notes");
    act(posted, Section::Mirror, to, &page, move |hub| {
        hub.add_note(&key, &author, &body)
    })
    .await
}

async fn runs(signed: Signed) -> Response {
    show(
        signed,
        Section::Runs,
        "/ui/runs",
        |hub| {
            Ok((
                hub.sync_runs()?,
                hub.projects()?,
                hub.held_runs()?,
                hub.queued_refreshes()?,
            ))
        },
        |(runs, projects, held, queued), csrf, now| {
            (
                "Синхронизация".to_string(),
                pages::runs_with_held(&runs, &projects, &held, &queued, csrf, now),
            )
        },
    )
    .await
}

async fn refresh(posted: Posted) -> Response {
    let project = posted
        .field("project")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from);
    let run = move |hub: &mut HubConnection| {
        hub.request_refresh(project.as_deref(), "консоль", RefreshSince::Full)
    };
    match posted.state.pool.run(run).await {
        Ok((_, true)) => see_other("/ui/runs?notice=refresh"),
        Ok((_, false)) => see_other("/ui/runs?notice=refresh-pending"),
        Err(error) => problem_page(
            &posted.frame("Действие не выполнено", Section::Runs),
            &error,
            "/ui/runs",
        ),
    }
}

/// Forgets a silent agent or a one-off check (`agent` of the form): back to the overview.
async fn forget_agent(posted: Posted) -> Response {
    let name = posted.field("agent").unwrap_or_default().to_string();
    let to = with_notice("/", "forgotten");
    act(posted, Section::Overview, to, "/", move |hub| {
        hub.forget_agent(&name)
    })
    .await
}

#[cfg(test)]
mod tests;
