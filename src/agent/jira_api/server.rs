//! What the agent asks about Jira itself: `serverInfo` (the deployment, Jira's clock) and
//! `myself` (who the agent is), and what it learns from them.

use super::comments::jira_time;
use super::{Deployment, Jira, JiraError, Me, parse};
use crate::agent::answer::Cause;
use crate::agent::config::DeploymentSetting;
use crate::agent::text::body_excerpt;
use crate::clock::Clock;
use serde_json::Value;
use std::time::Duration;

/// How long an anchor of Jira's clock is trusted before `serverInfo` is asked again when Jira's
/// now is needed. The monotonic clock is slewed by NTP like the wall clock (at most 500 ppm, so
/// under half a second in this time), while Jira's clock may be stepped by its own NTP.
const ANCHOR_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// How far the host's wall clock may part from its monotonic clock since the anchor before
/// `serverInfo` is asked again: a step of the wall clock, or a suspend (Linux's
/// `CLOCK_MONOTONIC`, which `Instant` reads, stops while the machine is suspended; the wall
/// clock does not).
const ANCHOR_MAX_PARTING_MS: i64 = 2_000;

/// Jira's clock at one instant of the host's monotonic clock: Jira's now is its time then plus
/// the monotonic time elapsed since, whatever the host's wall clock does meanwhile (NTP steps,
/// an operator's `date`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Anchor {
    /// The host's monotonic time at the middle of the `serverInfo` exchange.
    at: Duration,
    /// Jira's `serverTime` then, in epoch milliseconds.
    server_ms: i64,
    /// The host's wall clock then, in epoch milliseconds.
    wall_ms: i64,
}

impl Anchor {
    fn jira_now_ms(&self, monotonic: Duration) -> i64 {
        self.server_ms + monotonic.saturating_sub(self.at).as_millis() as i64
    }

    /// Too old, or the wall clock parted from the monotonic one since (a step or a suspend).
    fn stale(&self, host: &dyn Clock) -> bool {
        let age = host.monotonic().saturating_sub(self.at);
        let walked = wall_ms(host) - self.wall_ms;
        age > ANCHOR_MAX_AGE || (walked - age.as_millis() as i64).abs() > ANCHOR_MAX_PARTING_MS
    }
}

/// The host's wall clock, in epoch milliseconds.
fn wall_ms(host: &dyn Clock) -> i64 {
    (host.now().unix_timestamp_nanos() / 1_000_000) as i64
}

impl Jira {
    /// The deployment, asking `serverInfo` when it is not known yet.
    pub(crate) fn deployment(&mut self) -> Result<Deployment, JiraError> {
        if let Some(d) = self.deployment {
            return Ok(d);
        }
        self.server_info(true)?;
        Ok(self.deployment.unwrap_or(Deployment::Server))
    }

    /// `GET serverInfo`: whether Jira answers; learns the deployment type.
    /// A heartbeat's probe makes one try (`retry: false`): a Jira that is down is reported at once.
    pub(crate) fn server_info(&mut self, retry: bool) -> Result<(), JiraError> {
        let retries = if retry { self.max_retries } else { 0 };
        // The host's clocks, as [`Jira::jira_now_ms`] reads them (a test's manual clock of the
        // waits does not move with Jira's).
        let asked = self.host.monotonic();
        let asked_wall = wall_ms(self.host.as_ref());
        let reply = self.read_with("/rest/api/2/serverInfo", retries, retry)?;
        let info: Value = parse(&reply)?;
        if let Some([major, minor, ..]) = info
            .get("versionNumbers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            self.version = major.as_u64().zip(minor.as_u64());
        }
        if let Some(server) = info
            .get("serverTime")
            .and_then(Value::as_str)
            .and_then(jira_time)
        {
            // The answer was made between the question and its arrival: the middle of the two.
            let half = self.host.monotonic().saturating_sub(asked) / 2;
            self.anchor = Some(Anchor {
                at: asked + half,
                server_ms: (server.unix_timestamp_nanos() / 1_000_000) as i64,
                wall_ms: asked_wall + half.as_millis() as i64,
            });
        }
        if self.setting == DeploymentSetting::Auto {
            let cloud = info.get("deploymentType").and_then(Value::as_str) == Some("Cloud");
            let deployment = if cloud {
                Deployment::Cloud
            } else {
                Deployment::Server
            };
            if self.deployment != Some(deployment) {
                tracing::info!(?deployment, "Jira's deployment type");
            }
            self.deployment = Some(deployment);
        }
        Ok(())
    }

