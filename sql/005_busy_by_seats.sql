-- 005: a player is busy while a seat of theirs is in a room not released; players no longer
-- records it.
--
-- players.in_battle_room said which room held a player. The room's seats say the same: a room's
-- seats live from its allocation to its settlement (which deletes the room and, by cascade, its
-- seats), and a release marks the room (battle_rooms.released_at). Keeping the column as well
-- meant writing every player's row again in each settlement and each release, besides the row
-- lock both take: in a drain, 18 % of the time (bench/RESULTS.md, "The event's players, built
-- once", where freeing the players was switched off in a throwaway build), and a release had to
-- lock its players, so one player locked elsewhere held up the release of the room. Now
-- verdict_player_room reads a player's room from the seats, by this index, and allocation,
-- settlement and release write no row of players. The column is dropped, so that no reader is
-- left with a second answer.
CREATE INDEX battle_room_seats_player ON battle_room_seats (player_id);
ALTER TABLE players DROP COLUMN in_battle_room;
