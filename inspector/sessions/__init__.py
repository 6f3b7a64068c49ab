"""Layer 6, sessions: an agent loop (or a watched proxy/server) wired to its source, bus, controller and recorder.
The CLI and the dashboard build every session through these factories; restart calls the factory again."""