    /// Now on Jira's clock, in epoch milliseconds: the `serverTime` the last `serverInfo` showed
    /// plus the host's monotonic time since (see [`Anchor`]). `serverInfo` is asked now when it
    /// has not been, and again when the anchor is stale (older than [`ANCHOR_MAX_AGE`], or the
    /// wall clock parted from the monotonic one: a suspend stops `CLOCK_MONOTONIC`); a stale
    /// anchor stands when that fails.
    pub(crate) fn jira_now_ms(&mut self) -> Result<i64, JiraError> {
        match self.anchor {
            None => self.server_info(true)?,
            Some(anchor) if anchor.stale(self.host.as_ref()) => match self.server_info(true) {
                Err(JiraError::Stopped) => return Err(JiraError::Stopped),
                Err(error) => {
                    tracing::info!(%error, "Jira's clock could not be read again: the last reading stands");
                }
                Ok(()) => {}
            },
            Some(_) => {}
        }
        Ok(match self.anchor {
            Some(anchor) => anchor.jira_now_ms(self.host.monotonic()),
            None => wall_ms(self.host.as_ref()),
        })
    }

    /// The host's clocks Jira's is anchored on, for a test that steps the wall clock.
    #[cfg(test)]
    pub(crate) fn set_host_clock(&mut self, host: std::sync::Arc<dyn Clock>) {
        self.host = host;
    }

    /// Whether a create's `properties` may be ignored: a server before 7.2, or one that did not
    /// say its version (Cloud and Server 7.2 on document them on create).
    pub(crate) fn may_ignore_create_properties(&mut self) -> Result<bool, JiraError> {
        if self.deployment()? == Deployment::Cloud {
            return Ok(false);
        }
        Ok(self.version.is_none_or(|version| version < (7, 2)))
    }

    /// Whether this Jira was seen to keep a create's `properties` (`None`: not checked yet in
    /// this run).
    pub(crate) fn create_properties_kept(&self) -> Option<bool> {
        self.create_properties_kept
    }

    pub(crate) fn set_create_properties_kept(&mut self, kept: bool) {
        self.create_properties_kept = Some(kept);
    }

    /// Whether comments carry entity properties set in the add request, so that the agent's
    /// comments are recognised by their marker: Cloud, and a server that says it is 7.2 or later
    /// (`CommentJsonBean.properties`); a server that names an older version has none, and only
    /// there is a comment recognised by its body. A server that does not say is taken to have
    /// them: an unmarked comment is then never adopted.
    pub(crate) fn has_comment_properties(&mut self) -> Result<bool, JiraError> {
        if self.deployment()? == Deployment::Cloud {
            return Ok(true);
        }
        Ok(self.version.is_none_or(|version| version >= (7, 2)))
    }

    /// Jira's clock minus the agent's wall clock now, in milliseconds, when a `serverInfo`
    /// told Jira's.
    pub(crate) fn skew_ms(&self) -> Option<i64> {
        self.anchor
            .map(|anchor| anchor.jira_now_ms(self.host.monotonic()) - wall_ms(self.host.as_ref()))
    }

    /// The rate-limit headers Jira sent on any answer so far (name in lower case → last value).
    pub(crate) fn limit_headers(&self) -> &std::collections::BTreeMap<String, String> {
        &self.limit_headers
    }

    /// Asks who the agent is (`GET myself`) when it is not known yet: once a run, where the
    /// call costs no command anything (the heartbeat's probe). A failure is left to the command
    /// that needs the answer.
    /// Jira's login refusing the credentials on that call is not passed over: its reason is
    /// returned, so that the refused secret is held like any other refusal and not sent again by
    /// the next call (each failed login counts toward Data Center's CAPTCHA).
    pub(crate) fn learn_me(&mut self) -> Option<String> {
        if self.me.is_some() {
            return None;
        }
        match self.me() {
            Ok(_) => None,
            Err(JiraError::Held {
                cause: super::answer::Cause::Rejected,
                reason,
            }) => Some(reason),
            Err(error) => {
                tracing::debug!(%error, "who the agent is in Jira is asked again when a command needs it");
                None
            }
        }
    }

