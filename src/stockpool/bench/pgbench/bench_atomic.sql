-- bench counter shape atomic: one conditional UPDATE decides, the sale row in
-- the same statement.
WITH took AS (
    UPDATE bench.counter SET available = available - 1
    WHERE key_id = 1 AND available >= 1
    RETURNING key_id
)
INSERT INTO bench.sales (key_id) SELECT took.key_id FROM took;
