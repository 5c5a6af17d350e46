"""``python -m grader`` runs the ``grade`` command."""

from grader.cli import main

main()
