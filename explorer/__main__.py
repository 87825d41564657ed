"""``python -m explorer`` runs the CLI."""

from explorer.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
