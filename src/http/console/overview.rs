//! The overview, the console's first page: cards of the queue, the agents, the relay folder
//! («Папка обмена»), the mirror and the database, and the charts of the last hours; both
//! `data-live`, replaced in place while the page is open.

use super::charts::{self, Mark, Unit};
use super::html::{
    Text, clip, duration_words, form, path_html, run_kind_words, run_status_words, seconds_since,
    size_words, time_of, when_at,
};
use super::pages::{
    COMMANDS, REFRESH_STALLED_SECONDS, held_card, or_dash, queued_refresh_lines, refresh_name,
    run_millis, run_progress, status_badge,
};
use crate::domain::command::RunStatus;
use crate::domain::words;
use crate::service::{AgentView, HourActivity, Overview, RelayState, SyncRunView};
use maud::{Markup, html};
use time::OffsetDateTime;

/// An agent's name and state, judged by the hub's one silence rule: live («Был на связи …»,
/// Jira's state), silent («Молчит 2 мин: пропущено 4 сигнала…», Jira's state unknown: what it
/// said last is no longer news), or a one-off check (`agent --check` under a name that runs
/// nothing). A silent agent and a check can be forgotten (a form with the anti-forgery token).
/// Gives the card's class beside its first lines.
fn agent_card_head(agent: &AgentView, csrf: &str, now: OffsetDateTime) -> (&'static str, Markup) {
    let (class, state) = if let Some(refused) = &agent.hub_refused {
        // The hub refuses its token: what it said of Jira before is no news.
        (" refused", html! { span.bad { (Text(refused)) } })
    } else if agent.check_only {
        (
            " check-only",
            html! { "Разовая проверка (agent --check), не работающий агент" },
        )
    } else if agent.silent {
        (
            " silent",
            html! { "О Jira сейчас неизвестно: агент молчит" },
        )
    } else {
        let jira = match agent.jira_ok {
            Some(true) => html! { span.ok { "Jira доступна" } },
            Some(false) => html! { span.bad { "Jira недоступна" } },
            None => html! { span { "О Jira не сообщал" } },
        };
        ("", jira)
    };
    let head = html! {
        h3 { (Text(&agent.agent)) }
        @if agent.silent {
            @let missed = crate::service::missed_heartbeats(agent, now);
            p.bad role="status" {
                "Молчит " span title=(Text(agent.last_seen_at.as_str())) {
                    (duration_words(seconds_since(&agent.last_seen_at, now)))
                }
                ": "
                @match agent.heartbeat_seconds {
                    Some(period) => {
                        (words::plural(missed, &words::MISSED)) " " (words::count(missed, &words::SIGNALS))
                        " о жизни (агент шлёт их раз в " (duration_words(i64::from(period))) ")"
                    }
                    None => { "ни одного запроса за " (duration_words(agent.silent_after_seconds)) }
                }
                ". Работает ли он, есть ли связь с хабом или папкой обмена?"
            }
            p { "Версия: " (build_words(agent)) " · " (state) }
        } @else {
            p {
                (if agent.check_only { "Проверка была" } else { "Был на связи" }) " "
                (time_of(&agent.last_seen_at, now)) br; "Версия: " (build_words(agent)) " · " (state)
            }
        }
        @if !agent.check_only && !agent.peer.checks_bases() {
            p.bad {
                "Агент прежней версии: конфликты правок не проверяет, правки с базой ему не выдаются \
                 (ждут агента, который проверяет конфликты). Обновите агента."
            }
        }
        @if agent.silent || agent.check_only {
            (form("/ui/agents/forget", csrf, &[("agent", &agent.agent)], "Забыть агента", "danger"))
        }
    };
    (class, head)
}

/// An agent's release, commit and protocol revision: «0.2.0, коммит 1a2b3c, протокол 2».
fn build_words(agent: &AgentView) -> Markup {
    html! {
        (or_dash(agent.version.as_deref())) ", коммит " (or_dash(agent.peer.commit.as_deref()))
        ", протокол " (agent.peer.protocol)
    }
}

