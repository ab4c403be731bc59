-- gen/formats.lua: the schemas of element encodings and format specs, and the checks that
-- need more than one field (a layout that cannot hold its max_finite, an element the format
-- names but elements.lua lacks).

local spec = require("gen.spec")

local M = {}

local fail, where, field_fail, describe = spec.fail, spec.where, spec.field_fail, spec.describe

-------------------------------------------------------------------------------
-- elements
-------------------------------------------------------------------------------

local code_list = { type = "list", of = { type = "integer", min = 0, max = 255 }, max_len = 256 }

M.element_schema = {
  type = "table",
  fields = {
    bits          = { type = "integer", required = true, min = 2, max = 8 },
    exponent_bits = { type = "integer", required = true, min = 1, max = 8 },
    mantissa_bits = { type = "integer", required = true, min = 0, max = 7 },
    bias          = { type = "integer", required = true, min = 0, max = 127 },
    signed        = { type = "boolean", required = true },
    max_finite    = { type = "number", required = true, min = 0 },
    inf_codes     = code_list,
    nan_codes     = code_list,
    nan_encode    = { type = "integer", min = 0, max = 255 },
    subnormals    = { type = "boolean", default = true },
    hw_cvt        = {
      type = "table",
      fields = {
        ptx    = { type = "string", required = true, pattern = "^[a-z0-9]+x2$", pattern_doc = "a PTX pair type such as \"e4m3x2\"" },
        min_sm = { type = "integer", required = true, min = 50, max = 1000 },
      },
    },
  },
}

-- Value of a code under an element's layout, ignoring special codes (exact in a double).
local function layout_value(e, code)
  local mb, eb = e.mantissa_bits, e.exponent_bits
  local sign = 1
  if e.signed and (code >> (e.bits - 1)) & 1 == 1 then sign = -1 end
  local ex = (code >> mb) & ((1 << eb) - 1)
  local man = code & ((1 << mb) - 1)
  if ex == 0 and e.subnormals ~= false then
    return sign * man * 2.0 ^ (1 - e.bias - mb)
  end
  return sign * (1 + man / (1 << mb)) * 2.0 ^ (ex - e.bias)
end
M.layout_value = layout_value

local function check_element(name, e, src)
  local p = function(f) return name .. "." .. f end
  local width = (e.signed and 1 or 0) + e.exponent_bits + e.mantissa_bits
  if width ~= e.bits then
    fail(string.format("%s: element '%s': sign (%d) + exponent_bits (%d) + mantissa_bits (%d) = %d, expected bits = %d",
      where(src, p("bits")), name, e.signed and 1 or 0, e.exponent_bits, e.mantissa_bits, width, e.bits))
  end
  local ncodes = 1 << e.bits
  local special = {}
  for _, kind in ipairs({ "inf_codes", "nan_codes" }) do
    for i, c in ipairs(e[kind] or {}) do
      if c >= ncodes then
        field_fail(src, string.format("%s.%s[%d]", name, kind, i), string.format("a code below %d (%d bits)", ncodes, e.bits), describe(c))
      end
      if special[c] then
        field_fail(src, string.format("%s.%s[%d]", name, kind, i), "a code not listed twice", string.format("0x%02X again", c))
      end
      special[c] = kind
    end
  end
  e.inf_codes = e.inf_codes or {}
  e.nan_codes = e.nan_codes or {}
  if #e.nan_codes > 0 then
    if e.nan_encode == nil then
      fail(string.format("%s: element '%s' has NaN codes, so field '%s' is needed: the code written for a NaN input",
        where(src, name), name, p("nan_encode")))
    end
    if special[e.nan_encode] ~= "nan_codes" then
      field_fail(src, p("nan_encode"), "one of the element's nan_codes", string.format("0x%02X", e.nan_encode))
    end
  elseif e.nan_encode ~= nil and (e.nan_encode >= ncodes or special[e.nan_encode]) then
    field_fail(src, p("nan_encode"), string.format("a finite code below %d (the element has no NaN: the code a NaN input becomes)", ncodes),
      string.format("0x%02X", e.nan_encode))
  end
  -- the largest finite positive code must have the value max_finite
  local maxcode, maxval = nil, -1
  local half = e.signed and (ncodes >> 1) or ncodes
  for c = 0, half - 1 do
    if not special[c] then
      local v = layout_value(e, c)
      if v > maxval then maxcode, maxval = c, v end
    end
  end
  if maxval ~= e.max_finite then
    field_fail(src, p("max_finite"), string.format("%s, the value of the largest finite code 0x%02X of this layout",
      describe(maxval), maxcode or 0), describe(e.max_finite))
  end
  -- encode assumes finite codes are ordered by value: every code above maxcode must be special
  for c = maxcode + 1, half - 1 do
    if not special[c] then
      fail(string.format("%s: element '%s': code 0x%02X is above the max finite code 0x%02X but is not listed in inf_codes or nan_codes",
        where(src, name), name, c, maxcode))
    end
  end
  -- a PTX pair conversion packs codes 8 or 4 bits apart (e4m3x2, e2m1x2); other widths (e2m3x2
  -- puts each code in a byte) would need their own unpacking: not offered
  if e.hw_cvt and e.bits ~= 8 and e.bits ~= 4 then
    field_fail(src, p("hw_cvt"), string.format("nothing for a %d-bit element (hardware pair conversions are used for 8- and 4-bit elements; " ..
      "the generator finds a wider element's conversion by itself where one fits)", e.bits), "a table")
  end
  e.max_code = maxcode
  if e.nan_encode == nil then e.nan_encode = maxcode end  -- no NaN: a NaN input becomes +max
  e.name = name
  return e
