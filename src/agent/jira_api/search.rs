//! The two searches: Server/DC paged by issue key, project by project (`/rest/api/2/search`),
//! Cloud's `search/jql` with page tokens; the newest issues carrying a marker.

use super::{Deployment, Jira, JiraError, ReadFailure, SearchPage, parse};
use crate::agent::jql;
use crate::agent::net::Reply;
use crate::agent::text::body_excerpt;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// How many times in a row a search page may fail to come (each time asked again with half the
/// page size) before the search fails.
const MAX_PAGE_FAILURES: u32 = 6;

/// The most issue ids `reconcileIssues` accepts ("Accepts max 50 ids").
pub(super) const MAX_RECONCILED: usize = 50;
/// How many search pages in a row must come after the page size was halved before it doubles
/// back (up to the size asked).
const GROW_AFTER: u32 = 2;

impl Jira {
    /// Runs a search and hands each page to `on_page` as Jira returns it. Returns how many
    /// issues came back. On Cloud it names `reconcile` in `reconcileIssues` ("Strong
    /// consistency issue ids to be reconciled with search results. Accepts max 50 ids. This list
    /// of ids should be consistent with each paginated request across different pages":
    /// Atlassian's description of `search/jql`; developer.atlassian.com/cloud/jira/platform/
    /// search-and-reconcile/): issues written moments ago then show as they are now.
    pub(crate) fn search(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        reconcile: &[u64],
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        self.search_with(query, fields, None, reconcile, page_size, on_page)
    }

    /// [`Jira::search`], on Cloud with `properties` and `reconcileIssues` asked for too.
    fn search_with(
        &mut self,
        query: &str,
        fields: &str,
        properties: Option<&str>,
        reconcile: &[u64],
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        match self.deployment()? {
            Deployment::Server => self.search_server(query, fields, page_size, on_page),
            Deployment::Cloud => {
                let cloud = CloudAsk {
                    properties,
                    reconcile,
                };
                self.search_cloud(query, fields, cloud, page_size, on_page)
            }
        }
    }

