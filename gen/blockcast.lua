-- gen/blockcast.lua: the generator's entry point, called by the C runtime (runtime/jit/bc_lua.c).
--
-- It keeps a registry of element encodings and formats, plans the kernels of each format
-- (family x input dtype x direction), and renders a kernel's CUDA C source for an arch from the
-- templates, the spec and gen/tuning/<arch>.lua. Output is deterministic: no timestamps, sorted
-- keys, integers printed with %d.
--
-- The host (C) provides `bc_host`: sha256(text) -> hex, embedded(path) -> text or nil,
-- embedded_list(prefix) -> sorted paths.

local spec = require("gen.spec")
local formats = require("gen.formats")
local render = require("gen.render")

local M = {}

M.VERSION = "0.1.0"

M.DTYPES = { "fp32", "bf16", "fp16" }
local DTYPE_CODE = { fp32 = 0, bf16 = 1, fp16 = 2 }
local DTYPE_SIZE = { fp32 = 4, bf16 = 2, fp16 = 2 }
-- bytes of one stored block scale (BC_SCALE_BYTES)
local function scale_bytes(f) return f.scale.type == "fp32" and 4 or 1 end
local DTYPE_CTYPE = { fp32 = "float", bf16 = "unsigned short", fp16 = "unsigned short" }
M.DIRECTIONS = { "row", "col", "rowcol" }

local registry = {
  elements = nil,        -- name -> element
  elements_file = nil,
  elements_hash = nil,
  formats = {},          -- name -> format
  format_order = {},     -- names in load order
  kernels = {},          -- kernel name -> descriptor
}

local function host() return assert(rawget(_G, "bc_host"), "bc_host is not set") end

-------------------------------------------------------------------------------
-- loading
-------------------------------------------------------------------------------

-- Families whose kernels also get a list variant (templates/list.cu): one launch runs the kernel
-- over many tensors, each with its own arguments and grid (runtime/multi/bc_list.c).
local LIST_FAMILIES = { amax = true, scale = true, quantize = true, quantize_thin = true, dequantize = true, swizzle = true,
                        zero = true, copy = true, shard = true }

-- the names k takes in the registry: its own, and its list variant's
local function kernel_names(k)
  if LIST_FAMILIES[k.family] or k.listable then return { k.name, k.name .. "__list" } end
  return { k.name }
end

local function add_kernel(k)
  registry.kernels[k.name] = k
  if LIST_FAMILIES[k.family] or k.listable then
    local l = {}
    for kk, v in pairs(k) do l[kk] = v end
    l.name, l.list, l.single = k.name .. "__list", true, k.name
    registry.kernels[l.name] = l
  end
end

