//! Where the log goes: stderr, through a writer that never fails. A log line that cannot be
//! written (stderr on a full disk, a closed pipe, `EPIPE`, `ENOSPC`) is dropped and counted
//! ([`lines_dropped`], `jira_hub_log_lines_dropped_total` in `/metrics`), never an error:
//! `tracing-subscriber` reports a failed write with `eprintln!`, which panics when stderr itself
//! fails, so every log line panicked its thread (the relay's died, SIGTERM went unanswered).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Log lines this process could not write since it started.
pub fn lines_dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The log's writer: stderr, each line written whole or dropped and counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    /// `tracing-subscriber` writes each formatted line with one call.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut stderr = std::io::stderr().lock();
        if stderr.write_all(buf).and_then(|()| stderr.flush()).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Says `line` on stderr, as [`Stderr`] writes a log line (`main`'s last word on an error).
pub fn say(line: &str) {
    let _ = Stderr.write_all(format!("{line}\n").as_bytes());
}

/// A log line as one JSON object, for log shippers (`--log-format json`): `timestamp` (RFC 3339,
/// UTC), `level`, `target`, `message` and each field of the event at the top level, its value
/// as JSON: numbers and booleans as such, text as a string without the quotes and escapes of
/// Rust's `Debug` (`tracing-subscriber`'s own JSON layer put the message under `fields` and
/// wrote a `?`-field as a Debug string, `"\"/srv/relay\""`). The spans the event is in, when
/// there are some, are named in `spans`, outermost first. A field named like one of the line's
/// own keys is written with a `field.` prefix.
pub struct JsonLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let metadata = event.metadata();
        let mut line = serde_json::Map::new();
        let now = time::OffsetDateTime::now_utc();
        line.insert(
            "timestamp".into(),
            now.format(&time::format_description::well_known::Rfc3339)
                .map_or(serde_json::Value::Null, serde_json::Value::String),
        );
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("target".into(), metadata.target().into());
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        line.insert(
            "message".into(),
            fields.message.map_or(serde_json::Value::Null, Into::into),
        );
        if let Some(scope) = context.event_scope() {
            let spans: Vec<serde_json::Value> =
                scope.from_root().map(|span| span.name().into()).collect();
            line.insert("spans".into(), spans.into());
        }
        for (name, value) in fields.values {
            let key = if line.contains_key(&name) {
                format!("field.{name}")
            } else {
                name
            };
            line.insert(key, value);
        }
        let text = serde_json::to_string(&line).map_err(|_| std::fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// The fields of one event as JSON values, in their order.
#[derive(Default)]
struct JsonFields {
    message: Option<String>,
    values: Vec<(String, serde_json::Value)>,
}

impl JsonFields {
    fn put(&mut self, field: &tracing::field::Field, value: serde_json::Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                serde_json::Value::String(text) => text,
                other => other.to_string(),
            });
        } else {
            self.values.push((field.name().to_string(), value));
        }
    }
}

impl tracing::field::Visit for JsonFields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_i128(&mut self, field: &tracing::field::Field, value: i128) {
        let value = i64::try_from(value).map_or_else(|_| value.to_string().into(), Into::into);
        self.put(field, value);
    }

    fn record_u128(&mut self, field: &tracing::field::Field, value: u128) {
        let value = u64::try_from(value).map_or_else(|_| value.to_string().into(), Into::into);
        self.put(field, value);
    }

    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        // NaN and the infinities have no JSON number: their words, as a string.
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| value.to_string().into(), serde_json::Value::Number);
        self.put(field, value);
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_error(
        &mut self,
        field: &tracing::field::Field,
        value: &(dyn std::error::Error + 'static),
    ) {
        self.put(field, value.to_string().into());
    }

    /// `%value` (Display) and `?value` (Debug) both come here. A Debug text that is a JSON
    /// value (a number, a quoted string whose escapes JSON reads the same) is that value; any
    /// other text (a struct's Debug, a Display text) is a string as written. The message
    /// (`format_args!`) is its text.
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        let value = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(parsed @ (serde_json::Value::String(_) | serde_json::Value::Number(_)))
                if field.name() != "message" =>
            {
                parsed
            }
            _ => serde_json::Value::String(text),
        };
        self.put(field, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer, for the lines of one test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_json_line_has_its_message_on_top_and_values_as_json() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .event_format(JsonLine)
            .finish();
        let relay = std::path::PathBuf::from("/srv/relay \"a\"");
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(
                failures = 27_380_u64,
                delta = -3_i64,
                share = 0.5_f64,
                held = true,
                relay = ?relay,
                name = %"agent-1",
                state = ?Some(1),
                "failed {} sign-ins",
                2
            );
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["message"], "failed 2 sign-ins", "{text}");
        assert_eq!(line["level"], "WARN", "{text}");
        assert_eq!(line["failures"], 27_380, "{text}");
        assert_eq!(line["delta"], -3, "{text}");
        assert_eq!(line["share"], 0.5, "{text}");
        assert_eq!(line["held"], true, "{text}");
        assert_eq!(line["relay"], "/srv/relay \"a\"", "{text}");
        assert_eq!(line["name"], "agent-1", "{text}");
        assert_eq!(line["state"], "Some(1)", "{text}");
        assert!(line.get("fields").is_none(), "{text}");
        assert!(
            time::OffsetDateTime::parse(
                line["timestamp"].as_str().unwrap(),
                &time::format_description::well_known::Rfc3339
            )
            .is_ok(),
            "{text}"
        );
    }
}
