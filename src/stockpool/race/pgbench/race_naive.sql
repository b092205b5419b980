-- race_naive: the negative control. Read the count, decide in the client,
-- write the client's number back: no lock, no condition in the UPDATE. Two
-- clients that read the same count both sell, and one write overwrites the
-- other (a lost update). The harness must catch the drift and FAIL.
-- A short think time between read and write (the application computing its
-- answer) keeps the window honest on a fast, lightly loaded machine.
-- Variables (pgbench -D): run, rollback_pct. seq only labels a sale.
\set seq random(1, 4611686018427387903)
\set draw random(1, 100)
SELECT units AS left FROM stockpool_race.naive_stock WHERE run_id = :run \gset
\sleep 1 ms
\if :left > 0
BEGIN;
UPDATE stockpool_race.naive_stock SET units = :left - 1 WHERE run_id = :run;
\if :draw <= :rollback_pct
ROLLBACK;
\else
INSERT INTO stockpool_race.naive_sales (run_id, client_id, seq) VALUES (:run, :client_id, :seq);
COMMIT;
\endif
\endif
