-- aocheck coordination-domain store, SQLite, migration 1. Tables are WITHOUT ROWID: clustered on
-- their primary keys, so a write touches one b-tree per table instead of a table and its key index.
CREATE TABLE leases (
    ns          TEXT    NOT NULL,
    lane        TEXT    NOT NULL,
    executor    TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    released    INTEGER NOT NULL,
    PRIMARY KEY (ns, lane)
) WITHOUT ROWID;
CREATE TABLE lease_log (
    ns          TEXT    NOT NULL,
    lane        TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    executor    TEXT    NOT NULL,
    acquired_at INTEGER NOT NULL,
    mode        TEXT    NOT NULL,
    PRIMARY KEY (ns, lane, generation)
) WITHOUT ROWID;
CREATE TABLE occurrences (
    ns               TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    lane             TEXT    NOT NULL,
    class            TEXT    NOT NULL,
    creation_binding TEXT    NOT NULL,
    action_fence     TEXT,
    PRIMARY KEY (ns, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX occurrences_creation ON occurrences (ns, creation_binding);
CREATE UNIQUE INDEX occurrences_fence ON occurrences (ns, action_fence) WHERE action_fence IS NOT NULL;
CREATE INDEX occurrences_lane ON occurrences (ns, lane, class);
CREATE TABLE entries (
    ns         TEXT    NOT NULL,
    occurrence TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    prev       TEXT,
    digest     TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    PRIMARY KEY (ns, occurrence, seq)
) WITHOUT ROWID;
CREATE TABLE admissions (
    ns             TEXT    NOT NULL,
    id             TEXT    NOT NULL,
    lane           TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    submission_key TEXT    NOT NULL,
    payload_digest TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    occurrence     TEXT,
    version        INTEGER NOT NULL,
    admitted_at    INTEGER NOT NULL,
    PRIMARY KEY (ns, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX admissions_key ON admissions (ns, submission_key);
CREATE INDEX admissions_lane ON admissions (ns, lane, seq);
