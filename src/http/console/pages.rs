//! The bodies of the console's pages, from the service's views. Every text from outside goes
//! through [`esc`]; the parts that change while the page is open are `data-live` sections with an
//! id, which the page's script replaces in place.

use super::charts::{self, Mark, Unit};
use super::html::{
    clip, command_ref, command_status_words, command_type_words, duration_words, esc, form,
    millis_words, path_html, run_kind_words, run_status_words, seconds_since, segment, size_words,
    time_of, when_at,
};
use crate::domain::command::{BatchStatus, CommandStatus, RunStatus};
use crate::domain::words::{self, COMMANDS as COMMAND_FORMS, TIMES};
use crate::service::{
    AgentView, BatchView, CommandPage, CommandView, FailedBatch, HourActivity, IssueView, Overview,
    ProjectIssues, ProjectView, QueuedRefresh, RelayState, SliceRow, SyncRunView,
};
use std::fmt::Write as _;
use time::OffsetDateTime;

/// The unit of the charts of commands.
const COMMANDS: Unit = &COMMAND_FORMS;

/// A running refresh with no page from the agent for this long is flagged as stalled: a page of
/// Jira's search takes seconds, a pause Jira asks for (429) at most a few minutes.
pub(super) const REFRESH_STALLED_SECONDS: i64 = 10 * 60;

/// Statuses of a batch a list can be filtered by.
const BATCH_FILTERS: &[BatchStatus] = &[
    BatchStatus::Queued,
    BatchStatus::Running,
    BatchStatus::Completed,
    BatchStatus::Cancelled,
];

/// How many rows of a slice one page shows (the next are a link away).
pub(super) const SLICE_ROWS: usize = 200;

fn or_dash(value: Option<&str>) -> String {
    value.map_or_else(|| "—".to_string(), |v| esc(v).to_string())
}

/// The counters that are not zero, in words: `выполнена 3 · ошибка 1`.
fn counter_words<'a>(counters: impl IntoIterator<Item = (&'a &'static str, &'a usize)>) -> String {
    let parts: Vec<String> = counters
        .into_iter()
        .filter(|(_, n)| **n > 0)
        .map(|(status, n)| {
            format!(
                "<span class=\"st st-{status}\">{}: {n}</span>",
                command_status_words(status)
            )
        })
        .collect();
    if parts.is_empty() {
        "нет команд".to_string()
    } else {
        parts.join(" ")
    }
}

/// A batch's status as the console shows it: a batch that completed with failed or skipped
/// commands is «завершён с ошибками», not the green «завершён».
fn batch_status_words(view: &BatchView) -> (String, &'static str) {
    let failed = view.counters.get("failed").copied().unwrap_or(0)
        + view.counters.get("skipped").copied().unwrap_or(0);
    if view.status == BatchStatus::Completed && failed > 0 {
        ("bs bs-completed-failed".to_string(), "завершён с ошибками")
    } else {
        (format!("bs bs-{}", view.status), view.status_label)
    }
}

fn status_badge(status: &str) -> String {
    format!(
        "<span class=\"st st-{}\">{}</span>",
        esc(status),
        esc(command_status_words(status))
    )
}

/// How long a run took (or has taken so far), in milliseconds.
fn run_millis(run: &SyncRunView, now: OffsetDateTime) -> i64 {
    let end = run.run.finished_at.as_ref().map_or(now, |f| f.at());
    (end - run.run.started_at.at()).whole_milliseconds().max(0) as i64
}

/// A refresh as people name it: by its batch (a refresh is a batch with a run), linked to the
/// batch's page; a run without a batch (its command pruned long ago) by its run.
fn refresh_name(run: &SyncRunView) -> String {
    match run.run.batch_id {
        Some(batch) => format!("<a href=\"/ui/batches/{batch}\">пакет {batch}</a>"),
        None => format!("прогон {}", run.run.id),
    }
}

/// What a running refresh has done so far.
fn run_progress(run: &SyncRunView, now: OffsetDateTime) -> String {
    let of_total = match run.run.total {
        Some(total) => format!(" из {total}"),
        None => String::new(),
    };
    format!(
        "<li class=\"progress\">Обновление, {} ({}): идёт {}, страниц: <b>{}</b>, задач получено: <b>{}</b>{of_total}, изменилось: {}</li>",
        refresh_name(run),
        run_kind_words(run.kind),
        millis_words(run_millis(run, now)),
        run.run.pages,
        run.run.issues_seen,
        run.run.issues_changed
    )
}

// ---------------------------------------------------------------------------------------------
// Overview

/// An agent's name and state, judged by the hub's one silence rule: live («Был на связи …»,
/// Jira's state), silent («Молчит 2 мин: пропущено 4 сигнала…», Jira's state unknown: what it
/// said last is no longer news), or a one-off check (`agent --check` under a name that runs
/// nothing). A silent agent and a check can be forgotten (a form with the anti-forgery token).
fn agent_card_head(out: &mut String, agent: &AgentView, csrf: &str, now: OffsetDateTime) {
    let (class, state) = if let Some(refused) = &agent.hub_refused {
        // The hub refuses its token: what it said of Jira before is no news.
        (
            " refused",
            format!("<span class=\"bad\">{}</span>", esc(refused)),
        )
    } else if agent.check_only {
        (
            " check-only",
            "Разовая проверка (agent --check), не работающий агент".to_string(),
        )
    } else if agent.silent {
        (
            " silent",
            "О Jira сейчас неизвестно: агент молчит".to_string(),
        )
    } else {
        let jira = match agent.jira_ok {
            Some(true) => "<span class=\"ok\">Jira доступна</span>",
            Some(false) => "<span class=\"bad\">Jira недоступна</span>",
            None => "<span>О Jira не сообщал</span>",
        };
        ("", jira.to_string())
    };
    let _ = write!(
        out,
        "<div class=\"agent{class}\"><h3>{}</h3>",
        esc(&agent.agent)
    );
    if agent.silent {
        let missed = crate::service::missed_heartbeats(agent, now);
        let _ = write!(
            out,
            "<p class=\"bad\" role=\"status\">Молчит <span title=\"{}\">{}</span>: {}. \
             Работает ли он, есть ли связь с хабом или папкой обмена?</p>",
            esc(agent.last_seen_at.as_str()),
            duration_words(seconds_since(&agent.last_seen_at, now)),
            match agent.heartbeat_seconds {
                Some(period) => format!(
                    "{} {} о жизни (агент шлёт их раз в {})",
                    crate::domain::words::plural(missed, &crate::domain::words::MISSED),
                    crate::domain::words::count(missed, &crate::domain::words::SIGNALS),
                    duration_words(i64::from(period))
                ),
                None => format!(
                    "ни одного запроса за {}",
                    duration_words(agent.silent_after_seconds)
                ),
            }
        );
        let _ = write!(out, "<p>Версия: {} · {state}</p>", build_words(agent));
    } else {
        let _ = write!(
            out,
            "<p>{} {}<br>Версия: {} · {state}</p>",
            if agent.check_only {
                "Проверка была"
            } else {
                "Был на связи"
            },
            time_of(&agent.last_seen_at, now),
            build_words(agent)
        );
    }
    if !agent.check_only && !agent.peer.checks_bases() {
        out.push_str(
            "<p class=\"bad\">Агент прежней версии: конфликты правок не проверяет, правки с базой ему не выдаются (ждут агента, который проверяет конфликты). Обновите агента.</p>",
        );
    }
    if agent.silent || agent.check_only {
        out.push_str(&form(
            "/ui/agents/forget",
            csrf,
            &[("agent", &agent.agent)],
            "Забыть агента",
            "danger",
        ));
    }
}

