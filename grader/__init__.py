"""An autograder for notebooks of a course on LLM inference performance."""

from __future__ import annotations

__version__ = "0.1.0"
