"""The observation vocabulary: the one contract between producers (loop, proxy, replay, serve) and sinks (the fold,
the recorder, the headless printer, telemetry, cost). Plain, serializable data; protocol-neutral."""
