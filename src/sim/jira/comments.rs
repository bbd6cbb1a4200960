//! Comments and entity properties: comment bodies as each deployment keeps them, issue and
//! comment properties (on create and by their own endpoints).

use super::*;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// A REST v2 body as Jira Cloud gives it back: stored as ADF (paragraphs, hard breaks), then
/// converted to wiki markup again. Line endings become `\n`, whitespace at the end of a line
/// goes (cronn/jira-sync#15: "Cloud Jira started to remove trailing whitespace at line ends"),
/// blank lines between paragraphs become one, and the body loses leading and trailing blank
/// lines (an ADF document is a list of paragraph nodes: developer.atlassian.com/cloud/jira/
/// platform/apis/document/structure/).
pub(super) fn through_adf(body: &str) -> String {
    let unified = body.replace("\r\n", "\n").replace('\r', "\n");
    let paragraphs: Vec<String> = unified
        .split("\n\n")
        .map(|p| {
            p.split('\n')
                .map(str::trim_end)
                .collect::<Vec<_>>()
                .join("\n")
                .trim_matches('\n')
                .to_string()
        })
        .filter(|p| !p.trim().is_empty())
        .collect();
    paragraphs.join("\n\n")
}

/// The rest of Cloud's wiki → ADF → wiki round trip (with [`FakeJira::set_markup_round_trip`]):
/// the body comes back as Jira's ADF-to-wiki writer spells it, which changes more than
/// whitespace (docs/jira-field-notes.md, "Comment bodies change on Cloud … escaping of `* _ {
/// [`, links, lists and mentions"):
/// - a `-` bullet list comes back as `*` (ADF has one `bulletList`; wiki markup writes it `*`);
/// - a mention `[~name]` of the agent's user comes back as `[~accountid:…]` (Cloud mentions name
///   the account id since the privacy changes: "Deprecation notice and migration guide for
///   major changes to Jira Cloud REST APIs to improve user privacy");
/// - a bare URL comes back as a link `[url|url]` (the text carries a `link` mark);
/// - characters the wiki writer would read as markup are escaped: every `{`, a `[` that opens
///   no link or mention, and a `*` or `_` inside a word or standing alone.
///
/// The exact spelling of Cloud's writer is not published; this is an approximation of the kinds
/// of change recorded, so that a client comparing bodies fails here as it would there.
pub(super) fn markup_through_adf(body: &str) -> String {
    body.split('\n')
        .map(|line| {
            let line = match line.strip_prefix("- ") {
                Some(item) => format!("* {item}"),
                None => line.to_string(),
            };
            escape_line(&line)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn escape_line(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    // A leading list marker is markup, not text.
    if line.starts_with("* ") {
        out.push_str("* ");
        i = 2;
    }
    while i < chars.len() {
        let c = chars[i];
        let rest: String = chars[i..].iter().collect();
        if c == '[' {
            if let Some(end) = rest.find(']') {
                let inner = &rest[1..end];
                if let Some(name) = inner.strip_prefix('~') {
                    let who = if name == USER {
                        format!("accountid:{ACCOUNT_ID}")
                    } else {
                        name.to_string()
                    };
                    out.push_str(&format!("[~{who}]"));
                    i += rest[..=end].chars().count();
                    continue;
                }
                if inner.contains('|') || inner.starts_with("http") {
                    out.push_str(&rest[..=end]);
                    i += rest[..=end].chars().count();
                    continue;
                }
            }
            out.push_str("\\[");
        } else if (rest.starts_with("http://") || rest.starts_with("https://"))
            && (i == 0 || chars[i - 1].is_whitespace())
        {
            let url: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
            i += url.chars().count();
            out.push_str(&format!("[{url}|{url}]"));
            continue;
        } else if c == '{' {
            out.push_str("\\{");
        } else if c == '*' || c == '_' {
            let before = i.checked_sub(1).map(|b| chars[b]);
            let after = chars.get(i + 1).copied();
            let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
            let space = |c: Option<char>| c.is_none_or(char::is_whitespace);
            if (word(before) && word(after)) || (space(before) && space(after)) {
                out.push('\\');
            }
            out.push(c);
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

impl FakeJira {
    /// Cloud: a comment's body comes back through the whole wiki → ADF → wiki round trip
    /// (escaping, links, lists, mentions: `markup_through_adf`), not only with its whitespace
    /// normalised. Off by default.
    pub fn set_markup_round_trip(&self, on: bool) {
        lock(&self.state).markup_round_trip = on;
    }
}

impl StateInner {
    /// The `properties` member of a create: `[{"key", "value"}]`, values JSON of at most 32768
    /// characters ("The maximum length of an issue property value is 32768 characters").
    pub(super) fn entity_properties(body: &Value) -> Result<BTreeMap<String, Value>, Reply> {
        let mut properties = BTreeMap::new();
        for property in body
            .get("properties")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = property.get("key").and_then(Value::as_str).unwrap_or("");
            let value = property.get("value").cloned().unwrap_or(Value::Null);
            if key.is_empty() || key.len() > 255 {
                return Err(Reply::error(
                    400,
                    "The property key cannot be null and must be at most 255 characters.",
                ));
            }
            if value.to_string().chars().count() > 32_768 {
                return Err(Reply::error(
                    400,
                    "The property value is too long: it must be at most 32768 characters.",
                ));
            }
            properties.insert(key.to_string(), value);
        }
        Ok(properties)
    }

    /// `{"key", "value"}` of a property, or Jira's 404 when it is not set.
    pub(super) fn property_reply(key: &str, value: Option<&Value>) -> Result<Reply, Reply> {
        match value {
            Some(value) => Ok(Reply::json(200, json!({"key": key, "value": value}))),
            None => Err(Reply::error(
                404,
                &format!("The property with key '{key}' does not exist."),
            )),
        }
    }

    pub(super) fn get_issue_property(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let key = &request.segments[6];
        Self::property_reply(key, self.issues[&id].properties.get(key))
    }

    /// `PUT …/properties/{propertyKey}`: the body is the value; 201 when new, 200 when replaced.
    pub(super) fn set_issue_property(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let key = request.segments[6].clone();
        let value = Self::body_json(request)?;
        let issue = self.issues.get_mut(&id).expect("found");
        let existed = issue.properties.insert(key, value).is_some();
        Ok(Reply::empty(if existed { 200 } else { 201 }))
    }

    /// Comment entity properties exist on both deployments: Data Center's REST API
    /// (`/rest/api/2/comment/{commentId}/properties/{propertyKey}`, GET and PUT, "Comment
    /// properties", docs.atlassian.com/software/jira/docs/api/REST/9.12.0) and Cloud's ("Issue
    /// comment properties", developer.atlassian.com/cloud/jira/platform/rest/v2/
    /// api-group-issue-comment-properties). An unknown comment: 404.
    fn comment_id(&self, request: &Request) -> Result<u64, Reply> {
        let id: u64 = request.segments[4].parse().unwrap_or(0);
        let text = id.to_string();
        let exists = self
            .issues
            .values()
            .any(|i| i.comments.iter().any(|c| c["id"].as_str() == Some(&text)));
        if !exists {
            return Err(Reply::error(
                404,
                &format!("Can not find a comment for the id: {id}."),
            ));
        }
        Ok(id)
    }

    pub(super) fn get_comment_property(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.comment_id(request)?;
        let key = &request.segments[6];
        Self::property_reply(
            key,
            self.comment_properties.get(&id).and_then(|p| p.get(key)),
        )
    }

    /// `PUT /comment/{id}/properties/{propertyKey}`: the body is the value; 201 when new, 200
    /// when replaced (as for issue properties).
    pub(super) fn set_comment_property(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.comment_id(request)?;
        let key = request.segments[6].clone();
        let value = Self::body_json(request)?;
        let existed = self
            .comment_properties
            .entry(id)
            .or_default()
            .insert(key, value)
            .is_some();
        Ok(Reply::empty(if existed { 200 } else { 201 }))
    }

    /// The `properties` member of a Cloud search answer's issue: the asked issue properties it
    /// has, by key (Cloud's `search/jql` "properties: A list of up to 5 issue properties to
    /// include in the results", developer.atlassian.com/cloud/jira/platform/rest/v2/
    /// api-group-issue-search). Data Center's search never returns properties
    /// (JRASERVER-62898): its search ignores the parameter.
    pub(super) fn searched_properties(&self, issue: u64, keys: &[String]) -> Value {
        let properties = &self.issues[&issue].properties;
        let found: Map<String, Value> = keys
            .iter()
            .filter_map(|k| properties.get(k).map(|v| (k.clone(), v.clone())))
            .collect();
        Value::Object(found)
    }

    /// `GET /issue/{key}/comment`: a page of the issue's comments, oldest first unless
    /// `orderBy` says otherwise. Both deployments document `orderBy`: Cloud's "Get comments"
    /// ("Order the results by a field. Accepts *created* to sort comments by their created date",
    /// `created`, `-created` or `+created`; "400 Returned if `orderBy` is set to a value other than
    /// *created*", Atlassian's OpenAPI description, `tests/fixtures/jira-cloud-openapi/`) and Data
    /// Center's (`IssueCommentResource.getComments`: "Results can be ordered by the "created"
    /// field which means the date a comment was added", `orderBy` "ordering of the results",
    /// `maxResults` "Defaults to 50", docs.atlassian.com/software/jira/docs/api/REST/9.12.0).
    /// Comments are kept in the order they were added, which is their created order.
    pub(super) fn get_comments(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let start_at: usize = number_param(request.param("startAt"), 0, "startAt")?;
        let max: usize =
            number_param(request.param("maxResults"), 50, "maxResults")?.min(self.max_results);
        let newest_first = match request.param("orderBy") {
            None | Some("" | "created" | "+created") => false,
            Some("-created") => true,
            Some(other) => {
                return Err(Reply::error(
                    400,
                    &format!("The value '{other}' is not valid for the parameter 'orderBy'."),
                ));
            }
        };
        let comments = &self.issues[&id].comments;
        let ordered: Box<dyn Iterator<Item = &Value>> = if newest_first {
            Box::new(comments.iter().rev())
        } else {
            Box::new(comments.iter())
        };
        let page: Vec<Value> = ordered.skip(start_at).take(max).cloned().collect();
        Ok(Reply::json(
            200,
            json!({"startAt": start_at, "maxResults": max, "total": comments.len(), "comments": page}),
        ))
    }

    /// Cloud's `POST /rest/api/2/comment/list` ("Get comments by IDs", Atlassian's OpenAPI
    /// description, `getCommentsByIds`): the body is `{"ids": [...]}` ("A maximum of 1000 IDs can
    /// be specified"; "400 Returned if the request contains more than 1000 IDs or is empty"), the
    /// answer a `PageBeanComment` (`isLast`, `maxResults`, `startAt`, `total`, `values`; the
    /// description's example answers `maxResults` 1048576: the whole list in one page), and
    /// `expand=properties` "Returns the comment's properties" (`Comment.properties`, a list of
    /// `{key, value}`). Ids of comments that do not exist are left out. Data Center documents no
    /// such operation (its REST reference, 9.12): there the path is unknown, as any other.
    pub(super) fn comments_by_ids(&self, request: &Request) -> Result<Reply, Reply> {
        if self.mode == Mode::DataCenter {
            return Err(Reply::error(
                404,
                &format!("null for uri: {}/{}", self.base, request.segments.join("/")),
            ));
        }
        let body = Self::body_json(request)?;
        let ids: Vec<u64> = match body.get("ids").and_then(Value::as_array) {
            Some(ids) if !ids.is_empty() && ids.len() <= 1000 => ids
                .iter()
                .map(|id| id.as_u64())
                .collect::<Option<_>>()
                .ok_or_else(|| Reply::error(400, "The comment ids must be numbers."))?,
            _ => {
                return Err(Reply::error(
                    400,
                    "The request must contain between 1 and 1000 comment ids.",
                ));
            }
        };
        let properties = request
            .param("expand")
            .is_some_and(|e| e.split(',').any(|e| e.trim() == "properties"));
        let wanted: std::collections::BTreeSet<String> = ids.iter().map(u64::to_string).collect();
        let mut values: Vec<Value> = self
            .issues
            .values()
            .flat_map(|issue| issue.comments.iter())
            .filter(|c| c["id"].as_str().is_some_and(|id| wanted.contains(id)))
            .cloned()
            .collect();
        values.sort_by_key(|c| c["id"].as_str().and_then(|id| id.parse::<u64>().ok()));
        if properties {
            for comment in &mut values {
                let id: u64 = comment["id"]
                    .as_str()
                    .and_then(|id| id.parse().ok())
                    .unwrap_or(0);
                let list: Vec<Value> = self
                    .comment_properties
                    .get(&id)
                    .into_iter()
                    .flatten()
                    .map(|(key, value)| json!({"key": key, "value": value}))
                    .collect();
                comment["properties"] = Value::Array(list);
            }
        }
        Ok(Reply::json(
            200,
            json!({"isLast": true, "maxResults": 1_048_576, "startAt": 0,
                   "total": values.len(), "values": values}),
        ))
    }

    pub(super) fn add_comment(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let body = Self::body_json(request)?;
        let text = match body.get("body") {
            Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
            _ => {
                return Err(Reply::field_error(
                    "comment",
                    &self.words(
                        "Comment body can not be empty!".into(),
                        "Текст комментария не может быть пустым!".into(),
                    ),
                ));
            }
        };
        // Cloud keeps a REST v2 body as ADF and converts it back to wiki markup when read.
        let text = match self.mode {
            Mode::Cloud if self.markup_round_trip => markup_through_adf(&through_adf(&text)),
            Mode::Cloud => through_adf(&text),
            Mode::DataCenter => text,
        };
        let properties = Self::entity_properties(&body)?;
        let comment_id = self.next_comment;
        self.next_comment += 1;
        if !properties.is_empty() {
            self.comment_properties.insert(comment_id, properties);
        }
        let now = jira_time(self.jira_now_ms());
        let author = self.author_json();
        let comment = json!({
            "self": format!("{}/rest/api/2/issue/{id}/comment/{comment_id}", self.base),
            "id": comment_id.to_string(), "author": author, "body": text,
            "updateAuthor": author, "created": now, "updated": now});
        let lag = self.search_lag;
        let issue = self.issues.get_mut(&id).expect("found");
        issue.comments.push(comment.clone());
        issue.touch(now_ms(), lag);
        Ok(Reply::json(201, comment))
    }
}

impl FakeJira {
    /// Whether a create's `properties` are applied (default yes). No imitates Jira before 7.2
    /// (`IssueUpdateBean` ignores the member silently), and, with `serverInfo` still naming 9.12,
    /// a newer server that drops them all the same (docs/jira-field-notes.md, "Properties in the
    /// create body": check that the marker landed rather than trust a version).
    pub fn set_create_properties(&self, applied: bool) {
        lock(&self.state).create_properties = applied;
    }

    /// An issue's entity properties.
    pub fn issue_properties(&self, key: &str) -> BTreeMap<String, Value> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].properties.clone())
            .unwrap_or_default()
    }

    /// A comment's entity properties.
    pub fn comment_properties(&self, comment_id: &str) -> BTreeMap<String, Value> {
        let state = lock(&self.state);
        comment_id
            .parse()
            .ok()
            .and_then(|id| state.comment_properties.get(&id).cloned())
            .unwrap_or_default()
    }

    pub fn comments(&self, key: &str) -> Vec<Value> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].comments.clone())
            .unwrap_or_default()
    }
}
