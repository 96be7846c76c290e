"""What the commands compute, as typed results: plans, comparisons, stored decisions.

The layer between the command line and the core: it reads the store and the project files,
calls the statistics and the policy, and returns dataclasses. It never prints and never
imports :mod:`oloproof.cli` or :mod:`oloproof.render`; a command parses its arguments, calls
one function here, and renders what it gets back.
"""
