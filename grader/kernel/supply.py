"""Where a grader gets its kernels: :class:`KernelSupply` forks them from a template or launches them, and keeps
the next one warm."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Mapping

from grader import scratch
from grader.errors import KernelError
from grader.kernel.sandbox import SandboxPolicy
from grader.kernel.session import KernelSession
from grader.kernel.templates import PRELOAD, SharedTemplate, TemplateAddress, TemplateClient, start_template


class KernelSupply:
    """Kernels for submissions, one each, never reused: with ``warm``, the next one is launched
    (and imports torch and transformers) while the current submission is graded.

    Each kernel gets a fresh, empty working folder; the submission's files are copied into it
    when it is taken, so a kernel can start before anyone knows which submission it will run.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        warm: bool = True,
        preload: tuple[str, ...] = PRELOAD,
        sandbox: SandboxPolicy | None = None,
        fork: bool = True,
        shared: TemplateAddress | None = None,
    ) -> None:
        self.env = dict(env)
        self.warm = warm
        self.preload = preload
        self.sandbox = sandbox
        self._next: KernelSession | None = None
        self.template: TemplateClient | None = None
        self.why_launched = why_launched(sandbox, fork)  # why kernels are launched rather than forked
        if self.why_launched is None and shared is not None:
            self.template = SharedTemplate(shared)  # the run's, started with this supply's env and preloads
        elif self.why_launched is None and sandbox is not None:
            self.template = start_template(self.env, sandbox, preload)

    def _stop_forking(self, why: str) -> None:
        """Launch this kernel and every later one: the template cannot serve (``why``)."""
        self.why_launched = why
        if self.template is not None:
            self.template.close()
            self.template = None

    def _launch(self) -> KernelSession:
        workdir = scratch.mkdtemp("work")
        if self.template is not None and not self.template.ready():
            self._stop_forking(f"the kernel template could not start: {self.template.problem}")
        if self.template is not None:
            try:
                return KernelSession(
                    workdir, self.env, preload=self.preload, sandbox=self.sandbox, template=self.template
                ).launch()
            except KernelError:
                self._stop_forking("the kernel template failed to fork a kernel")
            except BaseException:
                shutil.rmtree(workdir, ignore_errors=True)
                raise
        try:
            return KernelSession(workdir, self.env, preload=self.preload, sandbox=self.sandbox).launch()
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def take(self) -> KernelSession:
        """A launched kernel for one submission (connect it with ``with session:``): the warm one, if any; the next
        one is started by :meth:`prepare_next`."""
        session, self._next = self._next, None
        if session is None or session.launched_at is None:
            session = self._launch()
        return session

    def prepare_next(self) -> None:
        """Start the next submission's kernel now (with ``warm``), unless one is ready: a grader calls this once its
        current kernel runs, so that starting the next one does not delay the current submission's first cell."""
        if self.warm:
            self._start_next()

    def start_launching(self) -> None:
        """Launch the kernel the next :meth:`take` returns now, where kernels are launched rather than forked and
        none is started (``warm`` or not): a grader calls this before slow work of its own for a submission it will
        take a kernel for (loading the reference side), so that the kernel imports torch meanwhile rather than after
        (a self-check: about 3 s sooner done). A forked kernel starts in a tenth of a second once the template is
        ready, and forking here would make that slow work wait for the template's own imports."""
        if self.template is None:
            self._start_next()

    def _start_next(self) -> None:
        if self._next is None:
            with contextlib.suppress(KernelError):  # a failed early start costs only its time: take() launches again
                self._next = self._launch()

    def close(self) -> None:
        """Stop the kernel kept warm, if any, and remove its working folder; stop the template."""
        if self._next is not None:
            self._next.close()
            shutil.rmtree(self._next.workdir, ignore_errors=True)
            self._next = None
        if self.template is not None:
            self.template.close()
            self.template = None


def why_launched(sandbox: SandboxPolicy | None, fork: bool = True) -> str | None:
    """Why kernels are launched afresh rather than forked from a template (None: they are forked)."""
    if not fork:
        return "forking kernels was turned off"
    if sandbox is None or sandbox.isolation.namespaces == "none" or not sys.platform.startswith("linux"):
        return "forking a kernel needs the sandbox's namespaces (Linux)"
    return None
