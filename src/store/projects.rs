//! The `project` table. Labels are unique case-insensitively with full Unicode folding, which
//! SQLite's `NOCASE` cannot do: the check runs in Rust inside the write transaction that inserts,
//! so two concurrent creations of `Проект` and `проект` cannot both succeed.

use super::{Result, Store, StoreError};
use crate::domain::project::{DUPLICATE_LABEL_MESSAGE, NewProject, Project, labels_collide};
use crate::domain::time::Utc;
use rusqlite::{Connection, Row, Transaction, params};

fn project_from_row(row: &Row<'_>) -> rusqlite::Result<Project> {
    Ok(Project {
        label: row.get(0)?,
        name: row.get(1)?,
        board_id: row.get(2)?,
        board_type: row.get(3)?,
        created_at: row.get(4)?,
    })
}

/// Projects in base-JQL order: by `created_at`, then `label`.
pub(super) fn list(conn: &Connection) -> Result<Vec<Project>> {
    let mut statement = conn.prepare(
        "SELECT label, name, board_id, board_type, created_at FROM project
         ORDER BY created_at, label",
    )?;
    let projects = statement
        .query_map([], project_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(projects)
}

/// Inserts a validated project unless a label equal to it case-insensitively exists
/// ([`StoreError::Conflict`] then).
pub(super) fn insert_in(
    tx: &Transaction<'_>,
    project: &NewProject,
    created_at: &Utc,
) -> Result<Project> {
    let mut statement = tx.prepare("SELECT label FROM project")?;
    let labels = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if labels.iter().any(|l| labels_collide(l, &project.label)) {
        return Err(StoreError::Conflict {
            field: "label".into(),
            message: DUPLICATE_LABEL_MESSAGE.into(),
        });
    }
    tx.execute(
        "INSERT INTO project (label, name, board_id, board_type, created_at)
         VALUES (?1, ?2, ?3, NULL, ?4)",
        params![project.label, project.name, project.board_id, created_at],
    )?;
    Ok(Project {
        label: project.label.clone(),
        name: project.name.clone(),
        board_id: project.board_id,
        board_type: None,
        created_at: created_at.clone(),
    })
}

impl Store {
    pub(crate) fn projects(&self) -> Result<Vec<Project>> {
        list(&self.conn)
    }

    /// Creates a project; never touches `settings_version` (data-model «Создание проекта не
    /// трогает версию настроек»).
    pub(crate) fn insert_project(
        &mut self,
        project: &NewProject,
        created_at: &Utc,
    ) -> Result<Project> {
        self.write(|tx| insert_in(tx, project, created_at))
    }
}
