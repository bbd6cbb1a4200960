//! `agent_status` (who was seen, when, in what state) and `agent_request` (requests already
//! applied, with their answers, for exactly-once handling).

use super::Result;
use super::tx::Tx;
use rusqlite::{OptionalExtension, params};
use time::OffsetDateTime;

/// What one message tells about its agent.
#[derive(Debug, Default)]
pub(crate) struct AgentSeen<'a> {
    pub agent: &'a str,
    pub at: &'a str,
    pub version: Option<&'a str>,
    pub claimed: bool,
    pub reported: bool,
    /// From a heartbeat: whether Jira answered, and the agent's last error.
    pub jira: Option<(bool, Option<&'a str>)>,
    /// From a heartbeat that carries a preflight (`--check`): its JSON text.
    pub check: Option<&'a str>,
    /// From a heartbeat that announces how often the agent sends one, in seconds.
    pub heartbeat_seconds: Option<u32>,
    /// With `version` (a claim or a heartbeat): what the agent said of itself, as JSON text
    /// (`None`: nothing, the previous release). Written whenever `version` is.
    pub peer: Option<&'a str>,
}

impl Tx<'_> {
    pub(crate) fn touch_agent(&self, seen: &AgentSeen<'_>) -> Result<()> {
        let (jira_ok, last_error, has_jira) = match seen.jira {
            Some((ok, error)) => (Some(ok), error, true),
            None => (None, None, false),
        };
        self.0
            .prepare_cached(
                "INSERT INTO agent_status (agent, version, last_seen_at, last_claim_at, last_report_at, jira_ok, last_error, last_check, jira_down_since, heartbeat_seconds, peer)
                 VALUES (?1, ?2, ?3, CASE WHEN ?4 THEN ?3 END, CASE WHEN ?5 THEN ?3 END, ?6, ?7, ?9, CASE WHEN ?8 AND NOT ?6 THEN ?3 END, ?10, ?11)
                 ON CONFLICT (agent) DO UPDATE SET
                    version = coalesce(excluded.version, version),
                    peer = CASE WHEN ?2 IS NOT NULL THEN excluded.peer ELSE peer END,
                    last_seen_at = max(last_seen_at, excluded.last_seen_at),
                    last_claim_at = CASE WHEN ?4 THEN excluded.last_seen_at ELSE last_claim_at END,
                    last_report_at = CASE WHEN ?5 THEN excluded.last_seen_at ELSE last_report_at END,
                    jira_ok = CASE WHEN ?8 THEN excluded.jira_ok ELSE jira_ok END,
                    last_error = CASE WHEN ?8 THEN excluded.last_error ELSE last_error END,
                    jira_down_since = CASE WHEN NOT ?8 THEN jira_down_since
                        WHEN excluded.jira_ok THEN NULL
                        WHEN jira_ok = 0 AND last_error IS excluded.last_error
                            THEN coalesce(jira_down_since, excluded.last_seen_at)
                        ELSE excluded.last_seen_at END,
                    last_check = coalesce(excluded.last_check, last_check),
                    heartbeat_seconds = coalesce(excluded.heartbeat_seconds, heartbeat_seconds)",
            )?
            .execute(params![
                seen.agent,
                seen.version,
                seen.at,
                seen.claimed,
                seen.reported,
                jira_ok,
                last_error,
                has_jira,
                seen.check,
                seen.heartbeat_seconds,
                seen.peer
            ])?;
        Ok(())
    }

    /// The answer given to request (`kind`, `id`) when it was applied.
    pub(crate) fn handled_request(&self, kind: &str, id: &str) -> Result<Option<String>> {
        Ok(self
            .0
            .prepare_cached("SELECT answer FROM agent_request WHERE kind = ?1 AND id = ?2")?
            .query_row([kind, id], |row| row.get(0))
            .optional()?)
    }

    pub(crate) fn request_received_at(&self, kind: &str, id: &str) -> Result<Option<String>> {
        Ok(self
            .0
            .prepare_cached("SELECT received_at FROM agent_request WHERE kind = ?1 AND id = ?2")?
            .query_row([kind, id], |row| row.get(0))
            .optional()?)
    }

    pub(crate) fn record_request(
        &self,
        kind: &str,
        id: &str,
        agent: &str,
        at: &str,
        answer: &str,
    ) -> Result<()> {
        self.0
            .prepare_cached(
                "INSERT INTO agent_request (kind, id, agent, received_at, answer) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![kind, id, agent, at, answer])?;
        Ok(())
    }

    /// Forgets one agent (an operator's word); returns whether it was there.
    pub(crate) fn forget_agent(&self, agent: &str) -> Result<bool> {
        Ok(self
            .0
            .prepare_cached("DELETE FROM agent_status WHERE agent = ?1")?
            .execute([agent])?
            > 0)
    }

    /// Forgets the agents not seen since `before` (the hub's time); returns how many.
    pub(crate) fn prune_agents(&self, before: &str) -> Result<usize> {
        Ok(self
            .0
            .prepare_cached("DELETE FROM agent_status WHERE last_seen_at < ?1")?
            .execute([before])?)
    }

    /// Forgets the oldest handled requests received before `before`, at most `limit` of them:
    /// rows go in the order they were recorded (rowid), and the walk stops at the first one that
    /// is not that old, so a call reads at most `limit` rows whatever the table holds (no index
    /// on `received_at` is needed). Returns how many were forgotten.
    pub(crate) fn prune_requests(&self, before: OffsetDateTime, limit: i64) -> Result<usize> {
        let mut last = None;
        {
            let mut statement = self.0.prepare_cached(
                "SELECT rowid, received_at FROM agent_request ORDER BY rowid LIMIT ?1",
            )?;
            let mut rows = statement.query([limit])?;
            while let Some(row) = rows.next()? {
                let received: String = row.get(1)?;
                // A time that cannot be read is as good as old: it can never be compared.
                if crate::domain::time::parse_utc(&received).is_some_and(|at| at >= before) {
                    break;
                }
                last = Some(row.get::<_, i64>(0)?);
            }
        }
        let Some(last) = last else {
            return Ok(0);
        };
        Ok(self
            .0
            .prepare_cached("DELETE FROM agent_request WHERE rowid <= ?1")?
            .execute([last])?)
    }

    /// The agents most recently seen first, at most `limit`.
    pub(crate) fn agents(&self, limit: i64) -> Result<Vec<super::AgentRow>> {
        let mut statement = self.0.prepare(&format!(
            "SELECT {} FROM agent_status ORDER BY last_seen_at DESC, agent LIMIT ?1",
            super::status::AGENT_COLUMNS
        ))?;
        let rows = statement.query_map([limit], super::status::agent_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