/// An agent's release, commit and protocol revision: «0.2.0, коммит 1a2b3c, протокол 2».
fn build_words(agent: &AgentView) -> String {
    format!(
        "{}, коммит {}, протокол {}",
        or_dash(agent.version.as_deref()),
        or_dash(agent.peer.commit.as_deref()),
        agent.peer.protocol
    )
}

pub(super) fn overview(view: &Overview, csrf: &str) -> String {
    let now = view.now.at();
    let mut out = String::with_capacity(32 * 1024);
    out.push_str("<section id=\"overview-cards\" class=\"cards\" data-live>");
    held_card(&mut out, &view.held_runs);

    // The queue.
    out.push_str("<article class=\"card\"><h2>Очередь</h2><table class=\"counts\">");
    for q in &view.queue {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\" data-status=\"{}\">{}</td></tr>",
            status_badge(&q.status),
            esc(&q.status),
            q.commands
        );
    }
    out.push_str("</table>");
    match &view.oldest_queued_at {
        Some(at) => {
            let _ = write!(
                out,
                "<p>Старейшая команда в очереди ждёт <b>{}</b> (поставлена {}).</p>",
                duration_words(seconds_since(at, now)),
                time_of(at, now)
            );
        }
        None => {
            // A command in an agent's hands is not "nothing waiting".
            let claimed = view
                .queue
                .iter()
                .filter(|q| q.status == crate::domain::command::CommandStatus::Claimed.as_str())
                .map(|q| u64::try_from(q.commands).unwrap_or(0))
                .sum::<u64>();
            if claimed > 0 {
                let _ = write!(
                    out,
                    "<p>Новых команд в очереди нет; у агента {}.</p>",
                    crate::domain::words::count(claimed, &crate::domain::words::COMMANDS)
                );
            } else {
                out.push_str("<p>В очереди ничего не ждёт.</p>");
            }
        }
    }
    out.push_str("</article>");

    // The agents.
    out.push_str("<article class=\"card\"><h2>Агенты</h2>");
    let _ = write!(
        out,
        "<p class=\"hint\">Хаб: {}, коммит {}, протокол {}</p>",
        env!("CARGO_PKG_VERSION"),
        env!("JIRA_HUB_COMMIT"),
        crate::protocol::PROTOCOL_REVISION
    );
    if view.agents.is_empty() {
        out.push_str("<p>Агент ещё не обращался к хабу.</p>");
    }
    for agent in &view.agents {
        agent_card_head(&mut out, agent, csrf, now);
        if let Some(held) = &agent.jira_held {
            // Jira is held for this agent: why, and since when.
            let _ = write!(
                out,
                "<p class=\"bad held\" role=\"status\">{}</p>",
                esc(&clip(held, 300))
            );
        } else if let Some(error) = &agent.last_error {
            let _ = write!(
                out,
                "<p class=\"error\">Последняя ошибка: {}</p>",
                esc(&clip(error, 300))
            );
        }
        if let Some(check) = &agent.last_check {
            // The last preflight (`jira-hub agent --check`) and its failing lines.
            let failing: Vec<_> = check.lines.iter().filter(|l| !l.ok).collect();
            let _ = write!(
                out,
                "<p class=\"check{}\">Проверка настроек (agent --check) {}: {}</p>",
                if check.ok { "" } else { " bad" },
                match crate::domain::time::parse_utc(&check.ran_at) {
                    Some(at) => when_at(at, &check.ran_at, now),
                    None => esc(&check.ran_at).to_string(),
                },
                if check.ok {
                    "всё в порядке".to_string()
                } else {
                    format!("ошибок: {}", failing.len())
                }
            );
            if !failing.is_empty() {
                out.push_str("<ul class=\"check-failures\">");
                for line in failing {
                    let _ = write!(
                        out,
                        "<li>{}: {}</li>",
                        esc(&line.name),
                        esc(&clip(&line.detail, 500))
                    );
                }
                out.push_str("</ul>");
            }
        }
        out.push_str("</div>");
    }
    out.push_str("</article>");

    // The relay folder.
    out.push_str("<article class=\"card\"><h2>Папка обмена</h2>");
    match &view.relay {
        RelayState::NotSet => {
            out.push_str("<p>Не задана: агент работает только через HTTP.</p>");
        }
        RelayState::Missing { dir } => {
            let _ = write!(
                out,
                "<p class=\"bad\">Нет на месте: {}. Подключена ли общая папка?</p>",
                path_html(dir)
            );
        }
        RelayState::Unusable { dir, problem } => {
            let _ = write!(
                out,
                "<p class=\"bad\">Не используется: {}</p><p>{}</p>",
                path_html(dir),
                esc(problem)
            );
        }
        RelayState::Present {
            dir,
            waiting,
            claims_waiting,
            refused_today,
            visibility,
        } => {
            // As `jira-hub status` counts inbox/: files to handle, and claims waiting for work.
            let _ = write!(
                out,
                "<p class=\"ok\">На месте: {}</p>\
                 <p>Файлов ждут обработки: <b>{waiting}</b><br>\
                 Запросов агента ждут работы: <b>{claims_waiting}</b><br>\
                 Отклонено сегодня: <b>{refused_today}</b></p>",
                path_html(dir)
            );
            // How late the hub sees the agent's files, and what to change when that is late.
            match visibility {
                Some((delay, Some(told))) => {
                    let _ = write!(
                        out,
                        "<p class=\"bad\">Файлы агента видны с опозданием {:.1} с</p><p>{}</p>",
                        delay.as_secs_f64(),
                        esc(told)
                    );
                }
                Some((delay, None)) => {
                    let _ = write!(
                        out,
                        "<p>Файлы агента видны через {:.1} с</p>",
                        delay.as_secs_f64()
                    );
                }
                None => {}
            }
        }
    }
    out.push_str("</article>");

    // The mirror and refreshes.
    let _ = write!(
        out,
        "<article class=\"card\"><h2>Зеркало</h2><p>Задач в зеркале: <b>{}</b></p>",
        view.issues
    );
    match view
        .last_full_refresh
        .as_ref()
        .and_then(|run| run.run.finished_at.as_ref())
    {
        Some(at) => {
            let _ = write!(
                out,
                "<p>Последнее полное обновление: {}</p>",
                time_of(at, now)
            );
        }
        None => out.push_str("<p>Полного обновления ещё не было.</p>"),
    }
    queued_refresh_lines(&mut out, &view.queued_refreshes, now);
    if view.running.is_empty() {
        if view.queued_refreshes.is_empty() {
            out.push_str("<p>Сейчас обновление не идёт.</p>");
        }
    } else {
        out.push_str("<ul class=\"runs\">");
        for (i, run) in view.running.iter().enumerate() {
            out.push_str(&run_progress(run, now));
            let moved = view.running_moved_at.get(i).and_then(Option::as_ref);
            let since = moved.unwrap_or(&run.run.started_at);
            if seconds_since(since, now) > REFRESH_STALLED_SECONDS {
                let _ = write!(
                    out,
                    "<li class=\"bad stalled\">Обновление, {}, стоит: от агента ничего нет {} (с {}). \
                     Если агент молчит, обновление продолжится, когда он вернётся.</li>",
                    refresh_name(run),
                    duration_words(seconds_since(since, now)),
                    time_of(since, now)
                );
            }
        }
        out.push_str("</ul>");
    }
    out.push_str("</article>");

    // The database.
    let _ = write!(
        out,
        "<article class=\"card\"><h2>База данных</h2><p>Размер: <b>{}</b>",
        size_words(view.database_bytes)
    );
    if view.wal_bytes > 0 {
        let _ = write!(out, " (журнал WAL: {})", size_words(view.wal_bytes));
    }
    out.push_str("</p>");
    match &view.last_backup {
        Some(backup) => {
            let _ = write!(
                out,
                "<p>Последняя копия: {}, {}<br>сделана {}</p>",
                path_html(&backup.name),
                size_words(backup.bytes),
                time_of(&backup.modified, now)
            );
        }
        None => out.push_str("<p class=\"bad\">Резервных копий нет.</p>"),
    }
    out.push_str("</article></section>");

    // The charts.
    out.push_str("<section id=\"overview-charts\" class=\"charts\" data-live>");
    let hour_label = |at: OffsetDateTime| {
        format!(
            "{:02}.{:02} {:02}:00",
            at.day(),
            u8::from(at.month()),
            at.hour()
        )
    };
    let (first, last) = match (view.hours.first(), view.hours.last()) {
        (Some(first), Some(_)) => (hour_label(first.start), "сейчас".to_string()),
        _ => (String::new(), String::new()),
    };
    let hourly = |value: fn(&HourActivity) -> f64| -> Vec<Mark> {
        view.hours
            .iter()
            .map(|h| Mark {
                label: format!("{} UTC", hour_label(h.start)),
                value: value(h),
                class: "",
            })
            .collect()
    };
    type Draw = fn(&str, Unit, &[Mark], &str, &str) -> String;
    type Value = fn(&HourActivity) -> f64;
    let hourly_charts: [(&str, Unit, Value, Draw); 3] = [
        (
            "Глубина очереди (в очереди и у агента) по часам",
            COMMANDS,
            |h| h.queue_depth as f64,
            charts::line,
        ),
        (
            // Successes only: failed, skipped and cancelled commands are not «выполнено».
            "Выполнено команд в час",
            COMMANDS,
            |h| h.done as f64,
            charts::bars,
        ),
        (
            "Ограничение частоты Jira (ответы 429) в час",
            &["ответ", "ответа", "ответов"],
            |h| h.rate_limited as f64,
            charts::bars,
        ),
    ];
    for (title, unit, value, draw) in hourly_charts {
        out.push_str(&draw(title, unit, &hourly(value), &first, &last));
    }
    let runs: Vec<&SyncRunView> = view.recent_runs.iter().rev().collect();
    let run_marks: Vec<Mark> = runs
        .iter()
        .map(|run| Mark {
            label: format!(
                "{} {}, {}",
                run.run.batch_id.map_or_else(
                    || format!("прогон {}", run.run.id),
                    |b| format!("пакет {b}")
                ),
                run_kind_words(run.kind),
                run_status_words(run.run.status)
            ),
            value: run_millis(run, now) as f64 / 1000.0,
            class: match run.run.status {
                RunStatus::Failed => "bad",
                RunStatus::Running => "live",
                RunStatus::Held => "bad",
                RunStatus::Done => "",
            },
        })
        .collect();
    let run_name = |run: &SyncRunView| {
        run.run.batch_id.map_or_else(
            || format!("прогон {}", run.run.id),
            |b| format!("пакет {b}"),
        )
    };
    let (first_run, last_run) = match (runs.first(), runs.last()) {
        (Some(first), Some(last)) => (run_name(first), run_name(last)),
        _ => ("обновлений не было".to_string(), String::new()),
    };
    out.push_str(&charts::bars(
        "Длительность обновлений зеркала",
        &["с", "с", "с"],
        &run_marks,
        &first_run,
        &last_run,
    ));
    out.push_str("</section>");
    out
}

