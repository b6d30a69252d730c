-- The first 32 bits of the sha256 of the node's id: a room of another node matches it only by a
-- one-in-four-billion chance, and then is answered as expired instead of unknown.
CREATE OR REPLACE FUNCTION verdict_node_tag(p_node_id text)
RETURNS integer LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ('x' || left(encode(sha256(convert_to(p_node_id, 'UTF8')), 'hex'), 8))::bit(32)::integer
$$;
