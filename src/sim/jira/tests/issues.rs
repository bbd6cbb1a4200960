//! Issues, their transitions, comments, links, labels, properties, boards and sprints, as each
//! deployment keeps and returns them.

use super::*;
use serde_json::json;

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
fn times_are_jiras() {
    assert_eq!(jira_time(1_772_694_930_000), "2026-03-05T10:15:30.000+0300");
    assert_eq!(
        agile_time(1_772_694_930_000),
        "2026-03-05T10:15:30.000+03:00"
    );
    assert_eq!(base64("agent:secret"), "YWdlbnQ6c2VjcmV0");
    assert_eq!(base64("ab"), "YWI=");
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
