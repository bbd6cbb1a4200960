//! Reading JSON into typed values with errors people can act on: the field by its path
//! (`results[0].delivery`) and the reason in Russian, as every other refusal of the hub.
//!
//! serde's own messages are English and name no path; this module is the one place that turns
//! them into the hub's words, for the relay's refusals, the agent's HTTP endpoints and the client
//! API alike. It does no I/O.

use serde::Deserialize;
use serde::de::DeserializeOwned;

/// A JSON text that could not become the expected value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonError {
    /// The path of the offending member (`results[0].delivery`); empty for the document itself.
    pub field: String,
    /// What is wrong, in Russian.
    pub message: String,
    /// The text is not JSON at all, or ends early (it may still be arriving).
    pub syntax: bool,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for JsonError {}

/// Parses `bytes` as `T`, naming the path of the first member that does not fit.
pub(crate) fn from_slice<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, JsonError> {
    read(serde_json::Deserializer::from_slice(bytes))
}

/// [`from_slice`] of a text already known to be UTF-8 (not checked again); `T` may borrow from
/// it.
pub(crate) fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, JsonError> {
    read(serde_json::Deserializer::from_str(text))
}

fn read<'a, R: serde_json::de::Read<'a>, T: Deserialize<'a>>(
    mut deserializer: serde_json::Deserializer<R>,
) -> Result<T, JsonError> {
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(path_error)?;
    deserializer.end().map_err(|e| plain_error(&e))?;
    Ok(value)
}

/// Converts an already parsed value into `T`, naming the path of the member that does not fit.
pub(crate) fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, JsonError> {
    serde_path_to_error::deserialize(value).map_err(path_error)
}

fn path_error(error: serde_path_to_error::Error<serde_json::Error>) -> JsonError {
    let path = error.path().to_string();
    let mut converted = plain_error(error.inner());
    // serde_path_to_error writes "." for the root; a missing or unknown member is named by the
    // message, under the path of its object.
    if path != "." && path != "?" && !converted.syntax {
        converted.field = if converted.field.is_empty()
            || path == converted.field
            || path.ends_with(&format!(".{}", converted.field))
        {
            // An unknown member is already the last step of the path.
            path
        } else {
            format!("{path}.{}", converted.field)
        };
    }
    converted
}

/// One serde_json error in the hub's words.
pub(crate) fn plain_error(error: &serde_json::Error) -> JsonError {
    use serde_json::error::Category;
    let at = if error.line() > 0 {
        format!(" (строка {}, столбец {})", error.line(), error.column())
    } else {
        String::new()
    };
    match error.classify() {
        Category::Eof => JsonError {
            field: String::new(),
            message: format!("JSON оборван{at}"),
            syntax: true,
        },
        Category::Syntax => JsonError {
            field: String::new(),
            message: format!("не JSON: {}{at}", syntax_reason(&error.to_string())),
            syntax: true,
        },
        Category::Io => JsonError {
            field: String::new(),
            message: format!("не удалось прочитать: {error}"),
            syntax: true,
        },
        Category::Data => {
            let (field, message) = data_reason(&error.to_string());
            JsonError {
                field,
                message,
                syntax: false,
            }
        }
    }
}

/// serde_json's syntax messages, the text before " at line …".
fn syntax_reason(text: &str) -> &'static str {
    let text = text.split(" at line ").next().unwrap_or(text);
    match text {
        t if t.starts_with("expected value") => "ожидалось значение",
        t if t.starts_with("expected `,` or `}`") => "ожидалась , или }",
        t if t.starts_with("expected `,` or `]`") => "ожидалась , или ]",
        t if t.starts_with("expected `:`") => "ожидалось :",
        t if t.starts_with("key must be a string") => "ключ объекта должен быть строкой",
        t if t.starts_with("trailing characters") || t.starts_with("trailing comma") => {
            "лишние символы после конца"
        }
        t if t.starts_with("invalid escape") || t.starts_with("invalid unicode") => {
            "неверная escape-последовательность в строке"
        }
        t if t.starts_with("lone leading surrogate") || t.contains("surrogate") => {
            "одиночный суррогат UTF-16 в строке"
        }
        t if t.starts_with("control character") => "управляющий символ внутри строки",
        t if t.starts_with("recursion limit exceeded") => "слишком глубокая вложенность",
        t if t.starts_with("number out of range") => "число вне допустимого диапазона",
        t if t.starts_with("invalid number") => "неверное число",
        _ => "неверный синтаксис",
    }
}

