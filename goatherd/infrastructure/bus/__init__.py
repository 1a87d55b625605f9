"""The effect bus: a transient fan-out of committed effects to subscribers.

``effect_bus`` holds :class:`EffectBus`; the store publishes into it, the
supervisor, the trace UI and ``log --follow`` read from it. It imports only
the domain.
"""
