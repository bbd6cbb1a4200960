//! Workflows: statuses, the transitions each issue type's workflow offers from a status, and
//! post-functions that land elsewhere.

use super::*;
use serde_json::{Value, json};

/// `(id, name)` of the workflow's statuses; the first is where issues start.
pub const STATUSES: &[(&str, &str)] = &[
    ("1", "Открыта"),
    ("3", "В работе"),
    ("10001", "Готово"),
    ("10002", "Снято"),
];

/// `(transition id, name, from status (None: any but the target), to status)`.
pub const TRANSITIONS: &[(&str, &str, Option<&str>, &str)] = &[
    ("11", "Начать работу", Some("Открыта"), "В работе"),
    ("21", "Завершить", Some("В работе"), "Готово"),
    ("31", "Снять", None, "Снято"),
];

/// The bugs' workflow (issue type `Ошибка`, id 10004): other transition ids, and `11` means
/// something else here. Jira gives each issue type of a project its workflow (workflow schemes),
/// and a transition id is only an index inside one workflow (`GET …/transitions` lists "ids per
/// workflow", the project guide to Jira's API (guide/jira-api.md of the specification); ansible's "Failed find valid transition for '6'").
pub const BUG_TRANSITIONS: &[(&str, &str, Option<&str>, &str)] = &[
    ("11", "Не исправлять", None, "Снято"),
    ("711", "Взять в работу", Some("Открыта"), "В работе"),
    ("721", "Исправлено", Some("В работе"), "Готово"),
];

pub(super) fn from_any(tid: &str) -> bool {
    TRANSITIONS
        .iter()
        .any(|(t, _, from, _)| *t == tid && from.is_none())
}

impl StateInner {
    pub(super) fn offered(
        status: usize,
    ) -> Vec<&'static (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
    )> {
        let current = STATUSES[status].1;
        TRANSITIONS
            .iter()
            .filter(|(_, _, from, to)| match from {
                Some(from) => *from == current,
                None => *to != current,
            })
            .collect()
    }

    /// The workflow of the issue's type: bugs have their own.
    pub(super) fn workflow(
        issue: &Issue,
    ) -> &'static [(
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
    )] {
        if issue.fields["issuetype"]["id"] == "10004" {
            BUG_TRANSITIONS
        } else {
            TRANSITIONS
        }
    }

    pub(super) fn offered_in(
        workflow: &'static [(
            &'static str,
            &'static str,
            Option<&'static str>,
            &'static str,
        )],
        status: usize,
    ) -> Vec<&'static (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
    )> {
        let current = STATUSES[status].1;
        workflow
            .iter()
            .filter(|(_, _, from, to)| match from {
                Some(from) => *from == current,
                None => *to != current,
            })
            .collect()
    }

    pub(super) fn get_transitions(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        Ok(Reply::json(
            200,
            json!({"expand": "transitions", "transitions": self.transitions_json(&self.issues[&id])}),
        ))
    }

    /// The transitions an issue offers now, as `GET …/transitions` lists them and as
    /// `GET /issue/{key}?expand=transitions` adds them to the issue ("`transitions` Returns all
    /// possible transitions for the issue": the `expand` of Get issue in Atlassian's description
    /// of Cloud, and in Data Center's REST reference).
    pub(super) fn transitions_json(&self, issue: &Issue) -> Vec<Value> {
        Self::offered_in(Self::workflow(issue), issue.status)
            .into_iter()
            .map(|(tid, name, _, to)| {
                let (sid, _) = STATUSES.iter().find(|(_, n)| n == to).expect("status");
                json!({"id": tid, "name": name,
                       "to": {"self": format!("{}/rest/api/2/status/{sid}", self.base), "id": sid, "name": to},
                       "hasScreen": false, "isGlobal": from_any(tid), "isInitial": false, "isConditional": false})
            })
            .collect()
    }

    pub(super) fn do_transition(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let body = Self::body_json(request)?;
        let Some(tid) = body.get("transition").and_then(|t| {
            t.get("id").and_then(|i| {
                i.as_str()
                    .map(String::from)
                    .or_else(|| i.as_u64().map(|n| n.to_string()))
            })
        }) else {
            return Err(Reply::error(400, "Missing 'transition' identifier"));
        };
        let redirect = self.redirects.get(&tid).copied();
        let lag = self.search_lag;
        let issue = self.issues.get_mut(&id).expect("found");
        // Cloud: "if multiple issue transitions are requested at the same time, only one of
        // those transitions will succeed", the others answer 409 (Conflict) "and your app should
        // employ a retry mechanism" (developer.atlassian.com/cloud/jira/platform/
        // change-notice-update-in-simultaneous-transitions-issue-api/; 409 "Returned if the issue
        // could not be updated due to a conflicting update" in Atlassian's description). The
        // transition that won, when a test names one, has moved the issue already. The notice
        // gives no body; Jira's usual error shape is used.
        if let Some(won) = self
            .collisions
            .get_mut(&issue.key)
            .and_then(std::collections::VecDeque::pop_front)
        {
            if let Some(status) = won {
                issue.status = STATUSES
                    .iter()
                    .position(|(_, n)| *n == status)
                    .expect("status");
                issue.touch(now_ms(), lag);
            }
            return Err(Reply::error(
                409,
                "The issue could not be updated due to a conflicting update.",
            ));
        }
        let Some((_, _, _, to)) = Self::offered_in(Self::workflow(issue), issue.status)
            .into_iter()
            .find(|(t, _, _, _)| *t == tid)
        else {
            return Err(Reply::error(
                400,
                &format!(
                    "It seems that you have tried to perform a workflow operation ({tid}) that is not valid for the current state of this issue ({}). The likely cause is that somebody has changed the issue recently, please look at the issue history for details.",
                    issue.key
                ),
            ));
        };
        let to = redirect.unwrap_or(to);
        issue.status = STATUSES.iter().position(|(_, n)| *n == to).expect("status");
        issue.touch(now_ms(), lag);
        Ok(Reply::empty(204))
    }
}

impl FakeJira {
    /// A post-function of transition `tid` leaves the issue in `status` instead of the
    /// transition's target (as a "fast-track" or "update issue field: status" post-function
    /// does: Atlassian's "Configure advanced work item workflows"/post functions documentation).
    pub fn redirect_transition(&self, tid: &str, status: &'static str) {
        lock(&self.state).redirects.insert(tid.to_string(), status);
    }

    /// The next transition of `key` collides with another one Jira is still executing (Cloud's
    /// 409): once per call, in order; `won` is where the other transition leaves the issue
    /// (`None`: it had not changed the status yet).
    pub fn collide_transition(&self, key: &str, won: Option<&'static str>) {
        lock(&self.state)
            .collisions
            .entry(key.to_string())
            .or_default()
            .push_back(won);
    }

    pub fn status_of(&self, key: &str) -> Option<String> {
        let state = lock(&self.state);
        let id = state.by_key.get(key)?;
        Some(STATUSES[state.issues[id].status].1.to_string())
    }
}
