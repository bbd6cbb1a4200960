//! `refresh`: the pages of a search handed to the hub as Jira returns them.

use super::{Executor, Fail, fail, text};
use crate::agent::answer::Cause;
use crate::agent::jira_api::{Deployment, JiraError, SearchPage};
use serde_json::{Value, json};

impl Executor<'_> {
    pub(super) fn refresh(
        &mut self,
        params: &Value,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<Value, Fail> {
        let query =
            text(params, "jql").ok_or_else(|| fail("jql: обязательное поле отсутствует"))?;
        // Cloud's search lags behind writes ("seconds to minutes"): the issues this agent wrote
        // since its last full refresh are named for reconciling, and are
        // forgotten once a full refresh (no `updated >=` bound) has read them after the lag.
        let full = crate::domain::jql::split_incremental(&query).is_none();
        let reconcile = match self.jira.deployment()? {
            Deployment::Cloud => self.jira.written_ids(),
            Deployment::Server => Vec::new(),
        };
        let total = self
            .jira
            .search(&query, "*all", self.page_size, &reconcile, on_page)?;
        if full {
            let lag = self.lag()?;
            self.jira.forget_written(&reconcile, lag);
        }
        let mut boards = Vec::new();
        let mut warnings = Vec::new();
        for board in params["boards"].as_array().into_iter().flatten() {
            let Some(id) = board.as_i64() else { continue };
            match self.jira.board_type(id) {
                Ok(kind) => boards.push(json!({"id": id, "type": kind})),
                // Refused for this board (Jira Software's agile REST answers 403 to a user
                // without its licence): the issues are read, the board's type is not.
                Err(JiraError::Refused { status, message }) => {
                    tracing::warn!(board = id, status, %message, "a board could not be read; its type is not reported");
                    warnings.push(format!(
                        "доска {id}: Jira отказала (HTTP {status}): {message}"
                    ));
                }
                // Refused for credentials on the agile path alone: Data Center 9.x without Jira
                // Software redirects `/rest/agile/…` to `login.jsp`, a Cloud token without Jira
                // Software's scopes is answered 401 there (docs/jira-field-notes.md,
                // "Credentials and scopes"). When `myself` passes, it is about the board as a
                // 403 is; when it does not, the credentials are refused: held as before.
                Err(JiraError::Held {
                    cause: Cause::Credentials,
                    reason,
                }) => {
                    let refusal = self.jira.take_refusal();
                    self.jira.probe_myself()?;
                    let (status, words) =
                        refusal.map(|r| (r.status, r.words)).unwrap_or((0, reason));
                    tracing::warn!(board = id, status, %words, "a board's path is refused while the credentials work; its type is not reported");
                    warnings.push(format!(
                        "доска {id}: Jira не пускает к /rest/agile/1.0/board/{id} (HTTP {status}: «{words}»), хотя учётные данные принимает: Jira Software не установлена или у токена нет её областей"
                    ));
                }
                Err(other) => return Err(other.into()),
            }
        }
        let mut result = json!({"total": total, "boards": boards});
        if !warnings.is_empty() {
            result["warnings"] = json!(warnings);
        }
        Ok(result)
    }
}
