-- bench counter shape naive: read, compute in the client, write back. Two
-- clients that read the same value both sell, one update is lost: drift.
BEGIN;
SELECT available FROM bench.counter WHERE key_id = 1 \gset
\if :available > 0
\set left :available - 1
UPDATE bench.counter SET available = :left WHERE key_id = 1;
INSERT INTO bench.sales (key_id) VALUES (1);
\endif
COMMIT;
