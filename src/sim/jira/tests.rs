//! The simulated Jira's own tests: each behaviour as Jira shows it.

use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

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

#[test]
fn identity_and_auth() {
    let fake = FakeJira::start(Mode::DataCenter);
    let info = get(&fake, "/rest/api/2/serverInfo").json();
    assert_eq!(info["deploymentType"], "Server");
    let me = call(
        &fake.url(),
        "GET",
        "/rest/api/2/myself",
        Some(&bearer_auth()),
        None,
        T,
    )
    .unwrap();
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["name"], USER);
    assert!(me.json()["accountId"].is_string() && me.json()["timeZone"].is_string());
    for auth in [None, Some("Basic YWdlbnQ6d3Jvbmc="), Some("Bearer nope")] {
        let answer = call(&fake.url(), "GET", "/rest/api/2/myself", auth, None, T).unwrap();
        assert_eq!(answer.status, 401);
        assert!(
            answer.json()["errorMessages"][0]
                .as_str()
                .unwrap()
                .contains("not authenticated")
        );
    }
    let cloud = FakeJira::start(Mode::Cloud);
    assert_eq!(
        get(&cloud, "/rest/api/2/serverInfo").json()["deploymentType"],
        "Cloud"
    );
}

#[test]
fn the_jql_subset() {
    let fake = FakeJira::start(Mode::DataCenter);
    let a = fake.seed_issues(PROJECT, "AWPCA", 3);
    let b = fake.seed_issues(PROJECT, "STOCKS", 2);
    fake.seed_issues("OTHER", "AWPCA", 2);
    let all = |jql: &str| keys(&search(&fake, jql, 0, 100));
    assert_eq!(all(r#"project = AURORA AND labels in ("AWPCA")"#), a);
    assert_eq!(
        all(r#"project = AURORA and labels in ("AWPCA", "STOCKS") ORDER BY id ASC"#),
        [a.clone(), b.clone()].concat()
    );
    assert_eq!(all("project = AURORA AND labels = STOCKS"), b);
    assert_eq!(
        all(r#"(project = AURORA AND labels = "AWPCA") AND key in (AURORA-2, AURORA-3)"#),
        a[1..]
    );
    let second: u64 = fake.issue(&a[1]).unwrap()["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        all(&format!(
            "project = AURORA AND id > {second} order by id asc"
        )),
        [a[2..].to_vec(), b.clone()].concat()
    );
    assert_eq!(all(&format!("key = {}", a[0])), a[..1]);
    // Seeded issues are from 2026-01-01, a minute apart; the created ones are new.
    let made = create(&fake, "новая", &["AWPCA"]);
    assert_eq!(
        all(&format!(
            "created >= {} AND reporter = currentUser()",
            now_ms() - 60_000
        )),
        std::slice::from_ref(&made)
    );
    assert_eq!(all(&format!("updated >= {}", now_ms() - 60_000)), [made]);
    for bad in [
        "project = AURORA OR labels = A",
        "project = AURORA AND",
        "summary ~ \"x\"",
        "labels in (\"A\"",
        "created >= \"2026/01/01\"",
        "project = AURORA ORDER BY updated DESC",
        "project = \"AURORA",
    ] {
        let answer = search(&fake, bad, 0, 10);
        assert_eq!(answer.status, 400, "{bad}");
        assert!(
            answer.json()["errorMessages"][0]
                .as_str()
                .unwrap()
                .starts_with("Error in the JQL Query: "),
            "{bad}: {}",
            answer.body
        );
        assert_eq!(answer.json()["errors"], json!({}));
    }
    let answer = search(&fake, "project = NOPE", 0, 10);
    assert_eq!(answer.status, 400);
}

#[test]
fn the_issue_key_clause_is_jiras() {
    let fake = FakeJira::start(Mode::DataCenter);
    let a = fake.seed_issues(PROJECT, "AWPCA", 3);
    let other = fake.seed_issues("OTHER", "AWPCA", 2);
    // OTHER-1 (an older id than AURORA-3? no: a newer id) moves in: it takes AURORA-4.
    let moved_in = fake.move_issue(&other[0], PROJECT);
    assert_eq!(moved_in, "AURORA-4");
    let id_of = |key: &str| fake.issue(key).unwrap()["id"].as_str().unwrap().to_string();
    let all = |jql: &str| keys(&search(&fake, jql, 0, 100));
    // `id > N`: N's project, key number above N's.
    assert_eq!(
        all(&format!("id > {} ORDER BY id ASC", id_of(&a[0]))),
        [&a[1..], std::slice::from_ref(&moved_in)].concat()
    );
    assert_eq!(
        all(r#"key > "AURORA-2" ORDER BY key ASC"#),
        [a[2].clone(), moved_in.clone()]
    );
    assert_eq!(
        all(r#"issuekey >= "AURORA-3" order by issuekey"#),
        [a[2].clone(), moved_in.clone()]
    );
    assert_eq!(all(r#"issue < "AURORA-2""#), a[..1]);
    assert_eq!(
        all(r#"labels = AWPCA AND project not in ("AURORA") ORDER BY key ASC"#),
        [other[1].clone()]
    );
    // ORDER BY key: by project, then key number (not by id).
    assert_eq!(
        all("labels = AWPCA ORDER BY key ASC"),
        [a.clone(), vec![moved_in.clone(), other[1].clone()]].concat()
    );
    // A gone key in a comparison is refused in Jira's words.
    let refused = |jql: &str| {
        let answer = search(&fake, jql, 0, 10);
        assert_eq!(answer.status, 400, "{jql}");
        answer.json()["errorMessages"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        refused(r#"key > "OTHER-1""#),
        "Operator '>' cannot be applied to moved issue key 'OTHER-1'."
    );
    fake.delete_issue(&a[1]);
    assert_eq!(
        refused(r#"project = AURORA AND key > "AURORA-2" ORDER BY key ASC"#),
        "An issue with key 'AURORA-2' does not exist for field 'key'."
    );
    assert_eq!(
        refused("id > 99999"),
        "A value with ID '99999' does not exist for the field 'id'."
    );
    // The moved issue's old key still opens it (as its new key).
    let answer = get(&fake, "/rest/api/2/issue/OTHER-1");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["key"], "AURORA-4");
}

#[test]
fn data_center_paging_clamps_and_stops_at_the_window() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.seed_issues(PROJECT, "AWPCA", 10_050);
    fake.set_max_results(700);
    let jql = "project = AURORA AND labels in (\"AWPCA\")";
    let first = search(&fake, jql, 0, 1000).json();
    assert_eq!(first["maxResults"], 700, "Jira gives fewer than asked");
    assert_eq!(first["total"], 10_050);
    assert_eq!(first["issues"].as_array().unwrap().len(), 700);
    let mut seen = 0;
    let mut start = 0;
    while start + 700 <= 10_000 {
        let page = search(&fake, jql, start, 700).json();
        seen += page["issues"].as_array().unwrap().len();
        start += 700;
    }
    assert_eq!(seen, 9_800);
    let beyond = search(&fake, jql, 9_800, 700);
    assert_eq!(beyond.status, 400);
    assert!(
        beyond.json()["errorMessages"][0]
            .as_str()
            .unwrap()
            .starts_with("Search limit exceeded")
    );
    // Keyset paging past the window works.
    let last: u64 = fake.issues()[9_999]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let rest = search(
        &fake,
        &format!("{jql} AND id > {last} ORDER BY id ASC"),
        0,
        700,
    )
    .json();
    assert_eq!(rest["total"], 50);
    // maxResults=0 counts; the default page is 50.
    assert_eq!(search(&fake, jql, 0, 0).json()["issues"], json!([]));
    let default = get(&fake, &format!("/rest/api/2/search?jql={}", encode(jql))).json();
    assert_eq!(default["issues"].as_array().unwrap().len(), 50);
    let raw = &default["issues"][0];
    assert!(raw["id"].is_string() && raw["self"].is_string());
    let created = raw["fields"]["created"].as_str().unwrap();
    assert_eq!(created, "2026-01-01T03:00:00.000+0300");
    assert_eq!(raw["fields"]["status"]["name"], "Открыта");
    assert_eq!(raw["fields"]["comment"]["total"], 0);
    assert!(fake.calls(Endpoint::Search) > 10);
}

#[test]
fn cloud_search_pages_by_token_and_lags() {
    let fake = FakeJira::start(Mode::Cloud);
    fake.seed_issues(PROJECT, "AWPCA", 2_500);
    let gone = search(&fake, "project = AURORA", 0, 10);
    assert_eq!(gone.status, 410);
    assert!(
        gone.json()["errorMessages"][0]
            .as_str()
            .unwrap()
            .contains("/search/jql")
    );
    let jql = encode("project = AURORA AND labels in (\"AWPCA\")");
    let ids_only = get(&fake, &format!("/rest/api/2/search/jql?jql={jql}")).json();
    assert_eq!(ids_only["issues"].as_array().unwrap().len(), 50);
    assert_eq!(
        ids_only["issues"][0],
        json!({"id": "10000"}),
        "Cloud's default fields: id"
    );
    assert!(ids_only.get("total").is_none());
    let mut token: Option<String> = None;
    let mut keys_seen = Vec::new();
    let mut pages = 0;
    loop {
        let mut path = format!("/rest/api/2/search/jql?jql={jql}&maxResults=1000&fields=summary");
        if let Some(token) = &token {
            path.push_str(&format!("&nextPageToken={}", encode(token)));
        }
        let page = get(&fake, &path).json();
        pages += 1;
        keys_seen.extend(keys(&Answer {
            status: 200,
            headers: vec![],
            body: page.to_string(),
        }));
        if page["isLast"] == true {
            assert!(page.get("nextPageToken").is_none());
            break;
        }
        token = Some(page["nextPageToken"].as_str().unwrap().to_string());
    }
    assert_eq!(pages, 3);
    assert_eq!(keys_seen.len(), 2_500);
    let bad = get(
        &fake,
        &format!("/rest/api/2/search/jql?jql={jql}&nextPageToken=garbage"),
    );
    assert_eq!(bad.status, 400);
    assert_eq!(
        bad.json()["errorMessages"][0],
        "The provided next page token is invalid or expired."
    );
    assert_eq!(
        get(
            &fake,
            &format!("/rest/api/2/search/jql?jql={jql}&maxResults=6000")
        )
        .status,
        400
    );
    assert_eq!(
        get(&fake, "/rest/api/2/search/jql?jql=").status,
        400,
        "unbounded"
    );

    fake.set_search_lag(Duration::from_millis(1500));
    let key = create(&fake, "свежая", &["FRESH"]);
    let fresh = encode("labels = FRESH");
    let path = format!("/rest/api/2/search/jql?jql={fresh}&fields=summary");
    assert_eq!(
        get(&fake, &path).json()["issues"],
        json!([]),
        "not yet indexed"
    );
    assert_eq!(
        get(&fake, &format!("/rest/api/2/issue/{key}")).status,
        200,
        "but readable by key"
    );
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(get(&fake, &path).json()["issues"][0]["key"], key.as_str());
}

#[test]
fn issues_transitions_and_comments() {
    let fake = FakeJira::start(Mode::DataCenter);
    let missing = get(&fake, "/rest/api/2/issue/AURORA-999");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json(),
        json!({"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}})
    );
    let no_summary = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}}}),
    );
    assert_eq!(no_summary.status, 400);
    assert_eq!(
        no_summary.json(),
        json!({"errorMessages": [], "errors": {"summary": "You must specify a summary of the issue."}})
    );
    assert_eq!(
        post(&fake, "/rest/api/2/issue", json!({"fields": {}})).json()["errors"]["project"],
        "Specify a valid project ID or key"
    );
    let sprint_text = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}, "summary": "s", SPRINT_FIELD: "Sprint 5"}}),
    );
    assert_eq!(sprint_text.status, 400);

    let epic = create(&fake, "эпик", &["AWPCA"]);
    let answer = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"id": "10002"},
        "summary": "задача", "description": "d", "labels": ["AWPCA"], EPIC_LINK_FIELD: epic, "priority": {"name": "Высокий"}}}),
    );
    assert_eq!(answer.status, 201);
    let key = answer.json()["key"].as_str().unwrap().to_string();
    assert!(answer.json()["id"].is_string() && answer.json()["self"].is_string());
    assert_eq!(fake.creates_of("задача"), 1);
    let issue = get(
        &fake,
        &format!("/rest/api/2/issue/{key}?fields=summary,issuetype,reporter,{EPIC_LINK_FIELD}"),
    )
    .json();
    assert_eq!(issue["fields"]["issuetype"]["name"], "Задача");
    assert_eq!(issue["fields"]["reporter"]["name"], USER);
    assert_eq!(issue["fields"][EPIC_LINK_FIELD], epic.as_str());
    assert!(
        issue["fields"].get("description").is_none(),
        "fields= filters"
    );
    let created = fake.issue(&key).unwrap()["fields"]["created"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        created.ends_with("+0300") && created.len() == 28,
        "{created}"
    );

    let put = call(
        &fake.url(),
        "PUT",
        &format!("/rest/api/2/issue/{key}"),
        Some(&basic_auth()),
        Some(&json!({"fields": {"summary": "задача 2", "duedate": "2026-04-01"}})),
        T,
    )
    .unwrap();
    assert_eq!(put.status, 204);
    assert_eq!(fake.issue(&key).unwrap()["fields"]["duedate"], "2026-04-01");

    let offered = get(&fake, &format!("/rest/api/2/issue/{key}/transitions")).json();
    let ids: Vec<&str> = offered["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["11", "31"]);
    let wrong = post(
        &fake,
        &format!("/rest/api/2/issue/{key}/transitions"),
        json!({"transition": {"id": "21"}}),
    );
    assert_eq!(wrong.status, 400);
    assert!(wrong.json()["errorMessages"][0].as_str().unwrap().starts_with("It seems that you have tried to perform a workflow operation (21) that is not valid for the current state of this issue (AURORA-2)."));
    assert_eq!(
        post(
            &fake,
            &format!("/rest/api/2/issue/{key}/transitions"),
            json!({"transition": {"id": "11"}})
        )
        .status,
        204
    );
    assert_eq!(fake.status_of(&key).unwrap(), "В работе");
    assert_eq!(
        post(
            &fake,
            &format!("/rest/api/2/issue/{key}/transitions"),
            json!({})
        )
        .status,
        400
    );

    let comment = post(
        &fake,
        &format!("/rest/api/2/issue/{key}/comment"),
        json!({"body": "первый"}),
    );
    assert_eq!(comment.status, 201);
    assert_eq!(comment.json()["author"]["name"], USER);
    assert!(comment.json()["id"].is_string() && comment.json()["created"].is_string());
    post(
        &fake,
        &format!("/rest/api/2/issue/{key}/comment"),
        json!({"body": "второй"}),
    );
    let page = get(
        &fake,
        &format!("/rest/api/2/issue/{key}/comment?startAt=1&maxResults=1"),
    )
    .json();
    assert_eq!(page["total"], 2);
    assert_eq!(page["comments"][0]["body"], "второй");
    assert_eq!(fake.issue(&key).unwrap()["fields"]["comment"]["total"], 2);
    assert_eq!(
        post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": {"type": "doc"}})
        )
        .status,
        400
    );
}

