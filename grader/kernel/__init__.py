"""The student's kernel: launching it (``launcher``, ``template``, ``forked``), isolating it (``sandbox``), running a
notebook in it (``session``), what runs inside (``runtime``), what crosses the boundary (``protocol``, ``values``),
asking it (``harness``), and checking its records against what the grader measures itself (``evidence``,
``integrity``)."""
