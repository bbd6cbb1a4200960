//! Comments and entity properties: the newest comments of an issue, their markers, the
//! properties read once and kept.

use super::{CommentVisit, Jira, JiraError, parse};
use crate::agent::jql;
use serde_json::Value;

/// A page of an issue's comments in a look (`maxResults`: Cloud's documented default; Data
/// Center's is 50, and it may answer fewer: the paging follows what comes).
const COMMENT_PAGE: u64 = 100;
/// The most comment ids one `POST /comment/list` takes ("A maximum of 1000 IDs can be
/// specified").
const MAX_COMMENT_IDS: usize = 1000;

impl Jira {
    /// An entity property's value as read before in this command's delivery
    /// (a look that runs again reads no marker twice); `None` when not read yet.
    pub(crate) fn cached_property(&self, path: &str) -> Option<Option<Value>> {
        self.properties.get(path).cloned()
    }

    /// Keeps an entity property's value read (`None`: not set) for the rest of the delivery.
    pub(crate) fn cache_property(&mut self, path: &str, value: Option<Value>) {
        self.properties.insert(path.to_string(), value);
    }

    /// A read whose question is a JSON body (`POST`), parsed.
    pub(crate) fn read_posted<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
        body: &Value,
    ) -> Result<T, JiraError> {
        let bytes = serde_json::to_vec(body).map_err(|e| JiraError::Unavailable(e.to_string()))?;
        let reply = self.read_by("POST", path, Some(&bytes), self.max_retries, true)?;
        parse(&reply)
    }

    /// The comments of an issue (`path`: `/rest/api/2/issue/{key}/comment`) created at or after
    /// `since_ms` on Jira's clock, newest first, a page at a time (at most
    /// [`COMMENT_PAGE`]) handed to `visit` until it says it found what it looks for (`true`) or
    /// the window is passed: the first comment older than `since_ms` ends the look. Newest first is `orderBy=-created`, documented on both deployments (Cloud: "Accepts
    /// *created* to sort comments by their created date", `-created` in its enum; Data Center's
    /// `getComments`: "Results can be ordered by the "created" field", `orderBy` "ordering of the
    /// results", REST reference 8.x and 9.x). A first page that comes oldest first (a server that
    /// ignored the parameter) is never taken for newest first: then every page is read, and the
    /// list is looked at from its end. A comment whose `created` cannot be read is in the window.
    pub(crate) fn comments_newest(
        &mut self,
        path: &str,
        since_ms: i64,
        visit: &mut CommentVisit<'_>,
    ) -> Result<bool, JiraError> {
        let created_ms = |comment: &Value| {
            comment["created"]
                .as_str()
                .and_then(jira_time)
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        };
        // The comments of a page within the window, and whether the window ends on it.
        let window = |comments: Vec<Value>| -> (Vec<Value>, bool) {
            let mut inside = Vec::new();
            for comment in comments {
                if created_ms(&comment).is_some_and(|at| at < since_ms) {
                    return (inside, true);
                }
                inside.push(comment);
            }
            (inside, false)
        };
        let mut start_at = 0u64;
        // `Some`: the server gave the oldest first; every comment, in its order.
        let mut oldest_first: Option<Vec<Value>> = None;
        loop {
            let page: Value = self.read_json(&format!(
                "{path}?startAt={start_at}&maxResults={COMMENT_PAGE}&orderBy=-created"
            ))?;
            let comments = page["comments"].as_array().cloned().unwrap_or_default();
            let count = comments.len() as u64;
            if start_at == 0 && oldest_first.is_none() && ascending(&comments, &created_ms) {
                tracing::info!(%path, "Jira gave the comments oldest first (orderBy not applied): all are read, then looked at from the last");
                oldest_first = Some(Vec::new());
            }
            match &mut oldest_first {
                Some(all) => all.extend(comments),
                None => {
                    let (inside, passed) = window(comments);
                    if !inside.is_empty() && visit(self, inside)? {
                        return Ok(true);
                    }
                    if passed {
                        return Ok(false);
                    }
                }
            }
            start_at += count;
            let last = match page["total"].as_u64() {
                Some(total) => start_at >= total,
                None => count < COMMENT_PAGE,
            };
            if count == 0 || last {
                break;
            }
        }
        let Some(mut all) = oldest_first else {
            return Ok(false);
        };
        all.reverse();
        let (inside, _) = window(all);
        let mut rest = inside.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Value> = rest.by_ref().take(COMMENT_PAGE as usize).collect();
            if visit(self, chunk)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The entity property `key` of each comment of `ids`, as Cloud's `POST
    /// /rest/api/2/comment/list?expand=properties` gives them ("Get comments by IDs": "A maximum of
    /// 1000 IDs can be specified"; `expand=properties` "Returns the comment's properties"): one
    /// call per [`MAX_COMMENT_IDS`] ids not read yet in this delivery (the values found are kept,
    /// as [`Jira::cache_property`] keeps them). A comment the answer leaves out (deleted, or not
    /// visible to the agent) has none. The operation takes no `startAt`: an answer that says it is
    /// not the last page is asked again for the ids it left out, while it gives some.
    pub(crate) fn comment_markers(
        &mut self,
        ids: &[String],
        key: &str,
    ) -> Result<std::collections::HashMap<String, Option<Value>>, JiraError> {
        let path_of =
            |id: &str| format!("/rest/api/2/comment/{}/properties/{key}", jql::encode(id));
        let mut markers = std::collections::HashMap::new();
        let mut ask = Vec::new();
        for id in ids {
            match self.cached_property(&path_of(id)) {
                Some(known) => {
                    markers.insert(id.clone(), known);
                }
                None => match id.parse::<u64>() {
                    Ok(number) => ask.push(number),
                    Err(_) => {
                        markers.insert(id.clone(), None);
                    }
                },
            }
        }
        for chunk in ask.chunks(MAX_COMMENT_IDS) {
            let mut left: Vec<u64> = chunk.to_vec();
            while !left.is_empty() {
                let page: Value = self.read_posted(
                    "/rest/api/2/comment/list?expand=properties",
                    &serde_json::json!({ "ids": left }),
                )?;
                let mut came = 0;
                for comment in page["values"].as_array().into_iter().flatten() {
                    let id = match &comment["id"] {
                        Value::String(id) => id.clone(),
                        Value::Number(id) => id.to_string(),
                        _ => continue,
                    };
                    let value = comment["properties"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|p| p["key"].as_str() == Some(key))
                        .map(|p| p.get("value").cloned().unwrap_or(Value::Null));
                    if value.is_some() {
                        self.cache_property(&path_of(&id), value.clone());
                    }
                    if let Ok(number) = id.parse::<u64>()
                        && left.contains(&number)
                    {
                        left.retain(|known| *known != number);
                        came += 1;
                    }
                    markers.insert(id, value);
                }
                if came == 0 || page["isLast"].as_bool() != Some(false) {
                    break;
                }
            }
        }
        for id in ids {
            markers.entry(id.clone()).or_insert(None);
        }
        Ok(markers)
    }
}

/// Jira's time (`2026-03-05T10:15:30.000+0300`, or with a colon in the offset, or RFC 3339).
pub(crate) fn jira_time(text: &str) -> Option<time::OffsetDateTime> {
    use time::macros::format_description;
    let formats = [
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory][offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory]:[offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory][offset_minute]"
        ),
    ];
    formats
        .iter()
        .find_map(|format| time::OffsetDateTime::parse(text, format).ok())
        .or_else(|| crate::domain::time::parse_utc(text))
}

/// Whether a page of comments came oldest first: its first comment is older than its last (by
/// `created`, else by id, which Jira hands out in order).
fn ascending(comments: &[Value], created_ms: &dyn Fn(&Value) -> Option<i64>) -> bool {
    let (Some(first), Some(last)) = (comments.first(), comments.last()) else {
        return false;
    };
    let id = |c: &Value| match &c["id"] {
        Value::String(id) => id.parse::<u64>().ok(),
        other => other.as_u64(),
    };
    match (created_ms(first), created_ms(last)) {
        (Some(a), Some(b)) if a != b => a < b,
        _ => matches!((id(first), id(last)), (Some(a), Some(b)) if a < b),
    }
}
