-- bench counter: one conditional UPDATE of the hot key's row. Correct, but
-- every buyer queues on that row's lock until the holder commits.
UPDATE bench.counter SET available = available - 1 WHERE key_id = 1 AND available >= 1;