#[test]
fn links_are_made_from_the_inward_issue_and_duplicate() {
    let fake = FakeJira::start(Mode::DataCenter);
    let a = create(&fake, "a", &[]);
    let b = create(&fake, "b", &[]);
    let body =
        json!({"type": {"name": "Blocker"}, "inwardIssue": {"key": a}, "outwardIssue": {"key": b}});
    let answer = post(&fake, "/rest/api/2/issueLink", body.clone());
    assert_eq!(answer.status, 201);
    assert_eq!(answer.body, "", "Jira answers a link with an empty body");
    let links = fake.links();
    assert_eq!(
        links,
        [LinkView {
            id: links[0].id.clone(),
            type_name: "Blocker".into(),
            source: a.clone(),
            target: b.clone()
        }]
    );
    let on_a = &fake.issue(&a).unwrap()["fields"]["issuelinks"][0];
    assert_eq!(on_a["outwardIssue"]["key"], b.as_str());
    assert_eq!(
        on_a["type"],
        json!({"id": "10032", "name": "Blocker", "inward": "is blocked by", "outward": "blocks", "self": format!("{}/rest/api/2/issueLinkType/10032", fake.url())})
    );
    let on_b = &fake.issue(&b).unwrap()["fields"]["issuelinks"][0];
    assert_eq!(on_b["inwardIssue"]["key"], a.as_str());
    assert_eq!(on_a["id"], on_b["id"]);
    assert_eq!(post(&fake, "/rest/api/2/issueLink", body).status, 201);
    assert_eq!(
        fake.links().len(),
        2,
        "a duplicate POST makes a second link"
    );
    let unknown = post(
        &fake,
        "/rest/api/2/issueLink",
        json!({"type": {"name": "Haunts"}, "inwardIssue": {"key": a}, "outwardIssue": {"key": b}}),
    );
    assert_eq!(unknown.status, 404);
    assert_eq!(
        unknown.json()["errorMessages"][0],
        "No issue link type with name 'Haunts' found."
    );
}

