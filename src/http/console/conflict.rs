//! The conflict of an edit on its command's page: a table of the fields changed in
//! Jira since the edit was enqueued (Поле · Было · В Jira сейчас · Хотели записать, with who
//! changed it and when, as Jira's changelog said), and the operator's two answers: «Записать
//! поверх» (a retry that writes those fields over Jira's values) and «Оставить как в Jira» (the
//! command ends cancelled, its dependents stay skipped, and copies of them may be enqueued as a
//! new batch). Jira's times are shown in the console's one form (in UTC), Jira's text in the
//! tooltip.

use super::html::Section;
use super::html::{Text, form, jira_time_of};
use super::{Posted, missing_page, problem_page, see_other, with_notice};
use crate::domain::command::CommandStatus;
use crate::domain::edit;
use crate::service::{BatchView, CommandView, enqueued_again};
use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use time::OffsetDateTime;

/// The conflict section of a command's page; empty when its result holds no conflict.
/// `dependents`: the commands of the batch that take their `$result` from this one. `csrf`: the
/// actions are offered (not in a cancelled batch, and only while the command is `failed`, or,
/// left as in Jira, while dependents skipped because of it were not enqueued again).
pub(super) fn section(
    command: &CommandView,
    dependents: &[CommandView],
    csrf: Option<&str>,
    now: OffsetDateTime,
) -> Markup {
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
                                            (Text(who)) ", " (jira_time_of(when, now))
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
                         в Jira» отменяет команду; зависящие от неё не выполнятся в этом пакете, \
                         их можно будет поставить новым пакетом."
                    }
                }
                (csrf, CommandStatus::Cancelled) => {
                    p.hint { "Оставлено как в Jira: команда отменена, ничего не записано." }
                    (kept_dependents(command, dependents, csrf))
                }
                _ => {}
            }
        }
    }
}

/// After «Оставить как в Jira»: the dependents skipped because of the command do not run in its
/// batch (it is never retried); those not yet enqueued again are offered as a new batch.
fn kept_dependents(
    command: &CommandView,
    dependents: &[CommandView],
    csrf: Option<&str>,
) -> Markup {
    let skipped: Vec<&CommandView> = dependents
        .iter()
        .filter(|d| d.status == CommandStatus::Skipped)
        .collect();
    if skipped.is_empty() {
        return html! {};
    }
    let waiting = skipped
        .iter()
        .filter(|d| !enqueued_again(d.error.as_deref()))
        .count();
    html! {
        p #kept-dependents {
            "Зависящие от неё команды этого пакета не выполнятся: "
            @for (n, d) in skipped.iter().enumerate() {
                @if n > 0 { ", " }
                a href={ "/ui/commands/" (d.id) } { "команда " (d.seq) }
            }
            "."
            @if waiting == 0 {
                " Они уже поставлены новым пакетом (см. причину на их страницах)."
            }
        }
        @if let (Some(csrf), true) = (csrf, waiting > 0) {
            p.actions {
                (form(&format!("/ui/commands/{}/enqueue-dependents", command.id), csrf, &[], "Поставить их новым пакетом", ""))
            }
            p.hint {
                "Новый пакет с копиями этих команд (и зависящих от них): они выполнятся для задачи \
                 в том виде, в каком её оставили в Jira."
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

/// «Поставить их новым пакетом»: on to the new batch's page.
pub(super) async fn enqueue_dependents(Path(id): Path<String>, posted: Posted) -> Response {
    let back = format!("/ui/commands/{id}");
    let Ok(id) = id.parse::<i64>() else {
        return missing_page(Some(&posted.csrf));
    };
    match posted
        .state
        .pool
        .run(move |hub| hub.enqueue_dependents_again(id, "console"))
        .await
    {
        Ok(view) => see_other(&with_notice(
            &format!("/ui/batches/{}", view.id),
            "enqueued-dependents",
        )),
        Err(error) => problem_page(
            &posted.frame("Действие не выполнено", Section::Batches),
            &error,
            &back,
        ),
    }
}