/// The refreshes waiting in the queue: each by its batch, where it stands, and «ждёт агента»
/// when no agent is about to take it.
fn queued_refresh_lines(out: &mut String, queued: &[QueuedRefresh], now: OffsetDateTime) {
    if queued.is_empty() {
        return;
    }
    out.push_str("<ul class=\"runs queued\">");
    for refresh in queued {
        let place = if refresh.position == 1 {
            "следующее".to_string()
        } else {
            format!(
                "перед ним {}",
                words::count(refresh.position as u64 - 1, &COMMAND_FORMS)
            )
        };
        let agent = if refresh.no_agent {
            " · <b class=\"bad\">ждёт агента</b>: агента нет на связи"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<li class=\"queued-refresh\" id=\"queued-refresh-{}\">Обновление, \
             <a href=\"/ui/batches/{}\">пакет {}</a>: ждёт в очереди, {place} (поставлено {}){agent}</li>",
            refresh.batch_id,
            refresh.batch_id,
            refresh.batch_id,
            time_of(&refresh.queued_at, now),
        );
    }
    out.push_str("</ul>");
}

// ---------------------------------------------------------------------------------------------
// Batches

/// The list with its filter.
pub(super) fn batches(
    list: &[BatchView],
    projects: &[ProjectView],
    project: Option<&str>,
    status: Option<BatchStatus>,
    limit: i64,
    now: OffsetDateTime,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    out.push_str(
        "<form method=\"get\" action=\"/ui/batches\" class=\"filter\">\
         <label>Проект <select name=\"project\"><option value=\"\">все</option>",
    );
    for p in projects {
        let selected = if project == Some(p.label.as_str()) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<option value=\"{}\"{selected}>{} ({})</option>",
            esc(&p.label),
            esc(&p.name),
            esc(&p.label)
        );
    }
    out.push_str(
        "</select></label> <label>Статус <select name=\"status\"><option value=\"\">любой</option>",
    );
    for value in BATCH_FILTERS {
        let selected = if status == Some(*value) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<option value=\"{value}\"{selected}>{}</option>",
            value.label()
        );
    }
    out.push_str("</select></label> <button type=\"submit\">Показать</button></form>");
    let _ = write!(
        out,
        "<section id=\"batch-list\" data-live><p class=\"hint\">Последние {limit} пакетов, новые сверху.</p>"
    );
    if list.is_empty() {
        out.push_str("<p>Пакетов нет.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><thead><tr><th>№</th><th>Название</th><th>Проект</th>\
             <th>Автор</th><th>Создан</th><th>Статус</th><th>Команды</th></tr></thead><tbody>",
        );
        for b in list {
            let (class, label) = batch_status_words(b);
            let _ = write!(
                out,
                "<tr><td><a href=\"/ui/batches/{id}\">{id}</a></td><td><a href=\"/ui/batches/{id}\">{}</a></td>\
                 <td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{label}</td><td>{} (всего {})</td></tr>",
                esc(&b.title),
                or_dash(b.project.as_deref()),
                esc(&b.author),
                time_of(&b.created_at, now),
                counter_words(&b.counters),
                b.counters.values().sum::<usize>(),
                id = b.id,
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
    out
}

/// A command's params or result, short, with a space after each `,` and `:` between members so
/// that a long one wraps between them rather than inside a word.
fn json_text(value: &serde_json::Value) -> String {
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"");
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    let text = match serde::Serialize::serialize(value, &mut serializer) {
        // A newline can only be between members: inside strings it is written `\n`.
        Ok(()) => String::from_utf8_lossy(&bytes).replace('\n', " "),
        Err(_) => value.to_string(),
    };
    clip(&text, 160)
}

/// One member's value for people: an issue key a link to its page, text as it is (clipped),
/// a dependency's result in words, other JSON compact.
fn member_html(name: &str, member: &serde_json::Value) -> String {
    match member {
        serde_json::Value::String(text)
            if matches!(name, "key" | "from" | "to" | "parent")
                && crate::domain::command::is_issue_key(text) =>
        {
            format!("<a href=\"/ui/issues/{}\">{}</a>", segment(text), esc(text))
        }
        serde_json::Value::String(text) => {
            format!("<span class=\"value\">{}</span>", esc(&clip(text, 160)))
        }
        serde_json::Value::Object(o)
            if o.len() == 1 && o.get("$result").is_some_and(|r| r == "key") =>
        {
            "ключ из результата зависимости".to_string()
        }
        other => format!("<code class=\"json\">{}</code>", esc(&json_text(other))),
    }
}

/// A link command's params as what the link will say, its direction in Russian between its keys
///: «AURORA-1 блокирует AURORA-2»; `None` for params that are not a link's.
fn link_html(params: &serde_json::Value) -> Option<String> {
    let link_type = params.get("type")?.as_str()?;
    let (from, to) = (params.get("from")?, params.get("to")?);
    Some(format!(
        "{} {} {}",
        member_html("from", from),
        esc(&crate::domain::words::link_direction(link_type, true)),
        member_html("to", to),
    ))
}

/// A command's params or result for people: each member as «name: value» («задача: AURORA-7»,
/// the key a link to its page), in Russian where the name is the hub's own; other JSON as it is,
/// compact (no raw JSON, keys as links).
fn members_html(value: &serde_json::Value) -> String {
    let Some(members) = value.as_object() else {
        return format!("<code class=\"json\">{}</code>", esc(&json_text(value)));
    };
    if members.is_empty() {
        return "—".to_string();
    }
    let parts: Vec<String> = members
        .iter()
        .map(|(name, member)| {
            let label = match name.as_str() {
                "key" => "задача",
                "from" => "от задачи",
                "to" => "к задаче",
                "type" => "тип связи",
                "status" => "статус",
                "body" => "текст",
                "summary" => "название",
                "issue_type" => "тип задачи",
                "description" => "описание",
                "labels" => "метки",
                "parent" => "родитель",
                "jql" => "JQL",
                other => other,
            };
            let shown = match (name.as_str(), member) {
                // A link's type with its direction in Russian, between the two keys
                //: «blocks: AURORA-1 блокирует AURORA-2».
                ("type", serde_json::Value::String(link_type)) => match link_html(value) {
                    Some(link) => format!(
                        "<span class=\"value\">{}</span>: {link}",
                        esc(&clip(link_type, 160))
                    ),
                    None => member_html(name, member),
                },
                _ => member_html(name, member),
            };
            format!(
                "<span class=\"member\"><span class=\"hint\">{}:</span> {shown}</span>",
                esc(label)
            )
        })
        .collect();
    parts.join("<br>")
}

/// What a failed or skipped command's row offers: the retry the service would accept, or, when
/// its dependency ended without a result, that one (retrying it brings this one along).
fn retry_cell(
    command: &CommandView,
    known: &[&CommandView],
    csrf: Option<&str>,
    back: &str,
) -> String {
    let Some(csrf) = csrf else {
        return String::new();
    };
    if !matches!(
        command.status,
        CommandStatus::Failed | CommandStatus::Skipped
    ) {
        return String::new();
    }
    let blocking = command
        .depends_on
        .and_then(|id| known.iter().find(|c| c.id == id))
        .filter(|d| {
            matches!(
                d.status,
                CommandStatus::Failed | CommandStatus::Skipped | CommandStatus::Cancelled
            )
        });
    match blocking {
        Some(dependency) => format!(
            "<span class=\"hint\">Зависит от <a href=\"/ui/batches/{}#command-{}\">команды {}</a> («{}»): \
             повторите её, эта пойдёт следом.</span>",
            dependency.batch_id,
            dependency.id,
            dependency.seq,
            esc(dependency.status.label())
        ),
        None => form(
            &format!("/ui/commands/{}/retry", command.id),
            csrf,
            &[("back", back)],
            "Повторить",
            "",
        ),
    }
}

/// The commands' table; `csrf` is given where the failed may be retried (not in a cancelled
/// batch, whose commands never go back to Jira); `others` are commands of the same batches not
/// in the table that the rows may depend on.
fn command_rows(
    out: &mut String,
    commands: &[CommandView],
    others: &[CommandView],
    csrf: Option<&str>,
    back: &str,
) {
    let known: Vec<&CommandView> = commands.iter().chain(others).collect();
    out.push_str(
        "<div class=\"scroll\"><table class=\"commands\"><thead><tr><th>Команда</th><th class=\"type\">Тип</th><th class=\"dependency\">Зависит от</th>\
         <th>Параметры</th><th>Статус</th><th class=\"deliveries\">Выдачи</th><th class=\"agent-name\">Агент</th><th>Результат или ошибка</th>\
         <th>Действие</th></tr></thead><tbody>",
    );
    for c in commands {
        let outcome = match (&c.error, &c.result) {
            (Some(error), _) => format!("<span class=\"error\">{}</span>", esc(&clip(error, 400))),
            (None, Some(result)) => members_html(result),
            (None, None) => "—".to_string(),
        };
        let retry = retry_cell(c, &known, csrf, back);
        // The dependency by its position in the batch, as `depends_on` counts.
        let dependency = match c.depends_on {
            Some(id) => match known.iter().find(|d| d.id == id) {
                Some(d) => format!(
                    "<a class=\"dependency\" href=\"/ui/commands/{id}\">команда&nbsp;{}</a>",
                    d.seq
                ),
                None => format!("<a class=\"dependency\" href=\"/ui/commands/{id}\">команда</a>"),
            },
            None => "—".to_string(),
        };
        let _ = write!(
            out,
            "<tr id=\"command-{}\"><td><a href=\"/ui/commands/{}\" title=\"пакет {}, команда {}\">команда&nbsp;{}</a></td>\
             <td class=\"type\">{}</td><td class=\"dependency\">{dependency}</td><td class=\"params\">{}</td><td class=\"status\">{}</td>\
             <td class=\"num deliveries\">{}</td><td class=\"agent-name\">{}</td><td class=\"outcome\">{}</td><td>{retry}</td></tr>",
            c.id,
            c.id,
            c.batch_id,
            c.seq,
            c.seq,
            command_type_words(c.command_type),
            members_html(&c.params),
            attempts_words(c),
            c.deliveries,
            or_dash(c.claimed_by.as_deref()),
            outcome,
        );
    }
    out.push_str("</tbody></table></div>");
}

/// A command's status, with how its earlier attempts ended when it was retried.
fn attempts_words(command: &CommandView) -> String {
    let mut out = status_badge(command.status.as_str());
    if let Some(last) = command.attempts.last() {
        let _ = write!(
            out,
            "<br><span class=\"hint\" title=\"{}\">повторена {}, прежде «{}»</span>",
            esc(last.error.as_deref().unwrap_or_default()),
            words::count(command.attempts.len() as u64, &TIMES),
            esc(last.status.label())
        );
    }
    if let Some(waiting) = &command.waiting {
        // Passed over by agents that cannot honour it (an edit with a base, older agents).
        let _ = write!(out, "<br><span class=\"hint bad\">{}</span>", esc(waiting));
    }
    if let Some(not_before) = &command.not_before {
        // Given back by its agent after a lost answer: waits before the next delivery.
        let _ = write!(
            out,
            "<br><span class=\"hint\">возвращена агентом, выдача не раньше {}</span>",
            crate::domain::time::shown_utc(not_before.at())
        );
    }
    if let Some(since) = command
        .uncounted_since
        .as_ref()
        .filter(|_| command.uncounted_releases > 0)
    {
        // Given back with nothing sent to Jira: its budget, for all to see.
        let _ = write!(
            out,
            "<br><span class=\"hint\">возвращена агентом без отправки в Jira {} подряд, с {}; после {} раз или часа хаб её завершит с ошибкой</span>",
            words::count(u64::from(command.uncounted_releases), &TIMES),
            esc(&since.as_str().replacen('T', " ", 1)),
            crate::service::MAX_UNCOUNTED_RELEASES
        );
    }
    if let Some(marker) = &command.may_exist_in_jira {
        // Cancelled after it was handed out: what it made may be in Jira, marked.
        let _ = write!(
            out,
            "<br><span class=\"hint\">могла успеть попасть в Jira: ищите свойство jira-hub {}</span>",
            esc(&marker.to_string())
        );
    }
    out
}

/// One batch with its commands.
pub(super) fn batch(view: &BatchView, csrf: &str, now: OffsetDateTime) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let back = format!("/ui/batches/{}", view.id);
    let (class, label) = batch_status_words(view);
    let _ = write!(
        out,
        "<section id=\"batch-head\" data-live><dl class=\"facts\">\
         <dt>Статус</dt><dd id=\"batch-status\" class=\"{class}\">{label}</dd>\
         <dt>Команды</dt><dd>{}</dd><dt>Автор</dt><dd>{}</dd><dt>Проект</dt><dd>{}</dd>\
         <dt>Создан</dt><dd>{}</dd>",
        counter_words(&view.counters),
        esc(&view.author),
        or_dash(view.project.as_deref()),
        time_of(&view.created_at, now),
    );
    if let Some(at) = &view.cancelled_at {
        let _ = write!(out, "<dt>Отменён</dt><dd>{}</dd>", time_of(at, now));
    }
    out.push_str(&super::conflict::batch_fact(view));
    out.push_str("</dl>");
    if view.cancelled_at.is_some() {
        out.push_str(&cancel_outcome(view));
    }
    out.push_str("<p class=\"actions\">");
    let failed = view.counters.get("failed").copied().unwrap_or(0)
        + view.counters.get("skipped").copied().unwrap_or(0);
    if failed > 0 && view.cancelled_at.is_none() {
        out.push_str(&form(
            &format!("/ui/batches/{}/retry-failed", view.id),
            csrf,
            &[],
            &format!("Повторить неудачные ({failed})"),
            "",
        ));
    }
    // Cancelling again would change nothing: the button goes once the batch is cancelled.
    if view.cancelled_at.is_none()
        && matches!(view.status, BatchStatus::Queued | BatchStatus::Running)
    {
        // A step of its own that asks first (a page, so it works without JavaScript).
        let _ = write!(
            out,
            "<a class=\"button danger\" href=\"/ui/batches/{}/cancel\">Отменить пакет…</a>",
            view.id
        );
    }
    out.push_str("</p></section><section id=\"batch-commands\" data-live><h2>Команды</h2>");
    let retry = view.cancelled_at.is_none().then_some(csrf);
    command_rows(&mut out, &view.commands, &[], retry, &back);
    out.push_str("</section>");
    out
}

