//! Random sequences of enqueue, claim, report (duplicated, late, out of order, replayed),
//! timeout and cancel keep the queue's invariants:
//! - every command is in exactly one known status, and a terminal status never changes;
//! - `deliveries` never decreases;
//! - a batch's counters add up to its commands;
//! - a claim hands out only commands that were free (queued, or claimed with an expired lease),
//!   never one twice, and a dependent only after its dependency succeeded.

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use jira_hub::protocol::AgentAnswer;
use jira_hub::service::HubConnection;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const TIMEOUT_SECONDS: i64 = 60;

#[derive(Debug, Clone)]
enum Op {
    /// A batch of `deps.len()` commands; `Some(k)` makes command i depend on command k < i.
    Enqueue {
        deps: Vec<Option<usize>>,
    },
    Claim {
        max: u32,
    },
    /// A report for one of the deliveries handed out so far (maybe not the latest, maybe twice).
    Report {
        pick: usize,
        outcome: u8,
        rate_limited: u32,
    },
    /// The same report request sent again.
    Replay {
        pick: usize,
    },
    Advance {
        seconds: i64,
    },
    Cancel {
        pick: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        prop::collection::vec(prop::option::of(0usize..4), 1..5).prop_map(|raw| Op::Enqueue {
            deps: raw
                .iter()
                .enumerate()
                .map(|(i, d)| d.filter(|&k| k < i))
                .collect()
        }),
        (0u32..6).prop_map(|max| Op::Claim { max }),
        (0usize..64, 0u8..3, 0u32..2).prop_map(|(pick, outcome, rate_limited)| Op::Report {
            pick,
            outcome,
            rate_limited
        }),
        (0usize..64).prop_map(|pick| Op::Replay { pick }),
        (0i64..90).prop_map(|seconds| Op::Advance { seconds }),
        (0usize..16).prop_map(|pick| Op::Cancel { pick }),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    status: CommandStatus,
    deliveries: u32,
    claimed_at: Option<String>,
    depends_on: Option<i64>,
}

fn snapshot(hub: &mut HubConnection) -> BTreeMap<i64, Seen> {
    let mut all = BTreeMap::new();
    for batch in hub.batches(None).unwrap() {
        let total: usize = batch.counters.values().sum();
        assert_eq!(
            total,
            batch.commands.len(),
            "counters add up for batch {}",
            batch.id
        );
        for command in batch.commands {
            all.insert(
                command.id,
                Seen {
                    status: command.status,
                    deliveries: command.deliveries,
                    claimed_at: command.claimed_at.map(|at| at.to_string()),
                    depends_on: command.depends_on,
                },
            );
        }
    }
    all
}

fn run(ops: Vec<Op>) {
    let dir = TestDir::in_memory_fs();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": TIMEOUT_SECONDS, "max_deliveries": 3}}),
    );
    let agent = Agent::new("agent-p");
    let mut deliveries: Vec<(i64, u32)> = Vec::new();
    let mut sent_reports = Vec::new();
    let mut batches = Vec::new();
    let mut before = snapshot(&mut hub);
    for op in ops {
        match op {
            Op::Enqueue { deps } => {
                let commands: Vec<Value> = deps
                    .iter()
                    .enumerate()
                    .map(|(i, dep)| {
                        let mut command = json!({"type": "comment", "params": {"key": format!("AURORA-{i}"), "body": "x"}});
                        if let Some(k) = dep {
                            command["depends_on"] = json!(k + 1);
                        }
                        command
                    })
                    .collect();
                let view = hub
                    .enqueue_batch(&batch(
                        json!({"title": "p", "author": "p", "commands": commands}),
                    ))
                    .unwrap();
                batches.push(view.id);
            }
            Op::Claim { max } => {
                let now = clock_now(&clock);
                let answer = agent.claim(&mut hub, max);
                let mut ids: Vec<i64> = answer.commands.iter().map(|c| c.id).collect();
                for command in &answer.commands {
                    let prior = &before[&command.id];
                    let lease_over = prior
                        .claimed_at
                        .as_deref()
                        .and_then(jira_hub::domain::time::parse_utc)
                        .is_none_or(|at| at + time::Duration::seconds(TIMEOUT_SECONDS) <= now);
                    assert!(
                        prior.status == CommandStatus::Queued
                            || (prior.status == CommandStatus::Claimed && lease_over),
                        "command {} handed out while {:?}",
                        command.id,
                        prior
                    );
                    assert_eq!(command.delivery, prior.deliveries + 1);
                    deliveries.push((command.id, command.delivery));
                }
                let total = ids.len();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), total, "one claim handed a command out twice");
                let after = snapshot(&mut hub);
                for id in &ids {
                    if let Some(dependency) = after[id].depends_on {
                        assert!(
                            after[&dependency].status.satisfies_dependency(),
                            "dependent {id} handed out early"
                        );
                    }
                }
            }
            Op::Report {
                pick,
                outcome,
                rate_limited,
            } => {
                if deliveries.is_empty() {
                    continue;
                }
                let (id, delivery) = deliveries[pick % deliveries.len()];
                let status = ["done", "failed", "skipped"][outcome as usize];
                let request = agent.report_request(
                    json!([{"command_id": id, "delivery": delivery, "status": status,
                    "error": "e", "jira_calls": 1, "rate_limited": rate_limited}]),
                );
                hub.handle_agent_request(&request).unwrap();
                sent_reports.push(request);
            }
            Op::Replay { pick } => {
                if sent_reports.is_empty() {
                    continue;
                }
                let request = &sent_reports[pick % sent_reports.len()];
                let state = snapshot(&mut hub);
                let AgentAnswer::Report(_) = hub.handle_agent_request(request).unwrap() else {
                    panic!()
                };
                assert_eq!(
                    snapshot(&mut hub),
                    state,
                    "a replayed request changed something"
                );
            }
            Op::Advance { seconds } => {
                clock.advance(time::Duration::seconds(seconds));
                hub.expire_claims().unwrap();
            }
            Op::Cancel { pick } => {
                if batches.is_empty() {
                    continue;
                }
                let _ = hub.cancel_batch(batches[pick % batches.len()]);
            }
        }
        let after = snapshot(&mut hub);
        for (id, prior) in &before {
            let now = &after[id];
            assert!(
                now.deliveries >= prior.deliveries,
                "deliveries of {id} went down"
            );
            if prior.status.is_terminal() {
                assert_eq!(now.status, prior.status, "terminal status of {id} changed");
            }
        }
        before = after;
    }
}

fn clock_now(clock: &std::sync::Arc<jira_hub::clock::ManualClock>) -> time::OffsetDateTime {
    use jira_hub::clock::Clock;
    clock.now()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn the_queue_keeps_its_invariants(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
