//! One meaning for every answer Jira gives. Every Jira call of the agent — reads,
//! writes, the heartbeat's probe — sorts what came back (its method, what the call needs, the
//! status, the headers, the body, or the transport's failure) through [`classify`] into exactly
//! one [`Class`]; the callers only decide what each class means for them (a read repeats an
//! ambiguous answer, a write never does). The table with each row's source is in
//! docs/design/agent-and-jira.md, "How the agent reads Jira's answers".

use super::net::{NetError, Reply};

/// What a call needs from a 2xx to be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// JSON (every read: its own shape is checked by its caller, a search page by the search).
    Json,
    /// Nothing, or JSON: an edit (204), a transition (204), a sprint add (204), a link (201
    /// without a body), a property (200/201).
    Nothing,
    /// A JSON object with this member, not null: a create's `key`, a comment's `id`.
    Member(&'static str),
}

/// Why the agent cannot use Jira at all (the queue is held).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Jira (or a proxy in front of it) refuses the agent's credentials or access: a 401, a
    /// redirect to a login page, an anonymous answer. It may be about one path (a scoped token,
    /// an unknown REST path on DC 9.x), so the agent probes before it holds everything.
    Credentials,
    /// Jira's login refused the credentials themselves (`X-Seraph-LoginReason:
    /// AUTHENTICATED_FAILED` or `AUTHENTICATION_DENIED`, a CAPTCHA): each further try with the
    /// same ones counts toward the CAPTCHA and the directory's lockout, so
    /// they are not sent again until they change (or an hour has passed).
    Rejected,
    /// No connection could be made.
    Unreachable,
}

impl Cause {
    /// The class the hub is told while Jira is held for this cause (the heartbeat's
    /// `jira_held_class`, the label of its metric): a refused login is a matter of credentials
    /// as a 401 is.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Cause::Credentials | Cause::Rejected => "credentials",
            Cause::Unreachable => "unreachable",
        }
    }
}

/// What an answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Class {
    /// A 2xx of the shape the call needs.
    Done,
    /// Jira refused this request (400, 403, 404, 409, …): about this issue, field or path.
    /// `message` is Jira's words.
    Refused { status: u16, message: String },
    /// 429, or 503 with `Retry-After`: nothing was applied; wait as asked.
    Throttled,
    /// The request may have been applied (no answer after it was sent, a 5xx, a 2xx that is not
    /// the answer of a write).
    Ambiguous(String),
    /// Jira cannot be used by this agent now: the queue is held.
    Held { cause: Cause, reason: String },
    /// A 2xx a read cannot use: not JSON, or (seen by the caller) not the shape it needs.
    Broken(String),
}

/// The words of a held state for credentials: the hub shows them with «с <time>» after them.
pub(crate) fn credentials_reason(detail: &str) -> String {
    format!("Jira не принимает учётные данные агента ({detail})")
}

