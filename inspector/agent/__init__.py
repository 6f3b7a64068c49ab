"""Layer 2, the agent: the loop over the official SDK, the streaming tool executor, the observations it publishes,
the conversation-history rules, pacing and the tools.

`loop` drives one `TurnStream` per attempt (layer 1) and an `executor.ToolExecutor` per attempt; `stepobs` maps each
engine step onto observations (shared with the proxy); `states` holds the loop and tool states."""
