-- Element encodings: pure data. The generator derives encode (fp32 -> code: round to nearest even,
-- saturating to +-max_finite) and decode (code -> fp32) from these fields; the CPU reference
-- (runtime/ref/bc_ref_elem.c) derives its own from the same fields.
--
-- Fields:
--   bits, exponent_bits, mantissa_bits, bias   the layout: [sign] exponent mantissa
--   signed      whether the top bit is a sign bit
--   max_finite  largest finite value (checked against the layout)
--   inf_codes   codes that decode to +-Inf (empty: the element has no Inf)
--   nan_codes   codes that decode to NaN (empty: no NaN)
--   nan_encode  the code written for a NaN input (omitted when the element has no NaN)
--   hw_cvt      optional: PTX conversion instruction for pairs of fp32 (cvt.rn.satfinite.<ptx>.f32)
--               and the lowest SM version that has it; must give the bits of the generic path.

e4m3 = {
  bits = 8, exponent_bits = 4, mantissa_bits = 3, bias = 7, signed = true,
  max_finite = 448,
  inf_codes = {},
  nan_codes = { 0x7F, 0xFF },
  nan_encode = 0x7F,
  hw_cvt = { ptx = "e4m3x2", min_sm = 89 },
}

e5m2 = {
  bits = 8, exponent_bits = 5, mantissa_bits = 2, bias = 15, signed = true,
  max_finite = 57344,
  inf_codes = { 0x7C, 0xFC },
  nan_codes = { 0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF },
  nan_encode = 0x7F,
  hw_cvt = { ptx = "e5m2x2", min_sm = 89 },
}

-- FP4 (OCP MX / NVFP4 data): values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; no Inf, no
-- NaN. A NaN input is written as nan_encode (+6: the satfinite rule; a format with nan_policy =
-- "scale_nan" marks the whole block through its scale instead), Inf saturates to +-6. sm_100a has a hardware
-- conversion (cvt.rn.satfinite.e2m1x2.f32); it is not used until a device run proves it equal to
-- the generic path.
e2m1 = {
  bits = 4, exponent_bits = 2, mantissa_bits = 1, bias = 1, signed = true,
  max_finite = 6,
  inf_codes = {},
  nan_codes = {},
  nan_encode = 0x7,
}

-- FP6 (OCP Microscaling v1.0, MXFP6 data): no Inf, no NaN, saturating. A NaN input is written as
-- the largest finite code (+max) unless the format's nan_policy marks the block. sm_100a has
-- hardware conversions (cvt.rn.satfinite.{e3m2x2,e2m3x2}.f32, each code in a byte) that are not
-- used; on sm_89+ (sm_100a too) the generator encodes them through the e5m2 / e4m3 conversion of
-- the input scaled by 2^(bias - 15) / 2^(bias - 7), whose codes are theirs (gen/blockcast.lua:
-- via_element, proven by 21-gpu-cvt-selftest).
-- E3M2: values up to 28, subnormal step 1/16.
e3m2 = {
  bits = 6, exponent_bits = 3, mantissa_bits = 2, bias = 3, signed = true,
  max_finite = 28,
  inf_codes = {},
  nan_codes = {},
}

-- E2M3: values up to 7.5, subnormal step 1/8.
e2m3 = {
  bits = 6, exponent_bits = 2, mantissa_bits = 3, bias = 1, signed = true,
  max_finite = 7.5,
  inf_codes = {},
  nan_codes = {},
}

-- E8M0 (OCP MX block scale): 2^(code - 127), code 0 is 2^-127 (no zero, no subnormals), 0xFF NaN.
-- Encoded by the scale rules (rceil, floor), not by round-to-nearest.
e8m0 = {
  bits = 8, exponent_bits = 8, mantissa_bits = 0, bias = 127, signed = false,
  subnormals = false,
  max_finite = 2^127,
  inf_codes = {},
  nan_codes = { 0xFF },
  nan_encode = 0xFF,
}

-- Unsigned E4M3 (NVFP4 block scale): the non-negative half of e4m3, stored in a byte.
ue4m3 = {
  bits = 7, exponent_bits = 4, mantissa_bits = 3, bias = 7, signed = false,
  max_finite = 448,
  inf_codes = {},
  nan_codes = { 0x7F },
  nan_encode = 0x7F,
}