/// Sorts one answer (or the transport's failure) into its class.
pub(crate) fn classify(method: &str, need: Need, answer: Result<&Reply, &NetError>) -> Class {
    let reply = match answer {
        Ok(reply) => reply,
        // DNS, a refused connection, a TLS handshake, a connect timeout: nothing was sent.
        Err(error @ NetError::NotSent(_)) => {
            return Class::Held {
                cause: Cause::Unreachable,
                reason: format!("Jira недоступна: {error}"),
            };
        }
        // A timeout or a dropped connection after the request was written (TLS errors after
        // the handshake included): it may have been received.
        Err(error @ NetError::Ambiguous(_)) => return Class::Ambiguous(error.to_string()),
    };
    let status = reply.status;
    if let Some(reason) = login_failed(reply) {
        return Class::Held {
            cause: Cause::Rejected,
            reason: credentials_reason(&format!("HTTP {status}, {reason}")),
        };
    }
    // Data Center names the user of every answer (`X-AUSERNAME`, a recorded 8.20.8 exchange);
    // `anonymous` means the credentials were not taken and the request ran as nobody: an expired
    // or unresolvable token searches anonymously and finds nothing (docs/jira-field-notes.md,
    // "An expired or unresolvable bearer token may search anonymously"). Never a done answer.
    // The header is URL-encoded (`AccessLogFilter`: `JiraUrlCodec.encode(userName, true)`;
    // Jira's `TestAccessLogFilter` decodes it with `decodeURIComponent`).
    if reply.header("x-ausername").is_some_and(|user| {
        super::text::percent_decoded(user)
            .trim()
            .eq_ignore_ascii_case("anonymous")
    }) {
        return Class::Held {
            cause: Cause::Credentials,
            reason: credentials_reason(&format!("HTTP {status}, X-AUSERNAME: anonymous")),
        };
    }
    match status {
        401 => Class::Held {
            cause: Cause::Credentials,
            reason: credentials_reason("HTTP 401"),
        },
        // Data Center 8.16+ with Basic auth disabled on the API answers every Basic request
        // 403 «Basic Authentication has been disabled on this instance.» (codeclou.io,
        // "Disabling Basic Auth in Jira Data Center", 2021): about the agent's way of logging
        // in, not about the command.
        403 if super::text::error_text(reply)
            .to_ascii_lowercase()
            .contains("basic authentication has been disabled") =>
        {
            Class::Held {
                cause: Cause::Credentials,
                reason: credentials_reason(&format!(
                    "HTTP 403: «{}»",
                    super::text::error_text(reply)
                )),
            }
        }
        // A proxy between the agent and Jira wants its own login (RFC 9110 §15.5.8): nothing
        // reached Jira, and no command can be run until the proxy's credentials are set.
        407 => Class::Held {
            cause: Cause::Unreachable,
            reason: format!(
                "прокси между агентом и Jira требует входа (HTTP 407 Proxy Authentication Required): {}",
                super::text::error_text(reply)
            ),
        },
        // The server gave up waiting for the request itself (RFC 9110 §15.5.9: "did not
        // receive a complete request message"): the way to Jira is at fault, not the command.
        408 => Class::Held {
            cause: Cause::Unreachable,
            reason: format!(
                "Jira или прокси не дождались запроса агента (HTTP 408 Request Timeout): {}",
                super::text::error_text(reply)
            ),
        },
        300..=399 => {
            let location = reply.header("location").unwrap_or("(без Location)");
            if is_login_location(location) {
                Class::Held {
                    cause: Cause::Credentials,
                    reason: credentials_reason(&format!(
                        "HTTP {status}: перенаправление на страницу входа {location}"
                    )),
                }
            } else {
                Class::Held {
                    cause: Cause::Unreachable,
                    reason: format!(
                        "Jira отвечает перенаправлением HTTP {status} на {location}; агент не следует перенаправлениям (проверьте jira_url)"
                    ),
                }
            }
        }
        429 => Class::Throttled,
        // A 503 with `Retry-After` says to wait, not that nothing was applied: a proxy (Envoy's
        // `UC`) answers it after forwarding, a maintenance page adds its own header, and Data
        // Center under rate limiting stamps `retry-after: 0` on every answer
        // (docs/jira-field-notes.md, "A 503 is not proof that a write was not applied"). Waited
        // out for a read; for a write it is a lost answer, looked at before anything is resent.
        503 if reply.retry_after.is_some() && method == "GET" => Class::Throttled,
        500..=599 => Class::Ambiguous(super::text::error_text(reply)),
        200..=299 => done_or_not(method, need, reply),
        400..=499 => Class::Refused {
            status,
            message: super::text::error_text(reply),
        },
        _ => Class::Broken(format!("HTTP {status}: такого ответа Jira не бывает")),
    }
}

