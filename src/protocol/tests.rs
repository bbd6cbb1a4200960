use super::decode::*;
use super::*;

#[test]
fn a_result_status_is_logged_in_its_wire_word() {
    for status in [
        ResultStatus::Done,
        ResultStatus::Failed,
        ResultStatus::Skipped,
        ResultStatus::Progress,
        ResultStatus::Released,
    ] {
        assert_eq!(json!(status), json!(status.as_str()));
    }
}
use serde_json::json;

#[test]
fn kind_names_are_lowercase_and_exact() {
    for (kind, name) in [
        (Kind::Claim, "claim"),
        (Kind::Report, "report"),
        (Kind::Heartbeat, "heartbeat"),
    ] {
        assert_eq!((kind.as_str(), kind.to_string()), (name, name.to_string()));
        assert_eq!(json!(kind), json!(name));
        assert_eq!(Kind::parse(name), Some(kind));
    }
    assert_eq!(Kind::parse("Claim"), None);
    assert_eq!(Kind::parse("claims"), None);
}

fn claim() -> Value {
    json!({"kind": "claim", "id": "5c1c-a_1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
           "token": "t", "agent_version": "1.4.0", "settings_version": 11, "max_commands": 20})
}

fn error_field(value: Value) -> String {
    decode_value(value).unwrap_err().field().to_string()
}

#[test]
fn decodes_the_three_kinds() {
    let AgentRequest::Claim(c) = decode_value(claim()).unwrap() else {
        panic!()
    };
    assert_eq!((c.max_commands, c.settings_version), (20, 11));
    assert_eq!(c.wait_seconds, 0, "no wait unless asked");
    let mut waiting = claim();
    waiting["wait_seconds"] = json!(900);
    let AgentRequest::Claim(c) = decode_value(waiting).unwrap() else {
        panic!()
    };
    assert_eq!(c.wait_seconds, 900);
    assert_eq!(c.envelope.token.as_deref(), Some("t"));
    let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00+03:00",
        "results": [
            {"command_id": 42, "delivery": 1, "status": "done", "result": {"key": "AURORA-17", "created": true}, "jira_calls": 3, "rate_limited": 0, "finished_at": "2026-11-29T10:00:00Z"},
            {"command_id": 43, "delivery": 1, "status": "progress", "page": {"start_at": 0, "total": 5234, "issues": []}},
            {"command_id": 44, "delivery": 2, "status": "failed", "error": "boom", "jira_calls": 1, "rate_limited": 1}]});
    let AgentRequest::Report(r) = decode_value(report).unwrap() else {
        panic!()
    };
    assert_eq!(r.results.len(), 3);
    assert_eq!(r.results[1].status, ResultStatus::Progress);
    assert_eq!(r.results[1].page.as_ref().unwrap().total, Some(5234));
    let heartbeat = json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
        "agent_version": "1.4.0", "jira_ok": false, "last_error": "401", "future_field": 1});
    assert!(matches!(
        decode_value(heartbeat).unwrap(),
        AgentRequest::Heartbeat(_)
    ));
}

#[test]
fn a_heartbeat_announces_a_bounded_period() {
    let heartbeat = |period: Value| {
        json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
               "agent_version": "1.4.0", "jira_ok": true, "heartbeat_seconds": period})
    };
    let AgentRequest::Heartbeat(h) = decode_value(heartbeat(json!(10))).unwrap() else {
        panic!("a heartbeat")
    };
    assert_eq!(h.heartbeat_seconds, Some(10));
    for bad in [json!(0), json!(86_401), json!(-1), json!("60"), json!(1.5)] {
        assert_eq!(
            error_field(heartbeat(bad.clone())),
            "heartbeat_seconds",
            "{bad}"
        );
    }
    let mut without = heartbeat(json!(1));
    without.as_object_mut().unwrap().remove("heartbeat_seconds");
    let AgentRequest::Heartbeat(h) = decode_value(without).unwrap() else {
        panic!("a heartbeat")
    };
    assert_eq!(h.heartbeat_seconds, None, "an older agent tells no period");
}

