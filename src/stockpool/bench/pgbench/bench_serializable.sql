-- bench counter shape serializable: the naive shape under SERIALIZABLE; the
-- lost update becomes a 40001 failure that pgbench retries (--max-tries).
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT available FROM bench.counter WHERE key_id = 1 \gset
\if :available > 0
\set left :available - 1
UPDATE bench.counter SET available = :left WHERE key_id = 1;
INSERT INTO bench.sales (key_id) VALUES (1);
\endif
COMMIT;
