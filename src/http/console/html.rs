//! HTML for the console, written with maud's `html!` (every interpolation escaped; text from
//! outside, agent names, errors, Jira's words, is hostile and goes through [`Text`]): the page's
//! frame, and the Russian words and formats of times, ages and sizes.

use crate::domain::command::{CommandStatus, CommandType, RunKind, RunStatus};
use crate::domain::time::Utc;
use maud::{DOCTYPE, Markup, PreEscaped, Render, html};
use std::fmt::Write as _;
use time::OffsetDateTime;

/// Text from outside (an agent's name, an error, Jira's words) in a page: maud escapes it as it
/// escapes every interpolation (`&`, `<`, `>`, `"`), and this adds the apostrophe (`&#39;`), so
/// such text is inert in a single-quoted attribute too and reads as the console wrote it before.
pub(super) struct Text<'a>(pub &'a str);

impl Render for Text<'_> {
    fn render_to(&self, out: &mut String) {
        let mut parts = self.0.split('\'');
        if let Some(first) = parts.next() {
            first.render_to(out);
        }
        for part in parts {
            out.push_str("&#39;");
            part.render_to(out);
        }
    }
}

/// A non-breaking space, written as the entity (`команда&nbsp;2`) as the console always has.
// PreEscaped: a fixed entity of ours, no text from outside.
pub(super) const NBSP: PreEscaped<&str> = PreEscaped("&nbsp;");

/// A path segment percent-encoded (an issue key or a label in a link).
pub(super) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The sections of the console, for the menu.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    Overview,
    Batches,
    Failed,
    Mirror,
    Runs,
}

const MENU: &[(Section, &str, &str)] = &[
    (Section::Overview, "/", "Обзор"),
    (Section::Batches, "/ui/batches", "Пакеты"),
    (Section::Failed, "/ui/failed", "Ошибки"),
    (Section::Mirror, "/ui/mirror", "Зеркало"),
    (Section::Runs, "/ui/runs", "Синхронизация"),
];

/// What a signed-in page carries beside its body.
pub(super) struct Frame<'a> {
    pub title: &'a str,
    pub section: Section,
    /// The anti-forgery token of the session, for the sign-out form.
    pub csrf: &'a str,
    /// A short message about what the last action did.
    pub notice: Option<&'a str>,
}

/// The document's head: its title, the style sheet and the script, the hub's own two files.
fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (Text(title)) " — jira-hub" }
            link rel="stylesheet" href="/ui/static/console.css";
            script src="/ui/static/console.js" defer {}
        }
    }
}

/// A whole document: the head with `title`, and `body`.
fn document(title: &str, body: Markup) -> String {
    let page = html! {
        (DOCTYPE) "\n"
        html lang="ru" { (head(title)) (body) }
        "\n"
    };
    page.into_string()
}

/// The menu of the console; `current` is marked.
fn menu(current: Option<Section>) -> Markup {
    html! {
        nav {
            span.brand { "jira-hub" }
            @for (section, href, label) in MENU {
                a href=(href) aria-current=[(Some(*section) == current).then_some("page")] { (label) }
            }
        }
    }
}

/// A whole page of a signed-in operator: the menu, the notice, the body.
pub(super) fn page(frame: &Frame<'_>, body: Markup) -> String {
    framed(
        frame.title,
        Some(frame.section),
        Some(frame.csrf),
        frame.notice,
        body,
    )
}

/// The frame of a page with the menu: `current` marked in it, «Выйти» for a signed-in person.
fn framed(
    title: &str,
    current: Option<Section>,
    csrf: Option<&str>,
    notice: Option<&str>,
    body: Markup,
) -> String {
    let body = html! {
        body {
            header {
                (menu(current))
                @if let Some(csrf) = csrf {
                    (form("/ui/sign-out", csrf, &[], "Выйти", "quiet"))
                }
            }
            main {
                @if let Some(notice) = notice {
                    p.notice role="status" { (Text(notice)) }
                }
                h1 { (Text(title)) }
                (body)
            }
        }
    };
    document(title, body)
}

/// The database of the hub this process serves, when it is not a demo's (`jira-hub serve` sets
/// it once): the sign-in page names it in the command that prints the client token.
static SERVED_DATABASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Tells the sign-in page which database this process's hub serves (`serve`, not the demo).
pub(crate) fn set_served_database(db: &std::path::Path) {
    let _ = SERVED_DATABASE.set(db.display().to_string());
}

/// A page without the menu (signing in, a refusal): the name of the hub and `body`.
fn bare(title: &str, body: Markup) -> String {
    let body = html! {
        body.sign-in {
            main {
                h1 { "jira-hub" }
                (body)
            }
        }
    };
    document(title, body)
}

