"""Lua pattern matching that a lua hook's deadline can interrupt.

Lua's own ``string.find``, ``match``, ``gmatch`` and ``gsub`` run in C, where the sandbox's
instruction-count hook never fires: a backtracking pattern over a long string (``("a"):rep(1e5)
:find(".-.-.-b")``) or a plain search for a long needle would run for hours past the hook's
timeout, and no Lua error can stop it. :data:`SOURCE` replaces the four functions with ones
that estimate, from the pattern and the subject's length, how many steps Lua's matcher may take
at most; within :data:`NATIVE_BUDGET` they call the C functions (nearly every real pattern), and
beyond it they match with a port of Lua 5.2's matcher written in Lua, whose every step the hook
counts. Both give the same results and the same error messages.

The estimate bounds the backtracking of Lua's matcher: a repetition (``*``, ``+``, ``-``) or an
optional item (``?``) branches only when something after it can fail, so each such item
multiplies the steps per start position by the subject's length (or 2), a balance (``%b``) or
a back-reference (``%1``) scans up to the whole subject, and an unanchored pattern tries every
start position. A malformed pattern always takes the Lua matcher, which raises the same error at
the same point as C's.
"""

from __future__ import annotations

__all__ = ["NATIVE_BUDGET", "SOURCE"]

NATIVE_BUDGET = 20_000_000
"""Estimated matcher steps up to which the C functions run (tens of milliseconds at most)."""

