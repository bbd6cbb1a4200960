-- Revision 16 of v4: the highest id ever issued to a batch, a command, an earlier attempt and a
-- refresh run (`name` is the table's), raised before rows are deleted (prune) and by restore past
-- what the replaced file had issued. A new row's id is past both this and the table's largest id,
-- so a number once given (in a marker in Jira, an export, a link) never names another row.
-- Written so that running it twice changes nothing.
CREATE TABLE id_issued (
    name TEXT PRIMARY KEY,
    last INTEGER NOT NULL
);
