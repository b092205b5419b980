-- bench counter shape locked: the naive shape with SELECT ... FOR UPDATE, so
-- the read waits for the previous writer: no drift, one buyer at a time.
BEGIN;
SELECT available FROM bench.counter WHERE key_id = 1 FOR UPDATE \gset
\if :available > 0
\set left :available - 1
UPDATE bench.counter SET available = :left WHERE key_id = 1;
INSERT INTO bench.sales (key_id) VALUES (1);
\endif
COMMIT;
