"""Student tools: the kit (``kit``), ``grade check`` (``selfcheck``) and ``check()`` inside a notebook
(``notebook_check``)."""

# The file at a student kit's root (kit.py writes it): ``grade`` runs from a kit where it sits beside the package.
KIT_FILE = "KIT_VERSION"
