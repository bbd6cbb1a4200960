//! `link`: an issue link, found before it is written again.

use super::{Executor, Fail, fail, text};
use crate::agent::jira_api::JiraError;
use crate::agent::jql;
use crate::protocol::ClaimedCommand;
use serde_json::{Value, json};

/// Jira's refusal of a link, naming both keys and, when Jira's words name one of them (the key
/// in its message, or the request's field `inwardIssue`/`outwardIssue` an error is keyed by),
/// which one it is about: «Jira отказала связать AURORA-1 с AURORA-9 (HTTP
/// 404), о задаче AURORA-9: «Issue Does Not Exist: AURORA-9»».
fn link_refusal(from: &str, to: &str, status: u16, message: &str) -> String {
    let names = |key: &str, field: &str| names_key(message, key) || message.contains(field);
    let about = match (names(from, "inwardIssue"), names(to, "outwardIssue")) {
        (true, false) => format!(", о задаче {from}"),
        (false, true) => format!(", о задаче {to}"),
        _ => String::new(),
    };
    format!("Jira отказала связать {from} с {to} (HTTP {status}){about}: «{message}»")
}

/// Whether `text` has `key` as a word of its own (AURORA-1 is not in AURORA-12 or XAURORA-1).
fn names_key(text: &str, key: &str) -> bool {
    !key.is_empty()
        && text.match_indices(key).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + key.len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
                && !after.is_some_and(|c| c.is_ascii_digit())
        })
}

impl Executor<'_> {
    /// Jira makes a link once per (type, inward, outward): "If the link request duplicates a
    /// link, the response indicates that the issue link was created" (Cloud REST, Issue links;
    /// Jira's `DefaultIssueLinkManager.createIssueLink` returns without a second link when one of
    /// the type already joins the two issues). So a first delivery posts the link without looking
    /// first (a link made meanwhile by someone else is not doubled by it), and reads the issue's
    /// links once after, for the link's id; a later delivery looks first, as an earlier one may
    /// have made it. A lost answer gives the command back (the next delivery finds the link, or
    /// makes it).
    pub(super) fn link(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
        let params = &command.params;
        let from =
            text(params, "from").ok_or_else(|| fail("from: обязательное поле отсутствует"))?;
        let to = text(params, "to").ok_or_else(|| fail("to: обязательное поле отсутствует"))?;
        let logical =
            text(params, "type").ok_or_else(|| fail("type: обязательное поле отсутствует"))?;
        let name = self
            .settings
            .link_types
            .get(&logical)
            .cloned()
            .ok_or_else(|| fail(format!("type: {logical:?} нет в link_types")))?;
        if command.delivery > 1
            && let Some(id) = self.find_link(&from, &to, &name)?
        {
            return Ok(json!({"link_id": id}));
        }
        let body = json!({"type": {"name": name}, "inwardIssue": {"key": from}, "outwardIssue": {"key": to}});
        match self.jira.write("POST", "/rest/api/2/issueLink", &body) {
            Err(JiraError::Refused { status, message }) => {
                return Err(fail(link_refusal(&from, &to, status, &message)));
            }
            other => {
                other?;
            }
        }
        match self.find_link(&from, &to, &name)? {
            Some(id) => Ok(json!({"link_id": id})),
            None => Err(fail("связь записана, но Jira её не показывает")),
        }
    }

    fn find_link(&mut self, from: &str, to: &str, name: &str) -> Result<Option<Value>, Fail> {
        let issue: Value = self.jira.read_json(&format!(
            "/rest/api/2/issue/{}?fields=issuelinks",
            jql::encode(from)
        ))?;
        Ok(issue["fields"]["issuelinks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|link| {
                link["type"]["name"].as_str() == Some(name)
                    && link["outwardIssue"]["key"].as_str() == Some(to)
            })
            .map(|link| link["id"].clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_refusal_names_the_key_jira_names() {
        assert_eq!(
            link_refusal(
                "AURORA-1",
                "AURORA-9",
                404,
                "Issue Does Not Exist: AURORA-9"
            ),
            "Jira отказала связать AURORA-1 с AURORA-9 (HTTP 404), о задаче AURORA-9: \
             «Issue Does Not Exist: AURORA-9»"
        );
        assert_eq!(
            link_refusal("AURORA-1", "AURORA-12", 400, "inwardIssue: no permission"),
            "Jira отказала связать AURORA-1 с AURORA-12 (HTTP 400), о задаче AURORA-1: \
             «inwardIssue: no permission»"
        );
        // AURORA-1 is not named by AURORA-12; neither key named: both said, none chosen.
        assert_eq!(
            link_refusal("AURORA-1", "AURORA-12", 404, "AURORA-12 does not exist"),
            "Jira отказала связать AURORA-1 с AURORA-12 (HTTP 404), о задаче AURORA-12: \
             «AURORA-12 does not exist»"
        );
        assert_eq!(
            link_refusal("A-1", "A-2", 404, "Issue does not exist"),
            "Jira отказала связать A-1 с A-2 (HTTP 404): «Issue does not exist»"
        );
    }
}
