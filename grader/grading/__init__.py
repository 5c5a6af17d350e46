"""Grading one submission: the course folder and its assignments (``course``), rubrics (``rubric``), the reference
side (``reference``, ``replay``) and the grader that ties a submission's run and checks together (``grader``)."""
