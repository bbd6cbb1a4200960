//! What `jira-hub demo` needs of the simulated Jira beyond the tests' accessors: a small team
//! project in Russian to start from, and the state kept on disk between runs (so a second run
//! continues where the first stopped).
//!
//! The project is made directly in the state, as [`FakeJira::seed_issues`] does: epics, tasks
//! and bugs in the epics (the epic link field, `customfield_10101`, as Jira Server's Agile keeps
//! it), the scrum board's three sprints (the sprint field in Server's `toString` form, as
//! `sprint_value` answers), statuses along the workflow of [`TRANSITIONS`](super::TRANSITIONS), links of the types
//! Jira ships ([`LINK_TYPES`]) and comments.

use super::{
    EPIC_LINK_FIELD, FakeJira, Issue, LINK_TYPES, Link, SPRINT_FIELD, STATUSES, Sprint, jira_time,
    lock,
};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

/// The shape of the saved state; a file of another version is refused, not half read.
const STATE_VERSION: u64 = 1;

/// 2026-01-12T09:00:00+03:00: the demo project's first issue.
const START_MS: i64 = 1_768_197_600_000;

const EPICS: &[(&str, &str)] = &[
    (
        "Личный кабинет клиента",
        "Клиент видит свои заявки, счета и историю обращений без звонка в поддержку.",
    ),
    (
        "Мобильное приложение",
        "Приложение для Android и iOS с push-уведомлениями о статусе заявки.",
    ),
    (
        "Интеграция с 1С",
        "Обмен справочниками и документами с бухгалтерией по расписанию.",
    ),
    (
        "Отчётность для руководства",
        "Еженедельные отчёты по нагрузке команды и срокам выполнения заявок.",
    ),
    (
        "Переезд в новый дата-центр",
        "Перенос стендов и базы без остановки сервиса дольше чем на час.",
    ),
    (
        "Безопасность и аудит",
        "Журнал действий пользователей, двухфакторный вход, проверка прав.",
    ),
];

/// The grammatical case a template puts its noun phrase in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Именительный: the subject («Не сохраняется список заявок»).
    Nominative,
    /// Родительный: after a noun or «при …» («Согласовать макет списка заявок», «Падает при
    /// открытии журнала событий»).
    Genitive,
    /// Винительный: the object of a verb, or after «в» of direction («Покрыть тестами список заявок»).
    Accusative,
    /// Дательный: after «к» («Написать инструкцию к списку заявок»).
    Dative,
}

/// A noun phrase of the team's product in the forms the templates need, and its number (a verb
/// whose subject it is agrees with it: «Пропадает журнал», «Пропадают push-уведомления»).
struct Noun {
    nominative: &'static str,
    genitive: &'static str,
    accusative: &'static str,
    dative: &'static str,
    plural: bool,
}

impl Noun {
    fn form(&self, case: Case) -> &'static str {
        match case {
            Case::Nominative => self.nominative,
            Case::Genitive => self.genitive,
            Case::Accusative => self.accusative,
            Case::Dative => self.dative,
        }
    }
}

const fn noun(
    nominative: &'static str,
    genitive: &'static str,
    accusative: &'static str,
    dative: &'static str,
    plural: bool,
) -> Noun {
    Noun {
        nominative,
        genitive,
        accusative,
        dative,
        plural,
    }
}

const OBJECTS: &[Noun] = &[
    noun(
        "список заявок",
        "списка заявок",
        "список заявок",
        "списку заявок",
        false,
    ),
    noun(
        "карточка клиента",
        "карточки клиента",
        "карточку клиента",
        "карточке клиента",
        false,
    ),
    noun(
        "история платежей",
        "истории платежей",
        "историю платежей",
        "истории платежей",
        false,
    ),
    noun(
        "форма обратной связи",
        "формы обратной связи",
        "форму обратной связи",
        "форме обратной связи",
        false,
    ),
    noun(
        "справочник услуг",
        "справочника услуг",
        "справочник услуг",
        "справочнику услуг",
        false,
    ),
    noun(
        "журнал событий",
        "журнала событий",
        "журнал событий",
        "журналу событий",
        false,
    ),
    noun(
        "раздел уведомлений",
        "раздела уведомлений",
        "раздел уведомлений",
        "разделу уведомлений",
        false,
    ),
    noun(
        "страница настроек",
        "страницы настроек",
        "страницу настроек",
        "странице настроек",
        false,
    ),
    noun(
        "отчёт по срокам",
        "отчёта по срокам",
        "отчёт по срокам",
        "отчёту по срокам",
        false,
    ),
    noun(
        "экспорт в Excel",
        "экспорта в Excel",
        "экспорт в Excel",
        "экспорту в Excel",
        false,
    ),
    noun(
        "настройки профиля",
        "настроек профиля",
        "настройки профиля",
        "настройкам профиля",
        true,
    ),
    noun(
        "push-уведомления",
        "push-уведомлений",
        "push-уведомления",
        "push-уведомлениям",
        true,
    ),
];

