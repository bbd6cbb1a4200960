//! Looking in Jira before writing again: a write whose answer was lost is found by its marker
//! (in the search, then by reading each candidate) within the window its command could have
//! written in.

use super::{Executor, Fail, MARKER_KEY, fail, marker_is_of};
use crate::agent::jira_api::{Jira, JiraError};
use crate::agent::jql;
use crate::protocol::ClaimedCommand;
use serde_json::Value;
use std::time::Duration;

impl Executor<'_> {
    /// A write answered 503 with `Retry-After`: a 503 is not proof that
    /// nothing was applied (a proxy answers it after forwarding), so the agent waits as asked and
    /// looks once: found, it is done. Not found, the write is never sent again in this delivery
    /// (`None`: the caller looks until its grace ends, then gives the command back): a search
    /// may lag behind the write (Cloud, a Data Center cluster's other nodes), and a write
    /// resent on the strength of what it did not show is a doubled issue or comment. `None`
    /// too when the answer was not such a 503.
    pub(super) fn look_after_503<T>(
        &mut self,
        mut look: impl FnMut(&mut Self) -> Result<Option<T>, Fail>,
    ) -> Result<Option<T>, Fail> {
        let Some(wait) = self.jira.take_busy() else {
            return Ok(None);
        };
        if !(self.sleep)(wait) {
            return Err(Fail::Stopped);
        }
        look(self)
    }

    /// After a write's answer was lost: looking for the command's marker is a
    /// read, not a repeat. The agent looks a few times within `grace`, each wait twice the one
    /// before (1 s, 2 s, 4 s … on the injected clock, at most [`LOOK_MAX_STEP`]), and takes the
    /// write as done as soon as `look` finds it; a write still unseen at the end of the grace
    /// (or when a look fails) gives the command back (`released`), never written again in this
    /// delivery.
    pub(super) fn look_after_lost_answer<T>(
        &mut self,
        command: &ClaimedCommand,
        error: &str,
        mut look: impl FnMut(&mut Self) -> Result<Option<T>, Fail>,
    ) -> Result<T, Fail> {
        let release = |why: String| {
            Fail::Release(format!(
                "ответ Jira на запись потерян ({error}); {why}; запись могла выполниться, поэтому в этой выдаче она не повторяется"
            ))
        };
        let mut waited = Duration::ZERO;
        let mut step = LOOK_FIRST_STEP;
        let mut looks = 0u32;
        while waited < self.grace {
            let wait = step.min(self.grace - waited);
            if !(self.sleep)(wait) {
                return Err(Fail::Stopped);
            }
            waited += wait;
            looks += 1;
            match look(self) {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(Fail::Stopped) => return Err(Fail::Stopped),
                Err(Fail::Reason(why) | Fail::Release(why))
                | Err(Fail::GiveBack { reason: why, .. }) => {
                    tracing::warn!(command = command.id, %why, "a look for a lost write's marker failed");
                    return Err(release(format!("поиск отметки не удался: {why}")));
                }
            }
            tracing::info!(
                command = command.id,
                looks,
                waited_ms = waited.as_millis() as u64,
                "a lost write's marker is not seen yet"
            );
            step = (step * 2).min(LOOK_MAX_STEP);
        }
        Err(release(format!(
            "отметка команды не найдена за {} с ({looks} проверок)",
            waited.as_secs()
        )))
    }

    /// The issue an earlier delivery of this command created, if any: this account's issues of
    /// the project created since the batch was enqueued (on Jira's clock, less a margin), with
    /// this summary, whose marker names this command. An issue marked for another command is
    /// never taken. On Cloud, whose search lags behind writes, nothing found is believed only
    /// once the earlier write has had time to end (the request timeout) and to show in search
    /// (the search lag) since the earlier delivery was given back; when the hub does not say
    /// (the earlier agent was killed), the whole of that time is waited, looking again meanwhile.
    pub(super) fn already_created(
        &mut self,
        command: &ClaimedCommand,
        summary: &str,
    ) -> Result<Option<String>, Fail> {
        let since_ms = self.window_start_ms(command)?;
        let until_ms = self.window_end_ms(command)?;
        let lag = self.lag()?;
        let needed = if lag.is_zero() {
            Duration::ZERO
        } else {
            lag + self.write_limit
        };
        let waited_enough = command
            .released_seconds_ago
            .map(Duration::from_secs)
            .unwrap_or(Duration::ZERO);
        let mut remaining = needed.saturating_sub(waited_enough);
        loop {
            match self.find_marked(command, Some(summary), since_ms, until_ms)? {
                Found::Mine(key) => return Ok(Some(key)),
                Found::Unmarked(keys) => {
                    return Err(fail(format!(
                        "эта команда могла уже создать задачу, но у найденных задач той же учётной записи с тем же summary нет отметки хаба: {}; проверьте их вручную и повторите команду",
                        keys.join(", ")
                    )));
                }
                Found::Nothing => {}
            }
            if remaining.is_zero() {
                return Ok(None);
            }
            // Cloud's search catches up with writes within seconds to minutes: look again.
            let step = remaining.min(Duration::from_secs(5));
            tracing::info!(
                command = command.id,
                wait_ms = step.as_millis() as u64,
                "nothing found yet: waiting for Jira's search to catch up before creating"
            );
            if !(self.sleep)(step) {
                return Err(Fail::Stopped);
            }
            remaining -= step;
        }
    }

    /// Where the check's window starts, in epoch milliseconds on Jira's clock: when the batch
    /// was enqueued (its age on the hub's clock, taken from Jira's now), less
    /// [`WINDOW_MARGIN`]; a day back when the hub did not say.
    pub(super) fn window_start_ms(&mut self, command: &ClaimedCommand) -> Result<i64, Fail> {
        let jira_now = self.jira.jira_now_ms()?;
        let age = match (command.enqueued_at.as_deref(), self.claimed) {
            (Some(enqueued), Some((created_at, received))) => {
                match (
                    crate::domain::time::parse_utc(enqueued),
                    crate::domain::time::parse_utc(created_at),
                ) {
                    (Some(enqueued), Some(created_at)) => {
                        let on_hub = (created_at - enqueued).whole_milliseconds().max(0) as i64;
                        Some(on_hub + received.elapsed().as_millis() as i64)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let back = age.unwrap_or(24 * 3_600_000) + WINDOW_MARGIN.as_millis() as i64;
        Ok(jira_now - back)
    }

    /// Where the check's window ends, in epoch milliseconds on Jira's clock: when the command's
    /// earlier deliveries ended at the latest (the hub says how long ago), plus the time a write
    /// may still run after its answer was lost and [`WINDOW_MARGIN`] for the two clocks. `None`
    /// (now) when the hub does not say. An issue created after it is not this command's: a
    /// «повторить» two weeks on reads the days of the earlier deliveries, not two weeks of the
    /// account's issues.
    fn window_end_ms(&mut self, command: &ClaimedCommand) -> Result<Option<i64>, Fail> {
        let Some(ago) = command.earlier_ended_seconds_ago else {
            return Ok(None);
        };
        let jira_now = self.jira.jira_now_ms()?;
        let received = self.claimed.map(|(_, at)| at.elapsed()).unwrap_or_default();
        let back = Duration::from_secs(ago) + received;
        let ahead = self.write_limit + WINDOW_MARGIN;
        Ok(Some(
            jira_now - back.as_millis() as i64 + ahead.as_millis() as i64,
        ))
    }

    /// Candidates of an earlier create: marked for this command, unmarked, or nothing. Every
    /// issue this account created in the project within the window (`since_ms` to `until_ms`)
    /// is a candidate, whatever its summary now is (an Automation rule or a post-function may
    /// rewrite it on create), and its marker is read: from Cloud's search answer
    /// (`properties=jira-hub`), one GET each on Data Center, whose search never returns
    /// properties (JRASERVER-62898). The issues are read newest first and the look ends at this
    /// command's marker. An issue marked for another command is never taken. An unmarked one
    /// with `summary` (trimmed, as it is sent) is reported, so that a person decides; an
    /// unmarked one with another summary is not this command's (with no `summary`, only the
    /// marker counts).
    fn find_marked(
        &mut self,
        command: &ClaimedCommand,
        summary: Option<&str>,
        since_ms: i64,
        until_ms: Option<i64>,
    ) -> Result<Found, Fail> {
        let project = self.project_key()?;
        let mut query = jql::created_by_me(&project, since_ms);
        if let Some(until_ms) = until_ms {
            query.push_str(&format!(" AND created <= {until_ms}"));
        }
        let mut mine = None;
        let mut unmarked = Vec::new();
        let mut failed = None;
        let mut visit = |jira: &mut Jira, issue: Value| {
            let Some(key) = issue["key"].as_str() else {
                return Ok(false);
            };
            let value = match (PropertyReader { jira }).marker_of(&issue, key) {
                Ok(value) => value,
                Err(error) => {
                    failed = Some(error);
                    return Ok(true);
                }
            };
            match value.as_ref().and_then(|v| marker_is_of(v, command)) {
                Some(true) => {
                    mine = Some(key.to_string());
                    return Ok(true);
                }
                Some(false) => {}
                None => {
                    let now = issue["fields"]["summary"].as_str().map(str::trim);
                    if summary.is_some_and(|s| now == Some(s.trim())) {
                        unmarked.push(key.to_string());
                    }
                }
            }
            Ok(false)
        };
        if until_ms.is_some() || summary.is_none() {
            self.jira
                .search_newest(&query, "summary", Some(MARKER_KEY), &mut visit)?;
        } else {
            // No end from the hub (an older hub): the window may be large, so it is read paged
            // by key, past any result window.
            for issue in self
                .jira
                .search_values(&query, "summary", Some(MARKER_KEY))?
            {
                if visit(self.jira, issue)? {
                    break;
                }
            }
        }
        if let Some(error) = failed {
            return Err(error.into());
        }
        Ok(match mine {
            Some(key) => Found::Mine(key),
            None if unmarked.is_empty() => Found::Nothing,
            None => Found::Unmarked(unmarked),
        })
    }

    /// The issue this delivery's create made, looked for after its answer was lost: this
    /// account's issues of the project created since `since_ms` (the POST's time on Jira's
    /// clock, less [`POSTED_MARGIN_MS`]), newest first, until one's marker names this command
    ///. Markers come with Cloud's search; on Data Center each is read once
    /// per delivery (cached), the newest first, so the write looked for costs one read.
    pub(super) fn find_newest_marked(
        &mut self,
        command: &ClaimedCommand,
        since_ms: i64,
    ) -> Result<Option<String>, Fail> {
        Ok(match self.find_marked(command, None, since_ms, None)? {
            Found::Mine(key) => Some(key),
            Found::Unmarked(_) | Found::Nothing => None,
        })
    }
}

/// Reads entity properties through the delivery's cache (see [`Executor::property`]) where no
/// executor is at hand (inside a search's visit).
pub(super) struct PropertyReader<'a> {
    pub(super) jira: &'a mut Jira,
}

impl PropertyReader<'_> {
    /// The marker of a search's issue `key`: from the issue's `properties` when Cloud's search
    /// named them (absent there is absent), else read.
    pub(super) fn marker_of(
        &mut self,
        issue: &Value,
        key: &str,
    ) -> Result<Option<Value>, JiraError> {
        if let Some(properties) = issue.get("properties").and_then(Value::as_object) {
            return Ok(properties.get(MARKER_KEY).cloned());
        }
        let path = format!(
            "/rest/api/2/issue/{}/properties/{MARKER_KEY}",
            jql::encode(key)
        );
        self.read(&path)
    }

    pub(super) fn read(&mut self, path: &str) -> Result<Option<Value>, JiraError> {
        if let Some(known) = self.jira.cached_property(path) {
            return Ok(known);
        }
        let value = match self.jira.read_json::<Value>(path) {
            Ok(property) => Some(property.get("value").cloned().unwrap_or(Value::Null)),
            Err(JiraError::Refused { status: 404, .. }) => None,
            Err(error) => return Err(error),
        };
        // Another command's marker never changes; an unset one may be set by the write looked
        // for, so only a found value is kept.
        if value.is_some() {
            self.jira.cache_property(path, value.clone());
        }
        Ok(value)
    }
}

/// How far before the batch's enqueueing the check of a repeated create looks: the age of a
/// batch is measured on the hub's clock and carried to Jira's, and a claim answer may reach the
/// agent late (a relay folder synchronised every few minutes).
const WINDOW_MARGIN: Duration = Duration::from_secs(15 * 60);
/// How far before a lost create's POST (on Jira's clock) its look starts: the skew's error (half
/// a `serverInfo` round trip) and Jira's own clock steps, with room to spare.
pub(super) const POSTED_MARGIN_MS: i64 = 60_000;

/// The first wait before a lost write's marker is looked for; each next wait doubles, up to
/// [`LOOK_MAX_STEP`]. A write whose answer was cut after Jira made it shows at the first look on
/// Data Center, and as soon as Cloud's search catches up there.
const LOOK_FIRST_STEP: Duration = Duration::from_secs(1);
const LOOK_MAX_STEP: Duration = Duration::from_secs(30);

/// What the check before a repeated create found.
enum Found {
    Mine(String),
    Unmarked(Vec<String>),
    Nothing,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::commands::{AgentSettings, Outcome};

    use crate::protocol::ClaimedCommand;
    use serde_json::{Value, json};

    use crate::agent::testkit::*;
    use std::time::Duration;

    fn redelivered_create(released_seconds_ago: Option<u64>) -> ClaimedCommand {
        serde_json::from_value(
            json!({"id": 7, "batch_id": 2, "seq": 1, "type": "ensure_issue",
            "params": {"issue_type": "task", "summary": "Облачная"}, "delivery": 2,
            "enqueued_at": "2026-11-29T10:00:00Z", "released_seconds_ago": released_seconds_ago}),
        )
        .unwrap()
    }

    /// Cloud's search shows the issue an earlier delivery made only on the third look: the
    /// redelivered create waits (through the injected sleep: no wall time passes) and looks
    /// again instead of creating a second issue; it waits no longer than the lag plus the
    /// request timeout less what already passed since the command was given back.
    #[test]
    fn a_redelivered_create_on_cloud_waits_for_the_search_through_the_injected_sleep() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Cloud",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [1001, 0, 0]}),
                ),
                ("GET", "/rest/api/2/search/jql") if nth < 3 => {
                    (200, json!({"issues": [], "isLast": true}))
                }
                ("GET", "/rest/api/2/search/jql") => (
                    200,
                    json!({"isLast": true, "issues": [
                    {"id": "10001", "key": "AURORA-9", "fields": {"summary": "Облачная"}}]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-9/properties/jira-hub") => (
                    200,
                    json!({
                    "key": "jira-hub", "value": {"command": 7, "batch": 2,
                    "enqueued_at": "2026-11-29T10:00:00Z"}}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let settings = AgentSettings::from_value(&json!({"project_key": "AURORA",
            "issue_types": {"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик"}}}));
        let slept = std::cell::RefCell::new(Vec::<Duration>::new());
        let sleep = |d: Duration| {
            slept.borrow_mut().push(d);
            true
        };
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 100,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: Some(("2026-11-29T10:05:00Z", std::time::Instant::now())),
            sleep: &sleep,
        };
        let outcome = executor.execute(&redelivered_create(Some(100)), &mut |_| Ok(()));
        assert_eq!(
            outcome,
            Outcome::Done(json!({"key": "AURORA-9", "created": false}))
        );
        assert_eq!(
            *slept.borrow(),
            [Duration::from_secs(5), Duration::from_secs(5)],
            "two waits of the 20 s left of 60 + 60 after 100"
        );
        let seen = jira_server.seen.lock().unwrap().clone();
        assert!(
            !seen.contains(&"POST /rest/api/2/issue".to_string()),
            "{seen:?}"
        );

        // Given back long enough ago: one look, no wait, then the create.
        fn nothing(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Cloud",
                    "serverTime": "2026-11-29T13:05:00.000+0300"}),
                ),
                ("GET", "/rest/api/2/search/jql") => (200, json!({"issues": [], "isLast": true})),
                ("POST", "/rest/api/2/issue") => (201, json!({"id": "10002", "key": "AURORA-10"})),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(nothing);
        let mut jira = jira_at(&jira_server.url);
        let slept = std::cell::RefCell::new(Vec::<Duration>::new());
        let sleep = |d: Duration| {
            slept.borrow_mut().push(d);
            true
        };
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 100,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: None,
            sleep: &sleep,
        };
        let outcome = executor.execute(&redelivered_create(Some(180)), &mut |_| Ok(()));
        assert_eq!(
            outcome,
            Outcome::Done(json!({"key": "AURORA-10", "created": true}))
        );
        assert!(slept.borrow().is_empty());
    }

    /// A create whose answer was lost (a 502 after Jira made it) is found by its
    /// marker within seconds, not after the whole grace: Cloud's search shows it, with its
    /// property, at the third look (1 + 2 + 4 s on the injected sleep). No second create. The
    /// summary went out trimmed, and an Automation rule rewrote it: the marker decides.
    #[test]
    fn a_lost_create_is_found_by_its_marker_within_seconds_on_cloud() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Cloud",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [1001, 0, 0]}),
                ),
                ("POST", "/rest/api/2/issue") => (502, json!({"errorMessages": ["Bad Gateway"]})),
                ("GET", "/rest/api/2/search/jql") if nth < 3 => (
                    200,
                    json!({"isLast": true, "issues": [
                        {"id": "10000", "key": "AURORA-8", "fields": {"summary": "Другая"},
                         "properties": {"jira-hub": {"command": 6, "batch": 2}}}]}),
                ),
                ("GET", "/rest/api/2/search/jql") => (
                    200,
                    json!({"isLast": true, "issues": [
                        {"id": "10000", "key": "AURORA-8", "fields": {"summary": "Другая"},
                         "properties": {"jira-hub": {"command": 6, "batch": 2}}},
                        {"id": "10001", "key": "AURORA-9", "fields": {"summary": "[Авто] Облачная"},
                         "properties": {"jira-hub": mine()["value"].clone()}}]}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "  Облачная  "}),
        );
        let (outcome, slept) = run_recorded(&mut jira, &command);
        assert_eq!(
            outcome,
            Outcome::Done(json!({"key": "AURORA-9", "created": true}))
        );
        assert_eq!(
            slept,
            [1, 2, 4].map(Duration::from_secs),
            "three looks, 7 s in all"
        );
        let seen = jira_server.seen.lock().unwrap().clone();
        let posts = seen
            .iter()
            .filter(|l| *l == "POST /rest/api/2/issue")
            .count();
        assert_eq!(posts, 1, "{seen:?}");
        assert!(
            !seen.iter().any(|l| l.contains("/properties/")),
            "Cloud's search brought the markers: {seen:?}"
        );
    }

    /// Data Center's search has no properties: each candidate's marker is read, whatever its
    /// summary; a write still unseen at the end of the grace is given back, and the looks'
    /// waits add up to the grace exactly.
    #[test]
    fn on_data_center_every_candidate_is_read_and_an_unseen_write_is_released_after_the_grace() {
        fn answer(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("POST", "/rest/api/2/issue") => (502, json!({"errorMessages": ["Bad Gateway"]})),
                ("GET", "/rest/api/2/search") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 2, "issues": [
                        {"id": "10000", "key": "AURORA-8", "fields": {"summary": "Другая"}},
                        {"id": "10001", "key": "AURORA-9", "fields": {"summary": "[Авто] Серверная"}}]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-8/properties/jira-hub") => (
                    200,
                    json!({"key": "jira-hub", "value": {"command": 6, "batch": 2}}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "Серверная"}),
        );
        let (outcome, slept) = run_recorded(&mut jira, &command);
        assert!(matches!(outcome, Outcome::Released(_)), "{outcome:?}");
        assert_eq!(slept.iter().sum::<Duration>(), Duration::from_secs(180));
        assert_eq!(
            slept,
            [1, 2, 4, 8, 16, 30, 30, 30, 30, 29].map(Duration::from_secs)
        );
        let seen = jira_server.seen.lock().unwrap().clone();
        let count = |line: &str| seen.iter().filter(|l| *l == line).count();
        assert_eq!(
            count("POST /rest/api/2/issue"),
            1,
            "never repeated: {seen:?}"
        );
        // Each look read the unset marker of the rewritten summary's candidate (it may be set
        // yet); another command's marker, once read, is kept for the delivery.
        assert_eq!(
            count("GET /rest/api/2/issue/AURORA-9/properties/jira-hub"),
            slept.len()
        );
        assert_eq!(
            count("GET /rest/api/2/issue/AURORA-8/properties/jira-hub"),
            1
        );
    }
}