end

-- Load and validate specs/elements.lua. Returns { name = element }.
function M.load_elements(file, text)
  local fields, src = spec.load_chunk(file, text)
  local out = {}
  for _, name in ipairs(spec.sorted_keys(fields)) do
    if not name:match("^[a-z][a-z0-9_]*$") then
      fail(string.format("%s: element name '%s': expected lower-case letters, digits and _", where(src, name), name))
    end
    if #name > 31 then -- the runtime's element record (runtime/fmt/bc_fmt.h) holds 31
      fail(string.format("%s: element name '%s': %d characters; expected at most 31", where(src, name), name, #name))
    end
    local e = spec.validate(fields[name], M.element_schema, src, name)
    out[name] = check_element(name, e, src)
  end
  return out
end

-------------------------------------------------------------------------------
-- format specs
-------------------------------------------------------------------------------

local scale_layout = {
  type = "table", required = true,
  fields = {
    order    = { type = "string", required = true, enum = { "rowmajor", "transposed" } },
    pad_rows = { type = "integer", default = 1, min = 1, max = 1024 },
    pad_cols = { type = "integer", default = 1, min = 1, max = 1024 },
    index    = { type = "string", default = "block", enum = { "block", "row" } },
  },
}

local function direction(layouts)
  return {
    type = "table",
    fields = {
      layout = { type = "string", required = true, enum = layouts },
      scale_layout = { type = "table", fields = scale_layout.fields },
    },
  }
end

M.format_schema = {
  type = "table",
  fields = {
    -- 63: the runtime's format record (runtime/fmt/bc_fmt.h) and kernel names (127 bytes) hold it
    name        = { type = "string", required = true, pattern = "^[a-z][a-z0-9_]*$", max_chars = 63,
                    pattern_doc = "a name of lower-case letters, digits and _ starting with a letter" },
    -- copied into the generated sources' header comment: one line
    description = { type = "string", required = true, pattern = "^[^%c]*$", max_chars = 200,
                    pattern_doc = "one line of text without control characters (it heads the generated sources)" },
    element     = { type = "string", required = true, pattern = "^[a-z][a-z0-9_]*$", pattern_doc = "an element name" },
    block       = {
      type = "union", required = true, doc = "\"tensor\" or a table { rows = N, cols = N }",
      options = {
        { type = "string", enum = { "tensor" } },
        { type = "table", fields = {
            rows = { type = "integer", required = true, min = 1, max = 1024 },
            cols = { type = "integer", required = true, min = 1, max = 1024 },
        } },
      },
    },
    scale = {
      type = "table", required = true,
      fields = {
        type      = { type = "string", required = true, pattern = "^[a-z][a-z0-9_]*$",
                      pattern_doc = "\"fp32\" or an 8-bit element of specs/elements.lua (e8m0, ue4m3)" },
        rule      = { type = "string", required = true, enum = { "amax", "rceil", "floor", "two_level" } },
        eps       = { type = "number", default = 0, min = 0 },
        pow2      = { type = "boolean", default = false },
        inf_value = { type = "string", default = "flt_max", enum = { "flt_max", "dtype_max" } },
      },
    },
    packing     = { type = "string", enum = { "low_first", "high_first" } },
    nan_policy  = { type = "string", enum = { "satfinite", "scale_nan" } },
    stochastic_rounding = { type = "boolean", default = false },
    rowwise     = direction({ "rowmajor" }),
    columnwise  = direction({ "transposed", "rowmajor" }),
  },
}

local function is_pow2(n) return n > 0 and n & (n - 1) == 0 end

-- The packing group of b-bit elements: the fewest whole bytes that hold whole elements, and how
-- many elements that is (8 bits: 1 byte, 1 element; 4: 1 byte, 2; 6: 3 bytes, 4; 2: 1 byte, 4).
-- A data row is a sequence of groups; within a group (its bytes read as a little-endian integer)
-- element k sits at bits [k b, (k + 1) b) ("low_first") or [(n - 1 - k) b, (n - k) b)
-- ("high_first"). runtime/ref/bc_ref_block.c and templates/common.cuh (bc_code_pos) follow it.
function M.gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

function M.pack_group(bits)
  local bytes = bits // M.gcd(bits, 8)  -- lcm(bits, 8) / 8
  return bytes, 8 * bytes // bits
end

-- The checks that need more than one field of a block-scaled format.
local function check_block(f, e, src, elements)
  local b = f.block
  if b.rows ~= 1 and b.rows ~= b.cols then
    fail(string.format("%s: field 'block': %dx%d blocks are not supported by this version; expected 1xN (N x 1 columnwise) or square NxN",
      where(src, "block"), b.rows, b.cols))
  end
  if not is_pow2(b.cols) or b.cols < 16 or b.cols > 128 then
    field_fail(src, "block.cols", "a power of two from 16 to 128", describe(b.cols))
  end
  local st, rule = f.scale.type, f.scale.rule
  local want
  if st == "fp32" then
    want = "amax"
  else
    local se = elements[st]
    if not se or se.bits > 8 then
      field_fail(src, "scale.type", "\"fp32\" or an element of specs/elements.lua of at most 8 bits (e8m0, ue4m3)", describe(st))
    end
    if se.signed then
      field_fail(src, "scale.type", "an unsigned element (scales are positive), such as ue4m3 or e8m0", describe(st))
    end
    f.selem = se
    want = (se.mantissa_bits == 0 and se.subnormals == false) and { "rceil", "floor" } or { "two_level" }
  end
  local ok = false
  for _, w in ipairs(type(want) == "table" and want or { want }) do ok = ok or w == rule end
  if not ok then
    field_fail(src, "scale.rule", string.format("%s for scale type %s",
      type(want) == "table" and ("\"" .. table.concat(want, "\" or \"") .. "\"") or ("\"" .. want .. "\""), st), describe(rule))
  end
  for _, d in ipairs({ "rowwise", "columnwise" }) do
    if f[d] and not f[d].scale_layout then
      fail(string.format("%s: field '%s.scale_layout' is needed by a block-scaled format: { order = \"rowmajor\" | \"transposed\", pad_rows = N, pad_cols = N }",
        where(src, d), d))
    end
    if f[d] then
      local sl = f[d].scale_layout
      sl.pad_rows = sl.pad_rows or 1
      sl.pad_cols = sl.pad_cols or 1
      sl.index = sl.index or "block"
      if sl.index == "row" and b.rows == 1 then
        field_fail(src, d .. ".scale_layout.index", "\"block\" (\"row\" repeats a 2D block's scale over its rows; this block has one row)", describe(sl.index))
      end
    end
  end
  -- packing: the elements of a data row in groups of whole bytes (M.pack_group)
  if e.bits ~= 8 and e.bits ~= 6 and e.bits ~= 4 then
    fail(string.format("%s: field 'element': %d-bit elements (%s) are not supported by the block kernels; expected an element of " ..
      "8, 6 or 4 bits (the widths their packing is built and tested for)", where(src, "element"), e.bits, e.name))
  end
  f.pack_group_bytes, f.pack_group_elems = M.pack_group(e.bits)
  if e.bits == 8 and f.packing then
    field_fail(src, "packing", "nothing for 8-bit elements (packing orders sub-byte elements)", describe(f.packing))
  end
  if e.bits < 8 then
    if not f.packing then
      fail(string.format("%s: field 'packing' is needed for %d-bit elements: \"low_first\" (element k of each group of %d elements " ..
        "in %d byte(s), read as a little-endian integer, at bits [%dk, %dk + %d)) or \"high_first\" (the group's elements in the " ..
        "opposite order)", where(src, nil), e.bits, f.pack_group_elems, f.pack_group_bytes, e.bits, e.bits, e.bits))
    end
    if f.columnwise and f.columnwise.layout ~= "transposed" then
      field_fail(src, "columnwise.layout", "\"transposed\" (sub-byte columnwise data is stored K-major)", describe(f.columnwise.layout))
    end
  end
  f.nan_policy = f.nan_policy or "satfinite"
  if f.nan_policy == "scale_nan" and f.selem and #f.selem.nan_codes == 0 then
    field_fail(src, "nan_policy", string.format("\"satfinite\": \"scale_nan\" marks a block with its scale's NaN code, and scale type %s has none",
      f.selem.name), describe(f.nan_policy))
  end
end

-- Validate a format spec against the schema and the known elements.
function M.load_format(file, text, elements)
  local fields, src = spec.load_chunk(file, text)
  local f = spec.validate(fields, M.format_schema, src)
  local e = elements[f.element]
  if not e then
    local names = spec.sorted_keys(elements)
    field_fail(src, "element", "an element of specs/elements.lua (" .. table.concat(names, ", ") .. ")", describe(f.element))
  end
  if type(f.block) == "table" then
    check_block(f, e, src, elements)
  else
    if f.scale.type ~= "fp32" or f.scale.rule ~= "amax" then
      fail(string.format("%s: per-tensor formats take scale = { type = \"fp32\", rule = \"amax\" }; found type %s, rule %s",
        where(src, "scale"), describe(f.scale.type), describe(f.scale.rule)))
    end
    if e.bits ~= 8 then
      field_fail(src, "element", "an 8-bit element for a per-tensor format", string.format("%s (%d bits)", e.name, e.bits))
    end
    for _, k in ipairs({ "packing", "stochastic_rounding", "nan_policy" }) do
      if f[k] then field_fail(src, k, "nothing for a per-tensor format (it is a block-format option)", describe(f[k])) end
    end
    for _, d in ipairs({ "rowwise", "columnwise" }) do
      if f[d] and f[d].scale_layout then
        field_fail(src, d .. ".scale_layout", "nothing for a per-tensor format (its scale is one fp32)", "a table")
      end
    end
    if f.columnwise and f.columnwise.layout ~= "transposed" then
      field_fail(src, "columnwise.layout", "\"transposed\" for a per-tensor format", describe(f.columnwise.layout))
    end
  end
  if not f.rowwise and not f.columnwise then
    fail(string.format("%s: a format needs at least one of 'rowwise' and 'columnwise'", where(src, nil)))
  end
  f.elem = e
  f.file = file
  return f
end

return M
