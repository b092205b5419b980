-- race_soak: one checkout per pgbench transaction, in two database
-- transactions the way a shop does it: reserve (one line, or a cart of 1-5
-- lines over Zipf-distributed items, so a few keys are hot), then, after
-- "payment", claim (claim_pct), release (release_pct) or walk away and let the
-- short TTL expire the hold (the rest). Each database transaction records what
-- the client saw in stockpool_race.outcomes in the same transaction, so the
-- harness can hold stockpool.holds to exactly what clients saw committed.
-- Variables (pgbench -D): run, shops, items, shop_base, item_base, zipf,
-- cart_pct, claim_pct, release_pct, ttl_s (claim/release), abandon_ttl_s.
-- The checkout id is rebuilt from run, client and a random draw, like every
-- other choice here: pgbench replays a client's random draws when it retries a
-- transaction (40001/40P01), though not its \set arithmetic, so a retry redoes
-- the same checkout with the same lines, which stockpool makes a no-op.
\set seq random(1, 4611686018427387903)
\set shop :shop_base + random(1, :shops)
\set fate random(1, 100)
\set cart random(1, 100)
\set lines 1
\if :cart <= :cart_pct
\set lines random(1, 5)
\endif
\set i1 :item_base + random_zipfian(1, :items, :zipf)
\set i2 :item_base + random_zipfian(1, :items, :zipf)
\set i3 :item_base + random_zipfian(1, :items, :zipf)
\set i4 :item_base + random_zipfian(1, :items, :zipf)
\set i5 :item_base + random_zipfian(1, :items, :zipf)
\set q1 random(1, 3)
\set q2 random(1, 3)
\set q3 random(1, 3)
\set q4 random(1, 3)
\set q5 random(1, 3)
\set ttl :ttl_s
\if :fate > :claim_pct + :release_pct
\set ttl :abandon_ttl_s
\endif
WITH asked AS (
    SELECT stockpool_race.checkout_id(:run, :client_id, :seq) AS checkout_id,
           (ARRAY[:i1, :i2, :i3, :i4, :i5]::bigint[])[1:(:lines)] AS item_ids,
           (ARRAY[:q1, :q2, :q3, :q4, :q5]::integer[])[1:(:lines)] AS quantities,
           CASE WHEN :fate <= :claim_pct THEN 'claim'
                WHEN :fate <= :claim_pct + :release_pct THEN 'release'
                ELSE 'abandon' END AS intent
), answer AS (
    SELECT a.*,
           CASE WHEN :cart > :cart_pct
                THEN stockpool.reserve_units(:shop, :i1, 1, :q1, a.checkout_id,
                                             make_interval(secs => :ttl))
                ELSE stockpool.reserve_cart(:shop, a.checkout_id, a.item_ids,
                                            array_fill(1::bigint, ARRAY[:lines]), a.quantities,
                                            make_interval(secs => :ttl))
           END AS reserved
    FROM asked AS a
)
INSERT INTO stockpool_race.outcomes
    (run_id, checkout_id, shop_id, item_ids, quantities, intent, reserved)
SELECT :run, checkout_id, :shop, item_ids, quantities, intent, reserved
FROM answer
ON CONFLICT ON CONSTRAINT outcomes_pkey DO UPDATE SET reserved = excluded.reserved
RETURNING reserved::integer AS ok \gset
\if :ok = 1 AND :fate <= :claim_pct
WITH done AS (
    SELECT stockpool.claim(:shop, stockpool_race.checkout_id(:run, :client_id, :seq)) AS units
)
UPDATE stockpool_race.outcomes AS o
SET settled = 'claimed', settled_units = done.units
FROM done
WHERE o.run_id = :run
    AND o.checkout_id = stockpool_race.checkout_id(:run, :client_id, :seq);
\elif :ok = 1 AND :fate <= :claim_pct + :release_pct
WITH done AS (
    SELECT stockpool.release(:shop, stockpool_race.checkout_id(:run, :client_id, :seq)) AS units
)
UPDATE stockpool_race.outcomes AS o
SET settled = 'released', settled_units = done.units
FROM done
WHERE o.run_id = :run
    AND o.checkout_id = stockpool_race.checkout_id(:run, :client_id, :seq);
\endif
