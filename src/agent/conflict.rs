//! An edit checked against Jira before it is written: one read of just the fields the
//! edit sets, right before the write, and a three-way decision per field (the base the hub
//! recorded at enqueue, Jira's value now, the wanted value):
//!
//! - Jira's value equals the wanted one: nothing to write for that field;
//! - Jira's value equals the base (nobody changed it): it is written;
//! - otherwise somebody changed it after the enqueue: a conflict.
//!
//! With any conflict nothing is written (not even the fields next to it: the edit was one
//! intention, and half of it on top of somebody's change is neither theirs nor ours); the command
//! fails with a conflict result the operator decides on. Labels are added, never replaced: they
//! never conflict. The forms compared are the mirror's ([`crate::domain::edit`]).
//!
//! Jira has no conditional update (no ETag or If-Match on `PUT /issue`), so a change made between
//! this read and the write is not seen: that window (one paced call) remains.

use super::commands::{Executor, Fail};
use super::jira_api::Deployment;
use super::jql;
use crate::domain::edit;
use serde_json::{Map, Value, json};

/// The histories a page of Cloud's paged changelog holds at most (its default and its limit).
const CHANGELOG_PAGE: u64 = 100;
/// The pages of Cloud's changelog read back from the newest before the changes since a base are
/// taken as unknown (a conflict the operator decides): 500 histories since the base.
const CHANGELOG_PAGES: usize = 5;

impl Executor<'_> {
    /// Takes out of `fields` (an edit's `fields`, by Jira field id) what Jira already holds, after
    /// one read of those fields; answers the conflict (the command's result, nothing written) when
    /// one of them was changed in Jira since the base. An edit without a base (an issue the mirror did not hold, one created in the same
    /// batch) is left as it is, without a read. Fields named in `params.overwrite` (the operator's
    /// «Записать поверх») are written whatever Jira holds.
    pub(super) fn checked_edit(
        &mut self,
        key: &str,
        params: &Value,
        fields: &mut Map<String, Value>,
    ) -> Result<Option<Value>, Fail> {
        if !edit::has_base(params) {
            return Ok(None);
        }
        let base = &params["base"]["fields"];
        let overwrite: Vec<&str> = params
            .get("overwrite")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let cloud = self.jira.deployment()? == Deployment::Cloud;
        let settings = self.settings;
        let checked: Vec<(&str, String, Value)> = edit::fields_set(params)
            .into_iter()
            .filter_map(|logical| {
                let id = edit::jira_field(logical, &settings.field_ids, cloud)?;
                let wanted = edit::wanted_value(logical, params, &settings.priority_map)?;
                // The sprint is not in the PUT's fields: the Agile API sets it after the PUT.
                (fields.contains_key(&id) || logical == "sprint").then_some((logical, id, wanted))
            })
            .collect();
        if checked.is_empty() {
            return Ok(None);
        }
        let mut asked: Vec<&str> = checked.iter().map(|(_, id, _)| id.as_str()).collect();
        asked.push("updated");
        // Just the fields: the changelog comes only when a field differs (below). Data Center's
        // `expand=changelog` brings the whole history of the issue (JRASERVER-60107), a price
        // paid for every edit when it came with this read.
        let path = format!(
            "/rest/api/2/issue/{}?fields={}",
            jql::encode(key),
            asked.join(",")
        );
        let issue: Value = self.jira.read_json(&path)?;
        let empty = Map::new();
        let now_fields = issue
            .get("fields")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        // The fields Jira holds at neither the wanted value nor the base: somebody changed them
        // since the base, or the agent's own account did (an earlier write of the hub's).
        let mut differ = Vec::new();
        for (logical, id, wanted) in &checked {
            let now = edit::jira_value(logical, now_fields, &settings.field_ids);
            if edit::same(logical, &now, wanted) {
                fields.remove(id);
                continue;
            }
            if overwrite.contains(logical) {
                continue;
            }
            if let Some(was) = base.get(*logical)
                && !edit::same(logical, &now, was)
            {
                differ.push((*logical, id.as_str(), wanted, was, now));
            }
        }
        if differ.is_empty() {
            self.edit_goes_on(&issue);
            return Ok(None);
        }
        // The base's time (the mirror's `updated`): a field changed since only by the agent's own
        // account (an earlier edit of the hub's that no refresh has read yet) is no conflict.
        let since = params["base"]["updated"]
            .as_str()
            .and_then(crate::jira::jira_time);
        let history = self.changelog(key, since, cloud)?;
        let me = match since {
            Some(_) => Some(self.jira.me()?),
            None => None,
        };
        let mut conflicts = Vec::new();
        for (logical, id, wanted, was, now) in differ {
            if me
                .as_ref()
                .zip(since)
                .is_some_and(|(me, since)| changed_only_by(&history, id, since, me, cloud))
            {
                continue;
            }
            let mut entry = json!({"field": logical, "base": was, "jira": now, "wanted": wanted});
            if let Some((who, when)) = last_change(&history, id) {
                entry["changed_by"] = who.into();
                entry["changed_at"] = when.into();
            }
            conflicts.push(entry);
        }
        if conflicts.is_empty() {
            self.edit_goes_on(&issue);
            return Ok(None);
        }
        let words: Vec<String> = conflicts
            .iter()
            .map(|c| {
                let by = match (c["changed_by"].as_str(), c["changed_at"].as_str()) {
                    (Some(who), Some(when)) => format!(" (изменил(а) {who}, {when})"),
                    _ => String::new(),
                };
                format!(
                    "{}: было «{}», в Jira сейчас «{}», хотели записать «{}»{by}",
                    edit::field_label(c["field"].as_str().unwrap_or("")),
                    edit::shown(&c["base"]),
                    edit::shown(&c["jira"]),
                    edit::shown(&c["wanted"]),
                )
            })
            .collect();
        let error = format!(
            "{key}: конфликт — поле изменили в Jira после постановки правки в очередь; ничего не записано. {}",
            words.join("; ")
        );
        let updated = now_fields.get("updated").cloned().unwrap_or(Value::Null);
        Ok(Some(json!({"key": key, "conflict": {
            "updated": updated, "fields": conflicts, "words": error}})))
    }

    /// The edit goes on: the issue this read returned is about to change, and Cloud's search may
    /// not show the change for minutes, so its id (from the read, no call of its own) is named
    /// in the next refreshes' `reconcileIssues` (see `Jira::note_written`).
    fn edit_goes_on(&mut self, issue: &Value) {
        if let Some(id) = crate::agent::commands::id_number(&issue["id"]) {
            self.jira.note_written(id);
        }
    }

    /// Who changed the issue's fields and when, read only once a field differs, as
    /// `{"changelog": {"histories", "total"}}`. Data Center: `expand=changelog` on a read of
    /// `updated` alone (the whole changelog, oldest first; no paged resource there). Cloud: the
    /// paged `GET …/issue/KEY/changelog` ("sorted by date, starting from the oldest", pages of at
    /// most 100, `isLast`, `total`: platform OpenAPI, "Get changelogs"): the first page when it
    /// is the last, else the pages from the end back to one that reaches `since`, at most
    /// [`CHANGELOG_PAGES`]; a changelog read short of `since` does not prove the changes ours.
    fn changelog(
        &mut self,
        key: &str,
        since: Option<time::OffsetDateTime>,
        cloud: bool,
    ) -> Result<Value, Fail> {
        let key = jql::encode(key);
        if !cloud {
            return Ok(self.jira.read_json(&format!(
                "/rest/api/2/issue/{key}?fields=updated&expand=changelog"
            ))?);
        }
        let page_at = |this: &mut Self, start: u64| -> Result<Value, Fail> {
            Ok(this.jira.read_json(&format!(
                "/rest/api/2/issue/{key}/changelog?startAt={start}&maxResults={CHANGELOG_PAGE}"
            ))?)
        };
        let values = |page: &Value| page["values"].as_array().cloned().unwrap_or_default();
        let first = page_at(self, 0)?;
        let total = first["total"].as_u64().unwrap_or(0);
        if first["isLast"].as_bool().unwrap_or(true) {
            let histories = values(&first);
            return Ok(json!({"changelog": {"total": histories.len(), "histories": histories}}));
        }
        let mut histories: Vec<Value> = Vec::new();
        let mut start = total;
        for _ in 0..CHANGELOG_PAGES {
            if start == 0 {
                break;
            }
            start = start.saturating_sub(CHANGELOG_PAGE);
            let mut page = values(&page_at(self, start)?);
            let reached = page
                .iter()
                .filter_map(|h| h["created"].as_str().and_then(crate::jira::jira_time))
                .min()
                .zip(since)
                .is_some_and(|(oldest, since)| oldest <= since);
            page.append(&mut histories);
            histories = page;
            if reached {
                break;
            }
        }
        Ok(json!({"changelog": {"total": total, "histories": histories}}))
    }
}

