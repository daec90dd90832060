-- KEYS[1] locks (see run_keep.lua). ARGV[1] earliest write ms ('-inf': any). Replies the
-- names of the locks with records written since.
return redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')
