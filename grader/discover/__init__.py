"""Finding the work: submissions in a folder, an LMS export or a zip (``submissions``), and reading and identifying
each notebook (``notebook``)."""