/// Whether a write answered with a credentials refusal may have been applied all the same:
/// Jira did not take the credentials yet ran the request as nobody (`X-AUSERNAME: anonymous`,
/// or a login refused by `X-Seraph-LoginReason` on Cloud, which then goes on anonymously) and
/// answered it 2xx, or 5xx (a failure after the request started). A project whose permission
/// scheme grants Create Issues or Add Comments to "Anyone on the web" (Atlassian, "Allowing
/// anonymous access to your project") takes such a write; an expired or unresolvable token is
/// run anonymously (docs/jira-field-notes.md, "An expired or unresolvable bearer token may
/// search anonymously"). A 3xx or 4xx (a redirect to the login page, a 401, a refusal) was not
/// applied.
pub(crate) fn ran_as_nobody(reply: &Reply) -> bool {
    (200..300).contains(&reply.status) || (500..600).contains(&reply.status)
}

/// A 2xx: done when it has what the call needs. A read that cannot use it is broken; a write
/// answered with something else (an SSO page with 200, a comment without `id`) may or may not
/// have been applied: ambiguous.
fn done_or_not(method: &str, need: Need, reply: &Reply) -> Class {
    let write = method != "GET";
    let not_done = |why: String| {
        if write {
            Class::Ambiguous(format!(
                "HTTP {}: {why}; запись могла выполниться, а могла и нет",
                reply.status
            ))
        } else {
            Class::Broken(format!("HTTP {}: {why}", reply.status))
        }
    };
    let json_type = reply
        .content_type
        .as_deref()
        .is_none_or(|kind| kind.to_ascii_lowercase().contains("json"));
    let empty = reply.body.iter().all(u8::is_ascii_whitespace);
    match need {
        Need::Nothing if empty => Class::Done,
        _ if !json_type => not_done(format!(
            "ответ Jira — не JSON (Content-Type: {}): {}",
            reply.content_type.as_deref().unwrap_or(""),
            super::text::body_excerpt(&reply.body)
        )),
        Need::Json | Need::Nothing => Class::Done,
        Need::Member(member) => {
            let value = serde_json::from_slice::<serde_json::Value>(&reply.body).ok();
            if value
                .as_ref()
                .and_then(|v| v.get(member))
                .is_some_and(|m| !m.is_null())
            {
                Class::Done
            } else {
                not_done(format!(
                    "в ответе Jira нет {member}: {}",
                    super::text::body_excerpt(&reply.body)
                ))
            }
        }
    }
}

/// Whether an answer says the agent's login failed, and how: `X-Seraph-LoginReason` naming a
/// failed or denied login (Jira's `LoginReason`: `AUTHENTICATION_DENIED`, `AUTHENTICATED_FAILED`;
/// `OK` and `OUT` are not failures, and `AUTHORISATION_FAILED` is about the resource, not the
/// login), or `X-Authentication-Denied-Reason` (a CAPTCHA lockout).
fn login_failed(reply: &Reply) -> Option<String> {
    let seraph = seraph_failed(reply);
    match (reply.header("x-authentication-denied-reason"), seraph) {
        (Some(denied), Some(seraph)) => Some(format!(
            "{seraph}, X-Authentication-Denied-Reason: {denied}"
        )),
        (Some(denied), None) => Some(format!("X-Authentication-Denied-Reason: {denied}")),
        (None, seraph) => seraph,
    }
}

/// `X-Seraph-LoginReason` naming a failed or denied login, as words.
fn seraph_failed(reply: &Reply) -> Option<String> {
    // Every value of every such header (a proxy may add its own, HTTP may fold them).
    reply
        .headers
        .iter()
        .filter(|(name, _)| name == "x-seraph-loginreason")
        .map(|(_, value)| value)
        .find(|value| {
            value.split(',').map(str::trim).any(|r| {
                r.eq_ignore_ascii_case("AUTHENTICATED_FAILED")
                    || r.eq_ignore_ascii_case("AUTHENTICATION_DENIED")
            })
        })
        .map(|value| format!("X-Seraph-LoginReason: {value}"))
}

