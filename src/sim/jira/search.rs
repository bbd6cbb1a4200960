//! Search: Data Center's `search` (`startAt`, `total`, the 10,000-row window) and Cloud's
//! `search/jql` (page tokens, lag), the relational key clauses resolved against the state, and
//! changes made by others while the agent pages.

use super::*;
use axum::http::Method;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) const WINDOW: usize = 10_000;

/// A change to Jira made by someone else while the agent pages.
#[derive(Debug, Clone)]
pub enum Change {
    Delete(String),
    Move(String, String),
}

/// What a reverse proxy answers when Jira takes longer than its read timeout (nginx's
/// `proxy_read_timeout`, 60 s by default: "504 Gateway Time-out", an HTML page).
pub(super) fn gateway_timeout() -> Reply {
    Reply {
        status: 504,
        headers: Vec::new(),
        body: Body::Html(
            "<html><head><title>504 Gateway Time-out</title></head><body><center><h1>504 Gateway Time-out</h1></center><hr><center>nginx</center></body></html>"
                .to_string(),
        ),
    }
}

/// The number of an issue key (`AURORA-12` → 12).
pub(super) fn key_number(key: &str) -> u64 {
    key.rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

impl StateInner {
    pub(super) fn search_params(request: &Request) -> Result<Vec<(String, String)>, Reply> {
        if request.method != Method::POST {
            return Ok(request.query.clone());
        }
        let body = Self::body_json(request)?;
        let mut params = Vec::new();
        if let Some(object) = body.as_object() {
            for (name, value) in object {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Array(items) => items
                        .iter()
                        .map(|i| {
                            i.as_str()
                                .map(String::from)
                                .unwrap_or_else(|| i.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                params.push((name.clone(), text));
            }
        }
        Ok(params)
    }

    /// Whether the node serving this request shows issue `id` in its search (see `Cluster`):
    /// always outside a cluster, on the node that created it, and on the others once the
    /// cluster's lag has passed.
    fn indexed_here(&self, id: u64) -> bool {
        let Some(cluster) = &self.cluster else {
            return true;
        };
        match cluster.created.get(&id) {
            None => true,
            Some((node, at)) => {
                *node == self.node || (cluster.now)().saturating_sub(*at) >= cluster.lag
            }
        }
    }

    /// The ids of the issues `query` finds. `lag`: Cloud's search, which does not show an issue
    /// created less than `search_lag` ago, and matches an issue changed less than `search_lag`
    /// ago by the `updated` it had before (so an incremental `updated >=` misses the change),
    /// unless its id is among `reconcileIssues` (the ids given, read with strong consistency).
    /// Atlassian's "Search and reconcile" (developer.atlassian.com/cloud/jira/platform/
    /// search-and-reconcile/): "after a write operation is performed, subsequent search
    /// operations using the API without the reconcileIssues parameter may return stale or
    /// outdated data … The delay might vary from a few seconds to minutes, depending on the
    /// operation"; JRACLOUD-96208: read-after-write only "for up to 50 issues using the
    /// reconcileIssues param". The fake's index keeps only the older `updated`: the issue's
    /// fields are shown as they are now.
    pub(super) fn matching(&self, query: &Query, lag: Option<&[u64]>) -> Result<Vec<u64>, Reply> {
        // Every project a clause names must exist (`project = X`, `project in (X, Y)`).
        let named = query.clauses.iter().flat_map(|clause| match clause {
            Clause::Project(key) => std::slice::from_ref(key),
            Clause::ProjectIn(keys) => keys.as_slice(),
            _ => &[],
        });
        for key in named {
            if !self.projects.contains_key(key) {
                return Err(Reply::error(
                    400,
                    &self.words(
                        format!("The value '{key}' does not exist for the field 'project'."),
                        format!("Значение '{key}' не существует для поля 'project'."),
                    ),
                ));
            }
        }
        let ranges = self.key_ranges(query)?;
        let now = Instant::now();
        let mut ids: Vec<u64> = self
            .issues
            .values()
            .filter(|issue| {
                let reconciled = lag.is_none_or(|reconciled| reconciled.contains(&issue.id));
                query.clauses.iter().all(|c| match c {
                    Clause::UpdatedSince(ms) if !reconciled => {
                        issue.indexed_updated_ms(self.search_lag) >= *ms
                    }
                    _ => c.matches(issue),
                })
            })
            .filter(|issue| {
                ranges.iter().all(|(project, operator, number)| {
                    let n = key_number(&issue.key);
                    issue.project == *project
                        && match operator.as_str() {
                            ">" => n > *number,
                            ">=" => n >= *number,
                            "<" => n < *number,
                            _ => n <= *number,
                        }
                })
            })
            .filter(|issue| self.indexed_here(issue.id))
            .filter(|issue| {
                lag.is_none_or(|reconciled| {
                    reconciled.contains(&issue.id)
                        || issue
                            .created_at
                            .is_none_or(|at| now.duration_since(at) >= self.search_lag)
                })
            })
            .map(|issue| issue.id)
            .collect();
        if query.by_key {
            ids.sort_by_cached_key(|id| {
                let issue = &self.issues[id];
                (issue.project.clone(), key_number(&issue.key))
            });
        }
        if query.newest_first {
            ids.sort_by_key(|id| std::cmp::Reverse((self.issues[id].created_ms, *id)));
        }
        Ok(ids)
    }

    pub(super) fn change(&mut self, change: Change) {
        match change {
            Change::Delete(key) => {
                if let Some(id) = self.by_key.remove(&key) {
                    self.issues.remove(&id);
                }
            }
            Change::Move(key, project) => {
                let Some(id) = self.by_key.remove(&key) else {
                    return;
                };
                let number = self.projects.entry(project.clone()).or_insert(1);
                let new_key = format!("{project}-{number}");
                *number += 1;
                let issue = self.issues.get_mut(&id).expect("issue");
                issue.key = new_key.clone();
                issue.project = project.clone();
                issue
                    .fields
                    .insert("project".into(), json!({"key": project, "id": "10101"}));
                self.by_key.insert(new_key, id);
                self.moved_keys.insert(key, id);
            }
        }
    }

    /// The relational issue-key clauses of `query`, resolved as Jira resolves them: the literal
    /// names one issue (by id when it is a number, else by key), and the clause becomes "that
    /// issue's project, key number compared" (`IssueIdClauseQueryFactory.handleRelational`,
    /// Jira Server source). The validator refuses a literal that names no issue
    /// (`IssueIdValidator`: "An issue with key 'X' does not exist for field 'key'." — the text
    /// jira-resilient's `_STALE_KEY_PATTERNS` records from a production Jira Server, 2026-05-20;
    /// an id: `jira.jql.clause.no.value.for.id`), and a relational operator on the old key of a
    /// moved issue ("Operator '>=' cannot be applied to moved issue key 'ALC-1'.", Jira's own
    /// webdriver test of moved issues, `MovedIssueKeyStore` since 6.1).
    pub(super) fn key_ranges(&self, query: &Query) -> Result<Vec<(String, String, u64)>, Reply> {
        let mut ranges = Vec::new();
        for clause in &query.clauses {
            let Clause::KeyCompare {
                field,
                operator,
                literal,
                numeric,
            } = clause
            else {
                continue;
            };
            let id = if *numeric {
                let id: u64 = literal.parse().unwrap_or(u64::MAX);
                if !self.issues.contains_key(&id) {
                    return Err(Reply::error(
                        400,
                        &self.words(
                            format!(
                                "A value with ID '{literal}' does not exist for the field '{field}'."
                            ),
                            format!("Значение с ID '{literal}' не существует для поля '{field}'."),
                        ),
                    ));
                }
                id
            } else if let Some(id) = self.by_key.get(literal) {
                *id
            } else if self.moved_keys.contains_key(literal) {
                return Err(Reply::error(
                    400,
                    &self.words(
                        format!(
                            "Operator '{operator}' cannot be applied to moved issue key '{literal}'."
                        ),
                        format!(
                            "Оператор '{operator}' нельзя применить к ключу перемещённой задачи '{literal}'."
                        ),
                    ),
                ));
            } else {
                return Err(Reply::error(
                    400,
                    &self.words(
                        format!(
                            "An issue with key '{literal}' does not exist for field '{field}'."
                        ),
                        format!("Задача с ключом '{literal}' не существует для поля '{field}'."),
                    ),
                ));
            };
            let issue = &self.issues[&id];
            ranges.push((
                issue.project.clone(),
                operator.clone(),
                key_number(&issue.key),
            ));
        }
        Ok(ranges)
    }

    pub(super) fn search_dc(&mut self, request: &Request) -> Result<Reply, Reply> {
        if self.mode == Mode::Cloud {
            return Err(Reply::error(
                410,
                "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046",
            ));
        }
        let params = Self::search_params(request)?;
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let query = parse_jql(get("jql").unwrap_or(""))?;
        let start_at: usize = number_param(get("startAt"), 0, "startAt")?;
        let asked: usize = number_param(get("maxResults"), 50, "maxResults")?;
        let max = asked.min(self.max_results);
        if start_at + max > WINDOW {
            return Err(Reply::error(
                400,
                &format!(
                    "Search limit exceeded: startAt + maxResults must not exceed {WINDOW} (jira.search.platform.max.result.window); narrow the query instead of paging deeper."
                ),
            ));
        }
        let filter = FieldFilter::parse(get("fields"), FieldFilter::Except(HashSet::new()));
        let ids = self.matching(&query, None)?;
        let issues: Vec<Value> = ids
            .iter()
            .skip(start_at)
            .take(max)
            .map(|id| self.render(&self.issues[id], &filter))
            .collect();
        let body = json!({"expand": "schema,names", "startAt": start_at, "maxResults": max,
                          "total": ids.len(), "issues": issues});
        if let Some(limit) = self.search_byte_limit
            && body.to_string().len() > limit
        {
            return Err(gateway_timeout());
        }
        self.searches_served += 1;
        let served = self.searches_served;
        let due: Vec<Change> = self
            .scheduled
            .iter()
            .filter(|(n, _)| *n == served)
            .map(|(_, c)| c.clone())
            .collect();
        for change in due {
            self.change(change);
        }
        Ok(Reply::json(200, body))
    }

    pub(super) fn search_cloud(&mut self, request: &Request) -> Result<Reply, Reply> {
        if self.mode == Mode::DataCenter {
            return Err(Reply::error(
                404,
                &format!("null for uri: {}/rest/api/2/search/jql", self.base),
            ));
        }
        let params = Self::search_params(request)?;
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let jql = get("jql").unwrap_or("").to_string();
        let query = parse_jql(&jql)?;
        if query.clauses.is_empty() {
            return Err(Reply::error(
                400,
                "Unbounded JQL queries are not allowed here. Please add a search restriction to your query.",
            ));
        }
        let asked: usize = number_param(get("maxResults"), 50, "maxResults")?;
        if asked == 0 || asked > 5000 {
            return Err(Reply::error(
                400,
                "The max results parameter has to be between 1 and 5,000.",
            ));
        }
        let after = match get("nextPageToken").filter(|t| !t.is_empty()) {
            None => None,
            Some(token) => match self.tokens.get(token) {
                Some((token_jql, last)) if *token_jql == jql => Some(*last),
                _ => {
                    return Err(Reply::error(
                        400,
                        "The provided next page token is invalid or expired.",
                    ));
                }
            },
        };
        let max = asked.min(self.max_results);
        let filter = FieldFilter::parse(get("fields"), FieldFilter::IdOnly);
        let properties: Vec<String> = get("properties")
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(String::from)
            .collect();
        if properties.len() > 5 {
            // "up to 5"; the reference gives no text for more (this one is ours).
            return Err(Reply::error(
                400,
                "At most 5 issue properties can be requested in 'properties'.",
            ));
        }
        // `reconcileIssues`: "Strong consistency issue ids to be reconciled with search results.
        // Accepts max 50 ids" (Atlassian's description of `GET /rest/api/3/search/jql`;
        // developer.atlassian.com/cloud/jira/platform/search-and-reconcile/). The answer to more
        // than 50 is not documented; this 400 is ours. The description declares an `int64` array
        // in the query without a `style`, so OpenAPI's default: form, exploded, one
        // `reconcileIssues=<id>` per id (platform.v3.json, `GET /rest/api/3/search/jql`); a value
        // that is not one integer ("1,2") is not an `int64` and is refused (the text is ours).
        let reconciled: Vec<u64> = params
            .iter()
            .filter(|(k, _)| k == "reconcileIssues")
            .map(|(_, id)| {
                id.trim()
                    .parse()
                    .map_err(|_| Reply::error(400, &format!("'{id}' is not a valid issue id.")))
            })
            .collect::<Result<_, _>>()?;
        if reconciled.len() > 50 {
            return Err(Reply::error(
                400,
                "At most 50 issue ids can be given in 'reconcileIssues'.",
            ));
        }
        let ids = self.matching(&query, Some(&reconciled))?;
        let rest: Vec<u64> = ids
            .into_iter()
            .filter(|id| after.is_none_or(|last| *id > last))
            .collect();
        let page = &rest[..rest.len().min(max)];
        let issues: Vec<Value> = page
            .iter()
            .map(|id| {
                let mut issue = self.render(&self.issues[id], &filter);
                if !properties.is_empty() {
                    issue["properties"] = self.searched_properties(*id, &properties);
                }
                issue
            })
            .collect();
        let is_last = page.len() == rest.len();
        let mut body = json!({"issues": issues, "isLast": is_last});
        if !is_last && let Some(last) = page.last() {
            let token = format!(
                "CgwI{:016x}EAAYAQ{:08x}",
                self.next_token.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                self.next_token
            );
            self.next_token += 1;
            self.tokens.insert(token.clone(), (jql, *last));
            body["nextPageToken"] = token.into();
        }
        Ok(Reply::json(200, body))
    }
}

impl FakeJira {
    /// Jira's page size cap: it returns at most this many issues whatever `maxResults` asks.
    pub fn set_max_results(&self, max: usize) {
        lock(&self.state).max_results = max;
    }

    /// Cloud: an issue created less than `lag` ago does not show in search.
    pub fn set_search_lag(&self, lag: Duration) {
        lock(&self.state).search_lag = lag;
    }

    /// Data Center: the fake is a cluster of `nodes` nodes whose search shows another node's new
    /// issue `lag` after its creation, measured on `now` (see `Cluster`); successive requests
    /// reach successive nodes, and every answer carries `X-ANODEID`.
    pub fn set_cluster(
        &self,
        nodes: usize,
        lag: Duration,
        now: Arc<dyn Fn() -> Duration + Send + Sync>,
    ) {
        lock(&self.state).cluster = Some(Cluster {
            nodes: nodes.max(1),
            lag,
            now,
            next: 0,
            created: HashMap::new(),
        });
    }

    /// A search answer larger than `bytes` takes longer than the proxy in front of Jira waits:
    /// it is answered 504 by the proxy (see `gateway_timeout`). `None`: no limit.
    pub fn set_search_byte_limit(&self, bytes: Option<usize>) {
        lock(&self.state).search_byte_limit = bytes;
    }

    /// `change` happens right after the `n`-th Server search has been answered (1-based).
    pub fn after_search(&self, n: usize, change: Change) {
        lock(&self.state).scheduled.push((n, change));
    }
}
