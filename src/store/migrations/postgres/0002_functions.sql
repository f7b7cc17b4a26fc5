-- aocheck coordination-domain store, PostgreSQL, migration 2: one-round-trip transitions.
--
-- Serialization: every write that is fenced by a lane's lease, and every change of that lease,
-- first takes the lane's transaction-scoped advisory lock (aoc_lane_lock). Inside plpgsql under
-- READ COMMITTED each statement takes a fresh snapshot, so the lease row and the limit counts read
-- after the lock see every commit that preceded it. Appends to one occurrence serialize on its row
-- (the UPDATE with the expected length); the loser of a race updates no row and reports a conflict.

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
    p_ns TEXT, p_occ TEXT, p_expected BIGINT, p_phase TEXT,
    p_fenced BOOLEAN, p_lane TEXT, p_executor TEXT, p_generation BIGINT, p_now BIGINT,
    p_limit_phases TEXT[], p_limit BIGINT,
    p_seq BIGINT[], p_prev TEXT[], p_digest TEXT[], p_body TEXT[])
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE n BIGINT; occ_lane TEXT;
BEGIN
    IF p_fenced AND NOT aoc_fence_ok(p_ns, p_lane, p_executor, p_generation, p_now) THEN
        RETURN 'fenced';
    END IF;
    IF p_limit IS NOT NULL THEN
        SELECT lane INTO occ_lane FROM occurrences WHERE ns = p_ns AND id = p_occ;
        SELECT count(*) INTO n FROM occurrences
         WHERE ns = p_ns AND lane = occ_lane AND phase = ANY (p_limit_phases) AND id <> p_occ;
        IF n >= p_limit THEN RETURN 'limit:' || n; END IF;
    END IF;
    UPDATE occurrences SET len = p_expected + cardinality(p_seq), phase = p_phase
     WHERE ns = p_ns AND id = p_occ AND len = p_expected;
    IF NOT FOUND THEN
        SELECT len INTO n FROM occurrences WHERE ns = p_ns AND id = p_occ;
        IF NOT FOUND THEN RETURN 'not_found'; END IF;
        RETURN 'conflict:' || n;
    END IF;
    INSERT INTO entries (ns, occurrence, seq, prev, digest, body)
        SELECT p_ns, p_occ, t.s, t.p, t.d, t.b FROM unnest(p_seq, p_prev, p_digest, p_body) AS t(s, p, d, b);
    RETURN 'ok';
END $$;

CREATE OR REPLACE FUNCTION aoc_create(
    p_ns TEXT, p_id TEXT, p_lane TEXT, p_cb TEXT, p_af TEXT,
    p_executor TEXT, p_generation BIGINT, p_now BIGINT,
    p_limit_phases TEXT[], p_limit BIGINT,
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
         WHERE ns = p_ns AND lane = p_lane AND phase = ANY (p_limit_phases);
        IF n >= p_limit THEN RETURN 'limit:' || n; END IF;
    END IF;
    INSERT INTO occurrences (ns, id, lane, phase, len, creation_binding, action_fence)
         VALUES (p_ns, p_id, p_lane, 'created', 1, p_cb, p_af)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN RETURN 'conflict'; END IF;
    INSERT INTO entries (ns, occurrence, seq, prev, digest, body) VALUES (p_ns, p_id, 0, NULL, p_digest, p_body);
    RETURN 'created';
END $$;
