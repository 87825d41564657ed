"""``python -m explorer`` runs the CLI."""

from explorer.cli import console

if __name__ == "__main__":
    console()