/// The sign-in page: nothing but the form (and why the last try failed).
pub(super) fn sign_in_page(error: Option<&str>) -> String {
    bare(
        "Вход",
        html! {
            @if let Some(error) = error {
                p.error role="alert" { (Text(error)) }
            }
            form method="post" action="/ui/sign-in" {
                label for="token" { "Токен клиента" }
                input #token name="token" type="password" autocomplete="current-password" required autofocus;
                button type="submit" { "Войти" }
            }
            @match SERVED_DATABASE.get() {
                // This hub's own database, as the operator types it (as the hub's user).
                Some(db) => p.hint {
                    "Токен клиента печатает "
                    code { "jira-hub --db " (Text(&crate::domain::words::shell_word(db))) " tokens" }
                    " (от имени пользователя, под которым работает хаб)."
                },
                None => p.hint {
                    "Токен клиента печатает " code { "jira-hub tokens" } " с базой этого хаба ("
                    code { "--db" } " или " code { "JIRA_HUB_DB" } "; из папки, где запускали "
                    code { "jira-hub demo" } ", — без них), а " code { "jira-hub demo" }
                    " печатает его при запуске."
                },
            }
        },
    )
}

/// A refused action before anything was done (another site's form, a stale anti-forgery token):
/// the reason and a way back, no form.
pub(super) fn refusal_page(message: &str) -> String {
    bare(
        "Отклонено",
        html! {
            p.error role="alert" { (Text(message)) }
            p { a href="/" { "На главную" } }
        },
    )
}

/// The page of a path the console does not have: the menu stays (no section marked), so the
/// person goes on from here (a signed-in one with «Выйти» too: `csrf` is the session's).
pub(super) fn missing_page(csrf: Option<&str>) -> String {
    let body = html! {
        p.error role="alert" { "Такой страницы в консоли нет." }
        p { a href="/" { "На главную" } }
    };
    framed("Страницы нет", None, csrf, None, body)
}

/// A POST form of one button, with the anti-forgery token and hidden fields.
pub(super) fn form(
    action: &str,
    csrf: &str,
    hidden: &[(&str, &str)],
    button: &str,
    class: &str,
) -> Markup {
    html! {
        form method="post" action=(Text(action)) class="inline" {
            input type="hidden" name="csrf" value=(Text(csrf));
            @for (name, value) in hidden {
                input type="hidden" name=(Text(name)) value=(Text(value));
            }
            button type="submit" class=(class) { (Text(button)) }
        }
    }
}

/// A stored time in the console's one form (see [`when_at`]), the stored text in the tooltip.
pub(super) fn time_of(at: &Utc, now: OffsetDateTime) -> Markup {
    when_at(at.at(), at.as_str(), now)
}

/// A time as every page of the console shows it: relative while recent («только что» under 3 s,
/// «30 с назад», «5 мин назад», «2 ч 05 мин назад»: under a day), else the date and minute in UTC («2026-11-30 03:12
/// UTC»); the exact time (`title`) in a tooltip and in `datetime`.
pub(super) fn when_at(at: OffsetDateTime, title: &str, now: OffsetDateTime) -> Markup {
    let at = at.to_offset(time::UtcOffset::UTC);
    let ago = (now - at).whole_seconds();
    let shown = match ago {
        // Seconds count once they can matter: an agent with a 2 s heartbeat is silent at 4 s,
        // and «был на связи только что» beside «молчит» would contradict it.
        ..3 => "только что".to_string(),
        3..86400 => format!("{} назад", duration_words(ago)),
        _ => format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute()
        ),
    };
    html! {
        time datetime=(crate::domain::time::format_utc(at)) title=(Text(title)) { (shown) }
    }
}

/// A time Jira wrote (`2026-11-29T13:00:00.000+0300`) in the hub's form (`2026-11-29 10:00:00
/// UTC`), Jira's own text in the tooltip; text that is not such a time shows as it is.
pub(super) fn jira_time_of(text: &str, now: OffsetDateTime) -> Markup {
    match crate::jira::jira_time(text) {
        Some(at) => when_at(at, text, now),
        None => html! { (Text(text)) },
    }
}

/// How long ago, in words: `5 мин`, `2 ч 05 мин`, `3 дн 4 ч`.
pub(super) fn duration_words(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        0..60 => format!("{seconds} с"),
        60..3600 => format!("{} мин", seconds / 60),
        3600..86400 => format!("{} ч {:02} мин", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} дн {} ч", seconds / 86400, seconds % 86400 / 3600),
    }
}

/// A length of time measured in milliseconds: tenths of a second under ten seconds (`0,4 с`,
/// `2,5 с`: a quick refresh is not «0 с»), else as [`duration_words`].
pub(super) fn millis_words(millis: i64) -> String {
    let millis = millis.max(0);
    if millis < 100 {
        "меньше 0,1 с".to_string()
    } else if millis < 10_000 {
        format!("{},{} с", millis / 1000, millis % 1000 / 100)
    } else {
        duration_words(millis / 1000)
    }
}