    /// Server/DC: paged by issue key, project by project. In Jira's JQL `id`, `key`,
    /// `issue` and `issuekey` are one clause, and `key > "P-7"` means "project P, key number above
    /// 7", so a numeric `id > N` was "the project of issue N", not "a larger id": a page that ended
    /// on an issue moved into the project stopped the search, and one whose last issue moved away
    /// ended it short. Here:
    ///
    /// - a project's first page is `(<jql>) AND project not in (<done>) ORDER BY key ASC`; its
    ///   first issue names the project P paged next (issues of other projects on that page are
    ///   left for their own turn);
    /// - the next pages are `(<jql>) AND key > "<last key of P>" ORDER BY key ASC` (`startAt=0`:
    ///   no deep offsets, so the 10,000-row window never bites);
    /// - every page must progress: its issues in P, key numbers rising above the last one, each
    ///   with an `id`, a `key` and `fields`; anything else fails the search, never ends it short;
    /// - when the last key no longer names an issue of P (deleted: "An issue with key … does
    ///   not exist", moved: "… cannot be applied to moved issue key …"), the page is asked again
    ///   after the previous key of the last good page, issues already sent are skipped by id; when
    ///   no key of that page is left, P is paged again from its start, de-duplicated the same way;
    /// - an empty page after `key > "P-n"` ends P, not the search (a full last page of P, or a
    ///   first page that also held other projects' issues, is followed by one);
    /// - a page that does not come (a timeout, a 5xx after the retries, 413) is asked again from
    ///   the same place with half the page size, up to [`MAX_PAGE_FAILURES`] times in a row.
    fn search_server(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        let mut size = page_size.max(1);
        let mut sent = 0u64;
        let mut sent_ids: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let mut done: Vec<String> = Vec::new();
        // The project being paged, and the keys (with their numbers) of its last good page.
        let mut project: Option<String> = None;
        let mut cursor: Vec<(String, u64)> = Vec::new();
        let mut failures = 0u32;
        // Pages answered in a row since the size was last halved: after [`GROW_AFTER`] of them
        // the size doubles back, up to the asked size (a slow moment does not shrink a whole
        // refresh for good).
        let mut answered = 0u32;
        let mut total_hint: Option<u64> = None;
        // The `total` of the last page asked without `key >` (a project's first page, whose
        // query covers every project still to page) and how many issues had been sent before
        // it: once that many are sent, Jira's own count says nothing is left, and no empty page
        // is asked to learn it.
        let mut covered: Option<(u64, u64)> = None;
        loop {
            if answered >= GROW_AFTER && size < page_size.max(1) {
                size = (size * 2).min(page_size.max(1));
                answered = 0;
                tracing::info!(
                    page_size = size,
                    "search pages come again: the page grows back"
                );
            }
            let after = cursor.last().cloned();
            let page_jql = jql::key_page(query, &done, after.as_ref().map(|(k, _)| k.as_str()));
            let path = format!(
                "/rest/api/2/search?jql={}&startAt=0&maxResults={size}&fields={}",
                jql::encode(&page_jql),
                jql::encode(fields)
            );
            self.last_read_failure = None;
            let reply = match self.read(&path) {
                Ok(reply) => reply,
                Err(JiraError::Refused {
                    status: 400,
                    message,
                }) if after.is_some() => {
                    let last = after.as_ref().map(|(k, _)| k.as_str()).unwrap_or_default();
                    if !self.key_is_gone(last)? {
                        return Err(JiraError::Refused {
                            status: 400,
                            message,
                        });
                    }
                    let (gone, _) = cursor.pop().unwrap_or_default();
                    tracing::warn!(key = %gone, %message, "the last key of a page left the project or was deleted: paging again from the key before it");
                    if cursor.is_empty() {
                        project = None;
                    }
                    continue;
                }
                Err(error) if is_page_failure(&error, self.last_read_failure) => {
                    failures += 1;
                    if failures > MAX_PAGE_FAILURES {
                        return Err(JiraError::Unavailable(format!(
                            "страница поиска не получена {failures} раз подряд, последний раз при размере {size}: {error}"
                        )));
                    }
                    size = (size / 2).max(1);
                    answered = 0;
                    tracing::warn!(%error, page_size = size, "a search page did not come: asking again from the same place with a smaller page");
                    continue;
                }
                Err(error) => return Err(error),
            };
            let answer = server_page(&reply)?;
            failures = 0;
            answered += 1;
            let asked = answer.max_results.unwrap_or(u64::from(size)).max(1);
            let count = answer.issues.len() as u64;
            // `total` counts what is left from this page on (`startAt=0`): an empty page with a
            // `total` above zero contradicts itself, a broken answer, never the end.
            if count == 0
                && let Some(total) = answer.total.filter(|t| *t > 0)
            {
                return Err(JiraError::Unavailable(format!(
                    "ответ поиска Jira противоречит себе: issues пуст, а total = {total}"
                )));
            }
            if let Some(remaining) = answer.total {
                let hint = sent + remaining;
                total_hint = Some(total_hint.map_or(hint, |t: u64| t.max(hint)));
            }
            let first_of_project = after.is_none();
            if first_of_project {
                covered = answer.total.map(|total| (sent, total));
            }
            let mut keep: Vec<Box<RawValue>> = Vec::with_capacity(answer.issues.len());
            let mut last_number = after.as_ref().map(|(_, n)| *n);
            let mut page_keys: Vec<(String, u64)> = Vec::new();
            let mut others = 0u64;
            for (raw, head) in answer.issues.into_iter().zip(answer.heads) {
                let (issue_project, number) = split_key(&head.key).ok_or_else(|| {
                    JiraError::Unavailable(format!(
                        "поиск Jira вернул ключ {:?}, это не ключ задачи",
                        head.key
                    ))
                })?;
                if done.iter().any(|d| d == issue_project) {
                    return Err(JiraError::Unavailable(format!(
                        "поиск Jira не продвигается: {} из проекта, уже пройденного до конца",
                        head.key
                    )));
                }
                let current = project.get_or_insert_with(|| issue_project.to_string());
                if issue_project != current.as_str() {
                    if first_of_project {
                        // Another project's issue on a project's first page: its own turn comes.
                        others += 1;
                        continue;
                    }
                    return Err(JiraError::Unavailable(format!(
                        "поиск Jira после ключа {} вернул {} из другого проекта",
                        after.as_ref().map(|(k, _)| k.as_str()).unwrap_or(""),
                        head.key
                    )));
                }
                if let Some(last) = last_number.filter(|last| number <= *last) {
                    return Err(JiraError::Unavailable(format!(
                        "поиск Jira не продвигается по ключу: {} после номера {last}",
                        head.key
                    )));
                }
                last_number = Some(number);
                page_keys.push((head.key.clone(), number));
                if sent_ids.insert(head.id) {
                    keep.push(raw);
                }
            }
            let new = keep.len() as u64;
            if new > 0 {
                on_page(SearchPage {
                    issues: keep,
                    total: total_hint.map(|t| t.max(sent + new)),
                })?;
                sent += new;
            }
            if covered.is_some_and(|(before, total)| sent - before >= total) {
                break;
            }
            if count == 0 && !first_of_project {
                // `key > "P-n"` names project P alone (Jira's `IssueIdClauseQueryFactory`): an
                // empty page after it ends P, not the search. The other projects of the query
                // come next.
                if let Some(finished) = project.take() {
                    done.push(finished);
                }
                cursor.clear();
                continue;
            }
            if count == 0 || (first_of_project && count < asked && others == 0) {
                break;
            }
            if count < asked || page_keys.is_empty() {
                // The project has no more issues after this page (a short page holds the rest).
                if let Some(finished) = project.take() {
                    done.push(finished);
                }
                cursor.clear();
            } else {
                cursor = page_keys;
            }
        }
        Ok(sent)
    }

