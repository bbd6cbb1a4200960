//! Comments and entity properties: comment bodies as each deployment keeps them, issue and
//! comment properties (on create and by their own endpoints).

use super::*;
use serde_json::{Value, json};
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

    pub(super) fn get_comment_property(&self, request: &Request) -> Result<Reply, Reply> {
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
        let key = &request.segments[6];
        Self::property_reply(
            key,
            self.comment_properties.get(&id).and_then(|p| p.get(key)),
        )
    }

    pub(super) fn get_comments(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let start_at: usize = number_param(request.param("startAt"), 0, "startAt")?;
        let max: usize =
            number_param(request.param("maxResults"), 50, "maxResults")?.min(self.max_results);
        let comments = &self.issues[&id].comments;
        let page: Vec<Value> = comments.iter().skip(start_at).take(max).cloned().collect();
        Ok(Reply::json(
            200,
            json!({"startAt": start_at, "maxResults": max, "total": comments.len(), "comments": page}),
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
                    "Comment body can not be empty!",
                ));
            }
        };
        // Cloud keeps a REST v2 body as ADF and converts it back to wiki markup when read.
        let text = match self.mode {
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
        let author = self.user_json();
        let comment = json!({
            "self": format!("{}/rest/api/2/issue/{id}/comment/{comment_id}", self.base),
            "id": comment_id.to_string(), "author": author, "body": text,
            "updateAuthor": author, "created": now, "updated": now});
        let issue = self.issues.get_mut(&id).expect("found");
        issue.comments.push(comment.clone());
        issue.updated_ms = now_ms();
        Ok(Reply::json(201, comment))
    }
}

impl FakeJira {
    /// Whether a create's `properties` are applied (default yes; no imitates Jira before 7.2).
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
