"""Imported by the workers' fork server, first of its preloads (see :data:`grader.scale.runner.WORKER_PRELOAD`), and
nowhere else: the server is then killed the moment the run's main process dies, however it ends.

A fork server lives as long as any process holds its end of the "alive" pipe, and every worker forked from it
holds one; each worker in turn is killed when the server dies (:func:`grader.scale.runner.die_with_parent`). Without this,
a run killed with ``kill -9`` would leave the server and its workers keeping each other alive.
"""

from grader.scale.runner import die_with_parent

die_with_parent()