#[test]
fn agile_boards_and_sprints() {
    let fake = FakeJira::start(Mode::DataCenter);
    assert_eq!(
        get(&fake, "/rest/agile/1.0/board/4216").json()["type"],
        "scrum"
    );
    assert_eq!(
        get(&fake, "/rest/agile/1.0/board/4217").json()["type"],
        "kanban"
    );
    assert_eq!(get(&fake, "/rest/agile/1.0/board/1").status, 404);
    let boards = get(&fake, "/rest/agile/1.0/board?maxResults=1").json();
    assert_eq!(
        (boards["total"].as_u64(), boards["isLast"].as_bool()),
        (Some(2), Some(false))
    );
    let sprints = get(
        &fake,
        "/rest/agile/1.0/board/4216/sprint?state=active,future",
    )
    .json();
    let names: Vec<&str> = sprints["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Sprint 5", "Sprint 6"]);
    assert!(
        sprints["values"][0]["startDate"]
            .as_str()
            .unwrap()
            .ends_with("+03:00")
    );
    assert_eq!(get(&fake, "/rest/agile/1.0/board/4217/sprint").status, 400);
    let key = create(&fake, "в спринт", &[]);
    let answer = post(
        &fake,
        "/rest/agile/1.0/sprint/741/issue",
        json!({"issues": [key]}),
    );
    assert_eq!(answer.status, 204);
    let sprint = fake.issue(&key).unwrap()["fields"][SPRINT_FIELD][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        sprint.starts_with("com.atlassian.greenhopper.service.sprint.Sprint@")
            && sprint.contains("name=Sprint 5")
    );
}

#[test]
fn faults_on_demand() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.fault(
        Endpoint::Myself,
        Fault::TooManyRequests {
            retry_after: Some(7),
            html: false,
        },
        1,
    );
    fake.fault(
        Endpoint::Myself,
        Fault::TooManyRequests {
            retry_after: None,
            html: true,
        },
        1,
    );
    fake.fault(Endpoint::Myself, Fault::Unavailable, 1);
    let first = get(&fake, "/rest/api/2/myself");
    assert_eq!(
        (first.status, first.header("retry-after")),
        (429, Some("7"))
    );
    assert!(first.json()["errorMessages"].is_array());
    let second = get(&fake, "/rest/api/2/myself");
    assert_eq!((second.status, second.header("retry-after")), (429, None));
    assert!(second.body.contains("Oops - an error has occurred"));
    assert!(
        second
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 503);
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);

    // A create applied, then the connection dropped: no answer, one issue.
    fake.fault(Endpoint::CreateIssue, Fault::DropAfterApply, 1);
    let body = json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}, "summary": "упавшая"}});
    assert!(
        call(
            &fake.url(),
            "POST",
            "/rest/api/2/issue",
            Some(&basic_auth()),
            Some(&body),
            T
        )
        .is_err()
    );
    assert_eq!(fake.creates_of("упавшая"), 1);
    fake.fault(Endpoint::CreateIssue, Fault::DropBeforeApply, 1);
    let body = json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}, "summary": "несделанная"}});
    assert!(
        call(
            &fake.url(),
            "POST",
            "/rest/api/2/issue",
            Some(&basic_auth()),
            Some(&body),
            T
        )
        .is_err()
    );
    assert_eq!(fake.creates_of("несделанная"), 0);

    // Slow: the client gives up, the write still lands.
    fake.fault(
        Endpoint::AddComment,
        Fault::Slow(Duration::from_millis(800)),
        1,
    );
    let key = create(&fake, "медленная", &[]);
    let started = Instant::now();
    let timed_out = call(
        &fake.url(),
        "POST",
        &format!("/rest/api/2/issue/{key}/comment"),
        Some(&basic_auth()),
        Some(&json!({"body": "поздний"})),
        Duration::from_millis(200),
    );
    assert!(timed_out.is_err());
    while fake.comments(&key).is_empty() {
        assert!(started.elapsed() < T, "the slow write never landed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fake.faults_pending(), 0);
    let seen = fake.requests();
    assert!(
        seen.iter()
            .any(|r| r.status == 0 && r.endpoint == Endpoint::CreateIssue)
    );
    assert!(seen.iter().all(|r| r.path.starts_with("/rest/")));
}

#[test]
fn rate_limit_mode() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.rate_limit(Some(3));
    let statuses: Vec<u16> = (0..6)
        .map(|_| get(&fake, "/rest/api/2/myself").status)
        .collect();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert!(limited >= 2, "{statuses:?}");
    let answer = get(&fake, "/rest/api/2/myself");
    if answer.status == 429 {
        assert_eq!(answer.header("retry-after"), Some("1"));
    }
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
    fake.rate_limit(None);
    assert!((0..10).all(|_| get(&fake, "/rest/api/2/myself").status == 200));
}

