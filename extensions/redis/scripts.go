package resilienceredis

// The Lua scripts that make one decision each, atomically, inside Redis.
// They repeat the arithmetic of the in-memory store (core/ratelimit's
// algorithms.go) so both stores give the same numbers for the same
// sequence of takes.
//
// Lua in Redis has only float64 numbers. Times are therefore kept in whole
// microseconds (Redis TIME's resolution), which stay exact below 2⁵³; the
// results (reset, retry-after) are computed in nanoseconds as core does,
// splitting products so that no intermediate value exceeds 2⁵³. CheckPolicy
// rejects the policies for which that cannot hold.
//
// Arguments: KEYS[1] is the state key; ARGV[1] the limit, ARGV[2] the
// window in µs, ARGV[3] the key's time to live in ms (its idle span), and
// ARGV[4], when not empty, the current time in µs instead of Redis TIME
// (tests pin the clock with it; the store never sends it), and ARGV[5],
// when present, the permits the take consumes, N (1 <= N <= limit; one
// when absent): a costly request's N are taken all or none (see
// ratelimit.CostStore), with the arithmetic of core's algorithms for n.
//
// State, a hash of three numbers (a, b, c), as core's rlState:
//
//	fixed and sliding window: a = window start (µs), b = taken in it,
//	                          c = taken in the previous window (sliding)
//	token bucket:             a = last refill (µs), b = whole tokens,
//	                          c = progress to the next token, in 1/limit ns
//
// Reply: {allowed (0 or 1), remaining, reset ns, retry-after ns}.

// luaPrelude reads the arguments, the clock and the state, and defines
// exact integer division for operands below 2⁵³.
const luaPrelude = `
local key = KEYS[1]
local L = tonumber(ARGV[1])
local W = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local N = 1
if ARGV[5] ~= nil and ARGV[5] ~= '' then N = tonumber(ARGV[5]) end
local now
if ARGV[4] ~= nil and ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- fdiv returns floor(x / y) for integers 0 <= x < 2^53, y > 0; the
-- correction absorbs the rounding of the float quotient.
local function fdiv(x, y)
  local q = math.floor(x / y)
  if q * y > x then
    q = q - 1
  elseif (q + 1) * y <= x then
    q = q + 1
  end
  return q
end

local function cdiv(x, y)
  local q = fdiv(x, y)
  if q * y < x then q = q + 1 end
  return q
end

local st = redis.call('HMGET', key, 'a', 'b', 'c')
local a, b, c = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])

local function save()
  redis.call('HSET', key, 'a', string.format('%.0f', a), 'b', string.format('%.0f', b), 'c', string.format('%.0f', c))
  redis.call('PEXPIRE', key, ttl)
end
`

// luaRoll advances a window state to the window that contains now and
// sets e, the µs elapsed in it (core's rollWindow).
const luaRoll = `
if a == nil then a, b, c = now, 0, 0 end
local e = now - a
if e < 0 then
  e = 0
elseif e >= W then
  local k = fdiv(e, W)
  if k == 1 then c = b else c = 0 end
  b = 0
  a = a + k * W
  e = e - k * W
end
`

const luaFixedWindow = luaPrelude + luaRoll + `
local left = (W - e) * 1000
if b + N > L then
  save()
  local rem = L - b
  if rem < 0 then rem = 0 end
  return {0, rem, left, left}
end
b = b + N
save()
return {1, L - b, left, 0}
`

const luaSlidingWindow = luaPrelude + luaRoll + `
local prev, cur = c, b

-- floor(x * 1000 * W / y) in ns for x * W < 2^53: split off the µs part.
local function floorNs(x, y)
  local X = x * W
  local q = fdiv(X, y)
  return 1000 * q + fdiv(1000 * (X - q * y), y)
end

local function reset()
  if cur > 0 then return (2 * W - e) * 1000 end
  if prev > 0 then return (W - e) * 1000 end
  return 0
end

local function remaining()
  local rem = L - cur - cdiv(prev * (W - e), W)
  if rem < 0 then rem = 0 end
  return rem
end

local room = L - N - cur
if room >= 0 and prev * (W - e) <= room * W then
  b = b + N
  cur = cur + N
  save()
  return {1, remaining(), reset(), 0}
end
save()
local retry
if cur + N <= L then
  retry = 1000 * W - floorNs(room, prev) - 1000 * e
else
  retry = 1000 * (W - e) + 1000 * W - floorNs(L - N, cur)
end
return {0, remaining(), reset(), retry}
`

const luaTokenBucket = luaPrelude + `
if a == nil then a, b, c = now, L, 0 end
local elapsed = now - a
if elapsed > 0 then
  a = now
  if b > L then b = L end
  if b == L then
    c = 0
  elseif elapsed >= W then
    b, c = L, 0
  else
    -- q, r = divmod(elapsed ns * L + c, W ns), with elapsed * L < 2^53.
    local X = elapsed * L
    local qx = fdiv(X, W)
    local Y = 1000 * (X - qx * W) + c
    local qy = fdiv(Y, 1000 * W)
    local q = qx + qy
    if q >= L - b then
      b, c = L, 0
    else
      b = b + q
      c = Y - qy * 1000 * W
    end
  end
end

-- ceil((missing * W ns - c) / L), split as in the refill: the time until
-- the bucket has gained missing tokens.
local function gain(missing)
  local M = missing * W
  local qa = fdiv(M, L)
  local z = 1000 * (M - qa * L) - c
  if z >= 0 then return 1000 * qa + cdiv(z, L) end
  return 1000 * qa - fdiv(-z, L)
end

local function reset()
  local missing = L - b
  if missing <= 0 then return 0 end
  return gain(missing)
end

if b >= N then
  b = b - N
  save()
  return {1, b, reset(), 0}
end
save()
if N - b > 1 then return {0, b, reset(), gain(N - b)} end
return {0, b, reset(), cdiv(1000 * W - c, L)}
`