/// Whether a history of the changelog changed `field` (a Jira field id; Cloud names it in
/// `fieldId`, both deployments in `field` for system fields).
fn touches(history: &Value, field: &str) -> bool {
    history
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|item| {
            item.get("fieldId").and_then(Value::as_str) == Some(field)
                || item
                    .get("field")
                    .and_then(Value::as_str)
                    .is_some_and(|f| f.eq_ignore_ascii_case(field))
        })
}

/// Whether every change of `field` after `since` was made by the agent's own account (compared
/// by the field that names a user on the deployment, see `Me::is`), and there was one: the
/// hub's own earlier write, not somebody's. Only a changelog known to hold every history since
/// `since` decides (Cloud embeds the newest 100): otherwise, as with no changelog, it is not.
fn changed_only_by(
    issue: &Value,
    field: &str,
    since: time::OffsetDateTime,
    me: &super::jira_api::Me,
    cloud: bool,
) -> bool {
    let Some(changelog) = issue.get("changelog") else {
        return false;
    };
    let Some(histories) = changelog.get("histories").and_then(Value::as_array) else {
        return false;
    };
    let at = |h: &Value| {
        h.get("created")
            .and_then(Value::as_str)
            .and_then(crate::jira::jira_time)
    };
    let complete = changelog
        .get("total")
        .and_then(Value::as_u64)
        .is_none_or(|total| total as usize <= histories.len())
        || histories
            .iter()
            .filter_map(at)
            .min()
            .is_some_and(|oldest| oldest <= since);
    if !complete {
        return false;
    }
    let mut changes = histories
        .iter()
        .filter(|h| touches(h, field) && at(h).is_none_or(|when| when > since))
        .peekable();
    changes.peek().is_some() && changes.all(|h| me.is(&h["author"], cloud) == Some(true))
}

/// The author and time of the newest history of the issue's changelog that changed `field`.
fn last_change(issue: &Value, field: &str) -> Option<(String, String)> {
    let histories = issue.get("changelog")?.get("histories")?.as_array()?;
    histories
        .iter()
        .filter(|h| touches(h, field))
        .filter_map(|h| {
            let created = h.get("created")?.as_str()?;
            let at = crate::jira::jira_time(created)?;
            let author = h.get("author")?;
            let who = ["displayName", "name", "accountId"]
                .iter()
                .find_map(|m| author.get(*m).and_then(Value::as_str))?;
            Some((at, who.to_string(), created.to_string()))
        })
        .max_by_key(|(at, _, _)| *at)
        .map(|(_, who, when)| (who, when))
}