#[test]
fn times_are_jiras() {
    assert_eq!(jira_time(1_772_694_930_000), "2026-03-05T10:15:30.000+0300");
    assert_eq!(
        agile_time(1_772_694_930_000),
        "2026-03-05T10:15:30.000+03:00"
    );
    assert_eq!(base64("agent:secret"), "YWdlbnQ6c2VjcmV0");
    assert_eq!(base64("ab"), "YWI=");
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

#[test]
fn labels_are_replaced_by_fields_and_added_by_update() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = create(&fake, "Метки", &["A", "B"]);
    let path = format!("/rest/api/2/issue/{key}");
    let answer = put(
        &fake,
        &path,
        json!({"update": {"labels": [{"add": "C"}, {"add": "A"}]}}),
    );
    assert_eq!(answer.status, 204, "{answer:?}");
    assert_eq!(fake.labels_of(&key), ["A", "B", "C"]);
    put(
        &fake,
        &path,
        json!({"update": {"labels": [{"remove": "B"}]}}),
    );
    assert_eq!(fake.labels_of(&key), ["A", "C"]);
    put(&fake, &path, json!({"fields": {"labels": ["D"]}}));
    assert_eq!(
        fake.labels_of(&key),
        ["D"],
        "fields.labels replaces the set"
    );
    let both = put(
        &fake,
        &path,
        json!({"fields": {"labels": ["E"]}, "update": {"labels": [{"add": "F"}]}}),
    );
    assert_eq!(both.status, 400, "{both:?}");
    assert_eq!(fake.labels_of(&key), ["D"]);
}

#[test]
fn entity_properties_on_create_put_and_comments() {
    let fake = FakeJira::start(Mode::DataCenter);
    let answer = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "С меткой"},
               "properties": [{"key": "jira-hub", "value": {"command": 7}}]}),
    );
    let key = answer.json()["key"].as_str().unwrap().to_string();
    let property = get(
        &fake,
        &format!("/rest/api/2/issue/{key}/properties/jira-hub"),
    );
    assert_eq!(property.status, 200);
    assert_eq!(property.json()["value"]["command"], 7);
    let missing = get(&fake, &format!("/rest/api/2/issue/{key}/properties/other"));
    assert_eq!(missing.status, 404);
    fake.set_create_properties(false);
    let old = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "Старый Jira"},
               "properties": [{"key": "jira-hub", "value": {"command": 8}}]}),
    );
    let old_key = old.json()["key"].as_str().unwrap().to_string();
    assert!(fake.issue_properties(&old_key).is_empty(), "ignored");
    let path = format!("/rest/api/2/issue/{old_key}/properties/jira-hub");
    assert_eq!(put(&fake, &path, json!({"command": 8})).status, 201);
    assert_eq!(put(&fake, &path, json!({"command": 8})).status, 200);
    assert_eq!(fake.issue_properties(&old_key)["jira-hub"]["command"], 8);

    let comment = post(
        &fake,
        &format!("/rest/api/2/issue/{key}/comment"),
        json!({"body": "текст", "properties": [{"key": "jira-hub", "value": {"command": 9}}]}),
    );
    let id = comment.json()["id"].as_str().unwrap().to_string();
    let property = get(
        &fake,
        &format!("/rest/api/2/comment/{id}/properties/jira-hub"),
    );
    assert_eq!(property.json()["value"]["command"], 9);
    assert_eq!(
        get(&fake, "/rest/api/2/comment/1/properties/jira-hub").status,
        404
    );
}

