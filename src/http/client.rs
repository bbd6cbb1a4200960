//! The client endpoints: settings, projects, the mirror by project, batches, refreshes.

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, ClientAuth};
use crate::service::{
    AgentView, BatchRequest, BatchSummary, BatchView, CommandView, IssueView, NoteView,
    ProjectView, RefreshSince, SliceRow, SyncRunView,
};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The slice is revalidated with its ETag every time and kept by no shared cache (it is
/// business data behind a token).
const SLICE_CACHE: HeaderValue = HeaderValue::from_static("private, no-cache");

/// Every setting but the tokens, with the computed `base_jql`.
#[utoipa::path(get, path = "/settings", tag = "settings", security(("client_token" = [])),
    responses((status = 200, body = Object), (status = 401, body = super::ErrorBody)))]
pub(crate) async fn get_settings(
    _: ClientAuth,
    State(state): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(state.pool.run(|hub| hub.settings_view()).await?))
}

/// Writes settings, all or nothing; `settings_version` goes up by one.
#[utoipa::path(put, path = "/settings", tag = "settings", security(("client_token" = [])), request_body = Object,
    responses((status = 200, body = Object), (status = 415, description = "not `application/json` (code `unsupported_media_type`)", body = super::ErrorBody), (status = 422, description = "a key refused; nothing written", body = super::ErrorBody)))]
pub(crate) async fn put_settings(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiJson(update): ApiJson<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        state
            .pool
            .run(move |hub| hub.update_settings(&update))
            .await?,
    ))
}

#[utoipa::path(get, path = "/projects", tag = "projects", security(("client_token" = [])),
    responses((status = 200, body = Vec<ProjectView>)))]
pub(crate) async fn list_projects(
    _: ClientAuth,
    State(state): State<AppState>,
) -> Result<Json<Vec<ProjectView>>, ApiError> {
    Ok(Json(state.pool.run(|hub| hub.projects()).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct NewProjectBody {
    /// The Jira label.
    pub label: String,
    pub name: String,
    #[serde(default)]
    pub board_id: Option<i64>,
}

#[utoipa::path(post, path = "/projects", tag = "projects", security(("client_token" = [])), request_body = NewProjectBody,
    responses((status = 201, body = ProjectView), (status = 415, description = "not `application/json` (code `unsupported_media_type`)", body = super::ErrorBody), (status = 409, description = "«проект с такой меткой уже есть»", body = super::ErrorBody),
              (status = 422, body = super::ErrorBody)))]
pub(crate) async fn create_project(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewProjectBody>,
) -> Result<(StatusCode, Json<ProjectView>), ApiError> {
    let project = state
        .pool
        .run(move |hub| hub.create_project(&body.label, &body.name, body.board_id))
        .await?;
    Ok((StatusCode::CREATED, Json(project)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct SliceFilter {
    /// Only the rows whose stored content changed in the mirror (`mirror_changed_at`) at or after
    /// this time: ISO-8601 / RFC 3339, e.g. `2026-01-05T10:00:00Z`. Rows that left the slice are
    /// not reported; the whole slice shows them gone.
    #[param(format = DateTime)]
    pub updated_since: Option<String>,
}

/// The project's own issues and its neighbours, each with `neighbor`. The answer carries a strong
/// `ETag` (a hash of the exact body); `If-None-Match` with it answers 304 with no body while the
/// answer would be the same.
#[utoipa::path(get, path = "/projects/{label}/issues", tag = "mirror", security(("client_token" = [])),
    params(("label" = String, Path, description = "the project's label"), SliceFilter,
           ("If-None-Match" = Option<String>, Header, description = "an `ETag` of an earlier answer: 304 while nothing changed")),
    responses((status = 200, body = Vec<SliceRow>, headers(("ETag" = String, description = "a strong validator of this answer"))),
              (status = 304, description = "nothing changed since the `ETag` given in `If-None-Match`; no body", headers(("ETag" = String))),
              (status = 404, body = super::ErrorBody), (status = 422, description = "`updated_since` is not a time", body = super::ErrorBody)))]
pub(crate) async fn project_issues(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(label): ApiPath<String>,
    ApiQuery(filter): ApiQuery<SliceFilter>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let body = state
        .pool
        .run(move |hub| hub.project_issues_json(&label, filter.updated_since.as_deref()))
        .await?;
    let etag = format!("\"{:032x}\"", xxhash_rust::xxh3::xxh3_128(&body));
    let given = if_none_match(&headers);
    validated(etag, body.into(), &given)
}

#[utoipa::path(get, path = "/issues/{key}", tag = "mirror", security(("client_token" = [])),
    params(("key" = String, Path, description = "the Jira key")),
    responses((status = 200, body = IssueView), (status = 404, body = super::ErrorBody)))]