#[test]
fn a_heartbeat_carries_a_bounded_check() {
    let heartbeat = |check: Value| {
        json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
               "agent_version": "1.4.0", "jira_ok": true, "check": check})
    };
    let line = json!({"name": "проект", "ok": false, "detail": "проекта NOPE нет"});
    let AgentRequest::Heartbeat(h) = decode_value(heartbeat(
        json!({"ran_at": "2026-11-30T19:00:00Z", "ok": false, "lines": [line]}),
    ))
    .unwrap() else {
        panic!("a heartbeat")
    };
    let check = h.check.unwrap();
    assert_eq!((check.ok, check.lines.len()), (false, 1));
    assert_eq!(check.lines[0].detail, "проекта NOPE нет");
    let many = vec![line.clone(); MAX_CHECK_LINES + 1];
    assert_eq!(
        error_field(heartbeat(
            json!({"ran_at": "2026-11-30T19:00:00Z", "ok": false, "lines": many})
        )),
        "check"
    );
    let long = json!({"name": "x", "ok": true, "detail": "д".repeat(MAX_CHECK_DETAIL_CHARS + 1)});
    assert_eq!(
        error_field(heartbeat(
            json!({"ran_at": "2026-11-30T19:00:00Z", "ok": true, "lines": [long]})
        )),
        "check"
    );
    // A newer agent's member of a line is ignored; a wrong type, or a check that is not an
    // object, is refused naming it.
    let newer = json!({"name": "x", "ok": true, "detail": "", "extra": {"nested": [1]}});
    let AgentRequest::Heartbeat(h) = decode_value(heartbeat(
        json!({"ran_at": "2026-11-30T19:00:00Z", "ok": true, "lines": [newer], "more": 1}),
    ))
    .unwrap() else {
        panic!("a heartbeat")
    };
    assert_eq!(h.check.unwrap().lines[0].name, "x");
    let wrong = json!({"name": "x", "ok": "yes", "detail": ""});
    assert!(
        error_field(heartbeat(
            json!({"ran_at": "2026-11-30T19:00:00Z", "ok": true, "lines": [wrong]})
        ))
        .starts_with("check")
    );
    assert_eq!(error_field(heartbeat(json!([1]))), "check");
}

#[test]
fn a_claim_says_what_its_agent_is_and_the_previous_release_says_nothing() {
    // The previous release's claim: revision 1, no capability, no build.
    let AgentRequest::Claim(old) = decode_value(claim()).unwrap() else {
        panic!("a claim")
    };
    assert_eq!(old.peer, Peer::default());
    assert_eq!(old.peer.revision(), 1);
    assert!(!old.peer.can(CAP_EDIT_BASE));
    // This release's, with a future agent's capability and build member beside.
    let mut new = claim();
    new["protocol"] = json!(2);
    new["capabilities"] = json!(["edit_base", "previous_release", "telepathy"]);
    new["build"] = json!({"version": "0.2.0", "commit": "abc123", "compiler": "rustc 9"});
    let AgentRequest::Claim(c) = decode_value(new.clone()).unwrap() else {
        panic!("a claim")
    };
    assert_eq!(c.peer.revision(), 2);
    assert!(c.peer.can(CAP_EDIT_BASE) && c.peer.can("telepathy"));
    assert_eq!(c.peer.build.as_ref().unwrap().commit, "abc123");
    // Written back, the agent's own claim reads the same.
    let text = serde_json::to_value(&c).unwrap();
    assert_eq!(text["capabilities"], new["capabilities"]);
    assert_eq!(text["protocol"], json!(2));
    // Really wrong: refused naming the member.
    for (member, value, field) in [
        ("capabilities", json!("edit_base"), "capabilities"),
        ("capabilities", json!([1]), "capabilities"),
        ("capabilities", json!(vec!["x"; 65]), "capabilities"),
        ("capabilities", json!([""]), "capabilities"),
        ("protocol", json!("2"), "protocol"),
        ("protocol", json!(0), "protocol"),
        ("build", json!({"version": "0.2.0"}), "build"),
        (
            "build",
            json!({"version": "0.2.0", "commit": "a\u{7}"}),
            "build.commit",
        ),
    ] {
        let mut bad = claim();
        bad[member] = value.clone();
        let got = error_field(bad);
        assert!(
            got.starts_with(field),
            "{member} = {value}: refused as {got}"
        );
    }
}

