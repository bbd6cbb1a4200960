//! The schema this binary runs, and how the operator reads a schema's name: what the migrations,
//! the backups named after a migration and the status all say, kept apart so none of them
//! imports another for it.

pub(crate) const CURRENT_SCHEMA_VERSION: u32 = 4;

/// Additive revisions of the v4 shape, counted in SQLite's `PRAGMA user_version`. The data model
/// fixes the schema version at 4, so changes it does not describe (new columns with defaults, an
/// index) are revisions of v4 rather than a v5: `schema_version` stays what the data model says,
/// and every other tool that reads a v4 database still finds the tables it knows.
pub(crate) const CURRENT_V4_REVISION: u32 = 19;

/// How the operator reads a schema: `v3` below v4, `v4r12` for revision 12 of v4.
pub(crate) fn schema_label(version: u32, revision: u32) -> String {
    if version < CURRENT_SCHEMA_VERSION {
        format!("v{version}")
    } else {
        format!("v{version}r{revision}")
    }
}

/// The schema this binary runs (`v4r19`).
pub(crate) fn current_schema() -> String {
    schema_label(CURRENT_SCHEMA_VERSION, CURRENT_V4_REVISION)
}
