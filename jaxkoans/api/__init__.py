"""The koan API: what a koan file imports (`__`, `todo`, `raises_exactly`, probes, the C++ build)."""

REVEAL_ENV = "JAXKOANS_REVEAL"  # "1": failures name what was raised (set by --koans-reveal)