/// What cancelling a batch did and did not do: queued commands were taken off the queue;
/// commands already at the agent are not stopped and end as the agent reports (or «отменена»
/// when it never does).
fn cancel_outcome(view: &BatchView) -> String {
    let count = |status: &str| view.counters.get(status).copied().unwrap_or(0) as u64;
    let cancelled = count("cancelled");
    let at_agent = count("claimed");
    let mut out = String::from("<p id=\"cancel-outcome\" class=\"hint\">");
    if cancelled > 0 {
        let _ = write!(
            out,
            "Отмена сняла с очереди {}. ",
            words::count(cancelled, &COMMAND_FORMS)
        );
    }
    if at_agent > 0 {
        let _ = write!(
            out,
            "У агента {} {}: отмена {} не прерывает, итог покажет агент \
             (а если он не ответит, {} «отменена», в Jira не повторяясь).",
            words::plural(at_agent, &["осталась", "остались", "остались"]),
            words::count(at_agent, &COMMAND_FORMS),
            words::plural(at_agent, &["её", "их", "их"]),
            words::plural(at_agent, &["она станет", "они станут", "они станут"]),
        );
    } else {
        out.push_str("Больше в Jira не уйдёт ни одна команда пакета.");
    }
    out.push_str("</p>");
    out
}

