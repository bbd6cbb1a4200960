//! The operator's web console (issue 11): server-rendered HTML in Russian at `/` and under
//! `/ui/`, over the same service calls as the API.
//!
//! Signing in takes the client token once; the browser keeps it in an `HttpOnly`,
//! `SameSite=Strict` cookie and every request checks it as `authorize` checks a bearer token
//! (constant time). Without it every page is the sign-in form (401). Every action is a POST that
//! carries an anti-forgery token: HMAC-SHA256 of the client token under a key drawn at random
//! when the router is built, so it changes with the token and with each start of the hub. A POST
//! whose `Sec-Fetch-Site` or `Origin` says it came from another site is refused before anything
//! else (403), and so is one without the right anti-forgery token.
//!
//! Parts of a page that change (`data-live` sections) are replaced in place by a small script
//! that fetches the same page every few seconds; without JavaScript the links and forms work.

mod charts;
mod html;
mod pages;

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
use serde::Deserialize;
use std::fmt::Write as _;
use std::sync::Arc;

/// The cookie that holds the client token (hex of its bytes, so any token fits a cookie).
const COOKIE: &str = "jira_hub_session";

/// How long the browser keeps the cookie: 30 days.
const COOKIE_MAX_AGE: u32 = 30 * 24 * 3600;

/// How many batches, failed commands and runs a list shows.
const LIST_LIMIT: i64 = 200;

/// What an anti-forgery token signs, under the client token as the key.
const CSRF_LABEL: &[u8] = b"jira-hub console: anti-forgery token, v1";

/// The anti-forgery tokens of the console's forms. A token is an HMAC-SHA256 of a fixed label
/// under the client token: only someone holding the client token can make it (a page of another
/// site cannot read the cookie), it stays valid across restarts of the hub (a form left open
/// still works), and it ends when the client token is rotated.
pub(super) struct Console;

impl Console {
    fn new() -> Console {
        Console
    }

    /// The anti-forgery token of a session of `token`.
    fn csrf(&self, token: &str) -> Option<String> {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
        Some(hex(ring::hmac::sign(&key, CSRF_LABEL).as_ref()))
    }

    /// Whether `given` is the anti-forgery token of `token` (compared in constant time).
    fn csrf_matches(&self, token: &str, given: &str) -> bool {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
        unhex(given).is_some_and(|tag| ring::hmac::verify(&key, CSRF_LABEL, &tag).is_ok())
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
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
        .route("/ui/batches/{id}/cancel", post(cancel_batch))
        .route("/ui/sync-runs/{id}/confirm", post(confirm_run))
        .route("/ui/batches/{id}/retry-failed", post(retry_failed))
        .route("/ui/failed", get(failed))
        .route("/ui/commands/{id}/retry", post(retry_command))
        .route("/ui/mirror", get(mirror))
        .route("/ui/mirror/{label}", get(slice))
        .route("/ui/issues/{key}", get(issue))
        .route("/ui/issues/{key}/notes", post(add_note))
        .route("/ui/runs", get(runs))
        .route("/ui/refresh", post(refresh))
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

/// The client token of the request's cookie, if it carries one.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| unhex(value.trim()))
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|token| !token.is_empty())
}

/// The `Set-Cookie` of a session of `token` (`None`: the one that ends the session).
fn session_cookie(token: Option<&str>, headers: &HeaderMap) -> HeaderValue {
    // Secure only when the browser reached the hub over TLS (through a proxy that says so): the
    // hub itself serves plain HTTP, where a Secure cookie would never come back.
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let secure = if tls { "; Secure" } else { "" };
    let text = match token {
        Some(token) => format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={COOKIE_MAX_AGE}{secure}",
            hex(token.as_bytes())
        ),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether the browser says the request came from another site: `Sec-Fetch-Site` other than
/// `same-origin` or `none` (typed by the person), or an `Origin` whose host is not this one.
/// A request with neither (curl, an old browser) still needs the anti-forgery token.
fn cross_site(headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{0}").trim().to_ascii_lowercase())
    };
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site"))
        && site != "same-origin"
        && site != "none"
    {
        return true;
    }
    match (text(header::ORIGIN), text(header::HOST)) {
        (None, _) => false,
        (Some(origin), Some(host)) => {
            origin != format!("http://{host}") && origin != format!("https://{host}")
        }
        (Some(_), None) => true,
    }
}