#[test]
fn a_give_back_with_a_newer_agents_member_in_refused_is_read() {
    let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
        "future": {"x": 1},
        "results": [{"command_id": 7, "delivery": 1, "status": "released", "error": "403",
            "not_before_seconds": 5, "sent": false, "also_future": [1],
            "refused": {"method": "GET", "path": "/rest/agile/1.0/board/1", "status": 401, "scope": "read:jira-work"}}]});
    let AgentRequest::Report(r) = decode_value(report).unwrap() else {
        panic!("a report")
    };
    assert_eq!(r.results[0].refused.as_ref().unwrap().status, 401);
    // A wrong type inside is still refused, naming it.
    let wrong = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
        "results": [{"command_id": 7, "delivery": 1, "status": "released", "error": "403",
            "not_before_seconds": 5, "refused": {"method": "GET", "path": "/x", "status": "401"}}]});
    assert!(error_field(wrong).starts_with("results[0]"));
}

#[test]
fn a_heartbeat_says_when_the_agent_bounds_its_give_backs_itself() {
    let mut heartbeat = json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
        "agent_version": "0.2.0", "jira_ok": true, "protocol": 2, "capabilities": ["edit_base"],
        "own_give_back_bound": {"count": 5, "seconds": 3600}});
    let AgentRequest::Heartbeat(h) = decode_value(heartbeat.clone()).unwrap() else {
        panic!("a heartbeat")
    };
    assert_eq!(
        h.own_give_back_bound,
        Some(GiveBackBound {
            count: 5,
            seconds: 3600
        })
    );
    heartbeat["own_give_back_bound"] = json!(5);
    assert_eq!(error_field(heartbeat), "own_give_back_bound");
}

#[test]
fn reading_a_file_gives_what_parsing_a_value_gives() {
    let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "t",
        "results": [{"command_id": 43, "delivery": 1, "status": "progress",
            "page": {"start_at": 0, "total": 2, "issues": [{"key": "A-1", "fields": {}}, {"key": "A-2", "fields": {"x": [1]}}]}}]});
    let text = serde_json::to_vec(&report).unwrap();
    let from_file = decode_request(&text).unwrap();
    assert_eq!(from_file, decode_value(report).unwrap());
    let AgentRequest::Report(r) = from_file else {
        panic!()
    };
    assert_eq!(
        r.results[0].page.as_ref().unwrap().issues[1].get(),
        r#"{"key":"A-2","fields":{"x":[1]}}"#
    );
    assert_eq!(r.envelope.token.as_deref(), Some("t"));
    for (bad, field) in [
        (
            json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z"}),
            "results",
        ),
        (
            json!({"kind": "report", "id": "r 1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": []}),
            "id",
        ),
        (
            json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": [{"command_id": 1}]}),
            "results[0].delivery",
        ),
    ] {
        assert_eq!(
            decode_request(&serde_json::to_vec(&bad).unwrap())
                .unwrap_err()
                .field(),
            field
        );
    }
    assert!(matches!(
        decode_request(b"[1, 2]"),
        Err(DecodeError::NotJson(_))
    ));
    assert!(matches!(
        decode_request(b"{\"kind\": \"claim\""),
        Err(DecodeError::Incomplete(_))
    ));
}

