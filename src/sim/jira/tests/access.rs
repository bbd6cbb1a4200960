//! Who may call and what goes wrong: identity and authentication, refusals, faults on demand,
//! rate limits, proxies, errors in the account's language.

use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

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
