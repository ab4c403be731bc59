-- gen/spec.lua: load spec files in a sandbox and validate them against a schema.
--
-- A spec is a data-only Lua chunk: top-level assignments (`name = "..."`), loaded in text mode
-- with an environment that can be written but not read, under an instruction budget. Every
-- error names the file, the line where the text shows it, the field, what was expected and what
-- was found, e.g.
--   specs/x.lua:7: field 'scale.rule': expected one of "amax", found "amx"

local M = {}

local INSTRUCTION_BUDGET = 10000000

-- a key as a Lua pattern that matches it literally
local function lit(k) return (string.gsub(k, "%p", "%%%0")) end

-------------------------------------------------------------------------------
-- errors
-------------------------------------------------------------------------------

-- Errors are tables so that callers can tell a spec error from a generator bug.
local SpecError = {}
SpecError.__index = SpecError
SpecError.__tostring = function(e) return e.msg end

local function fail(msg) error(setmetatable({ msg = msg, spec_error = true }, SpecError), 0) end
M.fail = fail

function M.is_spec_error(e) return type(e) == "table" and e.spec_error == true end

local function describe(v)
  local t = type(v)
  if t == "string" then return string.format("%q", v) end
  if t == "number" then
    if math.type(v) == "integer" then return string.format("%d", v) end
    if v ~= v then return "nan" end
    return string.format("%.17g", v)
  end
  if t == "nil" then return "nothing" end
  return t
end
M.describe = describe

-------------------------------------------------------------------------------
-- line lookup: where in the text does a field path appear?
-------------------------------------------------------------------------------

local function split_lines(text)
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return lines
end

