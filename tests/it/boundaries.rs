//! The layering of ARCHITECTURE.md, checked on the source: a module that imports across a
//! forbidden boundary fails this test, whatever the reviewer noticed.
//!
//! Every `crate::<module>` path (and every name of a `use crate::{…}` group) in a file is a use of
//! that module; external crates are found by their paths (`rusqlite::`, `axum::`, …).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The top-level module a source file belongs to: `src/store/mirror.rs` → `store`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap();
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code of a file without its comments (doc comments name modules in prose).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate modules a piece of code uses.
fn crate_modules(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a::x, b, c::{y, z}}`: the names at the group's top level.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        used.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            used.insert(ident(rest));
        }
    }
    used.remove("");
    used
}

/// Whether `code` uses a path starting with `prefix` (`notify::` but not `sd_notify::`).
fn uses_path(code: &str, prefix: &str) -> bool {
    code.match_indices(prefix).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The rules: (module, what it must not use, why).
const FORBIDDEN: &[(&str, &[&str], &str)] = &[
    (
        "domain",
        &[
            "store", "service", "relay", "http", "daemon", "cli", "agent", "jira",
        ],
        "domain does no I/O and knows no transport",
    ),
    (
        "http",
        &["store", "relay", "daemon", "cli", "agent", "sim"],
        "http calls the service; it never touches the store or the relay",
    ),
    (
        "relay",
        &["store", "http", "daemon", "cli", "agent", "sim"],
        "the relay calls the service; it never touches the store or HTTP",
    ),
    (
        "agent",
        &["store", "service", "relay", "http", "daemon", "cli", "sim"],
        "the agent speaks the protocol only: it never touches the hub's side",
    ),
    (
        "protocol",
        &[
            "store", "service", "relay", "http", "daemon", "cli", "agent",
        ],
        "the wire types depend on nothing but domain",
    ),
    (
        "jira",
        &[
            "store", "service", "relay", "http", "daemon", "cli", "agent",
        ],
        "raw Jira issues are mapped without I/O",
    ),
    (
        "store",
        &["service", "relay", "http", "daemon", "cli", "agent", "sim"],
        "the store knows rows, not operations or transports",
    ),
    (
        "service",
        &["relay", "http", "daemon", "cli", "agent", "sim"],
        "the service is behind every transport, never beside one",
    ),
    (
        "sharefs",
        &[
            "domain", "store", "service", "protocol", "jira", "relay", "http", "daemon", "cli",
            "agent", "sim",
        ],
        "reading and writing a shared folder safely knows neither the hub nor the agent",
    ),
    (
        "sim",
        &[
            "domain", "store", "service", "protocol", "jira", "relay", "http", "daemon", "cli",
            "agent",
        ],
        "the simulated Jira is an outside system: it shares no code with the hub or the agent",
    ),
];

/// External crates only some modules may use: (path prefix, the modules). `sim` is a fake
/// Jira server, so it serves HTTP with axum as `http` does.
const ONLY_IN: &[(&str, &[&str])] = &[
    ("rusqlite::", &["store"]),
    ("axum::", &["http", "sim"]),
    ("hyper::", &["http"]),
    ("hyper_util::", &["http"]),
    ("notify::", &["relay"]),
    ("ureq::", &["agent"]),
];

/// Crates that do I/O, which `domain` never uses.
const IO_IN_DOMAIN: &[&str] = &[
    "std::fs",
    "std::net",
    "tokio::",
    "std::process",
    "std::io::stdin",
];

#[test]
fn no_module_imports_across_a_forbidden_boundary() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for file in rust_files(&src) {
        let module = module_of(&src, &file);
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let used = crate_modules(&code);
        for (owner, forbidden, why) in FORBIDDEN {
            if module != *owner {
                continue;
            }
            for target in forbidden.iter().filter(|t| used.contains(**t)) {
                broken.push(format!(
                    "{}: {module} uses {target} ({why})",
                    file.display()
                ));
            }
        }
        for (prefix, only) in ONLY_IN {
            if !only.contains(&module.as_str()) && uses_path(&code, prefix) {
                broken.push(format!(
                    "{}: {module} uses {prefix} (only {} may)",
                    file.display(),
                    only.join(", ")
                ));
            }
        }
        if module == "domain" {
            for prefix in IO_IN_DOMAIN.iter().filter(|p| uses_path(&code, p)) {
                broken.push(format!("{}: domain uses {prefix} (no I/O)", file.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "forbidden imports:\n{}",
        broken.join("\n")
    );
}

/// The checker itself finds what it must (a rule that can never fail checks nothing).
#[test]
fn the_checker_sees_uses() {
    let code = code_of(
        "use crate::{store::Tx, domain, service::{HubConnection, X}};\n\
         fn f() { crate::relay::inspect::x(); } // crate::http in a comment",
    );
    let used = crate_modules(&code);
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["domain", "relay", "service", "store"]
    );
    assert!(uses_path("use notify::Watcher;", "notify::"));
    assert!(!uses_path("sd_notify::notify(false, &[])", "notify::"));
}