/// The step before cancelling a batch: what cancelling does, and the button that does it.
pub(super) fn cancel_confirmation(view: &BatchView, csrf: &str, back: &str) -> String {
    let count = |status: &str| view.counters.get(status).copied().unwrap_or(0) as u64;
    let queued = count("queued");
    let at_agent = count("claimed");
    let mut out = String::with_capacity(2048);
    let _ = write!(
        out,
        "<p id=\"cancel-question\">Отменить пакет {} «{}»?</p><ul>\
         <li>Снимутся с очереди: <b>{}</b>; в Jira {}.</li>",
        view.id,
        esc(&view.title),
        words::count(queued, &COMMAND_FORMS),
        words::plural(queued, &["она не уйдёт", "они не уйдут", "они не уйдут"])
    );
    if at_agent > 0 {
        let _ = write!(
            out,
            "<li>У агента: <b>{}</b>; отмена {} не прерывает, итог покажет агент.</li>",
            words::count(at_agent, &COMMAND_FORMS),
            words::plural(at_agent, &["её", "их", "их"])
        );
    }
    out.push_str("<li>Отменённый пакет нельзя продолжить; неудачные команды в нём не повторяются.</li></ul><p class=\"actions\">");
    out.push_str(&form(
        &format!("/ui/batches/{}/cancel", view.id),
        csrf,
        &[("confirmed", "yes"), ("back", back)],
        "Да, отменить пакет",
        "danger",
    ));
    let _ = write!(
        out,
        "<a class=\"button\" href=\"{}\">Нет, вернуться</a></p>",
        esc(back)
    );
    out
}