/// A path or file name that wraps only at its separators (`/`, `\\`, `-`, `_`, `.`), never
/// inside a word: a `<wbr>` after each, escaped text between (with `code.path` in the CSS).
pub(super) fn path_html(text: &str) -> Markup {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(['/', '\\', '-', '_', '.']) {
        parts.push(&rest[..=at]);
        rest = &rest[at + 1..];
    }
    html! {
        code.path {
            @for part in parts { (Text(part)) wbr; }
            (Text(rest))
        }
    }
}

/// A command as people name it: by its batch and its position there («пакет 5, команда 2»),
/// linked to its page.
pub(super) fn command_ref(batch_id: i64, seq: i64, command_id: i64) -> Markup {
    html! {
        a href={ "/ui/commands/" (command_id) } { "пакет " (batch_id) ", команда " (seq) }
    }
}

/// Seconds from `at` to `now`.
pub(super) fn seconds_since(at: &Utc, now: OffsetDateTime) -> i64 {
    (now - at.at()).whole_seconds()
}

/// A size in bytes: `812 Б`, `12,3 МБ`.
pub(super) fn size_words(bytes: u64) -> String {
    const UNITS: &[&str] = &["КБ", "МБ", "ГБ", "ТБ"];
    if bytes < 1024 {
        return format!("{bytes} Б");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit]).replace('.', ",")
}

/// A command status in Russian (a stored status this build does not know shows as it is).
pub(super) fn command_status_words(status: &str) -> &str {
    match CommandStatus::parse(status) {
        Some(known) => known.label(),
        None => status,
    }
}

/// A command type in Russian.
pub(super) fn command_type_words(command_type: CommandType) -> &'static str {
    match command_type {
        CommandType::Refresh => "обновление зеркала",
        CommandType::EnsureIssue => "создание или правка задачи",
        CommandType::Transition => "смена статуса",
        CommandType::Link => "связь",
        CommandType::Comment => "комментарий",
    }
}

pub(super) fn run_kind_words(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Full => "полное",
        RunKind::Incremental => "по изменениям",
        RunKind::Partial => "частичное",
    }
}

pub(super) fn run_status_words(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "идёт",
        RunStatus::Done => "готово",
        RunStatus::Failed => "ошибка",
        RunStatus::Held => "ждёт подтверждения удаления",
    }
}

/// Text cut to `max` characters, with `…` when cut.
pub(super) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_html_reads() {
        assert_eq!(
            html! { (Text("<script>alert('x')</script> & \"q\"")) }.into_string(),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(html! { (Text("кириллица")) }.into_string(), "кириллица");
        assert_eq!(segment("AURORA-1"), "AURORA-1");
        assert_eq!(segment("a/b?c"), "a%2Fb%3Fc");
    }

    #[test]
    fn words_for_ages_and_sizes() {
        assert_eq!(millis_words(400), "0,4 с");
        assert_eq!(millis_words(30), "меньше 0,1 с");
        assert_eq!(millis_words(2_560), "2,5 с");
        assert_eq!(millis_words(75_000), "1 мин");
        let now = time::macros::datetime!(2026-11-30 12:00:00 UTC);
        let at = |text: &str| Utc::parse(text).expect("a time");
        let shown = |text: &str| {
            let html = time_of(&at(text), now).into_string();
            html[html.find('>').unwrap() + 1..html.rfind('<').unwrap()].to_string()
        };
        assert_eq!(shown("2026-11-30T11:59:59Z"), "только что");
        assert_eq!(shown("2026-11-30T11:59:30Z"), "30 с назад");
        // A time a little ahead of the hub's clock (an agent's own) is still «только что».
        assert_eq!(shown("2026-11-30T12:00:01Z"), "только что");
        assert_eq!(shown("2026-11-30T11:55:00Z"), "5 мин назад");
        assert_eq!(shown("2026-11-30T09:55:00Z"), "2 ч 05 мин назад");
        assert_eq!(shown("2026-11-28T09:55:10Z"), "2026-11-28 09:55 UTC");
        assert!(
            time_of(&at("2026-11-28T09:55:10Z"), now)
                .0
                .contains("title=\"2026-11-28T09:55:10")
        );
        assert_eq!(
            path_html("/srv/relay/hub-2026_11.sqlite").into_string(),
            "<code class=\"path\">/<wbr>srv/<wbr>relay/<wbr>hub-<wbr>2026_<wbr>11.<wbr>sqlite</code>"
        );
        assert_eq!(duration_words(5), "5 с");
        assert_eq!(duration_words(300), "5 мин");
        assert_eq!(duration_words(7500), "2 ч 05 мин");
        assert_eq!(duration_words(3 * 86400 + 4 * 3600), "3 дн 4 ч");
        assert_eq!(size_words(812), "812 Б");
        assert_eq!(size_words(12_900_000), "12,3 МБ");
        assert_eq!(clip("абвгд", 3), "абв…");
        assert_eq!(clip("абв", 3), "абв");
    }
}
