"""The koan API: what a koan file imports (`__`, `todo`, `raises_exactly`, probes, the C++ build)."""
