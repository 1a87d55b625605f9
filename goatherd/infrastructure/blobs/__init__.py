"""Bytes the trace addresses by digest, beside the trace tables.

``store`` holds :class:`SqlBlobStore` (snapshots and diffs, each kept once
under its address, with holders). It imports the domain and the store's
engine helpers.
"""
