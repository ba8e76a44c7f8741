// Benchmark entry point.
print("earmuff-bench: not yet written")