    /// The agent's own user (`GET myself`), asked once.
    pub(crate) fn me(&mut self) -> Result<Me, JiraError> {
        if let Some(me) = &self.me {
            return Ok(me.clone());
        }
        let user: Value = self.read_json("/rest/api/2/myself")?;
        let me = me_of(&user);
        self.me = Some(me.clone());
        Ok(me)
    }

    /// Whether an answer came from a node of a Data Center cluster (`X-ANODEID`).
    pub(crate) fn clustered(&self) -> bool {
        self.clustered
    }

    /// If the running command goes back to the hub, it is not handed out again before `least`
    /// (see [`Jira::take_release_for`]).
    pub(crate) fn release_for_at_least(&mut self, least: Duration) {
        self.release_for = self.release_for.max(least);
    }

    /// The least grace the command that ran asks for when it is given back; cleared.
    pub(crate) fn take_release_for(&mut self) -> Duration {
        std::mem::take(&mut self.release_for)
    }

    /// Whether this Jira was seen to keep a comment's `properties` (`None`: not checked yet in
    /// this run).
    pub(crate) fn comment_properties_kept(&self) -> Option<bool> {
        self.comment_properties_kept
    }

    pub(crate) fn set_comment_properties_kept(&mut self, kept: bool) {
        self.comment_properties_kept = Some(kept);
    }

    /// The probe of a held agent: `GET myself`, which needs the agent's login (`serverInfo`
    /// answers anonymously, so a revoked Cloud token passes it: ServiceNow KB2942093). One try;
    /// a rate limit is noted, not waited out.
    pub(crate) fn probe_myself(&mut self) -> Result<(), JiraError> {
        let reply = match self.read_with("/rest/api/2/myself", 0, false) {
            // `myself` needs nothing but a login: its 401 that Jira's login did not stamp
            // `X-Seraph-LoginReason: OK` refuses the credentials themselves, whoever answered it
            // (Jira, or a front proxy that authenticates by itself and sends no Seraph header):
            // sent again it only counts another failed login (docs/jira-field-notes.md, "Failed
            // logins count").
            Err(JiraError::Held {
                cause: Cause::Credentials,
                reason,
            }) if self.refusal.as_ref().is_some_and(|r| r.status == 401) && !self.seraph_ok => {
                self.login_refused = Some(reason.clone());
                return Err(JiraError::Held {
                    cause: Cause::Rejected,
                    reason,
                });
            }
            other => other?,
        };
        let user: Value = parse(&reply)?;
        if user.get("name").is_none() && user.get("accountId").is_none() {
            return Err(JiraError::Unavailable(format!(
                "ответ Jira на myself без name и accountId: {}",
                body_excerpt(&reply.body)
            )));
        }
        self.me = Some(me_of(&user));
        Ok(())
    }
}

/// The user of a `myself` answer.
fn me_of(user: &Value) -> Me {
    Me {
        name: user.get("name").and_then(Value::as_str).map(String::from),
        key: user.get("key").and_then(Value::as_str).map(String::from),
        account_id: user
            .get("accountId")
            .and_then(Value::as_str)
            .map(String::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_user_by_the_same_field() {
        use serde_json::json;
        let dc = Me {
            name: Some("svc.jira@corp.ru".into()),
            key: Some("JIRAUSER10100".into()),
            account_id: None,
        };
        let author = json!({"name": "SVC.Jira@corp.ru", "key": "JIRAUSER10100"});
        assert_eq!(dc.is(&author, false), Some(true));
        assert_eq!(
            dc.is(
                &json!({"name": "svc.jira@corp.ru", "key": "JIRAUSER2"}),
                false
            ),
            Some(false)
        );
        let by_name = Me {
            key: None,
            ..dc.clone()
        };
        assert_eq!(
            by_name.is(&json!({"name": "SVC.JIRA@CORP.RU"}), false),
            Some(true)
        );
        let cloud = Me {
            name: None,
            key: None,
            account_id: Some("5b10".into()),
        };
        assert_eq!(cloud.is(&json!({"accountId": "5b10"}), true), Some(true));
        assert_eq!(cloud.is(&json!({"name": "agent"}), true), None);
    }
}
