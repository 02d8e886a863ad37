"""L6: small models built in code: correctness, compile time, speedup, peak memory."""
