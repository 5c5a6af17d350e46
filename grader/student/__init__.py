"""Student tools: the kit (``kit``), ``grade check`` (``selfcheck``) and ``check()`` inside a notebook
(``notebook_check``)."""
