//! The base JQL and the legacy `base_jql` it replaced.
//!
//! Since schema v4 the hub does not store a base JQL: it computes it from the projects
//! (`project = K AND labels in ("A", "B")`, labels quoted so that a label such as `EMPTY` stays a
//! label). Versions 1–3 stored one JQL string; [`parse_legacy_base_jql`] recovers the labels from
//! it for the v3→v4 migration and for `jira-hub init`.

use super::project::{labels_collide, validate_label};

/// `project = AURORA AND labels in ("AWPCA", "STOCKS_DRRK")`, or `None` without a project key or
/// without projects. `labels` must already be in project order (created_at, then label).
pub(crate) fn base_jql<'a>(
    project_key: Option<&str>,
    labels: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let project_key = project_key?;
    let quoted: Vec<String> = labels.into_iter().map(|l| format!("\"{l}\"")).collect();
    if quoted.is_empty() {
        return None;
    }
    Some(format!(
        "project = {} AND labels in ({})",
        project_value(project_key),
        quoted.join(", ")
    ))
}

/// The JQL that refreshes one project: the base JQL restricted to its label.
pub(crate) fn project_jql(project_key: &str, label: &str) -> String {
    format!(
        "project = {} AND labels in (\"{label}\")",
        project_value(project_key)
    )
}

/// A project key as a JQL value: bare when it is a plain word, quoted (`"`, `\` escaped) when
/// it is one of JQL's reserved words or holds anything but letters, digits and `_`. Jira
/// refuses a reserved word unquoted ("… is a reserved JQL word. You must surround it in
/// quotation marks to use it in a query"); a project may well be keyed `AND`, `OR`, `IS`, `TO`,
/// `SET`, `USER`.
pub(crate) fn project_value(key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain && !is_reserved(key) {
        key.to_string()
    } else {
        quote(key)
    }
}

/// A JQL string literal: `"…"` with `"` and `\\` escaped.
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Whether a word is one of JQL's reserved words, in any case: Jira's
/// `JqlStringSupportImpl.RESERVED_WORDS` (the list Atlassian's JQL reference prints as
/// "Reserved words").
pub(crate) fn is_reserved(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    RESERVED_WORDS.binary_search(&lower.as_str()).is_ok()
}

/// JQL's reserved words, sorted (Jira's `JqlStringSupportImpl.RESERVED_WORDS`).
const RESERVED_WORDS: &[&str] = &[
    "abort",
    "access",
    "add",
    "after",
    "alias",
    "all",
    "alter",
    "and",
    "any",
    "as",
    "asc",
    "audit",
    "avg",
    "before",
    "begin",
    "between",
    "boolean",
    "break",
    "by",
    "byte",
    "catch",
    "cf",
    "char",
    "character",
    "check",
    "checkpoint",
    "collate",
    "collation",
    "column",
    "commit",
    "connect",
    "continue",
    "count",
    "create",
    "current",
    "date",
    "decimal",
    "declare",
    "decrement",
    "default",
    "defaults",
    "define",
    "delete",
    "delimiter",
    "desc",
    "difference",
    "distinct",
    "divide",
    "do",
    "double",
    "drop",
    "else",
    "empty",
    "encoding",
    "end",
    "equals",
    "escape",
    "exclusive",
    "exec",
    "execute",
    "exists",
    "explain",
    "false",
    "fetch",
    "field",
    "file",
    "first",
    "float",
    "for",
    "from",
    "function",
    "go",
    "goto",
    "grant",
    "greater",
    "group",
    "having",
    "identified",
    "if",
    "immediate",
    "in",
    "increment",
    "index",
    "initial",
    "inner",
    "inout",
    "input",
    "insert",
    "int",
    "integer",
    "intersect",
    "intersection",
    "into",
    "is",
    "isempty",
    "isnull",
    "join",
    "last",
    "left",
    "less",
    "like",
    "limit",
    "lock",
    "long",
    "max",
    "min",
    "minus",
    "mode",
    "modify",
    "modulo",
    "more",
    "multiply",
    "next",
    "noaudit",
    "not",
    "notin",
    "nowait",
    "null",
    "number",
    "object",
    "of",
    "on",
    "option",
    "or",
    "order",
    "outer",
    "output",
    "power",
    "previous",
    "prior",
    "privileges",
    "public",
    "raise",
    "raw",
    "remainder",
    "rename",
    "resource",
    "return",
    "returns",
    "revoke",
    "right",
    "row",
    "rowid",
    "rownum",
    "rows",
    "select",
    "session",
    "set",
    "share",
    "size",
    "sqrt",
    "start",
    "strict",
    "string",
    "subtract",
    "sum",
    "synonym",
    "table",
    "then",
    "to",
    "trans",
    "transaction",
    "trigger",
    "true",
    "uid",
    "union",
    "unique",
    "update",
    "user",
    "validate",
    "values",
    "view",
    "was",
    "when",
    "whenever",
    "where",
    "while",
    "with",
];

