//! The JQL subset the fake parses, with Jira's parse errors.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Clause {
    Project(String),
    /// `project in (…)`: a JQL over several projects (a label spanning them, say).
    ProjectIn(Vec<String>),
    /// `project not in (…)`.
    ProjectNotIn(Vec<String>),
    Labels(Vec<String>),
    /// `id`/`key`/`issue`/`issuekey` with `>`, `>=`, `<`, `<=`: one clause in Jira whatever
    /// the name. The literal (an id as a number, a key as text) names an issue; the clause
    /// matches the issues of *that issue's project* whose key number compares so (Jira Server's
    /// `IssueIdClauseQueryFactory.handleRelational`: a range on the key-number order field AND
    /// the referenced issue's project). Resolved against the state in `matching`.
    KeyCompare {
        field: String,
        operator: String,
        literal: String,
        numeric: bool,
    },
    CreatedSince(i64),
    /// `created <= ms`.
    CreatedUntil(i64),
    UpdatedSince(i64),
    ReporterIsMe,
    /// `creator = currentUser()`: who created the issue, which no edit changes.
    CreatorIsMe,
    Keys(Vec<String>),
}

impl Clause {
    pub(super) fn matches(&self, issue: &Issue) -> bool {
        match self {
            Clause::Project(key) => issue.project == *key,
            Clause::ProjectIn(keys) => keys.contains(&issue.project),
            Clause::ProjectNotIn(keys) => !keys.contains(&issue.project),
            Clause::Labels(labels) => issue.labels.iter().any(|l| labels.contains(l)),
            // Resolved by `StateInner::matching`, which knows the referenced issue.
            Clause::KeyCompare { .. } => true,
            Clause::CreatedSince(ms) => issue.created_ms >= *ms,
            Clause::CreatedUntil(ms) => issue.created_ms <= *ms,
            Clause::UpdatedSince(ms) => issue.updated_ms >= *ms,
            Clause::ReporterIsMe => {
                issue.fields["reporter"]["name"] == USER
                    || issue.fields["reporter"]["accountId"] == ACCOUNT_ID
            }
            Clause::CreatorIsMe => {
                issue.fields["creator"]["name"] == USER
                    || issue.fields["creator"]["accountId"] == ACCOUNT_ID
            }
            Clause::Keys(keys) => keys.contains(&issue.key),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Query {
    pub(super) clauses: Vec<Clause>,
    /// `ORDER BY id|key|issuekey|issue`: Jira sorts all four by the issue key (project, then
    /// the key number), not by the numeric id (the issue clause is one field, see `KeyCompare`).
    pub(super) by_key: bool,
    /// `ORDER BY created DESC`: newest first (the JQL reference's own example of ordering,
    /// "ORDER BY created DESC"; ties by id, newest first too).
    pub(super) newest_first: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Word(String),
    Quoted(String),
    Symbol(&'static str),
}

pub(super) fn jql_error(detail: &str) -> Reply {
    Reply::error(400, &format!("Error in the JQL Query: {detail}"))
}

pub(super) fn tokenize(jql: &str) -> Result<Vec<Token>, Reply> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = jql.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let mut value = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(jql_error("The quoted string has not been completed.")),
                    Some('\\') => {
                        value.extend(chars.get(i + 1));
                        i += 2;
                    }
                    Some(q) if *q == c => {
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        value.push(*other);
                        i += 1;
                    }
                }
            }
            tokens.push(Token::Quoted(value));
        } else if let Some(symbol) = [">=", "<=", "!=", "=", ">", "<", "(", ")", ","]
            .into_iter()
            .find(|s| chars[i..].iter().take(s.len()).copied().eq(s.chars()))
        {
            tokens.push(Token::Symbol(symbol));
            i += symbol.len();
        } else if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '-' | '.'))
            {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            return Err(jql_error(&format!(
                "The character '{c}' is a reserved JQL character. (line 1, character {})",
                i + 1
            )));
        }
    }
    Ok(tokens)
}

pub(super) struct Parser {
    pub(super) tokens: Vec<Token>,
    pub(super) at: usize,
}

