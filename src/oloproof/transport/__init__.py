"""What systems, judge providers and evaluators share to reach the outside world.

- :mod:`.retry`: the retry policy and the failure types every call raises;
- :mod:`.http`: one HTTP attempt with bounded reads, failure classification and
  the one copy of secret masking;
- :mod:`.threads`: daemon worker threads with deadlines, for user code that
  may block (sync systems, custom evaluators, regular expressions);
- :mod:`.ratelimit`: the one reading of rate-limit headers (429, ``Retry-After``,
  ``retry-after-ms``, ``x-ratelimit-*``, ``anthropic-ratelimit-*``);
- :mod:`.limiter`: adaptive concurrency (AIMD on rate limits), the slots the
  engine and the judges take around each attempt when ``concurrency.adaptive``.

It sits below ``systems``, ``providers`` and ``evaluators`` and above the store
and the project loader (docs/design-notes.md, "Layers").
"""
