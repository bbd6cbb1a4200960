//! Issue 29 item 5: what the operator reads in the console and the CLI is true and in one
//! language (charts keep an hour's peak, times in one form, keys as links, Jira's refusals name
//! their key, link names with their direction, Russian sentences as Russian is written).

use crate::support::*;
use serde_json::json;
use time::Duration;

fn comments(n: usize) -> jira_hub::service::BatchRequest {
    let commands: Vec<_> = (1..=n)
        .map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{i}"), "body": "x"}}))
        .collect();
    batch(json!({"title": "t", "author": "a", "commands": commands}))
}

/// The queue-depth chart plots each hour's peak: a batch of three enqueued and done within an
/// hour shows 3 in that hour once the queue drained (before, the hour's end: 0), and a batch
/// still open shows in the hours since.
#[test]
fn the_queue_chart_keeps_an_hours_peak() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let agent = Agent::new("agent-1");
    clock.advance(Duration::minutes(5));
    hub.enqueue_batch(&comments(3)).unwrap();
    clock.advance(Duration::minutes(5));
    let ids: Vec<i64> = agent
        .claim(&mut hub, 3)
        .commands
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids.len(), 3);
    clock.advance(Duration::minutes(10));
    let results: Vec<_> = ids
        .iter()
        .map(|id| json!({"command_id": id, "delivery": 1, "status": "done", "result": {}}))
        .collect();
    agent.report(&mut hub, json!(results));
    clock.advance(Duration::hours(2));
    hub.enqueue_batch(&comments(2)).unwrap();
    clock.advance(Duration::minutes(10));
    let overview = hub.overview().unwrap();
    let depth: Vec<(u8, i64)> = overview.hours[overview.hours.len() - 3..]
        .iter()
        .map(|h| (h.start.hour(), h.queue_depth))
        .collect();
    assert_eq!(depth, [(10, 3), (11, 0), (12, 2)]);
}
