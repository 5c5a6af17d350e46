"""`latency`, graded as notebooks written independently of the course's solution would be.

One real `grade` run over tests/corpus/latency: every correct notebook (each written from the seed and
the starter as a different student would) keeps every automatic point, and every honest variant of a
sample mistake (the same mistake spelled another way) loses exactly the points the sample loses.
"""

from __future__ import annotations

from tests.corpus_checks import corpus_tests
from tests.test_samples_latency import MISTAKES

(
    graded,
    test_correct_notebook_keeps_every_point,
    test_variant_loses_its_samples_points,
    test_cheat_loses_the_points_it_cheats_for,
    test_the_corpus_is_big_enough,
) = corpus_tests("latency", MISTAKES)