/// One agent's card: its head, what holds Jira for it or its last error, its last check.
fn agent_card(agent: &AgentView, csrf: &str, now: OffsetDateTime) -> Markup {
    let (class, head) = agent_card_head(agent, csrf, now);
    html! {
        div class={ "agent" (class) } {
        (head)
        @if let Some(held) = &agent.jira_held {
            // Jira is held for this agent: why, and since when.
            p.bad.held role="status" { (Text(&clip(held, 300))) }
        } @else if let Some(error) = &agent.last_error {
            p.error { "Последняя ошибка: " (Text(&clip(error, 300))) }
        }
        @if let Some(check) = &agent.last_check {
            // The last preflight (`jira-hub agent --check`) and its failing lines.
            @let failing: Vec<_> = check.lines.iter().filter(|l| !l.ok).collect();
            p class=(if check.ok { "check" } else { "check bad" }) {
                "Проверка настроек (agent --check) "
                @match crate::domain::time::parse_utc(&check.ran_at) {
                    Some(at) => (when_at(at, &check.ran_at, now)),
                    None => (Text(&check.ran_at)),
                }
                ": "
                @if check.ok { "всё в порядке" } @else { "ошибок: " (failing.len()) }
            }
            @if !failing.is_empty() {
                ul.check-failures {
                    @for line in failing {
                        li { (Text(&line.name)) ": " (Text(&clip(&line.detail, 500))) }
                    }
                }
            }
        }
        }
    }
}

/// The queue's card: commands by status, and how long the oldest has waited.
fn queue_card(view: &Overview, now: OffsetDateTime) -> Markup {
    html! {
        article.card {
            h2 { "Очередь" }
            table.counts {
                @for q in &view.queue {
                    tr {
                        td { (status_badge(&q.status)) }
                        td.num data-status=(Text(&q.status)) { (q.commands) }
                    }
                }
            }
            @match &view.oldest_queued_at {
                Some(at) => p {
                    "Старейшая команда в очереди ждёт " b { (duration_words(seconds_since(at, now))) }
                    " (поставлена " (time_of(at, now)) ")."
                },
                None => {
                    // A command in an agent's hands is not "nothing waiting".
                    @let claimed = view
                        .queue
                        .iter()
                        .filter(|q| q.status == crate::domain::command::CommandStatus::Claimed.as_str())
                        .map(|q| u64::try_from(q.commands).unwrap_or(0))
                        .sum::<u64>();
                    @if claimed > 0 {
                        p { "Новых команд в очереди нет; у агента " (words::count(claimed, &words::COMMANDS)) "." }
                    } @else {
                        p { "В очереди ничего не ждёт." }
                    }
                }
            }
        }
    }
}

/// The relay folder's card: where it is, what waits in it, how late the agent's files show.
fn relay_card(relay: &RelayState) -> Markup {
    html! {
        article.card {
            h2 { "Папка обмена" }
            @match relay {
                RelayState::NotSet => p { "Не задана: агент работает только через HTTP." },
                RelayState::Missing { dir } => p.bad {
                    "Нет на месте: " (path_html(dir)) ". Подключена ли общая папка?"
                },
                RelayState::Unusable { dir, problem } => {
                    p.bad { "Не используется: " (path_html(dir)) }
                    p { (Text(problem)) }
                }
                RelayState::Present { dir, waiting, claims_waiting, refused_today, visibility } => {
                    // As `jira-hub status` counts inbox/: files to handle, and claims waiting for work.
                    p.ok { "На месте: " (path_html(dir)) }
                    p {
                        "Файлов ждут обработки: " b { (waiting) } br;
                        "Запросов агента ждут работы: " b { (claims_waiting) } br;
                        "Отклонено сегодня: " b { (refused_today) }
                    }
                    // How late the hub sees the agent's files, and what to change when that is late.
                    @match visibility {
                        Some((delay, Some(told))) => {
                            p.bad { "Файлы агента видны с опозданием " (format!("{:.1}", delay.as_secs_f64())) " с" }
                            p { (Text(told)) }
                        }
                        Some((delay, None)) => {
                            p { "Файлы агента видны через " (format!("{:.1}", delay.as_secs_f64())) " с" }
                        }
                        None => {}
                    }
                }
            }
        }
    }
}

