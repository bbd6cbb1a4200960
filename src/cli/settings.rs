//! `settings get [KEY]` and `settings set KEY JSON`: the same validation and versioning as
//! `PUT /settings`, because both call the service.

use super::Outcome;
use super::{open_existing_hub, open_read_only_hub};
use anyhow::{Context, bail};
use serde_json::{Map, Value};
use std::path::Path;

pub(crate) fn get(db: &Path, key: Option<&str>, json: bool) -> anyhow::Result<Outcome> {
    let hub = open_read_only_hub(db)?;
    let view = hub.settings_view()?;
    let shown = match key {
        None => view,
        Some(key) => match view.get(key) {
            Some(value) => value.clone(),
            // The same words as a write of an unknown key (the validation of PUT /settings).
            None if key == "tokens" => {
                bail!("{key}: токены показывает {} tokens", crate::program())
            }
            None => bail!("{key}: неизвестная настройка"),
        },
    };
    if json {
        super::print_json(&shown)?;
    } else {
        outln!("{}", serde_json::to_string_pretty(&shown)?);
    }
    Ok(Outcome::Success)
}

pub(crate) fn set(db: &Path, key: &str, json: &str) -> anyhow::Result<Outcome> {
    let value: Value = serde_json::from_str(json).with_context(|| {
        format!("{key}: значение — не JSON (строку берут в кавычки: '\"{json}\"')")
    })?;
    let mut hub = open_existing_hub(db)?;
    let mut update = Map::new();
    update.insert(key.to_string(), value);
    let view = hub.update_settings(&update)?;
    outln!(
        "{key} = {}",
        view.get(key).map(Value::to_string).unwrap_or_default()
    );
    outln!("settings_version = {}", view["settings_version"]);
    Ok(Outcome::Success)
}
