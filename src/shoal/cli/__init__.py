"""The ``shoal`` command: parse, call the library, render."""
