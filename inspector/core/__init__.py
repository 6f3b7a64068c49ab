"""Layer 0, contracts every layer shares: errors, redaction of secrets, formatting of durations, sizes and previews.
Standard library and orjson only."""