/// `orderBy` on a comment list (both deployments), and Cloud's `POST /comment/list` with its
/// 1,000-id limit, its page shape and `expand=properties`; Data Center has no such path.
#[test]
fn comments_newest_first_and_by_ids() {
    for mode in [Mode::Cloud, Mode::DataCenter] {
        let fake = FakeJira::start(mode);
        let key = create(&fake, "С комментариями", &[]);
        let path = format!("/rest/api/2/issue/{key}/comment");
        let ids: Vec<u64> = (0..3)
            .map(|n| {
                let answer = post(
                    &fake,
                    &path,
                    json!({"body": format!("№{n}"),
                           "properties": [{"key": "jira-hub", "value": {"command": n}}]}),
                );
                answer.json()["id"].as_str().unwrap().parse().unwrap()
            })
            .collect();
        let bodies = |query: &str| -> Vec<String> {
            get(&fake, &format!("{path}?{query}")).json()["comments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["body"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(bodies("orderBy=created"), ["№0", "№1", "№2"], "{mode:?}");
        assert_eq!(
            bodies("orderBy=-created&startAt=1&maxResults=1"),
            ["№1"],
            "{mode:?}"
        );
        assert_eq!(bodies("orderBy=-created")[0], "№2", "{mode:?}");
        assert_eq!(get(&fake, &format!("{path}?orderBy=id")).status, 400);
        let listed = post(
            &fake,
            "/rest/api/2/comment/list?expand=properties",
            json!({"ids": [ids[2], ids[0], 999_999]}),
        );
        if mode == Mode::DataCenter {
            assert_eq!(listed.status, 404, "no such operation on Data Center");
            continue;
        }
        assert_eq!(listed.status, 200);
        let page = listed.json();
        assert_eq!(page["isLast"], true);
        assert_eq!(page["total"], 2, "an unknown id is left out");
        assert_eq!(page["values"][1]["properties"][0]["key"], "jira-hub");
        assert_eq!(page["values"][1]["properties"][0]["value"]["command"], 2);
        let plain = post(&fake, "/rest/api/2/comment/list", json!({"ids": [ids[0]]}));
        assert!(plain.json()["values"][0].get("properties").is_none());
        let too_many: Vec<u64> = (1..=1001).collect();
        for body in [json!({"ids": too_many}), json!({"ids": []})] {
            assert_eq!(post(&fake, "/rest/api/2/comment/list", body).status, 400);
        }
    }
}

#[test]
fn creator_and_jiras_own_clock() {
    let fake = FakeJira::start(Mode::Cloud);
    fake.set_clock_skew_ms(-3_600_000);
    let before = now_ms();
    let key = create(&fake, "Чья", &[]);
    let info = get(&fake, "/rest/api/2/serverInfo").json();
    assert!(info["serverTime"].as_str().is_some());
    let created = fake.issue(&key).unwrap()["fields"]["created"].clone();
    assert!(created.as_str().is_some());
    let jql = format!(
        "project = {PROJECT} AND creator = currentUser() AND created >= {}",
        before - 3_600_000 - 1000
    );
    let found = get(
        &fake,
        &format!("/rest/api/2/search/jql?jql={}&fields=summary", encode(&jql)),
    );
    assert_eq!(keys(&found), [key]);
    let jql = format!("project = {PROJECT} AND creator = currentUser() AND created >= {before}");
    let found = get(
        &fake,
        &format!("/rest/api/2/search/jql?jql={}&fields=summary", encode(&jql)),
    );
    assert!(
        keys(&found).is_empty(),
        "an hour behind the host: {found:?}"
    );
    let me = get(&fake, "/rest/api/2/myself").json();
    assert!(
        me.get("name").is_none() && me["accountId"] == ACCOUNT_ID,
        "{me}"
    );
}

#[test]
fn cloud_keeps_epics_in_parent_and_bodies_as_adf() {
    let cloud = FakeJira::start(Mode::Cloud);
    let epic = create(&cloud, "Эпик", &[]);
    let child = post(
        &cloud,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "В эпике", EPIC_LINK_FIELD: epic}}),
    );
    assert_eq!(child.status, 400, "{child:?}");
    let child = post(
        &cloud,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "В эпике", "parent": {"key": epic}}}),
    );
    assert_eq!(child.status, 201, "{child:?}");
    let comment = post(
        &cloud,
        &format!("/rest/api/2/issue/{epic}/comment"),
        json!({"body": "a  \r\nb\r\n\r\n\r\nc\n"}),
    );
    assert_eq!(comment.json()["body"], "a\nb\n\nc");

    let dc = FakeJira::start(Mode::DataCenter);
    let epic = create(&dc, "Эпик", &[]);
    let child = post(
        &dc,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "В эпике", "parent": {"key": epic}}}),
    );
    assert_eq!(child.status, 400, "parent is for sub-tasks: {child:?}");
}

#[test]
fn a_proxy_answers_504_while_jira_goes_on() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.fault(
        Endpoint::CreateIssue,
        Fault::ProxyTimeout {
            apply_after: Duration::ZERO,
        },
        1,
    );
    let answer = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "Сразу"}}),
    );
    assert_eq!(answer.status, 504);
    assert_eq!(fake.keys_with_summary("Сразу").len(), 1, "applied at once");
    fake.fault(
        Endpoint::CreateIssue,
        Fault::ProxyTimeout {
            apply_after: Duration::from_millis(300),
        },
        1,
    );
    let answer = post(
        &fake,
        "/rest/api/2/issue",
        json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                          "summary": "Позже"}}),
    );
    assert_eq!(answer.status, 504);
    fake.wait_applied(T);
    assert_eq!(fake.keys_with_summary("Позже").len(), 1, "applied later");
}

fn call_as(fake: &FakeJira, method: &str, path: &str, auth: Option<&str>) -> Answer {
    call(&fake.url(), method, path, auth, None, T).expect("answer")
}

#[test]
fn data_center_stamps_every_authenticated_answer_whatever_its_status() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = create(&fake, "Штамп", &[]);
    let answers = [
        get(&fake, "/rest/api/2/serverInfo"),
        post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": "Текст"}),
        ),
        put(
            &fake,
            &format!("/rest/api/2/issue/{key}"),
            json!({"fields": {"summary": "Новая"}}),
        ),
        get(&fake, "/rest/api/2/issue/AURORA-999"),
        post(
            &fake,
            &format!("/rest/api/2/issue/{key}/transitions"),
            json!({"transition": {"id": "21"}}),
        ),
    ];
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 201, 204, 404, 400]);
    for answer in &answers {
        assert_eq!(
            answer.header("X-Seraph-LoginReason"),
            Some("OK"),
            "{answer:?}"
        );
        assert_eq!(answer.header("X-AUSERNAME"), Some(USER), "{answer:?}");
    }
    fake.fault(
        Endpoint::Myself,
        Fault::DataCenterRateLimit { retry_after: 1 },
        1,
    );
    let limited = get(&fake, "/rest/api/2/myself");
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("X-Seraph-LoginReason"), Some("OK"));
    let anonymous = call_as(&fake, "GET", "/rest/api/2/myself", None);
    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.header("X-Seraph-LoginReason"), None);
    let wrong = call_as(
        &fake,
        "GET",
        "/rest/api/2/myself",
        Some("Basic YWdlbnQ6d3Jvbmc="),
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(
        wrong.header("X-Seraph-LoginReason"),
        Some("AUTHENTICATED_FAILED")
    );
    let cloud = FakeJira::start(Mode::Cloud);
    let answer = get(&cloud, "/rest/api/2/myself");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("X-Seraph-LoginReason"), Some("OUT, OK"));
    assert_eq!(answer.header("X-AUSERNAME"), None);
}

#[test]
fn a_captcha_lockout_refuses_every_call_with_jiras_headers() {
    let fake = FakeJira::start(Mode::DataCenter);
    let expected = format!("CAPTCHA_CHALLENGE; login-url={}/login.jsp", fake.url());
    let check = |answer: &Answer| {
        assert_eq!(answer.status, 403, "{answer:?}");
        assert_eq!(
            answer.header("X-Seraph-LoginReason"),
            Some("AUTHENTICATED_FAILED")
        );
        assert_eq!(
            answer.header("X-Authentication-Denied-Reason"),
            Some(expected.as_str())
        );
    };
    fake.fault(Endpoint::Myself, Fault::CaptchaRequired, 1);
    check(&get(&fake, "/rest/api/2/myself"));
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
    fake.captcha_lockout(true);
    for path in ["/rest/api/2/myself", "/rest/api/2/serverInfo"] {
        check(&get(&fake, path));
    }
    check(&call_as(
        &fake,
        "GET",
        "/rest/api/2/myself",
        Some(&bearer_auth()),
    ));
    fake.captcha_lockout(false);
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
}

