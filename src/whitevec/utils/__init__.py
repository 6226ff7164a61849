"""The ground floor: safe file writes, BLAS threads, row normalisation, whitevec's folders, progress lines.
Everything above may import these; they import nothing of whitevec's but ``errors``."""