    /// Whether `key` (the last key of a page, refused in `key > "<key>"` with a 400) no longer
    /// names an issue under that key: deleted (404) or moved (Jira finds the issue by its old
    /// key and answers with its new one). Read, not guessed from the refusal's words: Jira words
    /// JQL errors in the searching account's language.
    fn key_is_gone(&mut self, key: &str) -> Result<bool, JiraError> {
        let path = format!("/rest/api/2/issue/{}?fields=project", jql::encode(key));
        match self.read_json::<Value>(&path) {
            Ok(issue) => Ok(issue.get("key").and_then(Value::as_str) != Some(key)),
            Err(JiraError::Refused { status: 404, .. }) => Ok(true),
            Err(error) => Err(error),
        }
    }

    /// Cloud: `search/jql` with `nextPageToken` until `isLast` or no token. No total.
    fn search_cloud(
        &mut self,
        query: &str,
        fields: &str,
        ask: CloudAsk<'_>,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        #[derive(Deserialize)]
        struct Answer {
            issues: Option<Vec<Box<RawValue>>>,
            #[serde(rename = "nextPageToken")]
            next_page_token: Option<String>,
            #[serde(rename = "isLast")]
            is_last: Option<bool>,
        }
        let mut sent = 0u64;
        let mut token: Option<String> = None;
        loop {
            let mut path = format!(
                "/rest/api/2/search/jql?jql={}&maxResults={page_size}&fields={}",
                jql::encode(query),
                jql::encode(fields)
            );
            if let Some(properties) = ask.properties {
                path.push_str(&format!("&properties={}", jql::encode(properties)));
            }
            // An `int64` array in the query without a `style`: OpenAPI's default, form with
            // `explode`, one `reconcileIssues=<id>` per id (Atlassian's description of
            // `search/jql`; GitLab's Jira client appends one per id).
            for id in ask.reconcile {
                path.push_str(&format!("&reconcileIssues={id}"));
            }
            if let Some(token) = &token {
                path.push_str(&format!("&nextPageToken={}", jql::encode(token)));
            }
            let reply = self.read(&path)?;
            let answer: Answer = parse(&reply)?;
            let issues = answer.issues.ok_or_else(|| no_issues(&reply))?;
            issue_heads(&issues)?;
            let count = issues.len() as u64;
            if count > 0 {
                on_page(SearchPage {
                    issues,
                    total: None,
                })?;
            }
            sent += count;
            match answer.next_page_token {
                Some(next) if answer.is_last != Some(true) && !next.is_empty() => {
                    if token.as_deref() == Some(next.as_str()) {
                        return Err(JiraError::Unavailable(
                            "the page token does not change".into(),
                        ));
                    }
                    token = Some(next);
                }
                _ => break,
            }
        }
        Ok(sent)
    }

