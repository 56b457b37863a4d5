"""The commands of ``travel-assistant``, one module each; ``cli`` dispatches.

``arguments`` builds the parser (every command's flags and help page); ``common`` holds
what they share (exit codes, expected errors, where the databases are,
the model endpoint check). A front end's logic lives in ``terminal`` or ``server``; a
command only opens what it needs and hands it over.
"""
