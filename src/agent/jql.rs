//! The JQL the agent writes: quoting of values, the key-paged form of a refresh query (paging by
//! issue key instead of deep offsets), the check before a create is repeated, and URL encoding of query
//! parameters. Only forms that both Jira and the simulated Jira of the tests understand:
//! clauses joined by `AND`, one parenthesised group, `ORDER BY key ASC`.

/// A JQL string literal: `"…"` with `"` and `\\` escaped (the hub's, one for both sides).
pub(crate) use crate::domain::jql::quote;

/// The query without its `ORDER BY …` tail (outside quotes), trimmed.
pub(crate) fn without_order_by(jql: &str) -> &str {
    let bytes = jql.as_bytes();
    let mut in_quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match in_quote {
            Some(q) => {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    in_quote = None;
                }
            }
            None => {
                if b == b'"' || b == b'\'' {
                    in_quote = Some(b);
                } else if (i == 0 || bytes[i - 1].is_ascii_whitespace() || bytes[i - 1] == b')')
                    && is_order_by(&jql[i..])
                {
                    return jql[..i].trim();
                }
            }
        }
        i += 1;
    }
    jql.trim()
}

fn is_order_by(rest: &str) -> bool {
    let mut words = rest.split_whitespace();
    matches!(
        (words.next(), words.next()),
        (Some(a), Some(b)) if a.eq_ignore_ascii_case("order") && b.len() >= 2 && b[..2].eq_ignore_ascii_case("by")
    )
}

/// One page's query of a Server/DC search, paged by issue key. In Jira's JQL `id`,
/// `key`, `issue` and `issuekey` are one clause: `key > "P-7"` means "project P, key number above
/// 7" (and `ORDER BY key` sorts by project, then key number), so a page continues after the last
/// key of the previous one *within its project*: `(<jql>) AND key > "P-7" ORDER BY key ASC`.
/// A project's first page excludes the projects already paged:
/// `(<jql>) AND project not in ("P") ORDER BY key ASC`.
pub(crate) fn key_page(jql: &str, done_projects: &[String], after_key: Option<&str>) -> String {
    let base = without_order_by(jql);
    let mut clauses: Vec<String> = Vec::new();
    if !base.is_empty() {
        clauses.push(format!("({base})"));
    }
    match after_key {
        Some(key) => clauses.push(format!("key > {}", quote(key))),
        None if !done_projects.is_empty() => {
            let list: Vec<String> = done_projects.iter().map(|p| quote(p)).collect();
            clauses.push(format!("project not in ({})", list.join(", ")));
        }
        None => {}
    }
    if clauses.is_empty() {
        "ORDER BY key ASC".to_string()
    } else {
        format!("{} ORDER BY key ASC", clauses.join(" AND "))
    }
}

/// The check before a create is repeated: the issues this account created in the
/// project since `since_ms` (epoch milliseconds on Jira's clock). `creator`, not `reporter`: the
/// reporter can be set to anyone at create time and changed later; the creator cannot.
pub(crate) fn created_by_me(project_key: &str, since_ms: i64) -> String {
    format!(
        "project = {} AND creator = currentUser() AND created >= {since_ms}",
        crate::domain::jql::project_value(project_key)
    )
}

/// Percent-encoding of a query parameter's value (everything but RFC 3986's unreserved).
pub(crate) fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("AWPCA"), r#""AWPCA""#);
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("Метка"), "\"Метка\"");
    }

    #[test]
    fn order_by_goes_and_keyset_comes() {
        let jql = r#"project = AURORA AND labels in ("AWPCA", "STOCKS") ORDER BY key ASC"#;
        assert_eq!(
            without_order_by(jql),
            r#"project = AURORA AND labels in ("AWPCA", "STOCKS")"#
        );
        assert_eq!(
            without_order_by(r#"labels = "x order by y" order   by id"#),
            r#"labels = "x order by y""#
        );
        assert_eq!(without_order_by("project = A"), "project = A");
        assert_eq!(
            without_order_by("(project = A)ORDER BY id"),
            "(project = A)"
        );
        assert_eq!(without_order_by("reorder = 1"), "reorder = 1");
        assert_eq!(
            key_page(jql, &[], None),
            r#"(project = AURORA AND labels in ("AWPCA", "STOCKS")) ORDER BY key ASC"#
        );
        assert_eq!(
            key_page(jql, &[], Some("AURORA-1050")),
            r#"(project = AURORA AND labels in ("AWPCA", "STOCKS")) AND key > "AURORA-1050" ORDER BY key ASC"#
        );
        assert_eq!(
            key_page("labels = x", &["A".to_string(), "B".to_string()], None),
            r#"(labels = x) AND project not in ("A", "B") ORDER BY key ASC"#
        );
        assert_eq!(
            key_page("ORDER BY key", &[], Some("A-3")),
            r#"key > "A-3" ORDER BY key ASC"#
        );
        assert_eq!(key_page("", &[], None), "ORDER BY key ASC");
    }

    #[test]
    fn the_check_before_a_repeated_create() {
        assert_eq!(
            created_by_me("AURORA", 1_764_000_000_000),
            "project = AURORA AND creator = currentUser() AND created >= 1764000000000"
        );
        assert_eq!(
            created_by_me("A B", 5),
            r#"project = "A B" AND creator = currentUser() AND created >= 5"#
        );
        // A reserved word as a key: quoted, as Jira demands.
        assert_eq!(
            created_by_me("AND", 5),
            r#"project = "AND" AND creator = currentUser() AND created >= 5"#
        );
    }

    #[test]
    fn url_encoding() {
        assert_eq!(encode(r#"a = "b c"&x"#), "a%20%3D%20%22b%20c%22%26x");
        assert_eq!(encode("*all"), "%2Aall");
        assert_eq!(encode("я"), "%D1%8F");
    }
}
