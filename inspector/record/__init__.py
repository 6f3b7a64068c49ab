"""Layer 3, records: recordings (JSON Lines) and the recorder, HAR import, replay through the agent loop, timing
analysis, and `dump` summaries of any of them."""