impl Parser {
    pub(super) fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    pub(super) fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    pub(super) fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
    }

    pub(super) fn expect_symbol(&mut self, symbol: &str) -> Result<(), Reply> {
        match self.next() {
            Some(Token::Symbol(s)) if s == symbol => Ok(()),
            other => Err(jql_error(&format!(
                "Expecting '{symbol}' but got {}.",
                describe(other.as_ref())
            ))),
        }
    }

    pub(super) fn value(&mut self) -> Result<String, Reply> {
        match self.next() {
            Some(Token::Word(w)) | Some(Token::Quoted(w)) => Ok(w),
            other => Err(jql_error(&format!(
                "Expecting either a value, list or function but got {}.",
                describe(other.as_ref())
            ))),
        }
    }

    pub(super) fn list(&mut self) -> Result<Vec<String>, Reply> {
        self.expect_symbol("(")?;
        let mut values = vec![self.value()?];
        loop {
            match self.next() {
                Some(Token::Symbol(",")) => values.push(self.value()?),
                Some(Token::Symbol(")")) => return Ok(values),
                other => {
                    return Err(jql_error(&format!(
                        "Expecting ',' or ')' but got {}.",
                        describe(other.as_ref())
                    )));
                }
            }
        }
    }

    /// `term (AND term)*`
    pub(super) fn expression(&mut self, clauses: &mut Vec<Clause>) -> Result<(), Reply> {
        self.term(clauses)?;
        while self.keyword("AND") {
            self.at += 1;
            self.term(clauses)?;
        }
        if self.keyword("OR") || self.keyword("NOT") {
            return Err(jql_error(
                "'OR' and 'NOT' are beyond what this Jira is simulated to parse.",
            ));
        }
        Ok(())
    }

    pub(super) fn term(&mut self, clauses: &mut Vec<Clause>) -> Result<(), Reply> {
        if let Some(Token::Symbol("(")) = self.peek() {
            self.at += 1;
            self.expression(clauses)?;
            return self.expect_symbol(")");
        }
        let field = match self.next() {
            Some(Token::Word(w)) | Some(Token::Quoted(w)) => w,
            other => {
                return Err(jql_error(&format!(
                    "Expecting a field name but got {}.",
                    describe(other.as_ref())
                )));
            }
        };
        let operator = match self.next() {
            Some(Token::Symbol(s)) => s.to_string(),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("in") => "in".to_string(),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("not") => "not".to_string(),
            other => {
                return Err(jql_error(&format!(
                    "Expecting operator but got {}.",
                    describe(other.as_ref())
                )));
            }
        };
        let lower = field.to_ascii_lowercase();
        let unsupported = || {
            jql_error(&format!(
                "The operator '{operator}' is not supported by the '{field}' field."
            ))
        };
        let clause = match (lower.as_str(), operator.as_str()) {
            ("project", "=") => Clause::Project(self.value()?),
            ("project", "in") => Clause::ProjectIn(self.list()?),
            ("labels", "=") => Clause::Labels(vec![self.value()?]),
            ("labels", "in") => Clause::Labels(self.list()?),
            ("id" | "key" | "issue" | "issuekey", ">" | ">=" | "<" | "<=") => {
                let (literal, numeric) = match self.next() {
                    Some(Token::Word(w)) => {
                        let numeric = w.bytes().all(|b| b.is_ascii_digit());
                        (w, numeric)
                    }
                    Some(Token::Quoted(w)) => (w, false),
                    other => {
                        return Err(jql_error(&format!(
                            "Expecting either a value, list or function but got {}.",
                            describe(other.as_ref())
                        )));
                    }
                };
                Clause::KeyCompare {
                    field: field.clone(),
                    operator: operator.clone(),
                    literal,
                    numeric,
                }
            }
            ("project", "not") => {
                if !self.keyword("in") {
                    return Err(unsupported());
                }
                self.at += 1;
                Clause::ProjectNotIn(self.list()?)
            }
            ("created" | "updated", ">=") | ("created", "<=") => {
                let value = match self.next() {
                    Some(Token::Word(w)) => w,
                    other => {
                        return Err(jql_error(&format!(
                            "Date value {} for field '{field}' is invalid: this Jira takes epoch milliseconds only.",
                            describe(other.as_ref())
                        )));
                    }
                };
                let ms: i64 = value.parse().map_err(|_| {
                    jql_error(&format!(
                        "Date value '{value}' for field '{field}' is invalid."
                    ))
                })?;
                if lower == "created" && operator == "<=" {
                    Clause::CreatedUntil(ms)
                } else if lower == "created" {
                    Clause::CreatedSince(ms)
                } else {
                    Clause::UpdatedSince(ms)
                }
            }
            ("reporter", "=") => match self.next() {
                Some(Token::Word(w)) if w == "currentUser" => {
                    self.expect_symbol("(")?;
                    self.expect_symbol(")")?;
                    Clause::ReporterIsMe
                }
                other => {
                    return Err(jql_error(&format!(
                        "Only currentUser() is simulated for 'reporter', not {}.",
                        describe(other.as_ref())
                    )));
                }
            },
            ("creator", "=") => match self.next() {
                Some(Token::Word(w)) if w == "currentUser" => {
                    self.expect_symbol("(")?;
                    self.expect_symbol(")")?;
                    Clause::CreatorIsMe
                }
                other => {
                    return Err(jql_error(&format!(
                        "Only currentUser() is simulated for 'creator', not {}.",
                        describe(other.as_ref())
                    )));
                }
            },
            ("key" | "issuekey" | "issue", "=") => Clause::Keys(vec![self.value()?]),
            ("key" | "issuekey" | "issue", "in") => Clause::Keys(self.list()?),
            (
                "project" | "labels" | "id" | "created" | "updated" | "reporter" | "creator"
                | "key" | "issuekey" | "issue",
                _,
            ) => {
                return Err(unsupported());
            }
            _ => {
                return Err(jql_error(&format!(
                    "Field '{field}' does not exist or you do not have permission to view it."
                )));
            }
        };
        clauses.push(clause);
        Ok(())
    }
}

