//! Jira Software's Agile REST API 1.0: boards, sprints, the sprint field's value and adding issues
//! to a sprint.

use super::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub(super) struct Sprint {
    pub(super) id: u64,
    pub(super) board: u64,
    pub(super) name: String,
    pub(super) state: String,
}

impl StateInner {
    pub(super) fn board_json(&self, id: u64) -> Option<Value> {
        let (name, kind) = self.boards.get(&id)?;
        Some(
            json!({"id": id, "self": format!("{}/rest/agile/1.0/board/{id}", self.base),
                    "name": name, "type": kind,
                    "location": {"projectKey": PROJECT, "displayName": format!("Проект {PROJECT} ({PROJECT})")}}),
        )
    }

    pub(super) fn board_id(request: &Request) -> Result<u64, Reply> {
        request.segments[4]
            .parse()
            .map_err(|_| Reply::error(400, "The board id must be a number."))
    }

    pub(super) fn board(&self, request: &Request) -> Result<Reply, Reply> {
        let id = Self::board_id(request)?;
        self.board_json(id)
            .map(|b| Reply::json(200, b))
            .ok_or_else(|| {
                Reply::error(
                    404,
                    "Board does not exist or you do not have permission to see it.",
                )
            })
    }

    pub(super) fn boards(&self, request: &Request) -> Reply {
        let kind = request.param("type");
        let values: Vec<Value> = self
            .boards
            .iter()
            .filter(|(_, (_, k))| kind.is_none_or(|kind| kind == k))
            .filter_map(|(id, _)| self.board_json(*id))
            .collect();
        paged(request, values, 50)
    }

    pub(super) fn sprints(&self, request: &Request) -> Result<Reply, Reply> {
        let id = Self::board_id(request)?;
        let Some((_, kind)) = self.boards.get(&id) else {
            return Err(Reply::error(
                404,
                "Board does not exist or you do not have permission to see it.",
            ));
        };
        if kind != "scrum" {
            return Err(Reply::error(400, "The board does not support sprints"));
        }
        let states: Option<Vec<&str>> = request.param("state").map(|s| s.split(',').collect());
        let values: Vec<Value> = self
            .sprints
            .iter()
            .filter(|s| s.board == id)
            .filter(|s| {
                states
                    .as_ref()
                    .is_none_or(|states| states.contains(&s.state.as_str()))
            })
            .map(|s| self.sprint_json(s))
            .collect();
        Ok(paged(request, values, 50))
    }

    pub(super) fn sprint_json(&self, sprint: &Sprint) -> Value {
        let start = agile_time(1_772_431_200_000 + (sprint.id as i64 - 740) * 14 * 86_400_000);
        let end = agile_time(1_773_640_800_000 + (sprint.id as i64 - 740) * 14 * 86_400_000);
        let mut value = json!({"id": sprint.id, "self": format!("{}/rest/agile/1.0/sprint/{}", self.base, sprint.id),
                               "state": sprint.state, "name": sprint.name, "originBoardId": sprint.board});
        if sprint.state != "future" {
            value["startDate"] = start.into();
            value["endDate"] = end.clone().into();
        }
        if sprint.state == "closed" {
            value["completeDate"] = end.into();
        }
        value
    }

    /// The sprint field's value: Server's `toString` form on DC, objects on Cloud.
    pub(super) fn sprint_value(&self, sprint_id: u64) -> Value {
        let Some(sprint) = self.sprints.iter().find(|s| s.id == sprint_id) else {
            return json!([]);
        };
        match self.mode {
            Mode::DataCenter => json!([format!(
                "com.atlassian.greenhopper.service.sprint.Sprint@5c1a3f2e[id={},rapidViewId={},state={},name={},startDate=2026-03-02T09:00:00.000+03:00,endDate=2026-03-16T09:00:00.000+03:00,completeDate=<null>,activatedDate=2026-03-02T09:00:00.000+03:00,sequence={},goal=,autoStartStop=false,synced=false]",
                sprint.id,
                sprint.board,
                sprint.state.to_uppercase(),
                sprint.name,
                sprint.id
            )]),
            Mode::Cloud => json!([{"id": sprint.id, "name": sprint.name, "state": sprint.state,
                                   "boardId": sprint.board, "goal": ""}]),
        }
    }

    pub(super) fn add_to_sprint(&mut self, request: &Request) -> Result<Reply, Reply> {
        let sprint_id: u64 = request.segments[4]
            .parse()
            .map_err(|_| Reply::error(400, "Number value expected as the Sprint id."))?;
        if !self.sprints.iter().any(|s| s.id == sprint_id) {
            return Err(Reply::error(
                404,
                &format!(
                    "Sprint with id {sprint_id} does not exist or you do not have permission to see it."
                ),
            ));
        }
        let body = Self::body_json(request)?;
        let keys: Vec<String> = body["issues"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let ids = keys
            .iter()
            .map(|k| self.find(k))
            .collect::<Result<Vec<u64>, Reply>>()?;
        let value = self.sprint_value(sprint_id);
        let (now, lag) = (now_ms(), self.search_lag);
        for id in ids {
            let issue = self.issues.get_mut(&id).expect("found");
            issue.fields.insert(SPRINT_FIELD.into(), value.clone());
            issue.touch(now, lag);
        }
        Ok(Reply::empty(204))
    }
}

impl FakeJira {
    pub fn add_board(&self, id: u64, name: &str, kind: &str) {
        lock(&self.state)
            .boards
            .insert(id, (name.to_string(), kind.to_string()));
    }

    /// A person (`by`) moves an issue into a sprint on the board (drag and drop, or the issue's
    /// Sprint field): the field takes that sprint's value as the Agile API's move gives it ("Move
    /// issues to sprint and rank": the issue leaves its open sprint; Jira Software Cloud REST
    /// reference, Sprint group), and the changelog gets a history by `by` on the custom field
    /// (Data Center names it "Sprint", Cloud adds its `fieldId`), as any edit of the field does.
    pub fn move_to_sprint(&self, key: &str, sprint: u64, by: &str) {
        let mut state = lock(&self.state);
        let id = state.by_key[key];
        let author = state.person(by);
        let value = state.sprint_value(sprint);
        let mut fields = serde_json::Map::new();
        fields.insert(SPRINT_FIELD.into(), value);
        state.set_fields(id, fields, author);
    }

    pub fn add_sprint(&self, board: u64, id: u64, name: &str, state: &str) {
        lock(&self.state).sprints.push(Sprint {
            id,
            board,
            name: name.to_string(),
            state: state.to_string(),
        });
    }
}
