"""Layer 5, the network: `serve` (the fake API), `proxy` (a recording pass-through), the fault catalogue they share
(`faults`) and the server plumbing (`server`: sockets, uvicorn, shutdown). Nothing here starts the dashboard."""
