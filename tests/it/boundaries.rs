//! The layering of ARCHITECTURE.md, checked on the source: a module that imports across a
//! forbidden boundary fails this test, whatever the reviewer noticed.
//!
//! Every `crate::<module>` path (and every name of a `use crate::{…}` group) in a file is a use of
//! that module; external crates are found by their paths (`rusqlite::`, `axum::`, …).
//!
//! Inside a folder, no two files import each other, however indirectly (the circle check below),
//! and no source file grows past [`MAX_FILE_LINES`].

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

/// The module path of a file under `src`: `agent/commands/looks.rs` → `[agent, commands, looks]`,
/// `agent/commands/mod.rs` → `[agent, commands]`, `lib.rs` → `[]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = path.pop().unwrap_or_default();
    match last.trim_end_matches(".rs") {
        "mod" | "lib" | "main" => {}
        name => path.push(name.to_string()),
    }
    path
}

/// The modules a file's code names, as absolute module paths (`crate::a::b`, `super::x`,
/// `self::y`, and each name of a `{…}` group after them), resolved from the file's own module.
/// `super` inside an inline `mod name { … }` counts from that inline module; what a file's tests
/// (`#[cfg(test)] mod … { … }`) name is left out: tests may reach anywhere.
fn named_modules(own: &[String], code: &str) -> Vec<Vec<String>> {
    let mut named = Vec::new();
    // The depth of inline modules at each byte: `mod x {` opens one, its closing brace ends it;
    // and whether one of them is tests.
    let mut inline_at = vec![0usize; code.len() + 1];
    let mut test_at = vec![false; code.len() + 1];
    let (mut depth, mut open): (i64, Vec<(i64, bool)>) = (0, Vec::new());
    for (i, c) in code.char_indices() {
        match c {
            '{' => {
                let before = code[..i].trim_end();
                let word_start = before
                    .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_')
                    .len();
                if let Some(declared) = before[..word_start].trim_end().strip_suffix("mod") {
                    open.push((depth, is_test_only(declared)));
                }
                depth += 1;
            }
            '}' => {
                depth -= 1;
                if open.last().is_some_and(|(at, _)| *at == depth) {
                    open.pop();
                }
            }
            _ => {}
        }
        let in_tests = open.iter().any(|(_, test)| *test);
        for at in i..i + c.len_utf8() {
            inline_at[at] = open.len();
            test_at[at] = in_tests;
        }
    }
    for (at, _) in code.match_indices("::") {
        // The path this `::` continues, read back to its start.
        let start = code[..at]
            .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
            .len();
        if code[start..at].contains("::") {
            continue; // not the path's first `::`
        }
        if test_at[start] {
            continue;
        }
        let head = &code[start..at];
        let base: Option<Vec<String>> = match head {
            "crate" => Some(Vec::new()),
            "self" => Some(own.to_vec()),
            "super" => {
                // `super::super::…`: count every `super` of the path.
                let mut rest = &code[at + 2..];
                let mut ups: usize = 1;
                while let Some(more) = rest.strip_prefix("super::") {
                    ups += 1;
                    rest = more;
                }
                let ups = ups.saturating_sub(inline_at[start]);
                // None: a file's tests naming the file itself, or a path above the crate.
                (1..=own.len())
                    .contains(&ups)
                    .then(|| own[..own.len() - ups].to_vec())
            }
            _ => None,
        };
        let Some(base) = base else { continue };
        let mut rest = &code[at + 2..];
        while let Some(more) = rest.strip_prefix("super::") {
            rest = more;
        }
        for tail in paths_of(rest) {
            let mut path = base.clone();
            path.extend(tail);
            named.push(path);
        }
    }
    named
}