#[test]
fn a_revoked_cloud_token_still_reads_server_info_and_nothing_else() {
    let fake = FakeJira::start(Mode::Cloud);
    fake.seed_issues(PROJECT, "AWPCA", 2);
    assert_eq!(
        get(&fake, "/rest/api/2/myself").json()["accountId"],
        ACCOUNT_ID
    );
    fake.revoke_credentials(true);
    let info = get(&fake, "/rest/api/2/serverInfo");
    assert_eq!(info.status, 200);
    assert_eq!(info.json()["deploymentType"], "Cloud");
    assert_eq!(
        info.header("X-Seraph-LoginReason"),
        Some("AUTHENTICATED_FAILED")
    );
    for path in [
        "/rest/api/2/myself".to_string(),
        format!(
            "/rest/api/2/search/jql?jql={}",
            encode(&format!("project = {PROJECT}"))
        ),
        format!("/rest/api/2/issue/{PROJECT}-1"),
    ] {
        let answer = get(&fake, &path);
        assert_eq!(answer.status, 401, "{path}: {answer:?}");
        assert_eq!(
            answer.json()["errorMessages"][0],
            "Client must be authenticated to access this resource."
        );
        assert_eq!(
            answer.header("X-Seraph-LoginReason"),
            Some("AUTHENTICATED_FAILED")
        );
    }
    let anonymous = call_as(&fake, "GET", "/rest/api/2/serverInfo", None);
    assert_eq!(anonymous.status, 200);
    assert_eq!(anonymous.header("X-Seraph-LoginReason"), None);
    fake.revoke_credentials(false);
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);

    let dc = FakeJira::start(Mode::DataCenter);
    dc.revoke_credentials(true);
    assert_eq!(get(&dc, "/rest/api/2/myself").status, 401);
    assert_eq!(get(&dc, "/rest/api/2/serverInfo").status, 401);
}

#[test]
fn data_center_without_basic_auth_refuses_it_and_takes_tokens() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.disable_basic_auth(Some(BasicAuthOff::RedirectToLogin));
    let answer = get(&fake, "/rest/api/2/myself");
    assert_eq!(answer.status, 302);
    assert_eq!(
        answer.header("Location"),
        Some(format!("{}/login.jsp", fake.url()).as_str())
    );
    let token = call_as(&fake, "GET", "/rest/api/2/myself", Some(&bearer_auth()));
    assert_eq!(token.status, 200);
    assert_eq!(token.header("X-Seraph-LoginReason"), Some("OK"));
    fake.disable_basic_auth(Some(BasicAuthOff::Forbidden));
    let answer = get(&fake, "/rest/api/2/myself");
    assert_eq!(answer.status, 403);
    assert_eq!(
        answer.json()["message"],
        "Basic Authentication has been disabled on this instance."
    );
    fake.disable_basic_auth(None);
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
}

#[test]
fn a_refused_path_or_issue_operation_is_a_403_about_that_request_only() {
    let fake = FakeJira::start(Mode::DataCenter);
    let a = create(&fake, "Первая", &[]);
    let b = create(&fake, "Вторая", &[]);
    fake.refuse_issue(&a, Endpoint::AddComment, 403);
    let refused = post(
        &fake,
        &format!("/rest/api/2/issue/{a}/comment"),
        json!({"body": "Нельзя"}),
    );
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.json(),
        json!({"errorMessages": ["You do not have the permission to comment on this issue."],
               "errors": {}})
    );
    assert_eq!(refused.header("X-Seraph-LoginReason"), Some("OK"));
    assert!(fake.comments(&a).is_empty(), "nothing applied");
    // The same operation on another issue, and another operation on this one, go on.
    let other = post(
        &fake,
        &format!("/rest/api/2/issue/{b}/comment"),
        json!({"body": "Можно"}),
    );
    assert_eq!(other.status, 201);
    assert_eq!(get(&fake, &format!("/rest/api/2/issue/{a}")).status, 200);

    fake.refuse_path("/rest/api/2/issue/");
    let edit = put(
        &fake,
        &format!("/rest/api/2/issue/{b}"),
        json!({"fields": {"summary": "Нет"}}),
    );
    assert_eq!(edit.status, 403);
    assert_eq!(
        edit.json()["errorMessages"][0],
        "You do not have permission to edit issues in this project."
    );
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
    fake.clear_refusals();
    assert_eq!(get(&fake, &format!("/rest/api/2/issue/{a}")).status, 200);
}

#[test]
fn without_a_jira_software_licence_only_the_agile_api_is_refused() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.set_agile_licensed(false);
    for path in ["/rest/agile/1.0/board", "/rest/agile/1.0/board/4216/sprint"] {
        let answer = get(&fake, path);
        assert_eq!(answer.status, 403, "{path}");
        assert_eq!(
            answer.json()["errorMessages"][0],
            "The user does not have valid license."
        );
        assert_eq!(answer.header("X-Seraph-LoginReason"), Some("OK"));
    }
    let sprint = post(
        &fake,
        "/rest/agile/1.0/sprint/741/issue",
        json!({"issues": []}),
    );
    assert_eq!(sprint.status, 403);
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
    fake.set_agile_licensed(true);
    assert_eq!(get(&fake, "/rest/agile/1.0/board").status, 200);
}

#[test]
fn two_projects_and_a_label_spanning_both() {
    let fake = FakeJira::start(Mode::DataCenter);
    let aurora = fake.seed_issues(PROJECT, "SPAN", 3);
    fake.seed_issues(PROJECT, "OTHER", 1);
    let orion = fake.seed_issues("ORION", "SPAN", 2);
    let both = format!("project in ({PROJECT}, ORION) AND labels = SPAN ORDER BY key ASC");
    let mut expected = aurora.clone();
    expected.extend(orion.iter().cloned());
    assert_eq!(keys(&search(&fake, &both, 0, 50)), expected);
    assert_eq!(
        keys(&search(&fake, "labels = SPAN ORDER BY key ASC", 0, 50)),
        expected
    );
    // `key > "P-n"` continues within P only (the key clause names the issue's project).
    let after = format!(
        "project in ({PROJECT}, ORION) AND labels = SPAN AND key > \"{}\" ORDER BY key ASC",
        aurora[2]
    );
    assert!(keys(&search(&fake, &after, 0, 50)).is_empty());
    let rest = format!(
        "project in ({PROJECT}, ORION) AND labels = SPAN AND project not in ({PROJECT}) ORDER BY key ASC"
    );
    assert_eq!(keys(&search(&fake, &rest, 0, 50)), orion);
    let unknown = search(&fake, "project in (AURORA, NOPE)", 0, 50);
    assert_eq!(unknown.status, 400);
    assert_eq!(
        unknown.json()["errorMessages"][0],
        "The value 'NOPE' does not exist for the field 'project'."
    );

    let cloud = FakeJira::start(Mode::Cloud);
    cloud.seed_issues(PROJECT, "SPAN", 2);
    cloud.seed_issues("ORION", "SPAN", 2);
    let answer = get(
        &cloud,
        &format!(
            "/rest/api/2/search/jql?jql={}&fields=summary",
            encode("project in (AURORA, ORION) AND labels = SPAN")
        ),
    );
    assert_eq!(answer.json()["issues"].as_array().map(Vec::len), Some(4));
}

