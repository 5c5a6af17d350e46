"""Running a class: workers over many submissions (``runner``, ``worker_server``), skipping what is graded and
resuming (``batch``, ``gradebook``)."""
