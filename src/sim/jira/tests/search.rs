//! The searches as Jira runs them: the JQL subset, the key clause, paging on Data Center and
//! by token on Cloud, orders, reconciled issues.

use super::*;
use serde_json::json;
use std::time::Duration;

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
