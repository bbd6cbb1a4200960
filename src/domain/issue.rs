//! An issue's mirrored fields: what the hub keeps of a Jira issue in its own columns. One type
//! for both sides: `jira` maps a raw issue to it, `store` keeps it beside its own columns, and
//! the service's views show it flattened.

use super::time::Utc;
use serde::Serialize;

/// The fields of an issue the mirror keeps in columns (system.md §4).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MirrorFields {
    pub key: String,
    pub jira_id: Option<String>,
    pub issue_type: String,
    pub summary: String,
    pub description: Option<String>,
    pub status: String,
    pub priority: Option<String>,
    pub assignee: Option<String>,
    pub reporter: Option<String>,
    pub labels: Vec<String>,
    pub epic_key: Option<String>,
    pub sprint: Option<String>,
    pub duedate: Option<String>,
    pub plan_start: Option<String>,
    pub plan_end: Option<String>,
    /// Jira's `created`, in UTC.
    #[schema(value_type = Option<String>)]
    pub created_at: Option<Utc>,
    /// Jira's `updated`, in UTC.
    #[schema(value_type = Option<String>)]
    pub updated_at: Option<Utc>,
}
