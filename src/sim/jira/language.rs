//! The language of the account that asks: Jira words its error texts (JQL errors, field errors,
//! "issue does not exist") in the user's profile language (docs/jira-field-notes.md, "Search":
//! "These texts come in the searching account's language"), so a client must never recognise an
//! error by its English text.
//!
//! The Russian texts here are our translations of Jira's English ones: Jira's Russian language
//! pack (its `JiraWebActionSupport`/JQL `i18n` property files) was not found among public
//! sources, so they are faithful translations, not Jira's own wording.

use super::*;

/// The language of the agent's Jira account ([`FakeJira::set_language`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Language {
    #[default]
    English,
    Russian,
}

impl StateInner {
    /// The text in the account's language.
    pub(super) fn words(&self, english: String, russian: String) -> String {
        match self.language {
            Language::English => english,
            Language::Russian => russian,
        }
    }
}

/// The texts more than one handler says.
impl StateInner {
    /// `summary` missing or blank (`SummarySystemField`).
    pub(super) fn no_summary(&self) -> Reply {
        Reply::field_error(
            "summary",
            &self.words(
                "You must specify a summary of the issue.".into(),
                "Необходимо указать тему задачи.".into(),
            ),
        )
    }

    /// A label with a space (`LabelsSystemField`).
    pub(super) fn label_with_spaces(&self, label: &str) -> Reply {
        Reply::field_error(
            "labels",
            &self.words(
                format!("The label '{label}' contains spaces which is invalid."),
                format!("Метка '{label}' содержит пробелы, что недопустимо."),
            ),
        )
    }
}

impl FakeJira {
    /// The agent's account reads Jira in `language`: its error texts come in it (default
    /// English).
    pub fn set_language(&self, language: Language) {
        lock(&self.state).language = language;
    }
}