/// What a notice code of a redirect says.
fn notice_words(code: &str) -> Option<&'static str> {
    Some(match code {
        "cancelled" => "Пакет отменён.",
        "confirmed" => "Удаление подтверждено: задачи убраны из зеркала.",
        "retried" => "Команда снова в очереди.",
        "retried-batch" => "Неудачные команды пакета снова в очереди.",
        "note" => "Заметка добавлена.",
        "refresh" => "Обновление зеркала поставлено в очередь.",
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
}

/// A request of a signed-in operator for a page.
struct Signed {
    state: AppState,
    csrf: String,
    query: PageQuery,
}

/// The session of a request: `Ok(None)` without a cookie or with a token that is not the
/// client's; the anti-forgery token and the token itself otherwise.
async fn session(
    state: &AppState,
    console: &Console,
    headers: &HeaderMap,
) -> Result<Option<(String, String)>, Response> {
    let Some(token) = cookie_token(headers) else {
        return Ok(None);
    };
    let given = token.clone();
    let matches = state
        .pool
        .run(move |hub| hub.client_token_matches(Some(&given)))
        .await
        .map_err(|error| plain_problem(error.status, &error.message))?;
    if !matches {
        return Ok(None);
    }
    match console.csrf(&token) {
        Some(csrf) => Ok(Some((token, csrf))),
        None => Err(plain_problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "вход невозможен: системе не хватило случайных байтов, подробности в журнале",
        )),
    }
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
        .map_err(|_| plain_problem(StatusCode::BAD_REQUEST, "форма не прочитана целиком"))?;
    serde_urlencoded::from_bytes(&bytes)
        .map_err(|_| plain_problem(StatusCode::BAD_REQUEST, "форма не разобрана"))
}

impl FromRequest<AppState> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        if cross_site(&parts.headers) {
            tracing::warn!("a cross-site console POST refused");
            return Err(forbidden("запрос пришёл с другого сайта и отклонён"));
        }
        let Some(console) = console_of(&parts) else {
            return Err(internal_problem());
        };
        let Some((token, csrf)) = session(state, &console, &parts.headers).await? else {
            return Err(sign_in_form(StatusCode::UNAUTHORIZED, None));
        };
        let headers = parts.headers.clone();
        let fields = form_fields(Request::from_parts(parts, body), state).await?;
        let given = fields
            .iter()
            .find(|(key, _)| key == "csrf")
            .map(|(_, value)| value.as_str())
            .unwrap_or_default();
        if !console.csrf_matches(&token, given) {
            tracing::warn!("a console POST without the right anti-forgery token refused");
            return Err(forbidden(
                "форма устарела или пришла не со страницы хаба: обновите страницу и повторите",
            ));
        }
        Ok(Posted {
            state: state.clone(),
            csrf,
            fields,
            headers,
        })
    }
}

