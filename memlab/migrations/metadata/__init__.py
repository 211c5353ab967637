"""Alembic scripts of memlab's metadata database (see :mod:`memlab.migrations`)."""