/// A command's own page: its params whole, every attempt with its agent and times, its Jira
/// calls and 429s, the keys it names linked to the mirror, its dependency and dependents.
pub(super) fn command(page: &CommandPage, csrf: &str, now: OffsetDateTime) -> String {
    let c = &page.command;
    // After a retry the stored agent and time are the last attempt's until the next delivery.
    let handed_out = c
        .attempts
        .last()
        .is_none_or(|last| c.deliveries > last.deliveries);
    let agent = if handed_out {
        or_dash(c.claimed_by.as_deref())
    } else {
        "—".to_string()
    };
    let claimed = match (&c.claimed_at, handed_out) {
        (Some(at), true) => time_of(at, now),
        (_, false) => "ещё не выдана".to_string(),
        (None, true) => "—".to_string(),
    };
    let mut out = String::with_capacity(8 * 1024);
    let _ = write!(
        out,
        "<section id=\"command-head\" data-live><dl class=\"facts\">\
         <dt>Пакет</dt><dd><a href=\"/ui/batches/{batch}\">пакет {batch}</a>: {}</dd>\
         <dt>Тип</dt><dd>{}</dd><dt>Статус</dt><dd id=\"command-status\">{}</dd>\
         <dt>Выдано агенту, раз</dt><dd>{}</dd><dt>Агент</dt><dd>{agent}</dd>\
         <dt>Выдана</dt><dd>{claimed}</dd><dt>Закончена</dt><dd>{}</dd>\
         <dt>Вызовов Jira</dt><dd>{}</dd><dt>Ответов 429</dt><dd>{}</dd><dt>Пауза перед выдачей</dt><dd>{}</dd>",
        esc(&page.batch_title),
        command_type_words(c.command_type),
        attempts_words(c),
        c.deliveries,
        c.finished_at
            .as_ref()
            .map_or_else(|| "—".to_string(), |at| time_of(at, now)),
        c.jira_calls,
        c.rate_limited,
        duration_words(c.pause_seconds),
        batch = c.batch_id,
    );
    if let Some(d) = &page.dependency {
        let _ = write!(
            out,
            "<dt>Зависит от</dt><dd>{} («{}»)</dd>",
            command_ref(d.batch_id, d.seq, d.id),
            esc(d.status.label())
        );
    }
    if !page.dependents.is_empty() {
        let list: Vec<String> = page
            .dependents
            .iter()
            .map(|d| command_ref(d.batch_id, d.seq, d.id))
            .collect();
        let _ = write!(out, "<dt>От неё зависят</dt><dd>{}</dd>", list.join(", "));
    }
    if let Some(run) = &page.run {
        let _ = write!(
            out,
            "<dt>Обновление</dt><dd>{} ({}), {}: страниц {}, задач {}, изменилось {}, длилось {}</dd>",
            refresh_name(run),
            run_kind_words(run.kind),
            run_status_words(run.run.status),
            run.run.pages,
            run.run.issues_seen,
            run.run.issues_changed,
            millis_words(run_millis(run, now))
        );
    }
    if !page.keys.is_empty() {
        let keys: Vec<String> = page
            .keys
            .iter()
            .map(|(key, present)| {
                if *present {
                    format!("<a href=\"/ui/issues/{}\">{}</a>", segment(key), esc(key))
                } else {
                    format!("{} (нет в зеркале)", esc(key))
                }
            })
            .collect();
        let _ = write!(
            out,
            "<dt>Задачи</dt><dd id=\"command-keys\">{}</dd>",
            keys.join(", ")
        );
    }
    if let Some(link) = link_html(&c.params) {
        let _ = write!(out, "<dt>Связь</dt><dd id=\"command-link\">{link}</dd>");
    }
    out.push_str("</dl><p class=\"actions\">");
    let known: Vec<&CommandView> = page.dependency.iter().collect();
    let retry = (!page.batch_cancelled).then_some(csrf);
    let back = format!("/ui/commands/{}", c.id);
    out.push_str(&retry_cell(c, &known, retry, &back));
    out.push_str("</p>");
    out.push_str(&super::conflict::section(c, retry));
    if let Some(error) = &c.error {
        let _ = write!(out, "<h2>Ошибка</h2><p class=\"error\">{}</p>", esc(error));
    }
    if let Some(result) = &c.result {
        let _ = write!(
            out,
            "<h2>Результат</h2><pre class=\"json\" id=\"command-result\">{}</pre>",
            esc(&pretty(result))
        );
    }
    let _ = write!(
        out,
        "<h2>Параметры</h2><pre class=\"json\" id=\"command-params\">{}</pre>",
        esc(&pretty(&c.params))
    );
    out.push_str("<h2>Попытки</h2>");
    if c.attempts.is_empty() {
        out.push_str("<p>Команду не повторяли: попытка одна, выше.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table id=\"attempts\"><thead><tr><th>Попытка</th><th>Итог</th><th>Выдачи</th>\
             <th>Агент</th><th>Выдана</th><th>Закончена</th><th>Повторена</th><th>Результат или ошибка</th></tr></thead><tbody>",
        );
        for (n, a) in c.attempts.iter().enumerate() {
            let outcome = match (&a.error, &a.result) {
                (Some(error), _) => format!("<span class=\"error\">{}</span>", esc(error)),
                (None, Some(result)) => {
                    format!("<code class=\"json\">{}</code>", esc(&json_text(result)))
                }
                (None, None) => "—".to_string(),
            };
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{outcome}</td></tr>",
                n + 1,
                status_badge(a.status.as_str()),
                a.deliveries,
                or_dash(a.claimed_by.as_deref()),
                a.claimed_at
                    .as_ref()
                    .map_or_else(|| "—".to_string(), |at| time_of(at, now)),
                a.finished_at
                    .as_ref()
                    .map_or_else(|| "—".to_string(), |at| time_of(at, now)),
                time_of(&a.retried_at, now),
            );
        }
        out.push_str("</tbody></table></div>");
        let _ = write!(
            out,
            "<p class=\"hint\">Сейчас попытка {}. Вызовы Jira и ответы 429 хаб считает для команды в целом, по попыткам не делит.</p>",
            c.attempts.len() + 1
        );
    }
    out.push_str("</section>");
    out
}

/// JSON indented as a person reads it, whole.
fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

// ---------------------------------------------------------------------------------------------
// Failed commands

pub(super) fn failed(list: &[FailedBatch], csrf: &str, limit: i64) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<section id=\"failed-list\" data-live><p class=\"hint\">Команды со статусом «ошибка» или «пропущена», \
         последние {limit}, по пакетам.</p>"
    );
    if list.is_empty() {
        out.push_str("<p>Неудачных команд нет.</p>");
    }
    for batch in list {
        let id = batch.id;
        let _ = write!(
            out,
            "<article class=\"card wide\" id=\"failed-batch-{id}\"><h2><a href=\"/ui/batches/{id}\">Пакет {id}</a>: {}</h2>\
             <p>Проект: {}</p><p class=\"actions\">",
            esc(&batch.title),
            or_dash(batch.project.as_deref())
        );
        if batch.cancelled {
            out.push_str("<span class=\"hint\">Пакет отменён: его команды не повторяются.</span>");
        } else {
            out.push_str(&form(
                &format!("/ui/batches/{id}/retry-failed"),
                csrf,
                &[("back", "/ui/failed")],
                "Повторить все неудачные команды пакета",
                "",
            ));
        }
        if batch.open_commands > 0 && !batch.cancelled {
            let _ = write!(
                out,
                "<a class=\"button danger\" href=\"/ui/batches/{id}/cancel?back=/ui/failed\">Отменить пакет… (не закончено: {})</a>",
                words::count(batch.open_commands.max(0) as u64, &COMMAND_FORMS)
            );
        }
        out.push_str("</p>");
        let retry = (!batch.cancelled).then_some(csrf);
        command_rows(
            &mut out,
            &batch.commands,
            &batch.dependencies,
            retry,
            "/ui/failed",
        );
        out.push_str("</article>");
    }
    out.push_str("</section>");
    out
}

// ---------------------------------------------------------------------------------------------
// Mirror