-- Find the line of `a.b.c`: the top-level `a =` at the start of a line, then each deeper key
-- after it. Returns nil when the text does not show it plainly.
local function line_of(src, path)
  if not src or not path then return nil end
  local lines = src.lines
  local parts = {}
  for p in path:gmatch("[^.%[%]]+") do parts[#parts + 1] = p end
  if #parts == 0 then return nil end
  local top = parts[1]
  local at = src.assigned[top]
  if not at then
    for i, l in ipairs(lines) do
      if l:match("^%s*" .. lit(top) .. "%s*=") then at = i; break end
    end
  end
  if not at then return nil end
  for k = 2, #parts do
    local key = parts[k]
    if key:match("^%d+$") then break end
    local found
    for i = at, #lines do
      local l = lines[i]:gsub("%-%-.*$", "")
      if l:match("%f[%w_]" .. lit(key) .. "%s*=") then found = i; break end
    end
    if not found then break end
    at = found
  end
  return at
end

local function where(src, path)
  local file = src and src.file or "?"
  local line = line_of(src, path)
  if line then return string.format("%s:%d", file, line) end
  return file
end
M.where = where

local function field_fail(src, path, expected, found)
  fail(string.format("%s: field '%s': expected %s, found %s", where(src, path), path, expected, found))
end
M.field_fail = field_fail

-------------------------------------------------------------------------------
-- sandboxed loading
-------------------------------------------------------------------------------

-- Load `text` as a data-only chunk. Returns the table of top-level assignments and a `src`
-- record (file, lines, line of each top-level assignment) for error messages.
function M.load_chunk(file, text)
  if type(text) ~= "string" then fail(string.format("%s: cannot read the spec (no text)", file)) end
  if text:sub(1, 4) == "\27Lua" then
    fail(string.format("%s: precompiled Lua is not accepted; a spec is Lua source text", file))
  end
  local src = { file = file, lines = split_lines(text), assigned = {} }
  local fields = {}
  local env = setmetatable({}, {
    __index = function(_, k)
      local info = debug.getinfo(2, "l")
      fail(string.format("%s:%d: '%s' is not available in a spec: specs are data only (no globals, no libraries)",
        file, info and info.currentline or 0, tostring(k)))
    end,
    __newindex = function(_, k, v)
      local info = debug.getinfo(2, "l")
      local line = info and info.currentline or 0
      if type(k) ~= "string" then
        fail(string.format("%s:%d: top-level keys must be names, found %s", file, line, describe(k)))
      end
      if src.assigned[k] then
        fail(string.format("%s:%d: field '%s' is assigned twice (first at line %d)", file, line, k, src.assigned[k]))
      end
      -- the line of the statement's start, when the text shows it
      local start = line
      for i = line, 1, -1 do
        if src.lines[i] and string.match(src.lines[i], "^%s*" .. lit(k) .. "%s*=") then start = i; break end
      end
      src.assigned[k] = start
      fields[k] = v
    end,
    __metatable = false,
  })
  local chunk, err = load(text, "@" .. file, "t", env)
  if not chunk then
    -- err is "file:line: message"
    fail(string.format("%s (Lua syntax error)", err))
  end
  local co = coroutine.create(chunk)
  debug.sethook(co, function()
    fail(string.format("%s: the spec ran more than %d instructions; a spec is data, not a program", file, INSTRUCTION_BUDGET))
  end, "", INSTRUCTION_BUDGET)
  -- String methods run in C, out of reach of the instruction budget (("").rep(s, 2^62) would spin
  -- for ever): while the spec runs, strings have none. The code above and below uses string.*.
  local string_mt = getmetatable("")
  local string_index = string_mt.__index
  string_mt.__index = function(_, k)
    local info = debug.getinfo(2, "l")
    fail(string.format("%s:%d: string methods (:%s) are not available in a spec: specs are data only",
      file, info and info.currentline or 0, tostring(k)))
  end
  local ok, ret = coroutine.resume(co)
  string_mt.__index = string_index
  if not ok then
    if M.is_spec_error(ret) then error(ret, 0) end
    local msg = tostring(ret)
    if msg == "not enough memory" then
      msg = "not enough memory: the spec exceeded the generator's memory limit; a spec is data, not a program"
    end
    if string.sub(msg, 1, #file) ~= file then msg = file .. ": " .. msg end
    fail(msg)
  end
  if coroutine.status(co) ~= "dead" then
    fail(string.format("%s: the spec yielded; a spec is data, not a program", file))
  end
  if ret ~= nil then
    fail(string.format("%s: a spec assigns fields at the top level (name = ...) and returns nothing, found a returned %s",
      file, type(ret)))
  end
  return fields, src
end

-------------------------------------------------------------------------------
-- schema validation
-------------------------------------------------------------------------------
-- A schema node is one of
--   { type = "string" | "integer" | "number" | "boolean", enum = {...}, min = n, max = n,
--     pattern = "lua pattern", pattern_doc = "...", max_chars = n }
--   { type = "table", fields = { name = node, ... }, required = { "a", "b" } }
--   { type = "list", of = node, max_len = n }
--   { type = "map", of = node, key_pattern = "lua pattern", key_doc = "..." }  (string keys, each value an `of`)
--   { type = "union", options = { node, node }, doc = "..." }
-- and may carry `default`.

local function type_doc(node)
  if node.doc then return node.doc end
  if node.enum then
    local e = {}
    for i, v in ipairs(node.enum) do e[i] = describe(v) end
    return "one of " .. table.concat(e, ", ")
  end
  if node.type == "integer" then
    if node.min and node.max then return string.format("an integer in [%d, %d]", node.min, node.max) end
    if node.min then return string.format("an integer >= %d", node.min) end
    return "an integer"
  end
  if node.type == "number" then return "a number" end
  if node.type == "table" then return "a table" end
  if node.type == "list" then return "a list" end
  return "a " .. node.type
end
M.type_doc = type_doc

local function found_doc(v)
  local t = type(v)
  if t == "number" then
    if math.type(v) == "float" then return "the float " .. describe(v) end
    return "the integer " .. describe(v)
  end
  if t == "string" then return describe(v) end
  if t == "nil" then return "nothing" end
  return "a " .. t
end
M.found_doc = found_doc

local check

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
  return ks
end
M.sorted_keys = sorted_keys

check = function(v, node, path, src)
  local t = node.type
  if t == "union" then
    for _, opt in ipairs(node.options) do
      local ok = pcall(check, v, opt, path, src)
      if ok then return check(v, opt, path, src) end
    end
    -- report against the option whose basic type matches, so the message is precise
    for _, opt in ipairs(node.options) do
      if (opt.type == "list" or opt.type == "table") and type(v) == "table" then return check(v, opt, path, src) end
      if opt.type == type(v) then return check(v, opt, path, src) end
    end
    field_fail(src, path, type_doc(node), found_doc(v))
  elseif t == "string" then
    if type(v) ~= "string" then field_fail(src, path, type_doc(node), found_doc(v)) end
    if node.enum then
      local ok = false
      for _, e in ipairs(node.enum) do if e == v then ok = true end end
      if not ok then field_fail(src, path, type_doc(node), found_doc(v)) end
    end
    if node.pattern and not v:match(node.pattern) then
      field_fail(src, path, node.pattern_doc or ("a string matching " .. node.pattern), found_doc(v))
    end
    if node.max_chars and #v > node.max_chars then
      field_fail(src, path, string.format("%s of at most %d characters", node.pattern_doc or "a string", node.max_chars),
        string.format("%d characters", #v))
    end
    return v
  elseif t == "boolean" then
    if type(v) ~= "boolean" then field_fail(src, path, type_doc(node), found_doc(v)) end
    return v
  elseif t == "integer" or t == "number" then
    if type(v) ~= "number" then field_fail(src, path, type_doc(node), found_doc(v)) end
    if v ~= v or v == math.huge or v == -math.huge then field_fail(src, path, "a finite " .. t, found_doc(v)) end
    if t == "integer" then
      local iv = math.tointeger(v)
      if iv == nil then
        field_fail(src, path, type_doc(node), found_doc(v) .. " (not an integer)")
      end
      v = iv
    end
    if node.enum then
      local ok = false
      for _, e in ipairs(node.enum) do if e == v then ok = true end end
      if not ok then field_fail(src, path, type_doc(node), found_doc(v)) end
    end
    if (node.min and v < node.min) or (node.max and v > node.max) then
      field_fail(src, path, type_doc(node), found_doc(v))
    end
    return v
  elseif t == "list" then
    if type(v) ~= "table" then field_fail(src, path, "a list", found_doc(v)) end
    local n = #v
    for k in pairs(v) do
      if math.type(k) ~= "integer" or k < 1 or k > n then
        field_fail(src, path, "a list (keys 1..n)", "the key " .. describe(k))
      end
    end
    if node.max_len and n > node.max_len then
      field_fail(src, path, string.format("a list of at most %d entries", node.max_len), string.format("%d entries", n))
    end
    local out = {}
    for i = 1, n do out[i] = check(v[i], node.of, string.format("%s[%d]", path, i), src) end
    return out
  elseif t == "map" then
    if type(v) ~= "table" then field_fail(src, path, "a table", found_doc(v)) end
    local out = {}
    for _, k in ipairs(sorted_keys(v)) do
      if type(k) ~= "string" or (node.key_pattern and not k:match(node.key_pattern)) then
        fail(string.format("%s: field '%s': key %s: expected %s", where(src, path), path, describe(k),
          node.key_doc or "a string"))
      end
      out[k] = check(v[k], node.of, path .. "." .. k, src)
    end
    return out
  elseif t == "table" then
    if type(v) ~= "table" then field_fail(src, path, "a table", found_doc(v)) end
    local out = {}
    for _, k in ipairs(sorted_keys(v)) do
      if type(k) ~= "string" or not node.fields[k] then
        local known = sorted_keys(node.fields)
        local sub = path == "" and tostring(k) or (path .. "." .. tostring(k))
        fail(string.format("%s: unknown field '%s': expected one of %s", where(src, sub), sub, table.concat(known, ", ")))
      end
    end
    for _, k in ipairs(sorted_keys(node.fields)) do
      local sub = path == "" and k or (path .. "." .. k)
      local child = node.fields[k]
      local cv = v[k]
      if cv == nil then
        if child.required then
          fail(string.format("%s: missing field '%s': expected %s", where(src, path ~= "" and path or nil), sub, type_doc(child)))
        end
        out[k] = child.default
      else
        out[k] = check(cv, child, sub, src)
      end
    end
    return out
  end
  error("schema: unknown node type " .. tostring(t))
end

-- Validate `fields` against the table schema `node`; returns a normalized copy with defaults.
function M.validate(fields, node, src, base)
  return check(fields, node, base or "", src)
end

return M
