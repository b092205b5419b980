-- race_seats_naive: the seats scenario's negative control, the cloakroom
-- written naively. Look up the first free seat (ORDER BY position LIMIT 1,
-- no lock), then write the checkout into it by position, with no lock and no
-- condition that it is still free, and tell the client that seat. Two clients
-- that look at the same time both get the same seat, and the second write
-- overwrites the first: a seat sold twice, and a buyer who does not hold the
-- seat he was told. The harness must catch both and FAIL.
-- A short think time between look and write (the application rendering the
-- seat) keeps the window honest on a fast, lightly loaded machine.
-- Variables (pgbench -D): run, shop, item, rollback_pct.
\set seq random(1, 4611686018427387903)
\set draw random(1, 100)
SELECT coalesce(min(s.position), 0) AS pos
FROM stockpool_race.naive_seats AS s
WHERE s.run_id = :run
    AND s.checkout_id IS NULL \gset
\sleep 1 ms
\if :pos > 0
BEGIN;
UPDATE stockpool_race.naive_seats
SET checkout_id = stockpool_race.checkout_id(:run, :client_id, :seq)
WHERE run_id = :run
    AND position = :pos;
INSERT INTO stockpool_race.outcomes
    (run_id, checkout_id, shop_id, item_ids, quantities, intent, reserved, labels, call)
SELECT :run, stockpool_race.checkout_id(:run, :client_id, :seq), :shop, ARRAY[:item]::bigint[], ARRAY[1],
       'hold', true, ARRAY[s.label], 'one'
FROM stockpool_race.naive_seats AS s
WHERE s.run_id = :run
    AND s.position = :pos;
\if :draw <= :rollback_pct
ROLLBACK;
\else
COMMIT;
\endif
\endif
