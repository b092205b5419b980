-- 0003_pool_no_vacuum_truncate: vacuum never truncates the pool's leaves.
--
-- After it removes dead tuples, vacuum tries to give the empty pages at the
-- end of a table back to the file system. That needs an ACCESS EXCLUSIVE
-- lock, which it only tries for (every 50 ms, up to 5 seconds) and never gets
-- on a hot key's pool leaf, where claimers and refills never stop. Each try
-- kept the autovacuum worker busy for 5 seconds while the claims of a hot key
-- left tens of thousands of new dead tuples behind (a dead ratio of 40% in a
-- 10-minute soak). A pool's pages are refilled within seconds anyway.
-- Storage parameters go on the leaves: a partitioned parent rejects them.

DO $leaves$
DECLARE
    v_leaf regclass;
BEGIN
    FOR v_leaf IN
        SELECT i.inhrelid::regclass
        FROM pg_catalog.pg_inherits AS i
        WHERE i.inhparent = 'stockpool.pool_units'::regclass
        ORDER BY 1
    LOOP
        EXECUTE format('ALTER TABLE %s SET (vacuum_truncate = off)', v_leaf);
    END LOOP;
END;
$leaves$;
