-- race_schema: the race harness's own tables, in their own schema.
--
-- Created by `stockpool race` (src/stockpool/race/harness.py) before a run, never by the
-- deployer: nothing here is part of stockpool. Every pgbench transaction that
-- reserves writes its outcome row here in the same transaction as the stockpool
-- call, so a committed outcome row is exactly "a reservation the client saw
-- committed", and the harness can compare what clients saw with stockpool.holds.
-- Idempotent: safe to run before every run.

CREATE SCHEMA IF NOT EXISTS stockpool_race;

COMMENT ON SCHEMA stockpool_race IS
'stockpool race harness: client-seen outcomes and the naive negative control. Not part of stockpool.';

-- One row per harness run (a pgbench invocation); its id keeps the keys and
-- checkouts of runs on one database apart.
CREATE TABLE IF NOT EXISTS stockpool_race.runs (
    run_id bigint GENERATED ALWAYS AS IDENTITY,
    scenario text NOT NULL,
    shape text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    params jsonb NOT NULL DEFAULT '{}',
    CONSTRAINT runs_pkey PRIMARY KEY (run_id)
);

-- What a client saw committed: one row per checkout, written in the reserving
-- transaction (reserved = the function's answer), updated in the claiming or
-- releasing transaction (settled). A rolled-back transaction leaves no row.
CREATE TABLE IF NOT EXISTS stockpool_race.outcomes (
    run_id bigint NOT NULL,
    checkout_id uuid NOT NULL,
    shop_id bigint NOT NULL,
    item_ids bigint[] NOT NULL,
    quantities integer[] NOT NULL,
    intent text NOT NULL,
    reserved boolean NOT NULL,
    settled text,
    settled_units integer,
    seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT outcomes_pkey PRIMARY KEY (run_id, checkout_id),
    CONSTRAINT outcomes_intent_known CHECK (intent IN ('hold', 'claim', 'release', 'abandon')),
    CONSTRAINT outcomes_settled_known CHECK (settled IN ('claimed', 'released'))
);

-- Named units (the seats scenario): the labels the client was told it holds
-- (reserve_named's answer, or the pick reserve_labels held) and which call it
-- made (one, many, adjacent, pick). NULL for counted keys.
ALTER TABLE stockpool_race.outcomes
    ADD COLUMN IF NOT EXISTS labels text[],
    ADD COLUMN IF NOT EXISTS call text;

-- The negative control: a plain counter that clients read, decrement in the
-- client and write back without a lock, and the sales they saw committed.
CREATE TABLE IF NOT EXISTS stockpool_race.naive_stock (
    run_id bigint NOT NULL,
    units integer NOT NULL,
    CONSTRAINT naive_stock_pkey PRIMARY KEY (run_id)
);

CREATE TABLE IF NOT EXISTS stockpool_race.naive_sales (
    run_id bigint NOT NULL,
    client_id integer NOT NULL,
    seq bigint NOT NULL,
    sold_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX IF NOT EXISTS naive_sales_run_idx
    ON stockpool_race.naive_sales (run_id);

-- The seats scenario's negative control: one row per seat, taken by writing
-- the checkout into it; clients look for the first free seat, then take it
-- without a lock (see race_seats_naive.sql).
CREATE TABLE IF NOT EXISTS stockpool_race.naive_seats (
    run_id bigint NOT NULL,
    label text NOT NULL,
    position integer NOT NULL,
    checkout_id uuid,
    CONSTRAINT naive_seats_pkey PRIMARY KEY (run_id, position)
);

-- A checkout id that a client can rebuild from its own counters, so a retried
-- pgbench transaction (40001/40P01) reuses the same checkout and stays
-- idempotent instead of taking a second hold.
CREATE OR REPLACE FUNCTION stockpool_race.checkout_id(
    p_run_id bigint,
    p_client_id integer,
    p_seq bigint
)
RETURNS uuid
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    SELECT pg_catalog.md5('stockpool-race/' || p_run_id::text || '/' || p_client_id::text
                          || '/' || p_seq::text)::uuid;
$function$;