/// A report decoded from the one buffer it was received in keeps each issue of its pages as
/// a range of that buffer, and decodes to what the bytes decode to.
#[test]
fn a_received_reports_issues_are_ranges_of_its_buffer() {
    let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "t",
        "results": [
            {"command_id": 42, "delivery": 1, "status": "done", "result": {"key": "A-1"}},
            {"command_id": 43, "delivery": 1, "status": "progress",
             "page": {"start_at": 0, "total": 2, "issues": [{"key": "A-1", "fields": {"summary": "Задача"}}, {"key": "A-2", "fields": {"x": [1]}}]}},
            {"command_id": 44, "delivery": 1, "status": "progress", "page": null}]});
    let mut text = b"\xEF\xBB\xBF".to_vec();
    text.extend(serde_json::to_vec(&report).unwrap());
    let received = Received::from(text.clone());
    let decoded = received.decode(TokenCheck::Expect(Some("t"))).unwrap();
    assert_eq!(
        decoded,
        decode_bytes(&text, TokenCheck::Expect(Some("t"))).unwrap()
    );
    let AgentRequest::Report(r) = decoded else {
        panic!("a report")
    };
    let buffer = received.bytes().as_ptr_range();
    let issues = &r.results[1].page.as_ref().unwrap().issues;
    assert_eq!(
        issues[0].get(),
        serde_json::to_string(&report["results"][1]["page"]["issues"][0]).unwrap()
    );
    for issue in issues {
        assert!(
            buffer.contains(&issue.get().as_ptr()),
            "{issue:?} was copied"
        );
    }
    let found = r.results[0].result.as_ref().unwrap();
    assert_eq!(found.value(), json!({"key": "A-1"}));
    assert!(
        buffer.contains(&found.get().as_ptr()),
        "{found:?} was copied"
    );
    assert_eq!(r.results[2].page, None);
    // The issues outlive the buffer's other owner, and serialize as they came.
    drop(received);
    assert_eq!(
        serde_json::to_value(&r.results[1]).unwrap()["page"],
        report["results"][1]["page"]
    );
}

/// A page read on its own is refused as it was when the whole result was read at once: the
/// field by its path, the words the same, from a buffer or from bytes.
#[test]
fn a_bad_page_is_named_as_before() {
    let with = |result: &str| {
        format!(
            r#"{{"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": [{result}]}}"#
        )
    };
    for (result, field, message) in [
        (
            r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": 5}"#,
            "results[0].page",
            "неверный тип",
        ),
        (
            r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": {"issues": []}}"#,
            "results[0].page.start_at",
            "обязательное поле отсутствует",
        ),
        (
            r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": {}}}"#,
            "results[0].page.issues",
            "неверный тип",
        ),
        (
            r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": []}, "page": {"start_at": 0, "issues": []}}"#,
            "results[0].page",
            "поле повторяется",
        ),
        (
            r#"{"command_id": "x", "delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": []}}"#,
            "results[0].command_id",
            "неверный тип",
        ),
        (
            r#"{"delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": []}}"#,
            "results[0].command_id",
            "обязательное поле отсутствует",
        ),
    ] {
        let text = with(result);
        let from_bytes = decode_bytes(text.as_bytes(), TokenCheck::Skip).unwrap_err();
        let from_buffer = Received::from(text.into_bytes())
            .decode(TokenCheck::Skip)
            .unwrap_err();
        assert_eq!(from_bytes, from_buffer, "{result}");
        assert_eq!(from_bytes.field(), field, "{result}: {from_bytes:?}");
        assert!(
            from_bytes.message().contains(message),
            "{result}: {from_bytes:?}"
        );
    }
    // Not UTF-8: refused as not JSON, or as cut short when cut inside a character.
    let mut broken =
        with(r#"{"command_id": 1, "delivery": 1, "status": "done", "error": "я"}"#).into_bytes();
    let at = broken.len() - 10;
    broken[at] = 0xFF;
    assert!(matches!(
        Received::from(broken).decode(TokenCheck::Skip),
        Err(DecodeError::NotJson(_))
    ));
    let cut = r#"{"kind": "report", "id": "r1", "error": "я"#.as_bytes();
    assert!(matches!(
        Received::from(cut[..cut.len() - 1].to_vec()).decode(TokenCheck::Skip),
        Err(DecodeError::Incomplete(_))
    ));
}

#[test]
fn a_cloud_page_has_no_total_and_a_claim_may_say_when_it_was_enqueued() {
    for page in [
        json!({"start_at": 100, "total": null, "issues": []}),
        json!({"start_at": 100, "issues": []}),
    ] {
        let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
            "results": [{"command_id": 43, "delivery": 1, "status": "progress", "page": page}]});
        let AgentRequest::Report(r) =
            decode_request(&serde_json::to_vec(&report).unwrap()).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.results[0].page.as_ref().unwrap().total, None);
    }
    let command: ClaimedCommand = serde_json::from_value(json!({"id": 1, "batch_id": 1, "seq": 1,
        "type": "comment", "params": {}, "delivery": 1, "enqueued_at": "2026-11-29T10:00:00Z"}))
    .unwrap();
    assert_eq!(command.enqueued_at.as_deref(), Some("2026-11-29T10:00:00Z"));
    let older: ClaimedCommand = serde_json::from_value(
        json!({"id": 1, "batch_id": 1, "seq": 1, "type": "comment", "params": {}, "delivery": 1}),
    )
    .unwrap();
    assert_eq!(older.enqueued_at, None);
    assert!(
        !serde_json::to_string(&older)
            .unwrap()
            .contains("enqueued_at")
    );
}