    /// The issues of `query` newest first (`ORDER BY created DESC`), each handed to `visit` as a
    /// parsed value until it says it has what it needs (`true`). A look after a lost answer
    ///: its window starts at the write's time, so the issue looked for is on
    /// the first page, and a project's older issues are never read. Pages grow from a small
    /// first one. Server/DC pages by `startAt` (the window is small); Cloud by its page token,
    /// with `property` in each issue's `properties`. Returns whether `visit` stopped it.
    pub(crate) fn search_newest(
        &mut self,
        query: &str,
        fields: &str,
        property: Option<&str>,
        visit: &mut dyn FnMut(&mut Jira, Value) -> Result<bool, JiraError>,
    ) -> Result<bool, JiraError> {
        let ordered = format!("{query} ORDER BY created DESC");
        let cloud = self.deployment()? == Deployment::Cloud;
        let mut start_at = 0u64;
        let mut token: Option<String> = None;
        let mut size = 10u32;
        loop {
            let mut path = if cloud {
                format!(
                    "/rest/api/2/search/jql?jql={}&maxResults={size}&fields={}",
                    jql::encode(&ordered),
                    jql::encode(fields)
                )
            } else {
                format!(
                    "/rest/api/2/search?jql={}&startAt={start_at}&maxResults={size}&fields={}",
                    jql::encode(&ordered),
                    jql::encode(fields)
                )
            };
            if cloud {
                if let Some(property) = property {
                    path.push_str(&format!("&properties={}", jql::encode(property)));
                }
                if let Some(token) = &token {
                    path.push_str(&format!("&nextPageToken={}", jql::encode(token)));
                }
            }
            let reply = self.read(&path)?;
            let answer: Value = parse(&reply)?;
            let issues = answer
                .get("issues")
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| no_issues(&reply))?;
            let count = issues.len() as u64;
            for issue in issues {
                if visit(self, issue)? {
                    return Ok(true);
                }
            }
            start_at += count;
            let more = if cloud {
                match answer.get("nextPageToken").and_then(Value::as_str) {
                    Some(next)
                        if answer.get("isLast").and_then(Value::as_bool) != Some(true)
                            && !next.is_empty()
                            && token.as_deref() != Some(next) =>
                    {
                        token = Some(next.to_string());
                        true
                    }
                    _ => false,
                }
            } else {
                count > 0
                    && answer
                        .get("total")
                        .and_then(Value::as_u64)
                        .is_some_and(|total| start_at < total)
            };
            if !more {
                return Ok(false);
            }
            size = (size * 5).min(100);
        }
    }

    /// A whole small search as parsed values (duplicate checks: a handful of issues). On Cloud
    /// the entity property `property` comes with each issue (`properties`, up to 5 keys, in
    /// `search/jql`); Data Center's search never returns properties (JRASERVER-62898), so there
    /// the caller reads them one by one.
    pub(crate) fn search_values(
        &mut self,
        query: &str,
        fields: &str,
        property: Option<&str>,
    ) -> Result<Vec<Value>, JiraError> {
        let mut found = Vec::new();
        let properties = match self.deployment()? {
            Deployment::Cloud => property,
            Deployment::Server => None,
        };
        // No cap on the count: a check that stopped at 10,000 would fail the command on a
        // project with that many of the account's issues in the window; the
        // pages are paged by key (Data Center) or token (Cloud), never past a result window.
        self.search_with(query, fields, properties, &[], 100, &mut |page| {
            for raw in page.issues {
                found.push(serde_json::from_str(raw.get()).unwrap_or(Value::Null));
            }
            Ok(())
        })?;
        Ok(found)
    }
}

/// What a Cloud search asks beside the query: issue properties, and issues to reconcile.
struct CloudAsk<'a> {
    properties: Option<&'a str>,
    reconcile: &'a [u64],
}

