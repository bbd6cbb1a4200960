//! `/metrics`' failed commands by cause: an edit stopped by a conflict with a change
//! made in Jira waits for an operator's decision, unlike Jira's refusals and faults, so it is
//! counted apart: `jira_hub_commands_failed{cause="conflict"}` and `{cause="other"}` (together
//! `jira_hub_commands{status="failed"}`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: &'static str,
}

/// Failed commands on a conflict, and the other failed ones, from the snapshot of `/metrics`.
#[derive(Debug)]
pub(crate) struct FailedCollector(pub(crate) (i64, i64));

impl Collector for FailedCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (conflicts, other) = self.0;
        let family = Family::<CauseLabel, Gauge>::default();
        family
            .get_or_create(&CauseLabel { cause: "conflict" })
            .set(conflicts);
        family
            .get_or_create(&CauseLabel { cause: "other" })
            .set(other);
        let metric = encoder.encode_descriptor(
            "jira_hub_commands_failed",
            "Failed commands by cause: conflict (an edit stopped by a change made in Jira, waiting for an operator) or other",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}
