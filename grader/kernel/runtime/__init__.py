"""The grader's runtime inside the student's kernel.

It instruments the model API, runs the operations the grader asks for (call a student function,
describe a notebook variable, load a model) and publishes each answer as plain JSON on the channel
named in the request. Nothing here decides a grade: it reports what happened, and the grader judges.

It is written in parts, each a module that mypy checks on its own (the names one part takes from
another are imported for mypy only), and run as **one** module: :func:`source` joins the parts, in
the order of :data:`PARTS`, into one source text, which the harness sends into the notebook's kernel
and runs there as a private module (never imported from the user namespace; the integrity probe
fingerprints that one module). The parts import only the standard library at module level, so the
grader's own process runs the same text here, into this package, and shares :func:`load_model` with
the reference side.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

# In order: each part may use what the parts before it define when it is loaded, and anything at call time.
PARTS = ("base", "values", "models", "instrument", "figures", "install", "operations")
FUTURE = "from __future__ import annotations\n"


def source() -> str:
    """The runtime as one source text: the parts in order (one ``from __future__`` import, at the top)."""
    texts = [(Path(__file__).with_name(f"{part}.py")).read_text(encoding="utf-8") for part in PARTS]
    first, *rest = texts
    return "\n\n".join([first, *(text.replace(FUTURE, "", 1) for text in rest)])


exec(compile(source(), str(Path(__file__).with_name("base.py").parent / "<runtime>"), "exec"), globals())

if TYPE_CHECKING:  # what the grader's process reads of the runtime, as mypy sees it
    from grader.kernel.runtime.base import *  # noqa: F403
    from grader.kernel.runtime.figures import *  # noqa: F403
    from grader.kernel.runtime.install import *  # noqa: F403
    from grader.kernel.runtime.instrument import *  # noqa: F403
    from grader.kernel.runtime.models import *  # noqa: F403
    from grader.kernel.runtime.operations import *  # noqa: F403
    from grader.kernel.runtime.values import *  # noqa: F403
