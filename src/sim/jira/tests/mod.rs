//! The simulated Jira's own tests: each behaviour as Jira shows it.

use super::*;
use serde_json::{Value, json};
use std::time::Duration;

mod access;
mod issues;
mod search;

const T: Duration = Duration::from_secs(10);

fn get(fake: &FakeJira, path: &str) -> Answer {
    call(&fake.url(), "GET", path, Some(&basic_auth()), None, T).expect("answer")
}

fn post(fake: &FakeJira, path: &str, body: Value) -> Answer {
    call(
        &fake.url(),
        "POST",
        path,
        Some(&basic_auth()),
        Some(&body),
        T,
    )
    .expect("answer")
}

fn search(fake: &FakeJira, jql: &str, start_at: usize, max: usize) -> Answer {
    get(
        fake,
        &format!(
            "/rest/api/2/search?jql={}&startAt={start_at}&maxResults={max}&fields=summary,labels",
            encode(jql)
        ),
    )
}

fn keys(answer: &Answer) -> Vec<String> {
    answer.json()["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .map(|i| i["key"].as_str().expect("key").to_string())
        .collect()
}

fn create(fake: &FakeJira, summary: &str, labels: &[&str]) -> String {
    let answer = post(
        fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": summary, "labels": labels}}),
    );
    assert_eq!(answer.status, 201, "{answer:?}");
    answer.json()["key"].as_str().expect("key").to_string()
}

fn put(fake: &FakeJira, path: &str, body: Value) -> Answer {
    call(
        &fake.url(),
        "PUT",
        path,
        Some(&basic_auth()),
        Some(&body),
        T,
    )
    .expect("answer")
}

fn call_as(fake: &FakeJira, method: &str, path: &str, auth: Option<&str>) -> Answer {
    call(&fake.url(), method, path, auth, None, T).expect("answer")
}
