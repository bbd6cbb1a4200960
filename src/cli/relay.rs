//! `relay inspect PATH` and `relay validate PATH`.

use super::open_hub;
use crate::relay::inspect::{collect, format_table, inspect_file};
use anyhow::Context;
use std::path::Path;
use std::process::ExitCode;

pub fn inspect(db: &Path, path: &Path) -> anyhow::Result<ExitCode> {
    let files = collect(path).with_context(|| format!("cannot read {}", path.display()))?;
    // Whether the hub applied a request comes from its database, when there is one.
    let mut hub = if db.exists() {
        Some(open_hub(db)?.0)
    } else {
        None
    };
    let mut rows = Vec::new();
    for file in files {
        let report = inspect_file(&file);
        let applied = match (&mut hub, &report.request_key) {
            (Some(hub), Some((kind, id))) => Some(match hub.request_handled_at(kind, id)? {
                Some(at) => format!("applied {at}"),
                None => "not applied".to_string(),
            }),
            _ => None,
        };
        rows.push((report, applied));
    }
    let base = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    print!("{}", format_table(&rows, base));
    Ok(ExitCode::SUCCESS)
}

pub fn validate(path: &Path) -> anyhow::Result<ExitCode> {
    let files = collect(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut invalid = 0;
    for file in &files {
        let report = inspect_file(file);
        match &report.valid {
            Ok(()) => println!("ok       {}", file.display()),
            Err(why) => {
                invalid += 1;
                println!("INVALID  {}: {why}", file.display());
            }
        }
    }
    println!("{} files, {} invalid", files.len(), invalid);
    Ok(if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
