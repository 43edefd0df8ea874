"""Data preparation: Wikipedia / text → sharded, masked, memory-mapped datasets."""
