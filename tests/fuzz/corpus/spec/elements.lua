-- Element encodings: pure data. The generator derives encode (fp32 -> code: round to nearest even,
-- saturating to +-max_finite) and decode (code -> fp32) from these fields; the CPU reference
-- (runtime/bc_ref.c) derives its own from the same fields.
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