pub(crate) async fn get_issue(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
) -> Result<Json<IssueView>, ApiError> {
    Ok(Json(state.pool.run(move |hub| hub.issue(&key)).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct NoteBody {
    pub author: String,
    pub body: String,
}

/// A note of the hub's own, never sent to Jira.
#[utoipa::path(post, path = "/issues/{key}/notes", tag = "mirror", security(("client_token" = [])), request_body = NoteBody,
    params(("key" = String, Path, description = "the Jira key")),
    responses((status = 201, body = NoteView), (status = 415, description = "not `application/json` (code `unsupported_media_type`)", body = super::ErrorBody), (status = 404, body = super::ErrorBody), (status = 422, body = super::ErrorBody)))]
pub(crate) async fn add_note(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
    ApiJson(note): ApiJson<NoteBody>,
) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    let note = state
        .pool
        .run(move |hub| hub.add_note(&key, &note.author, &note.body))
        .await?;
    Ok((StatusCode::CREATED, Json(note)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchFilter {
    /// Only the batches of this project.
    pub project: Option<String>,
    /// Only batches older than this one (a smaller id): the next page starts before the last
    /// id of the page before.
    pub before: Option<i64>,
    /// At most this many, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// Batches, newest first, one page at a time: each with its counters and the number of its
/// commands, without the commands themselves (`GET /batches/{id}` has them).
#[utoipa::path(get, path = "/batches", tag = "batches", security(("client_token" = [])), params(BatchFilter),
    responses((status = 200, body = Vec<BatchSummary>), (status = 422, description = "`limit` out of range", body = super::ErrorBody)))]
pub(crate) async fn list_batches(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiQuery(filter): ApiQuery<BatchFilter>,
) -> Result<Json<Vec<BatchSummary>>, ApiError> {
    Ok(Json(
        state
            .pool
            .run(move |hub| hub.batch_page(filter.project.as_deref(), filter.before, filter.limit))
            .await?,
    ))
}

/// Validates every command, then stores the batch (nothing is stored on a refusal).
#[utoipa::path(post, path = "/batches", tag = "batches", security(("client_token" = [])), request_body = BatchRequest,
    responses((status = 201, body = BatchView), (status = 415, description = "not `application/json` (code `unsupported_media_type`)", body = super::ErrorBody), (status = 422, description = "names the command and field", body = super::ErrorBody)))]
