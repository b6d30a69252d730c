-- 006: verdict_settle_batch keeps one plan per statement instead of planning each call.
--
-- PL/pgSQL plans a statement that has parameters anew for each call ("custom plans") unless a
-- generic plan looks no dearer. Here it never does: the generic plan is costed for arrays of
-- unknown length and the custom one for the actual length. So every call planned all of its
-- statements, several with five-way joins, and for a batch of one room planning took about
-- 40 % of the backend's CPU (perf, bench/RESULTS.md): the single-room rate fell to about 0.6x
-- the old per-room function. A generic plan, built once per connection and rebuilt when the
-- tables' statistics change, settles a batch of one about 1.45x faster and a batch of 16 as
-- fast as custom plans do.
ALTER FUNCTION verdict_settle_batch(
  bigint[], text[], text[], smallint[], boolean[], bigint[], text[], text[], bytea[],
  bigint[], bigint[], smallint[], integer[], integer[], integer[], bigint[], boolean[],
  integer, bigint, boolean, boolean)
  SET plan_cache_mode = force_generic_plan;
