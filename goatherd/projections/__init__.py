"""The read side: pure folds from records and slices to views.

No SQL and no ``returns`` here; views are reached through abstract interfaces
that infrastructure implements.
"""

__all__: list[str] = []