/// How far before the start of the last successful run an incremental refresh looks: an issue
/// updated in Jira while that run was paging (after the search passed it) has an `updated`
/// after the run's start, and Jira's clock may be a little behind the hub's.
pub(crate) const INCREMENTAL_OVERLAP: time::Duration = time::Duration::minutes(10);

/// What separates a scope's JQL from the incremental clause.
const INCREMENTAL_CLAUSE: &str = " AND updated >= ";

/// The incremental refresh of `scope` (a base or project JQL, conditions joined by `AND` only)
/// since `since`: `<scope> AND updated >= <epoch milliseconds>`. An absolute time as unquoted
/// epoch milliseconds: Jira reads a date string in the searching account's time zone, and only
/// to the minute.
pub(crate) fn incremental_jql(scope: &str, since: time::OffsetDateTime) -> String {
    format!("{scope}{INCREMENTAL_CLAUSE}{}", epoch_ms(since))
}

/// The `updated >=` bound of an incremental refresh after a run that started at `last_start`.
pub(crate) fn incremental_since(last_start: time::OffsetDateTime) -> time::OffsetDateTime {
    last_start - INCREMENTAL_OVERLAP
}

pub(crate) fn epoch_ms(at: time::OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The scope and the epoch-millisecond bound of an incremental query; `None` for any other.
pub(crate) fn split_incremental(query: &str) -> Option<(&str, i64)> {
    let (scope, bound) = query.rsplit_once(INCREMENTAL_CLAUSE)?;
    if scope.is_empty() || bound.is_empty() || !bound.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((scope, bound.parse().ok()?))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A bare word (`project`, `AND`, `AWPCA`).
    Word(String),
    /// A value in double or single quotes, unescaped.
    Quoted(String),
    /// An operator or punctuation: `=`, `!=`, `~`, `(`, `)`, `,`, `<`, `>`.
    Symbol(String),
}

fn tokenize(jql: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = jql.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' || c == '\'' {
            chars.next();
            let mut value = String::new();
            loop {
                match chars.next()? {
                    '\\' => value.push(chars.next()?),
                    q if q == c => break,
                    other => value.push(other),
                }
            }
            tokens.push(Token::Quoted(value));
        } else if matches!(c, '=' | '(' | ')' | ',' | '~') {
            chars.next();
            tokens.push(Token::Symbol(c.to_string()));
        } else if matches!(c, '!' | '<' | '>') {
            chars.next();
            let mut symbol = c.to_string();
            if chars.peek() == Some(&'=') {
                chars.next();
                symbol.push('=');
            }
            tokens.push(Token::Symbol(symbol));
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || "=(),~!<>\"'".contains(c) {
                    break;
                }
                word.push(c);
                chars.next();
            }
            tokens.push(Token::Word(word));
        }
    }
    Some(tokens)
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.eq_ignore_ascii_case(word))
}

fn is_symbol(token: Option<&Token>, symbol: &str) -> bool {
    matches!(token, Some(Token::Symbol(s)) if s == symbol)
}

/// A label value: quoted, or a bare word that is not a JQL keyword (`labels = EMPTY` selects
/// issues without labels, it names no label).
fn label_value(token: Option<&Token>) -> Option<String> {
    match token? {
        Token::Quoted(value) => Some(value.clone()),
        Token::Word(word) => {
            let keyword = ["EMPTY", "NULL", "AND", "OR", "NOT", "IN", "ORDER", "BY"]
                .iter()
                .any(|k| word.eq_ignore_ascii_case(k));
            (!keyword).then(|| word.clone())
        }
        Token::Symbol(_) => None,
    }
}

