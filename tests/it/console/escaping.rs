//! Text from outside on every page that shows it comes out escaped, and the console's pages are
//! written through the template engine (maud) only, in files a reader can take in.

use super::*;

/// Everything a client, an agent or Jira can put in a page, with quotes and an ampersand.
const PAYLOAD: &str = "<script>alert(1)</script>\"'&";
/// How the payload reads in the page.
const ESCAPED: &str = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;";

#[tokio::test]
async fn a_payload_in_every_field_a_page_shows_comes_out_escaped() {
    let console = console();
    let cookie = console.sign_in().await;
    // Jira's words: an issue's summary and description, from a refresh's page.
    console.api(Method::POST, "/refresh", None).await;
    let claim = console.claim("agent-<i>", "c1").await;
    let refresh = &claim["commands"][0];
    let issue = raw_issue(
        "AURORA-1",
        "1",
        &["AWPCA"],
        json!({"summary": PAYLOAD, "description": PAYLOAD}),
    );
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-<i>", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": refresh["id"], "delivery": refresh["delivery"], "status": "progress",
                                "page": {"start_at": 0, "total": 1, "issues": [issue]}}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    // A client's words: a batch's title and author, an edit's summary, a comment's body, a note.
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": PAYLOAD, "author": PAYLOAD, "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": PAYLOAD}},
                {"type": "ensure_issue", "params": {"issue_type": "task", "key": "AURORA-2",
                 "summary": PAYLOAD, "base": {"summary": "Видел"}}}]})),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    console
        .api(
            Method::POST,
            "/issues/AURORA-1/notes",
            Some(json!({"author": PAYLOAD, "body": PAYLOAD})),
        )
        .await;
    // An agent's words: a failure's error, and a conflict's values and who changed them.
    let page = console
        .agent_post(
            "/agent/claim",
            json!({"kind": "claim", "id": "c2", "agent": "agent-<i>", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "settings_version": 0, "max_commands": 10,
                   "protocol": 2, "capabilities": ["edit_base"]}),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let claimed: Value = serde_json::from_str(&page.body).unwrap();
    let ids: Vec<i64> = claimed["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["batch_id"] == id)
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{claimed}");
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r2", "agent": "agent-<i>", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [
                {"command_id": ids[0], "delivery": 1, "status": "failed", "error": PAYLOAD, "jira_calls": 1},
                {"command_id": ids[1], "delivery": 1, "status": "failed", "error": "AURORA-2: конфликт",
                 "jira_calls": 1, "result": {"key": "AURORA-2", "conflict": {
                    "updated": "2026-11-29T10:00:00.000+0000",
                    "fields": [{"field": "summary", "base": "Видел", "jira": PAYLOAD, "wanted": "Наше",
                                "changed_by": PAYLOAD, "changed_at": "2026-11-29T10:00:00.000+0000"}]}}}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);

    // Each page, and how many times it shows the payload (each one escaped).
    let pages = [
        ("/ui/batches".to_string(), 2),
        (format!("/ui/batches/{id}"), 4),
        (format!("/ui/batches/{id}/cancel"), 1),
        (format!("/ui/commands/{}", ids[0]), 2),
        (format!("/ui/commands/{}", ids[1]), 3),
        ("/ui/failed".to_string(), 4),
        ("/ui/mirror/AWPCA".to_string(), 1),
        ("/ui/mirror/AWPCA?q=%3Cscript%3E".to_string(), 1),
        ("/ui/issues/AURORA-1".to_string(), 3),
    ];
    for (path, shown) in pages {
        let page = console.get(&path, Some(&cookie)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(
            !page.body.contains("<script>alert"),
            "{path}: {}",
            page.body
        );
        assert!(
            page.body.matches(ESCAPED).count() >= shown,
            "{path} shows the payload escaped {shown} times: {}",
            page.body
        );
    }
    // A search's own words are text too.
    let search = console
        .get("/ui/mirror/AWPCA?q=%3Cscript%3E", Some(&cookie))
        .await;
    assert!(
        search.body.contains("value=\"&lt;script&gt;\"")
            && search.body.contains("Найдено по «&lt;script&gt;»"),
        "{}",
        search.body
    );
    let overview = console.get("/", Some(&cookie)).await;
    assert!(overview.body.contains("<h3>agent-&lt;i&gt;</h3>"));
    let conflict = console
        .get(&format!("/ui/commands/{}", ids[1]), Some(&cookie))
        .await;
    assert!(
        conflict
            .body
            .contains(&format!("<td>{ESCAPED}, <time datetime=\"2026-11-29T10:00:00.000000Z\" title=\"2026-11-29T10:00:00.000+0000\">")),
        "{}",
        conflict.body
    );
}

/// The page code of `src/http/console/` outside its unit tests.
fn console_sources() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/console");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_console_writes_its_html_through_the_template_engine_in_files_of_a_readable_size() {
    let mut found = Vec::new();
    for (name, text) in console_sources() {
        let lines = text.lines().count();
        if lines > 1300 {
            found.push(format!("{name}: {lines} lines (at most 1300)"));
        }
        if name == "tests.rs" {
            continue;
        }
        // Page code ends where its unit tests begin.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            // A string literal that opens or closes a tag is HTML written by hand, escaped only
            // where someone remembered: pages are `html!` of maud, which escapes every value.
            let by_hand = line.split('"').skip(1).step_by(2).any(|literal| {
                literal
                    .split('<')
                    .skip(1)
                    .any(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/'))
            });
            if by_hand || line.contains("fn esc(") {
                found.push(format!("{name}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
