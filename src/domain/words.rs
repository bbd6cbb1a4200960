//! Russian words for counts: the form of a noun after a number (`1 команда`, `2 команды`,
//! `5 команд`, `11 команд`, `21 команда`), the one rule every message, page and CLI line uses.

/// A noun's forms after 1, 2 and 5: `["команда", "команды", "команд"]`.
pub(crate) type Forms = [&'static str; 3];

pub(crate) const COMMANDS: Forms = ["команда", "команды", "команд"];
pub(crate) const TIMES: Forms = ["раз", "раза", "раз"];
/// Issues as the object of a verb: «удалило бы 1 задачу», «2 задачи», «5 задач».
pub(crate) const ISSUES_ACCUSATIVE: Forms = ["задачу", "задачи", "задач"];
/// Issues after a noun that governs the genitive: «удаление 1 задачи», «2 задач», «21 задачи».
pub(crate) const ISSUES_GENITIVE: Forms = ["задачи", "задач", "задач"];

/// Heartbeats: «пропущен 1 сигнал», «пропущено 4 сигнала», «5 сигналов».
pub(crate) const SIGNALS: Forms = ["сигнал", "сигнала", "сигналов"];
/// The participle agreeing with [`SIGNALS`]: «пропущен 1 сигнал», «пропущено 2 сигнала».
pub(crate) const MISSED: Forms = ["пропущен", "пропущено", "пропущено"];

/// The form of `forms` that goes after `n`.
pub(crate) fn plural(n: u64, forms: &Forms) -> &'static str {
    match (n % 10, n % 100) {
        (_, 11..=14) => forms[2],
        (1, _) => forms[0],
        (2..=4, _) => forms[1],
        _ => forms[2],
    }
}

/// `n` and its noun: `3 команды`.
pub(crate) fn count(n: u64, forms: &Forms) -> String {
    format!("{n} {}", plural(n, forms))
}

/// `n` and an English noun, for the CLI's English lines: `1 result`, `2 results`, `0 results`
/// (`noun` is the singular; the plural adds `s`, or `es` after s, x, ch, sh).
pub(crate) fn count_en(n: u64, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let es = ["s", "x", "ch", "sh"].iter().any(|end| noun.ends_with(end));
    format!("{n} {noun}{}", if es { "es" } else { "s" })
}

/// A path as one shell word: as it is when it has nothing a shell reads, else in single quotes.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if plain && !text.is_empty() {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// A link's direction in Russian for Jira's standard link types, matched by Jira's name
/// (`Blocks`, `Relates`, `Duplicate`, `Cloners`; the simulated Server's `Blocker`) or by the
/// hub's usual alias for it (`blocks`, `relates`, `duplicates`, `clones`), case aside:
/// `(outward, inward)`, as said of the link's source and of its target. Jira names these
/// directions `type.outward` ("blocks") and `type.inward` ("is blocked by"). `None`: a type
/// of this Jira's own, to be shown in Jira's words.
pub(crate) fn link_directions(name: &str) -> Option<(&'static str, &'static str)> {
    match name.trim().to_lowercase().as_str() {
        "blocks" | "blocker" => Some(("блокирует", "заблокирована задачей")),
        "relates" => Some(("связана с", "связана с")),
        "duplicate" | "duplicates" => Some(("дублирует", "дублируется задачей")),
        "cloners" | "clones" => Some(("клонирует", "клонирована из")),
        _ => None,
    }
}

/// What a link says, seen from one of its issues: «блокирует» from its source (`outward`),
/// «заблокирована задачей» from its target; for a type the table does not know, Jira's name
/// quoted with an arrow: «связь «Haunts» →».
pub(crate) fn link_direction(name: &str, outward: bool) -> String {
    match link_directions(name) {
        Some((from, to)) => (if outward { from } else { to }).to_string(),
        None => format!("связь «{name}» {}", if outward { "→" } else { "←" }),
    }
}

/// `text` with its first letter a capital: a fragment that starts a line.
pub(crate) fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_directions_are_russian_with_jiras_words_for_the_unknown() {
        assert_eq!(link_direction("Blocks", true), "блокирует");
        assert_eq!(link_direction("blocks", false), "заблокирована задачей");
        assert_eq!(link_direction("Duplicate", false), "дублируется задачей");
        assert_eq!(link_direction("Cloners", false), "клонирована из");
        assert_eq!(link_direction("relates", true), "связана с");
        assert_eq!(link_direction("Haunts", true), "связь «Haunts» →");
        assert_eq!(link_direction("Haunts", false), "связь «Haunts» ←");
    }

    #[test]
    fn forms_follow_the_last_digits() {
        let said: Vec<String> = [0, 1, 2, 4, 5, 11, 12, 14, 21, 22, 25, 101, 111, 112, 1000]
            .iter()
            .map(|n| count(*n, &COMMANDS))
            .collect();
        assert_eq!(
            said,
            [
                "0 команд",
                "1 команда",
                "2 команды",
                "4 команды",
                "5 команд",
                "11 команд",
                "12 команд",
                "14 команд",
                "21 команда",
                "22 команды",
                "25 команд",
                "101 команда",
                "111 команд",
                "112 команд",
                "1000 команд"
            ]
        );
        assert_eq!(count(3, &TIMES), "3 раза");
        assert_eq!(count(21, &ISSUES_ACCUSATIVE), "21 задачу");
        assert_eq!(count(90, &ISSUES_ACCUSATIVE), "90 задач");
        assert_eq!(count(1, &ISSUES_GENITIVE), "1 задачи");
        assert_eq!(count(21, &ISSUES_GENITIVE), "21 задачи");
        assert_eq!(count(3, &ISSUES_GENITIVE), "3 задач");
        assert_eq!(count_en(1, "result"), "1 result");
        assert_eq!(count_en(21, "page"), "21 pages");
        assert_eq!(count_en(0, "issue"), "0 issues");
        assert_eq!(count_en(2, "batch"), "2 batches");
    }
}