/// What the agent relies on in an issue of a search result.
#[derive(Debug)]
pub(crate) struct IssueHead {
    pub id: u64,
    pub key: String,
}

/// Checks one raw issue of a search page: an object with a numeric `id` (a string of digits or
/// a number), a non-empty `key` and a `fields` object.
pub(crate) fn issue_head(raw: &str) -> Result<IssueHead, String> {
    #[derive(Deserialize)]
    struct Head<'a> {
        id: Option<Value>,
        #[serde(borrow)]
        key: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        fields: Option<&'a RawValue>,
    }
    let head: Head<'_> =
        serde_json::from_str(raw).map_err(|e| format!("задача — не объект JSON ({e})"))?;
    let id = match &head.id {
        Some(Value::String(s)) => s.parse().ok(),
        Some(Value::Number(n)) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| "у задачи нет числового id".to_string())?;
    let key = head
        .key
        .filter(|k| !k.is_empty())
        .ok_or_else(|| format!("у задачи {id} нет key"))?
        .into_owned();
    if !head.fields.is_some_and(|f| f.get().starts_with('{')) {
        return Err(format!("у задачи {key} нет объекта fields"));
    }
    Ok(IssueHead { id, key })
}

/// A Server/DC search answer, checked: `issues` an array of issues (each with `id`, `key`,
/// `fields`), `startAt`/`maxResults`/`total` numbers when present.
pub(super) struct ServerPage {
    pub(super) max_results: Option<u64>,
    pub(super) total: Option<u64>,
    pub(super) issues: Vec<Box<RawValue>>,
    pub(super) heads: Vec<IssueHead>,
}

pub(super) fn server_page(reply: &Reply) -> Result<ServerPage, JiraError> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "startAt")]
        _start_at: Option<u64>,
        #[serde(rename = "maxResults")]
        max_results: Option<u64>,
        total: Option<u64>,
        issues: Option<Vec<Box<RawValue>>>,
    }
    let answer: Answer = parse(reply)?;
    let issues = answer.issues.ok_or_else(|| no_issues(reply))?;
    let heads = issue_heads(&issues)?;
    Ok(ServerPage {
        max_results: answer.max_results,
        total: answer.total,
        issues,
        heads,
    })
}

pub(super) fn no_issues(reply: &Reply) -> JiraError {
    JiraError::Unavailable(format!(
        "HTTP {}: в ответе поиска Jira нет массива issues: {}",
        reply.status,
        body_excerpt(&reply.body)
    ))
}

/// The checked heads of a page's issues, or an error naming the first issue that is not one.
fn issue_heads(issues: &[Box<RawValue>]) -> Result<Vec<IssueHead>, JiraError> {
    issues
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            issue_head(raw.get()).map_err(|e| {
                JiraError::Unavailable(format!("ответ поиска Jira, задача {}: {e}", i + 1))
            })
        })
        .collect()
}

/// `P-12` → `("P", 12)`.
fn split_key(key: &str) -> Option<(&str, u64)> {
    let (project, number) = key.rsplit_once('-')?;
    if project.is_empty() {
        return None;
    }
    Some((project, number.parse().ok()?))
}