pub(super) fn describe(token: Option<&Token>) -> String {
    match token {
        None => "the end of the query".to_string(),
        Some(Token::Word(w)) => format!("'{w}'"),
        Some(Token::Quoted(w)) => format!("'\"{w}\"'"),
        Some(Token::Symbol(s)) => format!("'{s}'"),
    }
}

pub(super) fn parse_jql(jql: &str) -> Result<Query, Reply> {
    let mut parser = Parser {
        tokens: tokenize(jql)?,
        at: 0,
    };
    let mut clauses = Vec::new();
    let mut by_key = false;
    if parser.peek().is_some() && !parser.keyword("ORDER") {
        parser.expression(&mut clauses)?;
    }
    let mut newest_first = false;
    if parser.keyword("ORDER") {
        parser.at += 1;
        if !parser.keyword("BY") {
            return Err(jql_error("Expecting 'by' after 'order'."));
        }
        parser.at += 1;
        match parser.next() {
            Some(Token::Word(w))
                if ["id", "key", "issuekey", "issue"]
                    .contains(&w.to_ascii_lowercase().as_str()) =>
            {
                by_key = true;
                if parser.keyword("ASC") {
                    parser.at += 1;
                } else if parser.peek().is_some() {
                    return Err(jql_error("Only ascending order by key is simulated."));
                }
            }
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("created") => {
                if !parser.keyword("DESC") {
                    return Err(jql_error("Only ORDER BY created DESC is simulated."));
                }
                parser.at += 1;
                newest_first = true;
            }
            other => {
                return Err(jql_error(&format!(
                    "Only ORDER BY id ASC and created DESC are simulated, not {}.",
                    describe(other.as_ref())
                )));
            }
        }
    }
    if let Some(token) = parser.peek() {
        return Err(jql_error(&format!(
            "Expecting either 'OR' or 'AND' but got {}.",
            describe(Some(token))
        )));
    }
    Ok(Query {
        clauses,
        by_key,
        newest_first,
    })
}
