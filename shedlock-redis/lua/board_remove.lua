-- After board_entry.lua. ARGV[1] key, ARGV[2] condition, ARGV[3] the version asked for.
-- Removes the live entry at the key if the condition holds: replies 1 when removed, 0 when
-- nothing live was there or the condition did not hold (an expired entry is deleted anyway:
-- it is absent for everyone already).
local current, err = live(ARGV[1])
if err then
  return err
end
if current == nil or not holds(current, ARGV[2], ARGV[3]) then
  return 0
end
drop(ARGV[1])
return 1
