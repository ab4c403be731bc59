-- gen/render.lua: a small deterministic template renderer.
--
-- Templates are CUDA C with named holes `${NAME}`. A hole's value is a string without newlines
-- or an integer (printed with %d), so the rendered text keeps the template's line numbers; the
-- renderer puts a `#line 1 "templates/<file>"` directive in front of each template, so compiler
-- errors point at template lines. A hole with no value, or a value of another type, is an error.

local M = {}

function M.cint(v)
  local i = math.tointeger(v)
  if i == nil then error(string.format("render: expected an integer, got %s", tostring(v)), 2) end
  return string.format("%d", i)
end

-- An fp32 C literal that reads back exactly: integers as "448.0f", others in hex ("0x1.8p-3f").
function M.cfloat(v)
  if v ~= v then return "__int_as_float(0x7fffffff)" end
  if v == math.huge then return "__int_as_float(0x7f800000)" end
  if v == -math.huge then return "__int_as_float(0xff800000)" end
  if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d.0f", math.tointeger(v)) end
  return string.format("%af", v)
end

-- Holes are found with plain searches for "${" (a pattern gsub tried a match at every one of the
-- ~25 KB of common.cuh's characters: half of a kernel's generation time, which every disk-cache
-- hit pays to compute its key).
function M.render(file, text, params)
  local out, pos = {}, 1
  while true do
    local s = text:find("${", pos, true)
    if not s then break end
    local e = text:find("}", s + 2, true)
    local name = e and text:sub(s + 2, e - 1)
    if not name or not name:match("^[%w_]+$") then
      error(string.format("render: %s: a '${' at byte %d does not start a hole ${NAME}", file, s), 0)
    end
    local v = params[name]
    if v == nil then error(string.format("render: %s: hole ${%s} has no value", file, name), 0) end
    if type(v) == "number" then v = M.cint(v)
    elseif type(v) ~= "string" then
      error(string.format("render: %s: hole ${%s}: expected a string or integer, got %s", file, name, type(v)), 0)
    elseif v:find("\n") then
      error(string.format("render: %s: hole ${%s}: value spans lines", file, name), 0)
    end
    out[#out + 1] = text:sub(pos, s - 1)
    out[#out + 1] = v
    pos = e + 1
  end
  out[#out + 1] = text:sub(pos)
  return string.format('#line 1 "templates/%s"\n', file) .. table.concat(out)
end

return M