/// serde's data messages (of any format: JSON, a query string): the field when the message names
/// one, and the reason in Russian.
pub(crate) fn data_reason(text: &str) -> (String, String) {
    let text = text.split(" at line ").next().unwrap_or(text);
    let quoted = |t: &str| t.split('`').nth(1).unwrap_or_default().to_string();
    if text.starts_with("missing field") {
        return (quoted(text), "обязательное поле отсутствует".into());
    }
    if text.starts_with("unknown field") {
        return (quoted(text), "неизвестное поле".into());
    }
    if text.starts_with("duplicate field") {
        return (quoted(text), "поле повторяется".into());
    }
    if let Some(rest) = text.strip_prefix("unknown variant ") {
        let value = quoted(rest);
        let allowed = rest
            .split_once("expected ")
            .map(|(_, e)| e.replace('`', ""))
            .unwrap_or_default();
        return (
            String::new(),
            format!("недопустимое значение «{value}»; допустимы: {allowed}"),
        );
    }
    if let Some(rest) = text.strip_prefix("invalid type: ") {
        let (found, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        return (
            String::new(),
            format!(
                "неверный тип: {}, ожидалось {}",
                type_words(found),
                type_words(expected)
            ),
        );
    }
    if let Some(rest) = text.strip_prefix("invalid value: ") {
        let (found, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        return (
            String::new(),
            format!(
                "недопустимое значение {}, ожидалось {}",
                type_words(found),
                type_words(expected)
            ),
        );
    }
    if text.starts_with("invalid length") {
        return (String::new(), "неверная длина".into());
    }
    (String::new(), format!("неверное значение ({text})"))
}

/// serde's words for kinds of values, in Russian; values themselves are kept.
pub(crate) fn type_words(text: &str) -> String {
    let text = text.trim();
    for (english, russian) in [
        ("a string", "строка"),
        ("string", "строка"),
        ("integer", "целое число"),
        ("floating point", "дробное число"),
        ("boolean", "true или false"),
        ("a boolean", "true или false"),
        ("map", "объект"),
        ("a map", "объект"),
        ("sequence", "массив"),
        ("a sequence", "массив"),
        ("null", "null"),
        ("unit value", "null"),
        ("u8", "целое число от 0 до 255"),
        ("u16", "целое число от 0 до 65535"),
        ("u32", "целое число от 0 до 4294967295"),
        ("u64", "целое неотрицательное число"),
        ("i32", "целое число"),
        ("i64", "целое число"),
        ("f64", "число"),
        ("usize", "целое неотрицательное число"),
        ("a borrowed string", "строка"),
        ("any valid JSON value", "значение JSON"),
    ] {
        if text == english {
            return russian.to_string();
        }
        if let Some(value) = text.strip_prefix(&format!("{english} ")) {
            return format!("{russian} {value}");
        }
    }
    if text.starts_with("struct ") || text.starts_with("a struct") {
        return "объект".to_string();
    }
    if text.starts_with("a sequence") || text.starts_with("a Vec") {
        return "массив".to_string();
    }
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // the fields are read by serde only
    struct Inner {
        delivery: u32,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        title: String,
        results: Vec<Inner>,
    }

    fn check(text: &str, field: &str, message: &str, syntax: bool) {
        let error = from_slice::<Outer>(text.as_bytes()).unwrap_err();
        assert_eq!(error.field, field, "{text}: {error:?}");
        assert!(
            error.message.contains(message),
            "{text}: {:?} lacks {message:?}",
            error.message
        );
        assert_eq!(error.syntax, syntax, "{text}");
    }

    #[test]
    fn errors_name_the_path_in_russian() {
        check(
            r#"{"title": "x", "results": [{"delivery": "1"}]}"#,
            "results[0].delivery",
            "неверный тип: строка \"1\"",
            false,
        );
        check(
            r#"{"title": "x", "results": [{}]}"#,
            "results[0].delivery",
            "обязательное поле",
            false,
        );
        check(r#"{"results": []}"#, "title", "обязательное поле", false);
        check(
            r#"{"title": 5, "results": []}"#,
            "title",
            "ожидалось строка",
            false,
        );
        check(
            r#"{"title": "x", "results": [{"delivery": -1}]}"#,
            "results[0].delivery",
            "ожидалось целое число",
            false,
        );
        check(r#""x""#, "", "ожидалось объект", false);
        check(r#"{"title": "x""#, "", "JSON оборван", true);
        check(r#"{"title": x}"#, "", "не JSON: ожидалось значение", true);
        check(
            r#"{"title": "x", "results": []} tail"#,
            "",
            "лишние символы",
            true,
        );
    }
}
