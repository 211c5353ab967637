"""The demos behind ``memlab demo`` / ``make demo``.

* :func:`run_mode_demo` (``memlab demo``, ``make demo``): one seeded conversation through
  the three analysis modes on the embedded default stack, a comparison table and an
  HTML report with charts (:mod:`memlab.demo._modes`);
* :func:`run_demo` (``memlab demo session``): the session-memory walk-through
  (remember, recall, read back, feedback, frames; :mod:`memlab.demo._session`).
"""

from memlab.demo._modes import DEMO_MODES, ModeDemoResult, ModeDemoSpec, format_mode_table, run_mode_demo
from memlab.demo._report import write_report
from memlab.demo._session import DEMO_QUERIES, DEMO_SESSION, DEMO_TURNS, run_demo, settings_lines

__all__ = [
    "DEMO_MODES",
    "DEMO_QUERIES",
    "DEMO_SESSION",
    "DEMO_TURNS",
    "ModeDemoResult",
    "ModeDemoSpec",
    "format_mode_table",
    "run_demo",
    "run_mode_demo",
    "settings_lines",
    "write_report",
]
