//! Projects of the bridge (data-model «Проекты»): a project is a Jira label inside the hub's Jira
//! project. Here: what a valid label, name and board are, and when two labels are "the same".
//!
//! Uniqueness is checked by the store under its write lock with [`labels_collide`]; SQLite's
//! `NOCASE` folds ASCII only and would let `Проект` and `проект` live side by side.

use super::ValidationError;
use super::time::Utc;

/// The longest label and name, counted in characters (not bytes: labels are often Cyrillic).
pub(crate) const MAX_LABEL_CHARS: usize = 100;
pub(crate) const MAX_NAME_CHARS: usize = 100;

/// The project message the data model quotes for a case-insensitive duplicate.
pub(crate) const DUPLICATE_LABEL_MESSAGE: &str = "проект с такой меткой уже есть";

/// A project as stored (the service shows it as a `ProjectView`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Project {
    /// The Jira label; the project's identity, never changed after creation.
    pub label: String,
    /// A human name, trimmed.
    pub name: String,
    /// The Jira board the project plans on, when it has one.
    pub board_id: Option<i64>,
    /// `scrum` or `kanban`, learned only from a refresh result; `None` until then.
    pub board_type: Option<String>,
    /// ISO-8601 UTC with microseconds; orders the labels in the base JQL.
    pub created_at: Utc,
}

/// A request to create a project, already validated by [`validate_new_project`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewProject {
    pub label: String,
    pub name: String,
    pub board_id: Option<i64>,
}

/// Characters a label must not hold besides whitespace and control characters: they would break
/// out of the quoted JQL value or make the label ambiguous to read.
fn is_forbidden_label_char(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            ',' | '"'
                | '\''
                | '`'
                | '«'
                | '»'
                | '“'
                | '”'
                | '„'
                | '‘'
                | '’'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | '\\'
        )
}

pub(crate) fn validate_label(label: &str) -> Result<(), ValidationError> {
    if label.is_empty() {
        return Err(ValidationError::new("label", "метка не может быть пустой"));
    }
    if label.chars().count() > MAX_LABEL_CHARS {
        return Err(ValidationError::new(
            "label",
            format!("метка длиннее {MAX_LABEL_CHARS} символов"),
        ));
    }
    if let Some(c) = label.chars().find(|c| is_forbidden_label_char(*c)) {
        let what = if c.is_whitespace() {
            "пробельный символ".to_string()
        } else if c.is_control() {
            format!("управляющий символ U+{:04X}", c as u32)
        } else {
            format!("символ «{c}»")
        };
        return Err(ValidationError::new(
            "label",
            format!(
                "метка содержит {what}; нельзя пробелы, управляющие символы, запятые, кавычки, скобки и обратную косую черту"
            ),
        ));
    }
    Ok(())
}

/// Checks a name and returns it trimmed.
pub(crate) fn validate_name(name: &str) -> Result<String, ValidationError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(ValidationError::new(
            "name",
            "название не может быть пустым",
        ));
    }
    if trimmed.chars().count() > MAX_NAME_CHARS {
        return Err(ValidationError::new(
            "name",
            format!("название длиннее {MAX_NAME_CHARS} символов"),
        ));
    }
    Ok(trimmed.to_string())
}

pub(crate) fn validate_board_id(board_id: Option<i64>) -> Result<(), ValidationError> {
    match board_id {
        Some(id) if id <= 0 => Err(ValidationError::new(
            "board_id",
            "номер доски должен быть целым больше нуля",
        )),
        _ => Ok(()),
    }
}

pub(crate) fn validate_new_project(
    label: &str,
    name: &str,
    board_id: Option<i64>,
) -> Result<NewProject, ValidationError> {
    validate_label(label)?;
    let name = validate_name(name)?;
    validate_board_id(board_id)?;
    Ok(NewProject {
        label: label.to_string(),
        name,
        board_id,
    })
}

/// The form two labels are compared in: full Unicode case folding approximated by upper-then-lower
/// (so `ß` and `SS`, `Ё` and `ё` meet).
pub(crate) fn label_fold(label: &str) -> String {
    label.to_uppercase().to_lowercase()
}

/// Whether two labels are the same label for the hub (case-insensitive, Unicode-aware).
pub(crate) fn labels_collide(a: &str, b: &str) -> bool {
    label_fold(a) == label_fold(b)
}

/// The name a project gets when it is made from a legacy `base_jql` (migration v3→v4 and `init`).
/// The data model names AWPCA «АРМ КА»; other projects are named by their label.
pub(crate) fn legacy_project_name(label: &str) -> String {
    if label == "AWPCA" {
        "АРМ КА".to_string()
    } else {
        label.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_label(label: &str, ok: bool) {
        let result = validate_label(label);
        assert_eq!(result.is_ok(), ok, "{label:?}: {result:?}");
        if let Err(e) = result {
            assert_eq!(e.field, "label");
        }
    }

    #[test]
    fn labels() {
        check_label("AWPCA", true);
        check_label("STOCKS_DRRK", true);
        check_label("АРМ-КА", true);
        check_label("EMPTY", true);
        check_label(&"Я".repeat(100), true);
        check_label(&"Я".repeat(101), false);
        check_label("", false);
        check_label("STOCKS DRRK", false);
        check_label("A\u{00A0}B", false); // no-break space is whitespace too
        check_label("A\u{3000}B", false);
        check_label("A\\B", false);
        check_label("A\nB", false);
        check_label("A\u{7f}B", false);
        check_label("A,B", false);
        check_label("A\"B", false);
        check_label("A'B", false);
        check_label("A(B", false);
        check_label("A]B", false);
        check_label("A«B", false);
    }

    #[test]
    fn names_are_trimmed_and_counted_in_characters() {
        assert_eq!(validate_name("  АРМ КА ").as_deref(), Ok("АРМ КА"));
        assert!(validate_name("   ").is_err());
        assert!(validate_name(&"ж".repeat(100)).is_ok());
        assert_eq!(validate_name(&"ж".repeat(101)).unwrap_err().field, "name");
    }

    #[test]
    fn boards() {
        assert!(validate_board_id(None).is_ok());
        assert!(validate_board_id(Some(1)).is_ok());
        assert_eq!(validate_board_id(Some(0)).unwrap_err().field, "board_id");
        assert!(validate_board_id(Some(-4)).is_err());
    }

    #[test]
    fn collisions_fold_unicode_case() {
        assert!(labels_collide("AWPCA", "awpca"));
        assert!(labels_collide("Проект", "пРОЕКТ"));
        assert!(labels_collide("ЁЛКА", "ёлка"));
        assert!(labels_collide("STRASSE", "straße"));
        assert!(!labels_collide("AWPCA", "AWPCB"));
    }
}
