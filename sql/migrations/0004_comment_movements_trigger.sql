-- 0004_comment_movements_trigger: the append-only trigger function gets its
-- comment, like every other function of the schema. It was created by 0001
-- with its triggers, so it lives in the migrations rather than in
-- sql/functions, and its comment has to come in a migration too.

COMMENT ON FUNCTION stockpool._movements_immutable() IS
'Internal: trigger function of stockpool.movements; refuses UPDATE, DELETE and TRUNCATE (SP009).';
