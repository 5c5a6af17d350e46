"""Reporting: results and their files (``results``, ``output``), the HTML pages (``render``, ``templates/``) and
Gradescope's autograder (``gradescope``)."""
