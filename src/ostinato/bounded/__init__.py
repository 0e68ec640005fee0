"""Work whose cost depends on what a stranger sent, kept off the event loop and bounded.

A caller, a model or a remote server can hand the server a JSON schema, a pattern or a
document whose checking costs far more than its size suggests (a regex that backtracks
exponentially, ``uniqueItems`` over thousands of objects, a PDF built to be slow). None
of that runs on the event loop unbounded:

- ``work``: ``off_loop`` runs a function in a small pool of threads of its own under a
  time budget; ``in_process`` runs a script in a child process that is killed when its
  budget is spent (for work that holds the interpreter, like PDF parsing).
- ``patterns``: regexes from outside run in RE2, a linear-time engine; a pattern RE2
  cannot run (back-references, look-around) is refused.
- ``schemas``: a schema from outside is compiled once with every reference kept inside
  itself (nothing remote or on disk is ever read), its patterns in RE2, ``uniqueItems``
  in linear time, a size and depth budget, and a deadline checked at every keyword.
"""

from ostinato.bounded.work import BudgetExceeded, in_process, off_loop

__all__ = ["BudgetExceeded", "in_process", "off_loop"]
