-- aocheck coordination-domain store, PostgreSQL, migration 4: limit counts kept per lane and class.
--
-- Before: a class change updated `occurrences.class`, which the lane index held, so no update was
-- HOT (every class change wrote a new tuple into all four indexes), and every limit check counted
-- the lane's index entries of that class, walking the dead ones left by earlier class changes
-- until a vacuum came. Under concurrency the server's CPU went there (issue 25).
--
-- Now: `lane_counts` holds, per lane, how many occurrences are in each open class (`pending`,
-- `in_flight`; `closed` is never limited and not counted), changed in the same transaction as
-- the class; the lane index no longer holds the class, so a class change is a HOT update; a
-- limit check reads one row.
CREATE TABLE lane_counts (
    ns    TEXT   NOT NULL,
    lane  TEXT   NOT NULL,
    class TEXT   NOT NULL,
    n     BIGINT NOT NULL,
    PRIMARY KEY (ns, lane, class)
);
INSERT INTO lane_counts (ns, lane, class, n)
    SELECT ns, lane, class, count(*) FROM occurrences WHERE class <> 'closed' GROUP BY ns, lane, class;
DROP INDEX occurrences_lane;
CREATE INDEX occurrences_lane ON occurrences (ns, lane);
ALTER TABLE occurrences SET (fillfactor = 80);

-- The helpers the transitions call on every write are plpgsql, not SQL-language functions: a SQL
-- function called from plpgsql is parsed and planned again on every call, a plpgsql statement's
-- plan is kept for the session.
CREATE OR REPLACE FUNCTION aoc_lane_lock(p_ns TEXT, p_lane TEXT)
RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_ns || '/' || p_lane, 7262041));
END $$;

-- Moves one occurrence of a lane from class `p_from` to `p_to` (either NULL: none) in the counts.
-- One statement; rows are locked in class order, so two movers never wait on each other in a cycle.
CREATE OR REPLACE FUNCTION aoc_count_move(p_ns TEXT, p_lane TEXT, p_from TEXT, p_to TEXT)
RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lane_counts AS c (ns, lane, class, n)
        SELECT p_ns, p_lane, v.class, v.d
          FROM (VALUES (p_from, -1::BIGINT), (p_to, 1::BIGINT)) AS v(class, d)
         WHERE v.class IS NOT NULL AND v.class <> 'closed'
         ORDER BY v.class
    ON CONFLICT (ns, lane, class) DO UPDATE SET n = c.n + excluded.n;
END $$;

-- How many occurrences of the lane are in `p_class`.
CREATE OR REPLACE FUNCTION aoc_count(p_ns TEXT, p_lane TEXT, p_class TEXT)
RETURNS BIGINT LANGUAGE plpgsql STABLE AS $$
DECLARE k BIGINT;
BEGIN
    SELECT n INTO k FROM lane_counts WHERE ns = p_ns AND lane = p_lane AND class = p_class;
    RETURN COALESCE(k, 0);
END $$;

CREATE OR REPLACE FUNCTION aoc_append(
    p_ns TEXT, p_occ TEXT, p_expected BIGINT, p_class TEXT,
    p_fenced BOOLEAN, p_lane TEXT, p_executor TEXT, p_generation BIGINT, p_now BIGINT,
    p_limit_class TEXT, p_limit BIGINT,
    p_seq BIGINT[], p_prev TEXT[], p_digest TEXT[], p_body TEXT[])
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE n BIGINT; occ_lane TEXT; occ_class TEXT;
BEGIN
    IF p_fenced AND NOT aoc_fence_ok(p_ns, p_lane, p_executor, p_generation, p_now) THEN
        RETURN 'fenced';
    END IF;
    SELECT lane, class INTO occ_lane, occ_class FROM occurrences WHERE ns = p_ns AND id = p_occ;
    IF NOT FOUND THEN RETURN 'not_found'; END IF;
    -- The history must be exactly p_expected long: its last entry exists …
    PERFORM 1 FROM entries WHERE ns = p_ns AND occurrence = p_occ AND seq = p_expected - 1;
    IF NOT FOUND THEN RETURN 'conflict:short'; END IF;
    IF p_limit IS NOT NULL THEN
        n := aoc_count(p_ns, occ_lane, p_limit_class);
        IF occ_class = p_limit_class THEN n := n - 1; END IF;
        IF n >= p_limit THEN RETURN 'limit:' || n; END IF;
    END IF;
    -- … and the next positions are free: a racing append at the same position inserts nothing.
    INSERT INTO entries (ns, occurrence, seq, prev, digest, body)
        SELECT p_ns, p_occ, t.s, t.p, t.d, t.b FROM unnest(p_seq, p_prev, p_digest, p_body) AS t(s, p, d, b)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN RETURN 'conflict:taken'; END IF;
    IF n <> cardinality(p_seq) THEN
        -- Partly taken: abort the whole statement (its transaction rolls back; nothing is written).
        RAISE EXCEPTION 'append to % at % partly conflicted', p_occ, p_expected
            USING ERRCODE = 'serialization_failure';
    END IF;
    IF p_class IS NOT NULL AND p_class <> occ_class THEN
        UPDATE occurrences SET class = p_class WHERE ns = p_ns AND id = p_occ;
        PERFORM aoc_count_move(p_ns, occ_lane, occ_class, p_class);
    END IF;
    RETURN 'ok';
END $$;

CREATE OR REPLACE FUNCTION aoc_create(
    p_ns TEXT, p_id TEXT, p_lane TEXT, p_cb TEXT, p_af TEXT,
    p_executor TEXT, p_generation BIGINT, p_now BIGINT,
    p_limit_class TEXT, p_limit BIGINT,
    p_digest TEXT, p_body TEXT)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE x TEXT; n BIGINT;
BEGIN
    SELECT id INTO x FROM occurrences WHERE ns = p_ns AND creation_binding = p_cb;
    IF FOUND THEN RETURN 'existing:' || x; END IF;
    IF NOT aoc_fence_ok(p_ns, p_lane, p_executor, p_generation, p_now) THEN
        RETURN 'fenced';
    END IF;
    IF p_af IS NOT NULL THEN
        SELECT id INTO x FROM occurrences WHERE ns = p_ns AND action_fence = p_af;
        IF FOUND THEN RETURN 'action_fenced:' || x; END IF;
    END IF;
    IF p_limit IS NOT NULL THEN
        n := aoc_count(p_ns, p_lane, p_limit_class);
        IF n >= p_limit THEN RETURN 'limit:' || n; END IF;
    END IF;
    INSERT INTO occurrences (ns, id, lane, class, creation_binding, action_fence)
         VALUES (p_ns, p_id, p_lane, 'pending', p_cb, p_af)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN RETURN 'conflict'; END IF;
    INSERT INTO entries (ns, occurrence, seq, prev, digest, body) VALUES (p_ns, p_id, 0, NULL, p_digest, p_body);
    PERFORM aoc_count_move(p_ns, p_lane, NULL, 'pending');
    RETURN 'created';
END $$;
