"""Fakes for tests: the outside world (LLM providers, endpoints) over real HTTP."""
