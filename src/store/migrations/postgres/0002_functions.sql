-- aocheck coordination-domain store, PostgreSQL, migration 2: one-round-trip transitions.
--
-- Serialization: every write that is fenced by a lane's lease, and every change of that lease,
-- first takes the lane's transaction-scoped advisory lock (aoc_lane_lock). Inside plpgsql under
-- READ COMMITTED each statement takes a fresh snapshot, so the lease row and the limit counts read
-- after the lock see every commit that preceded it. Appends to one occurrence serialize on its row
-- entries' primary key: the loser of a race inserts nothing and reports a conflict.

CREATE OR REPLACE FUNCTION aoc_lane_lock(p_ns TEXT, p_lane TEXT)
RETURNS VOID LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(p_ns || '/' || p_lane, 7262041));
$$;

CREATE OR REPLACE FUNCTION aoc_fence_ok(p_ns TEXT, p_lane TEXT, p_executor TEXT, p_generation BIGINT, p_now BIGINT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE l RECORD;
BEGIN
    PERFORM aoc_lane_lock(p_ns, p_lane);
    SELECT executor, generation, expires_at, released INTO l
      FROM leases WHERE ns = p_ns AND lane = p_lane;
    IF NOT FOUND THEN RETURN FALSE; END IF;
    RETURN l.executor = p_executor AND l.generation = p_generation AND NOT l.released AND p_now < l.expires_at;
END $$;

CREATE OR REPLACE FUNCTION aoc_append(
    p_ns TEXT, p_occ TEXT, p_expected BIGINT, p_class TEXT,
    p_fenced BOOLEAN, p_lane TEXT, p_executor TEXT, p_generation BIGINT, p_now BIGINT,
    p_limit_class TEXT, p_limit BIGINT,
    p_seq BIGINT[], p_prev TEXT[], p_digest TEXT[], p_body TEXT[])
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE n BIGINT; occ_lane TEXT;
BEGIN
    IF p_fenced AND NOT aoc_fence_ok(p_ns, p_lane, p_executor, p_generation, p_now) THEN
        RETURN 'fenced';
    END IF;
    SELECT lane INTO occ_lane FROM occurrences WHERE ns = p_ns AND id = p_occ;
    IF NOT FOUND THEN RETURN 'not_found'; END IF;
    -- The history must be exactly p_expected long: its last entry exists …
    PERFORM 1 FROM entries WHERE ns = p_ns AND occurrence = p_occ AND seq = p_expected - 1;
    IF NOT FOUND THEN RETURN 'conflict:short'; END IF;
    IF p_limit IS NOT NULL THEN
        SELECT count(*) INTO n FROM occurrences
         WHERE ns = p_ns AND lane = occ_lane AND class = p_limit_class AND id <> p_occ;
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
    IF p_class IS NOT NULL THEN
        UPDATE occurrences SET class = p_class WHERE ns = p_ns AND id = p_occ;
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
        SELECT count(*) INTO n FROM occurrences
         WHERE ns = p_ns AND lane = p_lane AND class = p_limit_class;
        IF n >= p_limit THEN RETURN 'limit:' || n; END IF;
    END IF;
    INSERT INTO occurrences (ns, id, lane, class, creation_binding, action_fence)
         VALUES (p_ns, p_id, p_lane, 'pending', p_cb, p_af)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN RETURN 'conflict'; END IF;
    INSERT INTO entries (ns, occurrence, seq, prev, digest, body) VALUES (p_ns, p_id, 0, NULL, p_digest, p_body);
    RETURN 'created';
END $$;