pub(super) fn mirror(projects: &[ProjectIssues], total: i64) -> String {
    let mut out = String::with_capacity(4096);
    let _ = write!(
        out,
        "<section id=\"mirror-projects\" data-live><p>Задач в зеркале всего: <b>{total}</b></p>"
    );
    if projects.is_empty() {
        out.push_str("<p>Проектов нет.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><thead><tr><th>Метка</th><th>Название</th><th>Доска</th>\
             <th>Задач</th></tr></thead><tbody>",
        );
        for p in projects {
            let board = match (p.project.board_id, &p.project.board_type) {
                (Some(id), Some(kind)) => format!("{id} ({})", esc(kind)),
                (Some(id), None) => id.to_string(),
                (None, _) => "—".to_string(),
            };
            let _ = write!(
                out,
                "<tr><td><a href=\"/ui/mirror/{}\">{}</a></td><td>{}</td><td>{board}</td><td class=\"num\">{}</td></tr>",
                segment(&p.project.label),
                esc(&p.project.label),
                esc(&p.project.name),
                p.issues
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
    out
}

/// An issue key's parts for sorting: the project, then the number as a number (`AURORA-9`
/// before `AURORA-10`); a key of another shape sorts by its text after them.
fn key_order(key: &str) -> (&str, u64, &str) {
    match key.rsplit_once('-') {
        Some((project, number)) if number.bytes().all(|b| b.is_ascii_digit()) => {
            (project, number.parse().unwrap_or(u64::MAX), "")
        }
        _ => ("\u{10FFFF}", 0, key),
    }
}

/// A project's slice: its issues sorted by key number, found by a search box (key, summary,
/// status, assignee), one page of [`SLICE_ROWS`] at a time.
pub(super) fn slice(rows: &[SliceRow], label: &str, query: Option<&str>, page: usize) -> String {
    let own = rows.iter().filter(|r| !r.neighbor).count();
    let query = query.map(str::trim).filter(|q| !q.is_empty());
    let wanted = query.map(str::to_lowercase);
    let mut found: Vec<&SliceRow> = rows
        .iter()
        .filter(|row| {
            let Some(wanted) = &wanted else { return true };
            let issue = &row.issue;
            [
                Some(issue.key.as_str()),
                Some(issue.summary.as_str()),
                Some(issue.status.as_str()),
                issue.assignee.as_deref(),
            ]
            .into_iter()
            .flatten()
            .any(|text| text.to_lowercase().contains(wanted.as_str()))
        })
        .collect();
    found.sort_by(|a, b| {
        (a.neighbor, key_order(&a.issue.key)).cmp(&(b.neighbor, key_order(&b.issue.key)))
    });
    let pages = found.len().div_ceil(SLICE_ROWS).max(1);
    let page = page.clamp(1, pages);
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<form method=\"get\" action=\"/ui/mirror/{}\" class=\"filter\" role=\"search\">\
         <label>Найти <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"ключ, название, статус, исполнитель\"></label> \
         <button type=\"submit\">Искать</button></form>",
        segment(label),
        esc(query.unwrap_or_default())
    );
    let _ = write!(
        out,
        "<section id=\"slice\" data-live><p>Своих задач: <b>{own}</b>, соседних: <b>{}</b>.",
        rows.len() - own
    );
    if let Some(query) = query {
        let _ = write!(out, " Найдено по «{}»: <b>{}</b>.", esc(query), found.len());
    }
    out.push_str(
        "</p><div class=\"scroll\"><table><thead><tr><th>Ключ</th><th>Тип</th><th>Статус</th>\
         <th>Название</th><th>Исполнитель</th><th>Отметки</th></tr></thead><tbody>",
    );
    for row in found.iter().skip((page - 1) * SLICE_ROWS).take(SLICE_ROWS) {
        let issue = &row.issue;
        let mut marks = Vec::new();
        if row.neighbor {
            marks.push("соседняя");
        }
        if row.closed {
            marks.push("закрыта");
        }
        let _ = write!(
            out,
            "<tr><td><a href=\"/ui/issues/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            segment(&issue.key),
            esc(&issue.key),
            esc(&issue.issue_type),
            esc(&issue.status),
            esc(&clip(&issue.summary, 200)),
            or_dash(issue.assignee.as_deref()),
            marks.join(", ")
        );
    }
    out.push_str("</tbody></table></div>");
    if pages > 1 {
        let link = |n: usize| {
            let mut href = format!("/ui/mirror/{}?page={n}", segment(label));
            if let Some(query) = query {
                let _ = write!(href, "&q={}", segment(query));
            }
            href
        };
        out.push_str("<nav class=\"pages\" aria-label=\"Страницы\">");
        if page > 1 {
            let _ = write!(
                out,
                "<a rel=\"prev\" href=\"{}\">← назад</a> ",
                esc(&link(page - 1))
            );
        }
        let _ = write!(out, "<span>страница {page} из {pages}</span>");
        if page < pages {
            let _ = write!(
                out,
                " <a rel=\"next\" href=\"{}\">дальше →</a>",
                esc(&link(page + 1))
            );
        }
        out.push_str("</nav>");
    }
    out.push_str("</section>");
    out
}

pub(super) fn issue(view: &IssueView, csrf: &str, now: OffsetDateTime) -> String {
    let i = &view.issue;
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<section id=\"issue-facts\" data-live><p class=\"summary\">{}</p><dl class=\"facts\">\
         <dt>Тип</dt><dd>{}</dd><dt>Статус</dt><dd>{}{}</dd><dt>Приоритет</dt><dd>{}</dd>\
         <dt>Исполнитель</dt><dd>{}</dd><dt>Автор</dt><dd>{}</dd><dt>Метки</dt><dd>{}</dd>\
         <dt>Эпик</dt><dd>{}</dd><dt>Спринт</dt><dd>{}</dd><dt>Срок</dt><dd>{}</dd>\
         <dt>В зеркале с</dt><dd>{}</dd></dl>",
        esc(&i.summary),
        esc(&i.issue_type),
        esc(&i.status),
        if view.closed { " (закрыта)" } else { "" },
        or_dash(i.priority.as_deref()),
        or_dash(i.assignee.as_deref()),
        or_dash(i.reporter.as_deref()),
        esc(&i.labels.join(", ")),
        or_dash(i.epic_key.as_deref()),
        or_dash(i.sprint.as_deref()),
        or_dash(i.duedate.as_deref()),
        time_of(&view.synced_at, now),
    );
    if let Some(description) = &i.description {
        let _ = write!(
            out,
            "<h2>Описание</h2><div class=\"text\">{}</div>",
            esc(description)
        );
    }
    out.push_str("<h2>Связи</h2>");
    if view.links.is_empty() {
        out.push_str("<p>Связей нет.</p>");
    } else {
        out.push_str("<ul>");
        for link in &view.links {
            // The direction in Russian from this issue's side: «Блокирует
            // AURORA-2», «Заблокирована задачей AURORA-1»; Jira's name quoted otherwise.
            let outward = link.direction == "outward";
            let known = crate::domain::words::link_directions(&link.link_type).is_some();
            // A type the table does not know speaks Jira's own words for its direction, as the
            // issue's raw `issuelinks` carry them (`type.outward`/`type.inward`): «haunts».
            let jira_words = (!known)
                .then(|| jira_link_words(&view.fields, &link.link_type, outward))
                .flatten();
            let direction = match &jira_words {
                Some(words) => format!("Связь «{}»: «{words}»", link.link_type),
                None => crate::domain::words::capitalized(&crate::domain::words::link_direction(
                    &link.link_type,
                    outward,
                )),
            };
            let other = if link.other_in_mirror {
                format!(
                    "<a href=\"/ui/issues/{}\">{}</a>",
                    segment(&link.other_key),
                    esc(&link.other_key)
                )
            } else {
                format!("{} (нет в зеркале)", esc(&link.other_key))
            };
            // Jira's name beside the Russian words; the fallback already quotes it.
            let name = if known {
                format!(" <span class=\"hint\">(«{}»)</span>", esc(&link.link_type))
            } else {
                String::new()
            };
            let _ = write!(out, "<li>{} {other}{name}</li>", esc(&direction));
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2>Комментарии Jira</h2>");
    if view.comments.is_empty() {
        out.push_str("<p>Комментариев нет.</p>");
    }
    for c in &view.comments {
        let _ = write!(
            out,
            "<div class=\"comment\"><p class=\"meta\">{} · {}</p><div class=\"text\">{}</div></div>",
            or_dash(c.author.as_deref()),
            c.created
                .as_deref()
                .map_or_else(|| "—".to_string(), |text| jira_time_of(text, now)),
            esc(&c.body)
        );
    }
    out.push_str("</section><section id=\"notes\" data-live><h2>Заметки хаба</h2>");
    if view.notes.is_empty() {
        out.push_str("<p>Заметок нет.</p>");
    }
    for n in &view.notes {
        let _ = write!(
            out,
            "<div class=\"note\"><p class=\"meta\">{} · {}</p><div class=\"text\">{}</div></div>",
            esc(&n.author),
            time_of(&n.created_at, now),
            esc(&n.body)
        );
    }
    let _ = write!(
        out,
        "</section><form method=\"post\" action=\"/ui/issues/{}/notes\" class=\"note-form\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"note-author\">Автор</label><input id=\"note-author\" name=\"author\" required maxlength=\"100\">\
         <label for=\"note-body\">Заметка (в Jira не уходит)</label><textarea id=\"note-body\" name=\"body\" rows=\"4\" required></textarea>\
         <button type=\"submit\">Добавить заметку</button></form>",
        segment(&i.key),
        esc(csrf)
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Sync runs

/// A held refresh as people name it: by its batch, with its run; by its run alone when it has no
/// batch (a run older than `sync_run.batch_id`).
fn held_name(run: &crate::service::HeldRunView) -> String {
    match run.batch_id {
        Some(batch) => format!(
            "<a href=\"/ui/batches/{batch}\">пакет {batch}</a>, прогон {}",
            run.run_id
        ),
        None => format!("прогон {}", run.run_id),
    }
}

/// The full refreshes whose removals wait for an operator, on the overview.
fn held_card(out: &mut String, held: &[crate::service::HeldRunView]) {
    if held.is_empty() {
        return;
    }
    out.push_str("<article class=\"card\"><h2>Удаление ждёт подтверждения</h2>");
    for run in held {
        let _ = write!(
            out,
            "<p class=\"bad\">Полное обновление ({}) удалило бы из зеркала <b>{}</b> — больше, чем позволяет prune_guard. <a href=\"/ui/runs#held\">Проверить и подтвердить</a>.</p>",
            held_name(run),
            words::count(run.would_remove.max(0) as u64, &words::ISSUES_ACCUSATIVE)
        );
    }
    out.push_str("</article>");
}

/// The held runs with their confirm buttons, on the runs page.
fn held_section(out: &mut String, held: &[crate::service::HeldRunView], csrf: &str) {
    if held.is_empty() {
        return;
    }
    out.push_str("<section id=\"held\"><h2>Удаление ждёт подтверждения</h2>");
    for run in held {
        let projects: Vec<String> = run
            .projects
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{}: {} из {}",
                    p["label"].as_str().unwrap_or(""),
                    p["missing"],
                    p["issues"]
                )
            })
            .collect();
        let _ = write!(
            out,
            "<p>Обновление ({}) удалило бы <b>{}</b> ({}); например: {}.</p><p class=\"actions\">",
            held_name(run),
            words::count(run.would_remove.max(0) as u64, &words::ISSUES_ACCUSATIVE),
            esc(&projects.join(", ")),
            esc(&run.sample_keys.join(", "))
        );
        out.push_str(&form(
            &format!("/ui/sync-runs/{}/confirm", run.run_id),
            csrf,
            &[],
            "Подтвердить удаление",
            "danger",
        ));
        out.push_str("</p>");
    }
    out.push_str("</section>");
}

pub(super) fn runs_with_held(
    runs: &[SyncRunView],
    projects: &[ProjectView],
    held: &[crate::service::HeldRunView],
    queued: &[QueuedRefresh],
    csrf: &str,
    now: OffsetDateTime,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    held_section(&mut out, held, csrf);
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/ui/refresh\" class=\"filter\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>Что обновить <select name=\"project\"><option value=\"\">все проекты</option>",
        esc(csrf)
    );
    for p in projects {
        let _ = write!(
            out,
            "<option value=\"{}\">{} ({})</option>",
            esc(&p.label),
            esc(&p.name),
            esc(&p.label)
        );
    }
    out.push_str("</select></label> <button type=\"submit\">Обновить сейчас</button></form>");
    out.push_str("<section id=\"runs\" data-live>");
    if !queued.is_empty() {
        out.push_str("<h2>В очереди</h2>");
        queued_refresh_lines(&mut out, queued, now);
    }
    let running: Vec<&SyncRunView> = runs
        .iter()
        .filter(|r| r.run.status == RunStatus::Running)
        .collect();
    if !running.is_empty() {
        out.push_str("<h2>Идёт</h2><ul class=\"runs\">");
        for run in running {
            out.push_str(&run_progress(run, now));
        }
        out.push_str("</ul>");
    }
    if runs.is_empty() {
        out.push_str("<p>Обновлений ещё не было.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><thead><tr><th>Обновление</th><th>Прогон</th><th>Вид</th><th>Статус</th><th>Начат</th>\
             <th>Длился</th><th>Получено</th><th>Изменено</th><th>Запрос</th><th>Ошибка</th></tr></thead><tbody>",
        );
        for run in runs {
            let _ = write!(
                out,
                "<tr id=\"run-{}\"><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"rs rs-{}\">{}</td><td>{}</td><td class=\"duration\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td></tr>",
                run.run.id,
                refresh_name(run),
                run.run.id,
                run_kind_words(run.kind),
                run.run.status.as_str(),
                run_status_words(run.run.status),
                time_of(&run.run.started_at, now),
                millis_words(run_millis(run, now)),
                run.run.issues_seen,
                run.run.issues_changed,
                esc(&clip(&run.run.query, 200)),
                run.run.error.as_deref().map_or_else(
                    || "—".to_string(),
                    |e| format!("<span class=\"error\">{}</span>", esc(&clip(e, 300)))
                ),
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
    out
}

/// A time Jira wrote (`2026-11-29T13:00:00.000+0300`) in the hub's form (`2026-11-29 10:00:00
/// UTC`), Jira's own text in the tooltip; text that is not such a time shows as it is.
fn jira_time_of(text: &str, now: OffsetDateTime) -> String {
    match crate::jira::jira_time(text) {
        Some(at) => when_at(at, text, now),
        None => esc(text).to_string(),
    }
}

/// A refusal or failure of an action, with a way back.
pub(super) fn problem(message: &str, back: &str) -> String {
    format!(
        "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"{}\">Назад</a></p>",
        esc(message),
        esc(back)
    )
}

/// Jira's words for one direction of a link type (`type.outward` from the link's source,
/// `type.inward` from its target), as an issue's raw `issuelinks` carry them.
fn jira_link_words(fields: &serde_json::Value, type_name: &str, outward: bool) -> Option<String> {
    let side = if outward { "outward" } else { "inward" };
    fields
        .get("issuelinks")?
        .as_array()?
        .iter()
        .map(|link| &link["type"])
        .find(|kind| kind["name"].as_str() == Some(type_name))
        .and_then(|kind| kind[side].as_str())
        .map(str::trim)
        .filter(|words| !words.is_empty())
        .map(str::to_string)
}
