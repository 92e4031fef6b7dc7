#!/usr/bin/env python
"""Django's command-line utility for provingsite."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
    from django.core.management import execute_from_command_line

    from engine.env import ConfigError

    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:  # a bad setting or a missing device: one line, not a traceback
        sys.exit(f"provingsite: {exc}")


if __name__ == "__main__":
    main()
