"""The local engine: the Responses API run by the gateway over a Chat Completions
upstream (translation, the agentic loop, the emitter, tool executors)."""
