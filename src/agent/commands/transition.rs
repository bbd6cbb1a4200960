//! `transition`: the issue's status and the transitions Jira offers, by name or target status.

use super::{Executor, Fail, fail, id_number, id_text, short, text};
use crate::agent::jira_api::JiraError;
use crate::agent::jql;
use crate::domain::settings::TransitionTarget;
use serde_json::{Value, json};
use std::time::Duration;

impl Executor<'_> {
    /// Moves an issue to the status `status` names in `transitions_map`: the
    /// transition is chosen among those Jira offers for this issue (`GET …/transitions`, whose
    /// ids differ between workflows) by its target status id; "already there" compares the
    /// issue's `status.id`; after the call the status is read back, and a transition that ended
    /// elsewhere (a post-function, a validator) fails the command with what happened.
    pub(super) fn transition(&mut self, params: &Value) -> Result<Value, Fail> {
        let key = text(params, "key").ok_or_else(|| fail("key: обязательное поле отсутствует"))?;
        let status =
            text(params, "status").ok_or_else(|| fail("status: обязательное поле отсутствует"))?;
        let target = self
            .settings
            .transitions_map
            .get(&status)
            .cloned()
            .ok_or_else(|| fail(format!("status: {status:?} нет в transitions_map")))?;
        let issue_path = format!("/rest/api/2/issue/{}", jql::encode(&key));
        let mut conflicts = 0u32;
        loop {
            let (current, offered) = self.status_and_transitions(&issue_path, &key)?;
            let (target_id, hint) = match &target {
                TransitionTarget::Status {
                    status_id,
                    transition_id,
                } => (status_id.clone(), transition_id.clone()),
                TransitionTarget::TransitionId(id) => {
                    match offered.iter().find(|t| t.id == *id) {
                        Some(hinted) if same_name(&hinted.to_name, &status) => {
                            (hinted.to_id.clone(), Some(id.clone()))
                        }
                        Some(hinted) => {
                            return Err(fail(format!(
                                "переход {id} из transitions_map для «{status}» ведёт {key} в статус «{}» (id {}), а не в «{status}»; укажите в transitions_map {{\"status_id\": …}} целевого статуса",
                                hinted.to_name, hinted.to_id
                            )));
                        }
                        // The legacy form cannot know the target's id: a name is all it has.
                        None if same_name(&current.name, &status) => {
                            return Ok(json!({"status": status}));
                        }
                        None => {
                            return Err(fail(format!(
                                "Jira не предлагает переход {id} для {key} (статус «{}»); доступны: {}",
                                current.name,
                                describe_offered(&offered)
                            )));
                        }
                    }
                }
            };
            if current.id == target_id {
                return Ok(json!({"status": status}));
            }
            let candidates: Vec<&Offered> =
                offered.iter().filter(|t| t.to_id == target_id).collect();
            let chosen = candidates
                .iter()
                .find(|t| hint.as_deref() == Some(t.id.as_str()))
                .or(candidates.first())
                .ok_or_else(|| {
                    fail(format!(
                        "Jira не предлагает для {key} перехода в «{status}» (статус id {target_id}) из статуса «{}» (id {}); доступны: {}",
                        current.name,
                        current.id,
                        describe_offered(&offered)
                    ))
                })?;
            let transition_id = chosen.id.clone();
            match self.jira.write(
                "POST",
                &format!("{issue_path}/transitions"),
                &json!({"transition": {"id": transition_id}}),
            ) {
                Ok(_) => {
                    let after = self.issue_status(&issue_path, &key)?;
                    if after.id == target_id {
                        return Ok(json!({"status": status}));
                    }
                    return Err(fail(format!(
                        "переход {transition_id} выполнен, но {key} теперь в статусе «{}» (id {}), а не в «{status}» (id {target_id}): его изменила постфункция или другой участник",
                        after.name, after.id
                    )));
                }
                // Cloud answers 409 when transitions of one issue collide: "an existing
                // transition is still being executed … your app should employ a retry mechanism"
                // (developer.atlassian.com/cloud/jira/platform/
                // change-notice-update-in-simultaneous-transitions-issue-api/; the description's
                // "Returned if the issue could not be updated due to a conflicting update"). Ours
                // was not applied: after a short wait the status is read again; at the target it
                // is done, still offered it is sent again, at most [`MAX_TRANSITION_CONFLICTS`]
                // times.
                Err(JiraError::Refused {
                    status: 409,
                    message,
                }) if conflicts < MAX_TRANSITION_CONFLICTS => {
                    conflicts += 1;
                    tracing::info!(%key, conflicts, %message, "Jira says the transition collided with another one: reading the status again");
                    if !(self.sleep)(TRANSITION_CONFLICT_WAIT * conflicts) {
                        return Err(Fail::Stopped);
                    }
                }
                // Ambiguous too: never repeated in this delivery; the next one
                // reads the status before it transitions.
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The issue's status and the transitions Jira offers from it, in one read:
    /// `GET /rest/api/2/issue/{key}?fields=status&expand=transitions` ("`transitions` Returns all
    /// possible transitions for the issue", the `expand` of Get issue in Atlassian's description of
    /// Cloud and in Data Center's REST reference alike). A Jira that leaves `transitions` out is
    /// asked `GET …/transitions` as before.
    fn status_and_transitions(
        &mut self,
        issue_path: &str,
        key: &str,
    ) -> Result<(StatusRef, Vec<Offered>), Fail> {
        let issue: Value = self
            .jira
            .read_json(&format!("{issue_path}?fields=status&expand=transitions"))?;
        let status = status_of(&issue, key)?;
        if let Some(id) = id_number(&issue["id"]) {
            // Read for a transition: the issue is about to change (see `Jira::note_written`).
            self.jira.note_written(id);
        }
        let offered = match issue.get("transitions") {
            Some(list) => offered_of(list, key)?,
            None => self.offered_transitions(issue_path, key)?,
        };
        Ok((status, offered))
    }

    /// The issue's status, checked: `fields.status.id` must be there.
    fn issue_status(&mut self, issue_path: &str, key: &str) -> Result<StatusRef, Fail> {
        let issue: Value = self
            .jira
            .read_json(&format!("{issue_path}?fields=status"))?;
        status_of(&issue, key)
    }

    /// The transitions Jira offers for the issue now, checked: each with an id and a target.
    fn offered_transitions(&mut self, issue_path: &str, key: &str) -> Result<Vec<Offered>, Fail> {
        let answer: Value = self.jira.read_json(&format!("{issue_path}/transitions"))?;
        offered_of(&answer["transitions"], key)
    }
}

/// An issue's status as Jira shows it.
struct StatusRef {
    id: String,
    name: String,
}

/// A transition Jira offers for an issue.
struct Offered {
    id: String,
    name: String,
    to_id: String,
    to_name: String,
}

/// The status of an issue as Jira sent it, checked: `fields.status.id` must be there.
fn status_of(issue: &Value, key: &str) -> Result<StatusRef, Fail> {
    let status = &issue["fields"]["status"];
    let id = id_text(&status["id"]).ok_or_else(|| {
        fail(format!(
            "ответ Jira о {key} без fields.status.id: {}",
            short(issue)
        ))
    })?;
    Ok(StatusRef {
        id,
        name: status["name"].as_str().unwrap_or("").to_string(),
    })
}

/// The transitions of an answer, checked: an array, each with an id and a target.
fn offered_of(list: &Value, key: &str) -> Result<Vec<Offered>, Fail> {
    let list = list.as_array().ok_or_else(|| {
        fail(format!(
            "ответ Jira о переходах {key} без массива transitions: {}",
            short(list)
        ))
    })?;
    list.iter()
        .map(|t| match (id_text(&t["id"]), id_text(&t["to"]["id"])) {
            (Some(id), Some(to_id)) => Ok(Offered {
                id,
                name: t["name"].as_str().unwrap_or("").to_string(),
                to_id,
                to_name: t["to"]["name"].as_str().unwrap_or("").to_string(),
            }),
            _ => Err(fail(format!(
                "переход {key} без id или без to.id в ответе Jira: {}",
                short(t)
            ))),
        })
        .collect()
}

/// The offered transitions for a message: `«name» (id) → «status» (id)`.
fn describe_offered(offered: &[Offered]) -> String {
    if offered.is_empty() {
        return "ни одного перехода".to_string();
    }
    offered
        .iter()
        .map(|t| format!("«{}» ({}) → «{}» (id {})", t.name, t.id, t.to_name, t.to_id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Two status names the same, ignoring case and surrounding blanks.
fn same_name(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// How many times a transition that collided with another (Cloud's 409) is read again and sent
/// again before the command fails with Jira's words; the waits before each read grow by
/// [`TRANSITION_CONFLICT_WAIT`].
const MAX_TRANSITION_CONFLICTS: u32 = 3;
const TRANSITION_CONFLICT_WAIT: Duration = Duration::from_secs(1);
