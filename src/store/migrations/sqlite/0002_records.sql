-- aocheck store, SQLite, migration 2: versioned records (compare-and-set), for the operator
-- connector's profile-state namespace.
CREATE TABLE records (
    ns      TEXT    NOT NULL,
    key     TEXT    NOT NULL,
    version INTEGER NOT NULL,
    value   TEXT    NOT NULL,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID;
