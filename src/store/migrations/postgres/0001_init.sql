-- aocheck coordination-domain store, PostgreSQL, migration 1.
CREATE TABLE leases (
    ns          TEXT    NOT NULL,
    lane        TEXT    NOT NULL,
    executor    TEXT    NOT NULL,
    generation  BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    released    BOOLEAN NOT NULL,
    PRIMARY KEY (ns, lane)
);
CREATE TABLE lease_log (
    ns          TEXT    NOT NULL,
    lane        TEXT    NOT NULL,
    generation  BIGINT NOT NULL,
    executor    TEXT    NOT NULL,
    acquired_at BIGINT NOT NULL,
    mode        TEXT    NOT NULL,
    PRIMARY KEY (ns, lane, generation)
);
CREATE TABLE occurrences (
    ns               TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    lane             TEXT    NOT NULL,
    class            TEXT    NOT NULL,
    creation_binding TEXT    NOT NULL,
    action_fence     TEXT,
    PRIMARY KEY (ns, id)
);
CREATE UNIQUE INDEX occurrences_creation ON occurrences (ns, creation_binding);
CREATE UNIQUE INDEX occurrences_fence ON occurrences (ns, action_fence) WHERE action_fence IS NOT NULL;
CREATE INDEX occurrences_lane ON occurrences (ns, lane, class);
CREATE TABLE entries (
    ns         TEXT    NOT NULL,
    occurrence TEXT    NOT NULL,
    seq        BIGINT NOT NULL,
    prev       TEXT,
    digest     TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    PRIMARY KEY (ns, occurrence, seq)
);
CREATE TABLE admissions (
    ns             TEXT    NOT NULL,
    id             TEXT    NOT NULL,
    lane           TEXT    NOT NULL,
    seq            BIGINT NOT NULL,
    submission_key TEXT    NOT NULL,
    payload_digest TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    occurrence     TEXT,
    version        BIGINT NOT NULL,
    admitted_at    BIGINT NOT NULL,
    PRIMARY KEY (ns, id)
);
CREATE UNIQUE INDEX admissions_key ON admissions (ns, submission_key);
CREATE INDEX admissions_lane ON admissions (ns, lane, seq);
