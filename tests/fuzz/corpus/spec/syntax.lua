scale = { type = "fp32",, }
