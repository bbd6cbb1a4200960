//! What the caller may do: a path or one operation on one issue refused, and Jira Software's
//! agile API for a user without its licence. Each answer is an authenticated one (it carries
//! Data Center's `X-Seraph-LoginReason: OK`): a 403 here speaks about the request, not the login
//! (docs/jira-field-notes.md, "403 is usually about one path").

use super::*;

/// One refusal set up by [`FakeJira::refuse_path`] or [`FakeJira::refuse_issue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Every request whose path starts with this prefix.
    Path(String),
    /// Every request whose path starts with this prefix, outside the token's scopes (Cloud).
    Scope(String),
    /// One operation (`endpoint`) on one issue, answered with `status`.
    Issue {
        key: String,
        endpoint: Endpoint,
        status: u16,
    },
}

/// Jira's words for an operation refused for lack of permission, by endpoint: Jira's own
/// functional tests ("You do not have permission to edit issues in this project.",
/// `TestEditIssue`), and the texts clients record from it ("You do not have the permission to
/// comment on this issue.", Apache's Jira, answered 400; "You do not have permission to
/// transition this issue."); any other read: "You do not have the permission to see the
/// specified issue.".
fn refusal_text(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::AddComment => "You do not have the permission to comment on this issue.",
        Endpoint::EditIssue | Endpoint::SetIssueProperty => {
            "You do not have permission to edit issues in this project."
        }
        Endpoint::DoTransition => "You do not have permission to transition this issue.",
        Endpoint::CreateLink => "You do not have the permission to link issues.",
        _ => "You do not have the permission to see the specified issue.",
    }
}

/// Jira Software's answer to a user without a Jira Software licence, on every
/// `/rest/agile/1.0/*` resource: 403, "Returned if the user does not have valid license" (the
/// Jira Agile Data Center REST reference, docs.atlassian.com/jira-software/REST/9.13.0, on the
/// board and sprint resources; a field report: "Received http error code 403. Access to
/// /rest/agile/1.0/board is forbidden", StonikByte great-gadgets-add-on #47). No recorded body
/// was found; the text is the reference's.
pub(super) const AGILE_UNLICENSED: &str = "The user does not have valid license.";

impl StateInner {
    /// The refusal this request meets, if any (checked before Jira's behaviour).
    pub(super) fn refused(&self, endpoint: Endpoint, request: &Request) -> Option<Reply> {
        let path = format!("/{}", request.segments.join("/"));
        if self.agile_absent && path.starts_with("/rest/agile/") {
            return Some(match self.mode {
                // Data Center 9.x sends an unknown REST path to the login page, credentials
                // valid all the same (`X-Seraph-LoginReason: OK` stays on it): docs/jira-field-
                // notes.md, "DC 9.x answers an unknown REST path with a 302 to `login.jsp`".
                Mode::DataCenter => Reply {
                    status: 302,
                    headers: vec![(
                        "location",
                        format!("{}/login.jsp?os_destination=%2Frest%2Fagile", self.base),
                    )],
                    body: Body::Empty,
                },
                Mode::Cloud => Reply::error(404, "null for uri: rest/agile"),
            });
        }
        if !self.agile_licensed && path.starts_with("/rest/agile/1.0/") {
            return Some(Reply::error(403, AGILE_UNLICENSED));
        }
        // `/rest/api/2/issue/{key}/…`: the issue a request is about.
        let key = match request.segments.as_slice() {
            [rest, api, _, issue, key, ..]
                if rest == "rest" && api == "api" && issue == "issue" =>
            {
                Some(key.as_str())
            }
            _ => None,
        };
        self.refusals.iter().find_map(|refusal| match refusal {
            Refusal::Path(prefix) if path.starts_with(prefix.as_str()) => {
                Some(Reply::error(403, refusal_text(endpoint)))
            }
            // Cloud's scoped API tokens and OAuth apps, on an endpoint outside their scopes,
            // while `/rest/api/2/myself` answers 200: `401 {"code":401,"message":"Unauthorized;
            // scope does not match"}` (raycast/extensions#11212 and other clients' reports,
            // docs/jira-field-notes.md "A 401 can be about one endpoint").
            Refusal::Scope(prefix) if path.starts_with(prefix.as_str()) => Some(Reply::json(
                401,
                serde_json::json!({"code": 401, "message": "Unauthorized; scope does not match"}),
            )),
            Refusal::Issue {
                key: refused,
                endpoint: operation,
                status,
            } if Some(refused.as_str()) == key && *operation == endpoint => {
                Some(Reply::error(*status, refusal_text(endpoint)))
            }
            _ => None,
        })
    }
}

impl FakeJira {
    /// Every request whose path starts with `prefix` (say `/rest/agile/1.0/board`, or
    /// `/rest/api/2/issue/AURORA-3/comment`) is answered 403 with Jira's error body.
    pub fn refuse_path(&self, prefix: &str) {
        lock(&self.state)
            .refusals
            .push(Refusal::Path(prefix.to_string()));
    }

    /// `endpoint` on issue `key` is refused with `status` (403 as a rule; Apache's Jira refused a
    /// comment with 400) and Jira's words for that operation; other issues and operations go on.
    pub fn refuse_issue(&self, key: &str, endpoint: Endpoint, status: u16) {
        lock(&self.state).refusals.push(Refusal::Issue {
            key: key.to_string(),
            endpoint,
            status,
        });
    }

    /// Whether the agent's user has a Jira Software licence (default yes): without one, every
    /// `/rest/agile/1.0/*` call is 403 while the platform's REST API works.
    pub fn set_agile_licensed(&self, licensed: bool) {
        lock(&self.state).agile_licensed = licensed;
    }

    /// Cloud: every request whose path starts with `prefix` is outside the token's scopes (401
    /// «Unauthorized; scope does not match»); the rest, `myself` included, works.
    pub fn refuse_scope(&self, prefix: &str) {
        lock(&self.state)
            .refusals
            .push(Refusal::Scope(prefix.to_string()));
    }

    /// Jira Software is not installed: `/rest/agile/*` is an unknown path (Data Center 9.x: a
    /// 302 to `login.jsp`; Cloud: 404).
    pub fn without_jira_software(&self) {
        lock(&self.state).agile_absent = true;
    }

    /// Forgets every refusal set up by `refuse_path` and `refuse_issue`.
    pub fn clear_refusals(&self) {
        lock(&self.state).refusals.clear();
    }
}
