-- A new random epoch: 16 hex digits.
CREATE OR REPLACE FUNCTION verdict_new_epoch()
RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT left(replace(gen_random_uuid()::text, '-', ''), 16)
$$;