/// The paths a `use` tree or a path expression starting at `text` names: `a::b::X` → `[a, b, X]`,
/// `{a::x, b, c::{y, z}}` → `[a, x]`, `[b]`, `[c, y]`, `[c, z]` (`self` in a group names the path
/// before it).
fn paths_of(text: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut head = Vec::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items at its top level, each a path of its own.
            let (mut depth, mut item) = (0, 0);
            let mut found = Vec::new();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 0 => {
                        for tail in paths_of(&group[item..i]) {
                            let mut path = head.clone();
                            path.extend(tail.into_iter().filter(|n| n != "self"));
                            found.push(path);
                        }
                        if c == '}' {
                            break;
                        }
                        item = i + 1;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            return found;
        }
        let name = ident(rest);
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        head.push(name);
        match rest.strip_prefix("::") {
            Some(more) => rest = more.trim_start(),
            None => break,
        }
    }
    if head.is_empty() {
        Vec::new()
    } else {
        vec![head]
    }
}

/// Whether the text before a `mod` declaration ends with `#[cfg(test)]` (and a visibility).
fn is_test_only(before: &str) -> bool {
    let before = before.trim_end();
    let before = before
        .strip_suffix("pub(crate)")
        .or_else(|| before.strip_suffix("pub"))
        .unwrap_or(before);
    before.trim_end().ends_with("#[cfg(test)]")
}

/// The modules a file declares only for tests (`#[cfg(test)] mod testkit;`), as module paths.
fn test_only_modules(own: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        let rest = &code[at + "mod ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].starts_with(';') && is_test_only(&code[..at]) {
            let mut path = own.to_vec();
            path.push(name);
            found.push(path);
        }
    }
    found
}

/// The circles between the files of one folder: for each folder, its files and subfolders are
/// the nodes (its `mod.rs` is the folder itself, the parent every file of it may reach up to), and
/// a file that names a sibling (`super::x`, `crate::…::x`) is an arrow to it. Test code is left
/// out (a file's tests, files declared only for tests). Each circle found is one line:
/// `src/store: backup → health → backup (store/backup.rs names health; store/health.rs names backup)`.
fn circles(files: &[(PathBuf, String)]) -> Vec<String> {
    use std::collections::BTreeMap;
    // folder → node → node it names → the file that names it.
    let mut arrows: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    let mut nodes: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for (relative, _) in files {
        let path = module_path(relative);
        for depth in 0..path.len() {
            nodes
                .entry(path[..depth].to_vec())
                .or_default()
                .insert(path[depth].clone());
        }
    }
    let tests_only: Vec<Vec<String>> = files
        .iter()
        .flat_map(|(relative, text)| test_only_modules(&module_path(relative), &code_of(text)))
        .collect();
    for (relative, text) in files {
        let own = module_path(relative);
        if tests_only.iter().any(|test| own.starts_with(test)) {
            continue;
        }
        let code = code_of(text);
        for named in named_modules(&own, &code) {
            // The folder both sit in: their longest common prefix.
            let common = own.iter().zip(&named).take_while(|(a, b)| a == b).count();
            if common >= own.len() || common >= named.len() {
                continue; // the file itself, its own children, or a folder it lies in
            }
            let folder = own[..common].to_vec();
            let (from, to) = (&own[common], &named[common]);
            if !nodes.get(&folder).is_some_and(|n| n.contains(to)) {
                continue; // an item of the folder's mod.rs, or an external path
            }
            arrows
                .entry(folder)
                .or_default()
                .entry(from.clone())
                .or_default()
                .entry(to.clone())
                .or_insert_with(|| relative.display().to_string());
        }
    }
    let mut found = Vec::new();
    for (folder, graph) in &arrows {
        let mut reported: BTreeSet<BTreeSet<String>> = BTreeSet::new();
        for start in graph.keys() {
            // Depth-first from `start` for a way back to it.
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((node, way)) = stack.pop() {
                for next in graph.get(&node).into_iter().flat_map(|n| n.keys()) {
                    if next == start {
                        let members: BTreeSet<String> = way.iter().cloned().collect();
                        if reported.insert(members) {
                            let mut circle = way.clone();
                            circle.push(start.clone());
                            let why: Vec<String> = circle
                                .windows(2)
                                .map(|pair| {
                                    format!("{} names {}", graph[&pair[0]][&pair[1]], pair[1])
                                })
                                .collect();
                            let place = if folder.is_empty() {
                                "src".to_string()
                            } else {
                                format!("src/{}", folder.join("/"))
                            };
                            found.push(format!(
                                "{place}: {} ({})",
                                circle.join(" → "),
                                why.join("; ")
                            ));
                        }
                    } else if seen.insert(next.clone()) {
                        let mut longer = way.clone();
                        longer.push(next.clone());
                        stack.push((next.clone(), longer));
                    }
                }
            }
        }
    }
    found
}

