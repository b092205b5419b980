-- race_seats: one checkout of the raced named key (seats) per pgbench
-- transaction. The reservation is one of: reserve_named of one seat, of 2-4
-- seats anywhere, of 2-4 adjacent seats, or reserve_labels of a pick of 1-3
-- seats the client saw free in unit_status (a buyer clicking seats on a
-- map: seats drawn at random among those it shows free; a seat locked by
-- another buyer's reservation in flight shows free too). Its answer (the
-- labels the client is told it holds) is written to
-- stockpool_race.outcomes in the same transaction; a share of the
-- transactions roll back instead of committing (payment page closed). A
-- committed reservation is then claimed (claim_pct), released (release_pct)
-- or kept, each in its own transaction that records it.
-- Variables (pgbench -D): run, shop, item, location, one_pct, many_pct,
-- adjacent_pct (the rest picks), claim_pct, release_pct, rollback_pct.
-- The checkout id is rebuilt from run, client and a random draw: pgbench
-- replays a client's random draws when it retries a transaction (40001/40P01)
-- but not its \set arithmetic, so a retried transaction reuses its checkout.
\set seq random(1, 4611686018427387903)
\set draw random(1, 100)
\set call random(1, 100)
\set fate random(1, 100)
\set n random(2, 4)
\set k random(1, 3)
BEGIN;
WITH asked AS (
    SELECT stockpool_race.checkout_id(:run, :client_id, :seq) AS checkout_id,
           CASE WHEN :call <= :one_pct THEN 'one'
                WHEN :call <= :one_pct + :many_pct THEN 'many'
                WHEN :call <= :one_pct + :many_pct + :adjacent_pct THEN 'adjacent'
                ELSE 'pick' END AS call,
           CASE WHEN :fate <= :claim_pct THEN 'claim'
                WHEN :fate <= :claim_pct + :release_pct THEN 'release'
                ELSE 'hold' END AS intent
), picked AS (
    SELECT a.*,
           CASE WHEN a.call = 'pick' THEN (
               SELECT array_agg(f.label)
               FROM (SELECT u.label FROM stockpool.unit_status AS u
                     WHERE u.shop_id = :shop AND u.item_id = :item AND u.location_id = :location
                         AND u.status = 'free'
                     ORDER BY random()
                     LIMIT :k) AS f) END AS pick
    FROM asked AS a
), answer AS (
    SELECT p.*,
           CASE p.call
               WHEN 'one' THEN stockpool.reserve_named(:shop, :item, :location, 1, p.checkout_id,
                                                       interval '1 hour')
               WHEN 'many' THEN stockpool.reserve_named(:shop, :item, :location, :n, p.checkout_id,
                                                        interval '1 hour')
               WHEN 'adjacent' THEN stockpool.reserve_named(:shop, :item, :location, :n, p.checkout_id,
                                                            interval '1 hour', true)
               ELSE CASE WHEN p.pick IS NOT NULL
                             AND stockpool.reserve_labels(:shop, :item, :location, p.pick, p.checkout_id,
                                                          interval '1 hour')
                         THEN p.pick END
           END AS labels
    FROM picked AS p
)
INSERT INTO stockpool_race.outcomes
    (run_id, checkout_id, shop_id, item_ids, quantities, intent, reserved, labels, call)
SELECT :run, checkout_id, :shop, ARRAY[:item]::bigint[],
       ARRAY[CASE call WHEN 'one' THEN 1 WHEN 'pick' THEN coalesce(cardinality(pick), 0) ELSE :n END],
       intent, labels IS NOT NULL, labels, call
FROM answer
ON CONFLICT ON CONSTRAINT outcomes_pkey DO UPDATE SET reserved = excluded.reserved, labels = excluded.labels
RETURNING reserved::integer AS ok \gset
\if :draw <= :rollback_pct
ROLLBACK;
\else
COMMIT;
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
\endif
