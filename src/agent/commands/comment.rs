//! `comment`: a comment carrying its marker, and finding the one an earlier delivery posted.

use super::looks::{POSTED_MARGIN_MS, PropertyReader};
use super::{
    Executor, Fail, MARKER_KEY, fail, fail_words, id_text, marker, marker_is_of, normalized_body,
    text,
};
use crate::agent::answer::Need;
use crate::agent::jira_api::{Deployment, JiraError};
use crate::agent::jql;
use crate::protocol::ClaimedCommand;
use serde_json::{Value, json};

impl Executor<'_> {
    /// A comment carries the marker as a comment property, set in the add request itself
    /// (`properties` of the comment bean: Cloud's "Add comment", Data Center's `CommentJsonBean`).
    /// Every delivery after the first looks for it before posting; a lost answer gives the
    /// command back.
    pub(super) fn comment(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
        let params = &command.params;
        let key = text(params, "key").ok_or_else(|| fail("key: обязательное поле отсутствует"))?;
        let body = params
            .get("body")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("body: обязательное поле отсутствует"))?
            .to_string();
        let path = format!("/rest/api/2/issue/{}/comment", jql::encode(&key));
        // An earlier delivery's comment is looked for from the batch's start, as a create's.
        if command.delivery > 1
            && let Some(id) = {
                let since_ms = self.window_start_ms(command)?;
                self.find_comment(&path, &body, command, since_ms)?
            }
        {
            tracing::info!(
                command = command.id,
                "the comment was already posted by an earlier delivery: not posted again"
            );
            return Ok(json!({"comment_id": id}));
        }
        let marker = marker(command, self.agent);
        let request = json!({"body": body, "properties": [{"key": MARKER_KEY, "value": marker}]});
        // The POST's time on Jira's clock: a look after its answer is lost reads only the
        // comments created since.
        let since_ms = self.jira.jira_now_ms()? - POSTED_MARGIN_MS;
        let answer = self
            .jira
            .write_expecting("POST", &path, &request, Need::Member("id"));
        if matches!(answer, Err(JiraError::Ambiguous(_)))
            && let Some(id) = self
                .look_after_503(|executor| executor.find_comment(&path, &body, command, since_ms))?
        {
            tracing::info!(
                command = command.id,
                "a comment answered 503 is in Jira: it is done"
            );
            return Ok(json!({"comment_id": id}));
        }
        match answer {
            Ok(reply) => {
                let created: Value = crate::agent::jira_api::parse(&reply)?;
                if let Some(issue) = commented_issue(&created) {
                    self.jira.note_written(issue);
                }
                if let Some(id) = id_text(&created["id"]) {
                    self.ensure_comment_marker(&id, &marker);
                }
                Ok(json!({"comment_id": created["id"].clone()}))
            }
            Err(JiraError::Ambiguous(error)) => {
                let id = self.look_after_lost_answer(command, &error, |executor| {
                    executor.find_comment(&path, &body, command, since_ms)
                })?;
                tracing::info!(
                    command = command.id,
                    "a lost comment's marker was found: it is done"
                );
                Ok(json!({"comment_id": id}))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// A comment's `properties` are documented on both deployments (Cloud's "Add comment", Data
    /// Center's `CommentJsonBean.properties` since 7.2), yet a proxy that rewrites bodies or a
    /// plugin may drop them (docs/jira-field-notes.md, "Properties in the create body"): as a
    /// create's, the first comment of a run on a server reads its marker back once; a server seen
    /// to keep it is not asked again, one seen to drop it gets the marker PUT after every comment
    /// (`PUT /rest/api/2/comment/{id}/properties/{propertyKey}`, idempotent), and its lost
    /// comments are recognised by their body (see [`Executor::find_comment`]). A failure here
    /// is logged, not the command's: the comment exists.
    fn ensure_comment_marker(&mut self, id: &str, marker: &Value) {
        if self.jira.deployment().ok() == Some(Deployment::Cloud)
            || self.jira.comment_properties_kept() == Some(true)
            || !self.jira.has_comment_properties().unwrap_or(false)
        {
            return;
        }
        let path = format!(
            "/rest/api/2/comment/{}/properties/{MARKER_KEY}",
            jql::encode(id)
        );
        if self.jira.comment_properties_kept().is_none() {
            match self.property(&path) {
                Ok(Some(found)) if found == *marker => {
                    self.jira.set_comment_properties_kept(true);
                    return;
                }
                Ok(_) => {
                    tracing::warn!(comment = %id, "Jira did not keep the marker sent with the comment: it is set after each comment from now on");
                    self.jira.set_comment_properties_kept(false);
                }
                Err(error) => {
                    let error = fail_words(error);
                    tracing::warn!(comment = %id, %error, "the comment's marker could not be read back; it is set again");
                }
            }
        }
        if let Err(error) = self.idempotent_write("PUT", &path, marker) {
            let error = fail_words(error);
            tracing::warn!(comment = %id, %error, "the comment's marker could not be set");
        }
    }

    /// The id of the comment this command posted (an earlier delivery's, or this one's whose
    /// answer was lost): a comment created at or after `since_ms` on Jira's clock whose marker
    /// (its comment property) names this command, whatever its body now is (Cloud gives back
    /// wiki markup converted from ADF, which changes more than whitespace). A comment marked for
    /// another command, or unmarked, is never taken (a recurring text is not
    /// proof). Only on a server without comment properties (before 7.2) is a comment of this account
    /// with the same body in [`normalized_body`] form taken instead.
    ///
    /// The comments are read newest first and the look ends at the first one older than the
    /// window: the write looked for is the newest, so it costs one page. On
    /// Cloud the markers of a page's candidates come in one `POST /comment/list?expand=properties`
    /// (up to 1,000 ids a call); on Data Center, which has no such operation, each candidate's
    /// marker is read, newest first, once per delivery (kept, as the create look's).
    fn find_comment(
        &mut self,
        path: &str,
        body: &str,
        command: &ClaimedCommand,
        since_ms: i64,
    ) -> Result<Option<Value>, Fail> {
        let cloud = self.jira.deployment()? == Deployment::Cloud;
        let by_marker = self.jira.has_comment_properties()?;
        // Unless this run has seen Jira keep the markers sent with comments, they may be dropped
        // on the way (a proxy that rewrites bodies): an unmarked comment of this account with
        // this body, in the window, is this command's whose answer was lost before its marker
        // could be PUT. A comment marked for another command is never taken.
        let dropped = self.jira.comment_properties_kept() != Some(true);
        let wanted = normalized_body(body);
        // On Cloud the markers of a whole page come in one call: every comment of the window is
        // a candidate, and the marker alone decides. On Data Center each marker is a call of
        // its own: only this account's comments are read, the author compared with the account
        // `myself` names by the same field (`key`, else `name` in any case), never with the
        // text of a header (`X-AUSERNAME` comes URL-encoded).
        let me = if cloud { None } else { Some(self.jira.me()?) };
        let mine = |comment: &Value| match &me {
            None => true,
            Some(me) => me.is(&comment["author"], false) == Some(true),
        };
        // A comment without an author ran as nobody: one of this agent's whose token was not
        // taken (a project that lets anyone comment answers it 201 anonymously) is such a one.
        // Its marker alone decides; it is never taken by its body.
        let by_nobody = |comment: &Value| comment["author"].is_null();
        let same_body =
            |c: &Value| c["body"].as_str().map(normalized_body).as_deref() == Some(&wanted);
        let mut found = None;
        self.jira
            .comments_newest(path, since_ms, &mut |jira, comments| {
                let candidates: Vec<&Value> = comments
                    .iter()
                    .filter(|c| mine(c) || (by_marker && by_nobody(c)))
                    .collect();
                if !by_marker {
                    found = candidates
                        .iter()
                        .find(|c| same_body(c))
                        .map(|c| c["id"].clone());
                    return Ok(found.is_some());
                }
                let ids: Vec<String> = candidates
                    .iter()
                    .filter_map(|c| id_text(&c["id"]))
                    .collect();
                // Only one whose `created` shows it inside the window (a look-alike of unknown
                // age is never taken).
                let unmarked_alike: Vec<String> = candidates
                    .iter()
                    .filter(|c| {
                        dropped
                            && mine(c)
                            && same_body(c)
                            && c["created"]
                                .as_str()
                                .and_then(crate::agent::jira_api::jira_time)
                                .is_some_and(|at| {
                                    (at.unix_timestamp_nanos() / 1_000_000) as i64 >= since_ms
                                })
                    })
                    .filter_map(|c| id_text(&c["id"]))
                    .collect();
                let markers = if cloud {
                    jira.comment_markers(&ids, MARKER_KEY)?
                } else {
                    std::collections::HashMap::new()
                };
                for id in ids {
                    let marker = match markers.get(&id) {
                        Some(known) => known.clone(),
                        None => {
                            let property = format!(
                                "/rest/api/2/comment/{}/properties/{MARKER_KEY}",
                                jql::encode(&id)
                            );
                            (PropertyReader { jira: &mut *jira }).read(&property)?
                        }
                    };
                    match marker.as_ref().and_then(|v| marker_is_of(v, command)) {
                        Some(true) => {
                            found = Some(Value::String(id));
                            return Ok(true);
                        }
                        None if unmarked_alike.contains(&id) => {
                            found = Some(Value::String(id));
                            return Ok(true);
                        }
                        _ => {}
                    }
                }
                Ok(false)
            })?;
        Ok(found)
    }
}

/// The id of the issue a comment is on, from the comment's `self`
/// (`…/rest/api/2/issue/{issueId}/comment/{id}` on both deployments: Cloud's "Add comment"
/// example answer, Data Center's `CommentJsonBean`): a comment changes its issue, which Cloud's
/// search may not show for minutes, and this costs no call. A lost answer tells nothing: that
/// issue is not named (no read is added to each comment for it).
fn commented_issue(comment: &Value) -> Option<u64> {
    let url = comment["self"].as_str()?;
    let (before, _) = url.rsplit_once("/comment/")?;
    let (_, id) = before.rsplit_once("/issue/")?;
    id.parse().ok()
}

#[cfg(test)]
mod tests {

    use crate::agent::commands::Outcome;

    use serde_json::{Value, json};

    use crate::agent::testkit::*;
    use std::time::Duration;

    /// A comment is recognised by its marker. A lost comment's marker found at the
    /// second look: done. An unmarked comment of this account with the same text (last week's
    /// «Перенесено в следующий спринт») is never adopted.
    #[test]
    fn comments_are_recognised_by_their_marker_and_a_look_alike_is_never_adopted() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            let old = json!({"id": "100", "body": "Перенесено в следующий спринт",
                             "author": {"name": "agent"}});
            let new = json!({"id": "101", "body": "Перенесено в следующий спринт\n",
                             "author": {"name": "agent"}});
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => {
                    (504, json!({"errorMessages": ["Gateway Time-out"]}))
                }
                ("GET", "/rest/api/2/issue/AURORA-1/comment") if nth < 2 => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [old]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 2, "comments": [old, new]}),
                ),
                ("GET", "/rest/api/2/comment/101/properties/jira-hub") => (200, mine()),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery(
            "comment",
            json!({"key": "AURORA-1", "body": "Перенесено в следующий спринт"}),
        );
        let (outcome, slept) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "101"})));
        assert_eq!(slept, [1, 2].map(Duration::from_secs));
        let seen = jira_server.seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter()
                .filter(|l| *l == "POST /rest/api/2/issue/AURORA-1/comment")
                .count(),
            1
        );

        // A redelivery finds only the unmarked look-alike: it posts its own comment.
        fn redelivered(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [
                        {"id": "100", "body": "Перенесено в следующий спринт", "author": {"name": "agent"}}]}),
                ),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => (201, json!({"id": "102"})),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(redelivered);
        let mut jira = jira_at(&jira_server.url);
        let mut command = command.clone();
        command.delivery = 2;
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "102"})));
    }

    /// The host's wall clock steps ten minutes ahead after the heartbeat's `serverInfo` measured
    /// Jira's clock (NTP, an operator): the lost comment's look still starts a minute before its
    /// POST on Jira's clock, and finds it. Before, Jira's now was the wall clock plus the skew
    /// measured, so the window started nine minutes after the comment and the look never saw it.
    /// A step of a second leaves Jira's now where it was (the anchor stands, `serverInfo` is not
    /// asked again), while the skew shown by `--check` follows the wall clock; a step of ten
    /// minutes (as a suspend shows) has `serverInfo` asked again before the POST.
    #[test]
    fn a_step_of_the_wall_clock_after_the_measurement_leaves_the_lost_comments_window_right() {
        fn answer(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => {
                    (504, json!({"errorMessages": ["Gateway Time-out"]}))
                }
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [
                        {"id": "101", "body": "Сдвиг часов", "author": {"name": "agent"},
                         "created": "2026-11-29T13:05:01.000+0300"}]}),
                ),
                ("GET", "/rest/api/2/comment/101/properties/jira-hub") => (200, mine()),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let host = SteppedWall::new();
        jira.set_host_clock(host.clone());
        // The heartbeat's probe measures Jira's clock.
        jira.server_info(false).unwrap();
        let skew = jira.skew_ms().unwrap();
        let jira_now = jira.jira_now_ms().unwrap();
        // A small step: Jira's now stays, the skew follows the wall.
        host.step(time::Duration::seconds(1));
        assert!((jira.jira_now_ms().unwrap() - jira_now).abs() < 500);
        assert!((jira.skew_ms().unwrap() - (skew - 1_000)).abs() < 500);
        host.step(time::Duration::minutes(10));
        let command = first_delivery("comment", json!({"key": "AURORA-1", "body": "Сдвиг часов"}));
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "101"})));
        let seen = jira_server.seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter()
                .filter(|l| *l == "POST /rest/api/2/issue/AURORA-1/comment")
                .count(),
            1
        );
        // The wall clock parted from the monotonic one by ten minutes (a step, or a suspend that
        // stopped the monotonic clock): Jira's clock was read again once, before the POST.
        assert_eq!(
            seen.iter()
                .filter(|l| *l == "GET /rest/api/2/serverInfo")
                .count(),
            2,
            "{seen:?}"
        );
    }

    /// A server that gives the comments oldest first whatever `orderBy` says is never taken for
    /// newest first: every page is read, then the list is looked at from its end, and only the
    /// comments of the window (created since the POST on Jira's clock, less a minute) have their
    /// marker read, the newest first: one property read among 150 of the account's comments.
    #[test]
    fn comments_given_oldest_first_are_looked_at_from_the_end_within_the_window() {
        fn comments(from: u64, to: u64) -> Vec<Value> {
            (from..=to)
                .map(|id| {
                    let created = if id >= 149 {
                        "2026-11-29T13:05:00.000+0300"
                    } else {
                        "2026-11-29T10:00:00.000+0300"
                    };
                    json!({"id": id.to_string(), "body": format!("№{id}"),
                           "author": {"name": "agent"}, "created": created})
                })
                .collect()
        }
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:30.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => {
                    (504, json!({"errorMessages": ["Gateway Time-out"]}))
                }
                ("GET", "/rest/api/2/issue/AURORA-1/comment") if nth % 2 == 1 => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 150,
                           "comments": comments(1, 100)}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 100, "maxResults": 100, "total": 150,
                           "comments": comments(101, 150)}),
                ),
                ("GET", "/rest/api/2/comment/150/properties/jira-hub") => (200, mine()),
                ("GET", "/rest/api/2/comment/149/properties/jira-hub") => (
                    200,
                    json!({"key": "jira-hub", "value": {"command": 6, "batch": 2}}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery("comment", json!({"key": "AURORA-1", "body": "№150"}));
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "150"})));
        let seen = jira_server.seen.lock().unwrap().clone();
        let properties: Vec<&String> = seen.iter().filter(|l| l.contains("/properties/")).collect();
        assert_eq!(
            properties,
            ["GET /rest/api/2/comment/150/properties/jira-hub"],
            "{seen:?}"
        );
        assert!(
            jira_server
                .queries
                .lock()
                .unwrap()
                .iter()
                .any(|q| q.contains("orderBy=-created")),
            "newest first is asked for"
        );
    }

    /// Only where the server has no comment properties (it names a version before 7.2) is a
    /// comment recognised by its body.
    #[test]
    fn a_server_without_comment_properties_recognises_a_comment_by_its_body() {
        fn answer(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [7, 1, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [
                        {"id": "100", "body": "Готово\r\n", "author": {"name": "agent"}}]}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let mut command = first_delivery("comment", json!({"key": "AURORA-1", "body": "Готово"}));
        command.delivery = 2;
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "100"})));
    }
}