/// A page that did not come for want of time or room: no answer, a 5xx, or 413.
fn is_page_failure(error: &JiraError, failure: Option<ReadFailure>) -> bool {
    match error {
        JiraError::Refused { status: 413, .. } => true,
        // A search sent and never answered (after the read's own retries) is a page too slow to
        // make, not yet a Jira that cannot be reached.
        JiraError::Ambiguous(_) => matches!(
            failure,
            Some(ReadFailure::NoAnswer | ReadFailure::ServerError(_))
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::commands::{Executor, MARKER_KEY, Outcome};
    use crate::protocol::ClaimedCommand;
    use serde_json::json;

    use serde_json::Value;

    use crate::agent::testkit::*;
    use std::time::Duration;

    #[test]
    fn issues_of_a_page_are_checked() {
        let head = |text: &str| issue_head(text);
        let ok = head(r#"{"id": "10014", "key": "A-1", "fields": {}}"#).unwrap();
        assert_eq!((ok.id, ok.key.as_str()), (10014, "A-1"));
        assert_eq!(
            head(r#"{"id": 7, "key": "A-2", "fields": {"a": 1}}"#)
                .unwrap()
                .id,
            7
        );
        assert!(
            head(r#"{"key": "A-1", "fields": {}}"#)
                .unwrap_err()
                .contains("id")
        );
        assert!(head(r#"{"id": "x1", "key": "A-1", "fields": {}}"#).is_err());
        assert!(
            head(r#"{"id": "1", "fields": {}}"#)
                .unwrap_err()
                .contains("key")
        );
        assert!(
            head(r#"{"id": "1", "key": "A-1"}"#)
                .unwrap_err()
                .contains("fields")
        );
        assert!(head(r#"{"id": "1", "key": "A-1", "fields": []}"#).is_err());
        assert!(head("[1]").is_err());
        assert_eq!(split_key("AURORA-12"), Some(("AURORA", 12)));
        assert_eq!(split_key("A-B-3"), Some(("A-B", 3)));
        assert_eq!(split_key("-3"), None);
        assert_eq!(split_key("A-x"), None);
    }

    /// A key refused in `key > "<key>"` is judged gone by reading it, not by the
    /// refusal's words: a Russian-speaking account's 400 for a deleted key is recovered from
    /// (the page is asked again after the key before), and a 400 for a key that is still there
    /// fails the refresh with Jira's words.
    #[test]
    fn a_stale_key_is_recovered_from_whatever_the_language_of_jiras_error() {
        fn issue(key: &str, id: u64) -> Value {
            json!({"id": id.to_string(), "key": key, "fields": {"summary": key}})
        }
        fn page(issues: Vec<Value>, size: usize, total: usize) -> (u16, Value) {
            (
                200,
                json!({"startAt": 0, "maxResults": size, "total": total, "issues": issues}),
            )
        }
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/serverInfo", _) => data_center_9(),
                ("GET", "/rest/api/2/search", 1) => {
                    page(vec![issue("AURORA-1", 1), issue("AURORA-2", 2)], 2, 3)
                }
                ("GET", "/rest/api/2/search", 2) => (
                    400,
                    json!({"errorMessages": ["Задача с ключом 'AURORA-2' не существует для поля 'key'."], "errors": {}}),
                ),
                ("GET", "/rest/api/2/search", 3) => page(vec![issue("AURORA-3", 3)], 2, 1),
                ("GET", "/rest/api/2/search", _) => page(vec![], 2, 0),
                ("GET", "/rest/api/2/issue/AURORA-2", _) => (
                    404,
                    json!({"errorMessages": ["Задача не существует, или у вас нет прав на её просмотр."]}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let settings = aurora_settings();
        let sleep = |_: Duration| true;
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 2,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: None,
            sleep: &sleep,
        };
        let refresh: ClaimedCommand = serde_json::from_value(json!({"id": 9, "batch_id": 3,
            "seq": 1, "type": "refresh", "params": {"jql": "project = AURORA"}, "delivery": 1}))
        .unwrap();
        let mut keys = Vec::new();
        let outcome = executor.execute(&refresh, &mut |page| {
            for raw in page.issues {
                let value: Value = serde_json::from_str(raw.get()).unwrap();
                keys.push(value["key"].as_str().unwrap().to_string());
            }
            Ok(())
        });
        assert_eq!(
            outcome,
            Outcome::Done(json!({"total": 3, "boards": []})),
            "{keys:?}"
        );
        assert_eq!(keys, ["AURORA-1", "AURORA-2", "AURORA-3"]);

        // A refused key that still names its issue: Jira's words fail the refresh.
        fn still_there(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/issue/AURORA-2", _) => (
                    200,
                    json!({"id": "2", "key": "AURORA-2", "fields": {"project": {"key": "AURORA"}}}),
                ),
                _ => answer(method, path, nth),
            }
        }
        let jira_server = canned(still_there);
        let mut jira = jira_at(&jira_server.url);
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 2,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: None,
            sleep: &sleep,
        };
        match executor.execute(&refresh, &mut |_| Ok(())) {
            Outcome::Failed(error) => assert!(error.contains("Задача с ключом"), "{error}"),
            other => panic!("{other:?}"),
        }
    }

    /// A duplicate check's search has no 10,000 cap: 10,100 issues of the
    /// account in the window come back whole.
    #[test]
    fn search_values_has_no_ten_thousand_cap() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (200, json!({"deploymentType": "Cloud"})),
                ("GET", "/rest/api/2/search/jql") => {
                    let issues: Vec<Value> = (0..100)
                        .map(|i| {
                            let n = (nth - 1) * 100 + i + 1;
                            json!({"id": n.to_string(), "key": format!("A-{n}"), "fields": {}})
                        })
                        .collect();
                    let last = nth == 101;
                    let mut page = json!({"issues": issues, "isLast": last});
                    if !last {
                        page["nextPageToken"] = json!(format!("t{nth}"));
                    }
                    (200, page)
                }
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let found = jira
            .search_values("project = A", "summary", Some(MARKER_KEY))
            .unwrap();
        assert_eq!(found.len(), 10_100);
    }

    /// A page size halved after a page that did not come grows back once
    /// pages come again (two in a row), up to the size asked.
    #[test]
    fn a_halved_page_size_grows_back() {
        fn issue(n: usize) -> Value {
            json!({"id": n.to_string(), "key": format!("AURORA-{n}"), "fields": {}})
        }
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/serverInfo", _) => data_center_9(),
                ("GET", "/rest/api/2/search", 1) => {
                    (502, json!({"errorMessages": ["Bad Gateway"]}))
                }
                ("GET", "/rest/api/2/search", n) => {
                    // Pages of the size asked, by call: 2, 2, then 4, 4, then the rest.
                    let (first, size) = match n {
                        2 => (1, 2),
                        3 => (3, 2),
                        4 => (5, 4),
                        5 => (9, 4),
                        _ => (13, 1),
                    };
                    let issues: Vec<Value> = (first..first + size).map(issue).collect();
                    (
                        200,
                        json!({"startAt": 0, "maxResults": if n >= 4 { 4 } else { 2 },
                               "total": 14 - first, "issues": issues}),
                    )
                }
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let mut got = 0u64;
        let total = jira
            .search("project = AURORA", "*all", 4, &[], &mut |page| {
                got += page.issues.len() as u64;
                Ok(())
            })
            .unwrap();
        assert_eq!((total, got), (13, 13));
        let sizes: Vec<String> = jira_server
            .queries
            .lock()
            .unwrap()
            .iter()
            .filter(|q| q.starts_with("jql="))
            .filter_map(|q| q.split('&').find(|p| p.starts_with("maxResults=")))
            .map(String::from)
            .collect();
        assert_eq!(
            sizes,
            [4, 2, 2, 4, 4, 4].map(|n| format!("maxResults={n}")),
            "halved once, then back to the size asked"
        );
    }

    /// `serverInfo` of a Data Center 9.12 that says nothing about its clock.
    fn data_center_9() -> (u16, Value) {
        (
            200,
            json!({"deploymentType": "Server", "versionNumbers": [9, 12, 0]}),
        )
    }

    /// A Data Center page that brings the whole `total` of the first page ends
    /// the search; no empty page is asked to learn it (before: two more, `key > "P-n"` and
    /// `project not in (P)`).
    #[test]
    fn no_empty_page_after_the_count_is_reached() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/serverInfo", _) => data_center_9(),
                ("GET", "/rest/api/2/search", 1) => (
                    200,
                    json!({"startAt": 0, "maxResults": 2, "total": 2, "issues": [
                        {"id": "1", "key": "AURORA-1", "fields": {}},
                        {"id": "2", "key": "AURORA-2", "fields": {}}]}),
                ),
                ("GET", "/rest/api/2/search", _) => (
                    200,
                    json!({"startAt": 0, "maxResults": 2, "total": 0, "issues": []}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let total = jira
            .search("project = AURORA", "*all", 2, &[], &mut |_| Ok(()))
            .unwrap();
        assert_eq!(total, 2);
        let seen = jira_server.seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter()
                .filter(|l| *l == "GET /rest/api/2/search")
                .count(),
            1,
            "{seen:?}"
        );
    }
}
