block = { rows = 1, cols = 12.5 }
