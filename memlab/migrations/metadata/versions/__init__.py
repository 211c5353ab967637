"""Revisions of the metadata lineage."""
