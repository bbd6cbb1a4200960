//! The conflict of an edit on its command's page: a table of the fields changed in
//! Jira since the edit was enqueued (Поле · Было · В Jira сейчас · Хотели записать, with who
//! changed it and when, as Jira's changelog said), and the operator's two answers: «Записать
//! поверх» (a retry that writes those fields over Jira's values) and «Оставить как в Jira» (the
//! command ends cancelled, its dependents stay skipped).

use super::html::{Text, form};
use crate::domain::command::CommandStatus;
use crate::domain::edit;
use crate::service::{BatchView, CommandView};
use maud::{Markup, html};

/// The conflict section of a command's page; empty when its result holds no conflict. `csrf`:
/// the actions are offered (not in a cancelled batch, and only while the command is `failed`).
pub(super) fn section(command: &CommandView, csrf: Option<&str>) -> Markup {
    let Some(conflict) = edit::conflict_of(command.result.as_ref()) else {
        return html! {};
    };
    html! {
        section #conflict {
            h2 { "Конфликт с Jira" }
            p {
                "После постановки правки в очередь эти поля изменили в Jira. Агент ничего не \
                 записал: решите, чьё значение оставить."
            }
            div.scroll {
                table #conflict-fields {
                    thead {
                        tr {
                            th { "Поле" } th { "Было" } th { "В Jira сейчас" } th { "Хотели записать" }
                            th { "Кто и когда изменил" }
                        }
                    }
                    tbody {
                        @for field in conflict["fields"].as_array().into_iter().flatten() {
                            tr {
                                td { (Text(edit::field_label(field["field"].as_str().unwrap_or("")))) }
                                td { (Text(&edit::shown(&field["base"]))) }
                                td { (Text(&edit::shown(&field["jira"]))) }
                                td { (Text(&edit::shown(&field["wanted"]))) }
                                td {
                                    @match (field["changed_by"].as_str(), field["changed_at"].as_str()) {
                                        (Some(who), Some(when)) => {
                                            (Text(who)) ", " (Text(&when.replacen('T', " ", 1)))
                                        }
                                        _ => "Jira не сказала",
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @match (csrf, command.status) {
                (Some(csrf), CommandStatus::Failed) => {
                    p.actions {
                        (form(&format!("/ui/commands/{}/overwrite", command.id), csrf, &[], "Записать поверх", "danger"))
                        " "
                        (form(&format!("/ui/commands/{}/keep-jira", command.id), csrf, &[], "Оставить как в Jira", ""))
                    }
                    p.hint {
                        "«Записать поверх» снова ставит команду в очередь: поля из таблицы запишутся \
                         поверх значений Jira, остальные сверятся снова. «Повторить» сверит все поля \
                         снова (если в Jira вернули прежнее значение, правка запишется). «Оставить как \
                         в Jira» отменяет команду, зависящие от неё остаются пропущенными."
                    }
                }
                (_, CommandStatus::Cancelled) => {
                    p.hint { "Оставлено как в Jira: команда отменена, ничего не записано." }
                }
                _ => {}
            }
        }
    }
}

/// A batch's conflicts, apart from its other failures: a fact of the batch's head (nothing when
/// there are none).
pub(super) fn batch_fact(view: &BatchView) -> Markup {
    if view.conflicts == 0 {
        return html! {};
    }
    let failed = view.counters.get("failed").copied().unwrap_or(0);
    let other = failed.saturating_sub(view.conflicts);
    html! {
        dt { "Конфликты с Jira" }
        dd #batch-conflicts { (view.conflicts) " ждут решения на странице команды; других ошибок: " (other) }
    }
}
