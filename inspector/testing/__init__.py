"""Test support shipped with the package: generated SSE streams (`streamgen`), synthetic observation sequences
(`synthetic`) and the pytest plugin for harness developers."""