#[test]
fn refusals_name_the_field() {
    let mut unknown = claim();
    unknown["kind"] = json!("claims");
    assert_eq!(
        decode_value(unknown).unwrap_err(),
        DecodeError::UnknownKind("claims".into())
    );
    for (field, value) in [
        ("id", json!("has space")),
        ("id", json!("x".repeat(65))),
        ("id", json!("")),
        ("id", json!("ид")),
        ("id", json!(7)),
        ("agent", json!("")),
        ("sent_at", json!("yesterday")),
        ("wait_seconds", json!(901)),
        ("wait_seconds", json!(-1)),
        ("wait_seconds", json!("600")),
    ] {
        let mut bad = claim();
        bad[field] = value;
        assert_eq!(error_field(bad), field);
    }
    for field in [
        "kind",
        "id",
        "agent",
        "sent_at",
        "max_commands",
        "agent_version",
    ] {
        let mut bad = claim();
        bad.as_object_mut().unwrap().remove(field);
        assert_eq!(error_field(bad), field, "missing {field}");
    }
    assert!(matches!(
        decode_request(b"{not json"),
        Err(DecodeError::NotJson(_))
    ));
    assert!(is_valid_id(&"a".repeat(64)));
}

#[test]
fn debug_never_shows_the_token() {
    let AgentRequest::Claim(request) = decode_value(claim()).unwrap() else {
        panic!()
    };
    let shown = format!("{request:?}");
    assert!(!shown.contains("\"t\""), "{shown}");
    assert!(shown.contains("***"), "{shown}");
    let tokens = crate::domain::settings::Tokens {
        agent: "agent-secret".into(),
        client: "client-secret".into(),
    };
    assert!(!format!("{tokens:?}").contains("secret"));
}

/// The agent's name travels in a header as percent-encoded UTF-8, and comes back only when it
/// is a name the protocol allows.
#[test]
fn the_agent_header_carries_any_allowed_name_and_nothing_else() {
    use super::{agent_from_header, agent_header_value};
    for name in [
        "agent-1",
        "svc.jira@corp.ru",
        "CORP\\svc",
        "Агент склада № 2",
        "a b+c%d",
    ] {
        let value = agent_header_value(name);
        assert!(
            value.bytes().all(|b| b.is_ascii_graphic()),
            "{name}: {value}"
        );
        assert_eq!(agent_from_header(value.as_bytes()).as_deref(), Some(name));
    }
    assert_eq!(
        agent_header_value("Агент"),
        "%D0%90%D0%B3%D0%B5%D0%BD%D1%82"
    );
    assert_eq!(agent_from_header(b"agent-1").as_deref(), Some("agent-1"));
    let long = "a".repeat(101);
    for refused in [
        &b""[..],
        b"%20%20",
        b"%ZZ",
        b"%4",
        b"agent%0A1",
        b"agent%E2%80%8B1",
        b"%D0",
        b"agent 1",
        "агент".as_bytes(),
        long.as_bytes(),
    ] {
        assert_eq!(
            agent_from_header(refused),
            None,
            "{}",
            String::from_utf8_lossy(refused)
        );
    }
}