#[test]
fn a_rule_rewrites_the_summary_of_every_new_issue() {
    let fake = FakeJira::start(Mode::Cloud);
    fake.rewrite_summaries_on_create(Some(SummaryRewrite::Prefix("[Поддержка] ".into())));
    let key = create(&fake, "Сбой выгрузки", &["AWPCA"]);
    assert_eq!(
        fake.issue(&key).unwrap()["fields"]["summary"],
        "[Поддержка] Сбой выгрузки"
    );
    assert!(fake.keys_with_summary("Сбой выгрузки").is_empty());
    assert_eq!(fake.creates_of("Сбой выгрузки"), 1, "counted as sent");
    let found = get(
        &fake,
        &format!(
            "/rest/api/2/search/jql?jql={}&fields=summary",
            encode("labels = AWPCA")
        ),
    );
    assert_eq!(
        found.json()["issues"][0]["fields"]["summary"],
        "[Поддержка] Сбой выгрузки"
    );
    fake.rewrite_summaries_on_create(Some(SummaryRewrite::Replace("Заявка".into())));
    let other = create(&fake, "Ещё одна", &[]);
    assert_eq!(fake.issue(&other).unwrap()["fields"]["summary"], "Заявка");
    fake.rewrite_summaries_on_create(None);
    let plain = create(&fake, "Как есть", &[]);
    assert_eq!(fake.issue(&plain).unwrap()["fields"]["summary"], "Как есть");
}

#[test]
fn comment_properties_on_both_deployments_and_issue_properties_in_cloud_search_only() {
    for mode in [Mode::DataCenter, Mode::Cloud] {
        let fake = FakeJira::start(mode);
        let key = create(&fake, "Свойства", &["PROPS"]);
        let comment = post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": "Комментарий"}),
        )
        .json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let path = format!("/rest/api/2/comment/{comment}/properties/jira-hub");
        assert_eq!(get(&fake, &path).status, 404, "{mode:?}");
        assert_eq!(put(&fake, &path, json!({"command": "c-1"})).status, 201);
        assert_eq!(put(&fake, &path, json!({"command": "c-2"})).status, 200);
        assert_eq!(
            get(&fake, &path).json(),
            json!({"key": "jira-hub", "value": {"command": "c-2"}})
        );
        assert_eq!(
            fake.comment_properties(&comment)["jira-hub"],
            json!({"command": "c-2"})
        );
        let unknown = put(
            &fake,
            "/rest/api/2/comment/99/properties/jira-hub",
            json!({}),
        );
        assert_eq!(unknown.status, 404);
        assert_eq!(
            put(
                &fake,
                &format!("/rest/api/2/issue/{key}/properties/jira-hub"),
                json!({"command": "i-1"})
            )
            .status,
            201
        );
        let jql = encode("labels = PROPS");
        let issue = match mode {
            Mode::Cloud => get(
                &fake,
                &format!("/rest/api/2/search/jql?jql={jql}&fields=summary&properties=jira-hub"),
            ),
            Mode::DataCenter => get(
                &fake,
                &format!("/rest/api/2/search?jql={jql}&fields=summary&properties=jira-hub"),
            ),
        }
        .json()["issues"][0]
            .clone();
        match mode {
            Mode::Cloud => assert_eq!(issue["properties"], json!({"jira-hub": {"command": "i-1"}})),
            Mode::DataCenter => assert!(issue.get("properties").is_none(), "{issue}"),
        }
    }
    let cloud = FakeJira::start(Mode::Cloud);
    let six = get(
        &cloud,
        &format!(
            "/rest/api/2/search/jql?jql={}&properties=a,b,c,d,e,f",
            encode("project = AURORA")
        ),
    );
    assert_eq!(six.status, 400);
}

#[test]
fn cloud_comments_can_come_back_changed_by_the_markup_round_trip() {
    let body = "- пункт\nсм. https://example.com/x и [~agent]\njira_hub {code} [метка] 2 * 3 *важно* [сайт|https://example.com]";
    let changed = format!(
        "* пункт\nсм. [https://example.com/x|https://example.com/x] и [~accountid:{ACCOUNT_ID}]\njira\\_hub \\{{code}} \\[метка] 2 \\* 3 *важно* [сайт|https://example.com]"
    );
    for (mode, on, expected) in [
        (Mode::Cloud, true, changed.as_str()),
        (Mode::Cloud, false, body),
        (Mode::DataCenter, true, body),
    ] {
        let fake = FakeJira::start(mode);
        fake.set_markup_round_trip(on);
        let key = create(&fake, "Разметка", &[]);
        let answer = post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": body}),
        );
        assert_eq!(answer.status, 201);
        assert_eq!(answer.json()["body"], expected, "{mode:?} {on}");
        assert_eq!(fake.comments(&key)[0]["body"], expected);
    }
}

