//! The conflict of an edit on its command's page: a table of the fields changed in
//! Jira since the edit was enqueued (Поле · Было · В Jira сейчас · Хотели записать, with who
//! changed it and when, as Jira's changelog said), and the operator's two answers: «Записать
//! поверх» (a retry that writes those fields over Jira's values) and «Оставить как в Jira» (the
//! command ends cancelled, its dependents stay skipped).

use super::html::{esc, form};
use crate::domain::command::CommandStatus;
use crate::domain::edit;
use crate::service::{BatchView, CommandView};
use std::fmt::Write as _;

/// The conflict section of a command's page; empty when its result holds no conflict. `csrf`:
/// the actions are offered (not in a cancelled batch, and only while the command is `failed`).
pub(super) fn section(command: &CommandView, csrf: Option<&str>) -> String {
    let Some(conflict) = edit::conflict_of(command.result.as_ref()) else {
        return String::new();
    };
    let mut out = String::from(
        "<section id=\"conflict\"><h2>Конфликт с Jira</h2><p>После постановки правки в очередь \
         эти поля изменили в Jira. Агент ничего не записал: решите, чьё значение оставить.</p>\
         <div class=\"scroll\"><table id=\"conflict-fields\"><thead><tr><th>Поле</th><th>Было</th>\
         <th>В Jira сейчас</th><th>Хотели записать</th><th>Кто и когда изменил</th></tr></thead><tbody>",
    );
    for field in conflict["fields"].as_array().into_iter().flatten() {
        let who = match (field["changed_by"].as_str(), field["changed_at"].as_str()) {
            (Some(who), Some(when)) => {
                format!("{}, {}", esc(who), esc(&when.replacen('T', " ", 1)))
            }
            _ => "Jira не сказала".to_string(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{who}</td></tr>",
            esc(edit::field_label(field["field"].as_str().unwrap_or(""))),
            esc(&edit::shown(&field["base"])),
            esc(&edit::shown(&field["jira"])),
            esc(&edit::shown(&field["wanted"])),
        );
    }
    out.push_str("</tbody></table></div>");
    match (csrf, command.status) {
        (Some(csrf), CommandStatus::Failed) => {
            out.push_str("<p class=\"actions\">");
            out.push_str(&form(
                &format!("/ui/commands/{}/overwrite", command.id),
                csrf,
                &[],
                "Записать поверх",
                "danger",
            ));
            out.push(' ');
            out.push_str(&form(
                &format!("/ui/commands/{}/keep-jira", command.id),
                csrf,
                &[],
                "Оставить как в Jira",
                "",
            ));
            out.push_str(
                "</p><p class=\"hint\">«Записать поверх» снова ставит команду в очередь: поля из \
                 таблицы запишутся поверх значений Jira, остальные сверятся снова. «Повторить» \
                 сверит все поля снова (если в Jira вернули прежнее значение, правка запишется). \
                 «Оставить как в Jira» отменяет команду, зависящие от неё остаются пропущенными.</p>",
            );
        }
        (_, CommandStatus::Cancelled) => {
            out.push_str(
                "<p class=\"hint\">Оставлено как в Jira: команда отменена, ничего не записано.</p>",
            );
        }
        _ => {}
    }
    out.push_str("</section>");
    out
}

/// A batch's conflicts, apart from its other failures: a fact of the batch's head (nothing when
/// there are none).
pub(super) fn batch_fact(view: &BatchView) -> String {
    if view.conflicts == 0 {
        return String::new();
    }
    let failed = view.counters.get("failed").copied().unwrap_or(0);
    let other = failed.saturating_sub(view.conflicts);
    format!(
        "<dt>Конфликты с Jira</dt><dd id=\"batch-conflicts\">{} ждут решения на странице команды; других ошибок: {other}</dd>",
        view.conflicts
    )
}
