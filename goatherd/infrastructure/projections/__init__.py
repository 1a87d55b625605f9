"""Running read models over the trace: the projection runner and its views.

``runner`` keeps each projection current over the trace's global log, its
position tracked in the same transaction as its rows; ``views`` are the SQL
views of the built-in read models. They import the domain, the projections
layer (``goatherd.projections``) and the store.
"""