/// The words before a noun phrase: for a singular and for a plural phrase (the same when no
/// word of them agrees with it), and the case they put it in.
struct Template {
    singular: &'static str,
    plural: &'static str,
    case: Case,
}

impl Template {
    /// The summary: the words agreeing with the phrase, the phrase in its case.
    fn with(&self, object: &Noun) -> String {
        let words = if object.plural {
            self.plural
        } else {
            self.singular
        };
        format!("{words} {}", object.form(self.case))
    }
}

/// A template whose words do not agree with the phrase.
const fn fixed(words: &'static str, case: Case) -> Template {
    Template {
        singular: words,
        plural: words,
        case,
    }
}

/// A template whose verb agrees in number with the phrase, its subject.
const fn subject(singular: &'static str, plural: &'static str) -> Template {
    Template {
        singular,
        plural,
        case: Case::Nominative,
    }
}

const TASKS: &[Template] = &[
    fixed("Сверстать", Case::Accusative),
    fixed("Добавить фильтр в", Case::Accusative),
    fixed("Описать API", Case::Genitive),
    fixed("Настроить выгрузку", Case::Genitive),
    fixed("Покрыть тестами", Case::Accusative),
    fixed("Ускорить загрузку", Case::Genitive),
    fixed("Согласовать макет", Case::Genitive),
    fixed("Перевести на английский", Case::Accusative),
    fixed("Переделать", Case::Accusative),
    fixed("Написать инструкцию к", Case::Dative),
    fixed("Проверить права доступа к", Case::Dative),
    fixed("Подготовить миграцию", Case::Genitive),
];

const BUGS: &[Template] = &[
    subject("Не сохраняется", "Не сохраняются"),
    fixed("Падает при открытии", Case::Genitive),
    subject("Дублируется", "Дублируются"),
    subject("Не открывается", "Не открываются"),
    fixed("Съезжает вёрстка", Case::Genitive),
    subject("Долго загружается", "Долго загружаются"),
    fixed("Ошибка 500 при сохранении", Case::Genitive),
    subject("Пропадает", "Пропадают"),
];

/// The text with its first letter in lower case, to go on after a colon.
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

const COMMENTS: &[&str] = &[
    "Посмотрел, воспроизводится на тестовом стенде.",
    "Согласовали с заказчиком, делаем в этом спринте.",
    "Нужна помощь бэкенда, завёл связанную задачу.",
    "Исправлено, прошу проверить.",
    "Проверил: работает, закрываю.",
    "Оценка — два дня, риски описал в описании.",
    "Ждём ответа от смежной команды.",
    "Макет обновлён, ссылка в описании.",
];

const PEOPLE: &[&str] = &[
    "Анна Смирнова",
    "Игорь Петров",
    "Мария Козлова",
    "Дмитрий Волков",
    "Елена Новикова",
];

/// `(id, name)` of Jira Server's default priorities, as the legacy config's `priority_map` names
/// them.
const PRIORITIES: &[(&str, &str)] = &[
    ("1", "Блокирующий"),
    ("2", "Высокий"),
    ("3", "Средний"),
    ("4", "Низкий"),
];