local function plan_common()
  for _, dt in ipairs(M.DTYPES) do
    add_kernel({ name = "bc_amax__" .. dt, family = "amax", dtype = dt, template = "amax.cu", tuning = "amax" })
  end
  -- zeroes fp32 words (the amax of a list before its atomics)
  add_kernel({ name = "bc_zero", family = "zero", template = "zero.cu", tuning = "dequantize" })
  -- copies fp32 words (the all-reduced amaxes of a list back to each tensor)
  add_kernel({ name = "bc_copy32", family = "copy", template = "copy32.cu", tuning = "dequantize" })
  -- the collectives (runtime/comm): the local transport's all-reduce MAX, the all-gather's
  -- partial block amaxes, block-aligned slabs and the assembly of the gathered buffers
  add_kernel({ name = "bc_comm_max", family = "comm", template = "comm_max.cu", tuning = "dequantize" })
  add_kernel({ name = "bc_comm_place", family = "comm", template = "comm_place.cu", tuning = "dequantize" })
  -- (list variant: bc_shard_finish transposes a list of weights in one launch)
  add_kernel({ name = "bc_comm_transpose", family = "comm", template = "comm_transpose.cu", tuning = "dequantize", listable = true })
  for _, dt in ipairs(M.DTYPES) do
    add_kernel({ name = "bc_comm_bamax__" .. dt, family = "comm", dtype = dt, template = "comm_bamax.cu", tuning = "dequantize" })
    add_kernel({ name = "bc_comm_stage__" .. dt, family = "comm", dtype = dt, template = "comm_stage.cu", tuning = "dequantize" })
  end
  -- the sharded cast (runtime/comm/bc_shard.c): partial block amaxes of the cut bands, the staged
  -- slabs, the placement of a shard's codes and scales; list variants (one launch per list)
  for _, dt in ipairs(M.DTYPES) do
    add_kernel({ name = "bc_shard_bamax__" .. dt, family = "shard", dtype = dt, template = "shard_bamax.cu", tuning = "dequantize" })
    add_kernel({ name = "bc_shard_stage__" .. dt, family = "shard", dtype = dt, template = "shard_stage.cu", tuning = "dequantize" })
  end
  add_kernel({ name = "bc_shard_place", family = "shard", template = "shard_place.cu", tuning = "dequantize" })
  add_kernel({ name = "bc_shard_sctr", family = "shard", template = "shard_sctr.cu", tuning = "dequantize" })
  for _, en in ipairs(spec.sorted_keys(registry.elements)) do
    local e = registry.elements[en]
    -- an element with a fast conversion path gets a self-test (all fp32 inputs, all code pairs)
    local via = M.via_element(e, 1000)
    local nv = M.nonneg_via(e, 1000)
    if e.hw_cvt or M.f16_place(e) or via or nv then
      -- from the lowest arch where a fast encode exists (its own conversion, or the wider element's)
      local min_sm = e.hw_cvt and e.hw_cvt.min_sm or nil
      if via and (not min_sm or via.hw_cvt.min_sm < min_sm) then min_sm = via.hw_cvt.min_sm end
      if nv and not M.f16_place(e) and (not min_sm or nv.hw_cvt.min_sm < min_sm) then min_sm = nv.hw_cvt.min_sm end
      add_kernel({ name = "bc_selftest_cvt_" .. en, family = "selftest_cvt", elem = e, template = "selftest_cvt.cu",
                   tuning = "amax", min_sm = min_sm })
    end
  end
  -- and the exact reciprocal (bc_rcp_rn) against __frcp_rn
  add_kernel({ name = "bc_selftest_rcp", family = "selftest_rcp", template = "selftest_rcp.cu", tuning = "amax" })
end

function M.load_elements(file, text)
  local els = formats.load_elements(file, text)
  registry.elements = els
  registry.elements_file = file
  registry.elements_hash = host().sha256(text)
  registry.kernels = {}
  plan_common()
  for _, fname in ipairs(registry.format_order) do
    M.plan_format(registry.formats[fname])
  end
  return true
end

-- The quantize kernels of a format: input dtype x the directions it has (row, col, both);
-- template_of(dir) gives the template and tuning family.
local function plan_quantize(f, ks, template_of)
  for _, dt in ipairs(M.DTYPES) do
    for _, dir in ipairs(M.DIRECTIONS) do
      local rw, cw = dir ~= "col", dir ~= "row"
      if (not rw or f.rowwise) and (not cw or f.columnwise) then
        local template, tuning = template_of(dir)
        ks[#ks + 1] = { name = string.format("bc_quantize_%s__%s__%s", f.name, dt, dir), family = "quantize",
                        dtype = dt, dir = dir, rowwise = rw, columnwise = cw, format = f,
                        template = template, tuning = tuning }
      end
    end
  end
end

-- The kernels of a block-scaled format: quantize (row, col, rowcol) x dtype from one template
-- (quantize_block.cu), dequantize x dtype x direction (dequantize_block.cu; by row and flat), the scale swizzle.
local function plan_block_format(f)
  local n = f.name
  local ks = {}
  plan_quantize(f, ks, function() return "quantize_block.cu", "quantize_block" end)
  -- 1D blocks: one direction of a thin tensor (a few rows or columns), a team of lanes per block
  -- (quantize_thin.cu; the host picks it where the tiles would be mostly empty)
  if f.block.rows == 1 then
    for _, dt in ipairs(M.DTYPES) do
      for _, dir in ipairs({ "row", "col" }) do
        if f[dir == "row" and "rowwise" or "columnwise"] then
          ks[#ks + 1] = { name = string.format("bc_quantize_thin_%s__%s__%s", n, dt, dir), family = "quantize_thin", dtype = dt,
                          dir = dir, rowwise = dir == "row", columnwise = dir == "col", format = f,
                          template = "quantize_thin.cu", tuning = "dequantize_block" }
        end
      end
    end
  end
  -- nan_policy "scale_nan": block amaxes that keep NaN need max.NaN (sm_80)
  if f.nan_policy == "scale_nan" then
    for _, k in ipairs(ks) do k.min_sm = 80 end
  end
  for _, dt in ipairs(M.DTYPES) do
    for _, dir in ipairs({ "row", "col" }) do
      if f[dir == "row" and "rowwise" or "columnwise"] then
        -- and its companion that cuts a contiguous tensor into slots flat (rows not aligned)
        for _, flat in ipairs({ false, true }) do
          ks[#ks + 1] = { name = string.format("bc_dequantize_%s__%s__%s%s", n, dt, dir, flat and "_flat" or ""),
                          family = "dequantize", dtype = dt, dir = dir, flat = flat, format = f,
                          template = "dequantize_block.cu", tuning = "dequantize_block" }
        end
      end
    end
  end
  ks[#ks + 1] = { name = string.format("bc_swizzle_%s", n), family = "swizzle", format = f, template = "swizzle.cu",
                  tuning = "dequantize_block" }
  return ks
end

-- The kernels of one format: name, family, input dtype, direction. Per-tensor formats: the row
-- cast and the dequantize take whole vectors of aligned rows; their element-wise companions
-- (__row_elems, __elems: a row's partial last vector, misaligned launches) are separate kernels,
-- so that a launch compiles them only when it needs them.
local function plan_kernels(f)
  if type(f.block) == "table" then return plan_block_format(f) end
  local n = f.name
  local ks = {}
  plan_quantize(f, ks, function(dir)
    if dir == "row" then return "quantize_row.cu", "quantize_row" end
    return "quantize_tile.cu", "quantize_tile"
  end)
  for _, dt in ipairs(M.DTYPES) do
    if f.rowwise then
      ks[#ks + 1] = { name = string.format("bc_quantize_%s__%s__row_elems", n, dt), family = "quantize", dtype = dt,
                      dir = "row", rowwise = true, columnwise = false, format = f, template = "quantize_elems.cu",
                      tuning = "quantize_row" }
    end
    ks[#ks + 1] = { name = string.format("bc_dequantize_%s__%s", n, dt), family = "dequantize", dtype = dt,
                    format = f, template = "dequantize.cu", tuning = "dequantize" }
    ks[#ks + 1] = { name = string.format("bc_dequantize_%s__%s__elems", n, dt), family = "dequantize", dtype = dt,
                    format = f, template = "dequantize_elems.cu", tuning = "dequantize" }
  end
  ks[#ks + 1] = { name = string.format("bc_scale_%s", n), family = "scale", format = f, template = "scale.cu",
                  tuning = "dequantize" }
  ks[#ks + 1] = { name = string.format("bc_delayed_scale_%s", n), family = "delayed_scale", format = f,
                  template = "delayed_scale.cu", tuning = "dequantize" }
  return ks
end

-- A format's kernels planned and registered (f.kernels)
function M.plan_format(f, ks)
  ks = ks or plan_kernels(f)
  for _, k in ipairs(ks) do add_kernel(k) end
  f.kernels = ks
  return ks
end

-- Load and validate a format spec. Returns the format record (a table the host reads).
function M.load_format(file, text)
  if not registry.elements then spec.fail(file .. ": element encodings are not loaded (specs/elements.lua)") end
  local f = formats.load_format(file, text, registry.elements)
  f.hash = host().sha256(text)
  local old = registry.formats[f.name]
  if old then
    if old.hash == f.hash then return old end
    spec.fail(string.format("%s: format '%s' is already defined by %s with other contents; give this spec another name",
      file, f.name, old.file))
  end
  -- a kernel name another format (or the library) already has would replace its kernel: e.g. a
  -- format named thin_X gets the names of X's thin-tensor kernels (bc_quantize_thin_X__...)
  local ks = plan_kernels(f)
  for _, k in ipairs(ks) do
    for _, name in ipairs(kernel_names(k)) do
      local other = registry.kernels[name]
      if other then
        spec.fail(string.format("%s: format '%s' would have a kernel named %s, which %s already has; give this spec another name",
          file, f.name, name, other.format and string.format("format '%s' (%s)", other.format.name, other.format.file)
          or "the library"))
      end
    end
  end
  registry.formats[f.name] = f
  registry.format_order[#registry.format_order + 1] = f.name
  M.plan_format(f, ks)
  return f
end

-- Load the built-in specs embedded in the host: specs/elements.lua, then specs/*.lua.
function M.load_builtin()
  local h = host()
  local etext = h.embedded("specs/elements.lua")
  M.load_elements("specs/elements.lua", etext)
  for _, path in ipairs(h.embedded_list("specs/")) do
    if path ~= "specs/elements.lua" then M.load_format(path, h.embedded(path)) end
  end
  return registry.format_order
end

function M.format(name) return registry.formats[name] end
function M.format_names() return registry.format_order end

-------------------------------------------------------------------------------
-- arch and tuning
-------------------------------------------------------------------------------

function M.arch_sm(arch)
  local sm, suffix = tostring(arch):match("^sm_(%d+)(a?)$")
  if not sm then
    spec.fail(string.format("arch '%s': expected sm_XX or sm_XXa (e.g. sm_90, sm_100a)", tostring(arch)))
  end
  -- the floor: bf16 conversions and max.NaN in the templates, and default tiles that need more
  -- shared memory a block than sm_7x gives (gen/tuning/default.lua)
  if tonumber(sm) < 80 then
    spec.fail(string.format("arch '%s': blockcast generates kernels for sm_80 and newer; expected sm_XX or sm_XXa with XX >= 80 " ..
      "(e.g. sm_80, sm_90, sm_100a)", tostring(arch)))
  end
  return tonumber(sm), suffix == "a"
end

local tuning_cache = {}
local TUNING_SCHEMA = {
  type = "table",
  fields = {},
}
-- quantize_block_2d (optional): block quantize kernels of formats with 2D blocks of 64 rows or more
-- (their tiles are that tall, with 2D amaxes); quantize_block_4bit_row / _col (optional): block
-- quantize kernels of 4-bit elements from 16-bit inputs writing one direction only (fp32 inputs
-- need more registers). quantize_block's values serve where one is absent. quantize_thin
-- (optional): the thin-tensor kernels (quantize_thin.cu: threads, and unroll = the blocks a team
-- of lanes has in flight); dequantize_block's values serve where absent.
local OPTIONAL_FAMILIES = { quantize_block_2d = true, quantize_block_4bit_row = true, quantize_block_4bit_col = true,
                            quantize_thin = true }
local TUNING_PARAMS = {
  threads = { type = "integer", required = true, min = 32, max = 1024 },
  unroll = { type = "integer", min = 1, max = 16 },
  blocks_per_sm = { type = "integer", min = 1, max = 64 },
  tile_rows = { type = "integer", min = 8, max = 256 },
  tile_cols = { type = "integer", min = 8, max = 256 },
  col_vec = { type = "integer", enum = { 2, 4, 8, 16 } },
  min_blocks = { type = "integer", min = 1, max = 32 },
  store_cs = { type = "boolean" },
}
local TUNING_FAMILIES = { "amax", "quantize_row", "quantize_tile", "dequantize", "quantize_block", "dequantize_block",
                          "quantize_block_2d", "quantize_block_4bit_row", "quantize_block_4bit_col", "quantize_thin" }
for _, fam in ipairs(TUNING_FAMILIES) do
  TUNING_SCHEMA.fields[fam] = { type = "table", required = not OPTIONAL_FAMILIES[fam], fields = TUNING_PARAMS }
end
-- kernels (optional): entries of single kernels by name, written by `blockcast tune` (runtime/tune.c)
-- with what it measured; an entry replaces its kernel's family values (and its list variant's).
local ENTRY_FIELDS = {
  measured = { type = "table", fields = {
    us = { type = "number" }, incumbent_us = { type = "number" }, copy_pct = { type = "number" },
    shape = { type = "string" }, candidates = { type = "integer", min = 0 }, run = { type = "integer", min = 1 },
  } },
}
for k, v in pairs(TUNING_PARAMS) do ENTRY_FIELDS[k] = v end
TUNING_SCHEMA.fields.kernels = {
  type = "map", key_pattern = "^bc_[%w_]+$", key_doc = "a kernel name (see `blockcast list`)",
  of = { type = "table", fields = ENTRY_FIELDS },
}

-- A tuning table from the text of a tuning file (errors name the file and line).
local function parse_tuning(path, text)
  local fields, src = spec.load_chunk(path, text)
  local t = spec.validate(fields, TUNING_SCHEMA, src)
  -- the kernels shuffle across whole warps
  local function warps(what, e)
    if e.threads % 32 ~= 0 then
      spec.fail(string.format("%s: %s.threads = %d; expected a multiple of 32 (whole warps)", path, what, e.threads))
    end
  end
  for _, fam in ipairs(TUNING_FAMILIES) do if t[fam] then warps(fam, t[fam]) end end
  for _, name in ipairs(spec.sorted_keys(t.kernels or {})) do
    warps("kernels." .. name, t.kernels[name])
    if name:match("__list$") then
      spec.fail(string.format("%s: kernels.%s: entries name single kernels (%s); a list variant takes its kernel's entry",
        path, name, name:sub(1, -7)))
    end
  end
  t.file = path
  return t
end

function M.tuning(arch)
  M.arch_sm(arch)
  local otext, opath = host().tuning_override()
  local c = tuning_cache[arch]
  if c and c.otext == otext then return c.t end
  local path = "gen/tuning/" .. arch .. ".lua"
  local text = host().embedded(path)
  if otext then text, path = otext, opath end
  if not text then path = "gen/tuning/default.lua"; text = host().embedded(path) end
  local t = parse_tuning(path, text)
  tuning_cache[arch] = { otext = otext, t = t }
  return t
end

-------------------------------------------------------------------------------
-- kernels
-------------------------------------------------------------------------------

local function kernel(name)
  local k = registry.kernels[name]
  if not k then spec.fail(string.format("unknown kernel '%s' (see `blockcast list`)", tostring(name))) end
  return k
end

local function supported(k, arch)
  local sm = M.arch_sm(arch)
  return not k.min_sm or sm >= k.min_sm
end

-- Names of all kernels for `arch` (all archs if nil), sorted; optionally only one format's.
function M.kernel_names(arch, format_name)
  local out = {}
  for name, k in pairs(registry.kernels) do
    if (not format_name or (k.format and k.format.name == format_name) or (format_name == "" and not k.format))
       and (not arch or supported(k, arch)) then
      out[#out + 1] = name
    end
  end
  table.sort(out)
  return out
end

-- Shared memory per SM and the most one block may have (bytes), by compute capability (CUDA
-- programming guide, "Technical Specifications per Compute Capability").
local function smem_limits(sm)
  if sm == 90 or sm == 100 or sm == 103 then return { sm = 228 * 1024, block = 227 * 1024 } end
  if sm == 80 or sm == 87 then return { sm = 164 * 1024, block = 163 * 1024 } end
  if sm == 86 or sm == 89 or sm >= 110 then return { sm = 100 * 1024, block = 99 * 1024 } end
  return { sm = 48 * 1024, block = 48 * 1024 }  -- an arch not known here: the portable limit
end

-- Runs of b-bit codes the block kernels keep in 32-bit words: we elements fill wg whole words
-- (8 bits: 4 in 1; 4: 8 in 1; 6: 16 in 3), e16 elements fill whole 16-byte pieces (16, 32, 64).
function M.pack_runs(bits)
  local gcd = formats.gcd
  local wg = bits // gcd(bits, 32)
  return { wg = wg, we = 32 * wg // bits, e16 = 128 // gcd(128, bits) }
end

-- An element without a hardware conversion of its own at sm may be encoded through one that has
-- it: a signed 8-bit element v with the same mantissa bits and an exponent field at least as wide,
-- on which every magnitude code c of e (e has no Inf/NaN codes) is a finite code of value
-- value_e(c) * 2^k, k = bias_e - bias_v. Then rounding x (clamped to +-max_e) times 2^k to v's grid,
-- nearest even, gives e's code in its low bits: below max_e * 2^k, v's values are e's scaled. Both
-- checked here code by code, and all 2^32 inputs by 21-gpu-cvt-selftest. Returns v, k or nil.
function M.via_element(e, sm)
  -- (a NaN input must become +max, what the clamp and the conversion's NaN give)
  if (e.hw_cvt and sm >= e.hw_cvt.min_sm) or not e.signed or e.subnormals == false or #e.nan_codes > 0
     or #e.inf_codes > 0 or e.bits >= 8 or e.nan_encode ~= e.max_code then
    return nil
  end
  for _, vn in ipairs(spec.sorted_keys(registry.elements)) do
    local v = registry.elements[vn]
    if v.hw_cvt and sm >= v.hw_cvt.min_sm and v.bits == 8 and v.signed and v.subnormals ~= false
       and v.mantissa_bits == e.mantissa_bits and v.exponent_bits >= e.exponent_bits then
      local k, special = e.bias - v.bias, {}
      -- k <= 0: a block factor times 2^k stays exact (an e8m0 factor is at most 2^127)
      for _, c in ipairs(v.nan_codes) do special[c] = true end
      for _, c in ipairs(v.inf_codes) do special[c] = true end
      local ok = true
      for c = 0, (1 << (e.bits - 1)) - 1 do
        if special[c] or formats.layout_value(v, c) ~= formats.layout_value(e, c) * 2.0 ^ k then ok = false break end
      end
      if ok and k <= 0 then return v, k end
    end
  end
  return nil
end

-- An element with neither a hardware conversion nor a via element at sm may be encoded two at a
-- time in bf16x2 arithmetic (sm_90: fma/mul.rn.bf16x2, min.u16x2; common.cuh: bc_encode_bf16x2):
-- bf16 inputs times an e8m0 factor are one exact bf16x2 multiply (templates/quantize_block.cu:
-- BC_RAW2); other values are fp32 products narrowed by round-to-odd, which keeps every rounding
-- decision of an element with two bits fewer than bf16 (mantissa bits <= 5) whose grid and
-- midpoints sit inside bf16's normal range (the smallest midpoint 2^(-bias - mbits) >= 2^-126:
-- a product that bf16 rounds below its normals is below every midpoint, code 0 either way). As for
-- via elements, a NaN input must become +max (no Inf/NaN codes). The code is the minimum of one
-- line per binade (at most 3: exponent bits <= 2). 21-gpu-cvt-selftest proves it against the
-- generic encode for all 2^32 fp32 inputs and every bf16 pair times every e8m0 factor, for the
-- elements it lists (specs/elements.lua's; a new element's bc_selftest_cvt_NAME kernel is
-- generated, add its name there).
function M.bf16x2_encode(e, sm)
  if sm < 90 or (e.hw_cvt and sm >= e.hw_cvt.min_sm) or M.via_element(e, sm) then return false end
  return e.signed and e.subnormals ~= false and #e.nan_codes == 0 and #e.inf_codes == 0 and e.bits < 8
    and e.nan_encode == e.max_code and e.mantissa_bits >= 1 and e.mantissa_bits <= 5
    and e.exponent_bits <= 2 and e.bias >= 1 and 1 - e.bias - e.mantissa_bits >= -125 and e.max_finite < 2.0 ^ 100
end

-- Every value of the element is an fp16 value (decodes may go through cvt.rn.f16x2).
local function f16_exact(e)
  return e.mantissa_bits <= 10 and 1 - e.bias - e.mantissa_bits >= -24 and e.max_finite <= 65504
end

-- An unsigned element without a hardware conversion of its own at sm may take the one of a signed
-- element whose non-negative half it is (one bit wider, same exponent and mantissa bits and bias,
-- every code the same value, the same NaN codes in that half, the same max and NaN encode) for
-- inputs that are non-negative or NaN: a block scale from an amax (ue4m3 through e4m3). The
-- signed element's values must all be fp16 values (the decode goes through cvt.rn.f16x2).
-- 21-gpu-cvt-selftest proves encode and decode against the generic ones. Returns v or nil.
function M.nonneg_via(e, sm)
  if e.signed or (e.hw_cvt and sm >= e.hw_cvt.min_sm) or #e.inf_codes > 0 then return nil end
  for _, vn in ipairs(spec.sorted_keys(registry.elements)) do
    local v = registry.elements[vn]
    if v.hw_cvt and sm >= v.hw_cvt.min_sm and v.signed and v.bits == e.bits + 1 and v.bits == 8
       and v.mantissa_bits == e.mantissa_bits and v.exponent_bits == e.exponent_bits and v.bias == e.bias
       and v.nan_encode == e.nan_encode and v.max_code == e.max_code and (v.subnormals ~= false) == (e.subnormals ~= false)
       and f16_exact(v) then
      local vnan, enan, ok = {}, {}, true
      for _, c in ipairs(v.nan_codes) do if c < (1 << e.bits) then vnan[c] = true end end
      for _, c in ipairs(e.nan_codes) do enan[c] = true end
      for _, c in ipairs(v.inf_codes) do if c < (1 << e.bits) then ok = false end end
      for c = 0, (1 << e.bits) - 1 do
        if (vnan[c] or false) ~= (enan[c] or false) or (not enan[c] and formats.layout_value(v, c) ~= formats.layout_value(e, c)) then
          ok = false
          break
        end
      end
      if ok then return v end
    end
  end
  return nil
end

-- The tile of a block quantize kernel: the tuned tile, grown to whole blocks of every direction
-- it writes (rowwise 1xN: N columns; columnwise Nx1: N rows; 2D NxN: both).
local function block_tile(k, t)
  local b = k.format.block
  local tr, tc = t.tile_rows or 64, t.tile_cols or 64
  local need_r = (k.columnwise or b.rows > 1) and (b.rows > 1 and b.rows or b.cols) or 1
  local need_c = (k.rowwise or b.rows > 1) and b.cols or 1
  while tr % need_r ~= 0 do tr = tr * 2 end
  while tc % need_c ~= 0 do tc = tc * 2 end
  if tr < need_r then tr = need_r end
  if tc < need_c then tc = need_c end
  -- a rowwise task is a run of up to 32 elements of a tile row
  if k.rowwise then
    while tc < 32 do tc = tc * 2 end
  end
  -- a tile column's codes, and a tile row's staged codes, are whole 16-byte pieces (staged, then
  -- stored by 16 bytes): tile rows / columns a multiple of the elements of whole 16-byte pieces
  local e16 = M.pack_runs(k.format.elem.bits).e16
  if k.columnwise then
    while tr % e16 ~= 0 do tr = tr * 2 end
  end
  if k.rowwise then
    while tc % e16 ~= 0 do tc = tc * 2 end
  end
  return tr, tc
end

-- Rows of one columnwise task of a block quantize kernel (two adjacent columns each): one 32-bit
-- word of codes per column at least, more when the tile has more (column pair, row run) tasks than
-- threads.
local function block_col_rows(k, tr, tc, threads)
  local h = M.pack_runs(k.format.elem.bits).we
  while (tc // 2) * (tr // h) > threads and h < tr do h = h * 2 end
  if (tc // 2) * (tr // h) > threads then
    spec.fail(string.format("tuning quantize_block: %d threads cannot hold the %d column pairs of a %dx%d tile; " ..
      "use at least %d threads or fewer tile_cols", threads, tc // 2, tr, tc, tc // 2))
  end
  return h
end

-- The tuning entry of a kernel and where it came from: its own entry in `kernels` (a list
-- variant: its single kernel's), else its family's (block quantize: an optional family that
-- covers it, where the file has one).
local function tuning_entry(k, tune)
  local own = tune.kernels and tune.kernels[k.single or k.name]
  if own then return own, "kernels." .. (k.single or k.name) end
  if k.template == "quantize_block.cu" and k.format.block.rows >= 64 and tune.quantize_block_2d then
    return tune.quantize_block_2d, "quantize_block_2d"
  elseif k.template == "quantize_block.cu" and k.format.elem.bits == 4 and k.dir ~= "rowcol"
         and DTYPE_SIZE[k.dtype] == 2 and tune["quantize_block_4bit_" .. k.dir] then
    return tune["quantize_block_4bit_" .. k.dir], "quantize_block_4bit_" .. k.dir
  elseif k.template == "quantize_thin.cu" and tune.quantize_thin then
    return tune.quantize_thin, "quantize_thin"
  end
  return tune[k.tuning], k.tuning
end

-- Launch parameters of a kernel for an arch (from tuning entry t; nil: the kernel's own): the
-- host computes grids from these.
local function launch_of(k, arch, t)
  local name = k.name
  local vec = k.dtype and (16 // DTYPE_SIZE[k.dtype]) or 16
  if k.family == "dequantize" and not k.dir then vec = 8 end
  local L = {
    threads = t.threads, unroll = t.unroll or 1, blocks_per_sm = t.blocks_per_sm or 1,
    tile_rows = t.tile_rows or 1, tile_cols = t.tile_cols or 1, col_vec = t.col_vec or 1, vec = vec,
    min_blocks = t.min_blocks or 1, store_cs = t.store_cs and 1 or 0, smem = 0, row_staged = 0, row_smem = 0,
  }
  if k.template == "quantize_block.cu" then
    local b = k.format.block
    L.tile_rows, L.tile_cols = block_tile(k, t)
    -- the staged input tile (rows padded by 16 bytes against bank conflicts)
    local row_bytes = L.tile_cols * DTYPE_SIZE[k.dtype] + 16
    L.smem = L.tile_rows * row_bytes
    -- then the 2D block amaxes, or the columnwise partial amaxes of 1D blocks taller than a task
    -- (one column-pair word per task), rounded up to 16 bytes
    local aux = 0
    if b.rows > 1 then aux = 4 * (L.tile_rows // b.rows) * (L.tile_cols // b.cols) end
    if k.columnwise then
      L.col_rows = block_col_rows(k, L.tile_rows, L.tile_cols, L.threads)
      if b.rows == 1 and b.cols > L.col_rows then
        aux = (L.tile_cols // 2) * (L.tile_rows // L.col_rows) * 2 * DTYPE_SIZE[k.dtype]
      end
      -- then, for transposed data whose scale layout has an entry per input column (1D blocks, or
      -- 2D blocks with index = "row"), the tile's columnwise scales, staged and written along the
      -- layout (quantize_block.cu: BC_CSCALES, which this decides)
      local cw = k.format.columnwise
      if cw and cw.layout == "transposed" and (b.rows == 1 or cw.scale_layout.index == "row") then
        L.cscales = 1
        local cbr = b.rows > 1 and b.rows or b.cols  -- input rows of a columnwise block (BC_CBR)
        aux = aux + L.tile_cols * (L.tile_rows // cbr) * scale_bytes(k.format)
      end
    end
    L.smem = L.smem + (aux + 15) // 16 * 16
    -- the rowwise run (quantize_block.cu: BC_RUN_R): the elements of whole 16-byte pieces of codes,
    -- at least 32 from a 16-bit input (fewer per-run costs) and at most 32 (6-bit codes fill 16-byte
    -- pieces by 64: more would leave half the threads without a task)
    local bits = k.format.elem.bits
    local e16 = M.pack_runs(bits).e16
    L.run_r = (DTYPE_SIZE[k.dtype] <= 2 and e16 < 32) and 32 or math.min(e16, 32)
    -- runs that are not whole 16-byte pieces (6-bit: 24 bytes) are always staged and written by
    -- 16-byte pieces (BC_ROW_STAGED): stored from the lanes, each warp store of 8-byte pieces 24
    -- bytes apart touched 24 sectors for 256 bytes, and MXFP6 rowcol wrote 1.75x its bytes' sectors
    -- to L2 (H100; tests/bench/NOTES.md)
    L.row_staged = (k.rowwise and (L.run_r * bits // 8) % 16 ~= 0) and 1 or 0
    -- past this, for launches whose rowwise output rows are not 16-byte aligned (always, with
    -- row_staged), the host adds the staged codes (runtime/ops/bc_ops.c): row_smem, tile_rows rows of
    -- tile_cols * bits / 8 + 16 bytes (quantize_block.cu: BC_RSTRIDE, checked there against
    -- BC_ROW_SMEM), the one place this size is computed
    local staged = k.rowwise and L.tile_rows * (L.tile_cols * bits // 8 + 16) or 0
    L.row_smem = staged
    -- and the static shared memory the driver adds to each block: the two-level rule's factor table
    -- (quantize_block.cu: tl_tab, 2^bits + 2 floats; counted also where BC_LEAN leaves it out)
    local static = 0
    if k.format.scale.rule == "two_level" and k.format.selem and k.format.selem.bits <= 8 then
      static = 4 * ((1 << k.format.selem.bits) + 2)
    end
    local sm = M.arch_sm(arch)
    local SMEM = smem_limits(sm)
    if L.smem + staged + static > SMEM.block then
      spec.fail(string.format("kernel '%s' for %s: a %dx%d tile needs %d bytes of shared memory%s, more than a block " ..
        "may have there (%d); use smaller tile_rows / tile_cols in the tuning", name, arch, L.tile_rows, L.tile_cols,
        L.smem + staged + static, staged > 0 and string.format(" (%d of them for unaligned rowwise output)", staged) or "",
        SMEM.block))
    end
    -- no more resident blocks asked of the register allocator than shared memory admits for the
    -- common launch (aligned rows; staged ones where row_staged); 1 KiB per block is reserved by
    -- the driver
    local fit = SMEM.sm // (L.smem + (L.row_staged == 1 and staged or 0) + static + 1024)
    if fit >= 1 and L.min_blocks > fit then L.min_blocks = fit end
  end
  return L
end

function M.launch(name, arch)
  local k = kernel(name)
  return launch_of(k, arch, (tuning_entry(k, M.tuning(arch))))
end

-------------------------------------------------------------------------------
-- blockcast tune (runtime/tune.c measures; this side says what to try and writes the file)
-------------------------------------------------------------------------------

-- The candidates swept, by template: every combination of the axes' values (a field an axis does
-- not name keeps the incumbent's value). Combinations a kernel cannot take (shared memory, column
-- pairs per thread) are dropped, and those whose launch equals an earlier one's.
local TUNE_SPACE = {
  ["quantize_block.cu"] = { { "threads", { 256 }, { 512 } },
                            { "tile_rows", "tile_cols", { 64, 128 }, { 32, 128 }, { 128, 64 }, { 64, 64 }, { 128, 128 },
                              { 256, 64 } },
                            { "min_blocks", { 2 }, { 3 }, { 4 }, { 5 }, { 6 } } },
  ["dequantize_block.cu"] = { { "threads", { 256 }, { 512 } }, { "unroll", { 2 }, { 4 }, { 8 } },
                              { "blocks_per_sm", { 4 }, { 8 }, { 16 } } },
  ["quantize_row.cu"] = { { "unroll", { 1 }, { 2 }, { 4 } }, { "min_blocks", { 4 }, { 8 } } },
  ["quantize_tile.cu"] = { { "tile_rows", "tile_cols", { 128, 64 }, { 64, 64 }, { 64, 128 } }, { "col_vec", { 8 }, { 16 } },
                           { "min_blocks", { 2 }, { 4 } } },
  ["dequantize.cu"] = { { "unroll", { 1 }, { 2 }, { 4 } }, { "min_blocks", { 4 }, { 8 } } },
  ["amax.cu"] = { { "threads", { 256 }, { 512 } }, { "unroll", { 2 }, { 4 }, { 8 } }, { "blocks_per_sm", { 2 }, { 4 }, { 8 } } },
}
local PARAM_ORDER = { "threads", "unroll", "blocks_per_sm", "tile_rows", "tile_cols", "col_vec", "min_blocks", "store_cs" }

-- An entry's parameters as the body of a Lua table constructor, fields in a fixed order.
local function entry_body(t)
  local parts = {}
  for _, f in ipairs(PARAM_ORDER) do
    if t[f] ~= nil then parts[#parts + 1] = string.format("%s = %s", f, tostring(t[f])) end
  end
  return table.concat(parts, ", ")
end

-- Whether `blockcast tune` sweeps kernel `name` (a single kernel of a template with a space).
function M.tunable(name)
  local k = kernel(name)
  return not k.list and TUNE_SPACE[k.template] ~= nil
end

-- What `blockcast tune` tries for kernel `name` on arch: a text whose first line is the source of
-- the incumbent entry ("kernels.<name>" or a family name) and each further line one candidate's
-- entry body, the incumbent's first.
function M.tune_candidates(name, arch)
  local k = kernel(name)
  local space = TUNE_SPACE[k.template]
  if k.list or not space then
    spec.fail(string.format("kernel '%s' has no tuning space (blockcast tune sweeps single quantize, dequantize and " ..
      "amax kernels)", name))
  end
  local inc, source = tuning_entry(k, M.tuning(arch))
  local base = {}
  for _, f in ipairs(PARAM_ORDER) do base[f] = inc[f] end
  local lines, seen = { source }, {}
  local function try(t)
    local ok, L = pcall(launch_of, k, arch, t)
    if not ok then
      if spec.is_spec_error(L) then return end -- a candidate the kernel cannot take
      error(L, 0)
    end
    local key = {}
    for _, f in ipairs(PARAM_ORDER) do key[#key + 1] = tostring(L[f]) end
    key = table.concat(key, ",") .. "," .. tostring(L.vec)
    if seen[key] then return end
    seen[key] = true
    lines[#lines + 1] = entry_body(t)
  end
  try(base)
  local function walk(i, t)
    if i > #space then return try(t) end
    local axis = space[i]
    local nf = 0
    while type(axis[nf + 1]) == "string" do nf = nf + 1 end
    for vi = nf + 1, #axis do
      local c = {}
      for f, v in pairs(t) do c[f] = v end
      for fi = 1, nf do c[axis[fi]] = axis[vi][fi] end
      walk(i + 1, c)
    end
  end
  walk(1, base)
  return table.concat(lines, "\n")
end

-- The line that opens the section `blockcast tune` owns at the end of a tuning file.
local TUNE_MARK = "-- blockcast tune:"

local function split_tuning_text(text)
  local at = text:find("\n" .. TUNE_MARK, 1, true)
  if text:sub(1, #TUNE_MARK) == TUNE_MARK then at = 0 end
  if not at then return text, "" end
  return text:sub(1, at), text:sub(at + 1)
end

-- A tuning file `blockcast tune` can rewrite: it loads; `kernels` stands only in the tune section,
-- which holds nothing else; every entry names a kernel of the loaded formats.
function M.tune_check(path, text)
  local t = parse_tuning(path, text)
  local prefix, section = split_tuning_text(text)
  local pf = spec.load_chunk(path, prefix)
  if pf.kernels ~= nil then
    spec.fail(string.format("%s: `kernels = { ... }` stands in the hand-set part of the file; blockcast tune owns that " ..
      "table: move it into a section at the end that starts with a line %q", path, TUNE_MARK .. " ..."))
  end
  if section ~= "" then
    local sf = spec.load_chunk(path .. " (the section below " .. TUNE_MARK .. ")", section)
    for _, k in ipairs(spec.sorted_keys(sf)) do
      if k ~= "kernels" then
        spec.fail(string.format("%s: the section below %q holds only `kernels = { ... }` (blockcast tune rewrites it); " ..
          "found '%s': move it above that line", path, TUNE_MARK, k))
      end
    end
  end
  for _, name in ipairs(spec.sorted_keys(t.kernels or {})) do
    if not registry.kernels[name] then
      spec.fail(string.format("%s: kernels.%s: no such kernel (see `blockcast list`)", path, name))
    end
  end
  return true
end

-- The tuning text a candidate runs under: the file's text before its tune section, plus one entry
-- for kernel `name` with the candidate's body.
function M.tune_candidate_text(base_text, name, body)
  local prefix = split_tuning_text(base_text)
  if not prefix:match("\n$") then prefix = prefix .. "\n" end
  return string.format("%skernels = {\n  %s = { %s },\n}\n", prefix, name, body)
end

-- The tuning file after a run: base_text (read from base_path) with its tune section rewritten:
-- the earlier entries, replaced or joined by `entries` (the text of "name = { ... }," lines with
-- their measured figures), and a line for this run (`run_doc`: date, device, command).
function M.tune_render(base_path, base_text, entries, run_doc)
  M.tune_check(base_path, base_text)
  local old = parse_tuning(base_path, base_text)
  local prefix, section = split_tuning_text(base_text)
  local fields, src = spec.load_chunk("blockcast tune results", "kernels = {\n" .. entries .. "\n}\n")
  local new = spec.validate(fields, { type = "table", fields = { kernels = TUNING_SCHEMA.fields.kernels } }, src).kernels
  -- comment lines inside `kernels = { ... }` belong to the entry they stand above (those after the
  -- last entry to the table's end): kept there; the line saying which run measured an entry again
  -- after its comment is rewritten, not stacked
  local PREDATES_AT = "  -- (the comment above predates run "
  local PREDATES = PREDATES_AT .. "%d, which measured this entry again)"
  local runs, last, notes, pending, inside = {}, 0, {}, {}, false
  for line in section:gmatch("[^\n]+") do
    local n = line:match("^%-%- run (%d+):")
    if n then runs[#runs + 1] = line; last = math.max(last, tonumber(n)) end
    if inside and line:match("^%s*%-%-") then
      pending[#pending + 1] = (line:gsub("^%s*", "  "))
    elseif inside and line:match("^}") then
      inside = false
    elseif inside and line:match("^%s*[%w_]+%s*=%s*{") and line:match("^%s*([%w_]+)") ~= "measured" then
      if #pending > 0 then notes[line:match("^%s*([%w_]+)")] = pending end
      pending = {}
    elseif line:match("^kernels%s*=%s*{") then
      inside = true
    end
  end
  runs[#runs + 1] = string.format("-- run %d: %s", last + 1, run_doc)
  local merged = {}
  for name, e in pairs(old.kernels or {}) do merged[name] = e end
  for name, e in pairs(new) do
    if not registry.kernels[name] then spec.fail(string.format("blockcast tune: no kernel '%s'", name)) end
    e.measured = e.measured or {}
    e.measured.run = last + 1
    merged[name] = e
  end
  local out = { (prefix:gsub("%s+$", "")) .. "\n", TUNE_MARK ..
    " measured choices (re-run `blockcast tune` rather than editing them); an entry",
    "-- replaces its kernel's family values above and pins them (a later change of the family does not",
    "-- reach it). measured: us = the winner's median time (microseconds) at `shape`; incumbent_us = the",
    "-- time of the values the kernel had before (kept unless a candidate is faster by the run's",
    "-- --min-gain); copy_pct = the winner's bytes per second as a % of a device-to-device copy timed in",
    "-- the same run; candidates = how many ran, each bit-exact against the CPU reference first; run =",
    "-- the run below that measured it." }
  for _, r in ipairs(runs) do out[#out + 1] = r end
  out[#out + 1] = "kernels = {"
  for _, name in ipairs(spec.sorted_keys(merged)) do
    local e = merged[name]
    for _, l in ipairs(notes[name] or {}) do
      if not (new[name] and l:sub(1, #PREDATES_AT) == PREDATES_AT) then out[#out + 1] = l end
    end
    if notes[name] and new[name] then out[#out + 1] = string.format(PREDATES, last + 1) end
    local m = e.measured or {}
    local ms = {}
    for _, f in ipairs({ "us", "incumbent_us", "copy_pct" }) do
      if m[f] then ms[#ms + 1] = string.format("%s = %.1f", f, m[f]) end
    end
    if m.shape then ms[#ms + 1] = string.format("shape = %q", m.shape) end
    for _, f in ipairs({ "candidates", "run" }) do
      if m[f] then ms[#ms + 1] = string.format("%s = %d", f, m[f]) end
    end
    out[#out + 1] = string.format("  %s = { %s,\n    measured = { %s } },", name, entry_body(e), table.concat(ms, ", "))
  end
  for _, l in ipairs(pending) do out[#out + 1] = l end
  out[#out + 1] = "}"
  local text = table.concat(out, "\n") .. "\n"
  parse_tuning(base_path, text) -- what we write must load
  return text
end

-- Restate a spec table as comment lines, keys sorted.
local function restate(v, indent, out)
  for _, k in ipairs(spec.sorted_keys(v)) do
    local x = v[k]
    if type(x) == "table" then
      if #x > 0 or next(x) == nil then
        local items = {}
        for i, it in ipairs(x) do items[i] = type(it) == "number" and string.format("0x%02X", it) or tostring(it) end
        out[#out + 1] = string.format("//   %s%s = { %s }", indent, k, table.concat(items, ", "))
      else
        out[#out + 1] = string.format("//   %s%s:", indent, k)
        restate(x, indent .. "  ", out)
      end
    elseif type(x) == "number" then
      out[#out + 1] = string.format("//   %s%s = %s", indent, k, math.type(x) == "integer" and string.format("%d", x) or spec.describe(x))
    else
      out[#out + 1] = string.format("//   %s%s = %s", indent, k, tostring(x))
    end
  end
end

-- Whether decode may place an element's magnitude bits at the top of an fp16's exponent and
-- mantissa (value x 2^(bias - 15), exact): no NaN/Inf codes, subnormals like fp16's, an exponent
-- of at most 4 bits (its largest field stays finite in fp16). templates/common.cuh: bc_decode2.
function M.f16_place(e)
  return e.bits <= 8 and e.exponent_bits >= 1 and e.exponent_bits <= 4 and e.mantissa_bits <= 10
    and e.subnormals ~= false and #e.nan_codes == 0 and #e.inf_codes == 0
end

local function element_defines(e, sm, defs, prefix)
  prefix = prefix or "BC_ELEM"
  local function d(name, value) defs[#defs + 1] = string.format("#define %-28s %s", prefix .. name, value) end
  d("_BITS", render.cint(e.bits))
  d("_MBITS", render.cint(e.mantissa_bits))
  d("_BIAS", render.cint(e.bias))
  d("_SIGNED", e.signed and "1" or "0")
  d("_SUBNORMALS", e.subnormals == false and "0" or "1")
  d("_MAX_CODE", string.format("0x%02Xu", e.max_code))
  d("_MAX_FINITE", render.cfloat(e.max_finite))
  d("_HAS_NAN", #e.nan_codes > 0 and "1" or "0")
  d("_NAN_ENCODE", string.format("0x%02Xu", e.nan_encode or 0))
  local function code_test(codes)
    if #codes == 0 then return "0" end
    local parts = {}
    for i, c in ipairs(codes) do parts[i] = string.format("(c) == 0x%02Xu", c) end
    return "(" .. table.concat(parts, " || ") .. ")"
  end
  d("_IS_NAN(c)", code_test(e.nan_codes))
  d("_IS_INF(c)", code_test(e.inf_codes))
  -- an unsigned element through its signed twin's conversion, for non-negative inputs (M.nonneg_via)
  local nv = M.nonneg_via(e, sm)
  d("_NONNEG_HW", nv and "1" or "0")
  if nv then d("_NONNEG_PTX", '"' .. nv.hw_cvt.ptx .. '"') end
  if prefix ~= "BC_ELEM" then return "none" end
  local hw = e.hw_cvt and sm >= e.hw_cvt.min_sm
  defs[#defs + 1] = string.format("#define %-28s %s", "BC_ELEM_HW_CVT", hw and "1" or "0")
  -- encode through a wider element's hardware conversion (M.via_element)
  local via, vk = M.via_element(e, sm)
  defs[#defs + 1] = string.format("#define %-28s %s", "BC_ELEM_VIA", via and "1" or "0")
  if via then
    defs[#defs + 1] = string.format("#define %-28s %s", "BC_ELEM_VIA_SCALE", render.cfloat(2.0 ^ vk))
    defs[#defs + 1] = string.format("// BC_ELEM_VIA: through %s (%s), scaled by 2^%d", via.name, via.hw_cvt.ptx, vk)
  end
  -- pairs encoded in bf16x2 arithmetic (M.bf16x2_encode)
  local b2 = M.bf16x2_encode(e, sm)
  defs[#defs + 1] = string.format("#define %-28s %s", "BC_ELEM_BF16X2", b2 and "1" or "0")
  -- every value of the element is an fp16 value: decode may go through cvt.rn.f16x2.<ptx>
  defs[#defs + 1] = string.format("#define %-28s %s", "BC_ELEM_F16_EXACT", f16_exact(e) and "1" or "0")
  defs[#defs + 1] = string.format("#define %-28s %s", "BC_ELEM_F16_PLACE", M.f16_place(e) and "1" or "0")
  return hw and e.hw_cvt.ptx or via and via.hw_cvt.ptx or "none"
end

-- The CUDA C source of kernel `name` for `arch`.
function M.generate(name, arch)
  local k = kernel(name)
  local sm = M.arch_sm(arch)
  if not supported(k, arch) then
    spec.fail(string.format("kernel '%s' needs sm_%d or newer, asked for %s", name, k.min_sm, arch))
  end
  local h = host()
  local tune = M.tuning(arch)
  local L = M.launch(name, arch)
  local f = k.format
  local e = k.elem or (f and f.elem)

  local out = {}
  if f then
    out[#out + 1] = string.format("// Generated by blockcast gen %s from %s (sha256 %s) -- do not edit.", M.VERSION, f.file, f.hash)
  else
    out[#out + 1] = string.format("// Generated by blockcast gen %s from templates/%s -- do not edit.", M.VERSION, k.template)
  end
  if e then
    out[#out + 1] = string.format("// Elements: %s (sha256 %s).", registry.elements_file, registry.elements_hash)
  end
  out[#out + 1] = string.format("// Kernel %s for %s; tuning from %s (%s).", name, arch, tune.file,
    select(2, tuning_entry(k, tune)))
  if f then
    out[#out + 1] = "// Spec:"
    local shown = {}
    for kk, vv in pairs(f) do
      if kk ~= "elem" and kk ~= "kernels" and kk ~= "hash" and kk ~= "file" then shown[kk] = vv end
    end
    restate(shown, "", out)
  end
  if e then
    out[#out + 1] = string.format("// Element %s:", e.name)
    local shown = {}
    for kk, vv in pairs(e) do if kk ~= "name" then shown[kk] = vv end end
    restate(shown, "", out)
  end
  out[#out + 1] = ""

  local defs = {}
  local function d(n, v) defs[#defs + 1] = string.format("#define %-28s %s", n, v) end
  d("BC_ARCH", render.cint(sm))
  d("BC_THREADS", render.cint(L.threads))
  d("BC_UNROLL", render.cint(L.unroll))
  d("BC_VEC", render.cint(L.vec))
  d("BC_TILE_ROWS", render.cint(L.tile_rows))
  d("BC_TILE_COLS", render.cint(L.tile_cols))
  d("BC_COL_VEC", render.cint(L.col_vec))
  d("BC_MIN_BLOCKS", render.cint(L.min_blocks))
  d("BC_STORE_CS", render.cint(L.store_cs))
  local ptx = "none"
  if e then ptx = element_defines(e, sm, defs) end
  if k.dtype then
    d("BC_DTYPE", render.cint(DTYPE_CODE[k.dtype]))
    d("BC_DTYPE_T", DTYPE_CTYPE[k.dtype])
    d("BC_DTYPE_SIZE", render.cint(DTYPE_SIZE[k.dtype]))
  end
  if k.family == "quantize" or k.family == "quantize_thin" then
    d("BC_ROWWISE", k.rowwise and "1" or "0")
    d("BC_COLUMNWISE", k.columnwise and "1" or "0")
  end
  if f then
    d("BC_SCALE_EPS", render.cfloat(f.scale.eps))
    d("BC_SCALE_POW2", f.scale.pow2 and "1" or "0")
    -- per-tensor scaling: an Inf scale becomes FLT_MAX, or the input dtype's max finite value
    d("BC_SCALE_INF_VALUE", f.scale.inf_value == "flt_max" and "3.40282346638528859812e+38f" or "BC_DTYPE_MAX")
  end
  if f and type(f.block) == "table" then
    local b = f.block
    local RULES = { amax = 0, rceil = 1, floor = 2, two_level = 3 }
    d("BC_BLOCK_FORMAT", "1")
    d("BC_BR", render.cint(b.rows))
    d("BC_BC", render.cint(b.cols))
    d("BC_2D", b.rows > 1 and "1" or "0")
    d("BC_CBR", render.cint(b.rows > 1 and b.rows or b.cols))  -- rows of a columnwise block in the input
    d("BC_RULE", render.cint(RULES[f.scale.rule]))
    d("BC_SCALE_BYTES", render.cint(scale_bytes(f)))
    -- floor rule: emax of the element, floor(log2(max_finite))
    local emax = 0
    while 2.0 ^ (emax + 1) <= e.max_finite do emax = emax + 1 end
    d("BC_ELEM_EMAX", render.cint(emax))
    if f.selem then
      element_defines(f.selem, sm, defs, "BC_SELEM")
      -- two-level: S_enc = scale_max * elem_max / global_amax (2688 for ue4m3 x e2m1)
      d("BC_TWO_LEVEL_NUM", render.cfloat(f.selem.max_finite * e.max_finite))
    end
    d("BC_PACK_HIGH_FIRST", f.packing == "high_first" and "1" or "0")
    -- packing group (gen/formats.lua: pack_group) and word runs (M.pack_runs)
    local pr = M.pack_runs(e.bits)
    d("BC_PACK_GE", render.cint(f.pack_group_elems))
    d("BC_PACK_GB", render.cint(f.pack_group_bytes))
    d("BC_PACK_WE", render.cint(pr.we))
    d("BC_PACK_WG", render.cint(pr.wg))
    -- a NaN input marks its block: the scale entry is the scale type's NaN (nan_policy)
    d("BC_NAN_SCALE", f.nan_policy == "scale_nan" and "1" or "0")
    d("BC_SR_ALLOWED", f.stochastic_rounding and "1" or "0")
    d("BC_COL_TRANSPOSED", (f.columnwise and f.columnwise.layout == "transposed") and "1" or "0")
    if k.family == "quantize" then
      d("BC_TR", render.cint(L.tile_rows))
      d("BC_TC", render.cint(L.tile_cols))
      d("BC_CH", render.cint(L.col_rows or 16))
      d("BC_SMEM", render.cint(L.smem))
      if k.template == "quantize_block.cu" then
        d("BC_CSCALES", render.cint(L.cscales or 0))
        d("BC_RUN_R", render.cint(L.run_r))
        d("BC_ROW_STAGED", render.cint(L.row_staged))
        d("BC_ROW_SMEM", render.cint(L.row_smem))
      end
    end
    if k.family == "dequantize" then
      local row = k.dir == "row"
      d("BC_DEQ_ROWWISE", row and "1" or "0")
      d("BC_DQ_FLAT", k.flat and "1" or "0")
      -- the view's block: rowwise (rows, cols); columnwise 1D (1, cols), 2D (cols, rows)
      d("BC_VBR", render.cint(row and b.rows or (b.rows > 1 and b.cols or 1)))
      d("BC_VBC", render.cint(row and b.cols or (b.rows > 1 and b.rows or b.cols)))
      d("BC_DATA_IS_VIEW", (row or f.columnwise.layout == "transposed") and "1" or "0")
    end
  end
  -- the kernel's block index and grid: CUDA's own, or a list item's virtual ones (templates/list.cu)
  d("BC_BID", k.list and "bc_vbid" or "blockIdx")
  d("BC_GDIM", k.list and "bc_vgdim" or "gridDim")
  -- swizzled scale windows with an in-atom origin (common.cuh: bc_sl, the origin in the order
  -- word): the sharded cast's regions, list items of the block quantize kernels; left out
  -- elsewhere, where the origin's two additions cost registers (MXFP8 columnwise dequantize: 0 ->
  -- 44 bytes of spill, 91% -> 80% of the copy on an H200,
  -- tests/bench/results/2026-11-29-h200-swizzled-windows.md)
  d("BC_SL_WINDOW", (k.list and (k.template == "quantize_block.cu" or k.template == "quantize_thin.cu")) and "1" or "0")
  for _, l in ipairs(defs) do out[#out + 1] = l end
  out[#out + 1] = ""

  local params = { KERNEL = name, ELEM_PTX = ptx }
  local common = h.embedded("templates/common.cuh")
  out[#out + 1] = render.render("common.cuh", common, params)
  local body = h.embedded("templates/" .. k.template)
  if not body then error("generator: missing template templates/" .. k.template) end
  if not k.list then
    out[#out + 1] = render.render(k.template, body, params)
    return table.concat(out, "\n")
  end
  local lbody, item = M.listify(k.template, body)
  out[#out + 1] = render.render(k.template, lbody, params)
  params.LAUNCH_BOUNDS, params.ITEM_FIELDS, params.CALL_ARGS = item.bounds, item.fields, item.args
  -- the thin kernels' list variants loop over their virtual blocks: runtime/multi/bc_list.c caps
  -- their grid when they run on the side stream beside a larger group (list_loops() there knows
  -- them by the name bc_quantize_thin_*)
  params.LIST_LOOP = k.family == "quantize_thin" and "1" or "0"
  -- block quantize kernels' list variants have a second entry taking the items in the kernel
  -- parameters (templates/list.cu, BC_LIST_PARAMS); the runtime finds it in the module
  params.LIST_PARAMS = k.template == "quantize_block.cu" and "1" or "0"
  out[#out + 1] = render.render("list.cu", h.embedded("templates/list.cu"), params)
  return table.concat(out, "\n")
end

-- Alignment (= size, or 8 for bc_sl) of a kernel parameter's type in the list item, which the
-- host packs the same way (runtime/multi/bc_list.c: each argument at a multiple of its size).
local function param_align(file, ty)
  if ty:find("%*") then return 8 end
  local A = { i64 = 8, u64 = 8, bc_sl = 8, int = 4, float = 4, u32 = 4 }
  local a = A[(ty:gsub("^const%s+", ""))]
  if not a then
    error(string.format("generator: %s: kernel parameter type '%s' has no list packing rule (gen/blockcast.lua: param_align)", file, ty), 0)
  end
  return a
end

-- The list variant of a template: each kernel entry `extern "C" __global__ void
-- __launch_bounds__(..) ${KERNEL}(params)` becomes the device function bc_list_body(params,
-- bc_vbid, bc_vgdim) on the same lines, and the item of templates/list.cu holds the parameters
-- as struct fields (every entry of a template must have the same parameters).
function M.listify(file, text)
  local item
  local out, n = text:gsub('extern "C" __global__ void (__launch_bounds__%b())(%s*)%${KERNEL}(%b())', function(lb, ws, plist)
    local inner = plist:sub(2, -2)
    local fields, args = {}, {}
    for p in (inner .. ","):gmatch("([^,]*),") do
      p = p:gsub("__restrict__", ""):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
      local ty, nm = p:match("^(.-)%s*([%a_][%w_]*)$")
      if not ty or ty == "" then error(string.format("generator: %s: cannot read kernel parameter '%s'", file, p), 0) end
      param_align(file, ty)
      fields[#fields + 1] = ty .. " " .. nm .. ";"
      args[#args + 1] = "it." .. nm
    end
    local this = { bounds = lb, fields = table.concat(fields, " "), args = table.concat(args, ", ") }
    if item and (item.fields ~= this.fields or item.bounds ~= this.bounds) then
      error(string.format("generator: %s: its kernel entries differ in parameters or launch bounds; a list variant needs one", file), 0)
    end
    item = this
    return "static __device__ __forceinline__ void" .. ws .. "bc_list_body" .. plist:sub(1, -2) ..
           ", const uint3 bc_vbid, const uint3 bc_vgdim)"
  end)
  if n == 0 then error(string.format("generator: %s: no kernel entry for a list variant", file), 0) end
  return out, item
end

-- Descriptive record of a kernel for the host: family, dtype, direction, format.
function M.kernel_desc(name)
  local k = kernel(name)
  return { name = k.name, family = k.family, dtype = k.dtype or "", dir = k.dir or "",
           format = k.format and k.format.name or "", min_sm = k.min_sm or 0, list = k.list and 1 or 0,
           template = k.template or "", flat = k.flat and 1 or 0 }
end

return M
