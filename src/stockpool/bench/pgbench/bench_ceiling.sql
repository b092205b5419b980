-- bench ceiling: each client updates its own row; no shared data, so this is
-- what the machine's commit path allows. The reference for every ratio.
UPDATE bench.ceiling SET n = n + 1 WHERE client_id = :client_id;
