//! Giving a command back to the hub unfinished: Jira held or a wait that would outlast the lease,
//! with a `not_before` bounded by the lease and the longest wait Jira may ask for.

use super::Agent;
use super::commands::Outcome;
use crate::protocol::{ClaimedCommand, CommandResult, RefusedPath, ResultStatus};
use std::time::Duration;

/// What the agent remembers of one command's give-backs under a hub that does not bound them.
#[derive(Debug, Clone)]
pub(super) struct GivenBack {
    /// How many times it went back.
    pub(super) count: u32,
    /// When it first went back (monotonic, [`Waits::now`](super::wait::Waits::now)).
    pub(super) first: Duration,
    /// The path refused when the last one was for that ([`RefusedPath`]).
    pub(super) refused: Option<RefusedPath>,
}

impl Agent {
    /// Gives commands that were never started back to the hub at once: Jira is
    /// held, or their lease would lapse before they could finish. Each is reported `released`
    /// with the reason, a short `not_before` and `sent: false`, so the hub queues it again
    /// without counting the delivery. A report that does not reach the hub leaves the leases to
    /// lapse, as before (a later delivery checks Jira before it writes).
    pub(super) fn give_back(
        &mut self,
        commands: &[ClaimedCommand],
        reason: &str,
        not_before: Duration,
    ) {
        if commands.is_empty() {
            return;
        }
        let results = commands
            .iter()
            .map(|command| {
                tracing::info!(
                    command = command.id,
                    delivery = command.delivery,
                    %reason,
                    "the command goes back to the hub unstarted"
                );
                given_back(command, reason, not_before, false)
            })
            .collect();
        if let Err(error) = self.hub.report(results) {
            tracing::warn!(%error, "the commands given back were not acknowledged: their leases lapse");
            self.last_error = Some(error.to_string());
        }
    }

    /// Under a hub that does not bound give-backs (no `bounded_give_backs`: the previous
    /// release, which sends no `previous_release`), the agent bounds them itself: a command given
    /// back [`transport::OWN_GIVE_BACK_BOUND`](super::transport::OWN_GIVE_BACK_BOUND)'s count
    /// of times, or that long after its first give-back, fails with the last reason instead of going back for ever. A give-back while
    /// Jira is held is not counted: the agent claims nothing then, and shows itself held.
    pub(super) fn bound_give_back(
        &mut self,
        command: &ClaimedCommand,
        outcome: Outcome,
    ) -> Outcome {
        let Some(bound) = self.hub.own_give_back_bound() else {
            self.given_back.clear();
            return outcome;
        };
        let Outcome::GiveBack { reason, held: None } = outcome else {
            if !matches!(outcome, Outcome::GiveBack { .. }) {
                self.given_back.remove(&command.id);
            }
            return outcome;
        };
        let now = self.waits.now();
        let window = Duration::from_secs(bound.seconds);
        // Commands given back long ago went to another agent or ended: forgotten.
        self.given_back
            .retain(|_, given| now.saturating_sub(given.first) <= window * 2);
        let given = self.given_back.entry(command.id).or_insert(GivenBack {
            count: 0,
            first: now,
            refused: None,
        });
        given.count += 1;
        given.refused = self.refused.clone();
        let elapsed = now.saturating_sub(given.first);
        if given.count <= bound.count && elapsed <= window {
            tracing::info!(
                command = command.id,
                give_backs = given.count,
                max_give_backs = bound.count,
                "the hub does not bound give-backs: the agent counts them itself"
            );
            return Outcome::GiveBack { reason, held: None };
        }
        let count = given.count;
        self.given_back.remove(&command.id);
        self.refused = None;
        tracing::warn!(command = command.id, give_backs = count, elapsed_seconds = elapsed.as_secs(), %reason, "given back past the agent's own bound (the hub sets none): the command fails");
        Outcome::Failed(format!(
            "{reason}; команда возвращалась хабу {count} раз за {} с — это предел агента ({} раз, {} с): хаб старой версии возвраты не ограничивает",
            elapsed.as_secs(),
            bound.count,
            bound.seconds
        ))
    }
}

/// The longest `not_before` of a command given back for a wait Jira asked for (its
/// `Retry-After` is capped the same way).
pub(super) const MAX_GIVE_BACK_WAIT: Duration = Duration::from_secs(900);

/// A `released` report of a command given back unfinished: `sent` says whether a write of it
/// may have been applied (the hub counts the delivery only then).
pub(super) fn given_back(
    command: &ClaimedCommand,
    reason: &str,
    not_before: Duration,
    sent: bool,
) -> CommandResult {
    CommandResult {
        command_id: command.id,
        delivery: command.delivery,
        status: ResultStatus::Released,
        result: None,
        error: Some(reason.to_string()),
        jira_calls: 0,
        rate_limited: 0,
        finished_at: None,
        page: None,
        not_before_seconds: Some(
            not_before
                .as_secs()
                .clamp(1, u64::from(crate::protocol::MAX_NOT_BEFORE_SECONDS)) as u32,
        ),
        sent: Some(sent),
        refused: None,
    }
}

/// What is kept back from a lease: a command is not started, nor a wait begun, that would end
/// closer than this to the lease's end (a tenth, at least 2 s, at most half of it).
pub(super) fn safety_margin(lease: Duration) -> Duration {
    Duration::from_millis(crate::domain::settings::lease_margin_ms(
        lease.as_millis() as u64
    ))
}