/// The files of `src` with their text, by path relative to `src`.
fn source_tree() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    rust_files(&src)
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file.strip_prefix(&src).unwrap().to_path_buf(), text)
        })
        .collect()
}

/// No two files of one folder import each other, directly or around a longer loop: what both
/// need lives in a module below both.
#[test]
fn no_circle_between_the_files_of_a_folder() {
    let found = circles(&source_tree());
    assert!(
        found.is_empty(),
        "files of one folder that import each other (move what both need into a module below both):\n{}",
        found.join("\n")
    );
}

/// The circle check itself: a planted circle is named, arrows up to the folder's `mod.rs`,
/// a file's tests naming the file, and one-way arrows are not circles.
#[test]
fn the_circle_check_names_a_planted_circle() {
    let tree = |files: &[(&str, &str)]| -> Vec<(PathBuf, String)> {
        files
            .iter()
            .map(|(path, code)| (PathBuf::from(path), code.to_string()))
            .collect()
    };
    let clean = tree(&[
        ("lib.rs", "mod store; mod cli; mod daemon;"),
        (
            "store/mod.rs",
            "mod backup; mod health; mod dbfile; use backup::X;",
        ),
        (
            "store/backup.rs",
            "use super::dbfile::{database_file, MARK_OFFSET};\nuse super::{Result, Store};",
        ),
        (
            "store/health.rs",
            "fn f() { super::dbfile::database_file(p); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::backup::X;\n}",
        ),
        ("store/dbfile.rs", "use super::Result;"),
        ("daemon.rs", "fn f() { crate::instance::busy(); }"),
        ("cli/mod.rs", "use crate::daemon::serve;"),
        ("instance.rs", ""),
    ]);
    assert_eq!(circles(&clean), Vec::<String>::new());

    let planted = tree(&[
        ("lib.rs", "mod store; mod cli; mod daemon;"),
        ("store/mod.rs", "mod backup; mod health;"),
        ("store/backup.rs", "fn f() { super::health::MARK_OFFSET }"),
        (
            "store/health.rs",
            "use super::{backup::database_file, Result};",
        ),
        ("daemon.rs", "fn f() { crate::cli::busy_port_words(); }"),
        ("cli/demo.rs", "use crate::{daemon::serve, store};"),
        (
            "agent/commands/mod.rs",
            "use crate::agent::conflict::outcome;",
        ),
        (
            "agent/conflict.rs",
            "use super::commands::{Executor, Fail};",
        ),
    ]);
    assert_eq!(
        circles(&planted),
        [
            "src: cli → daemon → cli (cli/demo.rs names daemon; daemon.rs names cli)",
            "src/agent: commands → conflict → commands (agent/commands/mod.rs names conflict; \
             agent/conflict.rs names commands)",
            "src/store: backup → health → backup (store/backup.rs names health; store/health.rs \
             names backup)",
        ]
    );
}

/// No source file grows past this many lines, its tests included: a file that does is split by
/// its concerns.
const MAX_FILE_LINES: usize = 1300;

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let long: Vec<String> = source_tree()
        .iter()
        .filter_map(|(path, text)| {
            let lines = text.lines().count();
            (lines > MAX_FILE_LINES).then(|| {
                format!(
                    "src/{}: {lines} lines (at most {MAX_FILE_LINES})",
                    path.display()
                )
            })
        })
        .collect();
    assert!(long.is_empty(), "files to split:\n{}", long.join("\n"));
}
