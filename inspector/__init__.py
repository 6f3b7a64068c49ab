"""Stream Inspector: see what an LLM agent harness really receives and does."""

__version__ = "0.1.0"