/// A small deterministic generator (xorshift64*), so one seed gives one project.
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Dice {
        Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn status_index(name: &str) -> usize {
    STATUSES.iter().position(|(_, n)| *n == name).unwrap_or(0)
}

fn link_kind(name: &str) -> usize {
    LINK_TYPES
        .iter()
        .position(|(_, n, _, _)| *n == name)
        .unwrap_or(0)
}

impl FakeJira {
    /// Seeds a team project of `issues` issues (at least one epic) in `project`, each labelled
    /// with one of `labels` in turn; `seed` picks the words, statuses, links and comments.
    /// Renames the scrum board and its sprints in Russian. Returns the keys made.
    pub fn seed_demo_project(
        &self,
        project: &str,
        labels: &[&str],
        issues: usize,
        seed: u64,
    ) -> Vec<String> {
        let mut dice = Dice::new(seed);
        let mut state = lock(&self.state);
        state.projects.entry(project.to_string()).or_insert(1);
        if let Some(board) = state.boards.get_mut(&4216) {
            board.0 = "Команда Аврора (scrum)".into();
        }
        if let Some(board) = state.boards.get_mut(&4217) {
            board.0 = "Поддержка Аврора (kanban)".into();
        }
        for sprint in &mut state.sprints {
            sprint.name = sprint.name.replace("Sprint", "Спринт");
        }
        let sprints: Vec<Sprint> = state.sprints.clone();
        let epics = (issues / 40).clamp(1, EPICS.len()).min(issues);
        let mut keys = Vec::with_capacity(issues);
        let mut epic_keys = Vec::new();
        for i in 0..issues {
            let label = labels[i % labels.len().max(1)];
            let created = START_MS + i as i64 * 3 * 3_600_000 + dice.below(3_600_000) as i64;
            let mut fields = Map::new();
            let (kind, summary, description) = if i < epics {
                let (name, about) = EPICS[i];
                (("10000", "Эпик"), name.to_string(), about.to_string())
            } else if dice.below(5) == 0 {
                let what = dice.pick(OBJECTS);
                let summary = dice.pick(BUGS).with(what);
                let description = format!(
                    "Шаги: открыть раздел, выполнить действие. Ожидается: всё работает. \
                     Фактически: {}.",
                    lower_first(&summary)
                );
                (("10004", "Ошибка"), summary, description)
            } else {
                let what = dice.pick(OBJECTS);
                let summary = dice.pick(TASKS).with(what);
                let description = format!(
                    "Что сделать: {}. Критерий готовности: проверено на стенде.",
                    lower_first(&summary)
                );
                (("10002", "Задача"), summary, description)
            };
            fields.insert("summary".into(), summary.into());
            fields.insert("description".into(), description.into());
            fields.insert(
                "issuetype".into(),
                json!({"id": kind.0, "name": kind.1, "subtask": false}),
            );
            let (priority_id, priority) = dice.pick(PRIORITIES);
            fields.insert(
                "priority".into(),
                json!({"id": priority_id, "name": priority}),
            );
            fields.insert("labels".into(), json!([label]));
            let assignee = dice.pick(PEOPLE);
            fields.insert(
                "assignee".into(),
                json!({"name": assignee, "displayName": assignee, "active": true}),
            );
            let mut status = "Открыта";
            if i >= epics {
                if !epic_keys.is_empty() {
                    let epic: &String = dice.pick(&epic_keys);
                    fields.insert(EPIC_LINK_FIELD.into(), epic.clone().into());
                }
                // A third of the work is done (the closed sprint), a third is in the active
                // sprint, the rest is planned or in the backlog.
                let sprint = match dice.below(6) {
                    0 | 1 => sprints.first(),
                    2 | 3 => sprints.get(1),
                    4 => sprints.get(2),
                    _ => None,
                };
                if let Some(sprint) = sprint {
                    let value = state.sprint_value(sprint.id);
                    fields.insert(SPRINT_FIELD.into(), value);
                    status = match (sprint.state.as_str(), dice.below(10)) {
                        ("closed", 0) => "Снято",
                        ("closed", _) => "Готово",
                        ("active", 0..=3) => "В работе",
                        ("active", 4..=6) => "Готово",
                        _ => "Открыта",
                    };
                }
                let day = 86_400_000;
                fields.insert("customfield_12001".into(), jira_date(created + day).into());
                fields.insert(
                    "customfield_12002".into(),
                    jira_date(created + (3 + dice.below(10) as i64) * day).into(),
                );
            }
            let key = state.insert_issue(project, fields, created, None);
            if let Some(id) = state.by_key.get(&key).copied()
                && let Some(issue) = state.issues.get_mut(&id)
            {
                issue.status = status_index(status);
                issue.updated_ms = created + dice.below(10 * 86_400_000) as i64;
            }
            if i < epics {
                epic_keys.push(key.clone());
            }
            keys.push(key);
        }
        // Links: a blocker or a relation for about one issue in six.
        for _ in 0..issues / 6 {
            let (a, b) = (dice.pick(&keys).clone(), dice.pick(&keys).clone());
            if a == b {
                continue;
            }
            let kind = link_kind(if dice.below(2) == 0 {
                "Blocker"
            } else {
                "Related"
            });
            let id = state.next_link;
            state.next_link += 1;
            state.links.insert(
                id,
                Link {
                    id,
                    kind,
                    source: a.clone(),
                    target: b.clone(),
                },
            );
            for key in [&a, &b] {
                if let Some(issue) = state.by_key.get(key).copied()
                    && let Some(issue) = state.issues.get_mut(&issue)
                {
                    issue.links.push(id);
                }
            }
        }
        // Comments: up to three on about a third of the issues, as Jira answers them.
        for key in &keys {
            if dice.below(3) != 0 {
                continue;
            }
            for n in 0..1 + dice.below(3) {
                let comment_id = state.next_comment;
                state.next_comment += 1;
                let Some(id) = state.by_key.get(key).copied() else {
                    continue;
                };
                let author = dice.pick(PEOPLE);
                let person = json!({"name": author, "displayName": author, "active": true});
                let at = state.issues[&id].created_ms + (n as i64 + 1) * 7_200_000;
                let text = dice.pick(COMMENTS);
                let comment = json!({
                    "self": format!("{}/rest/api/2/issue/{id}/comment/{comment_id}", state.base),
                    "id": comment_id.to_string(), "author": person, "body": text,
                    "updateAuthor": person, "created": jira_time(at), "updated": jira_time(at)});
                if let Some(issue) = state.issues.get_mut(&id) {
                    issue.comments.push(comment);
                }
            }
        }
        keys
    }

    /// How many writes the simulated Jira has answered with success: the demo saves the state
    /// when this moves.
    pub fn changes(&self) -> u64 {
        lock(&self.state).changes
    }

    /// Writes the state a restart needs (issues, links, comments, sprints, boards, counters) to
    /// `path` atomically: a temporary file beside it, flushed to disk, then renamed over it.
    /// Faults, counters of calls and the request log are not kept.
    pub fn save_state(&self, path: &Path) -> std::io::Result<()> {
        let state = lock(&self.state);
        let issues: Vec<Value> = state
            .issues
            .values()
            .map(|issue| {
                json!({"id": issue.id, "key": issue.key, "project": issue.project,
                       "labels": issue.labels, "summary": issue.summary,
                       "fields": issue.fields, "status": STATUSES[issue.status].1,
                       "created_ms": issue.created_ms, "updated_ms": issue.updated_ms,
                       "links": issue.links, "comments": issue.comments,
                       "properties": issue.properties})
            })
            .collect();
        let links: Vec<Value> = state
            .links
            .values()
            .map(|link| {
                json!({"id": link.id, "type": LINK_TYPES[link.kind].1,
                       "source": link.source, "target": link.target})
            })
            .collect();
        let comment_properties: BTreeMap<String, &BTreeMap<String, Value>> = state
            .comment_properties
            .iter()
            .map(|(id, properties)| (id.to_string(), properties))
            .collect();
        let document = json!({
            "version": STATE_VERSION,
            "base": state.base,
            "projects": state.projects,
            "next_id": state.next_id, "next_link": state.next_link,
            "next_comment": state.next_comment,
            "boards": state.boards.iter()
                .map(|(id, (name, kind))| json!({"id": id, "name": name, "type": kind}))
                .collect::<Vec<_>>(),
            "sprints": state.sprints.iter()
                .map(|s| json!({"id": s.id, "board": s.board, "name": s.name, "state": s.state}))
                .collect::<Vec<_>>(),
            "issues": issues,
            "links": links,
            "comment_properties": comment_properties,
        });
        drop(state);
        let text = serde_json::to_vec(&document).map_err(std::io::Error::other)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "jira.json".into());
        let temporary = path.with_file_name(format!(".{name}.tmp"));
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&text)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(folder)?.sync_all()?;
        }
        Ok(())
    }

    /// Replaces the state with one [`save_state`](Self::save_state) wrote. The addresses in it
    /// (`self` links) are moved to this run's port. Nothing changes when the file is refused.
    pub fn load_state(&self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let probe: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if probe["version"].as_u64() != Some(STATE_VERSION) {
            return Err(format!(
                "{}: версия {} не поддерживается (ожидается {STATE_VERSION})",
                path.display(),
                probe["version"]
            ));
        }
        let mut state = lock(&self.state);
        let old_base = probe["base"].as_str().unwrap_or("").to_string();
        let text = if old_base.is_empty() {
            text
        } else {
            text.replace(&old_base, &state.base)
        };
        let document: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let bad = |what: &str| format!("{}: неверное поле {what}", path.display());
        let number = |value: &Value, what: &str| value.as_u64().ok_or_else(|| bad(what));
        let text_of =
            |value: &Value, what: &str| value.as_str().map(String::from).ok_or_else(|| bad(what));
        let mut issues = BTreeMap::new();
        for issue in document["issues"].as_array().ok_or_else(|| bad("issues"))? {
            let id = number(&issue["id"], "issues[].id")?;
            let status_name = text_of(&issue["status"], "issues[].status")?;
            let status = STATUSES
                .iter()
                .position(|(_, n)| *n == status_name)
                .ok_or_else(|| bad("issues[].status"))?;
            let strings = |value: &Value| -> Vec<String> {
                value
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            issues.insert(
                id,
                Issue {
                    id,
                    key: text_of(&issue["key"], "issues[].key")?,
                    project: text_of(&issue["project"], "issues[].project")?,
                    labels: strings(&issue["labels"]),
                    summary: text_of(&issue["summary"], "issues[].summary")?,
                    fields: issue["fields"]
                        .as_object()
                        .cloned()
                        .ok_or_else(|| bad("issues[].fields"))?,
                    status,
                    created_ms: issue["created_ms"]
                        .as_i64()
                        .ok_or_else(|| bad("issues[].created_ms"))?,
                    updated_ms: issue["updated_ms"]
                        .as_i64()
                        .ok_or_else(|| bad("issues[].updated_ms"))?,
                    created_at: None,
                    changed: None,
                    links: issue["links"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default(),
                    comments: issue["comments"].as_array().cloned().unwrap_or_default(),
                    properties: issue["properties"]
                        .as_object()
                        .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                        .unwrap_or_default(),
                    histories: Vec::new(),
                },
            );
        }
        let mut links = BTreeMap::new();
        for link in document["links"].as_array().ok_or_else(|| bad("links"))? {
            let id = number(&link["id"], "links[].id")?;
            let kind_name = text_of(&link["type"], "links[].type")?;
            let kind = LINK_TYPES
                .iter()
                .position(|(_, n, _, _)| *n == kind_name)
                .ok_or_else(|| bad("links[].type"))?;
            links.insert(
                id,
                Link {
                    id,
                    kind,
                    source: text_of(&link["source"], "links[].source")?,
                    target: text_of(&link["target"], "links[].target")?,
                },
            );
        }
        let mut boards = BTreeMap::new();
        for board in document["boards"].as_array().ok_or_else(|| bad("boards"))? {
            boards.insert(
                number(&board["id"], "boards[].id")?,
                (
                    text_of(&board["name"], "boards[].name")?,
                    text_of(&board["type"], "boards[].type")?,
                ),
            );
        }
        let mut sprints = Vec::new();
        for sprint in document["sprints"]
            .as_array()
            .ok_or_else(|| bad("sprints"))?
        {
            sprints.push(Sprint {
                id: number(&sprint["id"], "sprints[].id")?,
                board: number(&sprint["board"], "sprints[].board")?,
                name: text_of(&sprint["name"], "sprints[].name")?,
                state: text_of(&sprint["state"], "sprints[].state")?,
            });
        }
        let projects: HashMap<String, u64> = document["projects"]
            .as_object()
            .ok_or_else(|| bad("projects"))?
            .iter()
            .map(|(k, v)| Ok((k.clone(), number(v, "projects")?)))
            .collect::<Result<_, String>>()?;
        let comment_properties: HashMap<u64, BTreeMap<String, Value>> =
            document["comment_properties"]
                .as_object()
                .map(|all| {
                    all.iter()
                        .filter_map(|(id, p)| {
                            Some((
                                id.parse().ok()?,
                                p.as_object()?
                                    .iter()
                                    .map(|(k, v)| (k.clone(), v.clone()))
                                    .collect(),
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
        let next_id = number(&document["next_id"], "next_id")?;
        let next_link = number(&document["next_link"], "next_link")?;
        let next_comment = number(&document["next_comment"], "next_comment")?;
        state.by_key = issues
            .values()
            .map(|i: &Issue| (i.key.clone(), i.id))
            .collect();
        state.issues = issues;
        state.links = links;
        state.boards = boards;
        state.sprints = sprints;
        state.projects = projects;
        state.comment_properties = comment_properties;
        state.next_id = next_id;
        state.next_link = next_link;
        state.next_comment = next_comment;
        Ok(())
    }
}

/// A date field's value (`YYYY-MM-DD`), in Jira's offset as [`jira_time`] writes times.
fn jira_date(ms: i64) -> String {
    jira_time(ms)[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::super::{Mode, PROJECT};
    use super::*;

    /// Everything a client reads of an issue, without the addresses (the port changes).
    fn seen(jira: &FakeJira) -> Vec<Value> {
        let mut issues = jira.issues();
        for issue in &mut issues {
            let text = issue.to_string().replace(&jira.url(), "BASE");
            *issue = serde_json::from_str(&text).unwrap();
        }
        issues
    }

    /// Every task's and bug's summary of seeded projects (the demo's default and a large one) is
    /// one of the grammatical summaries made here from forms written out by hand, not from the
    /// generator's tables: each template's words, agreeing in number with the phrase where a
    /// verb is its predicate, then the phrase in the case the words govern. The issue's
    /// examples («Дублируется отчёта по срокам», «Долго загружается страницы настроек», «Не
    /// сохраняется экспорта в Excel») are not among them.
    #[test]
    fn every_summary_of_a_seeded_project_is_grammatical() {
        // (before a singular phrase, before a plural one, the case: 0 nominative, 1 genitive,
        // 2 accusative, 3 dative)
        const WORDS: &[(&str, &str, usize)] = &[
            ("Сверстать", "Сверстать", 2),
            ("Добавить фильтр в", "Добавить фильтр в", 2),
            ("Описать API", "Описать API", 1),
            ("Настроить выгрузку", "Настроить выгрузку", 1),
            ("Покрыть тестами", "Покрыть тестами", 2),
            ("Ускорить загрузку", "Ускорить загрузку", 1),
            ("Согласовать макет", "Согласовать макет", 1),
            ("Перевести на английский", "Перевести на английский", 2),
            ("Переделать", "Переделать", 2),
            ("Написать инструкцию к", "Написать инструкцию к", 3),
            ("Проверить права доступа к", "Проверить права доступа к", 3),
            ("Подготовить миграцию", "Подготовить миграцию", 1),
            ("Не сохраняется", "Не сохраняются", 0),
            ("Падает при открытии", "Падает при открытии", 1),
            ("Дублируется", "Дублируются", 0),
            ("Не открывается", "Не открываются", 0),
            ("Съезжает вёрстка", "Съезжает вёрстка", 1),
            ("Долго загружается", "Долго загружаются", 0),
            ("Ошибка 500 при сохранении", "Ошибка 500 при сохранении", 1),
            ("Пропадает", "Пропадают", 0),
        ];
        // (nominative, genitive, accusative, dative; plural)
        const FORMS: &[([&str; 4], bool)] = &[
            (
                [
                    "список заявок",
                    "списка заявок",
                    "список заявок",
                    "списку заявок",
                ],
                false,
            ),
            (
                [
                    "карточка клиента",
                    "карточки клиента",
                    "карточку клиента",
                    "карточке клиента",
                ],
                false,
            ),
            (
                [
                    "история платежей",
                    "истории платежей",
                    "историю платежей",
                    "истории платежей",
                ],
                false,
            ),
            (
                [
                    "форма обратной связи",
                    "формы обратной связи",
                    "форму обратной связи",
                    "форме обратной связи",
                ],
                false,
            ),
            (
                [
                    "справочник услуг",
                    "справочника услуг",
                    "справочник услуг",
                    "справочнику услуг",
                ],
                false,
            ),
            (
                [
                    "журнал событий",
                    "журнала событий",
                    "журнал событий",
                    "журналу событий",
                ],
                false,
            ),
            (
                [
                    "раздел уведомлений",
                    "раздела уведомлений",
                    "раздел уведомлений",
                    "разделу уведомлений",
                ],
                false,
            ),
            (
                [
                    "страница настроек",
                    "страницы настроек",
                    "страницу настроек",
                    "странице настроек",
                ],
                false,
            ),
            (
                [
                    "отчёт по срокам",
                    "отчёта по срокам",
                    "отчёт по срокам",
                    "отчёту по срокам",
                ],
                false,
            ),
            (
                [
                    "экспорт в Excel",
                    "экспорта в Excel",
                    "экспорт в Excel",
                    "экспорту в Excel",
                ],
                false,
            ),
            (
                [
                    "настройки профиля",
                    "настроек профиля",
                    "настройки профиля",
                    "настройкам профиля",
                ],
                true,
            ),
            (
                [
                    "push-уведомления",
                    "push-уведомлений",
                    "push-уведомления",
                    "push-уведомлениям",
                ],
                true,
            ),
        ];
        let grammatical: std::collections::BTreeSet<String> = WORDS
            .iter()
            .flat_map(|(singular, plural, case)| {
                FORMS.iter().map(move |(forms, many)| {
                    format!("{} {}", if *many { plural } else { singular }, forms[*case])
                })
            })
            .collect();
        for wrong in [
            "Дублируется отчёта по срокам",
            "Долго загружается страницы настроек",
            "Не сохраняется экспорта в Excel",
            "Пропадает настройки профиля",
        ] {
            assert!(!grammatical.contains(wrong), "{wrong}");
        }
        let mut seen = std::collections::BTreeSet::new();
        for (issues, seed) in [(300, 1), (2000, 5)] {
            let jira = FakeJira::start(Mode::DataCenter);
            jira.seed_demo_project(PROJECT, &["AWPCA", "AWPCB"], issues, seed);
            for issue in jira.issues() {
                let fields = &issue["fields"];
                if fields["issuetype"]["name"] == "Эпик" {
                    continue;
                }
                let summary = fields["summary"].as_str().unwrap().to_string();
                assert!(
                    grammatical.contains(&summary),
                    "not grammatical: «{summary}»"
                );
                // The description goes on with the same words.
                let description = fields["description"].as_str().unwrap();
                assert!(
                    description.contains(&format!(": {}", lower_first(&summary))),
                    "{description}"
                );
                seen.insert(summary);
            }
        }
        // Not vacuous: every template's words, and a plural phrase after an agreeing verb.
        for (singular, _, _) in WORDS {
            assert!(
                seen.iter().any(|s| s.starts_with(&format!("{singular} "))),
                "no summary starts with «{singular}»"
            );
        }
        assert!(seen.iter().any(|s| s.starts_with("Пропадают ")), "{seen:?}");
    }

    #[test]
    fn the_project_is_a_team_project_and_one_seed_gives_one_project() {
        let jira = FakeJira::start(Mode::DataCenter);
        let keys = jira.seed_demo_project(PROJECT, &["AWPCA", "AWPCB"], 120, 7);
        assert_eq!(keys.len(), 120);
        let issues = jira.issues();
        let kinds = |name: &str| {
            issues
                .iter()
                .filter(|i| i["fields"]["issuetype"]["name"] == name)
                .count()
        };
        assert!(kinds("Эпик") >= 1 && kinds("Задача") > 0 && kinds("Ошибка") > 0);
        assert!(!jira.links().is_empty());
        assert!(keys.iter().any(|k| !jira.comments(k).is_empty()));
        let statuses: std::collections::BTreeSet<String> =
            keys.iter().filter_map(|k| jira.status_of(k)).collect();
        assert!(statuses.len() >= 3, "{statuses:?}");
        let other = FakeJira::start(Mode::DataCenter);
        other.seed_demo_project(PROJECT, &["AWPCA", "AWPCB"], 120, 7);
        assert_eq!(seen(&jira), seen(&other));
    }

    #[test]
    fn a_saved_state_loads_into_another_run_and_a_bad_file_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jira.json");
        let first = FakeJira::start(Mode::DataCenter);
        first.seed_demo_project(PROJECT, &["AWPCA"], 40, 1);
        first.save_state(&path).unwrap();
        let second = FakeJira::start(Mode::DataCenter);
        second.load_state(&path).unwrap();
        assert_eq!(seen(&first), seen(&second));
        assert_eq!(first.links().len(), second.links().len());
        // New issues continue the numbering.
        let next = second.seed_issue(PROJECT, json!({"summary": "после перезапуска"}));
        assert_eq!(next, format!("{PROJECT}-41"));

        std::fs::write(&path, r#"{"version": 99}"#).unwrap();
        let error = second.load_state(&path).unwrap_err();
        assert!(error.contains("версия 99"), "{error}");
        std::fs::write(&path, r#"{"version": 1, "issues": [{"id": 1}]}"#).unwrap();
        assert!(second.load_state(&path).is_err());
        assert_eq!(second.issue_count(), 41, "a refused file changes nothing");
    }
}
