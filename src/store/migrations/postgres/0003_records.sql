-- aocheck store, PostgreSQL, migration 3: versioned records (compare-and-set), for the operator
-- connector's profile-state namespace.
CREATE TABLE records (
    ns      TEXT   NOT NULL,
    key     TEXT   NOT NULL,
    version BIGINT NOT NULL,
    value   TEXT   NOT NULL,
    PRIMARY KEY (ns, key)
);