pub(crate) async fn create_batch(
    _: ClientAuth,
    State(state): State<AppState>,
    request: Result<ApiJson<BatchRequest>, ApiError>,
) -> Result<(StatusCode, Json<BatchView>), ApiError> {
    // A body of the wrong shape names its command as the validation does: from 1.
    let ApiJson(request) = request.map_err(|mut error| {
        error.field = error
            .field
            .map(|f| crate::domain::command::field_counted_from_one(&f));
        error
    })?;
    let view = state
        .pool
        .run(move |hub| hub.enqueue_batch(&request))
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /batches/{id}`'s query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchWait {
    /// Hold the answer, 1 to 60 seconds, until the batch differs from the `ETag` given in
    /// `If-None-Match` (without one: from what it is when the request comes), or the time passes
    /// (then 304 when it still is the one given). A change reaches a waiting client at once.
    #[param(minimum = 1, maximum = 60)]
    pub wait_seconds: Option<u32>,
}

/// A batch with all its commands. The answer carries a strong `ETag` (a hash of the exact
/// body): `If-None-Match` with it answers 304 with no body while the batch is unchanged, and
/// with `wait_seconds` the answer waits for a change instead of being asked for again.
#[utoipa::path(get, path = "/batches/{id}", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the batch id"), BatchWait,
           ("If-None-Match" = Option<String>, Header, description = "an `ETag` of an earlier answer: 304 while nothing changed")),
    responses((status = 200, body = BatchView, headers(("ETag" = String, description = "a strong validator of this answer"))),
              (status = 304, description = "the batch is the one the `ETag` given in `If-None-Match` names (after `wait_seconds`, when given); no body", headers(("ETag" = String))),
              (status = 404, body = super::ErrorBody), (status = 422, description = "`wait_seconds` out of range", body = super::ErrorBody)))]
pub(crate) async fn get_batch(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<BatchWait>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let given = if_none_match(&headers);
    let read = match query.wait_seconds {
        None => super::batch_wait::read_batch(&state.pool, id).await?,
        Some(seconds @ 1..=super::batch_wait::MAX_BATCH_WAIT_SECONDS) => {
            let wait = std::time::Duration::from_secs(u64::from(seconds));
            state
                .pool
                .batch_waits
                .wait(&state.pool, id, &given, wait)
                .await?
        }
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                super::ErrorCode::Invalid,
                Some("wait_seconds"),
                format!(
                    "ожидалось число секунд от 1 до {}",
                    super::batch_wait::MAX_BATCH_WAIT_SECONDS
                ),
            ));
        }
    };
    validated(read.etag, read.body, &given)
}

/// The `If-None-Match` values of a request.
fn if_none_match(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .map(str::to_string)
        .collect()
}

/// A body with its strong `ETag`, or 304 when `If-None-Match` (`given`) names it; revalidated
/// every time, kept by no shared cache.
fn validated(
    etag: String,
    body: axum::body::Bytes,
    given: &[String],
) -> Result<Response, ApiError> {
    let etag_value =
        HeaderValue::from_str(&etag).map_err(|error| ApiError::internal(error.to_string()))?;
    if super::batch_wait::names(given, &etag) {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [
                (header::ETAG, etag_value),
                (header::CACHE_CONTROL, SLICE_CACHE),
            ],
        )
            .into_response());
    }
    Ok((
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::ETAG, etag_value),
            (header::CACHE_CONTROL, SLICE_CACHE),
        ],
        body,
    )
        .into_response())
}

#[utoipa::path(post, path = "/batches/{id}/cancel", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the batch id")),
    responses((status = 200, body = BatchView), (status = 404, body = super::ErrorBody), (status = 409, description = "already finished", body = super::ErrorBody)))]
pub(crate) async fn cancel_batch(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<BatchView>, ApiError> {
    Ok(Json(state.pool.run(move |hub| hub.cancel_batch(id)).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefreshBody {
    /// Refresh one project's label instead of the base JQL.
    #[serde(default)]
    pub project: Option<String>,
    /// Who asked; `api` when not given.
    #[serde(default)]
    pub author: Option<String>,
    /// `last`: an incremental refresh (`AND updated >= <epoch ms>`) from the start of the last
    /// successful run of that scope, less 10 minutes; full when there is none. Absent: full.
    #[serde(default)]
    #[schema(value_type = Option<SinceBody>)]
    pub since: Option<String>,
}

/// The only value of `since` (read as a string, so any other is a 422 naming `since`).
#[derive(Debug, Clone, Copy, utoipa::ToSchema)]
#[allow(dead_code)] // documents the value; the body reads a string
pub(crate) enum SinceBody {
    #[schema(rename = "last")]
    Last,
}

/// Enqueues a one-command refresh batch: full, or incremental with `{"since": "last"}`. When a
/// refresh of the same scope (query and boards) is already queued or claimed, its batch is the
/// answer (200) and nothing is enqueued; a pending full refresh stands for an incremental one.
#[utoipa::path(post, path = "/refresh", tag = "batches", security(("client_token" = [])), request_body = RefreshBody,
    responses((status = 201, description = "a new refresh batch was enqueued", body = BatchView),
        (status = 200, description = "a refresh of the same scope was already queued or claimed: its batch; nothing was enqueued", body = BatchView),
        (status = 404, body = super::ErrorBody), (status = 422, body = super::ErrorBody)))]
pub(crate) async fn refresh(
    _: ClientAuth,
    State(state): State<AppState>,
    super::ApiBytes(body): super::ApiBytes,
) -> Result<(StatusCode, Json<BatchView>), ApiError> {
    // An empty body refreshes the base JQL.
    let body: RefreshBody = optional_body(&body)?;
    let since = match body.since.as_deref() {
        None => RefreshSince::Full,
        Some("last") => RefreshSince::Last,
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                super::ErrorCode::Invalid,
                Some("since"),
                "ожидается \"last\" (обновление с последнего успешного прогона) или ничего"
                    .to_string(),
            ));
        }
    };
    let (view, new) = state
        .pool
        .run(move |hub| {
            hub.request_refresh(
                body.project.as_deref(),
                body.author.as_deref().unwrap_or("api"),
                since,
            )
        })
        .await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

/// Queues every `failed` and `skipped` command of the batch again; each keeps its earlier outcome
/// in `attempts`, and the batch's status follows.
#[utoipa::path(post, path = "/batches/{id}/retry-failed", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the batch id")),
    responses((status = 200, body = BatchView), (status = 404, body = super::ErrorBody), (status = 409, description = "nothing failed or skipped, or the batch is cancelled", body = super::ErrorBody)))]
pub(crate) async fn retry_failed(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<BatchView>, ApiError> {
    Ok(Json(state.pool.run(move |hub| hub.retry_failed(id)).await?))
}

/// A body that may be empty (then its defaults).
fn optional_body<T: Default + serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        super::decode_json(body)
    }
}

/// The body of `POST /commands/{id}/retry` (optional: no body is a plain retry).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryBody {
    /// `true`: the command stopped by a conflict with a change made in Jira (its `result.conflict`)
    /// writes the fields in conflict over Jira's values («Записать поверх»); the other fields are
    /// checked against the base again. `false` or absent: every field is checked again (the
    /// person may have put the old value back).
    #[serde(default)]
    pub overwrite: bool,
}

/// Queues a `failed` or `skipped` command again, with the commands skipped because of it. Its
/// earlier outcome (status, deliveries, error) is kept in `attempts`. With `{"overwrite": true}`
/// an edit stopped by a conflict writes the fields in conflict over Jira's values.
#[utoipa::path(post, path = "/commands/{id}/retry", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the command id")), request_body(content = Option<RetryBody>, description = "optional"),
    responses((status = 200, body = CommandView), (status = 404, body = super::ErrorBody), (status = 409, description = "not failed or skipped, its dependency failed too, its batch is cancelled, or `overwrite` without a conflict", body = super::ErrorBody),
        (status = 422, body = super::ErrorBody)))]
pub(crate) async fn retry_command(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    super::ApiBytes(body): super::ApiBytes,
) -> Result<Json<CommandView>, ApiError> {
    let body: RetryBody = optional_body(&body)?;
    Ok(Json(
        state
            .pool
            .run(move |hub| {
                if body.overwrite {
                    hub.retry_overwriting(id)
                } else {
                    hub.retry_command(id)
                }
            })
            .await?,
    ))
}

/// «Оставить как в Jira»: an edit stopped by a conflict with a change made in Jira ends
/// `cancelled` (nothing is written); the commands skipped because of it stay skipped with that
/// reason.
#[utoipa::path(post, path = "/commands/{id}/keep-jira", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the command id")),
    responses((status = 200, body = CommandView), (status = 404, body = super::ErrorBody), (status = 409, description = "the command is not failed on a conflict", body = super::ErrorBody)))]
pub(crate) async fn keep_jira(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<CommandView>, ApiError> {
    Ok(Json(
        state.pool.run(move |hub| hub.keep_jira(id, "api")).await?,
    ))
}

/// «Поставить их новым пакетом»: copies of the commands skipped because the edit `id` was left as
/// Jira has it (`keep-jira`) are enqueued as one new batch, in which they run on the issue as Jira
/// holds it; an edit among them gets a new base from the mirror. The skipped commands stay
/// skipped, their error naming the copy, so they are never enqueued twice.
#[utoipa::path(post, path = "/commands/{id}/enqueue-dependents", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the id of the edit left as Jira has it")),
    responses((status = 201, description = "the new batch", body = BatchView), (status = 404, body = super::ErrorBody),
        (status = 409, description = "the command is not an edit left as Jira has it, or it has no skipped dependents not yet enqueued again", body = super::ErrorBody),
        (status = 422, description = "a copy does not validate as a command now (it names the command and field)", body = super::ErrorBody)))]
pub(crate) async fn enqueue_dependents(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<(StatusCode, Json<BatchView>), ApiError> {
    let view = state
        .pool
        .run(move |hub| hub.enqueue_dependents_again(id, "api"))
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// One command as its batch lists it, with its earlier attempts and, while its agent gives it
/// back with nothing sent to Jira, that budget (`uncounted_releases`, `uncounted_since`).
#[utoipa::path(get, path = "/commands/{id}", tag = "batches", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the command id")),
    responses((status = 200, body = CommandView), (status = 404, body = super::ErrorBody)))]
pub(crate) async fn command(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<CommandView>, ApiError> {
    Ok(Json(
        state
            .pool
            .run(move |hub| hub.command_page(id).map(|page| page.command))
            .await?,
    ))
}

/// The commands that ended `failed` or `skipped`, their batches newest first, each batch's in its order (at most 500), with their errors:
/// what an operator may retry.
#[utoipa::path(get, path = "/commands/failed", tag = "batches", security(("client_token" = [])),
    responses((status = 200, body = Vec<CommandView>)))]
pub(crate) async fn failed_commands(
    _: ClientAuth,
    State(state): State<AppState>,
) -> Result<Json<Vec<CommandView>>, ApiError> {
    Ok(Json(state.pool.run(|hub| hub.failed_commands(500)).await?))
}

/// Newest first, each with its `kind` (`full`, `incremental`, `partial`) and `full`.
#[utoipa::path(get, path = "/sync-runs", tag = "mirror", security(("client_token" = [])),
    responses((status = 200, body = Vec<SyncRunView>)))]
pub(crate) async fn sync_runs(
    _: ClientAuth,
    State(state): State<AppState>,
) -> Result<Json<Vec<SyncRunView>>, ApiError> {
    Ok(Json(state.pool.run(|hub| hub.sync_runs()).await?))
}

#[utoipa::path(get, path = "/agents", tag = "agent", security(("client_token" = [])),
    responses((status = 200, body = Vec<AgentView>)))]
pub(crate) async fn agents(
    _: ClientAuth,
    State(state): State<AppState>,
) -> Result<Json<Vec<AgentView>>, ApiError> {
    Ok(Json(state.pool.run(|hub| hub.agents()).await?))
}

/// Applies the removals of a full refresh held by `prune_guard`.
#[utoipa::path(post, path = "/sync-runs/{id}/confirm", tag = "mirror", security(("client_token" = [])),
    params(("id" = i64, Path, description = "the held sync run's id")),
    responses((status = 200, body = crate::service::ConfirmedView), (status = 404, body = super::ErrorBody), (status = 409, description = "the run is not held (confirmed, superseded or never held)", body = super::ErrorBody)))]
pub(crate) async fn confirm_sync_run(
    _: ClientAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<crate::service::ConfirmedView>, ApiError> {
    Ok(Json(
        state
            .pool
            .run(move |hub| hub.confirm_run(id, "API"))
            .await?,
    ))
}