/// The mirror's card: its size, the last full refresh, the refreshes queued and running.
fn mirror_card(view: &Overview, now: OffsetDateTime) -> Markup {
    let last_full = view
        .last_full_refresh
        .as_ref()
        .and_then(|run| run.run.finished_at.as_ref());
    html! {
        article.card {
            h2 { "Зеркало" }
            p { "Задач в зеркале: " b { (view.issues) } }
            @match last_full {
                Some(at) => p { "Последнее полное обновление: " (time_of(at, now)) },
                None => p { "Полного обновления ещё не было." },
            }
            (queued_refresh_lines(&view.queued_refreshes, now))
            @if view.running.is_empty() {
                @if view.queued_refreshes.is_empty() {
                    p { "Сейчас обновление не идёт." }
                }
            } @else {
                ul.runs {
                    @for (i, run) in view.running.iter().enumerate() {
                        (run_progress(run, now))
                        @let moved = view.running_moved_at.get(i).and_then(Option::as_ref);
                        @let since = moved.unwrap_or(&run.run.started_at);
                        @if seconds_since(since, now) > REFRESH_STALLED_SECONDS {
                            li.bad.stalled {
                                "Обновление, " (refresh_name(run)) ", стоит: от агента ничего нет "
                                (duration_words(seconds_since(since, now))) " (с " (time_of(since, now))
                                "). Если агент молчит, обновление продолжится, когда он вернётся."
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The database's card: its size and its last backup.
fn database_card(view: &Overview, now: OffsetDateTime) -> Markup {
    html! {
        article.card {
            h2 { "База данных" }
            p {
                "Размер: " b { (size_words(view.database_bytes)) }
                @if view.wal_bytes > 0 { " (журнал WAL: " (size_words(view.wal_bytes)) ")" }
            }
            @match &view.last_backup {
                Some(backup) => p {
                    "Последняя копия: " (path_html(&backup.name)) ", " (size_words(backup.bytes)) br;
                    "сделана " (time_of(&backup.modified, now))
                },
                None => p.bad { "Резервных копий нет." },
            }
        }
    }
}

pub(super) fn overview(view: &Overview, csrf: &str) -> Markup {
    let now = view.now.at();
    html! {
        section id="overview-cards" class="cards" data-live {
            (held_card(&view.held_runs))
            (queue_card(view, now))
            article.card {
                h2 { "Агенты" }
                p.hint {
                    "Хаб: " (env!("CARGO_PKG_VERSION")) ", коммит " (env!("JIRA_HUB_COMMIT"))
                    ", протокол " (crate::protocol::PROTOCOL_REVISION)
                }
                @if view.agents.is_empty() {
                    p { "Агент ещё не обращался к хабу." }
                }
                @for agent in &view.agents {
                    (agent_card(agent, csrf, now))
                }
            }
            (relay_card(&view.relay))
            (mirror_card(view, now))
            (database_card(view, now))
        }
        section id="overview-charts" class="charts" data-live {
            (charts_of(view, now))
        }
    }
}

/// The charts of the overview: the queue, the work done and Jira's 429s by hour, and how long
/// the last refreshes took.
fn charts_of(view: &Overview, now: OffsetDateTime) -> Markup {
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
    type Draw = fn(&str, Unit, &[Mark], &str, &str) -> Markup;
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
    let runs: Vec<&SyncRunView> = view.recent_runs.iter().rev().collect();
    let run_name = |run: &SyncRunView| {
        run.run.batch_id.map_or_else(
            || format!("прогон {}", run.run.id),
            |b| format!("пакет {b}"),
        )
    };
    let run_marks: Vec<Mark> = runs
        .iter()
        .map(|run| Mark {
            label: format!(
                "{} {}, {}",
                run_name(run),
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
    let (first_run, last_run) = match (runs.first(), runs.last()) {
        (Some(first), Some(last)) => (run_name(first), run_name(last)),
        _ => ("обновлений не было".to_string(), String::new()),
    };
    html! {
        @for (title, unit, value, draw) in hourly_charts {
            (draw(title, unit, &hourly(value), &first, &last))
        }
        (charts::bars(
            "Длительность обновлений зеркала",
            &["с", "с", "с"],
            &run_marks,
            &first_run,
            &last_run,
        ))
    }
}
