"""goatherd's benchmark suite (not part of the unit tests).

Run ``python3 tasks.py bench`` (all scenarios) or ``python3 tasks.py bench NAME``.
Each scenario prints its figures; ``docs/benchmarks.md`` records them with the
command that produced them.
"""