#[test]
fn error_texts_come_in_the_accounts_language() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.seed_issues(PROJECT, "AWPCA", 2);
    fake.seed_issues("OTHER", "AWPCA", 1);
    let moved = fake.move_issue("OTHER-1", PROJECT);
    assert_eq!(moved, format!("{PROJECT}-3"));
    fake.set_language(Language::Russian);
    let error = |answer: Answer| {
        assert_eq!(answer.status, 400, "{answer:?}");
        answer.json()["errorMessages"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        error(search(&fake, "key > \"AURORA-99\"", 0, 10)),
        "Задача с ключом 'AURORA-99' не существует для поля 'key'."
    );
    assert_eq!(
        error(search(&fake, "id >= 99999", 0, 10)),
        "Значение с ID '99999' не существует для поля 'id'."
    );
    assert_eq!(
        error(search(&fake, "key > \"OTHER-1\"", 0, 10)),
        "Оператор '>' нельзя применить к ключу перемещённой задачи 'OTHER-1'."
    );
    assert_eq!(
        error(search(&fake, "project = NOPE", 0, 10)),
        "Значение 'NOPE' не существует для поля 'project'."
    );
    let missing = get(&fake, "/rest/api/2/issue/AURORA-99");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json()["errorMessages"][0],
        "Задача не существует, или у вас нет прав на её просмотр."
    );
    let create = |fields: Value| post(&fake, "/rest/api/2/issue", json!({"fields": fields}));
    let no_summary = create(json!({"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}}));
    assert_eq!(
        no_summary.json()["errors"]["summary"],
        "Необходимо указать тему задачи."
    );
    let spaces = create(
        json!({"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                               "summary": "Метки", "labels": ["две метки"]}),
    );
    assert_eq!(
        spaces.json()["errors"]["labels"],
        "Метка 'две метки' содержит пробелы, что недопустимо."
    );
    let no_project = create(json!({"summary": "Без проекта"}));
    assert_eq!(
        no_project.json()["errors"]["project"],
        "Укажите действительный ID или ключ проекта"
    );
    fake.set_language(Language::English);
    assert_eq!(
        error(search(&fake, "key > \"AURORA-99\"", 0, 10)),
        "An issue with key 'AURORA-99' does not exist for field 'key'."
    );
}

/// The answers that hid the unbounded repetitions, each as Jira gives it.
#[test]
fn what_hid_the_unbounded_repetitions() {
    // A proxy that forwards a write, then answers 503 with `Retry-After`: the write is in Jira.
    let fake = FakeJira::start(Mode::DataCenter);
    let key = create(&fake, "За прокси", &[]);
    fake.fault(
        Endpoint::AddComment,
        Fault::ForwardedThen503 { retry_after: 5 },
        1,
    );
    let answer = post(
        &fake,
        &format!("/rest/api/2/issue/{key}/comment"),
        json!({"body": "один"}),
    );
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("Retry-After"), Some("5"));
    assert_eq!(fake.comments(&key).len(), 1, "applied behind the 503");

    // Data Center with rate limiting stamps `retry-after: 0` on every answer.
    fake.rate_limit(Some(100));
    let stamped = get(&fake, "/rest/api/2/myself");
    assert_eq!(stamped.status, 200);
    assert_eq!(stamped.header("Retry-After"), Some("0"));
    assert_eq!(stamped.header("X-RateLimit-Limit"), Some("100"));
    fake.rate_limit(None);

    // Without Jira Software, DC 9.x sends the agile path to the login page, login OK.
    fake.without_jira_software();
    let agile = get(&fake, "/rest/agile/1.0/board/1");
    assert_eq!(agile.status, 302);
    assert!(agile.header("Location").unwrap().contains("/login.jsp"));
    assert_eq!(agile.header("X-Seraph-LoginReason"), Some("OK"));
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);

    // An expired token runs as nobody: the search finds nothing, `X-AUSERNAME: anonymous`.
    fake.expire_token(true);
    let bearer = bearer_auth();
    let found = call_as(
        &fake,
        "GET",
        "/rest/api/2/search?jql=project%20%3D%20AURORA",
        Some(&bearer),
    );
    assert_eq!(
        (found.status, found.json()["total"].as_u64()),
        (200, Some(0))
    );
    assert_eq!(found.header("X-AUSERNAME"), Some("anonymous"));
    assert_eq!(
        call_as(&fake, "GET", "/rest/api/2/myself", Some(&bearer)).status,
        401
    );
    fake.expire_token(false);

    // Three failed Basic logins put the account behind a CAPTCHA, the right password too.
    let wrong = format!("Basic {}", base64("agent:wrong"));
    for _ in 0..3 {
        let refused = call_as(&fake, "GET", "/rest/api/2/myself", Some(&wrong));
        assert_eq!(refused.status, 401);
        assert_eq!(
            refused.header("X-Seraph-LoginReason"),
            Some("AUTHENTICATED_FAILED")
        );
    }
    assert_eq!(fake.failed_logins(), 3);
    let locked = get(&fake, "/rest/api/2/myself");
    assert_eq!(locked.status, 403);
    assert!(
        locked
            .header("X-Authentication-Denied-Reason")
            .unwrap()
            .starts_with("CAPTCHA_CHALLENGE")
    );
    fake.captcha_lockout(false);
    assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);

    // Cloud: a path outside the token's scopes is 401 while `myself` works.
    let cloud = FakeJira::start(Mode::Cloud);
    let key = create(&cloud, "Облако", &[]);
    cloud.refuse_scope(&format!("/rest/api/2/issue/{key}/comment"));
    let scoped = post(
        &cloud,
        &format!("/rest/api/2/issue/{key}/comment"),
        json!({"body": "нет"}),
    );
    assert_eq!(scoped.status, 401);
    assert_eq!(
        scoped.json()["message"],
        "Unauthorized; scope does not match"
    );
    assert_eq!(get(&cloud, "/rest/api/2/myself").status, 200);
    assert!(cloud.comments(&key).is_empty());
}

/// A look after a lost create reads the newest first.
#[test]
fn created_desc_orders_newest_first() {
    let fake = FakeJira::start(Mode::DataCenter);
    let first = create(&fake, "Первая", &[]);
    let second = create(&fake, "Вторая", &[]);
    let answer = search(&fake, "project = AURORA ORDER BY created DESC", 0, 10);
    assert_eq!(keys(&answer), vec![second, first]);
    assert_eq!(
        search(&fake, "project = AURORA ORDER BY created ASC", 0, 10).status,
        400
    );
}

/// `reconcileIssues` is an exploded `int64` array (Atlassian's description declares it without a
/// `style`): two ids as two parameters reconcile both issues the lagging search hides; the two
/// joined by a comma are not an `int64` and are refused.
#[test]
fn reconcile_issues_is_an_exploded_array() {
    let fake = FakeJira::start(Mode::Cloud);
    fake.set_search_lag(Duration::from_secs(600));
    let keys = [
        create(&fake, "первая", &["FRESH"]),
        create(&fake, "вторая", &["FRESH"]),
    ];
    let ids: Vec<String> = keys
        .iter()
        .map(|key| {
            get(&fake, &format!("/rest/api/2/issue/{key}")).json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let path = format!(
        "/rest/api/2/search/jql?jql={}&fields=summary",
        encode("labels = FRESH")
    );
    let exploded = get(
        &fake,
        &format!(
            "{path}&reconcileIssues={}&reconcileIssues={}",
            ids[0], ids[1]
        ),
    );
    assert_eq!(
        exploded.json()["issues"].as_array().unwrap().len(),
        2,
        "{exploded:?}"
    );
    let joined = get(
        &fake,
        &format!("{path}&reconcileIssues={}", encode(&ids.join(","))),
    );
    assert_eq!(joined.status, 400, "{joined:?}");
}

/// A rotated password: the old one is refused (and counted, by the secret it carried), the new
/// one logs in. A front proxy's own login refuses with a 401 that carries no Seraph header.
#[test]
fn a_rotated_password_and_a_front_proxys_401() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.set_password("rotated");
    let old = call_as(&fake, "GET", "/rest/api/2/myself", Some(&basic_auth()));
    assert_eq!(old.status, 401);
    assert_eq!(fake.refused_logins(&basic_auth()), 1);
    let myself = || {
        call_as(
            &fake,
            "GET",
            "/rest/api/2/myself",
            Some(&basic_auth_with("rotated")),
        )
    };
    assert_eq!(myself().status, 200);
    assert_eq!(fake.refused_logins(&basic_auth_with("rotated")), 0);
    fake.fault(Endpoint::Myself, Fault::FrontProxyUnauthorized, 1);
    let proxy = myself();
    assert_eq!(proxy.status, 401);
    assert_eq!(proxy.header("X-Seraph-LoginReason"), None);
    assert_eq!(proxy.header("X-AUSERNAME"), None);
    assert!(proxy.header("WWW-Authenticate").is_some());
}