/// A signed-in page: `work` reads on a blocking thread, `render` makes the title and body.
async fn show<T: Send + 'static>(
    signed: Signed,
    section: Section,
    back: &str,
    work: impl FnOnce(&mut HubConnection) -> Result<T, ServiceError> + Send + 'static,
    render: impl FnOnce(T, &str) -> (String, String),
) -> Response {
    let notice = signed.query.notice.as_deref().and_then(notice_words);
    match signed.state.pool.run(work).await {
        Ok(value) => {
            let (title, body) = render(value, &signed.csrf);
            let frame = Frame {
                title: &title,
                section,
                csrf: &signed.csrf,
                notice,
            };
            html(StatusCode::OK, html::page(&frame, &body))
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
        html::page(frame, &pages::problem(&error.message, back)),
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

async fn sign_in(State(state): State<AppState>, request: Request) -> Response {
    let headers = request.headers().clone();
    if cross_site(&headers) {
        tracing::warn!("a cross-site console sign-in refused");
        return forbidden("запрос пришёл с другого сайта и отклонён");
    }
    let fields = match form_fields(request, &state).await {
        Ok(fields) => fields,
        Err(response) => return response,
    };
    let token = fields
        .into_iter()
        .find(|(key, _)| key == "token")
        .map(|(_, token)| token.trim().to_string())
        .unwrap_or_default();
    if token.is_empty() {
        return sign_in_form(StatusCode::UNAUTHORIZED, Some("введите токен клиента"));
    }
    let given = token.clone();
    let (client, agent) = match state
        .pool
        .run(move |hub| {
            Ok((
                hub.client_token_matches(Some(&given))?,
                hub.agent_token_matches(Some(&given))?,
            ))
        })
        .await
    {
        Ok(answer) => answer,
        Err(error) => return plain_problem(error.status, &error.message),
    };
    if !client {
        tracing::info!("a console sign-in with a wrong token");
        let message = if agent {
            "это токен агента; консоль открывается токеном клиента"
        } else {
            "токен не подошёл"
        };
        return sign_in_form(StatusCode::UNAUTHORIZED, Some(message));
    }
    let mut response = see_other("/");
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(Some(&token), &headers));
    response
}

async fn sign_out(posted: Posted) -> Response {
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
        |view, _| ("Обзор".to_string(), pages::overview(&view)),
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
        move |(list, projects), _| {
            (
                "Пакеты".to_string(),
                pages::batches(&list, &projects, project.as_deref(), status, LIST_LIMIT),
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
            "такого пакета нет",
            "/ui/batches",
        );
    };
    show(
        signed,
        Section::Batches,
        "/ui/batches",
        move |hub| hub.batch(id),
        |view, csrf| {
            (
                format!("Пакет {}: {}", view.id, view.title),
                pages::batch(&view, csrf),
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
            "такого номера нет",
        );
        return problem_page(&posted.frame("Не найдено", section), &error, "/");
    };
    let page = page(id);
    let to = with_notice(local_page(posted.field("back")).unwrap_or(&page), notice);
    act(posted, section, to, &page, move |hub| work(hub, id)).await
}

async fn cancel_batch(Path(id): Path<String>, posted: Posted) -> Response {
    let page = |id| format!("/ui/batches/{id}");
    act_on(
        &id,
        posted,
        Section::Batches,
        page,
        "cancelled",
        |hub, id| hub.cancel_batch(id),
    )
    .await
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

async fn failed(signed: Signed) -> Response {
    show(
        signed,
        Section::Failed,
        "/ui/failed",
        |hub| hub.failed_by_batch(LIST_LIMIT),
        |list, csrf| {
            (
                "Неудачные команды".to_string(),
                pages::failed(&list, csrf, LIST_LIMIT),
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
        |(projects, total), _| ("Зеркало".to_string(), pages::mirror(&projects, total)),
    )
    .await
}

async fn slice(signed: Signed, Path(label): Path<String>) -> Response {
    let title = format!("Проект {label}");
    show(
        signed,
        Section::Mirror,
        "/ui/mirror",
        move |hub| hub.project_issues(&label),
        move |rows, _| (title, pages::slice(&rows)),
    )
    .await
}

async fn issue(signed: Signed, Path(key): Path<String>) -> Response {
    show(
        signed,
        Section::Mirror,
        "/ui/mirror",
        move |hub| hub.issue(&key),
        |view, csrf| (view.issue.key.clone(), pages::issue(&view, csrf)),
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
                hub.now_utc(),
            ))
        },
        |(runs, projects, held, now), csrf| {
            (
                "Синхронизация".to_string(),
                pages::runs_with_held(&runs, &projects, &held, csrf, now),
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
    act(
        posted,
        Section::Runs,
        "/ui/runs?notice=refresh".to_string(),
        "/ui/runs",
        move |hub| hub.enqueue_refresh_of(project.as_deref(), "консоль", RefreshSince::Full),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_site_requests_are_seen() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_static(value));
            }
            map
        };
        assert!(!cross_site(&headers(&[])));
        assert!(!cross_site(&headers(&[
            ("host", "hub:8080"),
            ("origin", "http://hub:8080"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(cross_site(&headers(&[
            ("host", "hub:8080"),
            ("origin", "http://evil.example")
        ])));
        assert!(cross_site(&headers(&[("host", "hub"), ("origin", "null")])));
    }

    #[test]
    fn cookies_and_tokens_round_trip() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=b; {COOKIE}={}; c=d", hex("токен;=".as_bytes())))
                .unwrap_or_else(|_| HeaderValue::from_static("")),
        );
        assert_eq!(cookie_token(&headers).as_deref(), Some("токен;="));
        let console = Console::new();
        let csrf = console.csrf("t").unwrap_or_default();
        assert!(console.csrf_matches("t", &csrf));
        assert!(!console.csrf_matches("u", &csrf));
        assert!(!console.csrf_matches("t", ""));
        assert!(!console.csrf_matches("t", "zz"));
        // Another process (the hub restarted) makes and accepts the same token.
        assert!(Console::new().csrf_matches("t", &csrf));
    }

    #[test]
    fn only_pages_of_the_console_are_gone_back_to() {
        assert_eq!(local_page(Some("/ui/failed")), Some("/ui/failed"));
        assert_eq!(local_page(Some("/")), Some("/"));
        assert_eq!(local_page(Some("//evil.example/")), None);
        assert_eq!(local_page(Some("/ui//evil")), None);
        assert_eq!(local_page(Some("https://evil.example/")), None);
        assert_eq!(local_page(Some("/ui/\\evil")), None);
        assert_eq!(local_page(None), None);
    }
}