/// A `Location` that is a login page: Jira's `login.jsp`, Cloud's or an SSO's login and SAML
/// endpoints. Keycloak's sign-in is `<base>/realms/<realm>/protocol/openid-connect/auth` (before
/// Keycloak 17 under `/auth/realms/…`; Keycloak's "Server administration guide", OIDC endpoints),
/// with none of the other words in it.
fn is_login_location(location: &str) -> bool {
    let lower = location.to_ascii_lowercase();
    [
        "login",
        "saml",
        "/sso",
        "oauth",
        "signin",
        "authenticate",
        "openid-connect",
        "/realms/",
    ]
    .iter()
    .any(|word| lower.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply {
            status,
            retry_after: headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("retry-after"))
                .map(|(_, v)| v.to_string()),
            content_type: headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                .map(|(_, v)| v.to_string()),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    const JSON: (&str, &str) = ("Content-Type", "application/json;charset=UTF-8");
    /// Data Center stamps it on every answer to an authenticated request (a recorded 8.20.8
    /// exchange; PowerShell module fixtures of DC `PUT` answers).
    const SERAPH_OK: (&str, &str) = ("X-Seraph-LoginReason", "OK");

    fn class(method: &str, need: Need, reply: &Reply) -> Class {
        classify(method, need, Ok(reply))
    }

    fn is_held(class: &Class, cause: Cause) -> bool {
        matches!(class, Class::Held { cause: c, .. } if *c == cause)
    }

    #[test]
    fn a_data_center_403_with_login_reason_ok_is_about_the_command() {
        let forbidden = reply(
            403,
            &[JSON, SERAPH_OK, ("X-AUSERNAME", "agent")],
            r#"{"errorMessages":["У вас нет прав на добавление комментариев к этой задаче."],"errors":{}}"#,
        );
        assert_eq!(
            class("POST", Need::Member("id"), &forbidden),
            Class::Refused {
                status: 403,
                message: "У вас нет прав на добавление комментариев к этой задаче.".into()
            }
        );
        // A board read of a user without a Jira Software licence.
        let agile = reply(
            403,
            &[JSON, SERAPH_OK],
            r#"{"errorMessages":["Returned if the user does not have valid license"]}"#,
        );
        assert!(matches!(
            class("GET", Need::Json, &agile),
            Class::Refused { status: 403, .. }
        ));
        // Authorisation of a resource, not the login.
        let authorisation = reply(
            403,
            &[JSON, ("X-Seraph-LoginReason", "AUTHORISATION_FAILED")],
            "{}",
        );
        assert!(matches!(
            class("GET", Need::Json, &authorisation),
            Class::Refused { status: 403, .. }
        ));
    }

    #[test]
    fn ok_on_every_data_center_answer_changes_nothing() {
        let created = reply(
            201,
            &[JSON, SERAPH_OK, ("Retry-After", "0")],
            r#"{"id":"10001","key":"AURORA-1"}"#,
        );
        assert_eq!(class("POST", Need::Member("key"), &created), Class::Done);
        let edited = reply(204, &[SERAPH_OK], "");
        assert_eq!(class("PUT", Need::Nothing, &edited), Class::Done);
        // Cloud answers recorded in 2015 carry two values.
        let cloud = reply(200, &[JSON, ("x-seraph-loginreason", "OUT, OK")], "{}");
        assert_eq!(class("GET", Need::Json, &cloud), Class::Done);
    }

    #[test]
    fn a_captcha_lockout_holds_the_queue() {
        // The recorded 8.20.8 answer.
        let captcha = reply(
            403,
            &[
                ("Content-Type", "text/html;charset=UTF-8"),
                ("X-Seraph-LoginReason", "AUTHENTICATED_FAILED"),
                (
                    "X-Authentication-Denied-Reason",
                    "CAPTCHA_CHALLENGE; login-url=https://jira.example.com/login.jsp",
                ),
            ],
            "<html>Forbidden</html>",
        );
        let held = class("POST", Need::Member("id"), &captcha);
        assert!(is_held(&held, Cause::Rejected), "{held:?}");
        let Class::Held { reason, .. } = held else {
            unreachable!()
        };
        assert!(reason.contains("CAPTCHA_CHALLENGE"), "{reason}");
        let denied = reply(
            403,
            &[("X-Seraph-LoginReason", "AUTHENTICATION_DENIED")],
            "",
        );
        assert!(is_held(&class("GET", Need::Json, &denied), Cause::Rejected));
    }

    #[test]
    fn a_revoked_cloud_token_holds_the_queue_even_on_a_200() {
        // serverInfo answers anonymously; only the header says the login failed.
        let info = reply(
            200,
            &[JSON, ("X-Seraph-LoginReason", "AUTHENTICATED_FAILED")],
            r#"{"deploymentType":"Cloud"}"#,
        );
        let held = class("GET", Need::Json, &info);
        assert!(is_held(&held, Cause::Rejected), "{held:?}");
        let unauthorized = reply(
            401,
            &[JSON],
            r#"{"errorMessages":["Client must be authenticated to access this resource."]}"#,
        );
        assert_eq!(
            class("POST", Need::Member("id"), &unauthorized),
            Class::Held {
                cause: Cause::Credentials,
                reason: "Jira не принимает учётные данные агента (HTTP 401)".into()
            }
        );
    }

    #[test]
    fn redirects_hold_the_queue() {
        let login = reply(
            302,
            &[(
                "Location",
                "https://jira.example.com/login.jsp?os_destination=%2F",
            )],
            "",
        );
        assert!(is_held(
            &class("PUT", Need::Nothing, &login),
            Cause::Credentials
        ));
        let moved = reply(301, &[("Location", "https://jira2.example.com/rest/")], "");
        assert!(is_held(
            &class("GET", Need::Json, &moved),
            Cause::Unreachable
        ));
    }

    #[test]
    fn rate_limits_are_waited_out() {
        let limited = reply(429, &[("Retry-After", "3")], "");
        assert_eq!(
            class("POST", Need::Member("id"), &limited),
            Class::Throttled
        );
        let html = reply(429, &[("Content-Type", "text/html")], "<h1>Oops</h1>");
        assert_eq!(class("GET", Need::Json, &html), Class::Throttled);
        let busy = reply(503, &[("Retry-After", "3")], "");
        assert_eq!(class("GET", Need::Json, &busy), Class::Throttled);
    }

    /// A 503 with `Retry-After` on a write may follow an applied write (a
    /// proxy that forwarded it, Data Center's `retry-after: 0` stamp on every answer).
    #[test]
    fn a_503_on_a_write_is_a_lost_answer_whatever_its_retry_after() {
        for retry_after in ["0", "3", "120"] {
            let busy = reply(503, &[("Retry-After", retry_after)], "");
            for (method, need) in [
                ("POST", Need::Member("key")),
                ("POST", Need::Member("id")),
                ("PUT", Need::Nothing),
            ] {
                assert!(
                    matches!(class(method, need, &busy), Class::Ambiguous(_)),
                    "{method} {retry_after}"
                );
            }
        }
    }

    /// Answers about the way in, not about the command.
    #[test]
    fn proxy_logins_timeouts_disabled_basic_auth_and_anonymous_answers_hold() {
        let proxy = reply(407, &[("Proxy-Authenticate", "Basic realm=\"corp\"")], "");
        assert!(is_held(
            &class("POST", Need::Nothing, &proxy),
            Cause::Unreachable
        ));
        let timeout = reply(408, &[], "");
        assert!(is_held(
            &class("GET", Need::Json, &timeout),
            Cause::Unreachable
        ));
        let disabled = reply(
            403,
            &[JSON],
            r#"{"message":"Basic Authentication has been disabled on this instance."}"#,
        );
        let held = class("POST", Need::Member("key"), &disabled);
        assert!(is_held(&held, Cause::Credentials), "{held:?}");
        let Class::Held { reason, .. } = held else {
            unreachable!()
        };
        assert!(
            reason.contains("Basic Authentication has been disabled"),
            "{reason}"
        );
        // An expired token on Data Center: the search runs as nobody and finds nothing.
        let anonymous = reply(
            200,
            &[JSON, ("X-AUSERNAME", "anonymous")],
            r#"{"startAt":0,"maxResults":50,"total":0,"issues":[]}"#,
        );
        assert!(is_held(
            &class("GET", Need::Json, &anonymous),
            Cause::Credentials
        ));
        let named = reply(200, &[JSON, ("X-AUSERNAME", "agent")], "{}");
        assert_eq!(class("GET", Need::Json, &named), Class::Done);
    }

    #[test]
    fn server_errors_and_lost_answers_are_ambiguous() {
        for status in [500, 502, 503, 504] {
            let failed = reply(status, &[("Content-Type", "text/html")], "<h1>Gateway</h1>");
            assert!(matches!(
                class("POST", Need::Nothing, &failed),
                Class::Ambiguous(_)
            ));
        }
        let lost = NetError::Ambiguous("timed out reading response".into());
        assert!(matches!(
            classify("POST", Need::Nothing, Err(&lost)),
            Class::Ambiguous(_)
        ));
        let refused = NetError::NotSent("соединение отвергнуто".into());
        assert!(is_held(
            &classify("GET", Need::Json, Err(&refused)),
            Cause::Unreachable
        ));
    }

    #[test]
    fn a_2xx_is_done_only_with_what_the_call_needs() {
        let sso = reply(
            200,
            &[("Content-Type", "text/html;charset=UTF-8")],
            "<html><title>Log in - Jira</title></html>",
        );
        // An edit or a sprint add answered by an SSO page: not done, and it may not be repeated.
        assert!(matches!(
            class("PUT", Need::Nothing, &sso),
            Class::Ambiguous(_)
        ));
        assert!(matches!(
            class("POST", Need::Nothing, &sso),
            Class::Ambiguous(_)
        ));
        // A read of it is broken.
        assert!(matches!(class("GET", Need::Json, &sso), Class::Broken(_)));
        // A comment 2xx without `id`.
        let no_id = reply(201, &[JSON], r#"{"body":"x"}"#);
        assert!(matches!(
            class("POST", Need::Member("id"), &no_id),
            Class::Ambiguous(_)
        ));
        let null_key = reply(201, &[JSON], r#"{"key":null}"#);
        assert!(matches!(
            class("POST", Need::Member("key"), &null_key),
            Class::Ambiguous(_)
        ));
        let link = reply(201, &[], "");
        assert_eq!(class("POST", Need::Nothing, &link), Class::Done);
    }

    #[test]
    fn refusals_keep_jiras_words() {
        for status in [400, 404, 409, 410] {
            let refused = reply(
                status,
                &[JSON],
                r#"{"errorMessages":[],"errors":{"labels":"Поле 'labels' нельзя задать."}}"#,
            );
            assert_eq!(
                class("POST", Need::Member("key"), &refused),
                Class::Refused {
                    status,
                    message: "labels: Поле 'labels' нельзя задать.".into()
                }
            );
        }
    }

    /// A sign-in redirect of an SSO in front of Jira reads as credentials, not as «check
    /// jira_url»: Keycloak's OpenID Connect endpoint (old and new paths) and a SAML IdP's.
    #[test]
    fn sso_sign_in_redirects_are_credentials() {
        for location in [
            "https://kc.corp.ru/realms/corp/protocol/openid-connect/auth?client_id=jira&response_type=code",
            "https://kc.corp.ru/auth/realms/corp/protocol/openid-connect/auth?client_id=jira",
            "https://adfs.corp.ru/adfs/ls/?SAMLRequest=fZJBT8Mw",
        ] {
            let redirect = reply(302, &[("Location", location)], "");
            assert!(
                is_held(&class("GET", Need::Json, &redirect), Cause::Credentials),
                "{location}"
            );
        }
        let elsewhere = reply(301, &[("Location", "https://jira.corp.ru/")], "");
        assert!(is_held(
            &class("GET", Need::Json, &elsewhere),
            Cause::Unreachable
        ));
    }
}