/// The labels of a legacy `base_jql` of the form `… labels = M` or `… labels in (M1, M2)`
/// (quoted or not, any spacing and case, an `ORDER BY` tail allowed), in their order, duplicates
/// (case-insensitive) dropped. `None` when the JQL has another shape: an `OR`, a second `labels`
/// clause, a label that is not a valid project label. Conditions before `labels` other than that
/// are not kept: the v4 base JQL is `project = K AND labels in (…)` by definition.
pub(crate) fn parse_legacy_base_jql(jql: &str) -> Option<Vec<String>> {
    let tokens = tokenize(jql)?;
    let positions: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| is_word(t, "labels"))
        .map(|(i, _)| i)
        .collect();
    let [at] = positions.as_slice() else {
        return None;
    };
    let prefix = &tokens[..*at];
    if prefix.iter().any(|t| is_word(t, "or") || is_word(t, "not")) {
        return None;
    }
    if let Some(last) = prefix.last()
        && !is_word(last, "and")
    {
        return None;
    }
    let mut rest = tokens[at + 1..].iter().peekable();
    let mut labels = Vec::new();
    match rest.next() {
        Some(Token::Symbol(s)) if s == "=" => labels.push(label_value(rest.next())?),
        Some(t) if is_word(t, "in") => {
            if !is_symbol(rest.next(), "(") {
                return None;
            }
            loop {
                labels.push(label_value(rest.next())?);
                match rest.next() {
                    Some(Token::Symbol(s)) if s == "," => continue,
                    Some(Token::Symbol(s)) if s == ")" => break,
                    _ => return None,
                }
            }
        }
        _ => return None,
    }
    match rest.next() {
        None => {}
        Some(t) if is_word(t, "order") && rest.next().is_some_and(|t| is_word(t, "by")) => {}
        Some(_) => return None,
    }
    let mut unique: Vec<String> = Vec::new();
    for label in labels {
        validate_label(&label).ok()?;
        if !unique.iter().any(|u| labels_collide(u, &label)) {
            unique.push(label);
        }
    }
    Some(unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(jql: &str, expected: Option<&[&str]>) {
        let expected = expected.map(|l| l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(parse_legacy_base_jql(jql), expected, "{jql}");
    }

    #[test]
    fn reserved_project_keys_are_quoted() {
        assert!(RESERVED_WORDS.windows(2).all(|w| w[0] < w[1]), "sorted");
        assert_eq!(project_value("AURORA"), "AURORA");
        assert_eq!(project_value("AND"), "\"AND\"");
        assert_eq!(project_value("To"), "\"To\"");
        assert_eq!(project_value("USER"), "\"USER\"");
        assert_eq!(project_value("A B"), "\"A B\"");
        assert_eq!(
            base_jql(Some("OR"), ["AWPCA"]).unwrap(),
            "project = \"OR\" AND labels in (\"AWPCA\")"
        );
        assert_eq!(
            project_jql("SET", "AWPCA"),
            "project = \"SET\" AND labels in (\"AWPCA\")"
        );
    }

    #[test]
    fn legacy_shapes() {
        check("project = AURORA AND labels = AWPCA", Some(&["AWPCA"]));
        check("project=AURORA and LABELS=AWPCA", Some(&["AWPCA"]));
        check("project = AURORA AND labels = \"AWPCA\"", Some(&["AWPCA"]));
        check("project = AURORA AND labels = 'AWPCA'", Some(&["AWPCA"]));
        check(
            "project = AURORA AND labels in (AWPCA, STOCKS_DRRK)",
            Some(&["AWPCA", "STOCKS_DRRK"]),
        );
        check(
            "project = AURORA AND Labels IN(\"AWPCA\",'STOCKS_DRRK' )",
            Some(&["AWPCA", "STOCKS_DRRK"]),
        );
        check("  labels   in   ( A )  ", Some(&["A"]));
        check("labels = A ORDER BY Rank ASC", Some(&["A"]));
        check(
            "project = AURORA AND labels in (A, a, B)",
            Some(&["A", "B"]),
        );
        check("project = AURORA AND labels = \"ЁЛКА\"", Some(&["ЁЛКА"]));
        check("project = AURORA AND labels = \"EMPTY\"", Some(&["EMPTY"]));
    }

    #[test]
    fn legacy_shapes_refused() {
        check("", None);
        check("project = AURORA", None);
        check("project = AURORA AND labels = EMPTY", None);
        check("project = AURORA AND labels is EMPTY", None);
        check("project = AURORA OR labels = A", None);
        check("project = AURORA AND labels = A OR labels = B", None);
        check("project = AURORA AND labels = A AND status = Done", None);
        check("project = AURORA AND labels in (A, B", None);
        check("project = AURORA AND labels in ()", None);
        check("project = AURORA AND labels = \"STOCKS DRRK\"", None);
        check("project = AURORA AND labels = \"unterminated", None);
        check("project = AURORA AND labels != A", None);
        check("project = AURORA labels = A", None);
    }

    #[test]
    fn base_jql_quotes_labels_in_order() {
        assert_eq!(
            base_jql(Some("AURORA"), ["AWPCA", "STOCKS_DRRK"]).as_deref(),
            Some("project = AURORA AND labels in (\"AWPCA\", \"STOCKS_DRRK\")")
        );
        assert_eq!(
            base_jql(Some("AURORA"), ["EMPTY"]).as_deref(),
            Some("project = AURORA AND labels in (\"EMPTY\")")
        );
        assert_eq!(base_jql(Some("AURORA"), []), None);
        assert_eq!(base_jql(None, ["A"]), None);
        assert_eq!(
            project_jql("AURORA", "A"),
            "project = AURORA AND labels in (\"A\")"
        );
    }
}
