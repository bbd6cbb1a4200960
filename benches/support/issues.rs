//! The raw Jira issues the benchmarks feed the hub (`benches/service.rs`, `benches/ingest.rs`):
//! one generator, so that their figures speak of the same pages.

use jira_hub::jira::FieldIds;
use serde_json::{Value, json};

/// A realistic raw issue: custom fields, a sprint, a description, two links and two comments.
pub fn raw_issue(n: usize) -> Value {
    let key = format!("AURORA-{n}");
    json!({"id": (100_000 + n).to_string(), "key": key, "fields": {
        "summary": format!("Задача номер {n}: подготовить отчёт по складу"),
        "description": "Описание задачи. ".repeat(40),
        "status": {"name": "В работе", "id": "3"},
        "issuetype": {"name": "Задача", "id": "10002"},
        "priority": {"name": "Средний", "id": "3"},
        "assignee": {"name": "ivanov", "displayName": "Иван Иванов"},
        "reporter": {"name": "petrov", "displayName": "Пётр Петров"},
        "labels": ["AWPCA"],
        "created": "2026-03-05T10:15:30.000+0300",
        "updated": "2026-03-06T10:15:30.000+0300",
        "duedate": "2026-04-01",
        "customfield_10101": format!("AURORA-{}", n / 50 * 50 + 1),
        "customfield_10105": ["com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=5,rapidViewId=4216,state=ACTIVE,name=Sprint 5,startDate=2026-03-01T10:00:00.000+03:00,endDate=<null>,completeDate=<null>,sequence=5]"],
        "customfield_12001": "2026-03-01",
        "customfield_12002": "2026-03-31",
        "issuelinks": [
            {"id": (n * 2).to_string(), "type": {"name": "Blocks"}, "outwardIssue": {"key": format!("AURORA-{}", n + 1)}},
            {"id": (n.saturating_sub(1) * 2).to_string(), "type": {"name": "Blocks"}, "inwardIssue": {"key": format!("AURORA-{}", n.saturating_sub(1))}}
        ],
        "comment": {"comments": [
            {"id": format!("{n}1"), "author": {"name": "ivanov"}, "body": "Первый комментарий", "created": "2026-03-05T10:15:30.000+0300"},
            {"id": format!("{n}2"), "author": {"name": "petrov"}, "body": "Второй комментарий", "created": "2026-03-05T11:15:30.000+0300"}
        ]}
    }})
}

#[allow(dead_code)] // not every benchmark maps issues itself
pub fn field_ids() -> FieldIds {
    FieldIds {
        epic_link: Some("customfield_10101".into()),
        sprint: Some("customfield_10105".into()),
        plan_start: Some("customfield_12001".into()),
        plan_end: Some("customfield_12002".into()),
    }
}