# Runs once per VM, before the script, with NATIVE_BUDGET as its argument; replaces the four
# functions in the string table (which is also the strings' metatable __index).
SOURCE = rb"""
local budget = ...
local c_find, c_match, c_gmatch, c_gsub = string.find, string.match, string.gmatch, string.gsub
local byte, sub = string.byte, string.sub
local type, tostring, tonumber, error = type, tostring, tonumber, error
local pcall, select = pcall, select
local setmetatable, getmetatable = setmetatable, getmetatable
local floor, huge, concat, unpack = math.floor, math.huge, table.concat, table.unpack

local function pack(...) return {n = select("#", ...), ...} end

local ESC, LBRACKET, RBRACKET, CARET, DOLLAR = 37, 91, 93, 94, 36
local LPAREN, RPAREN, DOT, DASH, STAR, PLUS, QUESTION = 40, 41, 46, 45, 42, 43, 63
local MAXCCALLS, MAXCAPTURES = 200, 32
local CAP_UNFINISHED, CAP_POSITION = -1, -2
local SPECIALS = "[%^%$%*%+%?%.%(%[%%%-]"

-- the character classes, each asked of C's own matcher once (so they follow its locale)
local classes = {}
for letter in ("acdglpsuwxz"):gmatch(".") do
  local set = {}
  for c = 0, 255 do
    if c_find(string.char(c), "^%" .. letter) then set[c] = true end
  end
  classes[byte(letter)] = set
end

-- errors of the matcher travel as this table's instances up to the entry point, which raises
-- the message at the caller's line, as the C functions do
local Failure = {}
local function fail(message) error(setmetatable({message = message}, Failure), 0) end

local function match_class(c, cl)
  local lower = cl >= 65 and cl <= 90 and cl + 32 or cl
  local set = classes[lower]
  if set == nil then return cl == c end
  local res = set[c] == true
  if cl == lower then return res end
  return not res
end

-- ms: {src, n (its length), pat, p_end (its length), level, init = {}, len = {}, depth}

local function class_end(ms, p)
  local pat = ms.pat
  local c = byte(pat, p)
  p = p + 1
  if c == ESC then
    if p > ms.p_end then fail("malformed pattern (ends with '%')") end
    return p + 1
  elseif c == LBRACKET then
    if byte(pat, p) == CARET then p = p + 1 end
    repeat
      if p > ms.p_end then fail("malformed pattern (missing ']')") end
      c = byte(pat, p)
      p = p + 1
      if c == ESC and p <= ms.p_end then p = p + 1 end
    until byte(pat, p) == RBRACKET
    return p + 1
  end
  return p
end

local function match_bracket_class(c, pat, p, ec)
  local sig = true
  if byte(pat, p + 1) == CARET then
    sig = false
    p = p + 1
  end
  p = p + 1
  while p < ec do
    local pc = byte(pat, p)
    if pc == ESC then
      p = p + 1
      if match_class(c, byte(pat, p)) then return sig end
    elseif byte(pat, p + 1) == DASH and p + 2 < ec then
      p = p + 2
      if pc <= c and c <= byte(pat, p) then return sig end
    elseif pc == c then
      return sig
    end
    p = p + 1
  end
  return not sig
end

local function single_match(ms, s, p, ep)
  if s > ms.n then return false end
  local c = byte(ms.src, s)
  local pc = byte(ms.pat, p)
  if pc == DOT then return true
  elseif pc == ESC then return match_class(c, byte(ms.pat, p + 1))
  elseif pc == LBRACKET then return match_bracket_class(c, ms.pat, p, ep - 1)
  end
  return pc == c
end

local match

local function match_balance(ms, s, p)
  if p >= ms.p_end then fail("malformed pattern (missing arguments to '%b')") end
  local src = ms.src
  if byte(src, s) ~= byte(ms.pat, p) then return nil end
  local b, e = byte(ms.pat, p), byte(ms.pat, p + 1)
  local cont = 1
  s = s + 1
  while s <= ms.n do
    local c = byte(src, s)
    if c == e then
      cont = cont - 1
      if cont == 0 then return s + 1 end
    elseif c == b then
      cont = cont + 1
    end
    s = s + 1
  end
  return nil
end

local function max_expand(ms, s, p, ep)
  local i = 0
  while single_match(ms, s + i, p, ep) do i = i + 1 end
  while i >= 0 do
    local res = match(ms, s + i, ep + 1)
    if res then return res end
    i = i - 1
  end
  return nil
end

local function min_expand(ms, s, p, ep)
  while true do
    local res = match(ms, s, ep + 1)
    if res then return res end
    if single_match(ms, s, p, ep) then s = s + 1 else return nil end
  end
end

local function start_capture(ms, s, p, what)
  local level = ms.level
  if level >= MAXCAPTURES then fail("too many captures") end
  ms.init[level] = s
  ms.len[level] = what
  ms.level = level + 1
  local res = match(ms, s, p)
  if res == nil then ms.level = ms.level - 1 end
  return res
end

local function end_capture(ms, s, p)
  local l = ms.level - 1
  while l >= 0 and ms.len[l] ~= CAP_UNFINISHED do l = l - 1 end
  if l < 0 then fail("invalid pattern capture") end
  ms.len[l] = s - ms.init[l]
  local res = match(ms, s, p)
  if res == nil then ms.len[l] = CAP_UNFINISHED end
  return res
end

local function match_capture(ms, s, l)
  l = l - 49
  if l < 0 or l >= ms.level or ms.len[l] == CAP_UNFINISHED then
    fail("invalid capture index %" .. (l + 1))
  end
  local len = ms.len[l]
  if len >= 0 and ms.n - s + 1 >= len and sub(ms.src, ms.init[l], ms.init[l] + len - 1)
      == sub(ms.src, s, s + len - 1) then
    return s + len
  end
  return nil
end

function match(ms, s, p)
  if ms.depth == 0 then fail("pattern too complex") end
  ms.depth = ms.depth - 1
  local pat = ms.pat
  while true do
    if p > ms.p_end then break end
    local pc = byte(pat, p)
    local default = false
    if pc == LPAREN then
      if byte(pat, p + 1) == RPAREN then
        s = start_capture(ms, s, p + 2, CAP_POSITION)
      else
        s = start_capture(ms, s, p + 1, CAP_UNFINISHED)
      end
      break
    elseif pc == RPAREN then
      s = end_capture(ms, s, p + 1)
      break
    elseif pc == DOLLAR and p == ms.p_end then
      if s ~= ms.n + 1 then s = nil end
      break
    elseif pc == ESC then
      local nc = byte(pat, p + 1)
      if nc == 98 then  -- %b
        s = match_balance(ms, s, p + 2)
        if s == nil then break end
        p = p + 4
      elseif nc == 102 then  -- %f
        p = p + 2
        if byte(pat, p) ~= LBRACKET then fail("missing '[' after '%f' in pattern") end
        local ep = class_end(ms, p)
        local previous = s == 1 and 0 or byte(ms.src, s - 1)
        local current = byte(ms.src, s) or 0
        if not match_bracket_class(previous, pat, p, ep - 1)
            and match_bracket_class(current, pat, p, ep - 1) then
          p = ep
        else
          s = nil
          break
        end
      elseif nc ~= nil and nc >= 48 and nc <= 57 then  -- %0-%9
        s = match_capture(ms, s, nc)
        if s == nil then break end
        p = p + 2
      else
        default = true
      end
    else
      default = true
    end
    if default then
      local ep = class_end(ms, p)
      local suffix = byte(pat, ep)
      if not single_match(ms, s, p, ep) then
        if suffix == STAR or suffix == QUESTION or suffix == DASH then
          p = ep + 1
        else
          s = nil
          break
        end
      elseif suffix == QUESTION then
        local res = match(ms, s + 1, ep + 1)
        if res then
          s = res
          break
        end
        p = ep + 1
      elseif suffix == PLUS then
        s = max_expand(ms, s + 1, p, ep)
        break
      elseif suffix == STAR then
        s = max_expand(ms, s, p, ep)
        break
      elseif suffix == DASH then
        s = min_expand(ms, s, p, ep)
        break
      else
        s = s + 1
        p = ep
      end
    end
  end
  ms.depth = ms.depth + 1
  return s
end

local function capture_value(ms, i, s, e)
  if i >= ms.level then
    if i == 0 then return sub(ms.src, s, e - 1) end
    fail("invalid capture index")
  end
  local l = ms.len[i]
  if l == CAP_UNFINISHED then fail("unfinished capture") end
  if l == CAP_POSITION then return ms.init[i] end
  return sub(ms.src, ms.init[i], ms.init[i] + l - 1)
end

local function captures(ms, s, e, whole)
  local n = (ms.level == 0 and whole) and 1 or ms.level
  local out = {}
  for i = 0, n - 1 do out[i + 1] = capture_value(ms, i, s, e) end
  return out, n
end

local function state(src, pat)
  return {src = src, n = #src, pat = pat, p_end = #pat, level = 0, init = {}, len = {},
          depth = MAXCCALLS}
end

-- the estimate

-- Return the shape of pattern `pat` read from `p`: the items that branch on every position
-- (a repetition followed by something that can fail), those that branch in two (an optional
-- item so followed), those that scan up to the whole subject (%b, %1), and the pattern's
-- length; nil when the pattern is malformed.
local function shape(pat, p)
  local m = #pat
  local probe = {pat = pat, p_end = m}
  local items = {}  -- {kind, can fail}
  while p <= m do
    local pc, nc = byte(pat, p), byte(pat, p + 1) or 0
    if pc == LPAREN then
      p = p + (nc == RPAREN and 2 or 1)
    elseif pc == RPAREN then
      p = p + 1
    elseif pc == DOLLAR and p == m then
      items[#items + 1] = {"one", true}
      p = p + 1
    elseif pc == ESC and nc == 98 then  -- %b
      if p + 3 > m then return nil end
      items[#items + 1] = {"scan", true}
      p = p + 4
    elseif pc == ESC and nc == 102 then  -- %f
      if byte(pat, p + 2) ~= LBRACKET then return nil end
      local ok, ep = pcall(class_end, probe, p + 2)
      if not ok then return nil end
      items[#items + 1] = {"one", true}
      p = ep
    elseif pc == ESC and nc >= 48 and nc <= 57 then  -- %0-%9
      items[#items + 1] = {"scan", true}
      p = p + 2
    else
      local ok, ep = pcall(class_end, probe, p)
      if not ok then return nil end
      local suffix = byte(pat, ep)
      if suffix == STAR or suffix == DASH then
        items[#items + 1] = {"branch", false}
        p = ep + 1
      elseif suffix == PLUS then
        items[#items + 1] = {"branch", true}
        p = ep + 1
      elseif suffix == QUESTION then
        items[#items + 1] = {"two", false}
        p = ep + 1
      else
        items[#items + 1] = {"one", true}
        p = ep
      end
    end
  end
  local branches, twos, scans, later_fails = 0, 0, 0, false
  for i = #items, 1, -1 do
    local kind, fails = items[i][1], items[i][2]
    if kind == "branch" and later_fails then branches = branches + 1
    elseif kind == "two" and later_fails then twos = twos + 1
    elseif kind == "scan" then scans = scans + 1
    end
    later_fails = later_fails or fails
  end
  return {branches, twos, scans, m}
end

local shapes, shapes_count = {}, 0

-- Return whether C's matcher takes at most `budget` steps for `pat` over `s`.
local function native_ok(s, pat, anchored)
  local key = anchored and "^" .. pat or pat
  local found = shapes[key]
  if found == nil then
    found = shape(pat, anchored and 2 or 1) or false
    if shapes_count >= 256 then shapes, shapes_count = {}, 0 end
    shapes[key], shapes_count = found, shapes_count + 1
  end
  if not found then return false end
  local n = #s
  -- each start position follows at most (n+1)^branches * 2^twos paths, each of at most m
  -- items and the scans; a final repetition's scan ends the match, so it counts once overall
  local paths = (n + 1) ^ found[1] * 2 ^ found[2]
  local starts = anchored and 1 or n + 1
  return starts * paths * (found[4] + n * found[3]) + n <= budget
end

-- the entry points: arguments C would refuse go to C, which raises its own error

local function strings(s, pat)
  local ts, tp = type(s), type(pat)
  if (ts == "string" or ts == "number") and (tp == "string" or tp == "number") then
    return tostring(s), tostring(pat)
  end
  return nil
end

local function raise(err)
  if getmetatable(err) == Failure then error(err.message, 3) end
  error(err, 0)
end

local function posrelat(pos, len)
  if pos >= 0 then return pos end
  if -pos > len then return 0 end
  return len + pos + 1
end

local function integer(v)
  -- luaL_optinteger: numbers (and numeric strings) truncate toward zero
  local x = tonumber(v)
  if x == nil then return nil end
  if x >= 0 then return floor(x) end
  return -floor(-x)
end

local function plain_find(s, needle, init)
  -- C's search is memchr then memcmp, up to len(s) * len(needle) steps; here each candidate is
  -- one bounded step the hook can interrupt between
  local n, m = #s, #needle
  if m == 0 then return init, init - 1 end
  local first = sub(needle, 1, 1)
  local pos = init
  while pos <= n - m + 1 do
    local at = c_find(s, first, pos, true)
    if at == nil or at > n - m + 1 then return nil end
    if sub(s, at, at + m - 1) == needle then return at, at + m - 1 end
    pos = at + 1
  end
  return nil
end

local function find_aux(find, s, pat, init, plain)
  local n = #s
  init = posrelat(init, n)
  if init < 1 then init = 1 elseif init > n + 1 then return nil end
  if find and (plain or not c_find(pat, SPECIALS)) then
    return plain_find(s, pat, init)
  end
  local anchored = byte(pat, 1) == CARET
  local ms = state(s, pat)
  local p = anchored and 2 or 1
  local s1 = init
  repeat
    ms.level = 0
    local e = match(ms, s1, p)
    if e then
      if find then
        local caps, k = captures(ms, nil, nil, false)
        return s1, e - 1, unpack(caps, 1, k)
      end
      local caps, k = captures(ms, s1, e, true)
      return unpack(caps, 1, k)
    end
    s1 = s1 + 1
  until s1 > n + 1 or anchored
  return nil
end

local function entry(find)
  local c_fn = find and c_find or c_match
  return function(s, pat, init, plain, ...)
    local src, p = strings(s, pat)
    local start = init == nil and 1 or integer(init)
    if src == nil or start == nil then return c_fn(s, pat, init, plain, ...) end
    local n = #src
    local cheap
    if find and (plain or not c_find(p, SPECIALS)) then
      cheap = n * #p <= budget
    else
      cheap = native_ok(src, p, byte(p, 1) == CARET)
    end
    if cheap then return c_fn(s, pat, init, plain, ...) end
    local r = pack(pcall(find_aux, find, src, p, start, plain))
    if not r[1] then raise(r[2]) end
    return unpack(r, 2, r.n)
  end
end

string.find = entry(true)
string.match = entry(false)

string.gmatch = function(s, pat, ...)
  local src, p = strings(s, pat)
  if src == nil or native_ok(src, p, false) then return c_gmatch(s, pat, ...) end
  local ms = state(src, p)
  local start = 1
  return function()
    local r = pack(pcall(function()
      local at = start
      while at <= ms.n + 1 do
        ms.level = 0
        local e = match(ms, at, 1)
        if e then
          start = e == at and e + 1 or e
          local caps, k = captures(ms, at, e, true)
          return unpack(caps, 1, k)
        end
        at = at + 1
      end
      start = ms.n + 2
    end))
    if not r[1] then raise(r[2]) end
    return unpack(r, 2, r.n)
  end
end

local function add_s(ms, out, repl, s, e)
  local i, l = 1, #repl
  while i <= l do
    local c = byte(repl, i)
    if c ~= ESC then
      out[#out + 1] = sub(repl, i, i)
    else
      i = i + 1
      local d = byte(repl, i)
      if d == nil or d < 48 or d > 57 then
        if d ~= ESC then fail("invalid use of '%' in replacement string") end
        out[#out + 1] = "%"
      elseif d == 48 then
        out[#out + 1] = sub(ms.src, s, e - 1)
      else
        out[#out + 1] = tostring(capture_value(ms, d - 49, s, e))
      end
    end
    i = i + 1
  end
end

local function add_value(ms, out, repl, kind, s, e)
  local value
  if kind == "function" then
    local caps, k = captures(ms, s, e, true)
    value = repl(unpack(caps, 1, k))
  elseif kind == "table" then
    value = repl[capture_value(ms, 0, s, e)]
  else
    add_s(ms, out, tostring(repl), s, e)
    return
  end
  if not value then
    value = sub(ms.src, s, e - 1)
  elseif type(value) ~= "string" and type(value) ~= "number" then
    fail("invalid replacement value (a " .. type(value) .. ")")
  end
  out[#out + 1] = tostring(value)
end

local function gsub_aux(src, pat, repl, kind, max_n)
  local anchored = byte(pat, 1) == CARET
  local ms = state(src, pat)
  local p = anchored and 2 or 1
  local out, n, at = {}, 0, 1
  while n < max_n do
    ms.level = 0
    local e = match(ms, at, p)
    if e then
      n = n + 1
      add_value(ms, out, repl, kind, at, e)
    end
    if e and e > at then
      at = e
    elseif at <= ms.n then
      out[#out + 1] = sub(src, at, at)
      at = at + 1
    else
      break
    end
    if anchored then break end
  end
  out[#out + 1] = sub(src, at)
  return concat(out), n
end

string.gsub = function(s, pat, repl, max_n, ...)
  local src, p = strings(s, pat)
  local kind = type(repl)
  local limit = max_n == nil and huge or integer(max_n)
  if src == nil or limit == nil or not (kind == "string" or kind == "number"
      or kind == "table" or kind == "function") then
    return c_gsub(s, pat, repl, max_n, ...)
  end
  if native_ok(src, p, byte(p, 1) == CARET) then return c_gsub(s, pat, repl, max_n, ...) end
  if limit < 0 then limit = huge end
  local r = pack(pcall(gsub_aux, src, p, repl, kind, limit))
  if not r[1] then raise(r[2]) end
  return r[2], r[3]
end
"""
